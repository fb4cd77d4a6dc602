#include "kernels/registry.h"

#include <algorithm>
#include <string>

#include "kernels/fused/versions.h"

namespace inferlab {

namespace {

// @p first then @p second, in chapter order (stable: each chapter's rows keep their order).
template <class Row>
std::vector<Row> in_chapter_order(std::vector<Row> first, const std::vector<Row>& second = {}) {
  first.insert(first.end(), second.begin(), second.end());
  std::stable_sort(first.begin(), first.end(), [](const Row& a, const Row& b) { return a.chapter < b.chapter; });
  return first;
}

}  // namespace

const std::vector<AttentionVersion>& attention_versions() {
  static const std::vector<AttentionVersion> versions = in_chapter_order(unfused_attention_rows(), fused_attention_rows());
  return versions;
}

const std::vector<DecodeVersion>& decode_versions() {
  static const std::vector<DecodeVersion> versions = in_chapter_order(plain_decode_rows(), split_decode_rows());
  return versions;
}

const std::vector<KvAppendVersion>& kv_append_versions() {
  static const std::vector<KvAppendVersion> versions = in_chapter_order(append_rows());
  return versions;
}

const std::vector<PrefillWithCacheVersion>& prefill_with_cache_versions() {
  static const std::vector<PrefillWithCacheVersion> versions = in_chapter_order(prefill_with_cache_rows());
  return versions;
}

const AttentionVersion& find_attention_version(std::string_view name, Backend backend) {
  return find_version(attention_versions(), name, backend);
}

const DecodeVersion& find_decode_version(std::string_view name, Backend backend, KvDtype cache_dtype) {
  return find_version(decode_versions(), name, backend, cache_dtype);
}

const KvAppendVersion& kv_append_version_for(Backend backend, KvDtype cache_dtype) {
  for (const KvAppendVersion& version : kv_append_versions())
    if (version.backend == backend && version.input == cache_dtype) return version;
  throw std::invalid_argument("backend = " + std::string(to_string(backend)) + ": no append version writes a " +
                              std::string(to_string(cache_dtype)) + " cache");
}

}  // namespace inferlab
