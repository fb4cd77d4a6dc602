#pragma once
/// @file versions.h
/// Chapter 05's registered versions (common/version.h): the fused prefill rows (cpu/flash,
/// cuda/flash, cuda/flash_tc[_bf16]) and the split-KV decode rows (cpu/decode_split,
/// cuda/decode_split). kernels/registry.h lists them with the other chapters' rows.

#include <vector>

#include "kernels/attention/versions.h"
#include "kernels/decode/versions.h"

namespace inferlab {

/// The fused prefill versions compiled into this build.
std::vector<AttentionVersion> fused_attention_rows();

/// The split-KV decode versions compiled into this build, one row per cache dtype they read
/// (fp32, fp16).
std::vector<DecodeVersion> split_decode_rows();

}  // namespace inferlab
