// Chapter 12 on the real model: SmolLM2-135M-Instruct (chapter 08's Q4_1 GGUF) through the
// engine, greedy, with speculative decoding, token for token against the same model without it
// (generate_alone, the reference every engine run must reproduce). Chat prompts through the
// model's own template (BpeTokenizer::encode_chat): quoting a passage of chapter 08's Alice text,
// summarising it, and a free question.
//
//  - Prompt lookup (ngram, γ = 4) on the Q4_1 model: the three answers, batched in one engine,
//    are the model's own; guesses were made and accepted (so the equality is not vacuous), no
//    more accepted than made.
//  - A draft model: the target is the file's weights widened to f32 (load_model(path, f32)), the
//    draft the file's own Q4_1 matrices — the pair `generate --weights f32 --speculative draft`
//    runs: the answers are the f32 model's own, with guesses accepted.
//
// The model is installed by ./inferlab setup (CI installs it): the test fails, naming the command,
// when it is missing. About 15–30 s on the lab's 2-core machine (the f32 forward is the slow part).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/engine/drafter.h"
#include "runtime/engine/engine.h"
#include "runtime/gguf/gguf.h"
#include "runtime/model/llama_model.h"
#include "runtime/tokenizer/bpe_tokenizer.h"
#include "runtime/tokenizer/vocabulary.h"
#include "tests/07-continuous-batching/engine_fixture.h"

namespace inferlab::testing {
namespace {

using engine::EngineConfig;
using engine::EngineStats;
using engine::Request;
using engine::SpeculativeMethod;

constexpr int64_t kMaxNewTokens = 24;

// The installed model's path; a failure naming ./inferlab setup when it is missing.
std::string model_path() {
  const std::string path = INFERLAB_SMOLLM2_GGUF;
  if (!std::filesystem::exists(path))
    ADD_FAILURE() << "chapter 08's model is not installed (" << path << "): run ./inferlab setup";
  return path;
}

// Paragraph @p index (0: the chapter's title) of chapter 08's Alice text: its lines between blank
// lines.
std::string alice_paragraph(size_t index) {
  std::ifstream in(std::filesystem::path(INFERLAB_SOURCE_DIR) / "chapters/08-real-model/data/alice-chapter-1.txt");
  std::vector<std::string> paragraphs;
  std::string line, current;
  while (std::getline(in, line)) {
    if (line.empty()) {
      if (!current.empty()) paragraphs.push_back(current);
      current.clear();
    } else {
      current += (current.empty() ? "" : " ") + line;
    }
  }
  if (!current.empty()) paragraphs.push_back(current);
  if (index >= paragraphs.size()) {
    ADD_FAILURE() << "the Alice text has " << paragraphs.size() << " paragraphs, not " << index + 1;
    return {};
  }
  return paragraphs[index];
}

// One user message in SmolLM2's chat template, greedy, ending at <|im_end|> or kMaxNewTokens.
Request chat_request(const tokenizer::BpeTokenizer& tok, int64_t id, const std::string& message) {
  const std::vector<tokenizer::ChatMessage> messages = {{"user", message}};
  Request r;
  r.id = id;
  r.prompt = tok.encode_chat(messages, true);
  r.sampling.max_new_tokens = kMaxNewTokens;
  r.sampling.stop_ids = tok.end_of_generation_ids();
  return r;
}

// The prompts: quote (a passage to repeat), summarise (the same kind of passage), a free question.
std::vector<Request> prompts(const tokenizer::BpeTokenizer& tok, size_t count) {
  const std::vector<std::string> messages = {
      // The paragraph's first sentence, up to its parenthesis: "There was nothing so very
      // remarkable in that; … I shall be late!"" (a 135M model repeats a sentence, not a paragraph).
      "Repeat exactly: " + alice_paragraph(3).substr(0, alice_paragraph(3).find(" (")),
      "Summarise this passage in one sentence:\n" + alice_paragraph(2),
      "What is the capital of France?",
  };
  std::vector<Request> requests;
  for (size_t i = 0; i < count && i < messages.size(); ++i) requests.push_back(chat_request(tok, int64_t(i), messages[i]));
  return requests;
}

EngineConfig speculating(SpeculativeMethod method, const model::LlamaModel* draft) {
  EngineConfig c;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = 256;
  c.block_size = 16;
  c.num_blocks = 64;
  c.max_seq_len = 512;
  c.speculative.method = method;
  c.speculative.num_speculative_tokens = 4;
  c.speculative.draft_model = draft;
  return c;
}

// The counters of a run whose answers had input to copy: guesses were made and some accepted.
void expect_guesses_accepted(const EngineStats& s, const std::string& what) {
  EXPECT_GT(s.spec_drafts, 0) << what << ": no step with guesses";
  EXPECT_GT(s.spec_accepted_tokens, 0) << what << ": no guess accepted";
  EXPECT_LE(s.spec_accepted_tokens, s.spec_draft_tokens) << what;
  std::cout << what << ": " << s.spec_accepted_tokens << " of " << s.spec_draft_tokens << " guesses accepted in "
            << s.spec_drafts << " verification steps\n";
}

// Every answer is long enough to have had guesses to verify (the equality would be vacuous for a
// one-token answer).
void expect_real_answers(const std::map<int64_t, engine::RequestOutput>& served, const tokenizer::BpeTokenizer& tok) {
  for (const auto& [id, out] : served) {
    EXPECT_GE(out.tokens.size(), 6u) << "prompt " << id << "'s answer is " << out.tokens.size() << " tokens";
    std::cout << "  prompt " << id << ": \"" << tok.decode(out.tokens) << "\"\n";
  }
}

TEST(SmolLM2Speculative, PromptLookupGreedyTokensAreTheModelsOwn) {
  const std::string path = model_path();
  ASSERT_FALSE(::testing::Test::HasFailure());
  const tokenizer::BpeTokenizer tok(tokenizer::vocabulary_from_gguf(gguf::GgufFile::open(path)));
  const model::LlamaModel m(model::load_model(path));
  const std::vector<Request> requests = prompts(tok, 3);
  ASSERT_FALSE(::testing::Test::HasFailure());
  EngineStats stats;
  const auto served = serve(m, speculating(SpeculativeMethod::ngram, nullptr), requests, &stats);
  expect_same_tokens(m, served, alone(m, requests), "SmolLM2 Q4_1 with prompt lookup");
  expect_real_answers(served, tok);
  expect_guesses_accepted(stats, "prompt lookup");
}

TEST(SmolLM2Speculative, Q41DraftForAnF32TargetGivesTheF32ModelsTokens) {
  const std::string path = model_path();
  ASSERT_FALSE(::testing::Test::HasFailure());
  const tokenizer::BpeTokenizer tok(tokenizer::vocabulary_from_gguf(gguf::GgufFile::open(path)));
  const model::LlamaModel target(model::load_model(path, WeightFormat::f32));
  const model::LlamaModel draft(model::load_model(path));  // the file's own Q4_1 matrices
  const std::vector<Request> requests = prompts(tok, 2);
  ASSERT_FALSE(::testing::Test::HasFailure());
  EngineStats stats;
  const auto served = serve(target, speculating(SpeculativeMethod::draft, &draft), requests, &stats);
  expect_same_tokens(target, served, alone(target, requests), "SmolLM2 f32 with its Q4_1 draft");
  expect_real_answers(served, tok);
  expect_guesses_accepted(stats, "Q4_1 draft");
}

}  // namespace
}  // namespace inferlab::testing
