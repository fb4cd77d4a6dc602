// Chapter 11 benchmark: the quantized GEMM against the int8 ceiling, chapter 08's kernel beside
// chapter 11's, at SmolLM2-135M's shapes.
//
//   gemm/<format>/<out>x<in>/<kernel>/M   y[M, out] = x[M, in] · Wᵀ for W in Q8_0, Q4_0 or Q4_1:
//       the three shapes of the model — 576 → 1536 (gate and up), 1536 → 576 (down), 576 → 49152
//       (the tied head) —, M = 1 … 512 tokens (the head to 64), kernel "ch08" (quant_matmul_cpu,
//       GGUF's rows) or "packed" (packed_matmul_cpu on this CPU's widest instructions), and
//       "avx2" / "avx-vnni" at M = 64 (the ladder of instruction sets this CPU has). Counters:
//       GOP/s (2·M·out·in operations: a multiply and an add each, whatever their type), int8_pct
//       (of the measured int8 dot-product ceiling, roofline.json's int8_gops), AI (operations per
//       byte of weights, x and y), GB/s, read_pct (of the read bandwidth) and roof_pct (of
//       min(int8 ceiling, AI × triad bandwidth): the roof at this AI); and int8_pct_now, the
//       median over 7 pairs of (GEMM GOP/s over ≥ 2 ms) / (the int8 ceiling measured right after,
//       as long: int8_ceiling_now()) — on a shared VM whose neighbours take a varying share of
//       the cores, the ratio of two rates measured in the same moments is the stable figure
//       (int8_now_GOP/s is that ceiling's median).
//
//   gemm_cuda/<format>/<out>x<in>/<kernel>/M   on a GPU only (registered when the cuda backend can
//       run here; tools/gpu-check.sh runs them): the same products at the device level
//       (quant_matmul_device: the activations' quantization and the matmul), kernel "per_row"
//       (chapter 08's: one thread a (row, output)) or "tiled" (chapter 11's: 64 outputs × 16 rows
//       a thread block, each weight chunk staged once for the 16 rows), M = 1 … 512: GOP/s and the
//       weights' GB/s (kernels/timing/cuda_timing.h: CUDA events around a batch of calls).
//
//   ./inferlab bench ch11 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//       --benchmark_out=docs/plots/ch11-gemm.json --benchmark_out_format=json
//   ./inferlab bench ch11 --benchmark_filter='gemm/Q8_0/1536x576/.*/64$'      one shape
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <utility>
#include <string>
#include <vector>

#include "chapters/bench_counters.h"
#include "common/backend.h"
#include "common/config.h"
#include "common/dot_ceilings.h"
#include "common/rng.h"
#include "common/timer.h"
#include "kernels/quant/block_quant.h"
#include "kernels/quant/packed_matmul.h"
#include "kernels/quant/quant_matmul.h"
#include "kernels/timing/cuda_timing.h"

namespace {

using namespace inferlab;
using quant::GgmlType;

struct Shape {
  int64_t out, in;
  int64_t max_rows;  // the head's GEMM at 512 rows takes seconds a call with chapter 08's kernel
};

const Shape kShapes[] = {{1536, 576, 512}, {576, 1536, 512}, {49152, 576, 64}};
const GgmlType kTypes[] = {GgmlType::q8_0, GgmlType::q4_0, GgmlType::q4_1};

// One random matrix per (type, shape), quantized and repacked once.
struct Matrix {
  std::vector<uint8_t> bytes;
  quant::BlockMatrix blocks;
  quant::PackedMatrix packed;
};

const Matrix& matrix(GgmlType type, const Shape& s) {
  static std::vector<std::unique_ptr<Matrix>> made;
  static std::vector<std::tuple<GgmlType, int64_t, int64_t>> keys;
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == std::tuple(type, s.out, s.in)) return *made[i];
  Rng rng(11);
  const Tensor<float> w = rng.normal_tensor({s.out, s.in});
  auto m = std::make_unique<Matrix>();
  const int64_t rb = quant::row_bytes(type, s.in);
  m->bytes.resize(size_t(s.out * rb));
  for (int64_t o = 0; o < s.out; ++o)
    quant::quantize_row(type, std::span(w.data() + o * s.in, size_t(s.in)), std::span(m->bytes.data() + o * rb, size_t(rb)));
  m->blocks = {type, s.out, s.in, m->bytes};
  m->packed = quant::PackedMatrix(m->blocks);
  keys.emplace_back(type, s.out, s.in);
  made.push_back(std::move(m));
  return *made.back();
}

