// The dot-product ceilings of the roofline (roofline.h): how many int8 and bf16 operations a second
// this CPU's dot-product instructions can do, measured the way the fp32 FMA peak is — every thread
// keeps 12 independent accumulator chains in registers, so the loop waits on the instruction's
// throughput, not its latency (a vpdpbusd has a latency of about 5 cycles and most cores issue 1–2
// a cycle).
//
// Counting: one operation is one multiply or one add, as for FLOPs, so a zmm vpdpbusd (64 byte
// products summed four by four into 16 int32 lanes) does 128 operations and a ymm one 64; the AVX2
// sequence vpmaddubsw → vpmaddwd → vpaddd does 32 products and 32 adds a ymm (64 operations, three
// instructions); a zmm vdpbf16ps (32 bf16 products summed in pairs into 16 fp32 lanes) does 64.
//
// Each kernel is compiled for its own instructions (GCC's target attribute) and run only when the
// CPU reports them (__builtin_cpu_supports), so the answer never depends on the build's -march.
#include "common/dot_ceilings.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "common/register_chains.h"
#include "common/timer.h"

#if defined(__x86_64__) || defined(__i386__)
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 headers (the `__Y = __Y` undefined
// pass-through operand, GCC bug 105593), located in the header: silenced for this file.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#define INFERLAB_X86 1
#endif

namespace inferlab {
namespace {


#if defined(INFERLAB_X86)
// Each kernel: `iterations` rounds of 12 chains, each chain acc = instruction(acc, a, b). The
// operands vary with the seed so that nothing folds to a constant; the result is returned so that
// nothing is optimized away. Integer lanes wrap harmlessly.
__attribute__((target("avx512f,avx512vnni"))) int64_t dpbusd_zmm(long iterations, int seed) {
  const __m512i a = _mm512_set1_epi32(0x01020304 + seed), b = _mm512_set1_epi32(0x05060708 - seed);
#define DECLARE(n) __m512i acc##n = _mm512_set1_epi32(seed + n);
  INFERLAB_CHAINS(DECLARE)
#undef DECLARE
  for (long i = 0; i < iterations; ++i) {
#define STEP(n) acc##n = _mm512_dpbusd_epi32(acc##n, a, b);
    INFERLAB_CHAINS(STEP)
#undef STEP
  }
  __m512i total = _mm512_setzero_si512();
#define SUM(n) total = _mm512_add_epi32(total, acc##n);
  INFERLAB_CHAINS(SUM)
#undef SUM
  // Summed in int64 from memory: the lanes wrap by design, and _mm512_reduce_add_epi32 adds them in
  // int, an overflow UBSan reports.
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, total);
  int64_t sum = 0;
  for (const int32_t lane : lanes) sum += lane;
  return sum;
}

// The same instruction on ymm registers, EVEX-encoded (AVX512-VNNI with AVX512-VL: Ice Lake and
// later, AMD Zen 4).
__attribute__((target("avx512f,avx512vl,avx512vnni"))) int64_t dpbusd_ymm_evex(long iterations, int seed) {
  const __m256i a = _mm256_set1_epi32(0x01020304 + seed), b = _mm256_set1_epi32(0x05060708 - seed);
#define DECLARE(n) __m256i acc##n = _mm256_set1_epi32(seed + n);
  INFERLAB_CHAINS(DECLARE)
#undef DECLARE
  for (long i = 0; i < iterations; ++i) {
#define STEP(n) acc##n = _mm256_dpbusd_epi32(acc##n, a, b);
    INFERLAB_CHAINS(STEP)
#undef STEP
  }
  __m256i total = _mm256_setzero_si256();
#define SUM(n) total = _mm256_add_epi32(total, acc##n);
  INFERLAB_CHAINS(SUM)
#undef SUM
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), total);
  int64_t sum = 0;
  for (const int32_t lane : lanes) sum += lane;
  return sum;
}

