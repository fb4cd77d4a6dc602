// CHEAT (caught by the inspection: references): answers exercise 8.1 with the reference
// dequantizer of kernels/quant/block_quant.h, declared here by hand (no include of kernels/, which
// the inspection's include check would name as well). The other exercises are the unmodified
// stubs.
#include <cstdint>
#include <span>

#include "08-real-model/ch08.h"

namespace inferlab::quant {
struct BlockQ4_1 {  // the lab's block, the same bytes as the contract's
  uint16_t d, m;
  uint8_t qs[16];
};
void dequantize_row_q4_1(std::span<const BlockQ4_1> x, std::span<float> y);  // the reference's
}  // namespace inferlab::quant

namespace inferlab::student {

void dequantize_q4_1(std::span<const BlockQ4_1> blocks, std::span<float> out) {
  inferlab::quant::dequantize_row_q4_1(
      std::span(reinterpret_cast<const inferlab::quant::BlockQ4_1*>(blocks.data()), blocks.size()), out);
}

}  // namespace inferlab::student
