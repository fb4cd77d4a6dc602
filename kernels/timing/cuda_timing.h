#pragma once
/// @file cuda_timing.h
/// Device-side timing of the chapter-02 and chapter-05 CUDA prefill versions and of chapter 03's
/// cuda/decode, for benchmarks (chapters/02-gpu-prefill/bench.cpp,
/// chapters/03-kv-cache-decode/bench.cpp, chapter 05's). The
/// host-tensor entry points (cuda_attention.h, cuda_decode.h) copy over PCIe and allocate on
/// every call, which would dominate a GPU measurement; these functions time the device level
/// instead: inputs and scratch allocated once, warm-up calls, then a batch of calls between two
/// CUDA events on one stream.
///
/// Declared in plain C++ (no CUDA types), implemented in cuda_timing.cu, which is compiled twice
/// like every kernel file: inferlab::cuda (nvcc, a GPU) and inferlab::sim (the SIMT emulator,
/// where events record host time: fine for testing the harness, meaningless as a measurement).

#include <string>
#include <string_view>

#include "kernels/attention/attention.h"
#include "kernels/decode/decode.h"
#include "kernels/kv/kv_format.h"
#include "kernels/quant/block_formats.h"
#include "kernels/quant/quant_matmul_kernel.h"

namespace inferlab {

/// The measured ceilings of one GPU, which the benchmark's GPU percentages refer to (the CPU
/// roofline of common/roofline.h says nothing about a GPU).
struct DeviceCeilings {
  std::string device;         ///< the device's name (cudaGetDeviceProperties)
  double copy_gbs = 0.0;      ///< device-to-device cudaMemcpy, GB/s counting bytes read + written
  double copy_mib = 0.0;      ///< the size of the copied buffer, MiB
  double sgemm_gflops = 0.0;  ///< cublasSgemm, fp32 (default math mode: no TF32), GFLOP/s
  double hgemm_gflops = 0.0;  ///< cublasGemmEx, fp16 inputs, fp32 output and accumulation, GFLOP/s
  int gemm_size = 0;          ///< n of the n×n×n GEMMs (2·n³ FLOPs per call)
};

}  // namespace inferlab

/// The sim backend's copy (the SIMT emulator): exercises the harness, measures the emulator.
namespace inferlab::sim {

/// Mean seconds per call of @p version ("cuda/naive", "cuda/tiled", "cuda/cublas",
/// "cuda/cublas_fp16", "cuda/cublas_bf16"; chapter 05's fused "cuda/flash", "cuda/flash_tc",
/// "cuda/flash_tc_bf16") on random device-resident inputs of @p shape: the inputs (stored as the
/// version's element type), output, scratch (the unfused versions' H·L² scores; none for the
/// fused ones) and cuBLAS handle are allocated once, @p warmup calls are made, then
/// @p repetitions calls are timed back to back between two CUDA events. Throws
/// std::invalid_argument naming @p version when it has no device-level function, or naming a
/// bad count or shape (including a head_dim the version does not support).
double seconds_per_call(std::string_view version, const AttentionShape& shape, int warmup, int repetitions);

/// Mean seconds per call of cuda/decode (decode_device, kernels/decode/cuda_decode.cuh) over a
/// device-resident cache of @p cache_dtype shaped by @p shape, every sequence holding @p seq_len
/// tokens: random q and cache, the lengths and the output allocated once, @p warmup calls, then
/// @p repetitions calls between two CUDA events. Throws std::invalid_argument naming a bad count
/// or shape (seq_len must be in [1, shape.max_seq_len]).
double decode_seconds_per_call(KvDtype cache_dtype, const DecodeShape& shape, int64_t seq_len, int warmup,
                               int repetitions);

/// As decode_seconds_per_call(), over a paged cache (chapter 06): blocks of @p block_size tokens
/// handed out in scattered order (scattered_block_order), read through the block table.
double paged_decode_seconds_per_call(KvDtype cache_dtype, const DecodeShape& shape, int64_t seq_len,
                                     int64_t block_size, int warmup, int repetitions);

/// Mean seconds per call of chapter 04's cuda/decode_int8 (decode_int8_device,
/// kernels/decode/cuda_decode.cuh) over a device-resident INT8 cache with @p key_scaling K
/// scales (fp32 scales), otherwise as decode_seconds_per_call().
double decode_int8_seconds_per_call(KeyScaling key_scaling, const DecodeShape& shape, int64_t seq_len, int warmup,
                                    int repetitions);

/// Mean seconds per call of the quantized matmul at the device level (quant_matmul_device,
/// kernels/quant/cuda_quant_matmul.cuh: the activations' quantization and the matmul) on @p rows
/// rows of a random [@p out, @p in] matrix of @p type (Q8_0, Q4_0 or Q4_1), with @p kernel
/// (chapter 08's per-row one or chapter 11's tiled one): weights, x, scratch and y allocated once,
/// @p warmup calls, then @p repetitions calls between two CUDA events on the default stream.
/// Throws std::invalid_argument naming a bad type, shape or count.
double quant_matmul_seconds_per_call(quant::GgmlType type, int64_t rows, int64_t out, int64_t in,
                                     quant::QuantMatmulKernel kernel, int warmup, int repetitions);

/// Measures the current device's ceilings: device-to-device cudaMemcpy of @p copy_mib MiB, and
/// cuBLAS SGEMM and fp16 GemmEx at n = @p gemm_size, each the mean of a batch of calls lasting
/// about @p seconds_per_test after a warm-up call.
DeviceCeilings measure_device_ceilings(int gemm_size, double copy_mib, double seconds_per_test);

}  // namespace inferlab::sim

/// The cuda backend's copy (nvcc, a real GPU): what the benchmark calls when a GPU is present.
namespace inferlab::cuda {

/// As inferlab::sim::seconds_per_call(), on the GPU.
double seconds_per_call(std::string_view version, const AttentionShape& shape, int warmup, int repetitions);

/// As inferlab::sim::decode_seconds_per_call(), on the GPU.
double decode_seconds_per_call(KvDtype cache_dtype, const DecodeShape& shape, int64_t seq_len, int warmup,
                               int repetitions);

/// As inferlab::sim::paged_decode_seconds_per_call(), on the GPU.
double paged_decode_seconds_per_call(KvDtype cache_dtype, const DecodeShape& shape, int64_t seq_len,
                                     int64_t block_size, int warmup, int repetitions);

/// As inferlab::sim::decode_int8_seconds_per_call(), on the GPU.
double decode_int8_seconds_per_call(KeyScaling key_scaling, const DecodeShape& shape, int64_t seq_len, int warmup,
                                    int repetitions);

/// As inferlab::sim::quant_matmul_seconds_per_call(), on the GPU.
double quant_matmul_seconds_per_call(quant::GgmlType type, int64_t rows, int64_t out, int64_t in,
                                     quant::QuantMatmulKernel kernel, int warmup, int repetitions);

/// As inferlab::sim::measure_device_ceilings(), on the GPU.
DeviceCeilings measure_device_ceilings(int gemm_size, double copy_mib, double seconds_per_test);

}  // namespace inferlab::cuda
