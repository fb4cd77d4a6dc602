#pragma once
/// @file serving_run.h
/// One serving run (chapter 07): a list of requests fed to a new engine, the engine stepped until
/// every request has left, and what came out — the outputs under the callers' own request labels,
/// the engine's counters and per-step records, and the summary of serving metrics. The one loop
/// that `inferlab generate` (a prompt or a replayed trace) and chapter 07's serving study (its
/// benchmark and tour section) run.

#include <cstdint>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "runtime/engine/engine.h"
#include "runtime/engine/metrics.h"
#include "runtime/engine/request.h"
#include "runtime/model/llama_model.h"

namespace inferlab::engine {

/// When serve() writes a progress line, `    <name>: step N, D/T done, R running, W waiting`:
/// after a step that comes `every_steps` steps or `every_seconds` wall seconds after the
/// previous line (or the start), whichever is reached first.
struct ServingProgress {
  std::ostream* out = nullptr;  ///< where the lines go; null: no lines
  int64_t every_steps = 0;      ///< a line every this many steps (0: not by steps)
  double every_seconds = 0.0;   ///< a line every this many wall seconds (0: not by time)
};

/// What one serving run measured.
struct ServingRun {
  std::string name;                    ///< the caller's name for it, e.g. "continuous, t=0"
  EngineConfig config;                 ///< the engine's settings
  ServingSummary summary;              ///< throughput, TTFT, TPOT, ITL, latency (summarize(outputs))
  EngineStats stats;                   ///< steps, preemptions, recomputation, …
  std::vector<StepRecord> steps;       ///< per step (config.record_steps), ids as in outputs
  std::vector<RequestOutput> outputs;  ///< per request, in the order they left; id = the Request::id given
};

/// Serves @p requests on a new engine over @p model with @p config: adds them in order, steps
/// until every one has left, and returns the run named @p name. The engine numbers requests 0,
/// 1, … in the order they are added; the run's outputs and step records carry each request's own
/// Request::id instead (a trace's labels). Progress lines as @p progress says. Throws
/// std::invalid_argument for a bad config or a request the engine refuses (Engine::add_request()).
ServingRun serve(const std::string& name, const model::LlamaModel& model, const EngineConfig& config,
                 std::span<const Request> requests, const ServingProgress& progress = {});

}  // namespace inferlab::engine
