// Chapter 05, CPU prefill: cpu/flash (fused, online softmax) against the float64 oracle and
// against chapter 02's unfused cpu/blocked on odd shapes (seq_len around its blocks, head_dim
// not a multiple of the vector width, GQA, causal and not, logits in the hundreds), and a
// memory test that the fused path never allocates an O(L²) buffer.
#include <gtest/gtest.h>

#include <malloc.h>
#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "common/compare.h"
#include "kernels/registry.h"
#include "kernels/fused/fused.h"
#include "tests/support/attention_check.h"
#include "tests/support/seeded.h"

// ---- heap accounting for the memory test ----
//
// Every operator new of this test binary (std::vector, Tensor, the kernels' AlignedFloats, which
// uses the aligned operator new) goes through these replacements, which keep the bytes live and
// their peak while counting is switched on. Sizes come from malloc_usable_size(), so delete
// needs no size.
namespace {

std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_live_bytes{0}, g_peak_bytes{0};

void note_allocation(void* p) {
  if (p == nullptr || !g_counting.load(std::memory_order_relaxed)) return;
  const int64_t live = g_live_bytes.fetch_add(int64_t(malloc_usable_size(p))) + int64_t(malloc_usable_size(p));
  int64_t peak = g_peak_bytes.load();
  while (live > peak && !g_peak_bytes.compare_exchange_weak(peak, live)) {
  }
}

void note_release(void* p) {
  if (p != nullptr && g_counting.load(std::memory_order_relaxed))
    g_live_bytes.fetch_sub(int64_t(malloc_usable_size(p)));
}

void* counted_alloc(size_t bytes, size_t alignment) {
  void* p = alignment <= alignof(std::max_align_t)
                ? std::malloc(bytes == 0 ? 1 : bytes)
                : std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  if (p == nullptr) throw std::bad_alloc();
  note_allocation(p);
  return p;
}

void counted_free(void* p) {
  note_release(p);
  std::free(p);
}

}  // namespace

void* operator new(size_t bytes) {
  return counted_alloc(bytes, 1);
}
void* operator new[](size_t bytes) {
  return counted_alloc(bytes, 1);
}
void* operator new(size_t bytes, std::align_val_t alignment) {
  return counted_alloc(bytes, size_t(alignment));
}
void* operator new[](size_t bytes, std::align_val_t alignment) {
  return counted_alloc(bytes, size_t(alignment));
}
void operator delete(void* p) noexcept {
  counted_free(p);
}
void operator delete[](void* p) noexcept {
  counted_free(p);
}
void operator delete(void* p, size_t) noexcept {
  counted_free(p);
}
void operator delete[](void* p, size_t) noexcept {
  counted_free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  counted_free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  counted_free(p);
}
void operator delete(void* p, size_t, std::align_val_t) noexcept {
  counted_free(p);
}
void operator delete[](void* p, size_t, std::align_val_t) noexcept {
  counted_free(p);
}

