// Chapter 01's part of `inferlab tour`.
#include <cmath>
#include <cstdio>
#include <iomanip>

#include "chapters/tour.h"
#include "common/compare.h"
#include "common/rng.h"
#include "common/timer.h"
#include "kernels/attention/attention.h"

namespace inferlab {

void tour_chapter01(std::ostream& out, const Roofline& roofline, const TourOptions& options) {
  out << "== Chapter 01: naive CPU attention ==\n";
  Rng rng(Rng::fresh_seed());
  const int64_t heads = 4, kv_heads = 2, head_dim = 64;

  // 1. Correctness first: the fp32 version against the float64 oracle.
  {
    const int64_t L = 33;
    const Tensor<float> q = rng.normal_tensor({heads, L, head_dim});
    const Tensor<float> k = rng.normal_tensor({kv_heads, L, head_dim});
    const Tensor<float> v = rng.normal_tensor({kv_heads, L, head_dim});
    Tensor<float> o({heads, L, head_dim});
    o.poison();
    attention_cpu_naive(q, k, v, true, o);
    const Comparison c = compare_to_oracle(o, attention_reference(q, k, v, true), tolerance_for(Precision::fp32));
    out << "cpu/naive, " << heads << " heads (GQA " << heads / kv_heads << ":1), L=" << L << ", d=" << head_dim
        << ", causal: " << c.report() << "\n\n";
  }

  // 2. The seq_len sweep: prefill's arithmetic intensity grows with L (article model, fp32).
  out << "Per layer, " << heads << " heads x d=" << head_dim << ", fp32, non-causal. Bytes: article model "
      << "(Q, K, V, O + L x L scores once).\n";
  out << std::setw(6) << "L" << std::setw(12) << "MFLOP" << std::setw(11) << "MB" << std::setw(9) << "AI"
      << std::setw(12) << "GFLOP/s" << std::setw(14) << "% roofline" << "\n";
  for (int64_t L : options.quick ? std::vector<int64_t>{32, 128} : std::vector<int64_t>{64, 128, 256, 512, 1024}) {
    const Tensor<float> q = rng.normal_tensor({heads, L, head_dim});
    const Tensor<float> k = rng.normal_tensor({kv_heads, L, head_dim});
    const Tensor<float> v = rng.normal_tensor({kv_heads, L, head_dim});
    Tensor<float> o({heads, L, head_dim});
    const double seconds = best_time_seconds(options.quick ? 1 : 3, [&] { attention_cpu_naive(q, k, v, false, o); });
    const Cost cost = prefill_attention_cost({heads, kv_heads, L, head_dim}, TrafficModel::article, 4.0);
    const double gflops = cost.flops / seconds / 1e9;
    const double roof = roofline.attainable_gflops(cost.arithmetic_intensity());
    out << std::fixed << std::setprecision(1) << std::setw(6) << L << std::setw(12) << cost.flops / 1e6 << std::setw(11)
        << cost.bytes / 1e6 << std::setw(9) << cost.arithmetic_intensity() << std::setw(12) << gflops
        << std::setw(13) << 100.0 * gflops / roof << "%\n";
  }
  out << "Roofline: " << describe(roofline) << "\n"
      << "The naive loops reach a small fraction of the roof: the lesson of chapter 02 is how to climb it.\n\n";
}

}  // namespace inferlab
