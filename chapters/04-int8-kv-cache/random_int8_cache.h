#pragma once
/// @file random_int8_cache.h
/// A full INT8 KV cache of random bytes and scales, for the chapter-04 benchmark: quantizing
/// gigabytes of random floats would take longer than the measurement, so (as chapter 03's
/// random_full_cache) 1 MiB of random int8 values — N(0, 1) data quantized with a typical
/// scale, max|x| ≈ 3.2 over a row of 128 — is drawn once and repeated over K and V, and every
/// scale is drawn around that typical 3.2/127. Timing does not care that values repeat.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "common/half.h"
#include "common/rng.h"
#include "kernels/kv/kv_cache.h"
#include "kernels/kv/quantize.h"

namespace inferlab {

/// An INT8 cache of @p shape (K scales per @p key_scaling, stored as @p scale_dtype) whose every
/// sequence holds max_seq_len tokens of random values (see the file comment).
inline KvCache random_full_int8_cache(const KvCacheShape& shape, KeyScaling key_scaling, ScaleDtype scale_dtype,
                                          Rng& rng) {
  KvCache cache(shape, KvFormat::int8(key_scaling, scale_dtype));
  constexpr float kTypicalStep = 3.2f / 127.0f;
  std::vector<int8_t> block(size_t(1) << 20);
  for (int8_t& byte : block) byte = quantize_int8(rng.normal(), kTypicalStep);
  const auto repeat = [&](std::span<int8_t> to, size_t start) {
    for (size_t i = 0; i < to.size(); i += block.size() - start, start = 0)
      std::copy_n(block.begin() + std::ptrdiff_t(start), std::min(block.size() - start, to.size() - i),
                  to.begin() + std::ptrdiff_t(i));
  };
  repeat(cache.k_int8(), 0);
  repeat(cache.v_int8(), block.size() / 2);  // V starts half a block later: K and V differ
  const auto scale = [&] { return kTypicalStep * (1.0f + 0.1f * std::fabs(rng.normal())); };
  if (scale_dtype == ScaleDtype::fp32) {
    for (float& s : cache.k_scales()) s = scale();
    for (float& s : cache.v_scales()) s = scale();
  } else {
    for (uint16_t& s : cache.k_scales_fp16()) s = scale_to_fp16_up(scale());
    for (uint16_t& s : cache.v_scales_fp16()) s = scale_to_fp16_up(scale());
  }
  cache.set_lengths(std::vector<int64_t>(size_t(shape.batch), shape.max_seq_len));
  return cache;
}

}  // namespace inferlab
