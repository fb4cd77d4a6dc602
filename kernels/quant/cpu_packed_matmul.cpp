// packed_matmul_cpu() (packed_matmul.h): the checks, the activations quantized once, the choice of
// instructions at run time, and the scalar version over the packed layout.
//
// Version ladder of the quantized GEMM (chapter 11's lesson has the measured figures and how to
// rerun them: `build/default/chapters/11-compute-roof/bench_ch11`):
//   v1  chapter 08 (cpu_quant_matmul.cpp): GGUF's row-major blocks, 4 rows × 4 outputs a tile,
//       8 (row, output) block sums gathered by a horizontal-add tree before their fma
//   v2  this file's versions: the weights repacked at load (16 outputs interleaved), a tile of
//       MR rows × NV vectors of outputs, one broadcast + one vpdpbusd per row and 4 values, no
//       horizontal sum; rows blocked to fit L2 (MC); instructions chosen at run time
#include "kernels/quant/packed_matmul.h"

#include <omp.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/half.h"
#include "kernels/quant/block_quant.h"
#include "kernels/quant/cpu_packed_gemm.h"

#if defined(__x86_64__)
#define INFERLAB_PACKED_X86 1
#endif

namespace inferlab::quant {
namespace {

using packed::Activation;
using packed::GemmArgs;

// The contract's arithmetic over the packed layout, one (row, output) at a time: thread @p thread's
// share of the outputs.
void gemm_scalar(const GemmArgs& a, int thread, int threads) {
  const PackedMatrix& w = *a.w;
  const int64_t blocks = w.blocks(), out = w.out();
  const bool q4_0 = w.type() == GgmlType::q4_0;
  for (int64_t o = out * thread / threads; o < out * (thread + 1) / threads; ++o)
    for (int64_t r = 0; r < a.rows; ++r) {
      const Activation* x = a.act + r * blocks;
      float acc = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        int32_t sum = 0;
        for (int j = 0; j < 32; ++j) sum += (w.code(o, b * 32 + j) - (q4_0 ? 8 : 0)) * int32_t(x[b].qs[j]);
        acc = std::fma(half_bits_to_float(w.scale_bits(o, b)) * x[b].d, float(sum), acc);
        if (w.type() == GgmlType::q4_1) acc = std::fma(half_bits_to_float(w.min_bits(o, b)), x[b].s, acc);
      }
      a.y[r * out + o] = acc;
    }
}

// Row @p row of x quantized as chapter 08's kernel quantizes it — quantize_block_q8(), the code of
// quantize_row_q8_0 / _q8_1, so the same codes and scales — straight into the micro-kernel's blocks
// (the scales widened back from fp16, Q8_1's s with them; the sums' start from the codes' sum).
void quantize_activation_row(const float* x, int64_t in, bool q8_1, int32_t offset, Activation* to) {
  for (int64_t b = 0; b < in / 32; ++b) {
    Activation& a = to[b];
    int sum = 0;
    const float d = quantize_block_q8(x + b * 32, a.qs, sum);
    a.d = half_bits_to_float(float_to_half_bits(d));
    a.s = q8_1 ? half_bits_to_float(float_to_half_bits(float(sum) * d)) : 0.0f;
    a.start = -offset * sum;
  }
}

size_t l2_cache_bytes() {
  static const size_t bytes = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? size_t(l2) : size_t(1) << 20;  // 1 MiB when the OS does not say
  }();
  return bytes;
}

size_t l1_cache_bytes() {
  static const size_t bytes = [] {
    const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    return l1 > 0 ? size_t(l1) : size_t(32) << 10;  // 32 KiB when the OS does not say
  }();
  return bytes;
}

}  // namespace

std::string_view to_string(PackedKernel kernel) {
  switch (kernel) {
    case PackedKernel::scalar:
      return "scalar";
    case PackedKernel::avx2:
      return "avx2";
    case PackedKernel::avx_vnni:
      return "avx-vnni";
    case PackedKernel::avx512_vnni:
      return "avx512-vnni";
  }
  return "?";
}

std::string_view instruction(PackedKernel kernel) {
  switch (kernel) {
    case PackedKernel::scalar:
      return "scalar C++";
    case PackedKernel::avx2:
      return "vpmaddubsw+vpmaddwd ymm (AVX2)";
    case PackedKernel::avx_vnni:
      return "vpdpbusd ymm (AVX-VNNI, VEX)";
    case PackedKernel::avx512_vnni:
      return "vpdpbusd zmm (AVX512-VNNI)";
  }
  return "?";
}

