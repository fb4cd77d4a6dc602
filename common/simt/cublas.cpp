// cuBLAS in the emulator: column-major GEMMs exactly as cuBLAS defines them, computed on the CPU
// by OpenBLAS in fp32 (16-bit inputs are widened first, a 16-bit C is rounded at the end).

#include "simt/cublas.h"

#include <cblas.h>

#include <cstring>
#include <string>
#include <vector>

#include "simt/detail/device_memory.h"
#include "simt/internal.h"

namespace {

struct Handle {
  cudaStream_t stream = nullptr;
};

size_t element_size(cudaDataType type) {
  switch (type) {
    case CUDA_R_32F:
      return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF:
      return 2;
    default:
      return 0;
  }
}

float load(const void* base, cudaDataType type, size_t index) {
  switch (type) {
    case CUDA_R_32F:
      return static_cast<const float*>(base)[index];
    case CUDA_R_16F:
      return __half2float(static_cast<const __half*>(base)[index]);
    case CUDA_R_16BF:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[index]);
    default:
      return 0.0f;
  }
}

void store(void* base, cudaDataType type, size_t index, float value) {
  switch (type) {
    case CUDA_R_32F:
      static_cast<float*>(base)[index] = value;
      break;
    case CUDA_R_16F:
      static_cast<__half*>(base)[index] = __float2half(value);
      break;
    case CUDA_R_16BF:
      static_cast<__nv_bfloat16*>(base)[index] = __float2bfloat16(value);
      break;
    default:
      break;
  }
}

CBLAS_TRANSPOSE to_cblas(cublasOperation_t op) {
  return op == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
}

cublasStatus_t invalid(const std::string& what) {
  simt::detail::set_error(cudaErrorInvalidValue, "simt: cuBLAS: " + what, false);
  simt_cudaGetLastError();  // cuBLAS reports through its status, not the runtime's last error
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t check_shape(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc) {
  const auto ok_op = [](cublasOperation_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; };
  if (!ok_op(ta) || !ok_op(tb)) return invalid("transa/transb must be CUBLAS_OP_N, _T or _C");
  if (m < 0 || n < 0 || k < 0) return invalid("m, n, k must be >= 0");
  const int rows_a = ta == CUBLAS_OP_N ? m : k;
  const int rows_b = tb == CUBLAS_OP_N ? k : n;
  if (lda < std::max(1, rows_a))
    return invalid("lda = " + std::to_string(lda) + " < rows of op(A)'s storage (" + std::to_string(rows_a) + ")");
  if (ldb < std::max(1, rows_b))
    return invalid("ldb = " + std::to_string(ldb) + " < rows of op(B)'s storage (" + std::to_string(rows_b) + ")");
  if (ldc < std::max(1, m)) return invalid("ldc = " + std::to_string(ldc) + " < m = " + std::to_string(m));
  return CUBLAS_STATUS_SUCCESS;
}

// C = alpha op(A) op(B) + beta C, one matrix, any supported types.
void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const void* A, cudaDataType at,
          int lda, const void* B, cudaDataType bt, int ldb, float beta, void* C, cudaDataType ct, int ldc) {
  if (m == 0 || n == 0) return;
  const size_t cols_a = ta == CUBLAS_OP_N ? k : m, cols_b = tb == CUBLAS_OP_N ? n : k;
  const size_t rows_a = ta == CUBLAS_OP_N ? m : k, rows_b = tb == CUBLAS_OP_N ? k : n;
  // Widen to fp32 (only the elements op() reads; the padding between columns is never touched).
  std::vector<float> a_wide, b_wide, c_wide;
  const float* a = static_cast<const float*>(A);
  const float* b = static_cast<const float*>(B);
  int lda_used = lda, ldb_used = ldb;
  if (at != CUDA_R_32F && k > 0) {
    a_wide.resize(rows_a * cols_a);
    for (size_t col = 0; col < cols_a; ++col)
      for (size_t row = 0; row < rows_a; ++row) a_wide[col * rows_a + row] = load(A, at, col * lda + row);
    a = a_wide.data();
    lda_used = static_cast<int>(rows_a);
  }
  if (bt != CUDA_R_32F && k > 0) {
    b_wide.resize(rows_b * cols_b);
    for (size_t col = 0; col < cols_b; ++col)
      for (size_t row = 0; row < rows_b; ++row) b_wide[col * rows_b + row] = load(B, bt, col * ldb + row);
    b = b_wide.data();
    ldb_used = static_cast<int>(rows_b);
  }
  float* c = static_cast<float*>(C);
  int ldc_used = ldc;
  if (ct != CUDA_R_32F) {
    c_wide.assign(static_cast<size_t>(m) * n, 0.0f);
    if (beta != 0.0f)
      for (size_t col = 0; col < static_cast<size_t>(n); ++col)
        for (size_t row = 0; row < static_cast<size_t>(m); ++row) c_wide[col * m + row] = load(C, ct, col * ldc + row);
    c = c_wide.data();
    ldc_used = m;
  } else if (beta == 0.0f) {  // as in cuBLAS, C is not read when beta == 0 (it may hold NaN)
    for (size_t col = 0; col < static_cast<size_t>(n); ++col) std::memset(c + col * ldc, 0, sizeof(float) * m);
  }
  if (k == 0) {
    for (size_t col = 0; col < static_cast<size_t>(n); ++col)
      for (size_t row = 0; row < static_cast<size_t>(m); ++row) c[col * ldc_used + row] *= beta;
  } else {
    cblas_sgemm(CblasColMajor, to_cblas(ta), to_cblas(tb), m, n, k, alpha, a, lda_used, b, ldb_used, beta, c, ldc_used);
  }
  if (ct != CUDA_R_32F)
    for (size_t col = 0; col < static_cast<size_t>(n); ++col)
      for (size_t row = 0; row < static_cast<size_t>(m); ++row) store(C, ct, col * ldc + row, c_wide[col * m + row]);
  // initcheck: C's columns now hold values (the padding between them is untouched).
  const size_t element = ct == CUDA_R_32F ? 4 : 2;
  for (size_t col = 0; col < static_cast<size_t>(n); ++col)
    simt::detail::mark_device_written(static_cast<char*>(C) + col * ldc * element, m * element);
}

