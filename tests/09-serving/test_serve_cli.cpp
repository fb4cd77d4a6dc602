// `inferlab serve` as a client meets it: the built binary started on a free loopback port
// (--port 0; it prints the one it took), spoken to with cpp-httplib's client and a raw socket.
//  - /health and /v1/models;
//  - greedy chat over HTTP equals `inferlab generate --chat --prompt … ` (its text, its token
//    count from --ids, the prompt's tokens from `inferlab tokenize` of the ChatML written out
//    here), and completions equal `generate --prompt`, the prompt as text or as its token ids;
//  - streamed answers: every event framed `data: {json}\n\n`, the role first, the deltas
//    concatenating to the non-streamed text, the finish on the last choice chunk, the usage chunk
//    (include_usage) with no choices, then `data: [DONE]`;
//  - 8 concurrent streams all complete, each equal to its request alone;
//  - a client that disconnects mid-stream leaves no running or waiting request, its request
//    counted aborted and every block free;
//  - every bad input gets its status (400, 404) and OpenAI's error object naming the parameter;
//  - SIGTERM with a stream in flight, and SIGINT, exit 0.
// A missing model fails, naming ./inferlab setup.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/json.h"
#include "tests/support/run_inferlab.h"

namespace inferlab {
namespace {

using namespace std::chrono_literals;

// A running `inferlab serve`: started with its stdout on a pipe, its port read from it.
class ServerProcess {
 public:
  explicit ServerProcess(const std::vector<std::string>& extra = {}) {
    int out[2];
    if (::pipe(out) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(out[1], STDERR_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<std::string> args = {INFERLAB_EXE, "serve", "--model", "smollm2", "--port", "0"};
      args.insert(args.end(), extra.begin(), extra.end());
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(INFERLAB_EXE, argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    output_fd_ = out[0];
    const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+))");
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    std::smatch m;
    while (std::chrono::steady_clock::now() < deadline && !std::regex_search(output_, m, listening)) {
      if (read_some(500) < 0) break;  // it exited before listening
    }
    if (std::regex_search(output_, m, listening)) port_ = std::stoi(m[1]);
  }
  ~ServerProcess() {
    if (pid_ > 0 && !exit_status_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (output_fd_ >= 0) ::close(output_fd_);
  }

  int port() const { return port_; }
  const std::string& output() const { return output_; }

  // Sends @p signal and waits (at most 60 s) for the exit: its status from waitpid, or nullopt.
  std::optional<int> stop(int signal) {
    ::kill(pid_, signal);
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_status_ = status;
        while (read_some(0) > 0) {
        }
        return status;
      }
      read_some(50);
    }
    return std::nullopt;
  }

 private:
  // Reads what the server wrote within @p timeout_ms: 1 (something read), 0 (nothing yet) or
  // -1 (its output has ended).
  int read_some(int timeout_ms) {
    pollfd p{output_fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return 0;
    char buffer[4096];
    const ssize_t n = ::read(output_fd_, buffer, sizeof buffer);
    if (n <= 0) return -1;
    output_.append(buffer, size_t(n));
    return 1;
  }

  pid_t pid_ = -1;
  int output_fd_ = -1;
  int port_ = 0;
  std::string output_;
  std::optional<int> exit_status_;
};

bool model_installed() {
  return std::filesystem::exists(INFERLAB_SMOLLM2_GGUF);
}

#define REQUIRE_MODEL()                                                                              \
  ASSERT_TRUE(model_installed()) << "chapter 08's model is not installed (" << INFERLAB_SMOLLM2_GGUF \
                                 << "): run ./inferlab setup"

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The output of `inferlab <arguments>`, failing the test on a nonzero exit.
std::string inferlab_output(const std::string& arguments) {
  const testing::CommandResult r = testing::run_command(INFERLAB_EXE, arguments);
  EXPECT_EQ(r.exit_code, 0) << arguments << "\n" << r.output;
  return r.output;
}

// The text `inferlab generate --prompt …` streams: its output less the newline after the text
// and the summary line it writes on stderr after it ("[37 prompt tokens, …]").
std::string generated_text(const std::string& arguments) {
  const std::string out = inferlab_output(arguments);
  const size_t summary = out.rfind("\n[");
  EXPECT_NE(summary, std::string::npos) << "no summary line after the text: " << out;
  return summary == std::string::npos ? out : out.substr(0, summary);
}

std::vector<int> ids_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<int> out;
  for (int id; in >> id;) out.push_back(id);
  return out;
}

// What SmolLM2's template renders for one user message, written out from the model card.
std::string chatml(const std::string& user) {
  return "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
         "<|im_start|>user\n" +
         user + "<|im_end|>\n<|im_start|>assistant\n";
}

// The events of a streamed body: each `data: …` payload, checking the framing.
std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    if (end == std::string::npos) {
      ADD_FAILURE() << "an event without its blank line: " << body.substr(at);
      break;
    }
    const std::string event = body.substr(at, end - at);
    EXPECT_TRUE(event.starts_with("data: ")) << event;
    EXPECT_EQ(event.find('\n'), std::string::npos) << "one line per event: " << event;
    out.push_back(event.substr(6));
    at = end + 2;
  }
  return out;
}

