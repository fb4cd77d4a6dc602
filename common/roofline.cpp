// Measuring the roofline of this machine.
//
//  - Peak: each thread keeps 12 independent FMA chains in vector registers. An FMA has a latency
//    of about 4 cycles and most x86 cores issue 2 per cycle, so at least 8 chains must be in
//    flight; fewer chains measure latency, not throughput. The chains are separate variables
//    (not an array) so that the compiler keeps them in registers: an earlier version spilled an
//    array of accumulators to the stack every iteration, which added a store-to-load round trip
//    to each chain and measured ~60% of the peak. AVX2 (256-bit) and AVX-512 (512-bit) are
//    measured separately, selected at run time, so the answer does not depend on -march.
//  - Read: each thread sums its contiguous share of one array into 8 vector accumulators. With a
//    single accumulator (or a loop the compiler turns into gathers, as a lambda capturing the
//    pointer by reference did) the loop waits on the adder, not on memory.
//  - Triad: STREAM's a[i] = b[i] + s·c[i] on plain pointers, counted as 3 arrays of traffic.
// Every figure is the best of repeated passes: the least disturbed by the rest of the machine.
#include "common/roofline.h"

#include "common/huge_pages.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "common/json.h"
#include "common/register_chains.h"
#include "common/timer.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define INFERLAB_X86 1
#endif

#ifndef INFERLAB_SOURCE_DIR
#define INFERLAB_SOURCE_DIR "."
#endif

namespace inferlab {

double Roofline::attainable_gflops(double ai) const {
  return std::min(peak_gflops, ai * triad_gbs);
}

namespace {


// One thread's FMA work for each ISA: `iterations` rounds of 12 dependent-chain FMAs. Returns the
// sum of the chains so that nothing can be optimized away. The constants keep values finite.
#if defined(INFERLAB_X86)
__attribute__((target("avx2,fma"))) float fma_chains_avx2(long iterations, float seed) {
  const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-7f);
#define DECLARE(n) __m256 acc##n = _mm256_set1_ps(seed + n);
  INFERLAB_CHAINS(DECLARE)
#undef DECLARE
  for (long i = 0; i < iterations; ++i) {
#define STEP(n) acc##n = _mm256_fmadd_ps(acc##n, mul, add);
    INFERLAB_CHAINS(STEP)
#undef STEP
  }
  __m256 total = _mm256_setzero_ps();
#define SUM(n) total = _mm256_add_ps(total, acc##n);
  INFERLAB_CHAINS(SUM)
#undef SUM
  float lanes[8];
  _mm256_storeu_ps(lanes, total);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3] + lanes[4] + lanes[5] + lanes[6] + lanes[7];
}

__attribute__((target("avx512f"))) float fma_chains_avx512(long iterations, float seed) {
  const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-7f);
#define DECLARE(n) __m512 acc##n = _mm512_set1_ps(seed + n);
  INFERLAB_CHAINS(DECLARE)
#undef DECLARE
  for (long i = 0; i < iterations; ++i) {
#define STEP(n) acc##n = _mm512_fmadd_ps(acc##n, mul, add);
    INFERLAB_CHAINS(STEP)
#undef STEP
  }
  __m512 total = _mm512_setzero_ps();
#define SUM(n) total = _mm512_add_ps(total, acc##n);
  INFERLAB_CHAINS(SUM)
#undef SUM
  float lanes[16];
  _mm512_storeu_ps(lanes, total);
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  return sum;
}
#endif

// Portable fallback: 4-lane vectors; the compiler emits FMA only where the target has it.
float fma_chains_generic(long iterations, float seed) {
  typedef float Vec4 __attribute__((vector_size(16)));
  const Vec4 mul = Vec4{} + 0.999999f, add = Vec4{} + 1e-7f;
#define DECLARE(n) Vec4 acc##n = Vec4{} + (seed + n);
  INFERLAB_CHAINS(DECLARE)
#undef DECLARE
  for (long i = 0; i < iterations; ++i) {
#define STEP(n) acc##n = acc##n * mul + add;
    INFERLAB_CHAINS(STEP)
#undef STEP
  }
  Vec4 total{};
#define SUM(n) total += acc##n;
  INFERLAB_CHAINS(SUM)
#undef SUM
  return total[0] + total[1] + total[2] + total[3];
}

struct FmaKernel {
  const char* simd;
  int lanes;
  float (*run)(long, float);
};

