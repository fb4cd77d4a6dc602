#include "kernels/attention/registry.h"

#include <stdexcept>

#include "kernels/attention/cuda_attention.h"
#include "kernels/fused/fused.h"
#include "kernels/fused/cuda_fused.h"

namespace inferlab {

const std::vector<AttentionVersion>& attention_versions() {
  static const std::vector<AttentionVersion> versions = {
      {"cpu/naive", Backend::cpu, Precision::fp32, 1, "three loops per head, L×L scores in memory, fp32",
       attention_cpu_naive},
      {"cpu/blocked", Backend::cpu, Precision::fp32, 2, "cache-blocked, SIMD micro-kernels + OpenMP, unfused, fp32",
       attention_cpu_blocked},
      {"cpu/openblas", Backend::cpu, Precision::fp32, 2, "OpenBLAS sgemm, softmax, sgemm per KV group, fp32",
       attention_cpu_openblas},
      {"cpu/flash", Backend::cpu, Precision::fp32, 5,
       "fused: online softmax over key blocks, SIMD micro-kernels + OpenMP, no L×L buffer, fp32", attention_cpu_flash},
      // Chapter 02 CUDA kernels: each on the emulator (sim) and, when built with nvcc, on a GPU.
#define INFERLAB_CUDA_VERSIONS(NS, BACKEND)                                                                       \
  {"cuda/naive", BACKEND, Precision::fp32, 2, "3 kernels: a thread per score, per softmax row, per output",       \
   NS::attention_cuda_naive},                                                                                    \
  {"cuda/tiled", BACKEND, Precision::fp32, 2, "shared-memory tiled Q·Kᵀ and P·V, warp-shuffle softmax",           \
   NS::attention_cuda_tiled},                                                                                    \
  {"cuda/cublas", BACKEND, Precision::fp32, 2, "cuBLAS strided-batched SGEMMs + warp softmax, fp32",              \
   NS::attention_cuda_cublas},                                                                                   \
  {"cuda/cublas_fp16", BACKEND, Precision::fp16, 2, "cuBLAS GemmEx, fp16 inputs, fp32 accumulation",               \
   NS::attention_cuda_cublas_fp16},                                                                              \
  {"cuda/cublas_bf16", BACKEND, Precision::bf16, 2, "cuBLAS GemmEx, bf16 inputs, fp32 accumulation",               \
   NS::attention_cuda_cublas_bf16},
      INFERLAB_CUDA_VERSIONS(sim, Backend::sim)
#if defined(INFERLAB_WITH_CUDA)
      INFERLAB_CUDA_VERSIONS(cuda, Backend::cuda)
#endif
#undef INFERLAB_CUDA_VERSIONS
      // Chapter 05 fused CUDA kernels (kernels/fused/). cuda/flash_tc on sim is its SIMT twin: the
      // same source with the WMMA fragments modelled in software (simt/wmma.h).
#define INFERLAB_CUDA_FUSED_VERSIONS(NS, BACKEND)                                                                   \
  {"cuda/flash", BACKEND, Precision::fp32, 5, "fused: Q tile + K/V tiles in shared memory, online softmax, fp32",    \
   NS::attention_cuda_flash},                                                                                      \
  {"cuda/flash_tc", BACKEND, Precision::fp16, 5, "fused on tensor cores (WMMA 16x16x16), fp16 in, fp32 accumulate",  \
   NS::attention_cuda_flash_tc},                                                                                   \
  {"cuda/flash_tc_bf16", BACKEND, Precision::bf16, 5, "cuda/flash_tc with bf16 inputs", NS::attention_cuda_flash_tc_bf16},
      INFERLAB_CUDA_FUSED_VERSIONS(sim, Backend::sim)
#if defined(INFERLAB_WITH_CUDA)
      INFERLAB_CUDA_FUSED_VERSIONS(cuda, Backend::cuda)
#endif
#undef INFERLAB_CUDA_FUSED_VERSIONS
  };
  return versions;
}

const AttentionVersion& find_attention_version(std::string_view name, Backend backend) {
  std::string known;
  for (const AttentionVersion& version : attention_versions()) {
    if (version.name == name && version.backend == backend) return version;
    known += (known.empty() ? "" : ", ") + version.name + " (" + std::string(to_string(version.backend)) + ")";
  }
  throw std::invalid_argument("version = " + std::string(name) + " on backend " + std::string(to_string(backend)) +
                              ": is not registered; known: " + known);
}

}  // namespace inferlab
