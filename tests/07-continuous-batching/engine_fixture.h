#pragma once
// Shared by chapter 07's engine tests: random requests, running them through an Engine, and
// comparing each request's tokens with the same request run alone on a contiguous cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/rng.h"
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

/// The tokens of each request run alone (generate_alone), by id.
inline std::map<int64_t, std::vector<int32_t>> alone(const model::LlamaModel& model,
                                                     const std::vector<engine::Request>& requests) {
  std::map<int64_t, std::vector<int32_t>> out;
  for (const auto& r : requests) out[r.id] = engine::generate_alone(model, r).tokens;
  return out;
}

/// Runs @p requests through a new engine with @p config and returns the outputs by id; checks
/// the block manager's invariants after every step and that the pool is entirely free at the end.
inline std::map<int64_t, engine::RequestOutput> serve(const model::LlamaModel& model, engine::EngineConfig config,
                                                      const std::vector<engine::Request>& requests,
                                                      engine::EngineStats* stats = nullptr) {
  config.check_invariants = true;
  engine::Engine e(model, config);
  for (const auto& r : requests) e.add_request(r);
  e.run();
  std::map<int64_t, engine::RequestOutput> out;
  for (auto& o : e.take_outputs()) {
    EXPECT_FALSE(out.contains(o.id)) << "request " << o.id << " left the engine twice";
    out[o.id] = std::move(o);
  }
  EXPECT_EQ(out.size(), requests.size()) << "requests lost";
  EXPECT_EQ(e.blocks().num_free_blocks(), config.num_blocks) << "blocks still held after every request left";
  if (stats) *stats = e.stats();
  return out;
}

/// Expects every output to equal the request run alone, naming the first difference.
inline void expect_same_tokens(const std::map<int64_t, engine::RequestOutput>& served,
                               const std::map<int64_t, std::vector<int32_t>>& reference, const std::string& what) {
  for (const auto& [id, tokens] : reference) {
    const auto it = served.find(id);
    ASSERT_NE(it, served.end()) << what << ": request " << id << " missing";
    const auto& got = it->second.tokens;
    const auto diff = std::mismatch(got.begin(), got.end(), tokens.begin(), tokens.end());
    EXPECT_TRUE(diff.first == got.end() && diff.second == tokens.end())
        << what << ": request " << id << " differs from running alone at generated token "
        << (diff.first - got.begin()) << " (" << got.size() << " vs " << tokens.size() << " tokens)";
  }
}

}  // namespace inferlab::testing
