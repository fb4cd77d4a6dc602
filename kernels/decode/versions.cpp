#include "kernels/decode/versions.h"

#include "common/check.h"
#include "common/config.h"
#include "kernels/decode/cuda_decode.h"

namespace inferlab {

DecodeVersion decode_row(std::string name, Backend backend, KvDtype dtype, int chapter, std::string summary,
                         DecodeFn run) {
  DecodeFn checked = [dtype, run = std::move(run)](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    require(cache.dtype() == dtype, "cache dtype", to_string(cache.dtype()),
            "this entry is registered for a " + std::string(to_string(dtype)) + " cache");
    run(q, cache, out);
  };
  return {std::move(name), backend, dtype, chapter, precision_of(dtype), std::move(summary), std::move(checked)};
}

std::vector<DecodeVersion> plain_decode_rows() {
  return {
      decode_row("cpu/decode", Backend::cpu, KvDtype::fp32, 3, "three loops per (sequence, head), fp32 cache",
                 decode_cpu_naive),
      decode_row("cpu/decode", Backend::cpu, KvDtype::fp16, 3, "three loops per (sequence, head), fp16 cache",
                 decode_cpu_naive),
      decode_row("cpu/decode_simd", Backend::cpu, KvDtype::fp32, 3,
                 "SIMD + OpenMP, GQA group together: cache read once, fp32", decode_cpu_simd),
      decode_row("cpu/decode_simd", Backend::cpu, KvDtype::fp16, 3,
                 "SIMD + OpenMP, GQA group together, fp16 cache (F16C)", decode_cpu_simd),
      decode_row("cpu/decode_int8_simd", Backend::cpu, KvDtype::int8, 4,
                 "cpu/decode_simd over int8 rows (widened in the loop), scales folded out", decode_int8_cpu_simd),
      // The CUDA kernels: each on the emulator (sim) and, when built with nvcc, on a GPU.
#define INFERLAB_CUDA_DECODE_VERSIONS(NS, BACKEND)                                                                  \
  decode_row("cuda/decode", BACKEND, KvDtype::fp32, 3, "block per (head, sequence), warp dot products, float4 loads", \
             NS::decode_cuda),                                                                                      \
      decode_row("cuda/decode", BACKEND, KvDtype::fp16, 3,                                                          \
                 "block per (head, sequence), warp dot products, fp16 cache", NS::decode_cuda),                     \
      decode_row("cuda/decode_int8", BACKEND, KvDtype::int8, 4, "block per (head, sequence), char4 loads, fp32 FMA", \
                 NS::decode_int8_cuda),                                                                             \
      decode_row("cuda/decode_fp8", BACKEND, KvDtype::fp8, 4,                                                       \
                 "block per (head, sequence), 4 E4M3 codes per load, hardware (nvcc) or software (sim) conversion", \
                 NS::decode_fp8_cuda),
      INFERLAB_CUDA_DECODE_VERSIONS(sim, Backend::sim)
#if INFERLAB_WITH_CUDA
      INFERLAB_CUDA_DECODE_VERSIONS(cuda, Backend::cuda)
#endif
#undef INFERLAB_CUDA_DECODE_VERSIONS
  };
}

}  // namespace inferlab
