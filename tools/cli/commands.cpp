#include "tools/cli/commands.h"

#include <iomanip>
#include <iostream>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "chapters/tour.h"
#include "tools/cli/tour_parallel.h"
#include "tools/cli/tour_serving.h"
#include "common/args.h"
#include "common/check.h"
#include "common/npy.h"
#include "common/roofline.h"
#include "kernels/quant/packed_matmul.h"
#include "kernels/registry.h"

namespace inferlab::cli {

namespace {

const char* kTourUsage = R"(usage: inferlab tour [--quick]

  Every chapter's demo on the default backend (cpu), ending in a summary table; figures are
  compared with this machine's roofline (build/roofline.json, measured first when missing).
  --quick                 smaller shapes and fewer repetitions (a minute instead of several)
)";

const char* kRooflineUsage =
    R"(usage: inferlab roofline [--runs N] [--seconds S] [--working-set-mib M] [--threads N] [--out FILE]

  Measures this machine's ceilings: fp32 FMA peak (every SIMD ISA the CPU has), the int8 and
  bf16 dot-product ceilings (vpdpbusd zmm/ymm, AVX2's vpmaddubsw, vdpbf16ps: each instruction the
  CPU reports), streaming read bandwidth and STREAM triad bandwidth, each the best of repeated passes; the whole measurement
  runs N times and the median of each ceiling is kept (one disturbed run moves nothing). The
  1-minute load average is recorded (the highest of the runs'): `analyze --device this` and the
  benchmarks warn when it exceeded the thread count.
  --runs N                measurements to take the median of (default 3)
  --seconds S             seconds per ceiling per run (default 1.0)
  --working-set-mib M     bytes the bandwidth loops touch (default: max(4 x LLC, 1 GiB), <= RAM/4)
  --threads N             OpenMP threads (default: all cores)
  --out FILE              where to save (default: $INFERLAB_ROOFLINE or build/roofline.json)
)";

const char* kAttentionUsage =
    R"(usage: inferlab attention --q Q.npy --k K.npy --v V.npy --out O.npy [--causal] [--version NAME]
                          [--backend cpu|sim|cuda]

  Prefill attention of a registered version on .npy data: Q [heads, L, d]; K, V [kv_heads, L, d]
  (fp32 or fp16 files); writes O [heads, L, d] as fp32.
  --causal                mask future keys
  --version NAME          an implementation (default: cpu/naive on cpu, cuda/naive on sim and cuda;
                          `inferlab versions` lists them)
  --backend B             cpu (default), sim (the CUDA emulator) or cuda
)";

const char* kVersionsUsage = R"(usage: inferlab versions

  Every registered implementation (prefill, decode, KV append, prefill-with-cache): its name,
  backend, chapter, precision and whether it can run here.
)";

// The version `attention` runs without --version: the plain loops on cpu, chapter 02's first
// CUDA kernel on sim and cuda (as `decode` picks its backend's default).
const char* default_attention_version(Backend backend) {
  return backend == Backend::cpu ? "cpu/naive" : "cuda/naive";
}

// Prints @p usage and returns true when --help / -h was given.
bool answered_help(const Args& args, const char* usage) {
  if (args.help()) std::cout << usage;
  return args.help();
}

}  // namespace

int tour(const std::vector<std::string>& argv) {
  const Args args(argv, {"quick"});
  if (answered_help(args, kTourUsage)) return 0;
  args.check_known({"quick"});
  TourOptions options;
  options.quick = args.has("quick");
  std::cout << "InferLab tour: prefill is compute-bound (AI grows with L), decode is memory-bound (AI ~ 1).\n"
            << "Backend: cpu (the default; no GPU needed).\n\n";
  const Roofline roofline = roofline_for_benchmarks();
  std::cout << "This machine (from " << default_roofline_path().string() << "): " << describe(roofline) << "\n\n";
  tour_chapter01(std::cout, roofline, options);
  tour_chapter02(std::cout, roofline, options);
  tour_chapter03(std::cout, roofline, options);
  tour_chapter04(std::cout, roofline, options);
  tour_chapter05(std::cout, roofline, options);
  tour_chapter06(std::cout, roofline, options);
  tour_chapter07(std::cout, roofline, options);
  tour_chapter08(std::cout, roofline, options);
  tour_chapter09(std::cout, options);
  tour_chapter10(std::cout, options);
  tour_chapter11(std::cout, roofline, options);
  tour_chapter12(std::cout, roofline, options);
  tour_summary(std::cout, roofline, options);
  return 0;
}