// Best GFLOP/s of @p kernel on all OpenMP threads over about @p seconds; @p threads_ran receives
// how many threads really ran the loop.
double fma_gflops(const FmaKernel& kernel, double seconds, int& threads_ran) {
  constexpr long kIterations = 1L << 20;  // ~5 ms per region at 2 FMAs/cycle: fork cost negligible
  double best = 0.0;
  float sink = 0.0f;
  Stopwatch total;
  for (int pass = 0; pass < 3 || total.seconds() < seconds; ++pass) {
    int ran = 0;
    Stopwatch stopwatch;
#pragma omp parallel reduction(+ : sink, ran)
    {
      sink += kernel.run(kIterations, static_cast<float>(omp_get_thread_num()));
      ran += 1;
    }
    const double elapsed = stopwatch.seconds();
    const double flops = 2.0 * kernel.lanes * kChains * static_cast<double>(kIterations) * ran;
    if (pass > 0) best = std::max(best, flops / elapsed / 1e9);  // pass 0 wakes the threads up
    threads_ran = ran;
  }
  volatile float keep = sink;
  (void)keep;
  return best;
}

// Arrays on the storage the KV caches use (common/huge_pages.h: 2 MiB pages where the OS offers
// them), so the read roof is measured on the same footing as the decode kernels it bounds (an
// INT8 decode-shaped stream is slower on 4 KiB pages; chapter 04's lesson has the figures).
struct HugePageDeleter {
  size_t bytes;
  void operator()(float* p) const { inferlab::release_huge_page_bytes(p, bytes); }
};
using Array = std::unique_ptr<float[], HugePageDeleter>;

Array make_array(size_t count) {
  const size_t bytes = count * sizeof(float);
  return Array(static_cast<float*>(inferlab::allocate_huge_page_bytes(bytes)), HugePageDeleter{bytes});
}

// The contiguous share [begin, end) of @p count elements for the calling thread, in whole
// 128-element (512-byte) blocks except for the last thread, which also takes the tail.
void thread_share(size_t count, size_t& begin, size_t& end) {
  const size_t threads = static_cast<size_t>(omp_get_num_threads());
  const size_t thread = static_cast<size_t>(omp_get_thread_num());
  const size_t share = count / threads / 128 * 128;
  begin = thread * share;
  end = thread + 1 == threads ? count : begin + share;
}

// Sums data[begin, end) with 8 independent vector accumulators, one cache line each. They are
// separate variables, not an array, so that GCC keeps them in registers.
float read_sum(const float* data, size_t begin, size_t end) {
  typedef float Line __attribute__((vector_size(64)));  // one 64-byte cache line
  // By reference, not by value: a 64-byte vector return would change the ABI without AVX-512.
  auto add_line = [](Line& acc, const float* line) {
    Line loaded;
    std::memcpy(&loaded, line, sizeof loaded);
    acc += loaded;
  };
  Line acc0{}, acc1{}, acc2{}, acc3{}, acc4{}, acc5{}, acc6{}, acc7{};
  size_t i = begin;
  for (; i + 128 <= end; i += 128) {
    add_line(acc0, data + i);
    add_line(acc1, data + i + 16);
    add_line(acc2, data + i + 32);
    add_line(acc3, data + i + 48);
    add_line(acc4, data + i + 64);
    add_line(acc5, data + i + 80);
    add_line(acc6, data + i + 96);
    add_line(acc7, data + i + 112);
  }
  const Line total = ((acc0 + acc1) + (acc2 + acc3)) + ((acc4 + acc5) + (acc6 + acc7));
  float sum = 0.0f;
  for (int lane = 0; lane < 16; ++lane) sum += total[lane];
  for (; i < end; ++i) sum += data[i];
  return sum;
}

float read_pass(const float* data, size_t count) {
  float sum = 0.0f;
#pragma omp parallel reduction(+ : sum)
  {
    size_t begin = 0, end = 0;
    thread_share(count, begin, end);
    sum += read_sum(data, begin, end);
  }
  return sum;
}

void triad_pass(float* __restrict a, const float* __restrict b, const float* __restrict c, size_t count) {
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < count; ++i) a[i] = b[i] + 0.5f * c[i];
}

// The fastest of at least 3 timed passes of @p work, repeating until @p seconds have passed.
template <class Work>
double best_pass_seconds(double seconds, Work&& work) {
  work();  // warm-up: page faults and frequency ramp
  double best = 1e300;
  Stopwatch total;
  for (int pass = 0; pass < 3 || total.seconds() < seconds; ++pass) {
    Stopwatch stopwatch;
    work();
    best = std::min(best, stopwatch.seconds());
  }
  return best;
}

}  // namespace

size_t last_level_cache_bytes() {
  long bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (bytes <= 0) bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return bytes > 0 ? static_cast<size_t>(bytes) : size_t(32) << 20;
}

