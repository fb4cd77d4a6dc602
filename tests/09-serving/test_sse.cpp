// The SSE framing (runtime/serving/sse.h) and the OpenAI response objects (runtime/serving/openai_response.h):
// an event is exactly `data: <one line of JSON>` and a blank line whatever the text holds
// (newlines, blank lines, "data:", quotes, non-ASCII), and parses back to the value; [DONE];
// invalid UTF-8 is replaced rather than thrown; the fields of completions, chunks and the usage
// chunk as the API names them.
#include <gtest/gtest.h>

#include <string>

#include "runtime/serving/openai_response.h"
#include "runtime/serving/sse.h"

namespace inferlab::serving {
namespace {

// The JSON of one event, checking its framing.
Json event_payload(const std::string& event) {
  EXPECT_TRUE(event.starts_with("data: ")) << event;
  EXPECT_TRUE(event.ends_with("\n\n")) << event;
  const std::string payload = event.substr(6, event.size() - 8);
  EXPECT_EQ(payload.find('\n'), std::string::npos) << "a newline inside one event's data: " << event;
  EXPECT_EQ(payload.find('\r'), std::string::npos) << event;
  return Json::parse(payload);
}

TEST(Sse, AnEventIsOneDataLineAndABlankLineWhateverTheText) {
  for (const std::string text :
       {"plain", "two\nlines", "\n\ndata: [DONE]\n\n", "quote \" and \\ back", "Étoile 🚀", "\r\n", ""}) {
    const Json value{{"text", text}, {"n", 3}};
    const Json back = event_payload(sse_event(value));
    EXPECT_EQ(back, value) << text;
  }
}

TEST(Sse, DoneEndsTheStream) {
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
}

TEST(Sse, InvalidUtf8IsReplacedNotThrown) {
  const Json back = event_payload(sse_event(Json{{"text", std::string("a\xff"
                                                                      "b")}}));
  EXPECT_EQ(back["text"],
            "a\xEF\xBF\xBD"
            "b");  // U+FFFD
}

const ResponseHeader kChat{Endpoint::chat, "chatcmpl-7", 1700000000, "smollm2"};
const ResponseHeader kText{Endpoint::completions, "cmpl-7", 1700000000, "smollm2"};

TEST(OpenAiResponse, ChatCompletionHasTheApisFields) {
  const Json j =
      completion_json(kChat, "Paris.", engine::FinishReason::stop, {.prompt_tokens = 37, .completion_tokens = 3});
  EXPECT_EQ(j["id"], "chatcmpl-7");
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "smollm2");
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["message"], (Json{{"role", "assistant"}, {"content", "Paris."}}));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"], (Json{{"prompt_tokens", 37}, {"completion_tokens", 3}, {"total_tokens", 40}}));
}

TEST(OpenAiResponse, TextCompletionHasTheApisFields) {
  const Json j =
      completion_json(kText, " there", engine::FinishReason::length, {.prompt_tokens = 2, .completion_tokens = 4});
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], " there");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(j["choices"][0].contains("message"));
  EXPECT_EQ(j["usage"]["total_tokens"], 6);
}

// The two shapes of a choice's logprobs: chat's content list (bytes as integers), completions'
// parallel lists with each position's alternatives as an object and the text offsets.
TEST(OpenAiResponse, LogprobsHaveEachEndpointsShape) {
  const std::vector<TokenLogprobs> tokens = {{" Par", -0.25f, {{" Par", -0.25f}, {" the", -2.5f}}, 0},
                                             {"is", -0.5f, {{"is", -0.5f}, {"é", -1.0f}}, 4}};
  const Json chat = logprobs_json(Endpoint::chat, tokens);
  ASSERT_EQ(chat["content"].size(), 2u);
  EXPECT_EQ(chat["content"][0]["token"], " Par");
  EXPECT_FLOAT_EQ(chat["content"][0]["logprob"].get<float>(), -0.25f);
  EXPECT_EQ(chat["content"][0]["bytes"], (Json{32, 80, 97, 114}));
  EXPECT_EQ(chat["content"][1]["top_logprobs"][1]["bytes"], (Json{195, 169}));
  EXPECT_TRUE(chat["refusal"].is_null());
  const Json text = logprobs_json(Endpoint::completions, tokens);
  EXPECT_EQ(text["tokens"], (Json{" Par", "is"}));
  EXPECT_EQ(text["text_offset"], (Json{0, 4}));
  EXPECT_FLOAT_EQ(text["top_logprobs"][0][" the"].get<float>(), -2.5f);
  EXPECT_FLOAT_EQ(text["token_logprobs"][1].get<float>(), -0.5f);
  const Json with = completion_json(kText, " Paris", engine::FinishReason::length, {}, text);
  EXPECT_EQ(with["choices"][0]["logprobs"], text);
}

TEST(OpenAiResponse, ChunksCarryDeltasAndTheLastOneTheFinish) {
  const Json first = chunk_json(kChat, "assistant", "", std::nullopt);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], (Json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  const Json middle = chunk_json(kChat, std::nullopt, " Paris", std::nullopt);
  EXPECT_EQ(middle["choices"][0]["delta"], (Json{{"content", " Paris"}}));
  const Json last = chunk_json(kChat, std::nullopt, std::nullopt, engine::FinishReason::stop);
  EXPECT_EQ(last["choices"][0]["delta"], Json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(last.contains("usage"));

  const Json text = chunk_json(kText, std::nullopt, " once", std::nullopt);
  EXPECT_EQ(text["object"], "text_completion");
  EXPECT_EQ(text["choices"][0]["text"], " once");
  const Json text_last = chunk_json(kText, std::nullopt, std::nullopt, engine::FinishReason::length);
  EXPECT_EQ(text_last["choices"][0]["text"], "");
  EXPECT_EQ(text_last["choices"][0]["finish_reason"], "length");
}

TEST(OpenAiResponse, TheUsageChunkHasNoChoices) {
  const Json j = usage_chunk_json(kChat, {.prompt_tokens = 5, .completion_tokens = 8});
  EXPECT_EQ(j["object"], "chat.completion.chunk");
  EXPECT_TRUE(j["choices"].is_array() && j["choices"].empty());
  EXPECT_EQ(j["usage"]["total_tokens"], 13);
  EXPECT_EQ(j["id"], "chatcmpl-7");
}

}  // namespace
}  // namespace inferlab::serving
