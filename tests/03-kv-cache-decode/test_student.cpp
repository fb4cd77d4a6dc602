// Chapter 03 exercises, graded on the sim backend: the student's append and decode kernels (run
// by the SIMT emulator) through the checks every chapter-03 version goes through
// (tests/support/decode_check.h): generation replayed step by step against the float64 causal
// prefill oracle, on odd ragged batches, with the cache poisoned (NaN) past every length, the
// append compared byte for byte with the CPU append, and launches run under several thread
// schedules. The two exercises are graded separately: the decode tests append with the CPU
// append (KvCache::append), the append tests decode with cpu/decode. Each TEST is one grading
// unit.
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "03-kv-cache-decode/ch03.h"
#include "kernels/decode/decode.h"
#include "kernels/kv/kv_cache.h"
#include "kernels/registry.h"
#include "tests/support/expect_all.h"
#include "tests/support/decode_check.h"

namespace inferlab {
namespace {

using testing::DecodeCase;

constexpr int64_t kMaxLength = 129;  // every odd shape: the student kernels run small grids on the emulator

// ---- adapters: the student's tensor-and-lengths API as the lab's DecodeFn / KvAppendFn ----

// K or V of an fp32 cache as a [batch, num_kv_heads, max_seq_len, head_dim] tensor, bit for bit
// (the poisoned slots stay NaN).
Tensor<float> cache_tensor(const float* data, const KvCacheShape& shape) {
  Tensor<float> tensor(shape.shape());
  std::memcpy(tensor.data(), data, size_t(tensor.size()) * sizeof(float));
  return tensor;
}

// sim::student::decode_attention as a DecodeFn, launched with @p threads_per_block.
DecodeFn student_decode(int threads_per_block = 128) {
  return [threads_per_block](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    sim::student::decode_attention(q, cache_tensor(cache.k_fp32().data(), cache.shape()),
                                   cache_tensor(cache.v_fp32().data(), cache.shape()), cache.lengths(), out,
                                   threads_per_block);
  };
}

// sim::student::kv_append as a KvAppendFn: the cache's bytes go in, every byte comes back.
void student_append(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  Tensor<float> k = cache_tensor(cache.k_fp32().data(), cache.shape()), v = cache_tensor(cache.v_fp32().data(), cache.shape());
  std::vector<int32_t> lengths = cache.lengths();
  sim::student::kv_append(k, v, lengths, k_new, v_new);
  for (size_t b = 0; b < lengths.size(); ++b) {
    if (lengths[b] != cache.lengths()[b] + 1)
      throw std::runtime_error("kv_append left lengths[" + std::to_string(b) + "] = " + std::to_string(lengths[b]) +
                               ", expected " + std::to_string(cache.lengths()[b] + 1));
  }
  std::memcpy(cache.k_bytes().data(), k.data(), cache.bytes_per_tensor());
  std::memcpy(cache.v_bytes().data(), v.data(), cache.bytes_per_tensor());
  cache.commit_append();
}

// The lab's CPU versions, to grade each exercise on its own.
void cpu_append(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  cache.append(k_new, v_new);
}

using testing::expect_all;

// DecodeCase fields: {final lengths, decode steps, num_heads, num_kv_heads, head_dim,
// capacity slack (max_seq_len − longest length; default 3), logit scale}.

// ---- 3.1 kv_append: the new token at slot lengths[b], nothing else touched ----

void expect_append_bytes(const std::vector<DecodeCase>& cases) {
  expect_all(cases, [](const DecodeCase& c) {
    return testing::append_matches_reference(student_append, KvDtype::fp32, c, /*check_schedules=*/true);
  });
}

TEST(Ch03Append, WritesOnlyTheNewSlots) {
  // The whole cache, poisoned slots included, must equal the CPU append's byte for byte, under
  // every thread schedule: a first token (length 0 → 1), a sequence filled to capacity, head_dim
  // below and above the block (7, 80, 128), a wide ragged batch.
  expect_append_bytes({{{1, 6, 3}, 1, 4, 2, 80},
                       {{5, 5}, 1, 8, 1, 7, 0},
                       {{33, 2, 17, 9}, 1, 8, 4, 128},
                       {{31}, 1, 2, 2, 96, 20},
                       {{2, 4, 1, 3, 7, 12}, 1, 4, 1, 65}});
}

TEST(Ch03Append, EveryStepOfGeneration) {
  // Append token after token (decoded by cpu/decode): each step equals row t of the causal
  // prefill, so every token landed in its slot of its head.
  expect_all(testing::odd_decode_cases(kMaxLength), [](const DecodeCase& c) {
    return testing::decode_steps_match_prefill(decode_cpu_naive, KvDtype::fp32, student_append, c);
  });
}

TEST(Ch03Append, RefusesAFullSequence) {
  // A working append first (a stub fails here, once), then a batch whose sequence 1 is full:
  // std::invalid_argument naming lengths[1], and not one byte or length changed.
  const ::testing::AssertionResult works =
      testing::append_matches_reference(student_append, KvDtype::fp32, {{3, 2}, 1, 2, 1, 16});
  if (!works) {
    ADD_FAILURE() << works.message();
    return;
  }
  EXPECT_TRUE(testing::append_rejects_full_sequence(student_append, KvDtype::fp32));
}

// ---- 3.2 decode_attention: one query per sequence against its cached tokens ----

void expect_decode(const std::vector<DecodeCase>& cases, int threads_per_block = 128) {
  expect_all(cases, [threads_per_block](const DecodeCase& c) {
    return testing::decode_steps_match_prefill(student_decode(threads_per_block), KvDtype::fp32, cpu_append, c);
  });
}

TEST(Ch03Decode, OddShapes) {
  // Lengths 1, 2, 5, 9, 31, 33, 64, 127, 129 (ragged), head_dim 64/80/96/128, GQA 1/2/4/8, several steps
  // each, a sequence that fills its cache, extreme logits.
  expect_decode(testing::odd_decode_cases(kMaxLength));
}

TEST(Ch03Decode, GroupedQueryAttention) {
  // Query head h reads KV head h / (num_heads / num_kv_heads).
  expect_decode({{{9, 4}, 2, 8, 8, 64},
                 {{9, 4}, 2, 8, 4, 64},
                 {{9, 4}, 2, 8, 2, 64},
                 {{9, 4}, 2, 8, 1, 64},
                 {{13, 6}, 2, 6, 3, 80}});
}

TEST(Ch03Decode, RaggedBatch) {
  // Each sequence its own length: a kernel that uses another sequence's length (or the longest)
  // reads poisoned slots.
  expect_decode({{{1, 40, 7, 2, 19}, 1, 4, 2, 64}, {{3, 17, 33}, 3, 4, 2, 96}, {{50, 1}, 1, 2, 1, 128}});
}

TEST(Ch03Decode, SeqLenOne) {
  // One cached token: the softmax is exactly 1 and out = V[0].
  expect_decode({{{1}, 1, 1, 1, 64}, {{1, 1, 1}, 1, 4, 2, 128}, {{1, 33}, 1, 2, 1, 80}});
}

TEST(Ch03Decode, PoisonedTailIsNeverRead) {
  // Capacity far beyond the lengths: the NaN slots past each length must stay unread.
  expect_decode({{{2, 9}, 2, 4, 2, 64, 40}, {{1}, 1, 2, 1, 32, 100}, {{5, 3, 8}, 3, 2, 2, 80, 57}});
}

TEST(Ch03Decode, ExtremeLogits) {
  // Logits in the hundreds: exp() without subtracting the max overflows to Inf.
  expect_decode(
      {{{19, 23}, 4, 4, 2, 64, 3, 40.0f}, {{11}, 2, 8, 8, 128, 3, 400.0f}, {{33, 2}, 1, 2, 1, 96, 3, 200.0f}});
}

TEST(Ch03Decode, OddHeadDims) {
  // head_dim below a warp (7, 20), not a multiple of 32 (36, 33), above the block (160, 200).
  std::vector<DecodeCase> cases;
  for (int64_t head_dim : {7, 20, 33, 36, 160, 200}) cases.push_back({{9, 4}, 2, 4, 2, head_dim});
  expect_decode(cases);
}

// A decode shape and the block size it is launched with.
struct LaunchCase {
  DecodeCase shape;
  int threads_per_block = 128;
};

TEST(Ch03Decode, BlockSizes) {
  // One warp, an odd number of warps, more threads than keys; fewer threads than head_dim.
  std::vector<LaunchCase> cases;
  for (int threads : {32, 96, 256})
    for (const DecodeCase& shape : {DecodeCase{{40, 3}, 2, 4, 2, 80}, DecodeCase{{6}, 1, 2, 1, 160}})
      cases.push_back({shape, threads});
  cases.push_back({{{20}, 1, 2, 1, 64}, 1024});
  expect_all(cases, [](const LaunchCase& c) {
    return testing::decode_steps_match_prefill(student_decode(c.threads_per_block), KvDtype::fp32, cpu_append, c.shape);
  });
}

TEST(Ch03Decode, SameOutputUnderEverySchedule) {
  // Forward, reverse and shuffled thread orders must give the same bits: a missing
  // __syncthreads() makes the result depend on the order.
  const std::vector<LaunchCase> cases = {
      {{{33, 5, 17}, 1, 8, 2, 80}}, {{{47, 2}, 1, 4, 4, 128}}, {{{29, 3}, 1, 2, 1, 64}, 96}};
  expect_all(cases, [](const LaunchCase& c) {
    return testing::decode_same_under_schedules(student_decode(c.threads_per_block), KvDtype::fp32, c.shape);
  });
}

}  // namespace
}  // namespace inferlab
