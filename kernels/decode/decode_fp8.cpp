#include "kernels/decode/decode_fp8.h"

#include <string>

#include "common/check.h"

namespace inferlab {

DecodeShape decode_shape(const Tensor<float>& q, const Fp8KvCache& cache) {
  const KvCacheShape& c = cache.shape();
  check_rank(q, 3, "q");
  require(q.dim(0) == c.batch && q.dim(2) == c.head_dim, "q.shape", to_string(q.shape()),
          "must be [batch = " + std::to_string(c.batch) + ", num_heads, head_dim = " + std::to_string(c.head_dim) + "]");
  require(q.dim(1) > 0 && q.dim(1) % c.num_kv_heads == 0, "num_heads (q.shape[1])", q.dim(1),
          "must be a positive multiple of num_kv_heads = " + std::to_string(c.num_kv_heads));
  for (int64_t b = 0; b < c.batch; ++b)
    require(cache.length(b) > 0, "lengths[" + std::to_string(b) + "]", 0, "decode needs the new token appended first");
  return {c.batch, q.dim(1), c.num_kv_heads, c.max_seq_len, c.head_dim};
}

}  // namespace inferlab
