#pragma once
/// @file versions.h
/// KV-cache append as registered versions (common/version.h): the signature and the rows
/// (cpu/append for every format; cuda/append for fp32/fp16, cuda/append_int8 for INT8).

#include <functional>
#include <vector>

#include "common/version.h"
#include "kernels/kv/kv_cache.h"

namespace inferlab {

/// The signature of an append version: append one token per sequence (@p k_new, @p v_new
/// [batch, num_kv_heads, head_dim]) at slot lengths[b] and increment the lengths. Throws
/// std::invalid_argument, writing nothing, when a sequence is full or (quantized formats) a
/// value is not finite (KvCache::check_append).
using KvAppendFn = std::function<void(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new)>;

/// One registered append implementation for caches of one element type (Version::input).
using KvAppendVersion = Version<KvAppendFn, KvDtype>;

/// The append versions compiled into this build, one row per cache element type each writes.
std::vector<KvAppendVersion> append_rows();

}  // namespace inferlab
