// Exercise 11.1 — a straightforward answer. See exercises/11-compute-roof/ch11.h.
#include <algorithm>
#include <cstring>

#include "11-compute-roof/ch11.h"
#include "common/check.h"

namespace inferlab::student {

std::vector<uint8_t> repack_q8_0(std::span<const uint8_t> gguf_rows, int64_t out, int64_t in) {
  require(in > 0 && in % 32 == 0, "in", in, "must be a positive multiple of 32 (whole Q8_0 blocks)");
  require(out >= 0, "out", out, "must be >= 0");
  const int64_t blocks = in / 32, groups = (out + 15) / 16;
  require(int64_t(gguf_rows.size()) == out * blocks * 34, "gguf_rows.size()", gguf_rows.size(),
          "must be out · in / 32 · 34 = " + std::to_string(out * blocks * 34));
  std::vector<uint8_t> packed(size_t(groups * blocks * 544), 0x80);  // codes q = 0 (stored q + 128)
  for (int64_t block = 0; block < groups * blocks; ++block)
    std::fill_n(packed.begin() + block * 544, 32, uint8_t{0});      // scales 0
  for (int64_t row = 0; row < out; ++row)
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* from = gguf_rows.data() + (row * blocks + b) * 34;
      uint8_t* to = packed.data() + ((row / 16) * blocks + b) * 544;
      const int64_t o = row % 16;
      std::memcpy(to + 2 * o, from, 2);  // the scale
      for (int64_t c = 0; c < 8; ++c)
        for (int64_t t = 0; t < 4; ++t) to[32 + 64 * c + 4 * o + t] = uint8_t(from[2 + 4 * c + t] ^ 0x80);  // q + 128
    }
  return packed;
}

}  // namespace inferlab::student
