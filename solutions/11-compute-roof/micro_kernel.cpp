// Exercise 11.2 — a straightforward answer. See exercises/11-compute-roof/ch11.h.
#include <cmath>
#include <cstring>

#include "11-compute-roof/ch11.h"
#include "common/half.h"

namespace inferlab::student {

void micro_kernel_q8_0(const uint8_t* group, int64_t blocks, const ActivationBlock* const* rows, int num_rows,
                       float* y) {
  float acc[4][16] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = group + b * 544;
    const uint8_t* codes = block + 32;  // q + 128
    int32_t sum[4][16] = {};
    for (int c = 0; c < 8; ++c)
      for (int t = 0; t < 4; ++t)
        for (int r = 0; r < num_rows; ++r) {
          const int32_t x = rows[r][b].codes[4 * c + t];
          for (int o = 0; o < 16; ++o) sum[r][o] += (int32_t(codes[64 * c + 4 * o + t]) - 128) * x;
        }
    for (int o = 0; o < 16; ++o) {
      uint16_t d_bits;
      std::memcpy(&d_bits, block + 2 * o, 2);
      const float d_w = half_bits_to_float(d_bits);
      for (int r = 0; r < num_rows; ++r) acc[r][o] = std::fma(d_w * rows[r][b].d, float(sum[r][o]), acc[r][o]);
    }
  }
  for (int r = 0; r < num_rows; ++r)
    for (int o = 0; o < 16; ++o) y[r * 16 + o] = acc[r][o];
}

}  // namespace inferlab::student
