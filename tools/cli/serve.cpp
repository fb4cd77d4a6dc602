// `inferlab serve` (chapter 09): an OpenAI-compatible HTTP server over the asynchronous engine —
// the routes are openai_server.h's; this file reads the options, loads the model and its
// tokenizer, listens (loopback by default) and shuts down cleanly on SIGINT or SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/args.h"
#include "common/check.h"
#include "runtime/engine/async_engine.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_files.h"
#include "tools/cli/commands.h"
#include "tools/cli/engine_options.h"
#include "tools/cli/model_tokenizer.h"
#include "runtime/serving/http_server.h"
#include "runtime/serving/openai_server.h"
#include "tools/cli/ranks.h"
#include "runtime/parallel/rank_runner.h"

namespace inferlab::cli {
namespace {

// The stop signals' self-pipe: the handler writes the signal's number, the main thread reads it.
int g_stop_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int signal_number) {
  const auto byte = static_cast<unsigned char>(signal_number);
  [[maybe_unused]] const ssize_t written = ::write(g_stop_pipe[1], &byte, 1);  // async-signal-safe
}

// Waits for SIGINT or SIGTERM and returns which.
int wait_for_stop_signal() {
  unsigned char byte = 0;
  while (::read(g_stop_pipe[0], &byte, 1) != 1) {
  }
  return byte;
}

const char* kServeUsage =
    R"(usage: inferlab serve --model M [--host 127.0.0.1] [--port 8000] [options]

An OpenAI-compatible HTTP server over the serving engine, its loop on its own thread:
  GET  /health               {"status": "ok"} and the engine's state and the requests by how they ended
  GET  /metrics              Prometheus text with vLLM's metric names (requests, KV usage, tokens,
                             preemptions; TTFT, inter-token, end-to-end and queue-time histograms)
  GET  /v1/models            the model served (its id is --model as given, e.g. smollm2)
  POST /v1/chat/completions  model, messages, max_tokens / max_completion_tokens, temperature (default 1),
                             top_p, seed, stop (a string or up to 4), stream, stream_options.include_usage,
                             ignore_eos (vLLM's: generate max_tokens even past the end of text)
  POST /v1/completions       model, prompt (text or token ids) and the same fields
Bad input is answered 400 with OpenAI's error object naming the parameter, an unknown model 404, a
body over --max-body-bytes 413; beyond --max-seqs running and --max-waiting waiting requests, 429 with
Retry-After. SIGINT or SIGTERM (Ctrl-C) aborts the requests in flight, stops and exits 0.

  --model M              smollm2 (installed by ./inferlab setup) or a GGUF file with its tokenizer
  --host H               the address to listen on (default 127.0.0.1: this machine only)
  --port N               the port (default 8000; 0: any free one). The line "listening on http://H:N"
                         on stdout says which, once the server accepts connections
  --max-tokens N         tokens generated when a request gives no max_tokens (default 16, cut to the context)
  --max-waiting N        requests held waiting beyond the --max-seqs running (default 2 × --max-seqs); more: 429
  --max-body-bytes N     the largest request body (default 1048576); larger: 413
  --http-threads N       threads that answer generations (default --max-seqs + --max-waiting): each holds one
  --max-connections N    open connections (default 256); one more is answered 503 and closed
  --request-timeout S    seconds a connection has to send each whole request, idle keep-alive time included
                         (default 10); then it is closed: slow or idle clients hold a socket, never a thread
  --weights f32|f16|bf16|q8_0|q4_0|q4_1   convert every matrix on load (default: the file's formats)
  engine options (as inferlab generate): --policy continuous|static  --block-size N (16)  --num-blocks N (256)
  --max-seqs N (16)  --budget N (256)  --chunk N (256)  --no-chunking  --no-prefix-caching
  --max-seq-len N (the model's)  --backend cpu|sim|cuda
  --tp N | --pp N [--micro-batches M]   the model split over N ranks (chapter 10), started through mpirun as
                         inferlab generate does; rank 0 serves, the others follow its steps and ignore SIGINT /
                         SIGTERM until rank 0 has stopped and releases them (mpirun forwards Ctrl-C / SIGTERM to
                         the ranks; its own exit status after a signal is 1)
)";

}  // namespace

int serve(const std::vector<std::string>& argv) {
  const Args args(argv, {"no-chunking", "no-prefix-caching", "simulated-clock"});
  if (args.help()) {
    std::cout << kServeUsage;
    return 0;
  }
  std::set<std::string> known = {"model",       "host",           "port",           "max-tokens",
                                 "http-threads", "max-body-bytes", "weights",        "max-waiting",
                                 "tp",           "pp",             "micro-batches",  "max-connections",
                                 "request-timeout"};
  known.merge(engine_option_names());
  args.check_known(known);
  const RankSplit split = rank_split(args);
  const std::string name = args.required("model");
  const std::string host = args.get_or("host", "127.0.0.1");
  const int64_t port = args.integer("port").value_or(8000);
  require(port >= 0 && port <= 65535, "--port", port, "must be in 0 … 65535");
  const int64_t max_tokens = args.integer("max-tokens").value_or(16);
  require_positive("--max-tokens", max_tokens);
  const std::string path = model::resolve_model_path(name);
  std::optional<WeightFormat> format;
  if (args.has("weights")) format = parse_weight_format(args.required("weights"));
  if (split.ranks() > 1 && !started_by_mpirun()) {  // --tp / --pp: checked, then the ranks start over this line
    check_split_options(args, path, format, split);   // (before the stop signals are caught: none is lost)
    exec_through_mpirun("serve", argv, split.ranks());
  }

  // SIGINT and SIGTERM: a handler, installed before any thread of ours starts, writes to a pipe
  // that the main thread reads below. Dispositions are the process's, so whichever thread the
  // kernel picks runs it — some already exist and cannot be masked: libopenblas starts its pool
  // when it is loaded, before main(), and a signal that reached one of those with the default
  // action killed the process (ServeStop.SigintExitsZero, 1 run in 4). Our own threads (OpenMP's
  // workers, the engine's, the HTTP pool) inherit a mask that blocks the two, so the signal goes
  // to the main thread or to a pool thread, both harmless. A client gone mid-write must not kill
  // the server either: SIGPIPE is ignored and the write fails instead.
  if (::pipe(g_stop_pipe) != 0) throw std::runtime_error("serve: cannot create the signal pipe");
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  const tokenizer::BpeTokenizer tokenizer = model_tokenizer(path, "--model");
  const RankModel rank_model = load_rank_model(path, format, split);
  const model::LlamaModel& m = *rank_model.model;
  if (rank_model.follower()) {  // ranks 1 … N − 1 follow rank 0's steps; a stop signal only writes to the pipe
    parallel::follow_leader_steps(m);
    return 0;
  }
  const FollowersRelease release(rank_model);  // after the engine below is gone: its thread is the one calling MPI
  const engine::EngineConfig config = engine_config(args, m);
  const int64_t max_waiting = args.integer("max-waiting").value_or(2 * config.max_num_seqs);
  require(max_waiting >= 0, "--max-waiting", max_waiting, "must be ≥ 0");
  const int64_t max_body = args.integer("max-body-bytes").value_or(int64_t(1) << 20);
  require_positive("--max-body-bytes", max_body);
  const int64_t http_threads = args.integer("http-threads").value_or(config.max_num_seqs + max_waiting);
  require_positive("--http-threads", http_threads);
  const int64_t max_connections = args.integer("max-connections").value_or(256);
  require_positive("--max-connections", max_connections);
  const double request_timeout = args.real("request-timeout").value_or(10.0);
  require(request_timeout > 0 && request_timeout <= 3600, "--request-timeout", request_timeout, "must be in (0, 3600]");

  engine::AsyncEngine engine(m, config);
  // A request's prompt and reply must fit the pool as well as the context: max_model_len is the smaller.
  const int64_t pool_tokens = config.num_blocks * config.block_size;
  serving::OpenAiServer routes(engine, tokenizer,
                               {.name = name,
                                .default_max_tokens = max_tokens,
                                .max_seq_len = std::min(config.max_seq_len, pool_tokens),
                                .max_running = config.max_num_seqs,
                                .max_waiting = max_waiting});
  serving::HttpServer server([&routes](const serving::HttpRequest& request) { return routes.route(request); },
                             {.request_timeout_s = request_timeout,
                              .max_connections = max_connections,
                              .max_body_bytes = size_t(max_body),
                              .workers = http_threads});
  const int bound = server.listen(host, int(port));
  std::cout << "inferlab serve: " << name << " (" << rank_model.description << ")\nlistening on http://" << host << ":"
            << bound << "  (Ctrl-C stops)" << std::endl;
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);  // the main thread takes them from here on
  const int signal_number = wait_for_stop_signal();
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
