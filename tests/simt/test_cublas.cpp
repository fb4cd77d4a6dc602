// The cuBLAS shims: column-major GEMMs exactly as cuBLAS defines them, against a float64 oracle.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "simt/cublas.h"
#include "simt/device_buffer.h"
#include "tests/support/seeded.h"

namespace inferlab::sim::simt_cublas_tests {
namespace {


// C = alpha op(A) op(B) + beta C in column-major storage, in double.
std::vector<double> oracle(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, double alpha,
                           const std::vector<float>& a, int lda, const std::vector<float>& b, int ldb, double beta,
                           const std::vector<float>& c, int ldc) {
  std::vector<double> out(c.begin(), c.end());
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double sum = 0.0;
      for (int p = 0; p < k; ++p) {
        const double x = ta == CUBLAS_OP_N ? a[i + p * lda] : a[p + i * lda];
        const double y = tb == CUBLAS_OP_N ? b[p + j * ldb] : b[j + p * ldb];
        sum += x * y;
      }
      out[i + j * ldc] = alpha * sum + (beta == 0.0 ? 0.0 : beta * c[i + j * ldc]);
    }
  return out;
}

std::vector<float> random_floats(Rng& rng, size_t count) {
  std::vector<float> values(count);
  for (float& v : values) v = rng.uniform(-1.0f, 1.0f);
  return values;
}

class SimtCublas : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS); }
  void TearDown() override { EXPECT_EQ(cublasDestroy(handle_), CUBLAS_STATUS_SUCCESS); }
  cublasHandle_t handle_ = nullptr;
};

TEST_F(SimtCublas, SgemmAllTransposesWithPaddedLeadingDimensions) {
  testing::SeededRng rng;
  const int m = 13, n = 7, k = 9;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cublasSetStream(handle_, stream), CUBLAS_STATUS_SUCCESS);
  for (cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T})
    for (cublasOperation_t tb : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      const int lda = (ta == CUBLAS_OP_N ? m : k) + 3, ldb = (tb == CUBLAS_OP_N ? k : n) + 1, ldc = m + 2;
      const std::vector<float> a = random_floats(rng, lda * (ta == CUBLAS_OP_N ? k : m));
      const std::vector<float> b = random_floats(rng, ldb * (tb == CUBLAS_OP_N ? n : k));
      const std::vector<float> c = random_floats(rng, ldc * n);
      DeviceBuffer<float> da(a), db(b), dc(c);
      const float alpha = 0.75f, beta = -0.5f;
      ASSERT_EQ(cublasSgemm(handle_, ta, tb, m, n, k, &alpha, da.data(), lda, db.data(), ldb, &beta, dc.data(), ldc),
                CUBLAS_STATUS_SUCCESS);
      const std::vector<double> expected = oracle(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      const std::vector<float> got = dc.download();
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < ldc; ++i)
          if (i < m)
            ASSERT_NEAR(got[i + j * ldc], expected[i + j * ldc], 1e-5) << i << "," << j;
          else
            ASSERT_EQ(got[i + j * ldc], c[i + j * ldc]) << "padding row " << i << " must not be written";
    }
  cudaStream_t got_stream = nullptr;
  EXPECT_EQ(cublasGetStream(handle_, &got_stream), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(got_stream, stream);
  cudaStreamDestroy(stream);
}

TEST_F(SimtCublas, BetaZeroIgnoresNaNInC) {
  testing::SeededRng rng;
  const int m = 5, n = 3, k = 4;
  DeviceBuffer<float> a(random_floats(rng, m * k)), b(random_floats(rng, k * n)), c(m * n);  // c poisoned (NaN)
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(
      cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, a.data(), m, b.data(), k, &beta, c.data(), m),
      CUBLAS_STATUS_SUCCESS);
  for (float v : c.download()) EXPECT_TRUE(std::isfinite(v));
}

