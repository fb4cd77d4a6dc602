#pragma once
/// @file serving_study.h
/// Chapter 07's serving experiments, shared by its benchmark and its tour section: a documented
/// request workload, and what the lesson reads off a run of it (engine::serve(),
/// runtime/engine/serving_run.h): the short requests' TPOT and ITL, the run as JSON.

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/metrics.h"
#include "runtime/engine/serving_run.h"
#include "runtime/model/llama_model.h"

namespace inferlab::serving {

/// A synthetic workload, as nano-vllm's offline benchmark builds one: random token ids, prompt
/// and output lengths each uniform in their range, every request generating exactly its output
/// length (no stop ids). Arrivals all at t = 0 (rate 0) or Poisson at @ref rate requests per
/// second (exponential gaps: `vllm bench serve`'s burstiness 1).
struct Workload {
  int64_t requests = 48;                        ///< how many
  int64_t prompt_min = 16;                      ///< shortest prompt, tokens
  int64_t prompt_max = 128;                     ///< longest prompt, tokens
  int64_t output_min = 16;                      ///< fewest generated tokens
  int64_t output_max = 256;                     ///< most generated tokens
  double rate = 0.0;                            ///< requests per second; 0: all at t = 0
  int64_t long_prompt_every = 0;                ///< every k-th request gets a long prompt (0: none)
  int64_t long_prompt = 0;                      ///< that prompt's length
  int64_t long_output = 8;                      ///< and its output length
  uint64_t seed = 1;                            ///< lengths, ids and arrivals follow from it
};

/// The requests of @p w over a vocabulary of @p vocab_size ids.
std::vector<engine::Request> make_requests(const Workload& w, int64_t vocab_size);

/// TPOT percentiles over the requests whose prompt is at most @p max_prompt tokens (the short
/// ones, whose decodes a long prompt's prefill can stall).
engine::Percentiles tpot_of_short(const engine::ServingRun& run, int64_t max_prompt);

/// Inter-token gaps (ITL) of those requests: percentiles and the longest gap.
engine::Percentiles itl_of_short(const engine::ServingRun& run, int64_t max_prompt, double* max_gap);

/// A paged KV cache (blocks of 16 tokens) for @p model of @p batch sequences, each holding
/// @p context tokens of random K and V in every layer, with room for one more: the state a decode
/// step finds, without running the prompts.
/// @p format: how the cache stores K and V (fp32 unless given; the values are rounded to it).
KvCache random_decode_cache(const model::LlamaModel& model, int64_t batch, int64_t context, uint64_t seed,
                            KvFormat format = KvFormat::fp32());

/// One decode token for each of the first @p B sequences of a random_decode_cache() of
/// @p context tokens, at position @p context, every one sampling.
model::StepPlan decode_batch(const model::LlamaModel& model, const KvCache& cache, int64_t B, int64_t context);

/// @p r as a JSON object, {"name": …, "run": engine::run_json(…)}; with @p with_steps also
/// "steps", its per-step records (which requests ran).
Json to_json(const engine::ServingRun& r, bool with_steps);

}  // namespace inferlab::serving
