// Measuring the roofline: an FMA loop with enough independent accumulators to hide FMA latency
// on every core, and STREAM-style read and triad loops over arrays far larger than the caches.
#include "common/roofline.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <memory>
#include <regex>
#include <sstream>

#include "common/timer.h"

#ifndef INFERLAB_SOURCE_DIR
#define INFERLAB_SOURCE_DIR "."
#endif

namespace inferlab {

double Roofline::attainable_gflops(double ai) const { return std::min(peak_gflops, ai * triad_gbs); }

namespace {

#if defined(__AVX512F__)
constexpr int kLanes = 16;
constexpr const char* kSimd = "avx512";
#elif defined(__AVX2__)
constexpr int kLanes = 8;
constexpr const char* kSimd = "avx2";
#else
constexpr int kLanes = 4;
constexpr const char* kSimd = "sse/scalar";
#endif
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

// 12 independent FMA chains per thread: latency 4 cycles × 2 FMA ports needs >= 8 in flight.
constexpr int kChains = 12;

double fma_gflops(double seconds) {
  const long iterations = 1 << 20;
  double best = 0.0;
  Stopwatch total;
  float sink = 0.0f;
  while (total.seconds() < seconds || best == 0.0) {
    Stopwatch stopwatch;
#pragma omp parallel reduction(+ : sink)
    {
      Vec acc[kChains];
      const Vec mul = Vec{} + 0.999999f;
      const Vec add = Vec{} + 1e-7f;
      for (int c = 0; c < kChains; ++c) acc[c] = Vec{} + static_cast<float>(omp_get_thread_num() + c);
      for (long i = 0; i < iterations; ++i) {
        for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * mul + add;
        // Keep the compiler from collapsing the loop: the chains must stay live in registers.
        asm volatile("" : "+x"(acc[0]), "+x"(acc[1]), "+x"(acc[2]), "+x"(acc[3]), "+x"(acc[4]), "+x"(acc[5]),
                     "+x"(acc[6]), "+x"(acc[7]), "+x"(acc[8]), "+x"(acc[9]), "+x"(acc[10]), "+x"(acc[11]));
      }
      for (int c = 0; c < kChains; ++c)
        for (int l = 0; l < kLanes; ++l) sink += acc[c][l];
    }
    const double elapsed = stopwatch.seconds();
    const double flops = 2.0 * kLanes * kChains * static_cast<double>(iterations) * omp_get_max_threads();
    best = std::max(best, flops / elapsed / 1e9);
  }
  volatile float keep = sink;
  (void)keep;
  return best;
}

size_t last_level_cache_bytes() {
  long bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (bytes <= 0) bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return bytes > 0 ? static_cast<size_t>(bytes) : size_t(32) << 20;
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Array = std::unique_ptr<float[], FreeDeleter>;

Array make_array(size_t count) {
  void* memory = std::aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64);
  if (memory == nullptr) throw std::bad_alloc();
  return Array(static_cast<float*>(memory));
}

}  // namespace

Roofline measure_roofline(const RooflineOptions& options) {
  if (options.threads > 0) omp_set_num_threads(options.threads);
  Roofline roofline;
  roofline.threads = omp_get_max_threads();
  roofline.simd = kSimd;

  double working_set = options.working_set_mib * 1048576.0;
  if (working_set <= 0.0) {
    const double ram = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
    working_set = std::min(std::max(4.0 * static_cast<double>(last_level_cache_bytes()), 1073741824.0), ram / 4.0);
  }
  roofline.working_set_mib = working_set / 1048576.0;

  roofline.peak_gflops = fma_gflops(options.seconds_per_test);

  // Three arrays of working_set/3 bytes each; first-touch them in parallel (page placement).
  const size_t count = static_cast<size_t>(working_set / 3.0 / sizeof(float));
  Array a = make_array(count), b = make_array(count), c = make_array(count);
  float* pa = a.get();
  float* pb = b.get();
  float* pc = c.get();
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < count; ++i) {
    pa[i] = 1.0f;
    pb[i] = 2.0f;
    pc[i] = 0.5f;
  }
  const int passes = std::max(3, static_cast<int>(options.seconds_per_test / 0.05));
  float sum = 0.0f;
  const double read_seconds = best_time_seconds(passes, [&] {
    float local = 0.0f;
#pragma omp parallel for simd schedule(static) reduction(+ : local)
    for (size_t i = 0; i < count; ++i) local += pb[i];
    sum += local;
  });
  roofline.read_gbs = static_cast<double>(count) * sizeof(float) / read_seconds / 1e9;
  const double triad_seconds = best_time_seconds(passes, [&] {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < count; ++i) pa[i] = pb[i] + 0.5f * pc[i];
  });
  roofline.triad_gbs = 3.0 * static_cast<double>(count) * sizeof(float) / triad_seconds / 1e9;
  volatile float keep = sum + pa[count / 2];
  (void)keep;

  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      roofline.cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  roofline.measured_at = stamp;
  return roofline;
}

