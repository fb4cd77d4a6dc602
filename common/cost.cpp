#include "common/cost.h"

#include "common/check.h"

namespace inferlab {

std::string_view to_string(TrafficModel model) {
  switch (model) {
    case TrafficModel::article: return "article";
    case TrafficModel::unfused: return "unfused";
    case TrafficModel::fused: return "fused";
  }
  return "?";
}

namespace {

void check_dims(const AttentionDims& dims, double bytes_per_element) {
  require_positive("num_heads", dims.num_heads);
  require_positive("num_kv_heads", dims.num_kv_heads);
  require_positive("seq_len", dims.seq_len);
  require_positive("head_dim", dims.head_dim);
  require(dims.num_heads % dims.num_kv_heads == 0, "num_heads", dims.num_heads,
          "must be a multiple of num_kv_heads = " + std::to_string(dims.num_kv_heads));
  require(bytes_per_element > 0.0, "bytes_per_element", bytes_per_element, "must be > 0");
}

}  // namespace

Cost prefill_attention_cost(const AttentionDims& dims, TrafficModel model, double bytes_per_element,
                            FlopConvention flops) {
  check_dims(dims, bytes_per_element);
  const double L = static_cast<double>(dims.seq_len);
  const double d = static_cast<double>(dims.head_dim);
  const double heads = static_cast<double>(dims.num_heads);
  const double kv_heads = static_cast<double>(dims.num_kv_heads);
  Cost cost;
  cost.flops = heads * (flops == FlopConvention::dense ? 4.0 * L * L * d : 2.0 * d * L * (L + 1.0));
  const double qo_elements = heads * 2.0 * L * d;     // read Q, write O
  const double kv_elements = kv_heads * 2.0 * L * d;  // read K and V once per KV head
  double score_elements = 0.0;
  switch (model) {
    case TrafficModel::article: score_elements = heads * L * L; break;
    case TrafficModel::unfused: score_elements = heads * 4.0 * L * L; break;
    case TrafficModel::fused: score_elements = 0.0; break;
  }
  cost.bytes = bytes_per_element * (qo_elements + kv_elements + score_elements);
  return cost;
}

Cost decode_attention_cost(const AttentionDims& dims, double bytes_per_element) {
  check_dims(dims, bytes_per_element);
  const double L = static_cast<double>(dims.seq_len);
  const double d = static_cast<double>(dims.head_dim);
  Cost cost;
  cost.flops = static_cast<double>(dims.num_heads) * 4.0 * L * d;
  cost.bytes = bytes_per_element * (static_cast<double>(dims.num_kv_heads) * 2.0 * L * d +
                                    static_cast<double>(dims.num_heads) * 2.0 * d);
  return cost;
}

}  // namespace inferlab
