#include "runtime/engine/serving_run.h"

#include <chrono>

namespace inferlab::engine {

ServingRun serve(const std::string& name, const model::LlamaModel& model, const EngineConfig& config,
                 std::span<const Request> requests, const ServingProgress& progress) {
  Engine engine(model, config);
  for (const Request& r : requests) engine.add_request(r);  // ids 0, 1, … in this order
  auto last_time = std::chrono::steady_clock::now();
  int64_t last_step = 0;
  engine.run([&](const Engine& running) {
    if (progress.out == nullptr) return;
    const int64_t step = running.stats().steps;
    const auto now = std::chrono::steady_clock::now();
    const bool by_steps = progress.every_steps > 0 && step - last_step >= progress.every_steps;
    const bool by_time =
        progress.every_seconds > 0 && std::chrono::duration<double>(now - last_time).count() >= progress.every_seconds;
    if (!by_steps && !by_time) return;
    last_step = step;
    last_time = now;
    *progress.out << "    " << name << ": step " << step << ", " << running.outputs().size() << "/" << requests.size()
                  << " done, " << running.num_running() << " running, " << running.num_waiting() << " waiting"
                  << std::endl;
  });
  ServingRun run;
  run.name = name;
  run.config = config;
  run.stats = engine.stats();
  run.steps = engine.steps();
  run.outputs = engine.take_outputs();
  for (RequestOutput& o : run.outputs) o.id = requests[size_t(o.id)].id;
  for (StepRecord& s : run.steps)
    for (int64_t& id : s.ids) id = requests[size_t(id)].id;
  run.summary = summarize(run.outputs);
  return run;
}

}  // namespace inferlab::engine
