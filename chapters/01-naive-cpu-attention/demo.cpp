// Chapter 01's part of `inferlab tour`: cpu/naive checked against the float64 oracle, then a
// seq_len sweep that prints, per L, the FLOPs, the bytes, the arithmetic intensity, the measured
// GFLOP/s and the percentage of what this machine's roofline allows at that intensity.
#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <vector>

#include "chapters/tour.h"
#include "common/compare.h"
#include "common/cost.h"
#include "common/rng.h"
#include "common/timer.h"
#include "kernels/attention/attention.h"

namespace inferlab {

void tour_chapter01(std::ostream& out, const Roofline& roofline, const TourOptions& options) {
  out << "== Chapter 01: naive CPU attention ==\n";
  Rng rng(Rng::fresh_seed());
  const int64_t heads = 4, head_dim = 64;
  constexpr double kFp32 = 4.0;  // bytes per element

  // 1. Correctness first: the fp32 version against the float64 oracle, GQA and causal mask on.
  {
    const int64_t kv_heads = 2;
    const int64_t L = 33;
    const Tensor<float> q = rng.normal_tensor({heads, L, head_dim});
    const Tensor<float> k = rng.normal_tensor({kv_heads, L, head_dim});
    const Tensor<float> v = rng.normal_tensor({kv_heads, L, head_dim});
    Tensor<float> o({heads, L, head_dim});
    o.poison();
    attention_cpu_naive(q, k, v, true, o);
    const Comparison c = compare_to_oracle(o, attention_reference(q, k, v, true), tolerance_for(Precision::fp32));
    out << "cpu/naive, " << heads << " heads (GQA " << heads / kv_heads << ":1), L=" << L << ", d=" << head_dim
        << ", causal, vs the float64 oracle: " << c.report() << "\n\n";
  }

  // 2. The seq_len sweep (non-causal, dense FLOP count). AI uses the article's byte model; the
  //    unfused column counts the ~4·L² score traffic a real three-pass pipeline has. Multi-head
  //    (no GQA) so that AI is exactly the per-head formula of the lesson: L·d / (L + 4d) in fp32.
  const int64_t kv_heads = heads;
  out << "Prefill, one layer: " << heads << " heads, d=" << head_dim
      << ", fp32, non-causal (FLOPs = 4*L*L*d per head).\n"
      << "MB and AI: the article's model (Q, K, V, O + the L x L scores once); AI unfused: ~4*L*L score"
         " elements.\n"
      << "roof = min(peak, AI x triad bandwidth) at that AI; % roof = GFLOP/s / roof.\n";
  out << std::setw(6) << "L" << std::setw(10) << "MFLOP" << std::setw(9) << "MB" << std::setw(8) << "AI"
      << std::setw(12) << "AI unfused" << std::setw(10) << "GFLOP/s" << std::setw(8) << "roof" << std::setw(9)
      << "% roof"
      << "  roof that applies\n";
  const std::vector<int64_t> lengths =
      options.quick ? std::vector<int64_t>{32, 128} : std::vector<int64_t>{64, 128, 256, 512, 1024, 2048};
  for (const int64_t L : lengths) {
    const Tensor<float> q = rng.normal_tensor({heads, L, head_dim});
    const Tensor<float> k = rng.normal_tensor({kv_heads, L, head_dim});
    const Tensor<float> v = rng.normal_tensor({kv_heads, L, head_dim});
    Tensor<float> o({heads, L, head_dim});
    // One untimed call (page faults, caches) sizes the runs: about 0.25 s of them, at least 2,
    // and the fastest counts (the least disturbed by other work on the machine).
    Stopwatch warm_up;
    attention_cpu_naive(q, k, v, false, o);
    const int runs = options.quick ? 1 : std::clamp(static_cast<int>(0.25 / warm_up.seconds()), 2, 50);
    const double seconds = best_time_seconds(runs, [&] { attention_cpu_naive(q, k, v, false, o); });
    const AttentionDims dims{heads, kv_heads, L, head_dim};
    const Cost cost = prefill_attention_cost(dims, TrafficModel::article, kFp32);
    const Cost unfused = prefill_attention_cost(dims, TrafficModel::unfused, kFp32);
    const double ai = cost.arithmetic_intensity();
    const double gflops = cost.flops / seconds / 1e9;
    const double roof = roofline.attainable_gflops(ai);
    out << std::fixed << std::setprecision(1) << std::setw(6) << L << std::setw(10) << cost.flops / 1e6 << std::setw(9)
        << cost.bytes / 1e6 << std::setw(8) << ai << std::setw(12) << unfused.arithmetic_intensity() << std::setw(10)
        << gflops << std::setw(8) << std::setprecision(0) << roof << std::setw(8) << std::setprecision(1)
        << 100.0 * gflops / roof << "%  " << (ai < roofline.ridge_point() ? "memory" : "compute") << "\n";
  }

  // 3. For contrast: a decode step at the largest L (chapter 03 measures it).
  const Cost decode = decode_attention_cost({heads, kv_heads, lengths.back(), head_dim}, kFp32);
  out << std::setprecision(2) << "Decode, one new token against L=" << lengths.back()
      << " cached tokens (same heads): AI = " << decode.arithmetic_intensity()
      << " FLOP/byte in fp32 (about 1 in fp16) at every L: memory-bound (chapter 03).\n";
  out << std::setprecision(1) << "Ridge point " << roofline.ridge_point() << " FLOP/byte. Prefill's AI grows with L"
      << " and crosses it; the naive loops still reach only a few % of the roof (chapter 02 climbs it).\n\n";
}

}  // namespace inferlab
