// Chapter 03 exercises, graded on the sim backend: the student's append and decode kernels (run
// by the SIMT emulator) through the checks every chapter-03 version goes through
// (tests/support/decode_check.h): generation replayed step by step against the float64 causal
// prefill oracle, on odd ragged batches and on batches drawn fresh each run, with the cache
// poisoned (NaN) past every length, the append compared byte for byte with the CPU append, and
// launches run under several thread schedules. The two exercises are graded separately: the
// decode tests append with the CPU append (KvCache::append), the append tests decode with
// cpu/decode. Each TEST is one grading unit.
//
// Every call into the student's library runs in a sandboxed child process
// (tests/support/isolation.h): this process draws the inputs, computes the oracle and decides;
// the student's launcher only ever sends back its outputs (the cache and lengths after an append,
// out after a decode), how many kernels it launched, the last one's name and its device-memory
// peak. A launcher that launches no kernel fails (these are kernel exercises), and a decode that
// holds more device memory than ch03.h's budget (the given launcher's buffers) fails too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "03-kv-cache-decode/ch03.h"
#include "kernels/decode/decode.h"
#include "kernels/kv/kv_cache.h"
#include "kernels/registry.h"
#include "simt/simt.h"
#include "tests/support/decode_check.h"
#include "tests/support/expect_all.h"
#include "tests/support/isolation.h"
#include "tests/support/seeded.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch03Append", "kv_append"},
    {"Ch03Decode", "decode_attention"},
});

using testing::DecodeCase;
using testing::output_bytes;

constexpr int64_t kMaxLength = 129;  // every odd shape: the student kernels run small grids on the emulator

// ---- adapters: the student's tensor-and-lengths API as the lab's DecodeFn / KvAppendFn, in the sandbox ----

// K or V of an fp32 cache as a [batch, num_kv_heads, max_seq_len, head_dim] tensor, bit for bit
// (the poisoned slots stay NaN).
Tensor<float> cache_tensor(const float* data, const KvCacheShape& shape) {
  Tensor<float> tensor(shape.shape());
  std::memcpy(tensor.data(), data, size_t(tensor.size()) * sizeof(float));
  return tensor;
}

// What a sandboxed call sends back besides its outputs.
struct CallNote {
  uint8_t shapes_kept = 0;      // the output tensors kept their shapes
  uint8_t refused = 0;          // kv_append threw std::invalid_argument (a full sequence)
  uint64_t lengths_size = 0;    // kv_append: lengths.size() after the call
  char message[400] = {};       // kv_append: the std::invalid_argument's message
  char kernel[160] = {};        // the last kernel the call launched ...
  char launched_at[160] = {};   // ... and where (for the race reports)
};

