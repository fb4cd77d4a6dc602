#pragma once
/// @file trace.h
/// Request traces for `inferlab generate --trace` (chapter 07): a JSON-lines file, one request per
/// line, replayed through the engine; per-request metrics written back as JSON.
///
/// A line is a flat JSON object. Keys: `arrival` (seconds, default 0), either `prompt_ids` (an
/// array of token ids) or `prompt_len` (that many random token ids from the trace's seed),
/// `max_new_tokens` (default 16), and optionally `id` (default: the line's index), `temperature`,
/// `top_p`, `seed`, `stop_ids` (array). Blank lines and lines starting with `#` are skipped.

#include <cstdint>
#include <istream>
#include <ostream>
#include <span>
#include <vector>

#include "common/json.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/request.h"

namespace inferlab::engine {

/// Reads a JSON-lines trace. Random prompts draw ids in [0, @p vocab_size) from @p seed. Throws
/// std::invalid_argument naming the line (and the key, or the column of a syntax error) of
/// anything malformed or unknown.
std::vector<Request> read_trace(std::istream& in, int64_t vocab_size, uint64_t seed);

/// The engine's settings as JSON (policy, max_num_seqs, max_num_batched_tokens, chunk_size,
/// chunked_prefill, block_size, num_blocks, prefix_caching, max_seq_len, kv_format, backend,
/// clock): a run's "config", and what `inferlab serve`'s /health shows.
Json config_json(const EngineConfig& config);

/// The run as one JSON object, {"config": …, "summary": …, "stats": …, "requests": [ … ]}: per
/// request its id, arrival, first-token and finish times, TTFT, TPOT, latency (seconds, 9
/// significant digits), prompt and output lengths, preemptions, prefix-cache hits, finish reason
/// and generated ids.
Json run_json(const EngineConfig& config, const EngineStats& stats, std::span<const RequestOutput> outputs);

/// Writes run_json() to @p out as text (format_json), with a trailing newline.
void write_run_json(std::ostream& out, const EngineConfig& config, const EngineStats& stats,
                    std::span<const RequestOutput> outputs);

}  // namespace inferlab::engine