int roofline(const std::vector<std::string>& argv) {
  const Args args(argv, {});
  if (answered_help(args, kRooflineUsage)) return 0;
  args.check_known({"seconds", "working-set-mib", "out", "threads", "runs"});
  RooflineOptions options;
  options.seconds_per_test = args.real("seconds").value_or(1.0);
  require(options.seconds_per_test > 0, "seconds", options.seconds_per_test, "must be > 0");
  options.working_set_mib = args.real("working-set-mib").value_or(0.0);
  require(options.working_set_mib >= 0, "working-set-mib", options.working_set_mib, "must be >= 0 (0: automatic)");
  options.threads = static_cast<int>(args.integer("threads").value_or(0));
  require(options.threads >= 0, "threads", options.threads, "must be >= 0 (0: all cores)");
  const int64_t runs = args.integer("runs").value_or(3);
  require(runs >= 1 && runs <= 100, "runs", runs, "must be in [1, 100]");
  std::cout << "Measuring this machine's roofline (fp32 FMA peak, int8/bf16 dot products, read and triad bandwidth), "
            << runs
            << (runs == 1 ? " run" : " runs, keeping the median of each ceiling") << "...\n";
  std::vector<Roofline> measured;
  for (int64_t i = 0; i < runs; ++i) {
    measured.push_back(measure_roofline(options));
    if (runs > 1) {
      const Roofline& m = measured.back();
      std::cout << std::fixed << std::setprecision(1) << "  run " << i + 1 << ": peak " << m.peak_gflops
                << " GFLOP/s, read " << m.read_gbs << " GB/s, triad " << m.triad_gbs << " GB/s (load "
                << std::setprecision(2) << m.load_average << ")\n";
    }
  }
  const Roofline r = median_roofline(measured);
  const auto path = args.has("out") ? std::filesystem::path(args.required("out")) : default_roofline_path();
  save_roofline(r, path);
  const std::string of = runs > 1 ? " (median of " + std::to_string(runs) + " runs)" : "";
  std::cout << std::fixed << std::setprecision(1) << "  CPU:            " << r.cpu << "\n"
            << "  fp32 FMA peak:  " << r.peak_gflops << " GFLOP/s (" << r.threads << " threads, " << r.simd << ")" << of
            << "\n"
            << "  read bandwidth: " << r.read_gbs << " GB/s" << of << "\n"
            << "  triad:          " << r.triad_gbs << " GB/s (working set " << r.working_set_mib << " MiB)" << of
            << "\n"
            << "  ridge point:    " << r.ridge_point() << " FLOP/byte (peak / triad)\n";
  for (const DotCeiling& c : r.dot_ceilings)
    std::cout << "  " << (c.type == DotType::int8 ? "int8" : "bf16") << " dot:       " << c.gops
              << (c.type == DotType::int8 ? " GOP/s  " : " GFLOP/s") << " " << c.instruction << of << "\n";
  if (r.int8_gops > 0.0)
    std::cout << "  int8 ceiling:   " << r.int8_gops << " GOP/s (" << r.int8_instruction << "), "
              << r.int8_gops / r.peak_gflops << "x the fp32 peak; int8 ridge point " << r.int8_ridge_point()
              << " op/byte (int8 / triad)\n";
  else
    std::cout << "  int8 ceiling:   none (no int8 dot-product instruction on this CPU: int8 kernels are measured "
                 "against the fp32 peak)\n";
  std::cout
            << std::setprecision(2) << "  load average:   " << r.load_average << " (highest at the start of a run; "
            << r.threads << " threads)"
            << (r.measured_busy() ? ": the machine was busy, so these ceilings may read low; rerun when it is idle"
                                  : "")
            << "\n"
            << "Saved to " << path.string() << "\n";
  return 0;
}