Roofline measure_roofline(const RooflineOptions& options) {
  if (options.threads > 0) omp_set_num_threads(options.threads);
  Roofline roofline;
  if (std::ifstream loadavg("/proc/loadavg"); loadavg) loadavg >> roofline.load_average;

  double working_set = options.working_set_mib * 1048576.0;
  if (working_set <= 0.0) {
    // Four times the last-level cache (at least 1 GiB): whatever share of a big shared L3 a VM
    // really gets, at most a quarter of each pass can hit in it.
    const double ram = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
    working_set = std::min(std::max(4.0 * static_cast<double>(last_level_cache_bytes()), 1073741824.0), ram / 4.0);
  }
  roofline.working_set_mib = working_set / 1048576.0;

  // Compute roof: every ISA this CPU has; the best one is the peak.
  std::vector<FmaKernel> kernels;
#if defined(INFERLAB_X86)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) kernels.push_back({"avx2", 8, fma_chains_avx2});
  if (__builtin_cpu_supports("avx512f")) kernels.push_back({"avx512", 16, fma_chains_avx512});
#endif
  if (kernels.empty()) kernels.push_back({"generic", 4, fma_chains_generic});
  const double fma_seconds = options.seconds_per_test / static_cast<double>(kernels.size());
  for (const FmaKernel& kernel : kernels) {
    const double gflops = fma_gflops(kernel, fma_seconds, roofline.threads);
    if (std::strcmp(kernel.simd, "avx2") == 0) roofline.peak_avx2_gflops = gflops;
    if (std::strcmp(kernel.simd, "avx512") == 0) roofline.peak_avx512_gflops = gflops;
    if (gflops > roofline.peak_gflops) {
      roofline.peak_gflops = gflops;
      roofline.simd = kernel.simd;
    }
  }

  // The dot-product ceilings (int8, bf16): the fastest of each type is its ceiling.
  roofline.dot_ceilings = measure_dot_ceilings(options.seconds_per_test);
  for (const DotCeiling& c : roofline.dot_ceilings) {
    if (c.type == DotType::int8 && c.gops > roofline.int8_gops) {
      roofline.int8_gops = c.gops;
      roofline.int8_instruction = c.instruction;
    }
    if (c.type == DotType::bf16 && c.gops > roofline.bf16_gflops) {
      roofline.bf16_gflops = c.gops;
      roofline.bf16_instruction = c.instruction;
    }
  }

  // Bandwidth roofs: three arrays of working_set/3 bytes each, first-touched in parallel with
  // the same static schedule as the passes, so each thread's pages sit near it.
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
  float sum = 0.0f;
  const double read_seconds = best_pass_seconds(options.seconds_per_test, [&] { sum += read_pass(pb, count); });
  roofline.read_gbs = static_cast<double>(count) * sizeof(float) / read_seconds / 1e9;
  const double triad_seconds = best_pass_seconds(options.seconds_per_test, [&] { triad_pass(pa, pb, pc, count); });
  roofline.triad_gbs = 3.0 * static_cast<double>(count) * sizeof(float) / triad_seconds / 1e9;
  volatile float keep = sum + pa[count / 2];
  (void)keep;

  roofline.cpu = cpu_model_name();
  const std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  roofline.measured_at = stamp;
  return roofline;
}

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

Roofline median_roofline(const std::vector<Roofline>& runs) {
  if (runs.empty()) throw std::invalid_argument("runs.size() = 0: median_roofline needs at least one run");
  const auto median = [&](double Roofline::*field) {
    std::vector<double> values;
    for (const Roofline& r : runs) values.push_back(r.*field);
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  };
  Roofline m = runs.front();
  m.peak_gflops = median(&Roofline::peak_gflops);
  m.peak_avx2_gflops = median(&Roofline::peak_avx2_gflops);
  m.peak_avx512_gflops = median(&Roofline::peak_avx512_gflops);
  m.read_gbs = median(&Roofline::read_gbs);
  m.triad_gbs = median(&Roofline::triad_gbs);
  m.int8_gops = median(&Roofline::int8_gops);
  m.bf16_gflops = median(&Roofline::bf16_gflops);
  // Each instruction's median over the runs that measured it (every run measures the same ones).
  for (DotCeiling& c : m.dot_ceilings) {
    std::vector<double> values;
    for (const Roofline& r : runs)
      for (const DotCeiling& other : r.dot_ceilings)
        if (other.instruction == c.instruction) values.push_back(other.gops);
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    c.gops = n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  }
  for (const Roofline& r : runs) m.load_average = std::max(m.load_average, r.load_average);
  m.runs = static_cast<int>(runs.size());
  return m;
}

std::filesystem::path default_roofline_path() {
  if (const char* path = std::getenv("INFERLAB_ROOFLINE"); path != nullptr && *path != '\0') return path;
  return std::filesystem::path(INFERLAB_SOURCE_DIR) / "build" / "roofline.json";
}