// What a streamed answer added up to.
struct Streamed {
  std::string text;
  std::string finish_reason;
  std::optional<Json> usage;
  bool done = false;
};

Streamed read_stream(const std::string& body, bool chat) {
  Streamed s;
  const std::vector<std::string> payloads = sse_payloads(body);
  for (size_t i = 0; i < payloads.size(); ++i) {
    if (payloads[i] == "[DONE]") {
      EXPECT_EQ(i + 1, payloads.size()) << "[DONE] is the last event";
      s.done = true;
      continue;
    }
    const Json chunk = Json::parse(payloads[i]);
    EXPECT_EQ(chunk["object"], chat ? "chat.completion.chunk" : "text_completion");
    if (chunk["choices"].empty()) {
      EXPECT_TRUE(chunk.contains("usage")) << "a chunk without choices is the usage chunk";
      s.usage = chunk["usage"];
      continue;
    }
    EXPECT_TRUE(s.finish_reason.empty()) << "a choice chunk after the finish: " << payloads[i];
    const Json& choice = chunk["choices"][0];
    if (chat) {
      if (i == 0) {
        EXPECT_EQ(choice["delta"].value("role", ""), "assistant") << "the first chunk carries the role";
      }
      s.text += choice["delta"].value("content", "");
    } else {
      s.text += choice.value("text", "");
    }
    if (!choice["finish_reason"].is_null()) s.finish_reason = choice["finish_reason"];
  }
  return s;
}

Json chat_body(const std::string& user, int max_tokens, bool stream = false) {
  Json body{{"model", "smollm2"},
            {"messages", Json::array({Json{{"role", "user"}, {"content", user}}})},
            {"max_tokens", max_tokens},
            {"temperature", 0}};
  if (stream) {
    body["stream"] = true;
    body["stream_options"] = Json{{"include_usage", true}};
  }
  return body;
}

// One server for the tests that do not stop it.
class Serve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (model_installed()) server_ = new ServerProcess({"--max-seqs", "8"});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    REQUIRE_MODEL();
    ASSERT_GT(server_->port(), 0) << "the server did not say where it listens:\n" << server_->output();
  }
  static httplib::Client client() {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(120, 0);
    return c;
  }
  static httplib::Result post(const std::string& path, const Json& body) {
    return client().Post(path.c_str(), body.dump(), "application/json");
  }
  static Json health() {
    const httplib::Result r = client().Get("/health");
    EXPECT_TRUE(r && r->status == 200);
    return r ? Json::parse(r->body) : Json();
  }
  static ServerProcess* server_;
};
ServerProcess* Serve::server_ = nullptr;

TEST_F(Serve, HealthAndModels) {
  const Json h = health();
  EXPECT_EQ(h["status"], "ok");
  EXPECT_EQ(h["num_blocks"], 256);
  const httplib::Result r = client().Get("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const Json models = Json::parse(r->body);
  EXPECT_EQ(models["object"], "list");
  ASSERT_EQ(models["data"].size(), 1u);
  EXPECT_EQ(models["data"][0]["id"], "smollm2");
  EXPECT_EQ(models["data"][0]["object"], "model");
  // One model by its id (the openai client's models.retrieve()), and an unknown one.
  const httplib::Result one = client().Get("/v1/models/smollm2");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->status, 200);
  EXPECT_EQ(Json::parse(one->body), models["data"][0]);
  const httplib::Result other = client().Get("/v1/models/gpt-4");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  EXPECT_EQ(Json::parse(other->body)["error"]["param"], "model");
  // The engine's settings, as `generate --trace --out` writes them.
  EXPECT_EQ(h["config"]["num_blocks"], 256);
  EXPECT_EQ(h["config"]["max_num_seqs"], 8);
  EXPECT_EQ(h["config"]["kv_format"], "fp32");
}