TEST_F(SimtCublas, SgemmStridedBatched) {
  testing::SeededRng rng;
  const int m = 6, n = 5, k = 7, batches = 3;
  const long long sa = m * k + 4, sb = k * n + 1, sc = m * n + 2;
  const std::vector<float> a = random_floats(rng, sa * batches), b = random_floats(rng, sb * batches);
  const std::vector<float> c = random_floats(rng, sc * batches);
  DeviceBuffer<float> da(a), db(b), dc(c);
  const float alpha = 1.25f, beta = 0.5f;
  ASSERT_EQ(cublasSgemmStridedBatched(handle_, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, da.data(), k, sa, db.data(),
                                      k, sb, &beta, dc.data(), m, sc, batches),
            CUBLAS_STATUS_SUCCESS);
  const std::vector<float> got = dc.download();
  for (int batch = 0; batch < batches; ++batch) {
    const std::vector<float> ab(a.begin() + batch * sa, a.begin() + batch * sa + k * m);
    const std::vector<float> bb(b.begin() + batch * sb, b.begin() + batch * sb + k * n);
    const std::vector<float> cb(c.begin() + batch * sc, c.begin() + batch * sc + m * n);
    const std::vector<double> expected = oracle(CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, alpha, ab, k, bb, k, beta, cb, m);
    for (int i = 0; i < m * n; ++i) ASSERT_NEAR(got[batch * sc + i], expected[i], 1e-5) << batch << ":" << i;
    EXPECT_EQ(got[batch * sc + m * n], c[batch * sc + m * n]) << "gap between batches untouched";
  }
}

TEST_F(SimtCublas, GemmExHalfAndBfloat16InputsFp32Compute) {
  testing::SeededRng rng;
  const int m = 9, n = 11, k = 17;
  const std::vector<float> a = random_floats(rng, m * k), b = random_floats(rng, k * n), c = random_floats(rng, m * n);
  // Round inputs to the 16-bit types so that the oracle sees exactly what cuBLAS sees.
  std::vector<__half> ah(a.size()), bh(b.size());
  std::vector<__nv_bfloat16> ab(a.size()), bb(b.size()), cb(c.size());
  std::vector<float> a_half(a.size()), b_half(b.size()), a_bf(a.size()), b_bf(b.size()), c_bf(c.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ah[i] = __float2half(a[i]);
    a_half[i] = __half2float(ah[i]);
    ab[i] = __float2bfloat16(a[i]);
    a_bf[i] = __bfloat162float(ab[i]);
  }
  for (size_t i = 0; i < b.size(); ++i) {
    bh[i] = __float2half(b[i]);
    b_half[i] = __half2float(bh[i]);
    bb[i] = __float2bfloat16(b[i]);
    b_bf[i] = __bfloat162float(bb[i]);
  }
  for (size_t i = 0; i < c.size(); ++i) {
    cb[i] = __float2bfloat16(c[i]);
    c_bf[i] = __bfloat162float(cb[i]);
  }
  const float alpha = 1.0f, beta = 1.0f;
  {  // fp16 x fp16 -> fp32
    DeviceBuffer<__half> da(ah), db(bh);
    DeviceBuffer<float> dc(c);
    ASSERT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &alpha, da.data(), CUDA_R_16F, m, db.data(),
                           CUDA_R_16F, n, &beta, dc.data(), CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    const std::vector<double> expected =
        oracle(CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, alpha, a_half, m, b_half, n, beta, c, m);
    const std::vector<float> got = dc.download();
    for (int i = 0; i < m * n; ++i) ASSERT_NEAR(got[i], expected[i], 1e-5) << i;
  }
  {  // bf16 x bf16 -> bf16, strided batched with one batch
    DeviceBuffer<__nv_bfloat16> da(ab), db(bb), dc(cb);
    ASSERT_EQ(cublasGemmStridedBatchedEx(handle_, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &alpha, da.data(), CUDA_R_16BF, m,
                                         0, db.data(), CUDA_R_16BF, n, 0, &beta, dc.data(), CUDA_R_16BF, m, 0, 1,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    const std::vector<double> expected =
        oracle(CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, alpha, a_bf, m, b_bf, n, beta, c_bf, m);
    const std::vector<__nv_bfloat16> got = dc.download();
    for (int i = 0; i < m * n; ++i)
      ASSERT_NEAR(__bfloat162float(got[i]), expected[i], 1e-2 * (1 + std::fabs(expected[i]))) << i;
  }
}

TEST_F(SimtCublas, InvalidArgumentsAreRefused) {
  DeviceBuffer<float> a(16), b(16), c(16);
  const float one = 1.0f;
  EXPECT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a.data(), 3, b.data(), 4, &one, c.data(), 4),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, -1, 4, 4, &one, a.data(), 4, b.data(), 4, &one, c.data(), 4),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, a.data(), CUDA_R_16F, 4, b.data(),
                         CUDA_R_32F, 4, &one, c.data(), CUDA_R_32F, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "cuBLAS errors do not touch the runtime's last error";
}

}  // namespace
}  // namespace inferlab::sim::simt_cublas_tests
