#include "common/tensor.h"

namespace inferlab {

std::string to_string(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

int64_t element_count(const Shape& shape) {
  int64_t count = 1;
  for (int64_t extent : shape) {
    require(extent >= 0, "shape", to_string(shape), "extents must be >= 0");
    require(extent == 0 || count <= std::numeric_limits<int64_t>::max() / extent, "shape", to_string(shape),
            "element count overflows int64");
    count *= extent;
  }
  return count;
}

}  // namespace inferlab
