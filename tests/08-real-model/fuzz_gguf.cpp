// fuzz_gguf: a deterministic, seeded mutation fuzzer of the GGUF reader (runtime/gguf/gguf.h),
// with no fuzzing library: g++ alone, and AddressSanitizer + UBSan in CI (.ci/run).
//
// It starts from valid files built with gguf_writer.h (versions 2 and 3, every value type,
// arrays, alignments 1 / 32 / 64, every tensor type), mutates them (bit flips, random bytes,
// interesting integers at random offsets and at the seeds' length, count, type, ne and offset
// fields, small steps of those fields, truncation, insertion, deletion, duplication, splicing
// two seeds), parses each result with GgufFile::parse and, when it parses, touches every metadata
// value and every byte of every tensor. The contract under test: parse returns or throws
// std::invalid_argument whose message names the file and a byte offset — anything else (another
// exception, a crash, a sanitizer report, a tensor's data() that throws) is a failure, reported
// with the seed and the iteration, and the input is written to a file.
//
//     fuzz_gguf [--seconds N] [--iterations N] [--seed S] [--crash-dir DIR] [--input FILE]
//
// Iteration i's input depends on (seed, i) only: any failure replays with the same seed, or from
// the file written (--input).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/gguf/gguf.h"
#include "tests/08-real-model/gguf_writer.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

namespace inferlab {
namespace {

using gguf::GgufFile;
using gguf::Value;
using gguf::ValueType;
using quant::GgmlType;
using test::BuiltGguf;
using test::GgufWriter;

constexpr const char* kInputName = "fuzz.gguf";

// --- the seeds ------------------------------------------------------------------------------------

std::vector<BuiltGguf> seed_files() {
  std::vector<BuiltGguf> seeds;
  GgufWriter scalars(2);
  scalars.add_u8("u8", 200)
      .add_i8("i8", -3)
      .add_u16("u16", 60000)
      .add_i16("i16", -300)
      .add_u32("u32", 7)
      .add_i32("i32", -70000)
      .add_f32("f32", 0.5f)
      .add_bool("bool", true)
      .add_string("general.name", "seed")
      .add_u64("u64", 1ull << 40)
      .add_i64("i64", -(1ll << 40))
      .add_f64("f64", 1e-300);
  seeds.push_back(scalars.build());

  GgufWriter arrays(3);
  arrays.add_string_array("tokenizer.ggml.tokens", {"<|endoftext|>", "a", "", "\xc4\xa0the"})
      .add_array("tokenizer.ggml.token_type", ValueType::i32, std::vector<int>{3, 1, 1, 1})
      .add_array("tokenizer.ggml.scores", ValueType::f32, std::vector<float>{0, -1, -2.5f, 3})
      .add_array("bytes", ValueType::u8, std::vector<int>{1, 2, 3})
      .add_array("flags", ValueType::boolean, std::vector<int>{0, 1})
      .add_array("wide", ValueType::u64, std::vector<uint64_t>{~0ull, 0})
      .add_array("empty", ValueType::f64, std::vector<double>{})
      .add_tensor("blk.0.attn_norm.weight", GgmlType::f32, {8});
  seeds.push_back(arrays.build());

  GgufWriter tensors(3);
  tensors.add_string("general.architecture", "llama")
      .add_u32("llama.block_count", 1)
      .set_alignment(64)
      .add_tensor("f32", GgmlType::f32, {4, 2})
      .add_tensor("f16", GgmlType::f16, {6})
      .add_tensor("bf16", GgmlType::bf16, {2, 2, 2})
      .add_tensor("q4_0", GgmlType::q4_0, {32, 1, 1, 2})
      .add_tensor("q4_1", GgmlType::q4_1, {64})
      .add_tensor("q8_0", GgmlType::q8_0, {32, 2})
      .add_tensor("q8_1", GgmlType::q8_1, {32});
  seeds.push_back(tensors.build());

  GgufWriter packed(2);
  packed.set_alignment(1)
      .add_string("general.name", "packed")
      .add_tensor("a", GgmlType::f16, {3})
      .add_tensor("b", GgmlType::q8_0, {32})
      .add_tensor("c", GgmlType::f32, {1, 1, 1, 1});
  seeds.push_back(packed.build());

  GgufWriter llama(3);  // a miniature of the real model's layout
  llama.add_string("general.architecture", "llama")
      .add_u32("llama.embedding_length", 32)
      .add_u32("llama.attention.head_count", 2)
      .add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .add_string_array("tokenizer.ggml.merges", {"a b", "Ġ t"})
      .add_tensor("token_embd.weight", GgmlType::q8_0, {32, 3})
      .add_tensor("blk.0.attn_q.weight", GgmlType::q4_1, {32, 2})
      .add_tensor("output_norm.weight", GgmlType::f32, {32});
  seeds.push_back(llama.build());

  seeds.push_back(GgufWriter(3).build());  // the header alone
  return seeds;
}

// --- randomness -----------------------------------------------------------------------------------

// splitmix64: small, fast, and every iteration's stream is a pure function of (seed, iteration).
class Random {
 public:
  explicit Random(uint64_t state) : state_(state) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n) (n > 0).
  size_t below(size_t n) { return size_t(next() % n); }
  bool chance(int percent) { return below(100) < size_t(percent); }

