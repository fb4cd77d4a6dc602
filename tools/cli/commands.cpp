#include "tools/cli/commands.h"

#include <iomanip>
#include <iostream>
#include <stdexcept>
#include <string_view>

#include "chapters/tour.h"
#include "common/npy.h"
#include "common/roofline.h"
#include "kernels/registry.h"
#include "kernels/registry.h"
#include "tools/cli/args.h"

namespace inferlab::cli {

Args::Args(const std::vector<std::string>& argv, std::set<std::string> flags) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.rfind("--", 0) != 0) throw std::invalid_argument("argument '" + arg + "': expected an --option");
    std::string name = arg.substr(2);
    if (const auto eq = name.find('='); eq != std::string::npos) {
      values_[name.substr(0, eq)] = name.substr(eq + 1);
    } else if (flags.count(name)) {
      values_[name] = std::string(1, '1');  // (not = "1": GCC 12 warns falsely, -Wrestrict)
    } else {
      if (i + 1 >= argv.size()) throw std::invalid_argument("option --" + name + ": needs a value");
      values_[name] = argv[++i];
    }
  }
}

std::optional<std::string> Args::get(const std::string& name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? std::nullopt : std::optional<std::string>(it->second);
}

std::string Args::required(const std::string& name) const {
  if (auto value = get(name)) return *value;
  throw std::invalid_argument("option --" + name + ": is required");
}

std::string Args::get_or(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

std::optional<int64_t> Args::integer(const std::string& name) const {
  const std::optional<std::string> text = get(name);
  if (!text) return std::nullopt;
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text->size()) throw std::invalid_argument(name + " = " + *text + ": must be an integer");
  return static_cast<int64_t>(value);
}

std::optional<double> Args::real(const std::string& name) const {
  const std::optional<std::string> text = get(name);
  if (!text) return std::nullopt;
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text->size()) throw std::invalid_argument(name + " = " + *text + ": must be a number");
  return value;
}

void Args::check_known(const std::set<std::string>& known) const {
  for (const auto& [name, value] : values_) {
    if (!known.count(name)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "--" : ", --") + k;
      throw std::invalid_argument("option --" + name + ": unknown (known: " + list + ")");
    }
  }
}

int tour(const std::vector<std::string>& argv) {
  const Args args(argv, {"quick"});
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
  tour_summary(std::cout, roofline, options);
  return 0;
}

int roofline(const std::vector<std::string>& argv) {
  const Args args(argv, {});
  args.check_known({"seconds", "working-set-mib", "out", "threads"});
  RooflineOptions options;
  options.seconds_per_test = std::stod(args.get_or("seconds", "1.0"));
  options.working_set_mib = std::stod(args.get_or("working-set-mib", "0"));
  options.threads = std::stoi(args.get_or("threads", "0"));
  std::cout << "Measuring this machine's roofline (fp32 FMA peak, read and triad bandwidth)...\n";
  const Roofline r = measure_roofline(options);
  const auto path = args.has("out") ? std::filesystem::path(args.required("out")) : default_roofline_path();
  save_roofline(r, path);
  std::cout << std::fixed << std::setprecision(1) << "  CPU:            " << r.cpu << "\n"
            << "  fp32 FMA peak:  " << r.peak_gflops << " GFLOP/s (" << r.threads << " threads, " << r.simd << ")\n"
            << "  read bandwidth: " << r.read_gbs << " GB/s\n"
            << "  triad:          " << r.triad_gbs << " GB/s (working set " << r.working_set_mib << " MiB)\n"
            << "  ridge point:    " << r.ridge_point() << " FLOP/byte (peak / triad)\n"
            << "Saved to " << path.string() << "\n";
  return 0;
}

int attention(const std::vector<std::string>& argv) {
  const Args args(argv, {"causal"});
  args.check_known({"q", "k", "v", "out", "causal", "version", "backend"});
  const Tensor<float> q = read_npy_float(args.required("q"));
  const Tensor<float> k = read_npy_float(args.required("k"));
  const Tensor<float> v = read_npy_float(args.required("v"));
  const bool causal = args.has("causal");
  const Backend backend = parse_backend(args.get_or("backend", "cpu"));
  require_available(backend);
  const AttentionVersion& version = find_attention_version(args.get_or("version", "cpu/naive"), backend);
  const AttentionShape shape = attention_shape(q, k, v, causal);
  Tensor<float> out({shape.num_heads, shape.seq_len, shape.head_dim});
  version.run(q, k, v, causal, out);
  write_npy(args.required("out"), out);
  std::cout << version.name << " (" << to_string(backend) << "): " << to_string(out.shape()) << " written to "
            << args.required("out") << "\n";
  return 0;
}

int versions(const std::vector<std::string>& argv) {
  Args(argv, {}).check_known({});
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
  for (const KvAppendVersion& v : kv_append_versions()) row(v.name, v.backend, v.chapter, to_string(v.input), v.summary);
  std::cout << "Prefill-with-cache versions of chapter 06 (a chunk attends to its cached prefix; any layout; one entry "
               "per KV-cache dtype):\n";
  for (const PrefillWithCacheVersion& v : prefill_with_cache_versions())
    row(v.name, v.backend, v.chapter, to_string(v.input), v.summary);
  std::cout << "Every decode version above also reads a paged cache (chapter 06) through its layout.\n";
  return 0;
}

}  // namespace inferlab::cli
