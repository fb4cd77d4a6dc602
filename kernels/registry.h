#pragma once
/// @file registry.h
/// Every registered version of this build, assembled from each chapter's rows (the top of the
/// kernels/ tree: see kernels/README.md). Tests iterate over these lists (every version on
/// every available backend against the float64 oracle), benchmarks sweep them and the CLI
/// selects from them by name. Adding a version is one file plus one row in its folder's
/// versions.cpp.

#include <string_view>
#include <vector>

#include "kernels/attention/versions.h"
#include "kernels/decode/versions.h"
#include "kernels/kv/versions.h"
#include "kernels/paged/versions.h"

namespace inferlab {

/// Every prefill attention version compiled into this build, in chapter order (01, 02, 05).
const std::vector<AttentionVersion>& attention_versions();
/// Every decode version compiled into this build, in chapter order (03, 04, 05).
const std::vector<DecodeVersion>& decode_versions();
/// Every KV-cache append version compiled into this build.
const std::vector<KvAppendVersion>& kv_append_versions();
/// Every prefill-with-cache version compiled into this build (chapter 06).
const std::vector<PrefillWithCacheVersion>& prefill_with_cache_versions();

/// The prefill version called @p name on @p backend (find_version over attention_versions()).
const AttentionVersion& find_attention_version(std::string_view name, Backend backend);
/// The decode version called @p name on @p backend registered for @p cache_dtype caches.
const DecodeVersion& find_decode_version(std::string_view name, Backend backend, KvDtype cache_dtype);
/// The append version that writes @p cache_dtype caches on @p backend: cpu/append on cpu;
/// cuda/append (fp32, fp16) or cuda/append_int8 (int8) on sim and cuda. Throws
/// std::invalid_argument when there is none (no device append for FP8).
const KvAppendVersion& kv_append_version_for(Backend backend, KvDtype cache_dtype);

}  // namespace inferlab
