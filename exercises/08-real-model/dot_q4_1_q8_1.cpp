// Exercise 8.2 — the Q4_1 × Q8_1 dot product: exact integer block sums, an fma chain over the
// blocks, the minimum's term m·s. See ch08.h for the contract and a worked example.
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

  throw NotImplemented("dot_q4_1_q8_1");  // TODO(student): delete this line once written

  // TODO(student): float acc = 0; for each block b, in order:
  //   1. int32_t sum = Σ_{j<16} int32_t(w[b].qs[j] & 15) · x[b].qs[j] + int32_t(w[b].qs[j] >> 4) · x[b].qs[j + 16]
  //      (the nibble order of exercise 8.1; integers: exact);
  //   2. dd = half_bits_to_float(w[b].d) · half_bits_to_float(x[b].d)   (an exact fp32 product);
  //   3. acc = std::fma(dd, float(sum), acc);  then  acc = std::fma(m_w, s_x, acc)  (m_w and s_x
  //      widened from their fp16 bits). Keep this order: it is the lab's contract, bit for bit.
  // Return acc. (roughly 12 lines)
  return 0.0f;
}

}  // namespace inferlab::student
