#pragma once
// What the tests of a split model share (test_tensor_parallel.cpp, test_pipeline_parallel.cpp,
// test_split.cpp): requests that page, chunk and preempt on a tight engine.
#include <cstdint>
#include <vector>

#include "common/rng.h"
#include "runtime/engine/engine.h"

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

}  // namespace inferlab
