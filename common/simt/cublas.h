#pragma once
/// @file cublas.h
/// cuBLAS for kernel files: the real library under nvcc; under g++ the emulator's versions of
/// the calls the lessons use, computed by a CPU GEMM (OpenBLAS) with cuBLAS's exact
/// column-major semantics:
///
/// | call | emulated |
/// | --- | --- |
/// | cublasCreate, cublasDestroy, cublasSetStream, cublasGetStream, cublasSetMathMode | yes (handles only) |
/// | cublasSgemm, cublasSgemmStridedBatched | fp32 |
/// | cublasGemmEx, cublasGemmStridedBatchedEx | A, B in fp16 / bf16 / fp32; C in the same type or fp32; compute
/// CUBLAS_COMPUTE_32F* (TF32 and the 16-bit "fast" modes compute in fp32) |
///
/// alpha and beta are read as host (or, in the emulator equivalently, device) `float`s.

#include "simt/simt.h"

#if defined(__CUDACC__)
#include <cublas_v2.h>
#else

#if SIMT_TOOLKIT_HEADERS && __has_include(<cublas_api.h>)
#include <cublas_api.h>
#else
#include "simt/detail/fallback_cublas.h"
#endif

/// @cond SIMT_DETAIL
#undef cublasCreate
#undef cublasDestroy
#undef cublasSetStream
#undef cublasGetStream
#undef cublasSetMathMode
#undef cublasGetStatusString
#undef cublasSgemm
#undef cublasSgemmStridedBatched
#undef cublasGemmEx
#undef cublasGemmStridedBatchedEx
#define cublasCreate simt_cublasCreate
#define cublasDestroy simt_cublasDestroy
#define cublasSetStream simt_cublasSetStream
#define cublasGetStream simt_cublasGetStream
#define cublasSetMathMode simt_cublasSetMathMode
#define cublasGetStatusString simt_cublasGetStatusString
#define cublasSgemm simt_cublasSgemm
#define cublasSgemmStridedBatched simt_cublasSgemmStridedBatched
#define cublasGemmEx simt_cublasGemmEx
#define cublasGemmStridedBatchedEx simt_cublasGemmStridedBatchedEx

cublasStatus_t simt_cublasCreate(cublasHandle_t* handle);
cublasStatus_t simt_cublasDestroy(cublasHandle_t handle);
cublasStatus_t simt_cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t simt_cublasGetStream(cublasHandle_t handle, cudaStream_t* stream);
cublasStatus_t simt_cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
const char* simt_cublasGetStatusString(cublasStatus_t status);
cublasStatus_t simt_cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                                int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                                const float* beta, float* C, int ldc);
cublasStatus_t simt_cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                              int m, int n, int k, const float* alpha, const float* A, int lda,
                                              long long strideA, const float* B, int ldb, long long strideB,
                                              const float* beta, float* C, int ldc, long long strideC, int batchCount);
cublasStatus_t simt_cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                 int n, int k, const void* alpha, const void* A, cudaDataType Atype, int lda,
                                 const void* B, cudaDataType Btype, int ldb, const void* beta, void* C,
                                 cudaDataType Ctype, int ldc, cublasComputeType_t computeType, cublasGemmAlgo_t algo);
cublasStatus_t simt_cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                               cublasOperation_t transb, int m, int n, int k, const void* alpha,
                                               const void* A, cudaDataType Atype, int lda, long long strideA,
                                               const void* B, cudaDataType Btype, int ldb, long long strideB,
                                               const void* beta, void* C, cudaDataType Ctype, int ldc,
                                               long long strideC, int batchCount, cublasComputeType_t computeType,
                                               cublasGemmAlgo_t algo);
/// @endcond
#endif
