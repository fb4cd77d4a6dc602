#include "tools/cli/engine_options.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/backend.h"
#include "common/check.h"
#include "kernels/kv/kv_format.h"
#include "tools/cli/command_line.h"

namespace inferlab::cli {

void add_engine_options(CLI::App& app, EngineOptions& options) {
  engine::EngineConfig& c = options.config;
  const std::string group = "engine options";
  const auto number = [&](const std::string& name, int64_t& field, const std::string& help) {
    return app.add_option(name, field, help)->type_name("N")->check(integer_in(1))->capture_default_str()->group(group);
  };
  app.add_option_function<std::string>(
         "--policy",
         [&c](const std::string& policy) {
           require(policy == "continuous" || policy == "static", "--policy", policy, "must be continuous or static");
           c.policy = policy == "static" ? engine::BatchingPolicy::static_batch : engine::BatchingPolicy::continuous;
         },
         "how requests are batched: continuous (vLLM's) or static, a batch run to its end")
      ->type_name("continuous|static")
      ->default_str(std::string(to_string(c.policy)))
      ->group(group);
  number("--block-size", c.block_size, "tokens per KV block");
  number("--num-blocks", c.num_blocks, "blocks in the KV pool: its memory");
  number("--max-seqs", c.max_num_seqs, "sequences in the running batch");
  options.budget = number("--budget", c.max_num_batched_tokens, "most tokens of one step");
  number("--chunk", c.chunk_size, "most prompt tokens of one sequence per step");
  app.add_flag_callback(
         "--no-chunking", [&c] { c.chunked_prefill = false; },
         "prefill a prompt whole (the budget is then at least --max-seq-len)")
      ->group(group);
  app.add_flag_callback(
         "--no-prefix-caching", [&c] { c.prefix_caching = false; }, "compute every prompt's blocks, shared or not")
      ->group(group);
  app.add_option("--max-seq-len", options.max_seq_len, "most tokens of one request, prompt and reply")
      ->type_name("N")
      ->check(integer_in(1))
      ->default_str("the model's")
      ->group(group);
  app.add_flag_callback(
         "--simulated-clock", [&c] { c.clock = engine::ClockMode::simulated; },
         "time advances by a cost model per step, not the wall clock")
      ->group(group);
  app.add_option_function<std::string>(
         "--backend", [&c](const std::string& name) { c.backend = parse_backend(name); },
         "where the model runs; sim and cuda keep the weights and the KV pool on the device")
      ->type_name("cpu|sim|cuda")
      ->default_str(std::string(to_string(c.backend)))
      ->group(group);
  app.add_option_function<std::string>(
         "--kv-dtype",
         [&c](const std::string& name) {
           try {
             c.kv_format = parse_kv_format(name);
           } catch (const std::invalid_argument& e) {
             throw std::invalid_argument(std::string("--kv-dtype: ") + e.what());
           }
         },
         "the KV cache's format, on cpu only: INT8 with per-token scales, FP8 E4M3 with one scale a row (chapter 04)")
      ->type_name("fp32|fp16|int8|int8/fp16-scales|fp8")
      ->default_str(c.kv_format.name())
      ->group(group);

  const std::string spec = "speculative decoding";
  engine::SpeculativeConfig& sc = c.speculative;
  app.add_option_function<std::string>(
         "--speculative", [&sc](const std::string& name) { sc.method = engine::parse_speculative_method(name); },
         "guess tokens and verify them in one step: ngram (prompt lookup: copy what followed the last n-gram "
         "earlier) or draft (a cheaper model, --draft-model); the output is unchanged (chapter 12)")
      ->type_name("none|ngram|draft")
      ->default_str(std::string(to_string(sc.method)))
      ->group(spec);
  app.add_option("--num-speculative-tokens", sc.num_speculative_tokens, "γ: guesses per sequence per step, at most")
      ->type_name("N")
      ->check(integer_in(1))
      ->capture_default_str()
      ->group(spec);
  app.add_option("--prompt-lookup-max", sc.ngram_max, "ngram: the longest n-gram looked up")
      ->type_name("N")
      ->check(integer_in(1))
      ->capture_default_str()
      ->group(spec);
  app.add_option("--prompt-lookup-min", sc.ngram_min, "ngram: the shortest n-gram looked up")
      ->type_name("N")
      ->check(integer_in(1))
      ->capture_default_str()
      ->group(spec);
  app.add_option("--draft-model", options.draft_model, "draft: the draft model's file (same tokenizer as --model)")
      ->type_name("PATH")
      ->default_str("the target's own file")
      ->group(spec);
  app.add_option_function<std::string>(
         "--draft-weights", [&options](const std::string& name) { options.draft_weights = parse_weight_format(name); },
         "draft: its matrices' format (with --weights f32 for the target, the file's Q4_1 drafts for fp32)")
      ->type_name("f32|f16|bf16|q8_0|q4_0|q4_1")
      ->default_str("the draft file's own")
      ->group(spec);
}

engine::EngineConfig engine_config(const EngineOptions& options, const model::LlamaModel& m,
                                   const model::LlamaModel* draft) {
  engine::EngineConfig c = options.config;
  c.speculative.draft_model = draft;
  c.max_seq_len = options.max_seq_len.value_or(m.config().max_seq_len);
  if (!c.chunked_prefill && options.budget->count() == 0)
    c.max_num_batched_tokens = std::max(c.max_num_batched_tokens, c.max_seq_len);
  return c;
}

void add_weights_option(CLI::App& app, std::optional<WeightFormat>& format) {
  app.add_option_function<std::string>(
         "--weights", [&format](const std::string& name) { format = parse_weight_format(name); },
         "convert every matrix to this format on load")
      ->type_name("f32|f16|bf16|q8_0|q4_0|q4_1")
      ->default_str("the file's own: fp32 for a llama2.c checkpoint, Q4_1/Q8_0 for SmolLM2's GGUF");
}

}  // namespace inferlab::cli
