#pragma once
/// @file versions.h
/// Prefill attention as registered versions (common/version.h): the signature every version
/// has, and the rows of chapters 01–02. Chapter 05's fused rows are in kernels/fused/versions.h;
/// kernels/registry.h lists them all.

#include <functional>
#include <vector>

#include "common/version.h"
#include "kernels/attention/attention.h"

namespace inferlab {

/// The signature every prefill attention version has: read q/k/v, write every element of out
/// (already shaped like q). Inputs are host tensors; device versions copy in and out.
using AttentionFn = std::function<void(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                                       bool causal, Tensor<float>& out)>;

/// One registered prefill attention implementation (its precision picks its tolerance).
using AttentionVersion = Version<AttentionFn>;

/// The prefill versions of chapters 01 and 02 compiled into this build (cpu/naive, cpu/blocked,
/// cpu/openblas; cuda/naive, cuda/tiled, cuda/cublas[_fp16|_bf16] on sim and, with nvcc, cuda).
std::vector<AttentionVersion> unfused_attention_rows();

}  // namespace inferlab
