#pragma once
/// @file versions.h
/// Chapter 06's registered versions (common/version.h): prefill with a cache
/// (cpu/prefill_with_cache, cuda/prefill_with_cache), one row per cache element type they read.
/// The paged *decode* is every decode version of chapters 03–05 (kernels/decode, kernels/fused)
/// run on a paged cache: no rows of its own. kernels/registry.h lists them all.

#include <functional>
#include <vector>

#include "common/version.h"
#include "kernels/paged/prefill_with_cache.h"

namespace inferlab {

/// The signature every prefill-with-cache version has (prefill_with_cache.h): read q
/// [num_tokens, num_heads, head_dim] and the cache, write every element of @p out (shaped like q).
using PrefillWithCacheFn = std::function<void(const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths,
                                              const KvCache& cache, Tensor<float>& out)>;

/// One registered prefill-with-cache implementation for caches of one element type
/// (Version::input); a cache of another type is refused with std::invalid_argument.
using PrefillWithCacheVersion = Version<PrefillWithCacheFn, KvDtype>;

/// The prefill-with-cache versions compiled into this build.
std::vector<PrefillWithCacheVersion> prefill_with_cache_rows();

}  // namespace inferlab
