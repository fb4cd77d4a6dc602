// Chapter 04's part of `inferlab tour`: a KV cache with outlier channels in K quantized three
// ways — INT8 with per-token K scales, INT8 with per-channel K scales (KIVI), FP8 E4M3 with
// per-token scales — its bytes beside fp32 and fp16, and one decode step over each (INT8 on
// cpu/decode_int8_simd, FP8 on cuda/decode_fp8 under the SIMT emulator) measured against the
// fp32 attention: relative error and the KL divergence of the softmax weights; and each checked
// against the float64 decode of its own dequantized cache (what the kernel must compute exactly).
// A fraction of a second; the speed side is `./inferlab bench ch04`.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <string>
#include <vector>

#include "chapters/tour.h"
#include "common/compare.h"
#include "common/rng.h"
#include "kernels/kv/kv_factories.h"
#include "kernels/registry.h"

namespace inferlab {

namespace {

constexpr double kKiB = 1024.0;

// max over (sequence, head) of KL(p ‖ p̂), p = softmax(q·kᵀ/√d) over @p exact, p̂ over @p quantized.
double max_softmax_kl(const Tensor<float>& q, const KvCache& exact, const KvCache& quantized) {
  const KvCacheShape& s = exact.shape();
  const int64_t heads = q.dim(1), group = heads / s.num_kv_heads, d = s.head_dim;
  double worst = 0.0;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t L = exact.length(b);
      std::vector<double> p(static_cast<size_t>(L)), p_hat(static_cast<size_t>(L));
      for (int64_t j = 0; j < L; ++j)
        for (int64_t c = 0; c < d; ++c) {
          const double qc = q[(b * heads + h) * d + c] / std::sqrt(double(d));
          p[size_t(j)] += qc * exact.key(b, h / group, j, c);
          p_hat[size_t(j)] += qc * quantized.key(b, h / group, j, c);
        }
      for (std::vector<double>* x : {&p, &p_hat}) {  // softmax in place
        const double m = *std::max_element(x->begin(), x->end());
        double z = 0.0;
        for (double& e : *x) z += (e = std::exp(e - m));
        for (double& e : *x) e /= z;
      }
      double kl = 0.0;
      for (int64_t j = 0; j < L; ++j)
        if (p[size_t(j)] > 0.0) kl += p[size_t(j)] * std::log(p[size_t(j)] / p_hat[size_t(j)]);
      worst = std::max(worst, kl);
    }
  return worst;
}

}  // namespace