template <size_t N>
void copy_text(char (&to)[N], const std::string& from) {
  const size_t n = std::min(from.size(), N - 1);
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

// In the child, after the student's call: the last kernel it launched.
void note_last_launch(CallNote& note) {
  const simt::LaunchRecord last = simt::last_launch();
  copy_text(note.kernel, last.kernel);
  copy_text(note.launched_at, last.launched_at);
}

// The kernel the latest sandboxed call launched last: the shared checks' race report names the
// last kernel launched in *this* process, which never launches one, so noted() adds it.
std::string g_last_kernel;

// Fails the call (the shared check reports the exception with the case and the seed) when it
// launched no kernel; otherwise remembers its last kernel for noted().
void require_a_launch(const char* exercise, const testing::IsolatedRun& run, const CallNote& note) {
  if (run.launches == 0) {
    throw std::runtime_error(std::string("your function returned without launching a kernel — exercise ") + exercise +
                             " asks for a kernel: the answer must be computed by your __global__ function, "
                             "launched with simt::launch, not by host code");
  }
  g_last_kernel = note.kernel;
  if (g_last_kernel.find(note.launched_at) == std::string::npos)
    g_last_kernel =
        "'" + g_last_kernel + "', launched at " + note.launched_at + " (where it was launched, not the faulty line)";
}

// @p result, with the kernel the student's code launched last when it failed as a race (the
// shared report names the last kernel launched in this process, which launches none).
::testing::AssertionResult noted(::testing::AssertionResult result) {
  if (result || g_last_kernel.empty() || std::string(result.message()).find("thread order") == std::string::npos)
    return result;
  return ::testing::AssertionFailure() << result.message() << "\n  (the last kernel your code launched, in its "
                                       << "sandboxed process: " << g_last_kernel << ")";
}

// Exercise 3.2's device-memory budget (ch03.h): at most the given launcher's buffers — q, out,
// the K and V caches and the lengths —, at least the two caches (read on the device).
uint64_t decode_memory_budget(const Tensor<float>& q, const Tensor<float>& k_cache, size_t batch) {
  return sizeof(float) * uint64_t(2 * q.size() + 2 * k_cache.size()) + sizeof(int32_t) * uint64_t(batch);
}
uint64_t decode_memory_floor(const Tensor<float>& k_cache) { return sizeof(float) * uint64_t(2 * k_cache.size()); }

// sim::student::decode_attention as a DecodeFn, launched with @p threads_per_block.
DecodeFn student_decode(int threads_per_block = 128) {
  return [threads_per_block](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    g_last_kernel.clear();
    const Tensor<float> k = cache_tensor(cache.k_fp32().data(), cache.shape());
    const Tensor<float> v = cache_tensor(cache.v_fp32().data(), cache.shape());
    const std::vector<int32_t> lengths = cache.lengths();
    CallNote note;
    const testing::IsolatedRun run = testing::run_isolated(
        [&] {
          Tensor<float> got = out;  // the student's own tensor: reassigning it cannot move the bytes sent back
          sim::student::decode_attention(q, k, v, lengths, got, threads_per_block);
          note.shapes_kept = got.shape() == out.shape();
          if (note.shapes_kept) std::copy_n(got.data(), got.size(), out.data());
          note_last_launch(note);
        },
        {output_bytes(out.span()), output_bytes(note)});
    require_a_launch("3.2", run, note);
    if (!note.shapes_kept)
      throw std::runtime_error("exercise 3.2: decode_attention changed out's shape (expected " + to_string(out.shape()) +
                               ")");
    const uint64_t budget = decode_memory_budget(q, k, lengths.size()), floor = decode_memory_floor(k);
    if (run.device_bytes_peak > budget) {
      throw std::runtime_error(
          "exercise 3.2 held " + std::to_string(run.device_bytes_peak) + " bytes of device memory at its peak, over "
          "ch03.h's budget of " + std::to_string(budget) + " bytes (the given launcher's buffers: q, out, the two "
          "caches, the lengths) by " + std::to_string(run.device_bytes_peak - budget) +
          " bytes — the scores belong in shared memory, not in a global buffer");
    }
    if (run.device_bytes_peak < floor) {
      throw std::runtime_error(
          "exercise 3.2 held only " + std::to_string(run.device_bytes_peak) + " bytes of device memory at its peak, "
          "less than the two caches (" + std::to_string(floor) + " bytes, ch03.h's budget): the kernel must read K and "
          "V on the device, not an answer computed on the host");
    }
  };
}

// sim::student::kv_append as a KvAppendFn: the cache's bytes and lengths go in, every byte and the
// lengths come back. A std::invalid_argument (a full sequence) comes back as itself, after the
// bytes the call left (so the check sees a refused append that wrote anyway).
void student_append(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  g_last_kernel.clear();
  Tensor<float> k = cache_tensor(cache.k_fp32().data(), cache.shape());
  Tensor<float> v = cache_tensor(cache.v_fp32().data(), cache.shape());
  const std::vector<int32_t> before = cache.lengths();
  std::vector<int32_t> after(before.size(), -1);
  CallNote note;
  const testing::IsolatedRun run = testing::run_isolated(
      [&] {
        Tensor<float> k_got = k, v_got = v;  // the student's own tensors and lengths
        std::vector<int32_t> lengths = before;
        try {
          sim::student::kv_append(k_got, v_got, lengths, k_new, v_new);
        } catch (const std::invalid_argument& error) {
          note.refused = 1;
          copy_text(note.message, error.what());
        }
        note.shapes_kept = k_got.shape() == k.shape() && v_got.shape() == v.shape();
        if (note.shapes_kept) {
          std::copy_n(k_got.data(), k_got.size(), k.data());
          std::copy_n(v_got.data(), v_got.size(), v.data());
        }
        note.lengths_size = lengths.size();
        std::copy_n(lengths.begin(), std::min(lengths.size(), after.size()), after.begin());
        note_last_launch(note);
      },
      {output_bytes(k.span()), output_bytes(v.span()), output_bytes(std::span<int32_t>(after)), output_bytes(note)});
  if (!note.shapes_kept) throw std::runtime_error("exercise 3.1: kv_append changed the shape of k_cache or v_cache");
  if (note.lengths_size != before.size())
    throw std::runtime_error("exercise 3.1: kv_append resized lengths from " + std::to_string(before.size()) + " to " +
                             std::to_string(note.lengths_size) + " entries");
  if (note.refused) {
    for (size_t b = 0; b < before.size(); ++b) {
      if (after[b] != before[b])
        throw std::runtime_error("exercise 3.1: kv_append refused the append (std::invalid_argument: " +
                                 std::string(note.message) + ") but changed lengths[" + std::to_string(b) + "] from " +
                                 std::to_string(before[b]) + " to " + std::to_string(after[b]) +
                                 " first: a refused append changes nothing");
    }
    std::memcpy(cache.k_bytes().data(), k.data(), cache.bytes_per_tensor());
    std::memcpy(cache.v_bytes().data(), v.data(), cache.bytes_per_tensor());
    throw std::invalid_argument(note.message);
  }
  require_a_launch("3.1", run, note);
  for (size_t b = 0; b < before.size(); ++b) {
    if (after[b] != before[b] + 1)
      throw std::runtime_error("kv_append left lengths[" + std::to_string(b) + "] = " + std::to_string(after[b]) +
                               ", expected " + std::to_string(before[b] + 1));
  }
  std::memcpy(cache.k_bytes().data(), k.data(), cache.bytes_per_tensor());
  std::memcpy(cache.v_bytes().data(), v.data(), cache.bytes_per_tensor());
  cache.commit_append();
}

// The lab's CPU versions, to grade each exercise on its own.
void cpu_append(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  cache.append(k_new, v_new);
}

// A ragged batch drawn fresh: 1 to 4 sequences of 1 to @p max_length tokens, 1 to 3 decode
// steps, a GQA ratio of 1, 2, 4 or 8, any head_dim, a capacity slack of 0 (full) to 9.
DecodeCase fresh_decode_case(testing::SeededRng& rng, int64_t max_length) {
  DecodeCase c;
  c.lengths.assign(size_t(rng.integer(1, 4)), 0);
  for (int64_t& length : c.lengths) length = rng.integer(1, max_length);
  c.steps = rng.integer(1, std::min<int64_t>(3, *std::min_element(c.lengths.begin(), c.lengths.end())));
  c.num_kv_heads = rng.integer(1, 2);
  c.num_heads = c.num_kv_heads * (int64_t(1) << rng.integer(0, 3));
  c.head_dim = rng.integer(1, 130);
  c.capacity_slack = rng.integer(0, 9);
  return c;
}

using testing::expect_all;

// DecodeCase fields: {final lengths, decode steps, num_heads, num_kv_heads, head_dim,
// capacity slack (max_seq_len − longest length; default 3), logit scale}.

// ---- 3.1 kv_append: the new token at slot lengths[b], nothing else touched ----

void expect_append_bytes(const std::vector<DecodeCase>& cases) {
  expect_all(cases, [](const DecodeCase& c) {
    return noted(testing::append_matches_reference(student_append, KvDtype::fp32, c, /*check_schedules=*/true));
  });
}

TEST(Ch03Append, WritesOnlyTheNewSlots) {
  // The whole cache, poisoned slots included, must equal the CPU append's byte for byte, under
  // every thread schedule: a first token (length 0 → 1), a sequence filled to capacity, head_dim
  // below and above the block (7, 80, 128), a wide ragged batch; then two batches drawn fresh.
  std::vector<DecodeCase> cases = {{{1, 6, 3}, 1, 4, 2, 80},
                                   {{5, 5}, 1, 8, 1, 7, 0},
                                   {{33, 2, 17, 9}, 1, 8, 4, 128},
                                   {{31}, 1, 2, 2, 96, 20},
                                   {{2, 4, 1, 3, 7, 12}, 1, 4, 1, 65}};
  testing::SeededRng rng;
  for (int i = 0; i < 2; ++i) {
    DecodeCase fresh = fresh_decode_case(rng, 60);
    fresh.steps = 1;
    cases.push_back(fresh);
  }
  expect_append_bytes(cases);
}

TEST(Ch03Append, EveryStepOfGeneration) {
  // Append token after token (decoded by cpu/decode): each step equals row t of the causal
  // prefill, so every token landed in its slot of its head. The odd shapes, then one drawn fresh.
  std::vector<DecodeCase> cases = testing::odd_decode_cases(kMaxLength);
  testing::SeededRng rng;
  cases.push_back(fresh_decode_case(rng, 60));
  expect_all(cases, [](const DecodeCase& c) {
    return noted(testing::decode_steps_match_prefill(decode_cpu_naive, KvDtype::fp32, student_append, c));
  });
}

TEST(Ch03Append, RefusesAFullSequence) {
  // A working append first (a stub fails here, once), then a batch whose sequence 1 is full:
  // std::invalid_argument naming lengths[1], and not one byte or length changed.
  const ::testing::AssertionResult works =
      testing::append_matches_reference(student_append, KvDtype::fp32, {{3, 2}, 1, 2, 1, 16});
  if (!works) {
    ADD_FAILURE() << noted(works).message();
    return;
  }
  EXPECT_TRUE(noted(testing::append_rejects_full_sequence(student_append, KvDtype::fp32)));
}

// ---- 3.2 decode_attention: one query per sequence against its cached tokens ----

void expect_decode(const std::vector<DecodeCase>& cases, int threads_per_block = 128) {
  expect_all(cases, [threads_per_block](const DecodeCase& c) {
    return noted(testing::decode_steps_match_prefill(student_decode(threads_per_block), KvDtype::fp32, cpu_append, c));
  });
}

TEST(Ch03Decode, OddShapes) {
  // Lengths 1, 2, 5, 9, 31, 33, 64, 127, 129 (ragged), head_dim 64/80/96/128, GQA 1/2/4/8, several steps
  // each, a sequence that fills its cache, extreme logits; then two batches drawn fresh.
  std::vector<DecodeCase> cases = testing::odd_decode_cases(kMaxLength);
  testing::SeededRng rng;
  for (int i = 0; i < 2; ++i) cases.push_back(fresh_decode_case(rng, 70));
  expect_decode(cases);
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
    return noted(
        testing::decode_steps_match_prefill(student_decode(c.threads_per_block), KvDtype::fp32, cpu_append, c.shape));
  });
}

TEST(Ch03Decode, SameOutputUnderEverySchedule) {
  // Forward, reverse and shuffled thread orders must give the same bits: a missing
  // __syncthreads() makes the result depend on the order.
  const std::vector<LaunchCase> cases = {
      {{{33, 5, 17}, 1, 8, 2, 80}}, {{{47, 2}, 1, 4, 4, 128}}, {{{29, 3}, 1, 2, 1, 64}, 96}};
  expect_all(cases, [](const LaunchCase& c) {
    return noted(testing::decode_same_under_schedules(student_decode(c.threads_per_block), KvDtype::fp32, c.shape));
  });
}

}  // namespace
}  // namespace inferlab
