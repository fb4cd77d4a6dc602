#include "kernels/fused/versions.h"

#include "common/config.h"
#include "kernels/fused/cuda_decode_split.h"
#include "kernels/fused/cuda_fused.h"
#include "kernels/fused/fused.h"
#include "kernels/fused/split_kv.h"

namespace inferlab {

std::vector<AttentionVersion> fused_attention_rows() {
  return {
      {"cpu/flash", Backend::cpu, {}, 5, Precision::fp32,
       "fused: online softmax over key blocks, SIMD micro-kernels + OpenMP, no L×L buffer, fp32", attention_cpu_flash},
      // cuda/flash_tc on sim is its SIMT twin: the same source with the WMMA fragments modelled in
      // software (simt/wmma.h).
#define INFERLAB_CUDA_FUSED_VERSIONS(NS, BACKEND)                                                                     \
  {"cuda/flash", BACKEND, {}, 5, Precision::fp32, "fused: Q tile + K/V tiles in shared memory, online softmax, fp32",  \
   NS::attention_cuda_flash},                                                                                        \
  {"cuda/flash_tc", BACKEND, {}, 5, Precision::fp16,                                                                 \
   "fused on tensor cores (WMMA 16x16x16), fp16 in, fp32 accumulate", NS::attention_cuda_flash_tc},                  \
  {"cuda/flash_tc_bf16", BACKEND, {}, 5, Precision::bf16, "cuda/flash_tc with bf16 inputs",                          \
   NS::attention_cuda_flash_tc_bf16},
      INFERLAB_CUDA_FUSED_VERSIONS(sim, Backend::sim)
#if INFERLAB_WITH_CUDA
      INFERLAB_CUDA_FUSED_VERSIONS(cuda, Backend::cuda)
#endif
#undef INFERLAB_CUDA_FUSED_VERSIONS
  };
}

std::vector<DecodeVersion> split_decode_rows() {
  const auto fn = [](void (*run)(const Tensor<float>&, const KvCache&, Tensor<float>&)) { return DecodeFn(run); };
  return {
      decode_row("cpu/decode_split", Backend::cpu, KvDtype::fp32, 5,
                 "split-KV: OpenMP over (sequence, KV head, split) + reduce", fn(decode_cpu_split)),
      decode_row("cpu/decode_split", Backend::cpu, KvDtype::fp16, 5, "split-KV over an fp16 cache (F16C) + reduce",
                 fn(decode_cpu_split)),
#define INFERLAB_CUDA_SPLIT_VERSIONS(NS, BACKEND)                                                                  \
  decode_row("cuda/decode_split", BACKEND, KvDtype::fp32, 5, "block per (head, sequence, split), then a reduce kernel", \
             fn(NS::decode_split_cuda)),                                                                          \
      decode_row("cuda/decode_split", BACKEND, KvDtype::fp16, 5,                                                   \
                 "block per (head, sequence, split), fp16 cache, reduce", fn(NS::decode_split_cuda)),
      INFERLAB_CUDA_SPLIT_VERSIONS(sim, Backend::sim)
#if INFERLAB_WITH_CUDA
      INFERLAB_CUDA_SPLIT_VERSIONS(cuda, Backend::cuda)
#endif
#undef INFERLAB_CUDA_SPLIT_VERSIONS
  };
}

}  // namespace inferlab