 private:
  uint64_t state_;
};

// The integers that break length, count and offset arithmetic.
uint64_t interesting(Random& r) {
  static constexpr uint64_t kValues[] = {0,
                                         1,
                                         2,
                                         3,
                                         4,
                                         7,
                                         8,
                                         12,
                                         13,
                                         16,
                                         31,
                                         32,
                                         33,
                                         63,
                                         64,
                                         0x7f,
                                         0x80,
                                         0xff,
                                         0x100,
                                         0x7fff,
                                         0xffff,
                                         0x10000,
                                         0x7fffffff,
                                         0x80000000,
                                         0xffffffff,
                                         0x100000000,
                                         1ull << 60,
                                         0x7fffffffffffffff,
                                         0x8000000000000000,
                                         0xfffffffffffffff0,
                                         ~0ull};
  return kValues[r.below(std::size(kValues))];
}

void write_le(std::vector<uint8_t>& bytes, size_t at, uint64_t value, int width) {
  for (int i = 0; i < width && at + size_t(i) < bytes.size(); ++i) bytes[at + size_t(i)] = uint8_t(value >> (8 * i));
}

uint64_t read_le(const std::vector<uint8_t>& bytes, size_t at, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width && at + size_t(i) < bytes.size(); ++i) v |= uint64_t(bytes[at + size_t(i)]) << (8 * i);
  return v;
}

// --- mutations ------------------------------------------------------------------------------------

int random_width(Random& r) {
  return 1 << r.below(4);
}

void mutate_once(std::vector<uint8_t>& b, const BuiltGguf& seed, const std::vector<BuiltGguf>& seeds, Random& r) {
  const size_t size = b.size();
  switch (r.below(11)) {
    case 0:  // flip a bit
      if (size) b[r.below(size)] ^= uint8_t(1u << r.below(8));
      return;
    case 1:  // a random byte
      if (size) b[r.below(size)] = uint8_t(r.next());
      return;
    case 2:  // an interesting integer at a random offset
      if (size) write_le(b, r.below(size), interesting(r), random_width(r));
      return;
    case 3:
    case 4: {  // an interesting integer at one of the seed's integer fields (lengths, counts, …)
      if (seed.fields.empty()) return;
      const test::GgufField& f = seed.fields[r.below(seed.fields.size())];
      write_le(b, f.offset, interesting(r), f.width);
      return;
    }
    case 5: {  // a field stepped by a little: off-by-one lengths, counts and offsets
      if (seed.fields.empty()) return;
      const test::GgufField& f = seed.fields[r.below(seed.fields.size())];
      const uint64_t step = 1 + r.below(r.chance(50) ? 2 : 64);
      const uint64_t v = read_le(b, f.offset, f.width);
      write_le(b, f.offset, r.chance(50) ? v + step : v - step, f.width);
      return;
    }
    case 6:  // truncate
      b.resize(r.below(size + 1));
      return;
    case 7: {  // insert random bytes
      const size_t at = r.below(size + 1);
      std::vector<uint8_t> extra(1 + r.below(r.chance(80) ? 8 : 64));
      for (uint8_t& x : extra) x = uint8_t(r.next());
      b.insert(b.begin() + ptrdiff_t(at), extra.begin(), extra.end());
      return;
    }
    case 8: {  // delete a range
      if (!size) return;
      const size_t at = r.below(size);
      const size_t n = 1 + r.below(std::min<size_t>(size - at, r.chance(80) ? 8 : 256));
      b.erase(b.begin() + ptrdiff_t(at), b.begin() + ptrdiff_t(at + n));
      return;
    }
    case 9: {  // duplicate a chunk somewhere else (repeated pairs, repeated tensor infos)
      if (!size) return;
      const size_t from = r.below(size);
      const size_t n = 1 + r.below(std::min<size_t>(size - from, 64));
      const std::vector<uint8_t> chunk(b.begin() + ptrdiff_t(from), b.begin() + ptrdiff_t(from + n));
      const size_t to = r.below(size + 1);
      b.insert(b.begin() + ptrdiff_t(to), chunk.begin(), chunk.end());
      return;
    }
    default: {  // splice: this input's prefix, another seed's suffix
      const std::vector<uint8_t>& other = seeds[r.below(seeds.size())].bytes;
      const size_t cut = r.below(size + 1);
      const size_t from = r.below(other.size() + 1);
      b.resize(cut);
      b.insert(b.end(), other.begin() + ptrdiff_t(from), other.end());
      return;
    }
  }
}

