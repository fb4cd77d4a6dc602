#pragma once
/// @file dot_ceilings.h
/// The compute ceilings of the narrow dot-product instructions (chapter 11): the int8 ones a
/// quantized GEMM uses (vpdpbusd on zmm or ymm, or AVX2's vpmaddubsw + vpmaddwd) and the bf16 one
/// (vdpbf16ps), each measured on every core with 12 independent chains (common/dot_ceilings.cpp).
/// An int8 kernel is measured against these, not against the fp32 FMA peak: on one AVX512-VNNI
/// core a zmm vpdpbusd does 128 operations (64 multiplies, 64 adds) where a zmm FMA does 32.

#include <string>
#include <vector>

namespace inferlab {

/// What a dot-product instruction multiplies.
enum class DotType {
  int8,  ///< unsigned × signed bytes, summed into int32
  bf16,  ///< bfloat16 pairs, summed into fp32
};

/// One instruction's measured throughput.
struct DotCeiling {
  DotType type = DotType::int8;  ///< what it multiplies
  std::string instruction;       ///< e.g. "vpdpbusd zmm (AVX512-VNNI)"
  double gops = 0.0;             ///< 10^9 operations a second (a multiply or an add each), all threads
};

/// Measures every dot-product instruction this CPU reports (CPUID, at run time), over about
/// @p seconds in all, on the OpenMP threads; empty on a CPU with none of them (not x86-64, or
/// without AVX2).
std::vector<DotCeiling> measure_dot_ceilings(double seconds);

/// The int8 ceiling right now: the fastest int8 instruction this CPU has (the one
/// measure_dot_ceilings() would name) run on the OpenMP threads for about @p seconds, in short
/// passes, 10^9 operations a second; 0 on a CPU with none. For a benchmark on a shared machine:
/// timed beside a kernel, in the same moments, its ratio is free of what the neighbours took.
double int8_ceiling_now(double seconds);

}  // namespace inferlab