void save_roofline(const Roofline& r, const std::filesystem::path& path) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  const auto figure = [](double value) { return json_number(value, 6); };
  Json json;
  json["peak_gflops"] = figure(r.peak_gflops);
  json["peak_avx2_gflops"] = figure(r.peak_avx2_gflops);
  json["peak_avx512_gflops"] = figure(r.peak_avx512_gflops);
  json["read_gbs"] = figure(r.read_gbs);
  json["triad_gbs"] = figure(r.triad_gbs);
  json["ridge_point"] = figure(r.ridge_point());
  json["threads"] = r.threads;
  json["working_set_mib"] = figure(r.working_set_mib);
  json["simd"] = r.simd;
  json["cpu"] = r.cpu;
  json["load_average"] = figure(r.load_average);
  json["runs"] = r.runs;
  json["measured_at"] = r.measured_at;
  json["int8_gops"] = figure(r.int8_gops);
  json["int8_instruction"] = r.int8_instruction;
  json["int8_ridge_point"] = figure(r.int8_ridge_point());
  json["bf16_gflops"] = figure(r.bf16_gflops);
  json["bf16_instruction"] = r.bf16_instruction;
  Json dots = Json::array();
  for (const DotCeiling& c : r.dot_ceilings)
    dots.push_back({{"type", c.type == DotType::int8 ? "int8" : "bf16"}, {"instruction", c.instruction},
                    {"gops", figure(c.gops)}});
  json["dot_ceilings"] = dots;
  // Write a temporary file and rename it: a benchmark reading concurrently sees the old file or
  // the new one, never a half-written one.
  const std::filesystem::path temporary = path.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temporary);
    out << format_json(json) << "\n";
    if (!out) throw std::runtime_error("cannot write roofline file '" + path.string() + "'");
  }
  std::filesystem::rename(temporary, path);
}

std::optional<Roofline> load_roofline(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream buffer;
  buffer << in.rdbuf();
  Json json;
  try {
    json = parse_json(buffer.str(), path.string());
  } catch (const std::invalid_argument&) {
    return std::nullopt;  // unreadable: measured again
  }
  if (!json.is_object()) return std::nullopt;
  const auto number = [&](const char* key) -> std::optional<double> {
    const auto it = json.find(key);
    if (it == json.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  const auto string = [&](const char* key) -> std::string {
    const auto it = json.find(key);
    return it != json.end() && it->is_string() ? it->get<std::string>() : "";
  };
  Roofline r;
  const auto peak = number("peak_gflops"), read = number("read_gbs"), triad = number("triad_gbs");
  if (!peak || !read || !triad || *peak <= 0.0 || *triad <= 0.0) return std::nullopt;
  r.peak_gflops = *peak;
  r.read_gbs = *read;
  r.triad_gbs = *triad;
  r.peak_avx2_gflops = number("peak_avx2_gflops").value_or(0);
  r.peak_avx512_gflops = number("peak_avx512_gflops").value_or(0);
  r.threads = static_cast<int>(number("threads").value_or(0));
  r.working_set_mib = number("working_set_mib").value_or(0);
  r.simd = string("simd");
  r.cpu = string("cpu");
  r.measured_at = string("measured_at");
  r.load_average = number("load_average").value_or(0);
  r.runs = static_cast<int>(number("runs").value_or(1));
  r.int8_gops = number("int8_gops").value_or(0);
  r.int8_instruction = string("int8_instruction");
  r.bf16_gflops = number("bf16_gflops").value_or(0);
  r.bf16_instruction = string("bf16_instruction");
  if (const auto it = json.find("dot_ceilings"); it != json.end() && it->is_array())
    for (const Json& c : *it) {
      if (!c.is_object() || !c.contains("gops") || !c["gops"].is_number() || !c.contains("instruction") ||
          !c["instruction"].is_string())
        continue;
      const bool bf16 = c.contains("type") && c["type"] == "bf16";
      r.dot_ceilings.push_back({bf16 ? DotType::bf16 : DotType::int8, c["instruction"].get<std::string>(),
                                c["gops"].get<double>()});
    }
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
       << " threads, " << r.simd;
  // Name the other ISA too: compiled loops often use 256-bit vectors and meet the AVX2 roof.
  if (r.simd == "avx512" && r.peak_avx2_gflops > 0.0) text << "; avx2 " << r.peak_avx2_gflops;
  text << ")";
  if (r.int8_gops > 0.0) text << ", int8 " << r.int8_gops << " GOP/s (" << r.int8_instruction << ")";
  text << ", read " << r.read_gbs << " GB/s, triad " << r.triad_gbs << " GB/s, ridge point " << r.ridge_point()
       << " FLOP/byte";
  if (r.measured_busy())
    text << " [measured while the machine was busy (load " << r.load_average
         << "): rerun `inferlab roofline` on an idle machine if these look low]";
  return text.str();
}

}  // namespace inferlab