void BM_gemm(benchmark::State& state, GgmlType type, Shape s, std::string kernel) {
  const int64_t rows = state.range(0);
  const Matrix& m = matrix(type, s);
  Rng rng(12);
  const Tensor<float> x = rng.normal_tensor({rows, s.in});
  Tensor<float> y({rows, s.out});
  const auto call = [&] {
    if (kernel == "ch08")
      quant::quant_matmul_cpu(x, m.blocks, y);
    else if (kernel == "packed")
      quant::packed_matmul_cpu(x, m.packed, y);
    else
      quant::packed_matmul_cpu(x, m.packed, y, kernel == "avx2" ? quant::PackedKernel::avx2 : quant::PackedKernel::avx_vnni);
  };
  const bench::CallTiming t = bench::time_calls(state, call);
  const Roofline& roof = bench::measured_roofline();
  const Cost cost = quant::quant_matmul_cost(rows, type, s.out, s.in);
  // The GEMM beside the int8 ceiling, pair by pair, in the same moments (the file comment).
  std::vector<double> ratios, ceilings;
  for (int pair = 0; pair < 7; ++pair) {
    const Stopwatch gemm;
    int64_t calls = 0;
    do {
      call();
      ++calls;
    } while (gemm.seconds() < 0.002);
    const double seconds = gemm.seconds();
    const double ceiling = int8_ceiling_now(seconds);
    if (ceiling <= 0.0) break;
    ratios.push_back(cost.flops * double(calls) / seconds / 1e9 / ceiling);
    ceilings.push_back(ceiling);
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  const double gops = cost.flops / t.mean_seconds / 1e9, gbs = cost.bytes / t.mean_seconds / 1e9;
  const double roof_gops = std::min(roof.int8_ceiling(), cost.arithmetic_intensity() * roof.triad_gbs);
  state.counters["M"] = double(rows);
  state.counters["GOP/s"] = gops;
  state.counters["best_GOP/s"] = cost.flops / t.best_seconds / 1e9;
  state.counters["int8_pct"] = 100.0 * gops / roof.int8_ceiling();
  state.counters["AI"] = cost.arithmetic_intensity();
  state.counters["GB/s"] = gbs;
  state.counters["read_pct"] = 100.0 * gbs / roof.read_gbs;
  state.counters["roof_pct"] = 100.0 * gops / roof_gops;
  state.counters["int8_pct_now"] = 100.0 * median(ratios);
  state.counters["int8_now_GOP/s"] = median(ceilings);
}

#if INFERLAB_WITH_CUDA
void BM_gemm_cuda(benchmark::State& state, GgmlType type, Shape s, quant::QuantMatmulKernel kernel) {
  const int64_t rows = state.range(0);
  double seconds = 0.0;
  for (auto _ : state) {
    seconds = cuda::quant_matmul_seconds_per_call(type, rows, s.out, s.in, kernel, 2, 20);
    state.SetIterationTime(seconds);
  }
  const Cost cost = quant::quant_matmul_cost(rows, type, s.out, s.in);
  state.counters["M"] = double(rows);
  state.counters["GOP/s"] = cost.flops / seconds / 1e9;
  state.counters["weight_GB/s"] = double(s.out) * double(quant::row_bytes(type, s.in)) / seconds / 1e9;
  state.counters["AI"] = cost.arithmetic_intensity();
}
#endif

void register_benchmarks() {
  const std::string best(quant::to_string(quant::best_packed_kernel()));
  for (const GgmlType type : kTypes)
    for (const Shape& s : kShapes)
      for (const std::string kernel : {"ch08", "packed"}) {
        const std::string name = "gemm/" + std::string(quant::to_string(type)) + "/" + std::to_string(s.out) + "x" +
                                 std::to_string(s.in) + "/" + kernel;
        auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_gemm, type, s, kernel)->UseManualTime()->Unit(benchmark::kMicrosecond);
        for (int64_t rows = 1; rows <= s.max_rows; rows *= 2) b->Arg(rows);
      }
  // The narrower instruction sets at M = 64 (Q8_0 and Q4_1, gate/up's shape): the ladder's rungs.
  for (const quant::PackedKernel k : {quant::PackedKernel::avx2, quant::PackedKernel::avx_vnni})
    if (quant::cpu_has(k) && k != quant::best_packed_kernel())
      for (const GgmlType type : {GgmlType::q8_0, GgmlType::q4_1}) {
        const std::string kernel(quant::to_string(k));
        const std::string name = "gemm/" + std::string(quant::to_string(type)) + "/1536x576/" + kernel;
        benchmark::RegisterBenchmark(name.c_str(), BM_gemm, type, kShapes[0], kernel)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->Arg(64);
      }
  const std::string no_gpu = backend_unavailable_reason(Backend::cuda);
#if INFERLAB_WITH_CUDA
  if (no_gpu.empty())
    for (const GgmlType type : kTypes)
      for (const Shape& s : kShapes)
        for (const auto& [kernel, name] : {std::pair{quant::QuantMatmulKernel::per_row, "per_row"},
                                           std::pair{quant::QuantMatmulKernel::tiled, "tiled"}}) {
          const std::string bench_name = "gemm_cuda/" + std::string(quant::to_string(type)) + "/" + std::to_string(s.out) +
                                         "x" + std::to_string(s.in) + "/" + name;
          auto* b = benchmark::RegisterBenchmark(bench_name.c_str(), BM_gemm_cuda, type, s, kernel)
                        ->UseManualTime()
                        ->Unit(benchmark::kMicrosecond)
                        ->Iterations(3);
          for (const int64_t rows : {1, 16, 64, 512}) b->Arg(rows);
        }
#endif
  if (!no_gpu.empty()) std::cerr << "bench_ch11: gemm_cuda skipped: " << no_gpu << "\n";
  const Roofline& roof = bench::measured_roofline();
  benchmark::AddCustomContext("packed_kernel", best + " (" + std::string(quant::instruction(quant::best_packed_kernel())) + ")");
  benchmark::AddCustomContext("int8_gops", std::to_string(roof.int8_gops));
  benchmark::AddCustomContext("int8_instruction", roof.int8_instruction);
  benchmark::AddCustomContext("int8_ridge_point", std::to_string(roof.int8_ridge_point()));
  bench::add_roofline_context("2·M·out·in operations (int8 multiply-adds, as FLOPs are counted)",
                              "the weights' block bytes once + x read and y written in fp32");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  register_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