void tour_chapter04(std::ostream& out, const Roofline& /*roofline*/, const TourOptions& options) {
  out << "== Chapter 04: INT8 / FP8 KV cache (half the bytes of fp16, a measured error) ==\n";
  Rng rng(Rng::fresh_seed());
  const int64_t batch = 2, heads = 8, kv_heads = 2, d = 128, outliers = 4;
  const int64_t L = options.quick ? 64 : 384;
  // K with 4 of 128 channels ×20 (and biased), as real models' keys have; V plain.
  Tensor<float> k({batch, kv_heads, L, d}), v = rng.normal_tensor({batch, kv_heads, L, d});
  for (int64_t i = 0; i < k.size(); ++i)
    k[i] = i % d < outliers ? 20.0f * (1.0f + 0.5f * rng.normal()) : rng.normal();
  const std::vector<int64_t> lengths{L, L / 2 + 1};
  const Tensor<float> q = rng.normal_tensor({batch, heads, d});
  const KvCache fp32 = make_kv_cache(k, v, lengths, KvDtype::fp32);
  const Tensor<double> exact = decode_reference(q, fp32);
  out << "Cache: batch " << batch << ", " << kv_heads << " KV heads x " << L << " tokens x d=" << d << " (lengths " << L
      << ", " << L / 2 + 1 << "), " << heads << " query heads; K has " << outliers << " outlier channels (x20).\n"
      << "Each row x is stored as q = round(x / D) with D = max|x| / 127 (INT8) or as E4M3(x / D) with\n"
      << "D = max|x| / 448 (FP8: 3 mantissa bits, an exponent), plus D in fp32.\n";
  out << "  " << std::left << std::setw(38) << "cache" << std::right << std::setw(10) << "KiB" << std::setw(10)
      << "vs fp16" << std::setw(13) << "rel. error" << std::setw(12) << "softmax KL" << "   own oracle\n";
  const double fp32_bytes = 2.0 * double(k.size()) * 4.0;
  const auto row = [&](const std::string& name, double bytes, const Tensor<float>* o, const Tensor<double>* own,
                       const KvCache* dequantized) {
    out << "  " << std::left << std::setw(38) << name << std::right << std::fixed << std::setprecision(0)
        << std::setw(10) << bytes / kKiB << std::setprecision(2) << std::setw(9) << bytes / (fp32_bytes / 2.0) << "x";
    if (o == nullptr) {
      out << "\n";
      return;
    }
    const Comparison vs_fp32 = compare_to_oracle(*o, exact, tolerance_for(Precision::fp32));
    const Comparison vs_own = compare_to_oracle(*o, *own, tolerance_for(Precision::fp32));
    out << std::scientific << std::setprecision(1) << std::setw(13) << vs_fp32.rel_frobenius << std::setw(12)
        << max_softmax_kl(q, fp32, *dequantized) << std::fixed << (vs_own.ok ? "   ok" : "   WRONG") << "\n";
  };
  row("fp32", fp32_bytes, nullptr, nullptr, nullptr);
  row("fp16", fp32_bytes / 2.0, nullptr, nullptr, nullptr);
  for (const KeyScaling scaling : {KeyScaling::per_token, KeyScaling::per_channel}) {
    const KvCache cache = make_kv_cache(k, v, lengths, KvFormat::int8(scaling));
    const DecodeVersion& version = find_decode_version("cpu/decode_int8_simd", Backend::cpu, KvDtype::int8);
    Tensor<float> o(q.shape());
    o.poison();
    version.run(q, cache, o);
    const Tensor<double> own = decode_reference(q, cache);
    // The dequantized K as an fp32 cache, for the softmax KL.
    Tensor<float> k_hat(k.shape(), 0.0f), v_hat(k.shape(), 0.0f);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t g = 0; g < kv_heads; ++g)
        for (int64_t t = 0; t < lengths[size_t(b)]; ++t)
          for (int64_t c = 0; c < d; ++c) k_hat[((b * kv_heads + g) * L + t) * d + c] = cache.key(b, g, t, c);
    const KvCache dequantized = make_kv_cache(k_hat, v_hat, lengths, KvDtype::fp32);
    row(version.name + (scaling == KeyScaling::per_token ? ", int8 per-token" : ", int8 per-channel"),
        double(cache.bytes()), &o, &own, &dequantized);
  }
  {
    const KvCache cache = make_kv_cache(k, v, lengths, KvFormat::fp8());
    Tensor<float> o(q.shape());
    o.poison();
    const DecodeVersion& version = find_decode_version("cuda/decode_fp8", Backend::sim, KvDtype::fp8);
    version.run(q, cache, o);
    const KvCache dequantized = cache.dequantized();
    const Tensor<double> own = decode_reference(q, dequantized);
    row(version.name + " (sim), fp8 e4m3", double(cache.bytes()), &o, &own, &dequantized);
  }
  out << "INT8 and FP8 take (d + 4) / 2d = " << std::setprecision(2) << double(d + 4) / double(2 * d)
      << "x the bytes of fp16 (the 4 is the fp32 scale per row): decode, which streams the cache, reads half as much.\n"
      << "Per-token INT8 scales are set by the outliers, so every other channel gets a coarse step;\n"
      << "per-channel K scales (KIVI) isolate them. FP8 keeps a relative precision of 1/16 per element\n"
      << "wherever it lies, whatever the row's max; but 3 mantissa bits are coarser than INT8's 254 steps\n"
      << "unless the max is far above the rest: compare the columns (fresh data each run).\n"
      << "'own oracle' = the float64 decode of the same quantized cache, at fp32 tolerance: the kernels\n"
      << "are exact; the error is the quantization's. Speed: ./inferlab bench ch04.\n\n";
}

}  // namespace inferlab
