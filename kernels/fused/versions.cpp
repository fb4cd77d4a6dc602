#include "kernels/fused/versions.h"

#include "kernels/fused/cuda_decode_split.h"
#include "kernels/fused/cuda_fused.h"
#include "kernels/fused/fused.h"
#include "kernels/fused/split_kv.h"

namespace inferlab {

std::vector<AttentionVersion> fused_attention_rows() {
  std::vector<AttentionVersion> rows = {
      {"cpu/flash", Backend::cpu, {}, 5, Precision::fp32,
       "fused: online softmax over key blocks, SIMD micro-kernels + OpenMP, no L×L buffer, fp32", attention_cpu_flash},
  };
  // cuda/flash_tc on sim is its SIMT twin: the same source with the WMMA fragments modelled in
  // software (simt/wmma.h).
  add_device_rows<AttentionFn, std::monostate>(
      rows, {
                {"cuda/flash", {}, 5, Precision::fp32, "fused: Q tile + K/V tiles in shared memory, online softmax, fp32",
                 INFERLAB_SIM_AND_CUDA(attention_cuda_flash)},
                {"cuda/flash_tc", {}, 5, Precision::fp16, "fused on tensor cores (WMMA 16x16x16), fp16 in, fp32 accumulate",
                 INFERLAB_SIM_AND_CUDA(attention_cuda_flash_tc)},
                {"cuda/flash_tc_bf16", {}, 5, Precision::bf16, "cuda/flash_tc with bf16 inputs",
                 INFERLAB_SIM_AND_CUDA(attention_cuda_flash_tc_bf16)},
            });
  return rows;
}

std::vector<DecodeVersion> split_decode_rows() {
  // Each overload set resolved to the registered signature (S chosen by the policy).
  using Decode = void (*)(const Tensor<float>&, const KvCache&, Tensor<float>&);
  const Decode cpu = decode_cpu_split, sim = sim::decode_split_cuda;
#if INFERLAB_WITH_CUDA
  const Decode cuda = cuda::decode_split_cuda;
#else
  const Decode cuda = nullptr;
#endif
  std::vector<DecodeVersion> rows = {
      decode_row("cpu/decode_split", Backend::cpu, KvDtype::fp32, 5,
                 "split-KV: OpenMP over (sequence, KV head, split) + reduce", cpu),
      decode_row("cpu/decode_split", Backend::cpu, KvDtype::fp16, 5, "split-KV over an fp16 cache (F16C) + reduce", cpu),
  };
  add_decode_device_rows(rows, {
                                   {"cuda/decode_split", KvDtype::fp32, 5, Precision::fp32,
                                    "block per (head, sequence, split), then a reduce kernel", sim, cuda},
                                   {"cuda/decode_split", KvDtype::fp16, 5, Precision::fp16,
                                    "block per (head, sequence, split), fp16 cache, reduce", sim, cuda},
                               });
  return rows;
}

}  // namespace inferlab
