#pragma once
/// @file split_kv.h
/// Split-KV decode (flash-decoding), chapter 05: the plumbing shared by cpu/decode_split and
/// cuda/decode_split — how many splits, which keys each split covers, and the exact reduce.
///
/// Chapter 03's decode gives each (sequence, KV head) — or (sequence, query head) on a GPU — to
/// one worker. At batch 1 with few KV heads that is one or two workers for the whole machine,
/// however long the context: a 32K-token step on one core of two leaves half the memory
/// bandwidth unused. Split-KV decode cuts each sequence's keys into S splits; every
/// (sequence, head, split) computes a partial result over its keys — the unnormalised output
/// acc_i = Σ_j exp(s_j − m_i)·v_j, the max m_i and the sum l_i = Σ_j exp(s_j − m_i) — and a
/// reduce combines the S partials exactly:
///
///     m = max_i m_i,   out = Σ_i exp(m_i − m)·acc_i / Σ_i exp(m_i − m)·l_i
///
/// An empty split (S > length) has m_i = −inf, l_i = 0, acc_i = 0 and weight exp(−inf) = 0.
///
/// Choosing S (choose_num_splits): split only as much as it takes to fill the machine.
///   S = ⌈target_items / work_items⌉, where work_items is what the unsplit kernel has
///   (batch · num_kv_heads on the CPU, batch · num_heads blocks on a GPU) and target_items is
///   what fills the machine (a few items per core; a few blocks per SM);
///   then S ≤ ⌊max_length / min_tokens⌋ so that a split is long enough to stream efficiently
///   and the partials and the reduce stay small next to it (each split writes d + 2 floats per
///   head; the reduce reads them back); and S ≥ ⌈max_length / max_tokens⌉ where a split has a
///   hard size limit (the GPU's scores live in shared memory). Large batches get S = 1: there
///   the plain decode already fills the machine, and splitting only adds the reduce.
/// Tests and benchmarks pass S explicitly; S = 1 is the unsplit kernel plus a trivial reduce.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/ceil_div.h"
#include "common/tensor.h"
#include "kernels/decode/decode.h"

namespace inferlab {

/// How a backend wants its splits (see this file's comment).
struct SplitPolicy {
  int64_t target_items = 1;  ///< (sequence, head, split) items that fill the machine
  int64_t min_tokens = 1;    ///< the shortest split worth making
  /// The longest split the kernel can hold (max() when unbounded).
  int64_t max_tokens = std::numeric_limits<int64_t>::max();
};

/// The number of splits S for @p work_items unsplit items over sequences of at most
/// @p max_length tokens under @p policy:
/// max(⌈max_length / max_tokens⌉, min(⌈target_items / work_items⌉, max(1, ⌊max_length / min_tokens⌋))).
/// Throws std::invalid_argument naming an argument that is not positive.
int64_t choose_num_splits(int64_t work_items, int64_t max_length, const SplitPolicy& policy);

/// cpu/decode_split's policy on this machine: 4 items per OpenMP thread (the dynamic schedule
/// balances a ragged batch), splits of at least 512 tokens (256 KiB of an fp32 K row stream at
/// d = 128: long enough that prefetching pays and the partials are noise), no upper bound.
SplitPolicy cpu_split_policy();

/// Keys [begin, end) of split @p split of a sequence of @p length tokens cut into
/// @p num_splits splits of ⌈length / num_splits⌉ keys (the last ones shorter or empty).
struct SplitRange {
  int64_t begin = 0;  ///< first key
  int64_t end = 0;    ///< one past the last key (= begin for an empty split)
};

/// The keys of split @p split (see SplitRange).
inline SplitRange split_range(int64_t length, int64_t num_splits, int64_t split) {
  const int64_t per_split = ceil_div(length, num_splits);
  const int64_t begin = std::min(length, split * per_split);
  return {begin, std::min(length, begin + per_split)};
}

/// The partial results of one split-KV decode step on the host: for every (sequence b, query
/// head h, split s), the unnormalised output acc (head_dim floats), its max and its sum.
struct SplitPartials {
  /// Room for @p shape's batch and heads, @p num_splits splits each.
  SplitPartials(const DecodeShape& shape, int64_t num_splits);
  int64_t num_splits;      ///< S
  int64_t head_dim;        ///< d
  std::vector<float> acc;  ///< [batch][num_heads][S][head_dim]
  std::vector<float> max;  ///< [batch][num_heads][S]: −inf for an empty split
  std::vector<float> sum;  ///< [batch][num_heads][S]: 0 for an empty split
  /// Index of (sequence·num_heads + head, split) in max and sum; × head_dim in acc.
  int64_t index(int64_t row, int64_t split) const { return row * num_splits + split; }
};

/// The split-KV reduce on the host: out[row] = Σ_s exp(m_s − m)·acc_s / Σ_s exp(m_s − m)·l_s
/// for every (sequence, head) row of @p out ([batch, num_heads, head_dim]), m = max_s m_s.
void reduce_splits(const SplitPartials& partials, Tensor<float>& out);

/// cpu/decode_split with @p num_splits splits per sequence (≥ 1, else std::invalid_argument
/// naming num_splits): OpenMP over (sequence, KV head, split) items, each running chapter 03's
/// two SIMD passes (cpu_decode_keys.h) over its keys for the whole GQA group, then
/// reduce_splits(). fp32 or fp16 cache, fp32 arithmetic.
void decode_cpu_split(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out, int64_t num_splits);

/// cpu/decode_split as registered: S = choose_num_splits(batch · num_kv_heads,
/// cache.max_length(), cpu_split_policy()).
void decode_cpu_split(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out);

}  // namespace inferlab
