#pragma once
// What the tests of a split model share (test_tensor_parallel.cpp, test_pipeline_parallel.cpp,
// test_split.cpp): requests that page, chunk and preempt on a tight engine, and the fixture of
// the MPI tests, in which rank 0 tests and the other ranks follow its steps.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "common/rng.h"
#include "runtime/engine/engine.h"
#include "runtime/model/llama_model.h"
#include "runtime/parallel/rank_runner.h"

namespace inferlab {

// Requests that page, chunk and preempt: prompts of odd lengths, a pool too small for all.
inline std::vector<engine::Request> requests_for(int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<engine::Request> requests;
  for (const int64_t length : {37, 5, 61, 18, 90, 1}) {
    engine::Request r;
    for (int64_t i = 0; i < length; ++i) r.prompt.push_back(int32_t(rng.integer(0, vocab - 1)));
    r.sampling.max_new_tokens = 24;
    requests.push_back(r);
  }
  return requests;
}

inline engine::EngineConfig tight_engine() {
  engine::EngineConfig e;
  e.max_num_seqs = 4;
  e.block_size = 8;
  e.num_blocks = 20;  // 160 tokens for 4 sequences of up to 114: preemption
  e.max_num_batched_tokens = 48;
  e.chunk_size = 24;
  e.max_seq_len = 256;
  e.check_invariants = true;
  return e;
}

// Every rank builds the same seeded whole model and keeps its part (a shard or a stage); the
// ranks but 0 follow rank 0's steps until it releases them — in TearDown, so also after a failed
// ASSERT. Rank 0 tests.
template <class Param>
class SplitModelTest : public ::testing::TestWithParam<Param> {
 protected:
  // Keeps @p whole and this rank's @p part (made over @p comm); false on the followers, which
  // have then followed rank 0's steps to the end.
  bool lead(model::LlamaWeights whole, model::LlamaWeights part, parallel::Communicator& comm) {
    full_ = std::move(whole);
    part_ = std::make_unique<model::LlamaModel>(std::move(part), &comm);
    if (comm.rank() == 0) return true;
    parallel::follow_leader_steps(*part_);
    return false;
  }
  void TearDown() override {
    if (part_ && part_->communicator()->rank() == 0) parallel::end_leader_steps(*part_);
  }
  model::LlamaWeights full_;                 // the whole model
  std::unique_ptr<model::LlamaModel> part_;  // this rank's part of it
};

}  // namespace inferlab
