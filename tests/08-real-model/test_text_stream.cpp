// The pieces that put chapter 08's generated text on a terminal (tools/cli/text_stream.h,
// tools/cli/streamed_reply.h), on SmolLM2's vocabulary and model:
//  - TextStream: what becomes visible at each flush is whole UTF-8 characters, even where a
//    character's bytes are spread over several tokens; the stop ids are not written; all the
//    flushes together are the tokens' text;
//  - stream_reply: the streamed text is the decode of the engine's tokens (the stop id aside),
//    which are generate_alone()'s; a second run of the same prompt finds its blocks in the prefix
//    cache; a set interrupt flag aborts the request with the tokens so far, as Ctrl-C does in
//    `inferlab chat`.
// A missing model fails, naming ./inferlab setup.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <functional>
#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

#include "runtime/engine/engine.h"
#include "runtime/gguf/gguf.h"
#include "runtime/model/llama_model.h"
#include "runtime/tokenizer/bpe_tokenizer.h"
#include "runtime/tokenizer/utf8.h"
#include "runtime/tokenizer/vocabulary.h"
#include "tools/cli/streamed_reply.h"
#include "tools/cli/text_stream.h"

namespace inferlab {
namespace {

using tokenizer::BpeTokenizer;

const BpeTokenizer& smollm2_tokenizer() {
  static const BpeTokenizer t(tokenizer::vocabulary_from_gguf(gguf::GgufFile::open(INFERLAB_SMOLLM2_GGUF)));
  return t;
}

const model::LlamaModel& smollm2_model() {
  static const model::LlamaModel m(model::load_model(INFERLAB_SMOLLM2_GGUF));
  return m;
}

// A stream buffer that keeps what a reader would see at each flush: chunk i holds the bytes written
// between flush i − 1 and flush i. on_flush, if set, runs after each flush.
class FlushRecorder : public std::streambuf {
 public:
  std::vector<std::string> chunks;
  std::string unflushed;
  std::function<void()> on_flush;

 protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) unflushed += traits_type::to_char_type(c);
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    unflushed.append(s, size_t(n));
    return n;
  }
  int sync() override {
    chunks.push_back(std::exchange(unflushed, {}));
    if (on_flush) on_flush();
    return 0;
  }
};

std::string joined(const std::vector<std::string>& chunks) {
  std::string all;
  for (const std::string& c : chunks) all += c;
  return all;
}

class Ch08TextStream : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(INFERLAB_SMOLLM2_GGUF))
      GTEST_FAIL() << "the model " << INFERLAB_SMOLLM2_GGUF << " is not installed: run ./inferlab setup";
  }
};

TEST_F(Ch08TextStream, EveryFlushIsWholeCharactersAndTogetherTheyAreTheText) {
  const BpeTokenizer& t = smollm2_tokenizer();
  const std::string text = "Dragons 🐉 and clefs 𝄞, 龘 and 😀 — café.";
  const std::vector<int32_t> ids = t.encode(text, false);
  // The case the stream exists for: some tokens hold only part of a character, so writing each
  // token's bytes as it comes would show broken characters.
  const auto partial =
      std::count_if(ids.begin(), ids.end(), [&](int32_t id) { return !tokenizer::is_valid_utf8(t.token_bytes(id)); });
  ASSERT_GE(partial, 4) << "this text no longer splits characters across tokens: pick another";

  FlushRecorder recorder;
  std::ostream out(&recorder);
  cli::TextStream stream(t, out, {});
  for (const int32_t id : ids) stream.push(std::span(&id, 1));  // one token at a time, as decode steps give them
  stream.finish();
  ASSERT_FALSE(recorder.chunks.empty());
  for (size_t i = 0; i < recorder.chunks.size(); ++i)
    EXPECT_TRUE(tokenizer::is_valid_utf8(recorder.chunks[i])) << "flush " << i << " shows a broken character";
  EXPECT_TRUE(recorder.unflushed.empty()) << "written but never flushed: " << recorder.unflushed;
  EXPECT_EQ(joined(recorder.chunks), text);
  EXPECT_EQ(stream.text(), text);
  // Flushed as it goes, not once at the end: a flush per token that completed a character.
  EXPECT_GE(recorder.chunks.size(), ids.size() - size_t(partial));
}

TEST_F(Ch08TextStream, StopIdsAreNotWrittenAndAnUnfinishedCharacterEndsAsReplacement) {
  const BpeTokenizer& t = smollm2_tokenizer();
  std::vector<int32_t> ids = t.encode("Paris.", false);
  ids.push_back(2);  // <|im_end|>
  FlushRecorder recorder;
  std::ostream out(&recorder);
  cli::TextStream stream(t, out, t.end_of_generation_ids());
  stream.push(ids);  // several tokens in one step (a prefill's, or a delta of many)
  stream.finish();
  EXPECT_EQ(joined(recorder.chunks), "Paris.");
  EXPECT_EQ(t.decode(ids), "Paris.<|im_end|>");  // what printing the ids' bytes would show

  // The first bytes of 😀 (F0 9F 98 80), cut off by the end of the reply (an abort, a length stop).
  const std::vector<int32_t> emoji = t.encode("😀", false);
  std::vector<int32_t> cut;
  for (const uint8_t byte : {0xF0, 0x9F}) cut.push_back(t.byte_token(byte));
  ASSERT_GE(cut[0], 0);
  ASSERT_GE(cut[1], 0);
  FlushRecorder cut_recorder;
  std::ostream cut_out(&cut_recorder);
  cli::TextStream cut_stream(t, cut_out, {});
  cut_stream.push(cut);
  EXPECT_EQ(joined(cut_recorder.chunks), "") << "half a character was shown";
  cut_stream.finish();
  EXPECT_EQ(joined(cut_recorder.chunks), "\xEF\xBF\xBD");  // U+FFFD, as Python's errors="replace"
  EXPECT_THROW(cut_stream.push(std::vector<int32_t>{t.size()}), std::invalid_argument);
}

