// Exercise 10.1 — Megatron's sharding of a weight matrix: a straightforward answer (the lab's is
// Weight::take_rows / take_columns, kernels/layers/weight.cpp). See exercises/10-parallelism/ch10.h.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "10-parallelism/ch10.h"
#include "common/check.h"

namespace inferlab::student {

namespace {

// The checks both shards share, in ch10.h's order; @p split is "out" or "in", the dimension cut.
void check_shard(std::span<const float> w, int64_t out, int64_t in, int rank, int ranks, const char* split,
                 int64_t split_size) {
  require(ranks >= 1, "ranks", ranks, "must be ≥ 1");
  require(rank >= 0 && rank < ranks, "rank", rank, "must be in [0, ranks = " + std::to_string(ranks) + ")");
  require(out >= 1, "out", out, "must be ≥ 1");
  require(in >= 1, "in", in, "must be ≥ 1");
  require(split_size % ranks == 0, split, split_size, "must be divisible by ranks = " + std::to_string(ranks));
  require(int64_t(w.size()) == out * in, "w.size()", w.size(), "must be out · in = " + std::to_string(out * in));
}

}  // namespace

std::vector<float> column_parallel_shard(std::span<const float> w, int64_t out, int64_t in, int rank, int ranks) {
  check_shard(w, out, in, rank, ranks, "out", out);
  const int64_t rows = out / ranks;
  const auto first = w.begin() + rank * rows * in;  // the block's rows are contiguous
  return {first, first + rows * in};
}

std::vector<float> row_parallel_shard(std::span<const float> w, int64_t out, int64_t in, int rank, int ranks) {
  check_shard(w, out, in, rank, ranks, "in", in);
  const int64_t cols = in / ranks;
  std::vector<float> shard;
  shard.reserve(size_t(out * cols));
  for (int64_t o = 0; o < out; ++o) {
    const auto first = w.begin() + o * in + rank * cols;
    shard.insert(shard.end(), first, first + cols);
  }
  return shard;
}

}  // namespace inferlab::student
