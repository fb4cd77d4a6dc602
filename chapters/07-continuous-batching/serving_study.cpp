#include "chapters/07-continuous-batching/serving_study.h"

#include <algorithm>
#include <cmath>

#include "common/rng.h"
#include "runtime/engine/trace.h"

namespace inferlab::serving {

std::vector<engine::Request> make_requests(const Workload& w, int64_t vocab_size) {
  Rng rng(w.seed);
  std::vector<engine::Request> out;
  double t = 0.0;
  for (int64_t i = 0; i < w.requests; ++i) {
    engine::Request r;
    r.id = i;
    const bool long_one = w.long_prompt_every > 0 && i % w.long_prompt_every == w.long_prompt_every - 1;
    const int64_t n = long_one ? w.long_prompt : rng.integer(w.prompt_min, w.prompt_max);
    for (int64_t k = 0; k < n; ++k) r.prompt.push_back(int32_t(rng.integer(0, vocab_size - 1)));
    r.sampling.max_new_tokens = long_one ? w.long_output : rng.integer(w.output_min, w.output_max);
    if (w.rate > 0) {
      t += -std::log(1.0 - double(rng.uniform(0.0f, 0.9999f))) / w.rate;
      r.arrival = t;
    }
    out.push_back(std::move(r));
  }
  return out;
}

engine::Percentiles tpot_of_short(const engine::ServingRun& run, int64_t max_prompt) {
  std::vector<double> values;
  for (const auto& o : run.outputs)
    if (int64_t(o.prompt.size()) <= max_prompt && o.metrics.tpot() >= 0) values.push_back(o.metrics.tpot());
  return engine::percentiles(std::move(values));
}

engine::Percentiles itl_of_short(const engine::ServingRun& run, int64_t max_prompt, double* max_gap) {
  std::vector<double> gaps = engine::inter_token_gaps(run.outputs, max_prompt);
  *max_gap = gaps.empty() ? 0.0 : *std::max_element(gaps.begin(), gaps.end());
  return engine::percentiles(std::move(gaps));
}

KvCache random_decode_cache(const model::LlamaModel& model, int64_t batch, int64_t context, uint64_t seed,
                            KvFormat format) {
  constexpr int64_t kBlock = 16;
  const int64_t per_seq = context / kBlock + 1;
  KvCache cache(model.kv_shape(batch, context + 1), format, KvPaging{kBlock, batch * per_seq});
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int32_t> table;
    for (int64_t i = 0; i < per_seq; ++i) table.push_back(int32_t(b * per_seq + i));
    cache.set_block_table(b, table);
  }
  cache.set_lengths(std::vector<int64_t>(size_t(batch), context));
  std::vector<int64_t> slots;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < context; ++t) slots.push_back(cache.slot(b, t));
  Rng rng(seed);
  const auto& c = model.config();
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const Tensor<float> k = rng.normal_tensor({int64_t(slots.size()), c.n_kv_heads, c.head_dim()});
    const Tensor<float> v = rng.normal_tensor({int64_t(slots.size()), c.n_kv_heads, c.head_dim()});
    cache.store_slots(k, v, slots, l);
  }
  return cache;
}

model::StepPlan decode_batch(const model::LlamaModel& model, const KvCache& cache, int64_t B, int64_t context) {
  // random_decode_cache()'s tables: sequence b holds blocks b · per_seq … b · per_seq + per_seq − 1.
  const int64_t block = cache.paging().block_size, per_seq = cache.paging().num_blocks / cache.shape().batch;
  model::StepPlan plan;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int32_t> table;
    for (int64_t i = 0; i < per_seq; ++i) table.push_back(int32_t(b * per_seq + i));
    const int32_t token = int32_t((b * 7919) % model.config().vocab_size);
    const int64_t slot = int64_t{table[size_t(context / block)]} * block + context % block;
    plan.add_sequence(std::span(&token, 1), std::span(&slot, 1), context + 1, std::move(table), true);
  }
  return plan;
}

Json to_json(const engine::ServingRun& r, bool with_steps) {
  Json json = {{"name", r.name}, {"run", engine::run_json(r.config, r.stats, r.outputs)}};
  if (with_steps) {
    Json steps = Json::array();
    for (const engine::StepRecord& s : r.steps)
      steps.push_back({{"start", json_number(s.start, 9)},
                       {"seconds", json_number(s.seconds, 9)},
                       {"decode_tokens", s.decode_tokens},
                       {"prefill_tokens", s.prefill_tokens},
                       {"preemptions", s.preemptions},
                       {"free_blocks", s.free_blocks},
                       {"ids", s.ids}});
    json["steps"] = std::move(steps);
  }
  return json;
}

}  // namespace inferlab::serving
