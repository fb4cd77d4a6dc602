// cpu/openblas — chapter 02: unfused prefill attention as two OpenBLAS sgemm calls per KV head
// with a softmax in between: the baseline a CPU user would write first, and the yardstick for
// cpu/blocked (chapter 02's lesson sets blocked against this version's time).
//
// For KV head g, the G = group_size query heads that read it are consecutive in Q, so their
// rows form one [G·L × d] matrix and each product is one GEMM for the whole group (GQA batched),
// or for a chunk of its rows:
//   S = (1/√d) · Q_rows · K_gᵀ        sgemm  M = rows, N = L, K = d     (2·rows·L·d FLOPs)
//   P = softmax(S + mask) row by row  (vector exp from cpu_simd.h, the same as cpu/blocked)
//   O_rows = P · V_g                  sgemm  M = rows, N = d, K = L     (2·rows·L·d FLOPs)
// S really is a [rows × L] matrix in memory — a whole head (or group) of rows unless that
// passes 128 MiB per thread (L = 8192 is cut into chunks of 4096 rows): this is the "unfused"
// traffic model of common/cost.h — the scores are written by the first GEMM, read and written
// by the softmax, read again by the second GEMM, ~4·L² floats per head, through L3/DRAM once
// they outgrow L2 (16 MiB per head at L = 2048). Compare cpu/blocked, whose score block stays in L2.
//
// The causal mask does NOT save work here: a GEMM computes the whole rectangle, and the masked
// part (keys after the query) is computed, then overwritten with 0 by the softmax. All dense
// FLOPs, 4·L²·d per head, are executed; only 2·d·L·(L+1) of them are useful. (cpu/blocked skips
// the key blocks above the diagonal and does about half the work.)
//
// Threading. Debian's libopenblas0 is the pthread build (openblas_get_parallel() == 1): each
// sgemm runs on OpenBLAS's own thread pool, whose workers keep spinning (sched_yield) for a while
// after a call. Three ways to combine the two pools were tried, slowest first:
//   - GEMMs from one thread on OpenBLAS's threads, the softmax on OpenMP's: the softmax fought the
//     spinning BLAS workers and took several times longer than on one thread;
//   - the same with the softmax on the calling thread only;
//   - OpenMP over (KV head, row chunk), OpenBLAS set to 1 thread inside each: the fastest.
// So this version uses the last: one thread pool (OpenMP, as every other CPU version), each
// OpenMP thread running whole GEMM–softmax–GEMM chunks with single-threaded sgemm calls; never
// 2 × 2 threads on 2 cores. openblas_set_num_threads() is process-wide, so the previous setting
// is restored on return. (With an OpenMP build of OpenBLAS, a call from inside a parallel region
// is single-threaded by itself.) Rows are split into at least as many chunks as threads.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "common/ceil_div.h"
#include "kernels/attention/attention.h"
#include "kernels/primitives/cpu_simd.h"

namespace inferlab {
namespace {

constexpr int64_t kMaxScoreFloats = int64_t(1) << 25;  // 128 MiB of scores per thread

// Restores OpenBLAS's thread count when the call ends, exceptions included.
class OpenblasSingleThreaded {
 public:
  OpenblasSingleThreaded() : saved_(openblas_get_num_threads()) { openblas_set_num_threads(1); }
  ~OpenblasSingleThreaded() { openblas_set_num_threads(saved_); }
  OpenblasSingleThreaded(const OpenblasSingleThreaded&) = delete;
  OpenblasSingleThreaded& operator=(const OpenblasSingleThreaded&) = delete;

 private:
  int saved_;
};

}  // namespace

void attention_cpu_openblas(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                            Tensor<float>& out) {
  const AttentionShape shape = attention_shape(q, k, v, causal);
  check_attention_output(out, shape);
  const int64_t L = shape.seq_len, d = shape.head_dim;
  const int64_t group_rows = shape.group_size() * L;  // rows of Q_group (and of S)
  const int64_t ld_scores = simd::round_up(L, 16);    // whole vectors per row for softmax
  const int64_t threads = omp_get_max_threads();
  const int64_t chunks_per_group = std::max(ceil_div(group_rows * ld_scores, kMaxScoreFloats),
                                            std::min(group_rows, ceil_div(threads, shape.num_kv_heads)));
  const int64_t chunk_rows = ceil_div(group_rows, chunks_per_group);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const OpenblasSingleThreaded single_threaded_blas;

#pragma omp parallel
  {
    simd::AlignedFloats scores(chunk_rows * ld_scores);  // this thread's S (then P) chunk
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < shape.num_kv_heads * chunks_per_group; ++item) {
      const int64_t g = item / chunks_per_group, m0 = (item % chunks_per_group) * chunk_rows;
      const int64_t rows = std::min(chunk_rows, group_rows - m0);
      if (rows <= 0) continue;
      const float* q_rows = q.data() + (g * group_rows + m0) * d;  // the group's heads are consecutive
      const float* k_g = k.data() + g * L * d;
      const float* v_g = v.data() + g * L * d;
      // S = scale · Q·Kᵀ over every key, masked or not.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, blasint(rows), blasint(L), blasint(d), scale, q_rows,
                  blasint(d), k_g, blasint(d), 0.0f, scores.data(), blasint(ld_scores));
      // P = softmax(S) row by row: row m of the group is query position m % L.
      for (int64_t r = 0; r < rows; ++r) {
        float* row = scores.data() + r * ld_scores;
        const int64_t valid = causal ? (m0 + r) % L + 1 : L;
        const float inv_sum = 1.0f / simd::softmax_numerator(row, valid, L);
        for (int64_t j = 0; j < valid; ++j) row[j] *= inv_sum;
      }
      // O = P·V.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blasint(rows), blasint(d), blasint(L), 1.0f, scores.data(),
                  blasint(ld_scores), v_g, blasint(d), 0.0f, out.data() + (g * group_rows + m0) * d, blasint(d));
    }
  }
}

}  // namespace inferlab