// The VEX-encoded AVX-VNNI form (Intel Alder Lake and later; AMD Zen 4 has only the EVEX form).
__attribute__((target("avx2,avxvnni"))) int64_t dpbusd_ymm_vex(long iterations, int seed) {
  const __m256i a = _mm256_set1_epi32(0x01020304 + seed), b = _mm256_set1_epi32(0x05060708 - seed);
#define DECLARE(n) __m256i acc##n = _mm256_set1_epi32(seed + n);
  INFERLAB_CHAINS(DECLARE)
#undef DECLARE
  for (long i = 0; i < iterations; ++i) {
#define STEP(n) acc##n = _mm256_dpbusd_avx_epi32(acc##n, a, b);
    INFERLAB_CHAINS(STEP)
#undef STEP
  }
  __m256i total = _mm256_setzero_si256();
#define SUM(n) total = _mm256_add_epi32(total, acc##n);
  INFERLAB_CHAINS(SUM)
#undef SUM
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), total);
  int64_t sum = 0;
  for (const int32_t lane : lanes) sum += lane;
  return sum;
}

// AVX2 without VNNI: vpmaddubsw (u8 × s8, adjacent pairs summed to int16), vpmaddwd with ones
// (pairs of int16 summed to int32), vpaddd into the accumulator. The operands are chosen so that
// no int16 pair saturates (the instruction's real limit, which the quantized kernels respect).
__attribute__((target("avx2"))) int64_t maddubs_ymm(long iterations, int seed) {
  const __m256i a = _mm256_set1_epi32(0x01020304 + seed), b = _mm256_set1_epi32(0x05060708 - seed);
  const __m256i ones = _mm256_set1_epi16(1);
#define DECLARE(n) __m256i acc##n = _mm256_set1_epi32(seed + n);
  INFERLAB_CHAINS(DECLARE)
#undef DECLARE
  for (long i = 0; i < iterations; ++i) {
    // The products do not depend on the accumulators: an asm barrier keeps the compiler from
    // hoisting them out of the loop (in a real GEMM each one has new operands).
#define STEP(n)                                                               \
  {                                                                           \
    __m256i p##n = _mm256_maddubs_epi16(a, b);                                \
    __asm__("" : "+x"(p##n));                                                 \
    acc##n = _mm256_add_epi32(acc##n, _mm256_madd_epi16(p##n, ones));         \
  }
    INFERLAB_CHAINS(STEP)
#undef STEP
  }
  __m256i total = _mm256_setzero_si256();
#define SUM(n) total = _mm256_add_epi32(total, acc##n);
  INFERLAB_CHAINS(SUM)
#undef SUM
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), total);
  int64_t sum = 0;
  for (const int32_t lane : lanes) sum += lane;
  return sum;
}

// bf16 pairs into fp32 lanes (AVX512-BF16: Cooper Lake, Sapphire Rapids, AMD Zen 4).
__attribute__((target("avx512f,avx512bf16"))) int64_t dpbf16_zmm(long iterations, int seed) {
  const __m512bh a = (__m512bh)_mm512_set1_epi16(short(0x3f80 + seed));  // ~1.0
  const __m512bh b = (__m512bh)_mm512_set1_epi16(short(0x3380));         // ~6e-8: values stay finite
#define DECLARE(n) __m512 acc##n = _mm512_set1_ps(float(seed + n));
  INFERLAB_CHAINS(DECLARE)
#undef DECLARE
  for (long i = 0; i < iterations; ++i) {
#define STEP(n) acc##n = _mm512_dpbf16_ps(acc##n, a, b);
    INFERLAB_CHAINS(STEP)
#undef STEP
  }
  __m512 total = _mm512_setzero_ps();
#define SUM(n) total = _mm512_add_ps(total, acc##n);
  INFERLAB_CHAINS(SUM)
#undef SUM
  return int64_t(_mm512_reduce_add_ps(total));
}
#endif

struct DotKernel {
  const char* instruction;
  double ops_per_iteration;  // operations one thread does in one round of the 12 chains
  int64_t (*run)(long, int);
};

