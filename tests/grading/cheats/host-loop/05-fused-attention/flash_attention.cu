// CHEAT (caught by the tests: no launch): "flash attention" as a host loop with a full L×L score
// matrix and no kernel at all. It passed Ch05Flash 6/6 when the tests looked only at the output;
// they now require a launch and bound the call's memory. The other two exercises are the stubs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "05-fused-attention/ch05.h"
#include "common/check.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS::student {

void flash_attention(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                     Tensor<float>& out) {
  const int64_t heads = q.dim(0), L = q.dim(1), d = q.dim(2), group = heads / k.dim(0);
  const float scale = 1.0f / std::sqrt(float(d));
  std::vector<float> scores(size_t(L * L));  // the L×L matrix a fused kernel never holds
  for (int64_t h = 0; h < heads; ++h) {
    const float* Q = q.data() + h * L * d;
    const float* K = k.data() + (h / group) * L * d;
    const float* V = v.data() + (h / group) * L * d;
    for (int64_t i = 0; i < L; ++i) {
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < L; ++j) {
        float s = 0.0f;
        for (int64_t c = 0; c < d; ++c) s += Q[i * d + c] * K[j * d + c];
        scores[size_t(i * L + j)] = causal && j > i ? -std::numeric_limits<float>::infinity() : s * scale;
        m = std::max(m, scores[size_t(i * L + j)]);
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < L; ++j) sum += (scores[size_t(i * L + j)] = std::exp(scores[size_t(i * L + j)] - m));
      for (int64_t c = 0; c < d; ++c) {
        float acc = 0.0f;
        for (int64_t j = 0; j < L; ++j) acc += scores[size_t(i * L + j)] * V[j * d + c];
        out.data()[(h * L + i) * d + c] = acc / sum;
      }
    }
  }
}

}  // namespace inferlab::INFERLAB_BACKEND_NS::student
