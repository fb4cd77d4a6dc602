// Exercise 10.1 — Megatron's sharding of a weight matrix [out][in]: a column-parallel layer's
// block of rows (whole outputs), a row-parallel layer's block of columns (partial sums). See
// ch10.h for the rules and a worked example.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "10-parallelism/ch10.h"
#include "common/check.h"

namespace inferlab::student {

std::vector<float> column_parallel_shard(std::span<const float> w, int64_t out, int64_t in, int rank, int ranks) {
  throw NotImplemented("column_parallel_shard");  // TODO(student): delete this line once written

  // TODO(student): the checks, in ch10.h's order, each a require(ok, "name", value, "rule")
  // (ranks ≥ 1; rank in [0, ranks); out, in ≥ 1; ranks divides out; w.size() == out · in). Then
  // rows = out / ranks: return the rows [rank · rows, (rank + 1) · rows) of w — they are
  // contiguous in the row-major layout, one copy. (roughly 8 lines)
  (void)w, (void)out, (void)in, (void)rank, (void)ranks;
  return {};
}

std::vector<float> row_parallel_shard(std::span<const float> w, int64_t out, int64_t in, int rank, int ranks) {
  throw NotImplemented("row_parallel_shard");  // TODO(student): delete this line once written

  // TODO(student): the same checks, with ranks dividing in (not out). Then cols = in / ranks: for
  // every row o, append w[o · in + rank · cols … o · in + (rank + 1) · cols) — a matrix
  // [out][cols]. (roughly 9 lines)
  (void)w, (void)out, (void)in, (void)rank, (void)ranks;
  return {};
}

}  // namespace inferlab::student
