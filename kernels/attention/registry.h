#pragma once
/// @file registry.h
/// The registry of prefill attention versions. Tests iterate over it (every version on every
/// available backend against the oracle), benchmarks sweep it, and the CLI selects from it by
/// name. Adding a version is one file plus one line in registry.cpp.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/backend.h"
#include "common/tolerance.h"
#include "kernels/attention/attention.h"

namespace inferlab {

/// The signature every prefill attention version has: read q/k/v, write every element of out
/// (already shaped like q). Inputs are host tensors; device versions copy in and out.
using AttentionFn = std::function<void(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                       bool causal, Tensor<float>& out)>;

/// One registered implementation on one backend.
struct AttentionVersion {
  std::string name;     ///< e.g. "cpu/naive", "cuda/tiled" (a cuda/... kernel runs on sim and cuda)
  Backend backend;      ///< where this entry runs
  Precision precision;  ///< the arithmetic it uses, which picks its tolerance
  int chapter;          ///< the chapter that teaches it
  std::string summary;  ///< one line for listings
  AttentionFn run;      ///< the implementation
};

/// Every prefill attention version compiled into this build, in chapter order.
const std::vector<AttentionVersion>& attention_versions();

/// The version called @p name on @p backend. Throws std::invalid_argument listing the versions
/// that exist when there is none.
const AttentionVersion& find_attention_version(std::string_view name, Backend backend);

}  // namespace inferlab
