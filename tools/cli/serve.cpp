// `inferlab serve` (chapter 09): an OpenAI-compatible HTTP server over the asynchronous engine —
// the routes are openai_server.h's; this file reads the options, loads the model and its
// tokenizer, listens (loopback by default) and shuts down cleanly on SIGINT or SIGTERM.
#include <signal.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/check.h"
#include "runtime/engine/async_engine.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_files.h"
#include "tools/cli/command_line.h"
#include "tools/cli/commands.h"
#include "tools/cli/draft_model.h"
#include "tools/cli/engine_options.h"
#include "tools/cli/model_tokenizer.h"
#include "runtime/serving/http_server.h"
#include "runtime/serving/openai_server.h"
#include "tools/cli/ranks.h"
#include "tools/cli/stop_signals.h"
#include "runtime/parallel/rank_runner.h"

namespace inferlab::cli {
namespace {

// What --help says of the server, above its option table.
const char* kServeDescription =
    R"(An OpenAI-compatible HTTP server over the serving engine, its loop on its own thread:
  GET  /health               {"status": "ok"} and the engine's state and the requests by how they ended
  GET  /metrics              Prometheus text with vLLM's metric names (requests, KV usage, tokens,
                             preemptions; TTFT, inter-token, end-to-end and queue-time histograms)
  GET  /v1/models            the model served (its id is --model as given, e.g. smollm2)
  POST /v1/chat/completions  model, messages, max_tokens / max_completion_tokens, temperature (default 1),
                             top_p, seed, stop (a string or up to 4), stream, stream_options.include_usage,
                             ignore_eos (vLLM's: generate max_tokens even past the end of text), n (choices:
                             the prompt's blocks shared), logprobs / top_logprobs, cache_salt (vLLM's: prefix-cache
                             hits only among requests with the same salt)
  POST /v1/completions       model, prompt (text or token ids) and the same fields
Bad input is answered 400 with OpenAI's error object naming the parameter, an unknown model 404, a
body over --max-body-bytes 413; beyond --max-seqs running and --max-waiting waiting requests, 429 with
Retry-After. SIGINT or SIGTERM (Ctrl-C) aborts the requests in flight, stops and exits 0.
With --tp or --pp, rank 0 serves, the others follow its steps and ignore SIGINT / SIGTERM until rank 0
has stopped and releases them (mpirun forwards Ctrl-C / SIGTERM to the ranks; its own exit status after
a signal is 1).)";

// What `inferlab serve` reads from its command line: its own options, and the shared tables'.
struct ServeOptions {
  std::string model;
  std::string host = "127.0.0.1";
  int64_t port = 8000;
  int64_t max_tokens = 16;
  std::optional<int64_t> max_waiting, http_threads;  // else from --max-seqs
  int64_t max_body_bytes = int64_t(1) << 20;
  int64_t max_connections = 256;
  double request_timeout_s = 10.0;
  std::optional<WeightFormat> weights;
  EngineOptions engine_options;
  RankSplit split;
};

// The option table of `inferlab serve`, bound to @p o.
void add_serve_options(CLI::App& app, ServeOptions& o) {
  app.add_option("--model", o.model, "smollm2 (installed by ./inferlab setup) or a GGUF file with its tokenizer")
      ->type_name("M")
      ->required();
  app.add_option("--host", o.host, "the address to listen on")
      ->type_name("H")
      ->default_str(o.host + ": this machine only");
  app.add_option("--port", o.port,
                 "the port (0: any free one). The line \"listening on http://H:N\" on stdout says which, once the "
                 "server accepts connections")
      ->type_name("N")
      ->check(integer_in(0, 65535))
      ->capture_default_str();
  app.add_option("--max-tokens", o.max_tokens,
                 "tokens generated when a request gives no max_tokens, cut to the context")
      ->type_name("N")
      ->check(integer_in(1))
      ->capture_default_str();
  app.add_option("--max-waiting", o.max_waiting, "requests held waiting beyond the --max-seqs running; more: 429")
      ->type_name("N")
      ->check(integer_in(0))
      ->default_str("2 × --max-seqs");
  app.add_option("--max-body-bytes", o.max_body_bytes, "the largest request body; larger: 413")
      ->type_name("N")
      ->check(integer_in(1))
      ->capture_default_str();
  app.add_option("--http-threads", o.http_threads, "threads that answer generations: each holds one")
      ->type_name("N")
      ->check(integer_in(1))
      ->default_str("--max-seqs + --max-waiting");
  app.add_option("--max-connections", o.max_connections, "open connections; one more is answered 503 and closed")
      ->type_name("N")
      ->check(integer_in(1))
      ->capture_default_str();
  app.add_option("--request-timeout", o.request_timeout_s,
                 "seconds in (0, 3600] a connection has to send each whole request, idle keep-alive time included; "
                 "then it is closed: slow or idle clients hold a socket, never a thread")
      ->type_name("S")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            double seconds = 0;
            return CLI::detail::lexical_cast(text, seconds) && seconds > 0 && seconds <= 3600
                       ? ""
                       : "must be in (0, 3600], not " + text;
          },
          "(0, 3600]"))
      ->capture_default_str();
  add_weights_option(app, o.weights);
  add_engine_options(app, o.engine_options);
  add_split_options(app, o.split);
}

}  // namespace

