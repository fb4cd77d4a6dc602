// Exercise 8.1 — decode a Q4_1 row: value = q·d + m, ggml's nibble order. See ch08.h for the task
// and a worked example.
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

  throw NotImplemented("dequantize_q4_1");  // TODO(student): delete this line once written

  // TODO(student): for each block b: d = half_bits_to_float(blocks[b].d), m = likewise .m; for
  // j = 0 … 15: out[32·b + j] = float(qs[j] & 15)·d + m (the LOW nibble is value j) and
  // out[32·b + j + 16] = float(qs[j] >> 4)·d + m (the HIGH nibble is value j + 16). (roughly 8 lines)
}

}  // namespace inferlab::student
