#pragma once
/// @file engine_options.h
/// The serving engine's options, read the same way by every command that runs one
/// (`inferlab generate`, `inferlab serve`): --policy, --block-size, --num-blocks, --max-seqs,
/// --budget, --chunk, --no-chunking, --no-prefix-caching, --max-seq-len, --simulated-clock,
/// --backend, --kv-dtype (the KV cache's format: fp32, fp16, int8, int8/fp16-scales, fp8).

#include <set>
#include <string>

#include "common/args.h"
#include "runtime/engine/engine.h"
#include "runtime/model/llama_model.h"

namespace inferlab::cli {

/// The option names engine_config() reads (for Args::check_known); "no-chunking",
/// "no-prefix-caching" and "simulated-clock" are flags.
std::set<std::string> engine_option_names();

/// The engine settings of @p args for model @p m: the defaults of `inferlab generate --help`
/// (16-token blocks, 256 of them, 16 sequences, a 256-token budget and chunk, the model's
/// max_seq_len). Throws std::invalid_argument naming an option whose value is not valid.
engine::EngineConfig engine_config(const Args& args, const model::LlamaModel& m);

}  // namespace inferlab::cli
