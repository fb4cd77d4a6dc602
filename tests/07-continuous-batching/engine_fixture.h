#pragma once
// Shared by chapter 07's engine and model tests: random requests and tokens, running them through
// an Engine, comparing each request's tokens with the same request run alone on a contiguous cache
// (of the engine's KV format), one chunk's logits alone, and the error-message check.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/rng.h"
#include "kernels/kv/kv_cache.h"
#include "runtime/engine/engine.h"
#include "runtime/model/llama_model.h"

namespace inferlab::testing {

/// A random request: prompt of [min_prompt, max_prompt] tokens, [1, max_new] new tokens, greedy
/// unless @p sampled (then temperature 0.8, top-p 0.9 with its own seed).
inline engine::Request random_request(Rng& rng, int64_t id, int64_t vocab, int64_t min_prompt, int64_t max_prompt,
                                      int64_t max_new, bool sampled = false) {
  engine::Request r;
  r.id = id;
  const int64_t n = rng.integer(min_prompt, max_prompt);
  for (int64_t i = 0; i < n; ++i) r.prompt.push_back(int32_t(rng.integer(0, vocab - 1)));
  r.sampling.max_new_tokens = rng.integer(1, max_new);
  if (sampled) {
    r.sampling.temperature = 0.8f;
    r.sampling.top_p = 0.9f;
    r.sampling.seed = uint64_t(rng.integer(0, 1 << 30));
  }
  return r;
}

/// The tokens of each request run alone (generate_alone) with a KV cache of @p kv_format, by id.
inline std::map<int64_t, std::vector<int32_t>> alone(const model::LlamaModel& model,
                                                     const std::vector<engine::Request>& requests,
                                                     const KvFormat& kv_format = KvFormat::fp32()) {
  std::map<int64_t, std::vector<int32_t>> out;
  for (const auto& r : requests) out[r.id] = engine::generate_alone(model, r, kv_format).tokens;
  return out;
}

/// What the step deltas of a run added up to, per request: the concatenated new tokens and every
/// finish reported (a correct engine reports exactly one).
struct DeltaLog {
  std::map<int64_t, std::vector<int32_t>> tokens;                 ///< by engine id
  std::map<int64_t, std::vector<engine::FinishReason>> finishes;  ///< by engine id

