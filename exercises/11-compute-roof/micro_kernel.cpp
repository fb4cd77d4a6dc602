// Exercise 11.2 — the micro-kernel (see ch11.h).
#include "11-compute-roof/ch11.h"
#include "common/check.h"
#include "common/half.h"

namespace inferlab::student {

void micro_kernel_q8_0(const uint8_t* group, int64_t blocks, const ActivationBlock* const* rows, int num_rows,
                       float* y) {
  throw NotImplemented("micro_kernel_q8_0");  // TODO(student): delete this line once your code is written
  // TODO(student): float acc[4][16] = {}; for each block: int32_t sum[4][16] = {}; for each chunk c,
  // code t, row r, output o: sum[r][o] += (byte − 128) · codes[4c + t]; then one fma a (row,
  // output) with half_bits_to_float(d_w[o]) · d_x. Store acc. (roughly 20 lines)
  (void)group, (void)blocks, (void)rows, (void)num_rows, (void)y;
}

}  // namespace inferlab::student