int serve(const std::vector<std::string>& argv) {
  ServeOptions o;
  const std::unique_ptr<CLI::App> app = command_app("serve", "--model M", kServeDescription);
  add_serve_options(*app, o);
  if (!parse_command_line(*app, argv)) return 0;
  check_split(*app, o.split);
  const RankSplit& split = o.split;
  const std::string& name = o.model;
  const std::string path = model::resolve_model_path(name);
  if (split.ranks() > 1 && !started_by_mpirun()) {  // --tp / --pp: checked, then the ranks start over this line
    check_split_options(o.engine_options.config.backend, path, o.weights, split);  // (before the stop signals are
    exec_through_mpirun("serve", argv, split.ranks());                             // caught: none is lost)
  }

  StopSignals::install();  // before any thread of ours starts (stop_signals.h)

  const tokenizer::BpeTokenizer tokenizer = model_tokenizer(path, "--model");
  const RankModel rank_model = load_rank_model(path, o.weights, split);
  const model::LlamaModel& m = *rank_model.model;
  if (rank_model.follower()) {  // ranks 1 … N − 1 follow rank 0's steps; a stop signal only writes to the pipe
    parallel::follow_leader_steps(m);
    return 0;
  }
  const FollowersRelease release(rank_model);  // after the engine below is gone: its thread is the one calling MPI
  const std::unique_ptr<model::LlamaModel> draft = load_draft_model(o.engine_options, path);  // --speculative draft
  const engine::EngineConfig config = engine_config(o.engine_options, m, draft.get());
  const int64_t max_waiting = o.max_waiting.value_or(2 * config.max_num_seqs);
  const int64_t http_threads = o.http_threads.value_or(config.max_num_seqs + max_waiting);

  engine::AsyncEngine engine(m, config);
  // A request's prompt and reply must fit the pool as well as the context: max_model_len is the smaller.
  const int64_t pool_tokens = config.num_blocks * config.block_size;
  serving::OpenAiServer routes(engine, tokenizer,
                               {.name = name,
                                .default_max_tokens = o.max_tokens,
                                .max_seq_len = std::min(config.max_seq_len, pool_tokens),
                                .max_running = config.max_num_seqs,
                                .max_waiting = max_waiting});
  serving::HttpServer server([&routes](const serving::HttpRequest& request) { return routes.route(request); },
                             {.request_timeout_s = o.request_timeout_s,
                              .max_connections = o.max_connections,
                              .max_body_bytes = size_t(o.max_body_bytes),
                              .workers = http_threads});
  const int bound = server.listen(o.host, int(o.port));
  std::cout << "inferlab serve: " << name << " (" << rank_model.description << ")\nlistening on http://" << o.host
            << ":" << bound << "  (Ctrl-C stops)" << std::endl;
  StopSignals::unblock();  // the main thread takes them from here on
  const int signal_number = StopSignals::wait();
  std::cout << "inferlab serve: " << (signal_number == SIGINT ? "SIGINT" : "SIGTERM")
            << ": aborting the requests in flight, stopping" << std::endl;
  engine.shutdown(engine::ShutdownMode::abort);  // every waiting worker wakes: 503 or a cut stream
  server.stop();                                 // then every connection, slow ones included, is closed
  const engine::AsyncEngineStats s = engine.stats();
  std::cout << "inferlab serve: stopped after " << s.submitted << " requests (" << s.finished << " finished, "
            << s.aborted << " aborted, " << s.rejected << " refused)" << std::endl;
  return 0;
}

}  // namespace inferlab::cli
