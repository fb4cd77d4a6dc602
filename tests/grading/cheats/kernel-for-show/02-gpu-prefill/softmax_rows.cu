// CHEAT (caught by the tests: the emulator's host-access report): softmax_rows with a kernel
// launched for show that does nothing, and the softmax computed by a host loop that reads the
// uploaded scores through the device pointer, as if device memory were host memory. It makes
// every check the graded tests had: a launch is counted and the call's device-memory peak is the
// given launcher's (the input really is uploaded). On a GPU the host loop's first read of
// d_scores crashes; on the emulator it used to work and passed Ch02Softmax 4/4 (the older check
// of instrumented host code only set a sticky error, which no later call of this cheat reads; run
// the tests with SIMT_HOST_ACCESS=allow to see it pass). Device memory is now closed to host code
// outside launches and the runtime's copies: the read faults and is reported — "simt: memcheck:
// host code read device memory allocated at softmax_rows.cu:… / the read is at
// softmax_rows.cu:…" — and the call fails. The other exercises of the chapter are the stubs.
#include <cmath>

#include "02-gpu-prefill/ch02.h"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

namespace {

__global__ void softmax_rows_kernel(const float*, float*, int) {}  // for show: it counts as a launch

}  // namespace

void softmax_rows(const Tensor<float>& scores, Tensor<float>& probs, int threads_per_block) {
  require(scores.rank() == 2, "scores.shape", to_string(scores.shape()), "must be [rows, row_len]");
  require(probs.shape() == scores.shape(), "probs.shape", to_string(probs.shape()),
          "must equal scores.shape " + to_string(scores.shape()));
  require(threads_per_block >= 32 && threads_per_block <= 1024 && threads_per_block % 32 == 0, "threads_per_block",
          threads_per_block, "must be a multiple of 32 from 32 to 1024");
  const int64_t rows = scores.dim(0), row_len = scores.dim(1);
  if (rows == 0) return;

  const DeviceBuffer<float> d_scores(scores);
  auto d_probs = DeviceBuffer<float>::poisoned(probs.size());
  check_cuda(simt::launch(softmax_rows_kernel, dim3(unsigned(rows)), dim3(unsigned(threads_per_block)), 0, nullptr,
                          static_cast<const float*>(d_scores.data()), d_probs.data(), int(row_len)),
             "softmax_rows_kernel");
  check_cuda(cudaDeviceSynchronize(), "softmax_rows_kernel");
  // The "kernel", run by the host: it reads the device buffer and writes the host output.
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = d_scores.data() + r * row_len;
    float* p = probs.data() + r * row_len;
    float row_max = -INFINITY;
    for (int64_t j = 0; j < row_len; ++j) row_max = std::fmax(row_max, s[j]);
    float sum = 0.0f;
    for (int64_t j = 0; j < row_len; ++j) sum += std::exp(s[j] - row_max);
    for (int64_t j = 0; j < row_len; ++j) p[j] = std::exp(s[j] - row_max) / sum;
  }
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