std::vector<uint8_t> mutated(const std::vector<BuiltGguf>& seeds, Random& r) {
  const BuiltGguf& seed = seeds[r.below(seeds.size())];
  std::vector<uint8_t> bytes = seed.bytes;
  const size_t mutations = r.chance(60) ? 1 : 1 + r.below(6);
  for (size_t i = 0; i < mutations; ++i) mutate_once(bytes, seed, seeds, r);
  return bytes;
}

// --- touching what parsed -------------------------------------------------------------------------

volatile uint64_t g_sink = 0;

uint64_t touch(const Value& v) {
  uint64_t h = uint64_t(v.type) * 31 + uint64_t(v.element_type);
  if (const auto* u = std::get_if<uint64_t>(&v.data)) return h ^ *u;
  if (const auto* s = std::get_if<int64_t>(&v.data)) return h ^ uint64_t(*s);
  if (const auto* d = std::get_if<double>(&v.data)) return h ^ uint64_t(*d == *d);
  if (const auto* b = std::get_if<bool>(&v.data)) return h ^ uint64_t(*b);
  if (const auto* t = std::get_if<std::string>(&v.data)) {
    for (unsigned char c : *t) h = h * 131 + c;
    return h;
  }
  for (const Value& e : std::get<std::vector<Value>>(v.data)) {
    if (e.type != v.element_type) throw std::logic_error("an array element of another type than the array's");
    h = h * 7 + touch(e);
  }
  return h;
}

// Calls the getter that matches each value's type: it must not throw, except for integers that
// do not fit (an unsigned value past INT64_MAX, a negative one).
uint64_t call_getters(const GgufFile& f, const std::string& key, const Value& v) {
  switch (v.type) {
    case ValueType::u8:
    case ValueType::u16:
    case ValueType::u32:
    case ValueType::u64:
      return f.get_uint(key);
    case ValueType::i8:
    case ValueType::i16:
    case ValueType::i32:
    case ValueType::i64:
      return uint64_t(f.get_int(key));
    case ValueType::f32:
    case ValueType::f64:
      return uint64_t(f.get_float(key) == 0);
    case ValueType::boolean:
      return f.get_bool(key);
    case ValueType::string:
      return f.get_string(key).size();
    case ValueType::array:
      break;
  }
  if (v.element_type == ValueType::string) return f.get_string_array(key).size();
  if (v.element_type == ValueType::f32 || v.element_type == ValueType::f64) return f.get_float_array(key).size();
  if (gguf::is_integer(v.element_type)) {
    try {
      return f.get_int_array(key).size();
    } catch (const std::invalid_argument&) {
      if (v.element_type != ValueType::u64) throw;  // only u64 elements may not fit int64
    }
  }
  return 0;
}

void touch_everything(const GgufFile& f) {
  uint64_t h = f.version() + f.alignment() + f.data_offset();
  for (const auto& [key, value] : f.metadata()) {
    if (f.find(key) != &value) throw std::logic_error("find() does not return the key's own value");
    h += touch(value) + call_getters(f, key, value);
  }
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) throw std::logic_error("find_tensor() does not return the tensor itself");
    const std::span<const uint8_t> data = f.data(t);  // throws only for a foreign info: a failure here
    if (data.size() != t.bytes) throw std::logic_error("data() size differs from the info's bytes");
    for (uint8_t byte : data) h += byte;
    h += uint64_t(t.elements());
  }
  g_sink = g_sink + h;
}