TEST_F(Serve, GreedyChatEqualsGenerateAndStreamsTheSameText) {
  const std::string question = "What is the capital of France?";
  constexpr int kMaxTokens = 24;
  const httplib::Result r = post("/v1/chat/completions", chat_body(question, kMaxTokens));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json answer = Json::parse(r->body);
  EXPECT_EQ(answer["object"], "chat.completion");
  EXPECT_EQ(answer["model"], "smollm2");
  const std::string content = answer["choices"][0]["message"]["content"];
  EXPECT_EQ(answer["choices"][0]["message"]["role"], "assistant");

  const std::string generate = "generate --model smollm2 --chat --prompt " + quoted(question) + " --max-new-tokens " +
                               std::to_string(kMaxTokens);
  const std::string text = generated_text(generate);
  EXPECT_EQ(content, text) << "the same request through `inferlab generate --chat`";
  const std::vector<int> ids = ids_of(inferlab_output(generate + " --ids"));
  const std::vector<int> prompt =
      ids_of(inferlab_output("tokenize --model smollm2 --text " + quoted(chatml(question))));
  EXPECT_EQ(answer["usage"]["completion_tokens"], ids.size());
  EXPECT_EQ(answer["usage"]["prompt_tokens"], prompt.size());
  EXPECT_EQ(answer["usage"]["total_tokens"], ids.size() + prompt.size());
  EXPECT_EQ(answer["choices"][0]["finish_reason"], ids.size() == size_t(kMaxTokens) ? "length" : "stop");

  const httplib::Result s = post("/v1/chat/completions", chat_body(question, kMaxTokens, /*stream=*/true));
  ASSERT_TRUE(s);
  ASSERT_EQ(s->status, 200);
  EXPECT_TRUE(s->get_header_value("Content-Type").starts_with("text/event-stream"));
  const Streamed streamed = read_stream(s->body, true);
  EXPECT_EQ(streamed.text, content);
  EXPECT_EQ(streamed.finish_reason, answer["choices"][0]["finish_reason"]);
  ASSERT_TRUE(streamed.usage);
  EXPECT_EQ(*streamed.usage, answer["usage"]);
  EXPECT_TRUE(streamed.done);
}

TEST_F(Serve, CompletionsEqualGenerateWithThePromptAsTextOrIds) {
  const std::string prompt = "Once upon a time";
  const Json body{{"model", "smollm2"}, {"prompt", prompt}, {"max_tokens", 16}, {"temperature", 0}};
  const httplib::Result r = post("/v1/completions", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json answer = Json::parse(r->body);
  EXPECT_EQ(answer["object"], "text_completion");
  const std::string text = answer["choices"][0]["text"];
  const std::string expected =
      generated_text("generate --model smollm2 --prompt " + quoted(prompt) + " --max-new-tokens 16");
  EXPECT_EQ(text, expected);
  EXPECT_EQ(answer["usage"]["completion_tokens"], 16);
  EXPECT_EQ(answer["choices"][0]["finish_reason"], "length");

  Json by_ids = body;
  by_ids["prompt"] = ids_of(inferlab_output("tokenize --model smollm2 --text " + quoted(prompt)));
  const httplib::Result i = post("/v1/completions", by_ids);
  ASSERT_TRUE(i);
  ASSERT_EQ(i->status, 200) << i->body;
  EXPECT_EQ(Json::parse(i->body)["choices"][0]["text"], text);

  Json streaming = body;
  streaming["stream"] = true;  // no usage chunk without include_usage
  const httplib::Result s = post("/v1/completions", streaming);
  ASSERT_TRUE(s);
  const Streamed streamed = read_stream(s->body, false);
  EXPECT_EQ(streamed.text, text);
  EXPECT_EQ(streamed.finish_reason, "length");
  EXPECT_FALSE(streamed.usage);
  EXPECT_TRUE(streamed.done);
}

TEST_F(Serve, EightConcurrentStreamsEachEqualItsRequestAlone) {
  const std::vector<std::string> questions = {"Name a color.",   "What is 2 + 2?",        "Say hello.",
                                              "Name a fruit.",   "What is the sun?",      "Count to five.",
                                              "Name an animal.", "What is water made of?"};
  std::vector<std::string> alone;
  for (const std::string& q : questions) {
    const httplib::Result r = post("/v1/chat/completions", chat_body(q, 20));
    ASSERT_TRUE(r && r->status == 200);
    alone.push_back(Json::parse(r->body)["choices"][0]["message"]["content"]);
  }
  std::vector<Streamed> streamed(questions.size());
  std::vector<int> status(questions.size(), 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < questions.size(); ++i)
    threads.emplace_back([&, i] {
      const httplib::Result r = post("/v1/chat/completions", chat_body(questions[i], 20, true));
      if (!r) return;
      status[i] = r->status;
      streamed[i] = read_stream(r->body, true);
    });
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < questions.size(); ++i) {
    EXPECT_EQ(status[i], 200) << questions[i];
    EXPECT_TRUE(streamed[i].done) << questions[i];
    EXPECT_EQ(streamed[i].text, alone[i]) << questions[i] << ": streamed beside 7 others";
  }
  const Json h = health();
  EXPECT_EQ(h["running"], 0);
  EXPECT_EQ(h["free_blocks"], h["num_blocks"]);
}

