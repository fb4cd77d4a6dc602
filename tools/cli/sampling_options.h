#pragma once
/// @file sampling_options.h
/// The options that say how tokens are generated, read the same way by every generating command
/// (`inferlab generate`, `inferlab chat`): --max-new-tokens N, --greedy, --temperature T,
/// --top-p P, --seed S, --stop-ids IDS.

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/args.h"
#include "runtime/engine/request.h"

namespace inferlab::cli {

/// The option names sampling_options() reads (for Args::check_known); "greedy" is a flag.
std::set<std::string> sampling_option_names();

/// The sampling parameters of @p args: --max-new-tokens (else @p default_max_new_tokens);
/// --greedy, or --temperature (default 0: greedy), --top-p (default 1), --seed (default 0);
/// --stop-ids (token_ids.h's list; else @p default_stop_ids). Throws std::invalid_argument naming
/// the option for a value that is not a number or not a list of ids, and as
/// SamplingParams::validate() for a value out of range.
engine::SamplingParams sampling_options(const Args& args, int64_t default_max_new_tokens,
                                        std::vector<int32_t> default_stop_ids);

}  // namespace inferlab::cli
