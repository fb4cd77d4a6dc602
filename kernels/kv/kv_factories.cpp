// The KV-cache factories of kv_factories.h: external data into a cache, the scattered block
// order, the paged copy of a contiguous cache.
#include "kernels/kv/kv_factories.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>
#include <string>

#include "common/ceil_div.h"
#include "common/check.h"

namespace inferlab {

KvCache make_kv_cache(const Tensor<float>& k, const Tensor<float>& v, const std::vector<int64_t>& lengths,
                      KvFormat format) {
  check_rank(k, 4, "k");
  check_shape(v, k.shape(), "v");
  const KvCacheShape shape{k.dim(0), k.dim(1), k.dim(2), k.dim(3)};
  require(int64_t(lengths.size()) == shape.batch, "lengths.size()", lengths.size(),
          "must equal batch = k.shape[0] = " + std::to_string(shape.batch));
  for (size_t b = 0; b < lengths.size(); ++b)
    require(lengths[b] >= 0 && lengths[b] <= shape.max_seq_len, "lengths[" + std::to_string(b) + "]", lengths[b],
            "must be in [0, max_seq_len = " + std::to_string(shape.max_seq_len) + "]");
  KvCache cache(shape, format);
  const int64_t d = shape.head_dim;
  for (int64_t b = 0; b < shape.batch; ++b) {
    const int64_t L = lengths[size_t(b)];
    Tensor<float> k_b({shape.num_kv_heads, L, d}), v_b({shape.num_kv_heads, L, d});
    for (int64_t g = 0; g < shape.num_kv_heads; ++g) {
      std::copy_n(k.data() + shape.offset(b, g, 0), L * d, k_b.data() + g * L * d);
      std::copy_n(v.data() + shape.offset(b, g, 0), L * d, v_b.data() + g * L * d);
    }
    cache.prefill(b, k_b, v_b);
  }
  return cache;
}

std::vector<int32_t> scattered_block_order(int64_t count, uint64_t seed) {
  require(count >= 0 && count <= INT32_MAX, "count", count, "must be in [0, 2^31)");
  std::vector<int32_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 random(seed);
  std::shuffle(order.begin(), order.end(), random);
  if (count < 3) {  // {0, 1} can only avoid 0 → 1 by being reversed
    std::reverse(order.begin(), order.end());
    if (count == 2 && order[0] + 1 == order[1]) std::swap(order[0], order[1]);
    return order;
  }
  // Repair every i with order[i + 1] = order[i] + 1 by swapping order[i + 1] with a random
  // position whose neighbours it does not continue (and vice versa); a few rounds settle it.
  const auto follows = [&](size_t i) { return i + 1 < order.size() && order[i + 1] == order[i] + 1; };
  const auto clean_at = [&](size_t i) { return !(i > 0 && follows(i - 1)) && !follows(i); };
  for (int round = 0; round < 1000; ++round) {
    bool clean = true;
    for (size_t i = 0; i + 1 < order.size(); ++i) {
      if (!follows(i)) continue;
      clean = false;
      const size_t j = size_t(random() % order.size());
      std::swap(order[i + 1], order[j]);
      if (!clean_at(i + 1) || !clean_at(j)) std::swap(order[i + 1], order[j]);
    }
    if (clean) return order;
  }
  throw std::logic_error("scattered_block_order: no scattered order found");
}

KvCache to_paged(const KvCache& cache, int64_t block_size, uint64_t seed, BlockOrder order) {
  require_positive("block_size", block_size);
  require(!cache.paged(), "cache", "paged", "is already paged");
  const KvCacheShape& shape = cache.shape();
  const int64_t blocks_per_seq = ceil_div(shape.max_seq_len, block_size);
  KvCache paged(shape, cache.format(), KvPaging{block_size, shape.batch * blocks_per_seq});
  std::vector<int32_t> ids(static_cast<size_t>(shape.batch * blocks_per_seq));
  if (order == BlockOrder::scattered) {
    ids = scattered_block_order(shape.batch * blocks_per_seq, seed);
  } else {
    std::iota(ids.begin(), ids.end(), 0);
  }
  for (int64_t b = 0; b < shape.batch; ++b)
    paged.set_block_table(b, std::span<const int32_t>(ids).subspan(size_t(b * blocks_per_seq), size_t(blocks_per_seq)));
  // Row by row, bytes as stored: codes and scales travel unchanged.
  const size_t row_bytes = size_t(shape.head_dim) * cache.format().element_bytes();
  const size_t scale_bytes = cache.format().scale_bytes();
  for (int64_t layer = 0; layer < shape.num_layers; ++layer)
    for (int64_t b = 0; b < shape.batch; ++b)
      for (int64_t g = 0; g < shape.num_kv_heads; ++g)
        for (int64_t t = 0; t < cache.length(b); ++t) {
          const size_t from = size_t(layer * cache.rows_per_layer() + cache.row(b, g, t));
          const size_t to = size_t(layer * paged.rows_per_layer() + paged.row(b, g, t));
          std::memcpy(paged.k_bytes().data() + to * row_bytes, cache.k_bytes().data() + from * row_bytes, row_bytes);
          std::memcpy(paged.v_bytes().data() + to * row_bytes, cache.v_bytes().data() + from * row_bytes, row_bytes);
          if (scale_bytes > 0) {
            std::memcpy(paged.k_scale_bytes().data() + to * scale_bytes,
                        cache.k_scale_bytes().data() + from * scale_bytes, scale_bytes);
            std::memcpy(paged.v_scale_bytes().data() + to * scale_bytes,
                        cache.v_scale_bytes().data() + from * scale_bytes, scale_bytes);
          }
        }
  std::vector<int64_t> lengths(cache.lengths().begin(), cache.lengths().end());
  paged.set_lengths(lengths);
  paged.add_saturated(cache.saturated_count());
  return paged;
}

}  // namespace inferlab
