#include "tools/cli/sampling_options.h"

#include <string>
#include <utility>

#include "tools/cli/command_line.h"
#include "tools/cli/token_ids.h"

namespace inferlab::cli {

void add_sampling_options(CLI::App& app, SamplingOptions& options) {
  engine::SamplingParams& s = options.params;
  const std::string group = "sampling";
  app.add_option("--max-new-tokens", s.max_new_tokens, "tokens to generate at most")
      ->type_name("N")
      ->check(integer_in(1))
      ->capture_default_str()
      ->group(group);
  app.add_flag("--greedy", options.greedy, "the first maximum each step, whatever --temperature says (the default)")
      ->group(group);
  app.add_option("--temperature", s.temperature, "sample softmax(logits / T) instead (0: greedy)")
      ->type_name("T")
      ->capture_default_str()
      ->group(group);
  app.add_option("--top-p", s.top_p, "nucleus sampling: among the most likely tokens whose probabilities sum to ≥ P")
      ->type_name("P")
      ->capture_default_str()
      ->group(group);
  app.add_option("--seed", s.seed, "the request's own random stream (each chat turn uses it)")
      ->type_name("S")
      ->capture_default_str()
      ->group(group);
  app.add_option_function<std::string>(
         "--stop-ids", [&options](const std::string& text) { options.stop_ids = token_id_list("stop-ids", text); },
         "stop after generating one of these ids, comma- or space-separated")
      ->type_name("IDS")
      ->default_str("the model's end-of-generation ids with --prompt and in chat, else none")
      ->group(group);
}

engine::SamplingParams sampling_params(const SamplingOptions& options, std::vector<int32_t> default_stop_ids) {
  engine::SamplingParams s = options.params;
  if (options.greedy) s.temperature = 0.0f;
  s.stop_ids = options.stop_ids.value_or(std::move(default_stop_ids));
  s.validate();
  return s;
}

}  // namespace inferlab::cli
