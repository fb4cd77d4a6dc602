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
// fp32 uses cublasSgemmStridedBatched. The fp16 / bf16 variants round Q, K, V to 16 bits on the
// host; the products take 16-bit inputs and accumulate in fp32 (cublasGemmStridedBatchedEx with
// CUBLAS_COMPUTE_32F); S stays fp32, P is stored in 16 bits for the second product, O is fp32.
#include <cstdint>
#include <type_traits>
#include <vector>

#include "common/half.h"
#include "kernels/attention/cuda_attention.h"
#include "kernels/attention/cuda_prefill.cuh"
#include "kernels/attention/softmax_warp.cuh"
#include "simt/cublas.h"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(status)));
}

// A cuBLAS handle for the duration of one call.
class CublasHandle {
 public:
  CublasHandle() { check_cublas(cublasCreate(&handle_), "cublasCreate"); }
  ~CublasHandle() { cublasDestroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// The 16-bit element type of each variant and its cudaDataType.
template <class T>
struct Storage;
template <>
struct Storage<float> {
  static constexpr cudaDataType_t kType = CUDA_R_32F;
};
template <>
struct Storage<__half> {
  static constexpr cudaDataType_t kType = CUDA_R_16F;
  static uint16_t bits(float x) { return float_to_half_bits(x); }
};
template <>
struct Storage<__nv_bfloat16> {
  static constexpr cudaDataType_t kType = CUDA_R_16BF;
  static uint16_t bits(float x) { return float_to_bfloat16_bits(x); }
};

// Rounds @p host to T on the host and uploads it (for T = float, a plain upload).
template <class T>
DeviceBuffer<T> upload_as(const Tensor<float>& host) {
  DeviceBuffer<T> device(size_t(host.size()));
  if constexpr (std::is_same_v<T, float>) {
    device.upload(host.data());
  } else {
    std::vector<uint16_t> bits(size_t(host.size()));
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = Storage<T>::bits(host[int64_t(i)]);
    check_cuda(cudaMemcpy(device.data(), bits.data(), bits.size() * sizeof(uint16_t), cudaMemcpyHostToDevice),
               "cudaMemcpy (upload 16-bit)");
  }
  return device;
}

// Attention with inputs (and P) stored as T, fp32 accumulation, fp32 scores and output.
template <class T>
void attention_cublas(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                      Tensor<float>& out) {
  const AttentionShape s = attention_shape(q, k, v, causal);
  check_attention_output(out, s);
  const int L = int(s.seq_len), d = int(s.head_dim), group = int(s.group_size()), batch = int(s.num_kv_heads);
  const int rows = group * L;  // query rows per KV head
  DeviceBuffer<T> d_q = upload_as<T>(q), d_k = upload_as<T>(k), d_v = upload_as<T>(v);
  DeviceBuffer<float> scores(size_t(s.num_heads) * L * L);
  DeviceBuffer<T> probs(size_t(s.num_heads) * L * L);
  DeviceBuffer<float> d_out(size_t(out.size()));
  d_out.poison();
  CublasHandle handle;
  const float scale = 1.0f / std::sqrt(float(d)), one = 1.0f, zero = 0.0f;
  const long long q_stride = (long long)rows * d, kv_stride = (long long)L * d, s_stride = (long long)rows * L;

  // Column-major view: Sᵀ [L, rows] = K_g [L, d] (stored as column-major [d, L], so op T) · Q_gᵀ
  // (stored as column-major [d, rows], op N).
  if constexpr (std::is_same_v<T, float>) {
    check_cublas(cublasSgemmStridedBatched(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, L, rows, d, &scale, d_k.data(), d,
                                           kv_stride, d_q.data(), d, q_stride, &zero, scores.data(), L, s_stride, batch),
                 "cublasSgemmStridedBatched (Q·Kᵀ)");
  } else {
    check_cublas(cublasGemmStridedBatchedEx(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, L, rows, d, &scale, d_k.data(),
                                            Storage<T>::kType, d, kv_stride, d_q.data(), Storage<T>::kType, d, q_stride,
                                            &zero, scores.data(), CUDA_R_32F, L, s_stride, batch, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx (Q·Kᵀ)");
  }
  // Row r of a group's S is query r mod L: the softmax applies the causal mask from that.
  check_cuda(simt::launch(softmax_rows_warp<T>, dim3(unsigned(s.num_heads * L)), dim3(kSoftmaxThreads), 0, nullptr,
                          static_cast<const float*>(scores.data()), probs.data(), L, L, causal),
             "softmax_rows_warp");
  // Oᵀ [d, rows] = V_gᵀ (column-major [d, L], op N) · Pᵀ (column-major [L, rows], op N).
  if constexpr (std::is_same_v<T, float>) {
    check_cublas(cublasSgemmStridedBatched(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, d, rows, L, &one, d_v.data(), d,
                                           kv_stride, probs.data(), L, s_stride, &zero, d_out.data(), d, q_stride, batch),
                 "cublasSgemmStridedBatched (P·V)");
  } else {
    check_cublas(cublasGemmStridedBatchedEx(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, d, rows, L, &one, d_v.data(),
                                            Storage<T>::kType, d, kv_stride, probs.data(), Storage<T>::kType, L, s_stride,
                                            &zero, d_out.data(), CUDA_R_32F, d, q_stride, batch, CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx (P·V)");
  }
  check_cuda(cudaDeviceSynchronize(), "cuda/cublas");
  d_out.download(out.data());
}

}  // namespace

void attention_cuda_cublas(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                           Tensor<float>& out) {
  attention_cublas<float>(q, k, v, causal, out);
}

void attention_cuda_cublas_fp16(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                                Tensor<float>& out) {
  attention_cublas<__half>(q, k, v, causal, out);
}

void attention_cuda_cublas_bf16(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                                Tensor<float>& out) {
  attention_cublas<__nv_bfloat16>(q, k, v, causal, out);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