engine::EngineConfig small_engine() {
  engine::EngineConfig c;
  c.max_seq_len = 256;
  c.num_blocks = 16;
  c.max_num_seqs = 1;
  return c;
}

engine::Request chat_request(const BpeTokenizer& t, int64_t max_new_tokens) {
  engine::Request r;
  const std::vector<tokenizer::ChatMessage> messages = {{"user", "Say hello."}};
  r.prompt = t.encode_prompt(t.apply_chat_template(messages, true));
  r.sampling.max_new_tokens = max_new_tokens;
  r.sampling.stop_ids = t.end_of_generation_ids();
  return r;
}

TEST_F(Ch08TextStream, StreamReplyWritesTheEnginesTokensAndReusesTheCacheTheSecondTime) {
  const BpeTokenizer& t = smollm2_tokenizer();
  const model::LlamaModel& m = smollm2_model();
  engine::Engine engine(m, small_engine());
  const engine::Request request = chat_request(t, 48);
  const engine::RequestOutput alone = engine::generate_alone(m, request);
  ASSERT_EQ(alone.reason, engine::FinishReason::stop) << "the reply no longer ends within 48 tokens";
  ASSERT_GE(request.prompt.size(), 16u);

  for (int run = 0; run < 2; ++run) {
    FlushRecorder recorder;
    std::ostream out(&recorder);
    cli::TextStream text(t, out, request.sampling.stop_ids);
    const cli::StreamedReply reply = cli::stream_reply(engine, request, text);
    EXPECT_EQ(reply.output.tokens, alone.tokens) << "run " << run;
    EXPECT_EQ(reply.output.reason, engine::FinishReason::stop);
    const std::vector<int32_t> shown(alone.tokens.begin(), alone.tokens.end() - 1);  // less <|im_end|>
    EXPECT_EQ(joined(recorder.chunks), t.decode(shown)) << "run " << run;
    EXPECT_GT(recorder.chunks.size(), 1u) << "not streamed";
    EXPECT_EQ(reply.prompt_tokens, int64_t(request.prompt.size()));
    EXPECT_GT(reply.prefill_seconds, 0);
    EXPECT_GT(reply.decode_seconds, 0);
    const std::string summary = cli::summary_line(reply);
    EXPECT_NE(summary.find(std::to_string(alone.tokens.size()) + " generated (stop)"), std::string::npos) << summary;
    if (run == 0) {
      EXPECT_EQ(reply.reused_tokens, 0);
    } else {
      // The first run's full blocks of prompt tokens are in the prefix cache (the last prompt
      // token is always computed again: its logits give the first token).
      const int64_t full_blocks = (int64_t(request.prompt.size()) - 1) / 16;
      EXPECT_EQ(reply.reused_tokens, full_blocks * 16) << summary;
    }
  }
  EXPECT_TRUE(engine.empty());
}

TEST_F(Ch08TextStream, AnInterruptAbortsTheReplyWithTheTokensSoFar) {
  const BpeTokenizer& t = smollm2_tokenizer();
  const model::LlamaModel& m = smollm2_model();
  engine::Engine engine(m, small_engine());
  engine::Request request = chat_request(t, 40);
  request.sampling.stop_ids = {};  // the reply could only end by length or by the interrupt
  volatile std::sig_atomic_t interrupted = 0;
  FlushRecorder recorder;
  recorder.on_flush = [&] {
    if (recorder.chunks.size() == 3) interrupted = 1;  // Ctrl-C while the third piece is on screen
  };
  std::ostream out(&recorder);
  cli::TextStream text(t, out, {});
  const cli::StreamedReply reply = cli::stream_reply(engine, request, text, &interrupted);
  EXPECT_EQ(reply.output.reason, engine::FinishReason::aborted);
  EXPECT_EQ(interrupted, 0) << "the flag is cleared once handled";
  EXPECT_GE(reply.output.tokens.size(), 3u);
  EXPECT_LT(reply.output.tokens.size(), 40u);
  EXPECT_EQ(text.text(), t.decode(reply.output.tokens)) << "the partial reply, exactly as shown";
  EXPECT_NE(cli::summary_line(reply).find("generated (aborted)"), std::string::npos) << cli::summary_line(reply);
  EXPECT_TRUE(engine.empty()) << "the aborted request left the engine";
  // The engine serves the next request as usual.
  FlushRecorder next_recorder;
  std::ostream next_out(&next_recorder);
  cli::TextStream next_text(t, next_out, {});
  const cli::StreamedReply next = cli::stream_reply(engine, request, next_text, &interrupted);
  EXPECT_EQ(next.output.reason, engine::FinishReason::length);
  EXPECT_EQ(next.output.tokens, engine::generate_alone(m, request).tokens);
}

}  // namespace
}  // namespace inferlab
