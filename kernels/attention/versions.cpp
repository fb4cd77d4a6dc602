#include "kernels/attention/versions.h"

#include "kernels/attention/cuda_attention.h"

namespace inferlab {

std::vector<AttentionVersion> unfused_attention_rows() {
  std::vector<AttentionVersion> rows = {
      {"cpu/naive", Backend::cpu, {}, 1, Precision::fp32, "three loops per head, L×L scores in memory, fp32",
       attention_cpu_naive},
      {"cpu/blocked", Backend::cpu, {}, 2, Precision::fp32, "cache-blocked, SIMD micro-kernels + OpenMP, unfused, fp32",
       attention_cpu_blocked},
      {"cpu/openblas", Backend::cpu, {}, 2, Precision::fp32, "OpenBLAS sgemm, softmax, sgemm per KV group, fp32",
       attention_cpu_openblas},
  };
  // Chapter 02's CUDA kernels: each on the emulator (sim) and, when built with nvcc, on a GPU.
  add_device_rows<AttentionFn, std::monostate>(
      rows, {
                {"cuda/naive", {}, 2, Precision::fp32, "3 kernels: a thread per score, per softmax row, per output",
                 INFERLAB_SIM_AND_CUDA(attention_cuda_naive)},
                {"cuda/tiled", {}, 2, Precision::fp32, "shared-memory tiled Q·Kᵀ and P·V, warp-shuffle softmax",
                 INFERLAB_SIM_AND_CUDA(attention_cuda_tiled)},
                {"cuda/cublas", {}, 2, Precision::fp32, "cuBLAS strided-batched SGEMMs + warp softmax, fp32",
                 INFERLAB_SIM_AND_CUDA(attention_cuda_cublas)},
                {"cuda/cublas_fp16", {}, 2, Precision::fp16, "cuBLAS GemmEx, fp16 inputs, fp32 accumulation",
                 INFERLAB_SIM_AND_CUDA(attention_cuda_cublas_fp16)},
                {"cuda/cublas_bf16", {}, 2, Precision::bf16, "cuBLAS GemmEx, bf16 inputs, fp32 accumulation",
                 INFERLAB_SIM_AND_CUDA(attention_cuda_cublas_bf16)},
            });
  return rows;
}

}  // namespace inferlab
