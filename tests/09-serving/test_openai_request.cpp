// Reading and checking OpenAI request bodies (runtime/serving/openai_request.h): every field the server
// implements read back, defaults, null as absent, and each bad input refused with status 400 and
// an error object naming the parameter — malformed JSON, wrong types, empty or malformed
// messages, an unknown role, max_tokens ≤ 0, temperature < 0, top_p outside (0, 1], n ≠ 1,
// stream_options without stream.
#include <gtest/gtest.h>

#include <string>

#include "runtime/serving/openai_request.h"

namespace inferlab::serving {
namespace {

// The ApiError @p parse throws for @p body (a failure when none is thrown).
template <class Parse>
ApiError error_of(Parse parse, const std::string& body) {
  try {
    parse(body);
  } catch (const ApiError& error) {
    return error;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "", "");
}

void expect_invalid(const std::string& body, const std::string& param, bool chat = true) {
  const ApiError e = chat ? error_of(parse_chat_request, body) : error_of(parse_completion_request, body);
  EXPECT_EQ(e.status(), 400) << body;
  EXPECT_EQ(e.param(), param) << body << ": " << e.what();
  const Json j = e.to_json();
  ASSERT_TRUE(j.contains("error")) << j.dump();
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["message"], e.what());
  if (param.empty()) {
    EXPECT_TRUE(j["error"]["param"].is_null()) << j.dump();
  } else {
    EXPECT_EQ(j["error"]["param"], param);
  }
  EXPECT_TRUE(j["error"]["code"].is_null());
}

const std::string kMessages = R"("messages": [{"role": "user", "content": "hi"}])";

std::string chat_with(const std::string& fields) {
  return R"({"model": "smollm2", )" + kMessages + (fields.empty() ? "" : ", " + fields) + "}";
}

TEST(OpenAiRequest, ChatFieldsAreReadBack) {
  const GenerationRequest r = parse_chat_request(R"({"model": "smollm2", "messages": [
      {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello\nthere"},
      {"role": "assistant", "content": ""}, {"role": "user", "content": "again"}],
      "max_tokens": 7, "temperature": 0.5, "top_p": 0.25, "seed": 42, "stream": true,
      "stream_options": {"include_usage": true}, "n": 1, "stop": null, "user": "ignored"})");
  EXPECT_EQ(r.model, "smollm2");
  ASSERT_EQ(r.messages.size(), 4u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Hello\nthere");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.top_p, 0.25f);
  EXPECT_EQ(r.seed, 42u);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_FALSE(r.prompt_text || r.prompt_ids);
}

TEST(OpenAiRequest, StopIsAStringOrUpToFourAndIgnoreEosABoolean) {
  const GenerationRequest one = parse_chat_request(chat_with(R"("stop": "\n\n")"));
  EXPECT_EQ(one.stop, (std::vector<std::string>{"\n\n"}));
  EXPECT_FALSE(one.ignore_eos);
  const GenerationRequest four =
      parse_completion_request(R"({"model": "m", "prompt": "a", "stop": ["a", "bc", "User:", "é"], "ignore_eos": true})");
  EXPECT_EQ(four.stop, (std::vector<std::string>{"a", "bc", "User:", "é"}));
  EXPECT_TRUE(four.ignore_eos);
  EXPECT_TRUE(parse_chat_request(chat_with(R"("stop": [])")).stop.empty());
}

TEST(OpenAiRequest, CommonClientShapesAreRead) {
  // Content as text parts, the "developer" role (read as system), a prompt batch of one.
  const GenerationRequest chat = parse_chat_request(R"({"model": "m", "messages": [
      {"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}]}]})");
  ASSERT_EQ(chat.messages.size(), 2u);
  EXPECT_EQ(chat.messages[0].role, "system");
  EXPECT_EQ(chat.messages[1].content, "Hello there");
  EXPECT_EQ(parse_completion_request(R"({"model": "m", "prompt": ["hi"]})").prompt_text, "hi");
  EXPECT_EQ(parse_completion_request(R"({"model": "m", "prompt": [[5, 6]]})").prompt_ids, (std::vector<int32_t>{5, 6}));
  expect_invalid(R"({"model": "m", "prompt": ["a", "b"]})", "prompt", false);
  expect_invalid(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
                 "messages[0].content[0]");
}

TEST(OpenAiRequest, UnimplementedFieldsAreRefusedUnlessNeutral) {
  for (const char* field : {R"("echo": true)", R"("frequency_penalty": 0.5)",
                            R"("presence_penalty": -1)", R"("best_of": 3)", R"("tools": [])"}) {
    const std::string body = std::string(R"({"model": "m", "prompt": "a", )") + field + "}";
    const std::string name = std::string(field).substr(1, std::string(field).find('"', 1) - 1);
    expect_invalid(body, name, false);
  }
  EXPECT_NO_THROW(parse_completion_request(R"({"model": "m", "prompt": "a", "echo": false, "logprobs": null,
                                               "frequency_penalty": 0, "best_of": 1})"));
}

// logprobs: chat's boolean with top_logprobs, completions' count; each out of range or out of
// place refused naming itself.
TEST(OpenAiRequest, LogprobsAreReadPerEndpoint) {
  EXPECT_EQ(parse_chat_request(chat_with("")).logprobs, -1);
  EXPECT_EQ(parse_chat_request(chat_with(R"("logprobs": true)")).logprobs, 0);
  EXPECT_EQ(parse_chat_request(chat_with(R"("logprobs": true, "top_logprobs": 5)")).logprobs, 5);
  EXPECT_EQ(parse_chat_request(chat_with(R"("logprobs": false)")).logprobs, -1);
  expect_invalid(chat_with(R"("top_logprobs": 2)"), "top_logprobs");
  expect_invalid(chat_with(R"("logprobs": true, "top_logprobs": 21)"), "top_logprobs");
  expect_invalid(chat_with(R"("logprobs": true, "top_logprobs": -1)"), "top_logprobs");
  expect_invalid(chat_with(R"("logprobs": 2)"), "logprobs");
  const std::string prompt = R"({"model": "m", "prompt": "a", )";
  EXPECT_EQ(parse_completion_request(prompt + R"("logprobs": 0})").logprobs, 0);
  EXPECT_EQ(parse_completion_request(prompt + R"("logprobs": 20})").logprobs, 20);
  EXPECT_EQ(parse_completion_request(prompt + R"("logprobs": null})").logprobs, -1);
  expect_invalid(prompt + R"("logprobs": 21})", "logprobs", false);
  expect_invalid(prompt + R"("logprobs": true})", "logprobs", false);
  expect_invalid(prompt + R"("top_logprobs": 2})", "top_logprobs", false);
}

TEST(OpenAiRequest, DefaultsAndNullsAreTheApis) {
  const GenerationRequest r = parse_chat_request(chat_with(R"("temperature": null, "max_tokens": null, "seed": null)"));
  EXPECT_FALSE(r.max_tokens);
  EXPECT_FLOAT_EQ(r.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.top_p, 1.0f);
  EXPECT_FALSE(r.seed);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  // max_completion_tokens wins over the older max_tokens; temperature 0 (greedy) is allowed.
  const GenerationRequest both =
      parse_chat_request(chat_with(R"("max_tokens": 5, "max_completion_tokens": 9, "temperature": 0)"));
  EXPECT_EQ(both.max_tokens, 9);
  EXPECT_FLOAT_EQ(both.temperature, 0.0f);
  EXPECT_FLOAT_EQ(parse_chat_request(chat_with(R"("top_p": 1)")).top_p, 1.0f);
}

TEST(OpenAiRequest, CompletionPromptsAreTextOrTokenIds) {
  const GenerationRequest text = parse_completion_request(R"({"model": "m", "prompt": "Once upon"})");
  EXPECT_EQ(text.prompt_text, "Once upon");
  EXPECT_TRUE(text.messages.empty());
  const GenerationRequest ids = parse_completion_request(R"({"model": "m", "prompt": [1, 2, 49151], "max_tokens": 3})");
  ASSERT_TRUE(ids.prompt_ids);
  EXPECT_EQ(*ids.prompt_ids, (std::vector<int32_t>{1, 2, 49151}));
  EXPECT_EQ(ids.max_tokens, 3);
}

TEST(OpenAiRequest, MalformedBodiesNameNoParameter) {
  expect_invalid("", "");
  expect_invalid(R"({"model": "smollm2", "messages": [)", "");
  expect_invalid("[1, 2]", "");
  expect_invalid(R"("a string")", "");
  expect_invalid("{\"model\": \"m\", \"prompt\": \"a\"} trailing", "", false);
}

TEST(OpenAiRequest, WrongTypesNameTheParameter) {
  expect_invalid(R"({)" + kMessages + "}", "model");
  expect_invalid(R"({"model": 3, )" + kMessages + "}", "model");
  expect_invalid(chat_with(R"("max_tokens": "16")"), "max_tokens");
  expect_invalid(chat_with(R"("max_tokens": 2.5)"), "max_tokens");
  expect_invalid(chat_with(R"("max_tokens": true)"), "max_tokens");
  expect_invalid(chat_with(R"("max_completion_tokens": [1])"), "max_completion_tokens");
  expect_invalid(chat_with(R"("max_tokens": 18446744073709551615)"), "max_tokens");
  expect_invalid(chat_with(R"("temperature": "hot")"), "temperature");
  expect_invalid(chat_with(R"("top_p": false)"), "top_p");
  expect_invalid(chat_with(R"("seed": 1.5)"), "seed");
  expect_invalid(chat_with(R"("stream": "yes")"), "stream");
  expect_invalid(chat_with(R"("stream": true, "stream_options": 1)"), "stream_options");
  expect_invalid(chat_with(R"("stream": true, "stream_options": {"include_usage": 1})"),
                 "stream_options.include_usage");
  expect_invalid(R"({"model": "m", "prompt": 5})", "prompt", false);
  expect_invalid(R"({"model": "m", "prompt": ["a", "b"]})", "prompt", false);
  expect_invalid(R"({"model": "m", "prompt": [1, "b"]})", "prompt", false);
  expect_invalid(R"({"model": "m", "prompt": [1, -2]})", "prompt", false);
  expect_invalid(R"({"model": "m", "prompt": [1, 2.5]})", "prompt", false);
  expect_invalid(R"({"model": "m", "prompt": []})", "prompt", false);
  expect_invalid(R"({"model": "m", "prompt": ""})", "prompt", false);
  expect_invalid(R"({"model": "m"})", "prompt", false);
}

TEST(OpenAiRequest, BadMessagesNameTheMessage) {
  expect_invalid(R"({"model": "m"})", "messages");
  expect_invalid(R"({"model": "m", "messages": []})", "messages");
  expect_invalid(R"({"model": "m", "messages": {"role": "user"}})", "messages");
  expect_invalid(R"({"model": "m", "messages": ["hi"]})", "messages[0]");
  expect_invalid(R"({"model": "m", "messages": [{"role": "user", "content": "a"}, {"role": "robot", "content": "b"}]})",
                 "messages[1].role");
  expect_invalid(R"({"model": "m", "messages": [{"role": "", "content": "a"}]})", "messages[0].role");
  expect_invalid(R"({"model": "m", "messages": [{"content": "a"}]})", "messages[0].role");
  expect_invalid(R"({"model": "m", "messages": [{"role": "user"}]})", "messages[0].content");
  expect_invalid(R"({"model": "m", "messages": [{"role": "user", "content": 7}]})", "messages[0].content");
}

TEST(OpenAiRequest, OutOfRangeValuesNameTheParameter) {
  expect_invalid(chat_with(R"("max_tokens": 0)"), "max_tokens");
  expect_invalid(chat_with(R"("max_tokens": -3)"), "max_tokens");
  expect_invalid(chat_with(R"("max_completion_tokens": 0, "max_tokens": 5)"), "max_completion_tokens");
  expect_invalid(chat_with(R"("temperature": -0.1)"), "temperature");
  expect_invalid(chat_with(R"("top_p": 0)"), "top_p");
  expect_invalid(chat_with(R"("top_p": -1)"), "top_p");
  expect_invalid(chat_with(R"("top_p": 1.01)"), "top_p");
  expect_invalid(chat_with(R"("n": 0)"), "n");
  expect_invalid(chat_with(R"("n": 129)"), "n");
  EXPECT_EQ(parse_chat_request(chat_with(R"("n": 4)")).n, 4);
  expect_invalid(chat_with(R"("stop": "")"), "stop");
  expect_invalid(chat_with(R"("stop": ["a", ""])"), "stop");
  expect_invalid(chat_with(R"("stop": ["a", "b", "c", "d", "e"])"), "stop");
  expect_invalid(chat_with(R"("stop": 3)"), "stop");
  expect_invalid(chat_with(R"("stop": ["a", 3])"), "stop");
  expect_invalid(chat_with(R"("ignore_eos": "yes")"), "ignore_eos");
  expect_invalid(chat_with(R"("stream_options": {"include_usage": true})"), "stream_options");
  expect_invalid(R"({"model": "m", "prompt": "a", "max_tokens": 0})", "max_tokens", false);
  expect_invalid(R"({"model": "m", "prompt": "a", "temperature": -1})", "temperature", false);
  // Finite as a double but not as the float the sampler uses, or not finite at all (1e999 parses as inf).
  expect_invalid(chat_with(R"("temperature": 1e39)"), "temperature");
  expect_invalid(chat_with(R"("temperature": 1e999)"), "");  // beyond a double: refused by the parser
  expect_invalid(chat_with(R"("cache_salt": "")"), "cache_salt");
  expect_invalid(chat_with(R"("cache_salt": 7)"), "cache_salt");
}

// Nesting is limited as the parser goes: kMaxJsonDepth levels are read, one more is refused, and a
// 10,000-deep body (the review's crash: ~20 KB) is refused without building it or recursing on it.
TEST(OpenAiRequest, DeepNestingIsRefusedAsItIsParsed) {
  const auto nested = [](int depth) {  // {"model": "m", "prompt": [[…[1]…]]}: the object is depth 0
    return R"({"model": "m", "prompt": )" + std::string(size_t(depth), '[') + "1" + std::string(size_t(depth), ']') + "}";
  };
  expect_invalid(nested(kMaxJsonDepth), "", false);
  const ApiError deep = error_of(parse_completion_request, nested(10000));
  EXPECT_EQ(deep.status(), 400);
  EXPECT_NE(std::string(deep.what()).find("deep"), std::string::npos) << deep.what();
  // Below the limit the body is read: two levels are one prompt of ids in a batch of one …
  EXPECT_EQ(*parse_completion_request(nested(2)).prompt_ids, std::vector<int32_t>{1});
  // … and a deeper one is a bad prompt, named as such.
  expect_invalid(nested(kMaxJsonDepth - 1), "prompt", false);
  EXPECT_EQ(parse_completion_request(R"({"model": "m", "prompt": ["one"]})").prompt_text, "one");
  EXPECT_EQ(parse_chat_request(chat_with(R"("cache_salt": "tenant-7")")).cache_salt, "tenant-7");
}

TEST(OpenAiRequest, ErrorObjectsCarryTheirStatusTypeAndCode) {
  const ApiError e(404, "no such model", "model", "not_found_error", "model_not_found");
  EXPECT_EQ(e.status(), 404);
  EXPECT_EQ(
      e.to_json().dump(),
      R"({"error":{"message":"no such model","type":"not_found_error","param":"model","code":"model_not_found"}})");
}

}  // namespace
}  // namespace inferlab::serving
