// `inferlab generate` (chapter 07): text generation as token ids on a Llama model — one prompt
// (run alone, or through the engine), or a JSON-lines trace of requests replayed through the
// serving engine with per-request metrics written as JSON.
#include <fstream>
#include <iostream>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>

#include "common/args.h"
#include "common/backend.h"
#include "common/check.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/metrics.h"
#include "runtime/engine/serving_run.h"
#include "runtime/engine/trace.h"
#include "runtime/model/llama_model.h"
#include "tools/cli/commands.h"
#include "tools/cli/token_ids.h"

namespace inferlab::cli {
namespace {

const char* kGenerateUsage = R"(usage: inferlab generate --model M (--prompt-ids IDS | --trace FILE) [options]

  --model M               a GGUF file (models/SmolLM2-135M-Instruct.Q4_1.gguf), models/stories260K.bin (a
                          llama2.c checkpoint) or random:<preset>[,key=value…]
                          (presets tiny, stories260K, bench; keys dim, hidden, layers, heads, kv_heads,
                          vocab, seq_len, seed, tied)
  --prompt-ids IDS        the prompt as comma- or space-separated token ids (1 = BOS)
  --max-new-tokens N      tokens to generate (default 16)
  --greedy                the first maximum each step (the default; --temperature 0 is the same)
  --temperature T, --top-p P, --seed S   sample instead (nucleus sampling with the request's own seed)
  --stop-ids IDS          stop after generating one of these
  --ids                   print only the generated ids, space-separated, on one line
  --trace FILE            replay a JSON-lines request file (one object per line: arrival, prompt_ids or
                          prompt_len, max_new_tokens[, id, temperature, top_p, seed, stop_ids])
  --out FILE              with --trace: write per-request metrics as JSON (default: stdout)
  engine options (for --trace, or to run one prompt through the engine with --engine):
  --policy continuous|static   --block-size N (16)   --num-blocks N (256)   --max-seqs N (16)
  --budget N (max tokens per step, 256)   --chunk N (256)   --no-chunking   --no-prefix-caching
  --max-seq-len N (the model's)   --simulated-clock
  --backend cpu|sim|cuda  where the model runs (default cpu); sim and cuda keep the weights and the KV
                          pool on the device (a single prompt then runs through the engine)
  --weights f32|f16|bf16|q8_0|q4_0|q4_1   convert every matrix to this format on load (default: the
                          file's own formats — fp32 for a llama2.c checkpoint, Q4_1/Q8_0 for SmolLM2's GGUF)
)";

int64_t integer(const Args& args, const std::string& name, int64_t fallback) {
  return args.integer(name).value_or(fallback);
}

double real(const Args& args, const std::string& name, double fallback) { return args.real(name).value_or(fallback); }

engine::EngineConfig engine_config(const Args& args, const model::LlamaModel& m) {
  engine::EngineConfig c;
  const std::string policy = args.get_or("policy", "continuous");
  require(policy == "continuous" || policy == "static", "--policy", policy, "must be continuous or static");
  c.policy = policy == "static" ? engine::BatchingPolicy::static_batch : engine::BatchingPolicy::continuous;
  c.block_size = integer(args, "block-size", 16);
  c.num_blocks = integer(args, "num-blocks", 256);
  c.max_num_seqs = integer(args, "max-seqs", 16);
  c.max_num_batched_tokens = integer(args, "budget", 256);
  c.chunk_size = integer(args, "chunk", 256);
  c.chunked_prefill = !args.has("no-chunking");
  c.prefix_caching = !args.has("no-prefix-caching");
  c.max_seq_len = integer(args, "max-seq-len", m.config().max_seq_len);
  if (!c.chunked_prefill && !args.has("budget")) c.max_num_batched_tokens = std::max(c.max_num_batched_tokens, c.max_seq_len);
  c.clock = args.has("simulated-clock") ? engine::ClockMode::simulated : engine::ClockMode::real;
  c.backend = parse_backend(args.get_or("backend", "cpu"));
  return c;
}

// The one request of --prompt-ids and the sampling options.
engine::Request prompt_request(const Args& args, const model::LlamaModel& m) {
  engine::Request r;
  r.id = 0;
  r.prompt = token_id_list("prompt-ids", args.required("prompt-ids"));
  r.sampling.max_new_tokens = integer(args, "max-new-tokens", 16);
  r.sampling.temperature = args.has("greedy") ? 0.0f : float(real(args, "temperature", 0.0));
  r.sampling.top_p = float(real(args, "top-p", 1.0));
  r.sampling.seed = uint64_t(integer(args, "seed", 0));
  if (args.has("stop-ids")) r.sampling.stop_ids = token_id_list("stop-ids", args.required("stop-ids"));
  for (const int32_t id : r.prompt)
    require(id < m.config().vocab_size, "--prompt-ids", id,
            "is not a token id of this model (vocab " + std::to_string(m.config().vocab_size) + ")");
  return r;
}

// Replays the --trace file through the engine: progress on stderr every 1000 steps; the run's
// JSON on stdout, or in --out with a one-line summary on stdout.
int replay(const Args& args, const model::LlamaModel& m) {
  const std::string path = args.required("trace");
  std::ifstream in(path);
  require(bool(in), "--trace", path, "cannot be opened");
  const auto requests = engine::read_trace(in, m.config().vocab_size, uint64_t(integer(args, "seed", 0)));
  const engine::ServingRun run =
      engine::serve(path, m, engine_config(args, m), requests, {.out = &std::cerr, .every_steps = 1000});
  if (!args.has("out")) {
    engine::write_run_json(std::cout, run.config, run.stats, run.outputs);
    return 0;
  }
  std::ofstream out(args.required("out"));
  require(bool(out), "--out", args.required("out"), "cannot be written");
  engine::write_run_json(out, run.config, run.stats, run.outputs);
  const engine::ServingSummary& s = run.summary;
  std::cout << requests.size() << " requests, " << s.generated_tokens << " tokens in " << s.makespan << " s ("
            << s.tokens_per_second << " tokens/s, " << to_string(run.config.policy) << "); metrics in "
            << args.required("out") << "\n";
  return 0;
}

}  // namespace

int generate(const std::vector<std::string>& argv) {
  const Args args(argv, {"greedy", "ids", "no-chunking", "no-prefix-caching", "simulated-clock", "engine"});
  if (args.help()) {
    std::cout << kGenerateUsage;
    return 0;
  }
  args.check_known({"model", "prompt-ids", "max-new-tokens", "greedy", "temperature", "top-p", "seed", "stop-ids",
                    "ids", "trace", "out", "policy", "block-size", "num-blocks", "max-seqs", "budget", "chunk",
                    "no-chunking", "no-prefix-caching", "max-seq-len", "simulated-clock", "engine", "backend",
                    "weights"});
  // Without --weights the matrices keep the file's formats (a GGUF's Q4_1 / Q8_0, a checkpoint's fp32).
  std::optional<WeightFormat> format;
  if (args.has("weights")) format = parse_weight_format(args.required("weights"));
  const model::LlamaModel m(model::load_model(args.required("model"), format));
  if (args.has("trace")) return replay(args, m);

  const engine::Request r = prompt_request(args, m);
  // generate_alone() is the cpu reference; any other backend runs through the engine's runner.
  const bool through_engine = args.has("engine") || parse_backend(args.get_or("backend", "cpu")) != Backend::cpu;
  const engine::RequestOutput out = through_engine
                                        ? engine::serve("prompt", m, engine_config(args, m), std::span(&r, 1)).outputs.at(0)
                                        : engine::generate_alone(m, r);
  if (!args.has("ids")) std::cout << "model: " << m.config().describe() << "\n" << "generated " << out.tokens.size()
                                  << " tokens (" << to_string(out.reason) << "):\n";
  for (size_t i = 0; i < out.tokens.size(); ++i) std::cout << (i ? " " : "") << out.tokens[i];
  std::cout << "\n";
  return 0;
}

}  // namespace inferlab::cli