cublasStatus_t check_types(cudaDataType at, cudaDataType bt, cudaDataType ct, cublasComputeType_t compute) {
  if (element_size(at) == 0 || at != bt)
    return invalid("A and B must have the same type, CUDA_R_32F, CUDA_R_16F or CUDA_R_16BF"),
           CUBLAS_STATUS_NOT_SUPPORTED;
  if (ct != at && ct != CUDA_R_32F) return invalid("C must have A's type or CUDA_R_32F"), CUBLAS_STATUS_NOT_SUPPORTED;
  switch (compute) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
    case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF:
      return CUBLAS_STATUS_SUCCESS;
    default:
      return invalid("the emulator computes in fp32 only (CUBLAS_COMPUTE_32F*)"), CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

}  // namespace

cublasStatus_t simt_cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = reinterpret_cast<cublasHandle_t>(new Handle{});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t simt_cublasDestroy(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete reinterpret_cast<Handle*>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t simt_cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  reinterpret_cast<Handle*>(handle)->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t simt_cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (stream == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *stream = reinterpret_cast<Handle*>(handle)->stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t simt_cublasSetMathMode(cublasHandle_t handle, cublasMath_t) {
  return handle == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_SUCCESS;
}

const char* simt_cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "CUBLAS_STATUS_UNKNOWN";
  }
}

cublasStatus_t simt_cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                               cublasOperation_t transb, int m, int n, int k, const void* alpha,
                                               const void* A, cudaDataType Atype, int lda, long long strideA,
                                               const void* B, cudaDataType Btype, int ldb, long long strideB,
                                               const void* beta, void* C, cudaDataType Ctype, int ldc,
                                               long long strideC, int batchCount, cublasComputeType_t computeType,
                                               cublasGemmAlgo_t) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (simt::detail::sticky_error() != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
  if (const auto s = check_types(Atype, Btype, Ctype, computeType); s != CUBLAS_STATUS_SUCCESS) return s;
  if (const auto s = check_shape(transa, transb, m, n, k, lda, ldb, ldc); s != CUBLAS_STATUS_SUCCESS) return s;
  if (batchCount < 0) return invalid("batchCount must be >= 0");
  if (alpha == nullptr || beta == nullptr) return invalid("alpha and beta must not be null");
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  const size_t as = element_size(Atype), bs = element_size(Btype), cs = element_size(Ctype);
  const simt::detail::DeviceAccess access;  // the library reads A and B and writes C from the host side
  for (int batch = 0; batch < batchCount; ++batch) {
    gemm(transa, transb, m, n, k, a, static_cast<const char*>(A) + batch * strideA * static_cast<long long>(as), Atype,
         lda, static_cast<const char*>(B) + batch * strideB * static_cast<long long>(bs), Btype, ldb, b,
         static_cast<char*>(C) + batch * strideC * static_cast<long long>(cs), Ctype, ldc);
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t simt_cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                 int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
                                 const void* B, cudaDataType Btype, int ldb, const void* beta, void* C,
                                 cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  return simt_cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0,
                                         beta, C, Ctype, ldc, 0, 1, computeType, algo);
}

cublasStatus_t simt_cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                                int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                                const float* beta, float* C, int ldc) {
  return simt_cublasGemmEx(handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, beta, C,
                           CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t simt_cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                              int m, int n, int k, const float* alpha, const float* A, int lda,
                                              long long strideA, const float* B, int ldb, long long strideB,
                                              const float* beta, float* C, int ldc, long long strideC, int batchCount) {
  return simt_cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, CUDA_R_32F, lda, strideA, B,
                                         CUDA_R_32F, ldb, strideB, beta, C, CUDA_R_32F, ldc, strideC, batchCount,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}
