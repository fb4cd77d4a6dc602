#pragma once
/// @file random_cache.h
/// A full KV cache of random values, built fast enough for a benchmark or the tour to allocate
/// gigabytes of it: drawing 10⁹ normal numbers would take longer than the measurement, so a
/// 1 MiB block of random values is drawn once and tiled over K and V (V starts half a block
/// later, so K and V differ). Timing does not care that the values repeat; the softmax sees
/// ordinary N(0, 1) data.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/half.h"
#include "common/rng.h"
#include "kernels/kv/kv_cache.h"

namespace inferlab {

/// A cache of @p shape and @p dtype whose every sequence holds max_seq_len tokens of random
/// values (see the file comment).
inline KvCache random_full_cache(const KvCacheShape& shape, KvDtype dtype, Rng& rng) {
  KvCache cache(shape, dtype);
  constexpr size_t kBlockBytes = size_t(1) << 20;
  std::vector<std::byte> block(kBlockBytes);
  const size_t element_bytes = bytes_per_element(dtype);
  for (size_t i = 0; i < kBlockBytes / element_bytes; ++i) {
    const float x = rng.normal();
    if (dtype == KvDtype::fp16) {
      const uint16_t bits = float_to_half_bits(x);
      std::memcpy(block.data() + i * element_bytes, &bits, sizeof bits);
    } else {
      std::memcpy(block.data() + i * element_bytes, &x, sizeof x);
    }
  }
  const auto tile = [&](std::byte* to, size_t start) {
    for (size_t done = 0, from = start; done < cache.bytes_per_tensor();) {
      const size_t n = std::min(kBlockBytes - from, cache.bytes_per_tensor() - done);
      std::memcpy(to + done, block.data() + from, n);
      done += n;
      from = 0;
    }
  };
  tile(cache.k_bytes().data(), 0);
  tile(cache.v_bytes().data(), kBlockBytes / 2);
  cache.set_lengths(std::vector<int64_t>(size_t(shape.batch), shape.max_seq_len));
  return cache;
}

}  // namespace inferlab