namespace inferlab {
namespace {

using testing::AttentionCase;
using testing::VersionCase;

// ---- cpu/flash against the float64 oracle ----

// Odd shapes: every seq_len meets every head_dim, causal and not. seq_len straddles
// cpu/flash's blocks (192 query rows, 128 keys with AVX-512; 16 lanes per vector) and head_dim
// 1 and 7 are not whole vectors; the GQA ratio cycles 1, 2, 4, 8 over the pairs.
std::vector<AttentionCase> flash_cases() {
  const int64_t seq_lens[] = {1, 2, 17, 63, 65, 200, 513};
  const int64_t head_dims[] = {1, 7, 64, 80, 96, 128};
  const int64_t ratios[] = {1, 2, 4, 8};
  std::vector<AttentionCase> cases;
  size_t pair = 0;
  for (const int64_t L : seq_lens)
    for (const int64_t d : head_dims) {
      const int64_t ratio = ratios[pair++ % 4];
      const int64_t kv_heads = ratio == 8 ? 1 : 2;
      for (const bool causal : {false, true}) cases.push_back({kv_heads * ratio, kv_heads, L, d, causal});
    }
  // Logits in the hundreds: without the running max, exp() overflows; a rescale that is wrong
  // by one key block shows at once. Long enough for several key blocks.
  for (const float scale : {40.0f, 400.0f}) {
    cases.push_back({2, 1, 300, 64, false, scale});
    cases.push_back({4, 2, 257, 80, true, scale});
  }
  return cases;
}

std::vector<VersionCase> chapter05_cpu_cases() {
  std::vector<VersionCase> cases;
  for (const AttentionVersion& version : attention_versions()) {
    if (version.backend != Backend::cpu || version.chapter != 5) continue;
    for (const AttentionCase& shape : flash_cases()) cases.push_back({&version, shape});
    for (const AttentionCase& shape : testing::odd_attention_cases()) cases.push_back({&version, shape});
  }
  return cases;
}

class Ch05CpuAttention : public ::testing::TestWithParam<VersionCase> {};

TEST_P(Ch05CpuAttention, MatchesFloat64Oracle) {
  const VersionCase& c = GetParam();
  EXPECT_TRUE(testing::attention_matches_oracle(c.version->run, c.version->precision, c.shape));
}

INSTANTIATE_TEST_SUITE_P(Ch05, Ch05CpuAttention, ::testing::ValuesIn(chapter05_cpu_cases()),
                         testing::version_case_name);

TEST(Ch05CpuRegistry, CpuFlashIsRegisteredForChapter5) {
  const AttentionVersion& flash = find_attention_version("cpu/flash", Backend::cpu);
  EXPECT_EQ(flash.chapter, 5);
  EXPECT_EQ(flash.precision, Precision::fp32);
}

// ---- cpu/flash against chapter 02's unfused cpu/blocked, on the same inputs ----

TEST(Ch05CpuFlash, MatchesChapter02Blocked) {
  const AttentionVersion& blocked = find_attention_version("cpu/blocked", Backend::cpu);
  for (const AttentionCase& c : {AttentionCase{8, 2, 513, 96, true}, AttentionCase{4, 4, 200, 128, false},
                                 AttentionCase{2, 1, 65, 7, true}, AttentionCase{3, 1, 300, 80, false}}) {
    testing::SeededRng rng;
    const Tensor<float> q = rng.normal_tensor({c.num_heads, c.seq_len, c.head_dim});
    const Tensor<float> k = rng.normal_tensor({c.num_kv_heads, c.seq_len, c.head_dim});
    const Tensor<float> v = rng.normal_tensor({c.num_kv_heads, c.seq_len, c.head_dim});
    Tensor<float> fused(q.shape()), unfused(q.shape());
    fused.poison();
    unfused.poison();
    attention_cpu_flash(q, k, v, c.causal, fused);
    blocked.run(q, k, v, c.causal, unfused);
    // The unfused output as the reference, at the fp32 tolerance: both are fp32 computations of
    // the same definition on ordinary N(0, 1) data (logits of a few units, where the tolerance
    // needs no widening; the extreme-logit cases go through the oracle above).
    Tensor<double> reference(unfused.shape());
    for (int64_t i = 0; i < unfused.size(); ++i) reference[i] = unfused[i];
    const Comparison comparison = compare_to_oracle(fused, reference, tolerance_for(Precision::fp32));
    EXPECT_TRUE(comparison.ok) << c.name() << ": cpu/flash vs cpu/blocked\n" << comparison.report();
    // And against the oracle, so that agreeing with a wrong unfused answer cannot pass.
    const Comparison to_oracle =
        compare_to_oracle(fused, attention_reference(q, k, v, c.causal), tolerance_for(Precision::fp32));
    EXPECT_TRUE(to_oracle.ok) << c.name() << ": cpu/flash vs the float64 oracle\n" << to_oracle.report();
  }
}

// ---- memory: no O(L²) buffer ----

// Peak heap bytes allocated (and not yet freed) during one call of @p version at seq_len L.
int64_t peak_heap_bytes(const AttentionVersion& version, const Tensor<float>& q, const Tensor<float>& k,
                        const Tensor<float>& v, Tensor<float>& out) {
  version.run(q, k, v, false, out);  // once untimed: OpenMP's and the libraries' one-time allocations
  g_live_bytes = 0;
  g_peak_bytes = 0;
  g_counting = true;
  version.run(q, k, v, false, out);
  g_counting = false;
  return g_peak_bytes.load();
}

// At L = 2048 the scores of one head are L·L·4 = 16 MiB. cpu/flash allocates K and V packed
// for its micro-kernel (about the size of K and V: here 1 MiB, head_dim 64, one KV head) and,
// per OpenMP thread, O(Br·(d + Bc)) floats of scratch (~210 KiB with Br = 192, Bc = 128). The bound asserted:
//   peak ≤ 2 × (bytes of K and V) + threads × 256 KiB
// — O(L·d), and at this size less than a tenth of one L×L score matrix. cpu/openblas, which
// holds each thread's chunk of score rows (chunk_rows × L floats), must exceed it: proof that
// the accounting sees the kernels' allocations.
TEST(Ch05CpuFlashMemory, NoBufferOfOrderLSquared) {
  constexpr int64_t L = 2048, d = 64;
  testing::SeededRng rng;
  const Tensor<float> q = rng.normal_tensor({2, L, d});
  const Tensor<float> k = rng.normal_tensor({1, L, d});
  const Tensor<float> v = rng.normal_tensor({1, L, d});
  Tensor<float> out(q.shape());
  const int64_t kv_bytes = 2 * k.size() * int64_t(sizeof(float));
  const int64_t bound = 2 * kv_bytes + int64_t(omp_get_max_threads()) * 256 * 1024;
  const int64_t score_matrix = L * L * int64_t(sizeof(float));
  ASSERT_LT(bound, score_matrix / 4) << "the bound must be far below one L×L matrix for the test to mean anything";

  const int64_t flash_peak = peak_heap_bytes(find_attention_version("cpu/flash", Backend::cpu), q, k, v, out);
  EXPECT_GT(flash_peak, 0) << "the accounting saw no allocation at all";
  EXPECT_LE(flash_peak, bound) << "cpu/flash's heap peak " << flash_peak << " B exceeds the O(L·d) bound " << bound
                               << " B (one L×L score matrix: " << score_matrix << " B)";
  const int64_t openblas_peak = peak_heap_bytes(find_attention_version("cpu/openblas", Backend::cpu), q, k, v, out);
  EXPECT_GT(openblas_peak, bound) << "the unfused cpu/openblas (score rows in memory) should exceed the bound";
  std::cout << "heap peak at L = " << L << ": cpu/flash " << flash_peak << " B, cpu/openblas " << openblas_peak
            << " B, bound " << bound << " B, one L×L matrix " << score_matrix << " B\n";
}

// ---- invalid arguments ----

TEST(Ch05CpuValidation, BadShapesAreRejectedBeforeAnyWork) {
  const AttentionFn flash = find_attention_version("cpu/flash", Backend::cpu).run;
  const Tensor<float> q({4, 8, 16}), k({3, 8, 16}), v({3, 8, 16});
  Tensor<float> out({4, 8, 16});
  EXPECT_THROW(flash(q, k, v, false, out), std::invalid_argument);  // 4 heads over 3 KV heads
  const Tensor<float> kv({2, 8, 16});
  Tensor<float> wrong_out({4, 8, 15});
  EXPECT_THROW(flash(q, kv, kv, false, wrong_out), std::invalid_argument);
  const Tensor<float> short_k({2, 7, 16});
  EXPECT_THROW(flash(q, short_k, short_k, true, out), std::invalid_argument);
}

}  // namespace
}  // namespace inferlab