TEST_F(Serve, AClientThatDisconnectsMidStreamHasItsRequestAborted) {
  const Json before = health();
  // A raw connection: the request, the first event, then close().
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(uint16_t(server_->port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  const std::string body = Json{
      {"model", "smollm2"},
      {"prompt", "Once upon a time"},
      {"max_tokens", 400},
      {"temperature", 0},
      {"stream", true}}.dump();
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
  std::string received;
  char buffer[1024];
  while (received.find("data: ") == std::string::npos) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    received.append(buffer, size_t(n));
  }
  ::close(fd);
  ASSERT_NE(received.find("data: "), std::string::npos) << received;

  Json after;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  do {
    std::this_thread::sleep_for(20ms);
    after = health();
  } while ((after["running"] != 0 || after["waiting"] != 0) && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(after["running"], 0) << after.dump();
  EXPECT_EQ(after["waiting"], 0) << after.dump();
  EXPECT_EQ(after["free_blocks"], after["num_blocks"]) << after.dump();
  // 400 tokens take seconds; the disconnect is noticed at the next token's write.
  EXPECT_EQ(after["aborted"].get<int>(), before["aborted"].get<int>() + 1) << after.dump();
  EXPECT_EQ(after["submitted"].get<int>(), before["submitted"].get<int>() + 1);
}

struct BadInput {
  std::string path, body;
  int status;
  std::string param;  // "" for null
};

TEST_F(Serve, EveryBadInputGetsItsStatusAndErrorObject) {
  const std::string chat = "/v1/chat/completions", text = "/v1/completions";
  const std::string user = R"("messages": [{"role": "user", "content": "hi"}])";
  const std::vector<BadInput> cases = {
      {chat, R"({"model": "smollm2", )", 400, ""},
      {chat, "[]", 400, ""},
      {chat, R"({"model": 1, )" + user + "}", 400, "model"},
      {chat, R"({"model": "smollm2", "messages": "hi"})", 400, "messages"},
      {chat, R"({"model": "smollm2", "messages": []})", 400, "messages"},
      {chat, R"({"model": "smollm2", "messages": [{"role": "wizard", "content": "hi"}]})", 400, "messages[0].role"},
      {chat, R"({"model": "smollm2", "messages": [{"role": "user", "content": 1}]})", 400, "messages[0].content"},
      {chat, R"({"model": "smollm2", )" + user + R"(, "max_tokens": 0})", 400, "max_tokens"},
      {chat, R"({"model": "smollm2", )" + user + R"(, "max_tokens": "8"})", 400, "max_tokens"},
      {chat, R"({"model": "smollm2", )" + user + R"(, "max_completion_tokens": -1})", 400, "max_completion_tokens"},
      {chat, R"({"model": "smollm2", )" + user + R"(, "max_tokens": 100000})", 400, "max_tokens"},
      {chat, R"({"model": "smollm2", )" + user + R"(, "temperature": -0.5})", 400, "temperature"},
      {chat, R"({"model": "smollm2", )" + user + R"(, "top_p": 0})", 400, "top_p"},
      {chat, R"({"model": "smollm2", )" + user + R"(, "top_p": 1.5, "stream": true})", 400, "top_p"},
      {chat, R"({"model": "smollm2", )" + user + R"(, "stream": 1})", 400, "stream"},
      {chat, R"({"model": "gpt-4o", )" + user + "}", 404, "model"},
      {text, R"({"model": "smollm2", "prompt": 12})", 400, "prompt"},
      {text, R"({"model": "smollm2", "prompt": [1, 99999999]})", 400, "prompt"},
      {text, R"({"model": "smollm2", "prompt": "a", "max_tokens": -2})", 400, "max_tokens"},
      {text, R"({"model": "smollm2", "prompt": "a", "temperature": -1})", 400, "temperature"},
      {text, R"({"model": "other", "prompt": "a"})", 404, "model"},
  };
  for (const BadInput& c : cases) {
    const httplib::Result r = client().Post(c.path.c_str(), c.body, "application/json");
    ASSERT_TRUE(r) << c.body;
    EXPECT_EQ(r->status, c.status) << c.body << " → " << r->body;
    const Json e = Json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.is_object() && e.contains("error")) << r->body;
    EXPECT_TRUE(e["error"]["message"].is_string() && !e["error"]["message"].get<std::string>().empty());
    EXPECT_EQ(e["error"]["type"], c.status == 404 ? "not_found_error" : "invalid_request_error") << r->body;
    if (c.param.empty()) {
      EXPECT_TRUE(e["error"]["param"].is_null()) << r->body;
    } else {
      EXPECT_EQ(e["error"]["param"], c.param) << c.body;
    }
  }
  const httplib::Result unknown = client().Get("/v1/nothing");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_TRUE(Json::parse(unknown->body).contains("error"));
  const Json h = health();
  EXPECT_EQ(h["running"], 0);
}

TEST(ServeStop, SigtermWithAStreamInFlightExitsZero) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_GT(server.port(), 0) << server.output();
  std::optional<int> status_of_stream;
  std::thread client([&] {
    httplib::Client c("127.0.0.1", server.port());
    c.set_read_timeout(60, 0);
    const Json body{{"model", "smollm2"},
                    {"prompt", "Once upon a time"},
                    {"max_tokens", 2000},
                    {"temperature", 0},
                    {"stream", true}};
    const httplib::Result r = c.Post("/v1/completions", body.dump(), "application/json");
    if (r) status_of_stream = r->status;
  });
  // Wait until it runs, then stop the server under it.
  httplib::Client probe("127.0.0.1", server.port());
  for (int i = 0; i < 3000; ++i) {  // at most 30 s
    const httplib::Result h = probe.Get("/health");
    if (h && Json::parse(h->body)["running"] == 1) break;
    std::this_thread::sleep_for(10ms);
  }
  const std::optional<int> status = server.stop(SIGTERM);
  client.join();
  ASSERT_TRUE(status) << "still running 60 s after SIGTERM:\n" << server.output();
  EXPECT_TRUE(WIFEXITED(*status)) << server.output();
  EXPECT_EQ(WEXITSTATUS(*status), 0) << server.output();
  EXPECT_NE(server.output().find("1 aborted"), std::string::npos) << server.output();
}

