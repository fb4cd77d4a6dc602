#include "tools/cli/engine_options.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/backend.h"
#include "common/check.h"
#include "kernels/kv/kv_format.h"

namespace inferlab::cli {

std::set<std::string> engine_option_names() {
  return {"policy",      "block-size",        "num-blocks",  "max-seqs",        "budget", "chunk",
          "no-chunking", "no-prefix-caching", "max-seq-len", "simulated-clock", "backend", "kv-dtype"};
}

engine::EngineConfig engine_config(const Args& args, const model::LlamaModel& m) {
  const auto integer = [&](const std::string& name, int64_t fallback) { return args.integer(name).value_or(fallback); };
  engine::EngineConfig c;
  const std::string policy = args.get_or("policy", "continuous");
  require(policy == "continuous" || policy == "static", "--policy", policy, "must be continuous or static");
  c.policy = policy == "static" ? engine::BatchingPolicy::static_batch : engine::BatchingPolicy::continuous;
  c.block_size = integer("block-size", 16);
  c.num_blocks = integer("num-blocks", 256);
  c.max_num_seqs = integer("max-seqs", 16);
  c.max_num_batched_tokens = integer("budget", 256);
  c.chunk_size = integer("chunk", 256);
  c.chunked_prefill = !args.has("no-chunking");
  c.prefix_caching = !args.has("no-prefix-caching");
  c.max_seq_len = integer("max-seq-len", m.config().max_seq_len);
  if (!c.chunked_prefill && !args.has("budget"))
    c.max_num_batched_tokens = std::max(c.max_num_batched_tokens, c.max_seq_len);
  c.clock = args.has("simulated-clock") ? engine::ClockMode::simulated : engine::ClockMode::real;
  c.backend = parse_backend(args.get_or("backend", "cpu"));
  try {
    c.kv_format = parse_kv_format(args.get_or("kv-dtype", "fp32"));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("--kv-dtype: ") + e.what());
  }
  return c;
}

}  // namespace inferlab::cli