// --- failure reports ------------------------------------------------------------------------------

// What the handlers write when the process dies (a sanitizer report or a signal).
struct Current {
  const std::vector<uint8_t>* input = nullptr;
  uint64_t seed = 0;
  uint64_t iteration = 0;
  char path[4096] = {};
};
Current g_current;

// "DIR/fuzz_gguf-failure-SEED-ITERATION.gguf" without allocating (used from signal handlers).
void format_path(const std::string& dir, uint64_t seed, uint64_t iteration, char* out, size_t capacity) {
  std::snprintf(out, capacity, "%s/fuzz_gguf-failure-%llu-%llu.gguf", dir.c_str(), (unsigned long long)seed,
                (unsigned long long)iteration);
}

void write_current_input() {
  if (!g_current.input) return;
  const int fd = ::open(g_current.path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  const uint8_t* p = g_current.input->data();
  size_t left = g_current.input->size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n <= 0) break;
    p += n;
    left -= size_t(n);
  }
  ::close(fd);
  static const char kNote[] = "\nfuzz_gguf: the input that failed is written to ";
  [[maybe_unused]] ssize_t ignored = ::write(2, kNote, sizeof kNote - 1);
  ignored = ::write(2, g_current.path, std::strlen(g_current.path));
  ignored = ::write(2, "\n", 1);
}

#if defined(__SANITIZE_ADDRESS__)
#if defined(__SANITIZE_ADDRESS__)
void on_death() {
  write_current_input();
}
#endif
#endif

void on_signal(int signal) {
  write_current_input();
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

// Under ASan the sanitizer's own handlers report a SEGV, BUS or FPE with its stack trace and then
// call the death callback; the fuzzer's handlers take only what it leaves alone.
void install_failure_handlers() {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_set_death_callback(on_death);
  for (int s : {SIGILL, SIGABRT}) std::signal(s, on_signal);
#else
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(s, on_signal);
#endif
}

// --- the loop -------------------------------------------------------------------------------------

struct Options {
  double seconds = 10;
  uint64_t iterations = 0;  // 0: as many as the seconds allow
  uint64_t seed = 1;
  std::string crash_dir = ".";
  std::string input;  // replay one file
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "fuzz_gguf: %s\nusage: fuzz_gguf [--seconds N (10)] [--iterations N] [--seed S (1)] "
               "[--crash-dir DIR (.)] [--input FILE]\n",
               problem.c_str());
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) usage("missing a value after " + arg);
    const std::string value = argv[++i];
    try {
      if (arg == "--seconds")
        o.seconds = std::stod(value);
      else if (arg == "--iterations")
        o.iterations = std::stoull(value);
      else if (arg == "--seed")
        o.seed = std::stoull(value);
      else if (arg == "--crash-dir")
        o.crash_dir = value;
      else if (arg == "--input")
        o.input = value;
      else
        usage("unknown option " + arg);
    } catch (const std::logic_error&) {
      usage("bad value " + value + " for " + arg);
    }
  }
  return o;
}

enum class Outcome { parsed, rejected, failed };

// The reader's checks, by a phrase of their messages: the tally shows which ones the mutations
// reach (the first phrase found names a message).
constexpr const char* kChecks[] = {"truncated",
                                   "bad magic",
                                   "version",
                                   "tensor count",
                                   "pair count",
                                   "string length",
                                   "array count",
                                   "unknown value type",
                                   "nested arrays",
                                   "neither 0 nor 1",
                                   "duplicate key",
                                   "duplicate tensor name",
                                   "must be u32",
                                   "power of two",
                                   "n_dims",
                                   "must be > 0",
                                   "does not fit int64",
                                   "ggml type",
                                   "not a multiple of the alignment",
                                   "block of",
                                   "overflows",
                                   "run past the end",
                                   "overlap"};
uint64_t g_check_counts[std::size(kChecks) + 1] = {};