// Best operations a second (×1e-9) of @p kernel on all OpenMP threads over about @p seconds.
double dot_gops(const DotKernel& kernel, double seconds) {
  constexpr long kIterations = 1L << 19;
  double best = 0.0;
  int64_t sink = 0;
  Stopwatch total;
  for (int pass = 0; pass < 3 || total.seconds() < seconds; ++pass) {
    int ran = 0;
    Stopwatch stopwatch;
#pragma omp parallel reduction(+ : sink, ran)
    {
      sink += kernel.run(kIterations, omp_get_thread_num());
      ran += 1;
    }
    const double elapsed = stopwatch.seconds();
    if (pass > 0) best = std::max(best, kernel.ops_per_iteration * double(kIterations) * ran / elapsed / 1e9);
  }
  volatile int64_t keep = sink;
  (void)keep;
  return best;
}

}  // namespace

namespace {

// Every dot-product kernel this CPU reports, the int8 ones first, widest first.
std::vector<DotKernel> available_dot_kernels() {
  std::vector<DotKernel> kernels;
#if defined(INFERLAB_X86)
  __builtin_cpu_init();
  const bool avx512_vnni = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
  if (avx512_vnni) kernels.push_back({"vpdpbusd zmm (AVX512-VNNI)", kChains * 128.0, dpbusd_zmm});
  if (avx512_vnni && __builtin_cpu_supports("avx512vl"))
    kernels.push_back({"vpdpbusd ymm (AVX512-VNNI, EVEX)", kChains * 64.0, dpbusd_ymm_evex});
  if (__builtin_cpu_supports("avxvnni")) kernels.push_back({"vpdpbusd ymm (AVX-VNNI, VEX)", kChains * 64.0, dpbusd_ymm_vex});
  if (__builtin_cpu_supports("avx2")) kernels.push_back({"vpmaddubsw+vpmaddwd ymm (AVX2)", kChains * 64.0, maddubs_ymm});
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16"))
    kernels.push_back({"vdpbf16ps zmm (AVX512-BF16)", kChains * 64.0, dpbf16_zmm});
#endif
  return kernels;
}

}  // namespace

double int8_ceiling_now(double seconds) {
  // The kernel measure_dot_ceilings() finds fastest: zmm where it exists, else AVX2's sequence
  // (on the lab's CPUs faster than ymm vpdpbusd, which issues from one port), else AVX-VNNI.
  const std::vector<DotKernel> kernels = available_dot_kernels();
  const DotKernel* pick = nullptr;
  for (const DotKernel& k : kernels) {
    const std::string_view name(k.instruction);
    if (name.find("bf16") != std::string_view::npos) continue;
    if (pick == nullptr || name.find("zmm") != std::string_view::npos ||
        (std::string_view(pick->instruction).find("zmm") == std::string_view::npos &&
         name.find("AVX2") != std::string_view::npos))
      pick = &k;
  }
  if (pick == nullptr) return 0.0;
  constexpr long kIterations = 1L << 16;  // a pass: about 0.2 ms (a fork of the threads costs µs)
  double ops = 0.0;
  int64_t sink = 0;
  const Stopwatch total;
  do {
    int ran = 0;
#pragma omp parallel reduction(+ : sink, ran)
    {
      sink += pick->run(kIterations, omp_get_thread_num());
      ran += 1;
    }
    ops += pick->ops_per_iteration * double(kIterations) * ran;
  } while (total.seconds() < seconds);
  volatile int64_t keep = sink;
  (void)keep;
  return ops / total.seconds() / 1e9;
}

std::vector<DotCeiling> measure_dot_ceilings(double seconds) {
  const std::vector<DotKernel> kernels = available_dot_kernels();
  std::vector<DotCeiling> ceilings;
  if (kernels.empty()) return ceilings;
  const double each = seconds / double(kernels.size());
  for (const DotKernel& kernel : kernels) {
    const bool bf16 = std::string_view(kernel.instruction).find("bf16") != std::string_view::npos;
    ceilings.push_back({bf16 ? DotType::bf16 : DotType::int8, kernel.instruction, dot_gops(kernel, each)});
  }
  return ceilings;
}

}  // namespace inferlab
