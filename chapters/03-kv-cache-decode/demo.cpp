// Chapter 03's part of `inferlab tour`: what a KV cache costs, cuda/decode run on the SIMT
// emulator and checked against the float64 oracle (a ragged GQA batch, fp32 and fp16 caches),
// then one decode step measured on this CPU: cpu/decode against cpu/decode_simd, fp32 against
// fp16 cache, as GB/s and % of the measured read bandwidth. Also measure_decode(), which the
// tour's closing table uses for its decode row.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <string_view>
#include <vector>

#include "chapters/03-kv-cache-decode/random_cache.h"
#include "chapters/tour.h"
#include "common/compare.h"
#include "common/rng.h"
#include "common/timer.h"
#include "kernels/registry.h"

namespace inferlab {

namespace {

constexpr double kMiB = 1048576.0;

}  // namespace

DecodeMeasurement measure_decode(const DecodeVersion& version, const KvCache& cache, int64_t num_heads, bool quick) {
  Rng rng(Rng::fresh_seed());
  const KvCacheShape& shape = cache.shape();
  const Tensor<float> q = rng.normal_tensor({shape.batch, num_heads, shape.head_dim});
  Tensor<float> out({shape.batch, num_heads, shape.head_dim});
  // One untimed call (page faults, caches, thread start-up) sizes the runs: about 0.3 s of them,
  // 2 to 10, and the fastest counts (the least disturbed by other work on the machine).
  Stopwatch warm_up;
  version.run(q, cache, out);
  const int runs = quick ? 1 : std::clamp(static_cast<int>(0.3 / std::max(warm_up.seconds(), 1e-6)), 2, 10);
  DecodeMeasurement m;
  m.cost = decode_step_cost(cache, num_heads);
  m.seconds = best_time_seconds(runs, [&] { version.run(q, cache, out); });
  m.cache_bytes = 2.0 * static_cast<double>(cache.bytes_per_tensor());
  return m;
}

void tour_chapter03(std::ostream& out, const Roofline& roofline, const TourOptions& options) {
  out << "== Chapter 03: KV cache and decode (one new token attends to every cached token) ==\n";
  Rng rng(Rng::fresh_seed());
  out << "The cache keeps K and V of every past token, [batch][num_kv_heads][max_seq_len][head_dim]:\n"
      << "2 x num_kv_heads x head_dim x bytes per token per layer (LLaMA-7B, 32 x 128, fp16: 16 KiB).\n"
      << "A decode step reads all of it to produce one token per sequence: 2 FLOPs per element read.\n\n";

  // 1. cuda/decode on the emulator against the float64 oracle: ragged lengths (one sequence of
  //    a single token), GQA 4:1, head_dim 80 (not a multiple of the 8-half vectors), the unused
  //    slots poisoned with NaN, so reading one of them would show.
  {
    const int64_t heads = 8, kv_heads = 2, d = 80;
    const std::vector<int64_t> lengths =
        options.quick ? std::vector<int64_t>{5, 17, 1} : std::vector<int64_t>{5, 65, 1};
    const int64_t max_seq_len = lengths[1] + 7;
    const Tensor<float> q = rng.normal_tensor({int64_t(lengths.size()), heads, d});
    out << "cuda/decode on the sim backend: batch " << lengths.size() << " (lengths 5, " << lengths[1]
        << ", 1; capacity " << max_seq_len << ", the rest poisoned), " << heads << " heads (GQA " << heads / kv_heads
        << ":1), d=" << d << ", vs the float64 oracle:\n";
    for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16}) {
      KvCache cache({int64_t(lengths.size()), kv_heads, max_seq_len, d}, dtype);
      for (size_t b = 0; b < lengths.size(); ++b)
        cache.prefill(int64_t(b), rng.normal_tensor({kv_heads, lengths[b], d}),
                      rng.normal_tensor({kv_heads, lengths[b], d}));
      const Tensor<double> expected = decode_reference(q, cache);
      const DecodeVersion& version = find_decode_version("cuda/decode", Backend::sim, dtype);
      Tensor<float> o(q.shape());
      o.poison();
      Stopwatch stopwatch;
      version.run(q, cache, o);
      const double seconds = stopwatch.seconds();
      const Comparison c = compare_to_oracle(o, expected, tolerance_for(version.precision));
      out << "  " << std::left << std::setw(14) << version.name << std::right << to_string(dtype) << " cache"
          << "  rel. error " << std::scientific << std::setprecision(1) << c.rel_frobenius << std::fixed
          << (c.ok ? "  ok" : "  WRONG") << "  (" << std::setprecision(0) << seconds * 1e3 << " ms emulated)\n";
    }
    out << "  (the oracle reads the cache's stored values, fp16 converted exactly: both caches match to fp32\n"
        << "   rounding; what fp16 storage costs in accuracy is the rounding of K and V themselves)\n\n";
  }

  // 2. One decode step measured: the naive loops against the SIMD + OpenMP version, fp32 against
  //    fp16 cache, on a cache well beyond the last-level cache (or, with --quick, beyond L2).
  const int64_t heads = 8, d = 128;
  const int64_t batch = options.quick ? 2 : 8, seq_len = options.quick ? 1024 : 16384;
  const double llc_mib = static_cast<double>(last_level_cache_bytes()) / kMiB;
  out << "One decode step measured: batch " << batch << " x " << seq_len << " cached tokens, " << heads
      << " heads (MHA), d=" << d << ".\n"
      << "GB/s = (K and V of every cached token + q + out) / time; % read = of the measured read bandwidth ("
      << std::setprecision(1) << roofline.read_gbs << " GB/s);\nthe last-level cache is " << std::setprecision(0)
      << llc_mib << " MiB as the OS reports it.\n";
  out << "  " << std::left << std::setw(17) << "version" << std::setw(6) << "cache" << std::right << std::setw(10)
      << "MiB" << std::setw(8) << "x LLC" << std::setw(9) << "AI" << std::setw(10) << "ms" << std::setw(9) << "GB/s"
      << std::setw(9) << "% read" << std::setw(10) << "GFLOP/s\n";
  double simd_seconds[2] = {0.0, 0.0};  // cpu/decode_simd: fp32, fp16
  for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16}) {
    const KvCache cache = random_full_cache({batch, heads, seq_len, d}, dtype, rng);
    for (const char* name : {"cpu/decode", "cpu/decode_simd"}) {
      const DecodeMeasurement m =
          measure_decode(find_decode_version(name, Backend::cpu, dtype), cache, heads, options.quick);
      if (std::string_view(name) == "cpu/decode_simd") simd_seconds[dtype == KvDtype::fp16 ? 1 : 0] = m.seconds;
      out << "  " << std::left << std::setw(17) << name << std::setw(6) << to_string(dtype) << std::right << std::fixed
          << std::setprecision(0) << std::setw(10) << m.cache_bytes / kMiB << std::setw(8) << std::setprecision(2)
          << m.cache_bytes / kMiB / llc_mib << std::setw(9) << m.cost.arithmetic_intensity() << std::setprecision(1)
          << std::setw(10) << m.seconds * 1e3 << std::setw(9) << m.gbs() << std::setw(8)
          << 100.0 * m.gbs() / roofline.read_gbs << "%" << std::setw(9) << m.gflops() << "\n";
    }
  }
  if (2.0 * double(batch * heads * seq_len * d) * 4.0 < double(last_level_cache_bytes()))
    out << "(A cache this small is served from the CPU's caches: more than the DRAM read bandwidth.)\n";
  out << "An fp16 cache halves the bytes: cpu/decode_simd's fp16 step takes " << std::setprecision(2)
      << simd_seconds[1] / simd_seconds[0] << "x the fp32 time (0.5x if it\n"
      << "streamed at full bandwidth both times). AI doubles, 0.5 -> 1 FLOP/byte, and stays far below the ridge\n"
      << "point (" << std::setprecision(1) << roofline.ridge_point()
      << " FLOP/byte). cpu/decode is bound by its own instructions (one scalar chain on one\n"
      << "core, fp16 converted element by element); cpu/decode_simd streams the cache.\n"
      << "Reproduce and sweep: ./inferlab bench ch03 (L = 512 ... 32768, batch 1, 4, 16).\n\n";
}

}  // namespace inferlab