  /// Adds one step's deltas.
  void add(const engine::StepOutput& step) {
    for (const engine::RequestDelta& d : step.deltas) {
      auto& t = tokens[d.id];
      t.insert(t.end(), d.new_tokens.begin(), d.new_tokens.end());
      if (d.finish) finishes[d.id].push_back(*d.finish);
    }
  }
  /// Expects @p output's tokens to be the concatenated deltas and its finish reported once, with
  /// its reason.
  void expect_matches(const engine::RequestOutput& output) const {
    const auto t = tokens.find(output.id);
    EXPECT_EQ(t == tokens.end() ? std::vector<int32_t>{} : t->second, output.tokens)
        << "request " << output.id << ": the concatenated step deltas are not its output";
    const auto f = finishes.find(output.id);
    ASSERT_TRUE(f != finishes.end() && f->second.size() == 1)
        << "request " << output.id << ": its finish was reported " << (f == finishes.end() ? 0 : f->second.size())
        << " times, not once";
    EXPECT_EQ(f->second.front(), output.reason) << "request " << output.id;
  }
};

/// Runs @p requests through a new engine with @p config and returns the outputs by the requests'
/// own id labels (Request::id; the engine assigns its ids 0, 1, … in the order they are added —
/// checked); checks the invariants after every step (check_invariants mode), that the step
/// deltas of every request concatenate to its output with one finish, and that the pool is
/// entirely free at the end.
inline std::map<int64_t, engine::RequestOutput> serve(const model::LlamaModel& model, engine::EngineConfig config,
                                                      const std::vector<engine::Request>& requests,
                                                      engine::EngineStats* stats = nullptr) {
  config.check_invariants = true;
  engine::Engine e(model, config);
  std::map<int64_t, int64_t> label_of;  // engine id → the request's label
  for (const auto& r : requests) {
    const int64_t id = e.add_request(r);
    EXPECT_EQ(id, int64_t(label_of.size())) << "the engine's ids are 0, 1, … in the order requests are added";
    label_of[id] = r.id;
  }
  DeltaLog deltas;
  while (true) {
    const engine::StepOutput step = e.step();
    deltas.add(step);
    if (!step) break;
  }
  std::map<int64_t, engine::RequestOutput> out;
  for (auto& o : e.take_outputs()) {
    deltas.expect_matches(o);
    const int64_t label = label_of.at(o.id);
    EXPECT_FALSE(out.contains(label)) << "request " << label << " left the engine twice";
    o.id = label;
    out[label] = std::move(o);
  }
  EXPECT_EQ(out.size(), requests.size()) << "requests lost";
  EXPECT_EQ(e.blocks().num_free_blocks(), config.num_blocks) << "blocks still held after every request left";
  if (stats) *stats = e.stats();
  return out;
}

/// The gap between the two largest logits @p model gives after @p tokens (one forward over them
/// on a contiguous cache of @p kv_format): how close greedy decoding was to picking another
/// token there.
inline double top2_margin(const model::LlamaModel& model, const std::vector<int32_t>& tokens,
                          const KvFormat& kv_format = KvFormat::fp32()) {
  const auto n = int64_t(tokens.size());
  KvCache cache(model.kv_shape(1, n), kv_format);
  std::vector<int64_t> slots;
  for (int64_t t = 0; t < n; ++t) slots.push_back(cache.slot(0, t));
  model::StepPlan plan;
  plan.add_sequence(tokens, slots, n, {}, true);
  const Tensor<float> logits = model.forward(plan, cache);
  std::vector<float> row(logits.span().begin(), logits.span().end());
  std::partial_sort(row.begin(), row.begin() + 2, row.end(), std::greater<>());
  return double(row[0]) - double(row[1]);
}

/// Expects every output to equal the request run alone; at a first difference, names it and
/// reports the reference's top-2 logit margin there (a tiny margin would point at arithmetic
/// that depends on the batch; a clear one at a scheduling bug).
inline void expect_same_tokens(const model::LlamaModel& model, const std::map<int64_t, engine::RequestOutput>& served,
                               const std::map<int64_t, std::vector<int32_t>>& reference, const std::string& what,
                               const KvFormat& kv_format = KvFormat::fp32()) {
  for (const auto& [id, tokens] : reference) {
    const auto it = served.find(id);
    ASSERT_NE(it, served.end()) << what << ": request " << id << " missing";
    const auto& got = it->second.tokens;
    const auto diff = std::mismatch(got.begin(), got.end(), tokens.begin(), tokens.end());
    if (diff.first == got.end() && diff.second == tokens.end()) continue;
    const auto at = diff.first - got.begin();
    std::vector<int32_t> context = it->second.prompt;
    context.insert(context.end(), tokens.begin(), tokens.begin() + at);
    ADD_FAILURE() << what << ": request " << id << " differs from running alone at generated token " << at << " ("
                  << got.size() << " vs " << tokens.size() << " tokens); the reference's top-2 logit margin there is "
                  << top2_margin(model, context, kv_format);
  }
}

/// Expects @p call to throw std::invalid_argument whose message contains every one of @p names.
inline void expect_invalid(const std::function<void()>& call, const std::vector<std::string>& names) {
  try {
    call();
    ADD_FAILURE() << "accepted; expected std::invalid_argument naming " << names.front();
  } catch (const std::invalid_argument& e) {
    for (const std::string& name : names)
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << "expected '" << name << "' in: " << e.what();
  }
}

/// @p count token ids drawn uniformly from [0, @p vocab).
inline std::vector<int32_t> random_tokens(Rng& rng, int64_t count, int64_t vocab) {
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  for (auto& t : tokens) t = int32_t(rng.integer(0, vocab - 1));
  return tokens;
}

/// @p tokens as one chunk on a fresh contiguous cache of one sequence in @p kv_format (poisoned):
/// the cpu forward's logits of every position.
inline Tensor<float> logits_alone(const model::LlamaModel& model, const std::vector<int32_t>& tokens,
                                  const KvFormat& kv_format = KvFormat::fp32()) {
  const int64_t T = int64_t(tokens.size());
  KvCache cache(model.kv_shape(1, T), kv_format);
  std::vector<int64_t> slots;
  for (int64_t t = 0; t < T; ++t) slots.push_back(cache.slot(0, t));
  model::StepPlan plan;
  plan.add_sequence(tokens, slots, T, {}, false);
  for (int64_t t = 0; t < T; ++t) plan.logits_indices.push_back(t);
  return model.forward(plan, cache);
}

}  // namespace inferlab::testing

