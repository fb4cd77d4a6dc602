// CHEAT (caught by the inspection: references): answers exercise 10.1 with the lab's own
// Weight::take_rows / take_columns (kernels/layers/weight.h, what the graded test compares with),
// the class declared here by hand with room for the lab's members (no include of kernels/, which
// the inspection's include check would name as well, and which does not resolve on student code's
// include path). The other exercises are the unmodified stubs.
#include <cstdint>
#include <new>
#include <span>
#include <utility>
#include <vector>

#include "10-parallelism/ch10.h"
#include "common/check.h"
#include "common/tensor.h"

namespace inferlab {
class Weight {
 public:
  explicit Weight(Tensor<float> w);
  Weight take_rows(std::span<const std::pair<int64_t, int64_t>> row_ranges) const;
  Weight take_columns(int64_t begin, int64_t end) const;
  const Tensor<float>& f32() const;

 private:
  alignas(64) unsigned char storage_[1024];
};
}  // namespace inferlab

namespace inferlab::student {

namespace {

std::vector<float> copy_out(const Weight& shard) {
  const std::span<const float> values = shard.f32().span();
  return {values.begin(), values.end()};
}

}  // namespace

std::vector<float> column_parallel_shard(std::span<const float> w, int64_t out, int64_t in, int rank, int ranks) {
  const int64_t rows = out / ranks;
  const Weight whole(Tensor<float>({out, in}, std::vector<float>(w.begin(), w.end())));
  const std::pair<int64_t, int64_t> range{rank * rows, (rank + 1) * rows};
  return copy_out(whole.take_rows(std::span(&range, 1)));
}

std::vector<float> row_parallel_shard(std::span<const float> w, int64_t out, int64_t in, int rank, int ranks) {
  const int64_t cols = in / ranks;
  const Weight whole(Tensor<float>({out, in}, std::vector<float>(w.begin(), w.end())));
  return copy_out(whole.take_columns(rank * cols, (rank + 1) * cols));
}

}  // namespace inferlab::student
