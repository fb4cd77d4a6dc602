#pragma once
/// @file metrics.h
/// Serving metrics over a run's outputs (chapter 07), as `vllm bench serve` defines them:
/// throughput = generated tokens / makespan; TTFT = first token − arrival; TPOT = (finish −
/// first token) / (tokens − 1) per request; ITL = every gap between a request's consecutive tokens,
/// pooled over requests; end-to-end latency. Percentiles by nearest rank.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/json.h"
#include "runtime/engine/request.h"

namespace inferlab::engine {

/// p50 / p99 / mean of one metric.
struct Percentiles {
  double p50 = 0.0;   ///< median, seconds
  double p99 = 0.0;   ///< 99th percentile, seconds
  double mean = 0.0;  ///< mean, seconds
  int64_t count = 0;                        ///< requests it is over
};

/// The summary of a run.
struct ServingSummary {
  int64_t requests = 0;          ///< outputs summarized
  int64_t finished = 0;          ///< not aborted
  int64_t generated_tokens = 0;  ///< Σ generated tokens
  double makespan = 0.0;         ///< last finish − first arrival (seconds)
  double tokens_per_second = 0.0;  ///< generated_tokens / makespan
  Percentiles ttft;              ///< over requests with a token
  Percentiles tpot;              ///< over requests with ≥ 2 tokens
  Percentiles latency;           ///< end to end, finished requests
  Percentiles itl;               ///< inter-token latency: every gap between consecutive tokens, pooled
  double itl_max = 0.0;          ///< the longest such gap (a decode stalled behind a prefill)
  int64_t preemptions = 0;       ///< Σ over requests
};

/// Nearest-rank percentile @p p ∈ [0, 100] of @p values, their mean and count (zeros when empty).
Percentiles percentiles(std::vector<double> values);

/// Summarizes @p outputs.
ServingSummary summarize(std::span<const RequestOutput> outputs);

/// The gaps between consecutive tokens of every request in @p outputs whose prompt has at most
/// @p max_prompt tokens, pooled (ITL).
std::vector<double> inter_token_gaps(std::span<const RequestOutput> outputs, int64_t max_prompt);

/// The summary as one JSON object: counts, then seconds (9 significant digits) as "makespan_s",
/// "tokens_per_s", "ttft_s" / "tpot_s" / "itl_s" / "latency_s" ({"p50", "p99", "mean", "count"}),
/// "itl_max_s", and "preemptions".
Json to_json(const ServingSummary& summary);

}  // namespace inferlab::engine