TEST(ServeStop, SigintExitsZero) {
  REQUIRE_MODEL();
  ServerProcess server;
  ASSERT_GT(server.port(), 0) << server.output();
  const std::optional<int> status = server.stop(SIGINT);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << (WIFSIGNALED(*status) ? "killed by signal " + std::to_string(WTERMSIG(*status))
                               : "exit code " + std::to_string(WEXITSTATUS(*status)))
      << "\n" << server.output();
}

TEST(ServeCli, AnswersHelpAndNamesABadOption) {
  const testing::CommandResult help = testing::run_command(INFERLAB_EXE, "serve --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("usage: inferlab serve"), std::string::npos) << help.output;
  EXPECT_NE(help.output.find("127.0.0.1"), std::string::npos) << "the default host is loopback:\n" << help.output;
  const testing::CommandResult port = testing::run_command(INFERLAB_EXE, "serve --model smollm2 --port 70000");
  EXPECT_EQ(port.exit_code, 2);
  EXPECT_NE(port.output.find("--port"), std::string::npos) << port.output;
  const testing::CommandResult tokens = testing::run_command(INFERLAB_EXE, "serve --model smollm2 --max-tokens 0");
  EXPECT_EQ(tokens.exit_code, 2);
  EXPECT_NE(tokens.output.find("--max-tokens"), std::string::npos) << tokens.output;
}

}  // namespace
}  // namespace inferlab
