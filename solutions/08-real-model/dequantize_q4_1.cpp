// Exercise 8.1 — decode a Q4_1 row: a straightforward answer (the lab's is
// kernels/quant/block_quant.cpp). See exercises/08-real-model/ch08.h.
#include <span>
#include <string>

#include "08-real-model/ch08.h"
#include "common/check.h"
#include "common/half.h"

namespace inferlab::student {

void dequantize_q4_1(std::span<const BlockQ4_1> blocks, std::span<float> out) {
  // ---- given: the check ----
  require(out.size() == size_t(kBlockValues) * blocks.size(), "out.size()", out.size(),
          "must be 32 · blocks.size() = " + std::to_string(size_t(kBlockValues) * blocks.size()));

  constexpr size_t kHalf = kBlockValues / 2;
  for (size_t b = 0; b < blocks.size(); ++b) {
    const float d = half_bits_to_float(blocks[b].d), m = half_bits_to_float(blocks[b].m);
    float* values = out.data() + b * kBlockValues;
    for (size_t j = 0; j < kHalf; ++j) {
      // q·d is exact in fp32 (4 bits × an 11-bit significand): adding m rounds once.
      values[j] = float(blocks[b].qs[j] & 15) * d + m;          // low nibble: value j
      values[j + kHalf] = float(blocks[b].qs[j] >> 4) * d + m;  // high nibble: value j + 16
    }
  }
}

}  // namespace inferlab::student