namespace {

// What CPUID says of one kernel's instructions (asked once: cpu_has() is called on every GEMM).
bool cpu_reports(PackedKernel kernel) {
#if INFERLAB_PACKED_X86
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  switch (kernel) {
    case PackedKernel::scalar:
      return true;
    case PackedKernel::avx2:
      return avx2;
    case PackedKernel::avx_vnni:
      return avx2 && __builtin_cpu_supports("avxvnni");
    case PackedKernel::avx512_vnni:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") && avx2;
  }
  return false;
#else
  return kernel == PackedKernel::scalar;
#endif
}

}  // namespace

bool cpu_has(PackedKernel kernel) {
  static const bool has[] = {cpu_reports(PackedKernel::scalar), cpu_reports(PackedKernel::avx2),
                             cpu_reports(PackedKernel::avx_vnni), cpu_reports(PackedKernel::avx512_vnni)};
  const int k = int(kernel);
  return k >= 0 && k < 4 && has[k];
}

std::vector<PackedKernel> available_packed_kernels() {
  std::vector<PackedKernel> kernels;
  for (const PackedKernel k : {PackedKernel::scalar, PackedKernel::avx2, PackedKernel::avx_vnni, PackedKernel::avx512_vnni})
    if (cpu_has(k)) kernels.push_back(k);
  return kernels;
}

PackedKernel best_packed_kernel() {
  static const PackedKernel best = available_packed_kernels().back();
  return best;
}

QuantGemmChoice quant_gemm_choice() {
  static const QuantGemmChoice chosen = [] {
    QuantGemmChoice c;
    c.kernel = best_packed_kernel();
    const char* name = std::getenv("INFERLAB_QUANT_GEMM");
    if (name == nullptr || *name == '\0') return c;
    if (std::string_view(name) == "ch08") {
      c.chapter08 = true;
      return c;
    }
    std::string known = "ch08";
    for (const PackedKernel k : available_packed_kernels()) {
      if (to_string(k) == name) {
        c.kernel = k;
        return c;
      }
      known += ", " + std::string(to_string(k));
    }
    require(false, "INFERLAB_QUANT_GEMM", name, "must be empty or one of: " + known + " (the kernels this CPU has)");
    return c;
  }();
  return chosen;
}

void packed_matmul_cpu(const Tensor<float>& x, const PackedMatrix& w, Tensor<float>& y, PackedKernel kernel) {
  check_rank(x, 2, "x");
  require(x.dim(1) == w.in(), "x.shape[1]", x.dim(1), "must equal the weights' input size w.in = " + std::to_string(w.in()));
  check_shape(y, {x.dim(0), w.out()}, "y");
  require(cpu_has(kernel), "kernel", to_string(kernel), "is not one this CPU can run (see available_packed_kernels())");
  const int64_t rows = x.dim(0), in = w.in(), blocks = w.blocks();
  if (rows == 0 || w.out() == 0) return;
  // Each activation row quantized once per call, into a buffer kept between calls (no allocation
  // per decode step); its pointer taken here, outside the parallel region.
  thread_local std::vector<Activation> act;
  act.resize(size_t(rows * blocks));
  Activation* const a = act.data();
  const bool q8_1 = w.type() == GgmlType::q4_1;
  const int32_t offset =
      packed::code_offset(w.type(), kernel == PackedKernel::avx512_vnni || kernel == PackedKernel::avx_vnni);
  const GemmArgs args{a, rows, &w, y.data(), l2_cache_bytes(), l1_cache_bytes()};
  // One parallel region for both steps (waking the threads costs microseconds; only when there is
  // work for them, as chapter 08's kernel): each thread quantizes its share of the rows, waits for
  // the others (every panel needs every row), then computes its share of the output panels. A few
  // rows (a decode step) are quantized before the region instead: no barrier to wait at.
  const bool few_rows = rows * in < (int64_t{1} << 14);
  if (few_rows)
    for (int64_t r = 0; r < rows; ++r) quantize_activation_row(x.data() + r * in, in, q8_1, offset, a + r * blocks);
#pragma omp parallel if (rows * w.out() * in >= (int64_t{1} << 18))
  {
    const int thread = omp_get_thread_num(), threads = omp_get_num_threads();
    if (!few_rows) {
      for (int64_t r = rows * thread / threads; r < rows * (thread + 1) / threads; ++r)
        quantize_activation_row(x.data() + r * in, in, q8_1, offset, a + r * blocks);
#pragma omp barrier
    }
    switch (kernel) {
#if INFERLAB_PACKED_X86
      case PackedKernel::avx512_vnni:
        packed::gemm_avx512_vnni(args, thread, threads);
        break;
      case PackedKernel::avx_vnni:
        packed::gemm_avx_vnni(args, thread, threads);
        break;
      case PackedKernel::avx2:
        packed::gemm_avx2(args, thread, threads);
        break;
#endif
      default:
        gemm_scalar(args, thread, threads);
    }
  }
}

}  // namespace inferlab::quant
