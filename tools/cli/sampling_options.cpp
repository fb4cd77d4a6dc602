#include "tools/cli/sampling_options.h"

#include <utility>

#include "tools/cli/token_ids.h"

namespace inferlab::cli {

std::set<std::string> sampling_option_names() {
  return {"max-new-tokens", "greedy", "temperature", "top-p", "seed", "stop-ids"};
}

engine::SamplingParams sampling_options(const Args& args, int64_t default_max_new_tokens,
                                        std::vector<int32_t> default_stop_ids) {
  engine::SamplingParams s;
  s.max_new_tokens = args.integer("max-new-tokens").value_or(default_max_new_tokens);
  s.temperature = args.has("greedy") ? 0.0f : float(args.real("temperature").value_or(0.0));
  s.top_p = float(args.real("top-p").value_or(1.0));
  s.seed = uint64_t(args.integer("seed").value_or(0));
  s.stop_ids =
      args.has("stop-ids") ? token_id_list("stop-ids", args.required("stop-ids")) : std::move(default_stop_ids);
  s.validate();
  return s;
}

}  // namespace inferlab::cli
