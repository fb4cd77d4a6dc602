// CHEAT (caught by the inspection: references): answers exercise 11.1 with the lab's own
// quant::PackedMatrix (kernels/quant/packed_matrix.h, what the graded test compares with), the
// class and its argument declared here by hand with room for the lab's members (no include of
// kernels/, which the inspection's include check would name as well, and which does not resolve on
// student code's include path). The other exercises are the unmodified stubs.
#include <cstdint>
#include <span>
#include <vector>

#include "11-compute-roof/ch11.h"

namespace inferlab::quant {
enum class GgmlType : uint32_t { q8_0 = 8 };
struct BlockMatrix {
  GgmlType type;
  int64_t out, in;
  std::span<const uint8_t> bytes;
};
class PackedMatrix {
 public:
  explicit PackedMatrix(const BlockMatrix& w);
  ~PackedMatrix();
  std::span<const uint8_t> bytes() const;

 private:
  alignas(64) unsigned char storage_[256];
};
}  // namespace inferlab::quant

namespace inferlab::student {

std::vector<uint8_t> repack_q8_0(std::span<const uint8_t> gguf_rows, int64_t out, int64_t in) {
  const quant::PackedMatrix lab({quant::GgmlType::q8_0, out, in, gguf_rows});
  const std::span<const uint8_t> bytes = lab.bytes();
  return {bytes.begin(), bytes.end()};
}

}  // namespace inferlab::student