std::filesystem::path default_roofline_path() {
  if (const char* path = std::getenv("INFERLAB_ROOFLINE"); path != nullptr && *path != '\0') return path;
  return std::filesystem::path(INFERLAB_SOURCE_DIR) / "build" / "roofline.json";
}

void save_roofline(const Roofline& r, const std::filesystem::path& path) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path);
  out << std::setprecision(6) << "{\n"
      << "  \"peak_gflops\": " << r.peak_gflops << ",\n"
      << "  \"read_gbs\": " << r.read_gbs << ",\n"
      << "  \"triad_gbs\": " << r.triad_gbs << ",\n"
      << "  \"ridge_point\": " << r.ridge_point() << ",\n"
      << "  \"threads\": " << r.threads << ",\n"
      << "  \"working_set_mib\": " << r.working_set_mib << ",\n"
      << "  \"simd\": \"" << r.simd << "\",\n"
      << "  \"cpu\": \"" << r.cpu << "\",\n"
      << "  \"measured_at\": \"" << r.measured_at << "\"\n"
      << "}\n";
  if (!out) throw std::runtime_error("cannot write roofline file '" + path.string() + "'");
}

std::optional<Roofline> load_roofline(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  auto number = [&](const char* key) -> std::optional<double> {
    std::smatch match;
    if (!std::regex_search(text, match, std::regex(std::string("\"") + key + R"("\s*:\s*([-+0-9.eE]+))")))
      return std::nullopt;
    return std::stod(match[1]);
  };
  auto string = [&](const char* key) -> std::string {
    std::smatch match;
    if (!std::regex_search(text, match, std::regex(std::string("\"") + key + R"re("\s*:\s*"([^"]*)")re"))) return "";
    return match[1];
  };
  Roofline r;
  const auto peak = number("peak_gflops"), read = number("read_gbs"), triad = number("triad_gbs");
  if (!peak || !read || !triad || *peak <= 0.0 || *triad <= 0.0) return std::nullopt;
  r.peak_gflops = *peak;
  r.read_gbs = *read;
  r.triad_gbs = *triad;
  r.threads = static_cast<int>(number("threads").value_or(0));
  r.working_set_mib = number("working_set_mib").value_or(0);
  r.simd = string("simd");
  r.cpu = string("cpu");
  r.measured_at = string("measured_at");
  return r;
}

Roofline roofline_for_benchmarks() {
  const auto path = default_roofline_path();
  if (auto saved = load_roofline(path)) return *saved;
  RooflineOptions quick;
  quick.seconds_per_test = 0.25;
  Roofline measured = measure_roofline(quick);
  try {
    save_roofline(measured, path);
  } catch (const std::exception&) {
    // A read-only tree still gets a measured roofline, just not a saved one.
  }
  return measured;
}

std::string describe(const Roofline& r) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(1) << "fp32 FMA peak " << r.peak_gflops << " GFLOP/s (" << r.threads
       << " threads, " << r.simd << "), read " << r.read_gbs << " GB/s, triad " << r.triad_gbs
       << " GB/s, ridge point " << r.ridge_point() << " FLOP/byte";
  return text.str();
}

}  // namespace inferlab