void tally(const std::string& message) {
  size_t i = 0;
  while (i < std::size(kChecks) && message.find(kChecks[i]) == std::string::npos) ++i;
  ++g_check_counts[i];
}

void print_tally() {
  std::printf("fuzz_gguf: rejections by check:");
  for (size_t i = 0; i <= std::size(kChecks); ++i)
    std::printf("%s %s %llu", i ? "," : "", i < std::size(kChecks) ? kChecks[i] : "other",
                (unsigned long long)g_check_counts[i]);
  std::printf("\n");
}

// One input through the contract; a failure is printed with @p label.
Outcome run_one(const std::vector<uint8_t>& input, const std::string& label) {
  try {
    const GgufFile f = GgufFile::parse(input, kInputName);
    touch_everything(f);
    return Outcome::parsed;
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    if (message.find(std::string("GGUF file ") + kInputName + ": byte ") == 0) {
      tally(message);
      return Outcome::rejected;
    }
    std::fprintf(stderr, "fuzz_gguf: FAILURE at %s: an invalid_argument without the file and byte: %s\n", label.c_str(),
                 message.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_gguf: FAILURE at %s: an exception other than invalid_argument: %s\n", label.c_str(),
                 e.what());
  } catch (...) {
    std::fprintf(stderr, "fuzz_gguf: FAILURE at %s: a non-std exception\n", label.c_str());
  }
  return Outcome::failed;
}

int replay(const Options& o) {
  std::ifstream in(o.input, std::ios::binary);
  if (!in) usage("cannot read " + o.input);
  const std::vector<uint8_t> input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Outcome outcome = run_one(input, o.input);
  std::printf("fuzz_gguf: %s: %s\n", o.input.c_str(),
              outcome == Outcome::parsed     ? "parsed"
              : outcome == Outcome::rejected ? "rejected"
                                             : "FAILED");
  return outcome == Outcome::failed ? 1 : 0;
}

int fuzz(const Options& o) {
  const std::vector<BuiltGguf> seeds = seed_files();
  for (const BuiltGguf& s : seeds)
    if (run_one(s.bytes, "a seed") != Outcome::parsed) {
      std::fprintf(stderr, "fuzz_gguf: a seed file does not parse\n");
      return 1;
    }
  if (o.iterations)
    std::printf("fuzz_gguf: seed %llu, %zu seed files, %llu iterations\n", (unsigned long long)o.seed, seeds.size(),
                (unsigned long long)o.iterations);
  else
    std::printf("fuzz_gguf: seed %llu, %zu seed files, %g s\n", (unsigned long long)o.seed, seeds.size(), o.seconds);
  std::fflush(stdout);
  install_failure_handlers();
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  uint64_t counts[3] = {0, 0, 0};
  uint64_t i = 0;
  for (;; ++i) {
    if (o.iterations ? i >= o.iterations : (i % 256 == 0 && Clock::now() >= deadline)) break;
    Random r(o.seed * 0x9e3779b97f4a7c15ull ^ (i + 1) * 0xd1b54a32d192ed03ull);
    const std::vector<uint8_t> input = mutated(seeds, r);
    g_current.input = &input;
    g_current.seed = o.seed;
    g_current.iteration = i;
    format_path(o.crash_dir, o.seed, i, g_current.path, sizeof g_current.path);
    const Outcome outcome = run_one(input, "seed " + std::to_string(o.seed) + " iteration " + std::to_string(i));
    if (outcome == Outcome::failed) {
      write_current_input();
      std::fprintf(stderr, "fuzz_gguf: replay with --seed %llu (iteration %llu) or --input %s\n",
                   (unsigned long long)o.seed, (unsigned long long)i, g_current.path);
      return 1;
    }
    ++counts[int(outcome)];
    g_current.input = nullptr;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf(
      "fuzz_gguf: %llu iterations in %.1f s (%.0f/s): %llu parsed, %llu rejected with std::invalid_argument, "
      "0 failures\n",
      (unsigned long long)i, seconds, double(i) / std::max(seconds, 1e-9), (unsigned long long)counts[0],
      (unsigned long long)counts[1]);
  print_tally();
  return 0;
}

}  // namespace
}  // namespace inferlab

int main(int argc, char** argv) {
  const inferlab::Options o = inferlab::parse_options(argc, argv);
  return o.input.empty() ? inferlab::fuzz(o) : inferlab::replay(o);
}
