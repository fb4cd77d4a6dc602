#pragma once
/// @file engine_options.h
/// The serving engine's options, declared once for every command that runs one (`inferlab
/// generate`, `inferlab serve`): each is bound to the engine::EngineConfig field it sets, and its
/// default is that field's default (EngineConfig's own), so `--help` shows what the engine uses.
/// Also --weights, the matrices' format on load, shared by every command that loads a model.

#include <optional>

#include <CLI/CLI.hpp>

#include "kernels/layers/weight.h"
#include "runtime/engine/engine.h"
#include "runtime/model/llama_model.h"

namespace inferlab::cli {

/// The engine settings a command line gives, before the model is known.
struct EngineOptions {
  engine::EngineConfig config;          ///< the fields the options set; the others keep their defaults
  std::optional<int64_t> max_seq_len;   ///< --max-seq-len; else the model's
  const CLI::Option* budget = nullptr;  ///< --budget as added (whether it was given)
  std::string draft_model;              ///< --draft-model (empty: the target's own file)
  std::optional<WeightFormat> draft_weights;  ///< --draft-weights (nullopt: the draft file's own formats)
};

/// Adds the engine options to @p app in the group "engine options", bound to @p options:
/// --policy, --block-size, --num-blocks, --max-seqs, --budget, --chunk, --no-chunking,
/// --no-prefix-caching, --max-seq-len, --simulated-clock, --backend, --kv-dtype; and in the group
/// "speculative decoding" (chapter 12): --speculative, --num-speculative-tokens,
/// --prompt-lookup-max, --prompt-lookup-min, --draft-model, --draft-weights. A value that is
/// not valid throws std::invalid_argument naming the option while the line is parsed.
void add_engine_options(CLI::App& app, EngineOptions& options);

/// The engine settings of @p options for model @p m: --max-seq-len defaults to the model's; with
/// --no-chunking and no --budget, a step's budget is at least max_seq_len (a whole prompt).
/// With @p draft (load_draft_model(), draft_model.h), the speculative draft model.
engine::EngineConfig engine_config(const EngineOptions& options, const model::LlamaModel& m,
                                   const model::LlamaModel* draft = nullptr);

/// Adds --weights f32|f16|bf16|q8_0|q4_0|q4_1 to @p app, bound to @p format (nullopt: the file's
/// own formats).
void add_weights_option(CLI::App& app, std::optional<WeightFormat>& format);

}  // namespace inferlab::cli
