#pragma once
/// @file sampling_options.h
/// The options that say how tokens are generated, declared once for every generating command
/// (`inferlab generate`, `inferlab chat`): --max-new-tokens N, --greedy, --temperature T,
/// --top-p P, --seed S, --stop-ids IDS, each bound to the engine::SamplingParams field it sets.

#include <cstdint>
#include <optional>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/engine/request.h"

namespace inferlab::cli {

/// The sampling settings a command line gives, before the model's stop ids are known.
struct SamplingOptions {
  /// The fields the options set; max_new_tokens holds the command's default when the options
  /// are added (16 for generate, 256 for chat), the others SamplingParams' (greedy, top-p 1, seed 0).
  engine::SamplingParams params;
  std::optional<std::vector<int32_t>> stop_ids;  ///< --stop-ids; else the command's default
  bool greedy = false;                           ///< --greedy: temperature 0 whatever --temperature says
};

/// Adds the sampling options to @p app, bound to @p options. A --stop-ids value that is not a
/// list of ids throws std::invalid_argument naming the option while the line is parsed.
void add_sampling_options(CLI::App& app, SamplingOptions& options);

/// The sampling parameters of @p options: --stop-ids, else @p default_stop_ids. Throws
/// std::invalid_argument as SamplingParams::validate() for a value out of range.
engine::SamplingParams sampling_params(const SamplingOptions& options, std::vector<int32_t> default_stop_ids);

}  // namespace inferlab::cli
