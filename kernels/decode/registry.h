#pragma once
/// @file registry.h
/// The registries of chapter 03: decode attention versions and KV-cache append versions.
/// Tests iterate over them (every version on every available backend, fp32 and fp16 caches),
/// benchmarks sweep them and the CLI selects from them by name. Adding a version is one file
/// plus one line in registry.cpp.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/backend.h"
#include "common/tolerance.h"
#include "kernels/decode/decode.h"
#include "kernels/decode/decode_fp8.h"
#include "kernels/decode/decode_int8.h"
#include "kernels/decode/kv_cache.h"

namespace inferlab {

/// The signature every decode version has: one step for the ragged batch of @p cache — read q
/// [batch, num_heads, head_dim] and the first lengths[b] tokens of each sequence, write every
/// element of @p out (already shaped like q). Host tensors in and out; device versions copy.
/// A version throws std::invalid_argument when @p cache's dtype is not one it was registered
/// for (DecodeVersion::cache_dtype).
using DecodeFn = std::function<void(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out)>;

/// One registered decode implementation, on one backend, for one cache dtype.
struct DecodeVersion {
  std::string name;     ///< e.g. "cpu/decode", "cuda/decode" (a cuda/... kernel runs on sim and cuda)
  Backend backend;      ///< where this entry runs
  KvDtype cache_dtype;  ///< the cache it reads (the same name is registered once per dtype)
  int chapter;          ///< the chapter that teaches it
  std::string summary;  ///< one line for listings
  DecodeFn run;         ///< the implementation
  /// The arithmetic, which picks the test tolerance: fp32, or fp16 for an fp16 cache.
  Precision precision() const { return precision_of(cache_dtype); }
};

/// Every decode version compiled into this build, in chapter order.
const std::vector<DecodeVersion>& decode_versions();

/// The version called @p name on @p backend for a @p cache_dtype cache. Throws
/// std::invalid_argument listing the versions that exist when there is none.
const DecodeVersion& find_decode_version(std::string_view name, Backend backend, KvDtype cache_dtype);

/// The signature of an append version: append one token per sequence (@p k_new, @p v_new
/// [batch, num_kv_heads, head_dim]) at slot lengths[b] and increment the lengths. Throws
/// std::invalid_argument, writing nothing, when a sequence is full (KvCache::check_append).
using KvAppendFn = std::function<void(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new)>;

/// One registered append implementation (each handles fp32 and fp16 caches).
struct KvAppendVersion {
  std::string name;     ///< "cpu/append", "cuda/append"
  Backend backend;      ///< where it runs
  int chapter;          ///< the chapter that teaches it
  std::string summary;  ///< one line for listings
  KvAppendFn run;       ///< the implementation
};

/// Every append version compiled into this build.
const std::vector<KvAppendVersion>& kv_append_versions();

/// The append version that runs on @p backend ("cpu/append" on cpu, "cuda/append" on sim and
/// cuda). Throws std::invalid_argument when there is none.
const KvAppendVersion& kv_append_version_for(Backend backend);

/// One registered INT8-cache decode implementation (chapter 04). Every version handles both
/// K scalings (KeyScaling); tests run each on both.
struct Int8DecodeVersion {
  std::string name;     ///< "cpu/decode_int8_simd", "cuda/decode_int8"
  Backend backend;      ///< where this entry runs
  int chapter;          ///< the chapter that teaches it
  std::string summary;  ///< one line for listings
  Int8DecodeFn run;     ///< the implementation
};

/// Every INT8 decode version compiled into this build.
const std::vector<Int8DecodeVersion>& int8_decode_versions();

/// One registered quantize-on-append implementation (chapter 04).
struct Int8AppendVersion {
  std::string name;     ///< "cpu/append_int8", "cuda/append_int8"
  Backend backend;      ///< where it runs
  int chapter;          ///< the chapter that teaches it
  std::string summary;  ///< one line for listings
  Int8AppendFn run;     ///< the implementation
};

/// Every quantize-on-append version compiled into this build.
const std::vector<Int8AppendVersion>& int8_append_versions();

/// The quantize-on-append version for @p backend; throws std::invalid_argument when none.
const Int8AppendVersion& int8_append_version_for(Backend backend);

/// One registered FP8 (E4M3)-cache decode implementation (chapter 04; the cache is quantized on
/// append by Fp8KvCache on the CPU).
struct Fp8DecodeVersion {
  std::string name;     ///< "cuda/decode_fp8"
  Backend backend;      ///< where this entry runs
  int chapter;          ///< the chapter that teaches it
  std::string summary;  ///< one line for listings
  Fp8DecodeFn run;      ///< the implementation
};

/// Every FP8 decode version compiled into this build.
const std::vector<Fp8DecodeVersion>& fp8_decode_versions();

}  // namespace inferlab
