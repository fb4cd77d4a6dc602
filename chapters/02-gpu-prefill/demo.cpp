// Chapter 02's part of `inferlab tour`: the CUDA kernels run on the SIMT emulator and are checked
// against the float64 oracle (the same .cu sources run on a GPU with --backend cuda); then the
// CPU's own version ladder (naive loops → cache-blocked SIMD → OpenBLAS) measured side by side;
// then the summary table of the tour: prefill against decode, both measured, on this machine's
// roofline.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <vector>

#include "chapters/03-kv-cache-decode/random_cache.h"
#include "chapters/tour.h"
#include "common/compare.h"
#include "common/cost.h"
#include "common/rng.h"
#include "common/timer.h"
#include "kernels/registry.h"
#include "kernels/registry.h"

namespace inferlab {

namespace {

constexpr double kFp32 = 4.0;  // bytes per element

struct Inputs {
  Tensor<float> q, k, v;
};

Inputs random_inputs(Rng& rng, const AttentionDims& dims) {
  return {rng.normal_tensor({dims.num_heads, dims.seq_len, dims.head_dim}),
          rng.normal_tensor({dims.num_kv_heads, dims.seq_len, dims.head_dim}),
          rng.normal_tensor({dims.num_kv_heads, dims.seq_len, dims.head_dim})};
}

}  // namespace

double time_prefill(const AttentionVersion& version, const Tensor<float>& q, const Tensor<float>& k,
                    const Tensor<float>& v, bool causal, bool quick) {
  Tensor<float> out({q.dim(0), q.dim(1), q.dim(2)});
  Stopwatch warm_up;
  version.run(q, k, v, causal, out);
  const int runs = quick ? 1 : std::clamp(static_cast<int>(0.3 / std::max(warm_up.seconds(), 1e-6)), 2, 20);
  return best_time_seconds(runs, [&] { version.run(q, k, v, causal, out); });
}

void tour_chapter02(std::ostream& out, const Roofline& roofline, const TourOptions& options) {
  out << "== Chapter 02: GPU prefill (CUDA kernels on the emulator; the CPU's version ladder) ==\n";
  Rng rng(Rng::fresh_seed());

  // 1. The CUDA kernels, run by the SIMT emulator: one fiber per CUDA thread, real barriers and
  //    warp shuffles. Small shapes: the emulator proves correctness, it does not measure speed.
  {
    const AttentionDims dims{4, 2, options.quick ? 17 : 65, 80};
    const Inputs in = random_inputs(rng, dims);
    const Tensor<double> expected = attention_reference(in.q, in.k, in.v, true);
    out << "CUDA kernels on the sim backend, " << dims.num_heads << " heads (GQA 2:1), L=" << dims.seq_len
        << ", d=" << dims.head_dim << ", causal, vs the float64 oracle:\n";
    for (const AttentionVersion& version : attention_versions()) {
      if (version.backend != Backend::sim || version.chapter != 2) continue;
      Tensor<float> o({dims.num_heads, dims.seq_len, dims.head_dim});
      o.poison();
      Stopwatch stopwatch;
      version.run(in.q, in.k, in.v, true, o);
      const double seconds = stopwatch.seconds();
      const Comparison c = compare_to_oracle(o, expected, tolerance_for(version.precision));
      out << "  " << std::left << std::setw(18) << version.name << std::right << std::setw(5)
          << to_string(version.precision) << "  rel. error " << std::scientific << std::setprecision(1)
          << c.rel_frobenius << std::fixed << (c.ok ? "  ok" : "  WRONG") << "  (" << std::setprecision(0)
          << seconds * 1e3 << " ms emulated)\n";
    }
    out << "  The same sources run on a GPU: ./inferlab attention --backend cuda --version cuda/tiled ...\n\n";
  }

  // 2. The CPU ladder, side by side at one size: what blocking and a tuned library buy.
  const AttentionDims dims{4, 4, options.quick ? 256 : 1024, 128};
  const Inputs in = random_inputs(rng, dims);
  const Cost cost = prefill_attention_cost(dims, TrafficModel::article, kFp32);
  out << "CPU versions side by side: " << dims.num_heads << " heads, L=" << dims.seq_len << ", d=" << dims.head_dim
      << ", fp32, non-causal (" << std::setprecision(2) << cost.flops / 1e9 << " GFLOP per call):\n";
  out << "  " << std::left << std::setw(14) << "version" << std::right << std::setw(10) << "ms" << std::setw(10)
      << "GFLOP/s" << std::setw(10) << "% peak" << std::setw(12) << "vs naive\n";
  double naive_seconds = 0.0;
  for (const AttentionVersion& version : attention_versions()) {
    if (version.backend != Backend::cpu || version.chapter > 2) continue;
    const double seconds = time_prefill(version, in.q, in.k, in.v, false, options.quick);
    if (version.name == "cpu/naive") naive_seconds = seconds;
    const double gflops = cost.flops / seconds / 1e9;
    out << "  " << std::left << std::setw(14) << version.name << std::right << std::fixed << std::setprecision(1)
        << std::setw(10) << seconds * 1e3 << std::setw(10) << gflops << std::setw(9)
        << 100.0 * gflops / roofline.peak_gflops << "%" << std::setw(10) << naive_seconds / seconds << "x\n";
  }
  out << "\n";
}

void tour_summary(std::ostream& out, const Roofline& roofline, const TourOptions& options) {
  out << "== Summary: prefill vs decode on this machine's roofline ==\n";
  Rng rng(Rng::fresh_seed());
  const AttentionVersion& best = find_attention_version("cpu/blocked", Backend::cpu);
  const AttentionVersion& fused_version = find_attention_version("cpu/flash", Backend::cpu);
  const int64_t fused_len = options.quick ? 256 : 1024;  // where cpu/flash is measured too (chapter 05)
  out << "One layer, 8 heads, d=128, fp32. Prefill measured with " << best.name << " (unfused) and, at L=" << fused_len
      << ",\n"
      << fused_version.name << " (fused, chapter 05); one decode step (one new token per sequence) measured too.\n"
      << "AI (fused) = L/2 in fp16, L/4 in fp32 with one KV head per query head (8 KV heads here; L*g/(g+1) in\n"
      << "fp16 with GQA groups of g): what a kernel that never writes the scores could reach.\n";
  out << std::setw(22) << "" << std::setw(12) << "AI article" << std::setw(12) << "AI unfused" << std::setw(11)
      << "AI fused" << std::setw(10) << "GFLOP/s" << std::setw(9) << "% roof" << "  bound\n";
  const std::vector<int64_t> lengths =
      options.quick ? std::vector<int64_t>{64, 256} : std::vector<int64_t>{64, 256, 1024, 4096};
  for (int64_t L : lengths) {
    const AttentionDims dims{8, 8, L, 128};
    const Inputs in = random_inputs(rng, dims);
    const double seconds = time_prefill(best, in.q, in.k, in.v, false, options.quick);
    const Cost article = prefill_attention_cost(dims, TrafficModel::article, kFp32);
    const Cost unfused = prefill_attention_cost(dims, TrafficModel::unfused, kFp32);
    const Cost fused = prefill_attention_cost(dims, TrafficModel::fused, kFp32);
    const double gflops = article.flops / seconds / 1e9;
    // The kernel really moves the unfused traffic: that is the roof it lives under.
    const double roof = roofline.attainable_gflops(unfused.arithmetic_intensity());
    out << "  prefill L=" << std::left << std::setw(10) << L << std::right << std::fixed << std::setprecision(1)
        << std::setw(12) << article.arithmetic_intensity() << std::setw(12) << unfused.arithmetic_intensity()
        << std::setw(11) << fused.arithmetic_intensity() << std::setw(10) << gflops << std::setw(8)
        << 100.0 * gflops / roof << "%  "
        << (unfused.arithmetic_intensity() < roofline.ridge_point() ? "memory" : "compute") << "\n";
    if (L != fused_len) continue;
    // The fused kernel on the same inputs: it moves only Q, K, V and O, so its roof is at the fused AI.
    const double fused_gflops = fused.flops / time_prefill(fused_version, in.q, in.k, in.v, false, options.quick) / 1e9;
    out << "  " << std::left << std::setw(10) << fused_version.name << "L=" << std::setw(8) << L << std::right
        << std::setw(12) << "-" << std::setw(12) << "-" << std::setw(11) << fused.arithmetic_intensity()
        << std::setw(10) << fused_gflops << std::setw(8)
        << 100.0 * fused_gflops / roofline.attainable_gflops(fused.arithmetic_intensity()) << "%  "
        << (fused.arithmetic_intensity() < roofline.ridge_point() ? "memory" : "compute") << "\n";
  }
  // Decode measured at the last L, fp32 like the prefill rows, with a batch that makes the cache
  // ~4x the last-level cache (at most 2 GiB): a step then streams K and V from DRAM, as it does
  // on a GPU, where the cache is far larger than L2. --quick: a few tens of MiB (beyond L2).
  const int64_t decode_len = lengths.back();
  const KvCacheShape decode_shape{1, 8, decode_len, 128};
  const double per_sequence = 2.0 * double(decode_shape.elements()) * kFp32;
  const double wanted = options.quick ? 32.0 * 1048576.0 : 4.0 * double(last_level_cache_bytes());
  const int64_t batch =
      std::clamp<int64_t>(int64_t(std::ceil(std::min(wanted, 2.0 * 1073741824.0) / per_sequence)), 1, 4096);
  const KvCache cache = random_full_cache({batch, 8, decode_len, 128}, KvDtype::fp32, rng);
  const DecodeVersion& decoder = find_decode_version("cpu/decode_simd", Backend::cpu, KvDtype::fp32);
  const DecodeMeasurement decode = measure_decode(decoder, cache, 8, options.quick);
  const double decode_ai = decode.cost.arithmetic_intensity();
  // A decode step only reads: its roof is the read bandwidth.
  const double decode_roof = std::min(roofline.peak_gflops, decode_ai * roofline.read_gbs);
  out << "  decode  L=" << std::left << std::setw(10) << decode_len << std::right << std::setw(12)
      << std::setprecision(2) << decode_ai << std::setw(12) << "-" << std::setw(11) << decode_ai << std::setw(10)
      << std::setprecision(1) << decode.gflops() << std::setw(8) << 100.0 * decode.gflops() / decode_roof
      << "%  memory\n";
  out << "Decode: " << decoder.name << ", batch " << batch << " (a " << std::setprecision(0)
      << decode.cache_bytes / 1048576.0 << " MiB cache, " << std::setprecision(1)
      << decode.cache_bytes / double(last_level_cache_bytes()) << "x the last-level cache): " << decode.gbs()
      << " GB/s = " << 100.0 * decode.gbs() / roofline.read_gbs << "% of the read bandwidth.\n"
      << "Its AI is 0.5 in fp32 (~1 in fp16) at every L; its roof is AI x read bandwidth.\n";
  out << std::setprecision(1) << "Ridge point: " << roofline.ridge_point()
      << " FLOP/byte (peak / triad). Prefill's % roof is against the roof at the unfused AI, the traffic\n"
      << "the kernel moves (cpu/flash: at the fused AI). Prefill's intensity grows with L and crosses the\n"
      << "ridge; decode's stays at ~1 FLOP/byte, so it runs at bandwidth speed: it is always memory-bound.\n"
      << "That asymmetry is the rest of this lab.\n";
}

}  // namespace inferlab