int attention(const std::vector<std::string>& argv) {
  const Args args(argv, {"causal"});
  if (answered_help(args, kAttentionUsage)) return 0;
  args.check_known({"q", "k", "v", "out", "causal", "version", "backend"});
  const Tensor<float> q = read_npy_float(args.required("q"));
  const Tensor<float> k = read_npy_float(args.required("k"));
  const Tensor<float> v = read_npy_float(args.required("v"));
  const bool causal = args.has("causal");
  const Backend backend = parse_backend(args.get_or("backend", "cpu"));
  require_available(backend);
  const AttentionVersion& version =
      find_attention_version(args.get_or("version", default_attention_version(backend)), backend);
  const AttentionShape shape = attention_shape(q, k, v, causal);
  Tensor<float> out({shape.num_heads, shape.seq_len, shape.head_dim});
  version.run(q, k, v, causal, out);
  write_npy(args.required("out"), out);
  std::cout << version.name << " (" << to_string(backend) << "): " << to_string(out.shape()) << " written to "
            << args.required("out") << "\n";
  return 0;
}

int versions(const std::vector<std::string>& argv) {
  const Args args(argv, {});
  if (answered_help(args, kVersionsUsage)) return 0;
  args.check_known({});
  // One line per version: name, backend, the chapter that teaches it, what it computes in or on.
  const auto row = [](const std::string& name, Backend backend, int chapter, std::string_view what,
                      const std::string& summary) {
    std::cout << "  " << std::left << std::setw(24) << name << std::setw(6) << to_string(backend) << "ch"
              << std::setfill('0') << std::setw(2) << std::right << chapter << std::setfill(' ') << "  " << what << "  "
              << summary
              << (backend_available(backend) ? "" : "  [unavailable: " + backend_unavailable_reason(backend) + "]")
              << "\n";
  };
  std::cout << "Prefill attention versions:\n";
  for (const AttentionVersion& v : attention_versions())
    row(v.name, v.backend, v.chapter, to_string(v.precision), v.summary);
  int chapter = 0;  // the decode registry is in chapter order: a heading per chapter
  for (const DecodeVersion& v : decode_versions()) {
    if (v.chapter != chapter) {
      chapter = v.chapter;
      std::cout << "Decode attention versions of chapter " << std::setfill('0') << std::setw(2) << chapter
                << std::setfill(' ') << " (one entry per KV-cache dtype):\n";
    }
    row(v.name, v.backend, v.chapter, to_string(v.input), v.summary);
  }
  std::cout << "KV-cache append versions (one entry per KV-cache dtype):\n";
  for (const KvAppendVersion& v : kv_append_versions())
    row(v.name, v.backend, v.chapter, to_string(v.input), v.summary);
  std::cout << "Prefill-with-cache versions of chapter 06 (a chunk attends to its cached prefix; any layout; one entry "
               "per KV-cache dtype):\n";
  for (const PrefillWithCacheVersion& v : prefill_with_cache_versions())
    row(v.name, v.backend, v.chapter, to_string(v.input), v.summary);
  std::cout << "Every decode version above also reads a paged cache (chapter 06) through its layout.\n";
  // Chapter 11: the quantized GEMM's instructions, chosen when the program starts from what the CPU
  // reports (CPUID), not from the compiler's -march.
  const quant::QuantGemmChoice gemm = quant::quant_gemm_choice();
  std::cout << "Quantized GEMM of the CPU linear layer (chapter 11; INFERLAB_QUANT_GEMM picks another):\n";
  for (const quant::PackedKernel k : quant::available_packed_kernels())
    std::cout << "  cpu/packed-" << std::left << std::setw(14) << quant::to_string(k) << std::right << " "
              << quant::instruction(k) << (!gemm.chapter08 && k == gemm.kernel ? "  <- runs" : "") << "\n";
  std::cout << "  cpu/ch08-rows             chapter 08's kernel over GGUF's rows (compiled for -march)"
            << (gemm.chapter08 ? "  <- runs" : "") << "\n";
  return 0;
}

}  // namespace inferlab::cli
