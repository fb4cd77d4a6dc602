#pragma once
/// @file versions.h
/// Decode attention as registered versions (common/version.h): the signature every version
/// has, and the rows of chapters 03–04 (cpu/decode, cpu/decode_simd, cpu/decode_int8_simd,
/// cuda/decode, cuda/decode_int8, cuda/decode_fp8). Chapter 05's split-KV rows are in
/// kernels/fused/versions.h; kernels/registry.h lists them all.

#include <functional>
#include <string>
#include <vector>

#include "common/version.h"
#include "kernels/decode/decode.h"

namespace inferlab {

/// The signature every decode version has: one step for the ragged batch of @p cache — read q
/// [batch, num_heads, head_dim] and the first lengths[b] tokens of each sequence, write every
/// element of @p out (already shaped like q). Host tensors in and out; device versions copy.
using DecodeFn = std::function<void(const Tensor<float>& q, const KvCache& cache, Tensor<float>& out)>;

/// One registered decode implementation for caches of one element type (Version::input): a
/// kernel that reads several types has one row per type, so that tests and benchmarks see every
/// combination and tolerances follow the type. Every format of that type is accepted (INT8:
/// per-token or per-channel K scales, fp32 or fp16 scales).
using DecodeVersion = Version<DecodeFn, KvDtype>;

/// A decode row for caches of @p dtype: @p run wrapped so that a cache of another element type
/// throws std::invalid_argument naming the row's type; precision from the type.
DecodeVersion decode_row(std::string name, Backend backend, KvDtype dtype, int chapter, std::string summary,
                         DecodeFn run);

/// add_device_rows() for decode: each row wrapped as decode_row() does (a cache of another element
/// type than the row's is refused).
void add_decode_device_rows(std::vector<DecodeVersion>& versions, const std::vector<DeviceRow<DecodeFn, KvDtype>>& rows);

/// The decode versions of chapters 03 and 04 compiled into this build.
std::vector<DecodeVersion> plain_decode_rows();

}  // namespace inferlab
