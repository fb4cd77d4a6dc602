// cuda/cublas, cuda/cublas_fp16, cuda/cublas_bf16 — chapter 02, step 3: let cuBLAS do the
// two products. (Version ladder: see cuda_naive.cu.)
//
// Grouped-query attention makes the products batched GEMMs over KV heads: the group_size query
// heads that share KV head g are consecutive in Q, so they form one [group_size·L, d] matrix.
// Per KV head g (a batch of num_kv_heads GEMMs, strided):
//     S_g [group·L, L] = Q_g [group·L, d] · K_gᵀ [d, L] · 1/√d
//     P_g = softmax rows of S_g (masked under the causal flag)         softmax_warp.cuh
//     O_g [group·L, d] = P_g [group·L, L] · V_g [L, d]
// cuBLAS is column-major: a row-major [m, n] matrix is a column-major [n, m] one, so the
// row-major product C = A·B is computed as the column-major Cᵀ = Bᵀ·Aᵀ (operands swapped).
// With a causal mask the GEMM still computes the masked half of S (wasted FLOPs) and the
// softmax zeroes it; chapter 05's fused kernel skips those tiles instead.
//
// fp32 uses cublasSgemmStridedBatched. The fp16 / bf16 variants take 16-bit Q, K, V and
// accumulate in fp32 (cublasGemmStridedBatchedEx with CUBLAS_COMPUTE_32F); S stays fp32, P is
// stored in 16 bits for the second product, O is fp32.
//
// Entry points: attention_cublas_device<T>() (T = float, __half, __nv_bfloat16) on device-resident
// inputs already stored as T, with caller-provided scratch (S in fp32 and P in T, H·L² each) and a
// cuBLAS handle the caller creates once; attention_cuda_cublas{,_fp16,_bf16}() are the host-tensor
// wrappers, which round Q, K, V to 16 bits on the host before uploading them.
#include <type_traits>

#include "kernels/attention/cuda_attention.h"
#include "kernels/attention/cuda_prefill.cuh"
#include "kernels/primitives/softmax_warp.cuh"
#include "kernels/primitives/cublas_handle.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

// The cudaDataType of each element type.
template <class T>
constexpr cudaDataType_t kDataType = CUDA_R_32F;
template <>
constexpr cudaDataType_t kDataType<__half> = CUDA_R_16F;
template <>
constexpr cudaDataType_t kDataType<__nv_bfloat16> = CUDA_R_16BF;

// The host-tensor entry point of each variant: upload as T, run, copy O out.
template <class T>
void attention_cublas_host(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                           Tensor<float>& out, const char* version) {
  const DeviceAttentionCopy<T> device(q, k, v, causal, out);
  DeviceBuffer<float> scores(score_elements(device.shape()));
  DeviceBuffer<T> probs(score_elements(device.shape()));
  const CublasHandle handle;
  attention_cublas_device<T>(device.view(), scores.data(), probs.data(), handle.get(), nullptr);
  device.finish(out, version);
}

}  // namespace

// Attention with inputs (and P) stored as T, fp32 accumulation, fp32 scores and output.
template <class T>
void attention_cublas_device(const DeviceAttentionOf<T>& problem, float* scores, T* probs, cublasHandle_t handle,
                             cudaStream_t stream) {
  const AttentionShape& s = problem.shape;
  const int L = int(s.seq_len), d = int(s.head_dim), group = int(s.group_size()), batch = int(s.num_kv_heads);
  const int rows = group * L;  // query rows per KV head
  const float scale = problem.scale(), one = 1.0f, zero = 0.0f;
  const long long q_stride = (long long)rows * d, kv_stride = (long long)L * d, s_stride = (long long)rows * L;
  check_cublas(cublasSetStream(handle, stream), "cublasSetStream");  // GEMMs and softmax in one queue

  // Column-major view: Sᵀ [L, rows] = K_g [L, d] (stored as column-major [d, L], so op T) · Q_gᵀ
  // (stored as column-major [d, rows], op N).
  if constexpr (std::is_same_v<T, float>) {
    check_cublas(cublasSgemmStridedBatched(handle, CUBLAS_OP_T, CUBLAS_OP_N, L, rows, d, &scale, problem.k, d,
                                           kv_stride, problem.q, d, q_stride, &zero, scores, L, s_stride, batch),
                 "cublasSgemmStridedBatched (Q·Kᵀ)");
  } else {
    check_cublas(
        cublasGemmStridedBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, L, rows, d, &scale, problem.k, kDataType<T>, d,
                                   kv_stride, problem.q, kDataType<T>, d, q_stride, &zero, scores, CUDA_R_32F, L,
                                   s_stride, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx (Q·Kᵀ)");
  }
  // Row r of a group's S is query r mod L: the softmax applies the causal mask from that.
  check_cuda(simt::launch(softmax_rows_warp<T>, dim3(unsigned(s.num_heads * L)), dim3(kSoftmaxThreads), 0, stream,
                          static_cast<const float*>(scores), probs, L, L, s.causal),
             "softmax_rows_warp");
  // Oᵀ [d, rows] = V_gᵀ (column-major [d, L], op N) · Pᵀ (column-major [L, rows], op N).
  if constexpr (std::is_same_v<T, float>) {
    check_cublas(cublasSgemmStridedBatched(handle, CUBLAS_OP_N, CUBLAS_OP_N, d, rows, L, &one, problem.v, d, kv_stride,
                                           probs, L, s_stride, &zero, problem.out, d, q_stride, batch),
                 "cublasSgemmStridedBatched (P·V)");
  } else {
    check_cublas(cublasGemmStridedBatchedEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, d, rows, L, &one, problem.v, kDataType<T>,
                                            d, kv_stride, probs, kDataType<T>, L, s_stride, &zero, problem.out,
                                            CUDA_R_32F, d, q_stride, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx (P·V)");
  }
}

template void attention_cublas_device<float>(const DeviceAttentionOf<float>&, float*, float*, cublasHandle_t,
                                             cudaStream_t);
template void attention_cublas_device<__half>(const DeviceAttentionOf<__half>&, float*, __half*, cublasHandle_t,
                                              cudaStream_t);
template void attention_cublas_device<__nv_bfloat16>(const DeviceAttentionOf<__nv_bfloat16>&, float*, __nv_bfloat16*,
                                                     cublasHandle_t, cudaStream_t);

void attention_cuda_cublas(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                           Tensor<float>& out) {
  attention_cublas_host<float>(q, k, v, causal, out, "cuda/cublas");
}

void attention_cuda_cublas_fp16(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                                Tensor<float>& out) {
  attention_cublas_host<__half>(q, k, v, causal, out, "cuda/cublas_fp16");
}

void attention_cuda_cublas_bf16(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                                Tensor<float>& out) {
  attention_cublas_host<__nv_bfloat16>(q, k, v, causal, out, "cuda/cublas_bf16");
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
