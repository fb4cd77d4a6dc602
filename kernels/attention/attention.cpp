#include "kernels/attention/attention.h"

namespace inferlab {

AttentionShape attention_shape(const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal) {
  check_rank(q, 3, "q");
  check_rank(k, 3, "k");
  check_rank(v, 3, "v");
  AttentionShape shape{q.dim(0), k.dim(0), q.dim(1), q.dim(2), causal};
  require_positive("num_heads (q.shape[0])", shape.num_heads);
  require_positive("num_kv_heads (k.shape[0])", shape.num_kv_heads);
  require_positive("seq_len (q.shape[1])", shape.seq_len);
  require_positive("head_dim (q.shape[2])", shape.head_dim);
  check_shape(v, k.shape(), "v");
  require(k.dim(1) == shape.seq_len && k.dim(2) == shape.head_dim, "k.shape", to_string(k.shape()),
          "must be [num_kv_heads, seq_len, head_dim] with q's seq_len " + std::to_string(shape.seq_len) +
              " and head_dim " + std::to_string(shape.head_dim));
  require(shape.num_heads % shape.num_kv_heads == 0, "num_heads", shape.num_heads,
          "must be a multiple of num_kv_heads = " + std::to_string(shape.num_kv_heads));
  return shape;
}

void check_attention_output(const Tensor<float>& out, const AttentionShape& shape) {
  check_shape(out, {shape.num_heads, shape.seq_len, shape.head_dim}, "out");
}

}  // namespace inferlab
