// Exercise 8.2 — the Q4_1 × Q8_1 dot product: a straightforward answer (the lab's SIMD kernels are
// kernels/quant/cpu_quant_matmul.cpp). See exercises/08-real-model/ch08.h.
#include <cmath>
#include <cstdint>
#include <span>
#include <string>

#include "08-real-model/ch08.h"
#include "common/check.h"
#include "common/half.h"

namespace inferlab::student {

float dot_q4_1_q8_1(std::span<const BlockQ4_1> w, std::span<const BlockQ8_1> x) {
  // ---- given: the checks ----
  require(!w.empty(), "w.size()", w.size(), "must be ≥ 1 block");
  require(x.size() == w.size(), "x.size()", x.size(),
          "must equal w.size() = " + std::to_string(w.size()) + " (one activation block per weight block)");

  constexpr int kHalf = int(kBlockValues) / 2;
  float acc = 0.0f;
  for (size_t b = 0; b < w.size(); ++b) {
    int32_t sum = 0;  // exact: |sum| ≤ 32 · 15 · 128
    for (int j = 0; j < kHalf; ++j) {
      sum += int32_t(w[b].qs[j] & 15) * int32_t(x[b].qs[j]);
      sum += int32_t(w[b].qs[j] >> 4) * int32_t(x[b].qs[j + kHalf]);
    }
    const float dd = half_bits_to_float(w[b].d) * half_bits_to_float(x[b].d);  // exact: fp16 × fp16
    acc = std::fma(dd, float(sum), acc);
    acc = std::fma(half_bits_to_float(w[b].m), half_bits_to_float(x[b].s), acc);  // m_w · d_x·Σq_x
  }
  return acc;
}

}  // namespace inferlab::student
