// Chapter 05's part of `inferlab tour`: fusion. cuda/flash run on the SIMT emulator against the
// float64 oracle (the GPU kernel proved without a GPU); one prefill computed by chapter 02's
// unfused cpu/blocked and by the fused cpu/flash on the same inputs — both checked, both timed —
// beside the bytes each moves under the traffic models of common/cost.h and the AI that follows
// (fused: L/4 in fp32); then split-KV decode at batch 1 with one KV head and a long context,
// where chapter 03's one work item per (sequence, KV head) leaves all but one core idle:
// cpu/decode_split with S = 1 against the S its heuristic picks. About a second; the sweeps are
// `./inferlab bench ch05`.
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "chapters/03-kv-cache-decode/random_cache.h"
#include "chapters/tour.h"
#include "common/compare.h"
#include "common/cost.h"
#include "common/rng.h"
#include "common/timer.h"
#include "kernels/registry.h"
#include "kernels/registry.h"
#include "kernels/fused/split_kv.h"

namespace inferlab {

namespace {

constexpr double kFp32 = 4.0;  // bytes per element
constexpr double kMiB = 1048576.0;

// "rel. error 1.2e-07  ok" for @p c.
std::string verdict(const Comparison& c) {
  std::ostringstream text;
  text << "rel. error " << std::scientific << std::setprecision(1) << c.rel_frobenius << (c.ok ? "  ok" : "  WRONG");
  return text.str();
}

}  // namespace

void tour_chapter05(std::ostream& out, const Roofline& roofline, const TourOptions& options) {
  out << "== Chapter 05: fused attention (the L x L scores never reach memory) ==\n";
  Rng rng(Rng::fresh_seed());

  // 1. cuda/flash on the emulator: tiles in shared memory, online softmax, warp reductions.
  {
    const AttentionDims dims{4, 2, options.quick ? 19 : 45, 80};
    const Tensor<float> q = rng.normal_tensor({dims.num_heads, dims.seq_len, dims.head_dim});
    const Tensor<float> k = rng.normal_tensor({dims.num_kv_heads, dims.seq_len, dims.head_dim});
    const Tensor<float> v = rng.normal_tensor({dims.num_kv_heads, dims.seq_len, dims.head_dim});
    const AttentionVersion& flash = find_attention_version("cuda/flash", Backend::sim);
    Tensor<float> o(q.shape());
    o.poison();
    Stopwatch stopwatch;
    flash.run(q, k, v, true, o);
    const double seconds = stopwatch.seconds();
    const Comparison c = compare_to_oracle(o, attention_reference(q, k, v, true), tolerance_for(flash.precision));
    out << flash.name << " on the sim backend, " << dims.num_heads << " heads (GQA 2:1), L=" << dims.seq_len
        << ", d=" << dims.head_dim << ", causal, vs the float64 oracle: " << verdict(c) << std::fixed
        << std::setprecision(0) << "  (" << seconds * 1e3 << " ms emulated)\n\n";
  }

  // 2. One prefill, unfused against fused, on the same inputs.
  {
    const AttentionDims dims{4, 4, options.quick ? 256 : 1024, 128};
    const int64_t L = dims.seq_len;
    const Tensor<float> q = rng.normal_tensor({dims.num_heads, L, dims.head_dim});
    const Tensor<float> k = rng.normal_tensor({dims.num_kv_heads, L, dims.head_dim});
    const Tensor<float> v = rng.normal_tensor({dims.num_kv_heads, L, dims.head_dim});
    const Tensor<double> expected = attention_reference(q, k, v, false);
    const Cost unfused = prefill_attention_cost(dims, TrafficModel::unfused, kFp32);
    const Cost fused = prefill_attention_cost(dims, TrafficModel::fused, kFp32);
    out << "One prefill, " << dims.num_heads << " heads (MHA), L=" << L << ", d=" << dims.head_dim
        << ", fp32, non-causal, the same inputs for both (" << std::fixed << std::setprecision(2) << fused.flops / 1e9
        << " GFLOP):\n";
    out << "  " << std::left << std::setw(13) << "version" << std::setw(9) << "" << std::right << std::setw(9) << "ms"
        << std::setw(9) << "GFLOP/s" << std::setw(8) << "% peak" << std::setw(12) << "model MiB" << std::setw(9) << "AI"
        << "   vs float64 oracle\n";
    double seconds[2] = {0.0, 0.0};
    int row = 0;
    for (const char* name : {"cpu/blocked", "cpu/flash"}) {
      const AttentionVersion& version = find_attention_version(name, Backend::cpu);
      const Cost& cost = row == 0 ? unfused : fused;
      Tensor<float> o(q.shape());
      o.poison();
      version.run(q, k, v, false, o);
      const Comparison c = compare_to_oracle(o, expected, tolerance_for(version.precision));
      seconds[row] = time_prefill(version, q, k, v, false, options.quick);
      const double gflops = cost.flops / seconds[row] / 1e9;
      out << "  " << std::left << std::setw(13) << version.name << std::setw(9) << (row == 0 ? "unfused" : "fused")
          << std::right << std::fixed << std::setprecision(1) << std::setw(9) << seconds[row] * 1e3 << std::setw(9)
          << gflops << std::setw(7) << 100.0 * gflops / roofline.peak_gflops << "%" << std::setw(12)
          << cost.bytes / kMiB << std::setw(9) << cost.arithmetic_intensity() << "   " << verdict(c) << "\n";
      ++row;
    }
    out << std::fixed << std::setprecision(1)
        << "Modelled traffic (common/cost.h): unfused = Q, K, V, O + ~4 L^2 score elements per head (written,\n"
        << "read and written by the softmax, read by P.V); fused = Q, K, V, O only: " << unfused.bytes / fused.bytes
        << "x less. Fused AI =\n4 L^2 d FLOPs / (4 L d x 4 bytes) = L/4 = " << double(L) / 4.0
        << " in fp32 (L/2 in fp16), against " << unfused.arithmetic_intensity()
        << " unfused,\nwhich saturates near d/4 = " << double(dims.head_dim) / 4.0 << " as L grows; the ridge point is "
        << roofline.ridge_point() << " FLOP/byte. "
        << "Speed-up of cpu/flash\nover cpu/blocked: " << std::setprecision(2) << seconds[0] / seconds[1] << "x.\n"
        << "cpu/flash's scratch is O(block^2) per thread plus packed K and V, never L x L (its heap peak is\n"
        << "asserted by ctest -L ch05 -R CpuFlashMemory).\n\n";
  }

  // 3. Split-KV decode where plain decode has one work item: batch 1, one KV head.
  {
    const int64_t heads = 8, d = 128, L = options.quick ? 4096 : 32768;
    const KvCache cache = random_full_cache({1, 1, L, d}, KvDtype::fp32, rng);
    const Tensor<float> q = rng.normal_tensor({1, heads, d});
    const Tensor<double> expected = decode_reference(q, cache);
    const SplitPolicy policy = cpu_split_policy();
    const int64_t chosen = choose_num_splits(1, L, policy);
    const DecodeVersion& registered = find_decode_version("cpu/decode_split", Backend::cpu, KvDtype::fp32);
    out << "Split-KV decode: batch 1, " << heads << " query heads on 1 KV head, L=" << L << ", d=" << d
        << ", fp32 cache (" << std::setprecision(0) << 2.0 * double(L * d) * kFp32 / kMiB
        << " MiB).\nChapter 03's decode has one work item per (sequence, KV head): here one, so one core streams the\n"
        << "cache. Split it:\n";
    out << "  " << std::left << std::setw(24) << "version" << std::right << std::setw(10) << "ms" << std::setw(9)
        << "GB/s" << std::setw(9) << "% read"
        << "   vs float64 oracle\n";
    double seconds[2] = {0.0, 0.0};
    int row = 0;
    for (const int64_t splits : {int64_t(1), chosen}) {
      DecodeVersion version = registered;
      version.run = [splits](const Tensor<float>& query, const KvCache& kv, Tensor<float>& o) {
        decode_cpu_split(query, kv, o, splits);
      };
      Tensor<float> o(q.shape());
      o.poison();
      version.run(q, cache, o);
      const Comparison c = compare_to_oracle(o, expected, tolerance_for(version.precision));
      const DecodeMeasurement m = measure_decode(version, cache, heads, options.quick);
      seconds[row++] = m.seconds;
      out << "  " << std::left << std::setw(24) << (version.name + " S=" + std::to_string(splits)) << std::right
          << std::fixed << std::setprecision(2) << std::setw(10) << m.seconds * 1e3 << std::setprecision(1)
          << std::setw(9) << m.gbs() << std::setw(8) << 100.0 * m.gbs() / roofline.read_gbs << "%   " << verdict(c)
          << "\n";
    }
    const double partial_bytes = double(chosen * heads * (d + 2)) * kFp32;
    out << std::fixed << "S=" << chosen << " is what the registered " << registered.name
        << " picks (choose_num_splits, kernels/fused/split_kv.h):\nS = min(ceil(" << policy.target_items
        << " items that fill this machine / 1 work item), floor(L / " << policy.min_tokens
        << " tokens per split at least)).\nSpeed-up over S=1: " << std::setprecision(2) << seconds[0] / seconds[1]
        << "x (splitting pays only when the other cores are idle). The partials,\nS x heads x (d + 2) floats = "
        << std::setprecision(0) << partial_bytes / 1024.0 << " KiB, and their reduce are small next to the cache.\n"
        << "Sweeps: ./inferlab bench ch05 (prefill L = 512 ... 4096 beside cpu/openblas; decode 8K, 32K).\n\n";
  }
}

}  // namespace inferlab
