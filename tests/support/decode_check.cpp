#include "tests/support/decode_check.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "common/compare.h"
#include "common/half.h"
#include "kernels/attention/attention.h"
#include "kernels/kv/kv_factories.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"

namespace inferlab::testing {

int64_t DecodeCase::max_seq_len() const {
  return *std::max_element(lengths.begin(), lengths.end()) + capacity_slack;
}

std::string DecodeCase::name() const {
  std::ostringstream out;
  out << "b" << lengths.size() << "_L";
  for (size_t b = 0; b < lengths.size(); ++b) out << (b ? "-" : "") << lengths[b];
  out << "_steps" << steps << "_h" << num_heads << "_kv" << num_kv_heads << "_d" << head_dim;
  if (capacity_slack == 0) out << "_full";
  if (logit_scale != 1.0f) out << "_logits_x" << static_cast<int>(logit_scale);
  if (block_size > 0) out << "_bs" << block_size;
  return out.str();
}

std::vector<DecodeCase> odd_decode_cases(int64_t max_length) {
  // {final lengths, steps, heads, kv heads, head_dim, slack, logit scale}
  const std::vector<DecodeCase> all = {
      {{1}, 1, 1, 1, 64},                 // seq_len 1: decode the first token
      {{5}, 5, 2, 1, 80},                 // from t = 0 (no prompt) to t = 4, GQA 2
      {{2, 31, 9}, 2, 4, 4, 96},          // ragged, no GQA
      {{33, 1, 17}, 1, 8, 2, 128},        // ragged, GQA 4, one sequence of length 1
      {{31, 33}, 3, 8, 1, 64, 0},         // GQA 8; the longest sequence fills its cache
      {{7, 3, 12, 5}, 3, 6, 3, 80},       // batch 4, GQA 2, d 80
      {{127, 64}, 2, 2, 2, 128},          // longer rows
      {{129, 40, 77}, 1, 4, 1, 96},       // GQA 4, d 96
      {{19, 23}, 4, 4, 2, 64, 3, 40.0f},  // extreme logits: exp() without the max overflows
      {{11}, 2, 8, 8, 128, 3, 400.0f},
  };
  std::vector<DecodeCase> cases;
  for (const DecodeCase& c : all)
    if (*std::max_element(c.lengths.begin(), c.lengths.end()) <= max_length) cases.push_back(c);
  return cases;
}

void PrintTo(const DecodeVersionCase& c, std::ostream* out) {
  *out << c.version->name << " (" << to_string(c.version->backend) << ", " << to_string(c.version->input) << ") "
       << c.shape.name();
}

std::string decode_version_case_name(const ::testing::TestParamInfo<DecodeVersionCase>& info) {
  const DecodeVersion& v = *info.param.version;
  std::string name = v.name + "_" + std::string(to_string(v.backend)) + "_" + std::string(to_string(v.input)) +
                     "_" + info.param.shape.name();
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

std::vector<DecodeVersionCase> decode_version_cases(Backend backend, int64_t max_length) {
  std::vector<DecodeVersionCase> cases;
  for (const DecodeVersion& version : decode_versions()) {
    if (version.backend != backend || version.chapter != 3) continue;
    for (const DecodeCase& shape : odd_decode_cases(max_length)) cases.push_back({&version, shape});
  }
  return cases;
}

namespace {

// The data of one case: per sequence Q [H, T, d], K and V [KV, T, d] over its whole length.
struct Sequences {
  std::vector<Tensor<float>> q, k, v;
};

Sequences random_sequences(Rng& rng, const DecodeCase& c) {
  Sequences s;
  for (int64_t T : c.lengths) {
    s.q.push_back(rng.normal_tensor({c.num_heads, T, c.head_dim}, 0.0f, c.logit_scale));
    s.k.push_back(rng.normal_tensor({c.num_kv_heads, T, c.head_dim}));
    s.v.push_back(rng.normal_tensor({c.num_kv_heads, T, c.head_dim}));
  }
  return s;
}

// Tokens [0, count) of a [heads, T, d] tensor.
Tensor<float> first_tokens(const Tensor<float>& x, int64_t count) {
  const int64_t heads = x.dim(0), T = x.dim(1), d = x.dim(2);
  Tensor<float> out({heads, count, d});
  for (int64_t h = 0; h < heads; ++h) std::copy_n(x.data() + h * T * d, count * d, out.data() + h * count * d);
  return out;
}

// Token @p t of every sequence: [batch, heads, d] from per-sequence [heads, T_b, d] tensors.
Tensor<float> token_of_each(const std::vector<Tensor<float>>& per_sequence, const std::vector<int64_t>& t) {
  const int64_t batch = int64_t(per_sequence.size()), heads = per_sequence[0].dim(0), d = per_sequence[0].dim(2);
  Tensor<float> out({batch, heads, d});
  for (int64_t b = 0; b < batch; ++b) {
    const Tensor<float>& x = per_sequence[size_t(b)];
    const int64_t T = x.dim(1);
    for (int64_t h = 0; h < heads; ++h)
      std::copy_n(x.data() + (h * T + t[size_t(b)]) * d, d, out.data() + (b * heads + h) * d);
  }
  return out;
}

double max_abs_logit(const Sequences& s, const DecodeCase& c) {
  double max_logit = 0.0;
  const double scale = 1.0 / std::sqrt(double(c.head_dim));
  const int64_t group = c.num_heads / c.num_kv_heads, d = c.head_dim;
  for (size_t b = 0; b < s.q.size(); ++b) {
    const int64_t T = c.lengths[b];
    for (int64_t h = 0; h < c.num_heads; ++h)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0.0;
          for (int64_t x = 0; x < d; ++x)
            dot += double(s.q[b][(h * T + i) * d + x]) * s.k[b][((h / group) * T + j) * d + x];
          max_logit = std::max(max_logit, std::abs(dot * scale));
        }
  }
  return max_logit;
}

// An empty cache for @p c: contiguous, or paged over scattered blocks (seeded by @p seed).
KvCache empty_cache(const DecodeCase& c, KvDtype dtype, uint64_t seed) {
  KvCache cache({int64_t(c.lengths.size()), c.num_kv_heads, c.max_seq_len(), c.head_dim}, dtype);
  return c.block_size > 0 ? to_paged(cache, c.block_size, seed) : cache;
}

std::string positions(const std::vector<int64_t>& t) {
  std::string text = "t = [";
  for (size_t b = 0; b < t.size(); ++b) text += (b ? ", " : "") + std::to_string(t[b]);
  return text + "]";
}

// The decode output [batch, num_heads, head_dim]: one row per (sequence, query head).
const AxisNames kDecodeOutputAxes{"sequence", "head", "channel"};

// Where a stored value of a cache sits, in the cache's own coordinates.
struct CacheElement {
  bool value = false;        // V, else K
  bool scale = false;        // a scale, else an element
  bool per_channel = false;  // a per-channel K scale: (sequence, KV head, channel), no token
  int64_t layer = 0;
  int64_t channel = -1;   // −1: a per-token scale
  int64_t sequence = -1;  // −1: a paged block no sequence maps
  int64_t kv_head = 0;
  int64_t token = 0;   // token of the sequence (an unmapped block: the offset in the block)
  int64_t block = -1;  // paged: the physical block
};

// Fills in (sequence, KV head, token) — and the block when paged — of row @p row of one layer.
void locate_row(const KvCache& cache, int64_t row, CacheElement& e) {
  const KvCacheShape& s = cache.shape();
  const int64_t G = s.num_kv_heads;
  if (!cache.paged()) {
    const int64_t T = s.max_seq_len;
    e.token = row % T;
    e.kv_head = (row / T) % G;
    e.sequence = row / T / G;
    return;
  }
  const int64_t block_size = cache.paging().block_size, per_seq = cache.max_blocks_per_seq();
  const int64_t offset = row % block_size;
  e.kv_head = (row / block_size) % G;
  e.block = row / block_size / G;
  e.token = offset;
  const std::vector<int32_t>& table = cache.block_table();
  for (int64_t b = 0; b < s.batch && e.sequence < 0; ++b)
    for (int64_t i = 0; i < per_seq; ++i)
      if (table[size_t(b * per_seq + i)] == e.block) {
        e.sequence = b;
        e.token = i * block_size + offset;
        break;
      }
}

// Element @p index of K's (or V's, when @p value) storage, all layers.
CacheElement locate_element(const KvCache& cache, bool value, int64_t index) {
  const int64_t d = cache.shape().head_dim, per_layer = cache.rows_per_layer() * d;
  CacheElement e;
  e.value = value;
  e.layer = index / per_layer;
  e.channel = index % d;
  locate_row(cache, (index % per_layer) / d, e);
  return e;
}

// Scale @p index of K's (or V's) scales, all layers.
CacheElement locate_scale(const KvCache& cache, bool value, int64_t index) {
  CacheElement e;
  e.value = value;
  e.scale = true;
  if (!value && cache.format().per_channel()) {
    const KvCacheShape& s = cache.shape();
    const int64_t per_layer = cache.k_scales_per_layer(), head = (index % per_layer) / s.head_dim;
    e.per_channel = true;
    e.layer = index / per_layer;
    e.channel = index % s.head_dim;
    e.sequence = head / s.num_kv_heads;
    e.kv_head = head % s.num_kv_heads;
    return e;
  }
  e.layer = index / cache.rows_per_layer();
  locate_row(cache, index % cache.rows_per_layer(), e);
  return e;
}

// "V (sequence 1, KV head 0, token 7, channel 17; slot 23: the token this append writes)"; the
// role only with @p lengths_before (the lengths before an append; @p refused: an append that
// must write nothing at all).
std::string describe(const KvCache& cache, const CacheElement& e, const std::vector<int32_t>& lengths_before,
                     bool refused = false) {
  std::ostringstream out;
  out << (e.value ? "V" : "K") << (e.scale ? " scale" : "");
  const std::string layer = cache.shape().num_layers > 1 ? ", layer " + std::to_string(e.layer) : "";
  const std::string channel = e.channel >= 0 ? ", channel " + std::to_string(e.channel) : "";
  if (e.per_channel) {
    out << " (sequence " << e.sequence << ", KV head " << e.kv_head << channel << layer << ")";
    return out.str();
  }
  if (e.sequence < 0) {
    out << " (block " << e.block << ", KV head " << e.kv_head << ", offset " << e.token << channel << layer
        << ": a block no sequence's block table maps)";
    return out.str();
  }
  out << " (sequence " << e.sequence << ", KV head " << e.kv_head << ", token " << e.token << channel << layer
      << "; slot " << cache.slot(e.sequence, e.token);
  if (cache.paged()) out << " = block " << e.block << " offset " << e.token % cache.paging().block_size;
  if (!lengths_before.empty()) {
    const int64_t length = lengths_before[size_t(e.sequence)];
    if (e.token < length)
      out << ": a token cached before the append, which must not change";
    else if (e.token == length)
      out << (refused ? ": the next free slot, which a refused append must not write"
                      : ": the token this append writes");
    else
      out << ": past the sequence's length, which must stay poisoned";
  }
  out << ")";
  return out.str();
}

// The stored value at @p p (@p bytes wide) as a number: fp32 and fp16 as floats, INT8 codes as
// integers, FP8 codes in hex.
std::string stored_value(const std::byte* p, size_t bytes, KvDtype dtype) {
  std::ostringstream out;
  if (bytes == 4) {
    float x;
    std::memcpy(&x, p, 4);
    out << std::setprecision(9) << x;  // enough digits to tell any two floats apart
  } else if (bytes == 2) {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    out << half_bits_to_float(bits);
  } else if (dtype == KvDtype::int8) {
    out << "code " << int(static_cast<int8_t>(*p));
  } else {
    out << "code 0x" << std::hex << int(static_cast<uint8_t>(*p)) << std::dec;
  }
  return out.str();
}

// Bytes per stored element of K (= of V).
size_t element_bytes(const KvCache& cache) {
  const int64_t elements = cache.shape().num_layers * cache.rows_per_layer() * cache.shape().head_dim;
  return elements > 0 ? cache.bytes_per_tensor() / size_t(elements) : 1;
}

// kv_cache_differences(), saying what @p want is ("the CPU append's"); @p refused: the roles of
// a refused append.
std::string differences(const KvCache& got, const KvCache& want, const std::vector<int32_t>& lengths_before,
                        const std::string& against, bool refused) {
  if (got.bytes_per_tensor() != want.bytes_per_tensor() || got.scale_bytes() != want.scale_bytes())
    return "the caches' storage sizes differ";
  int64_t differing = 0, compared = 0;
  std::ostringstream first;
  // One array of stored values: K or V elements, or K or V scales.
  const auto compare = [&](std::span<const std::byte> g, std::span<const std::byte> w, size_t width, bool value,
                           bool scale) {
    const int64_t count = int64_t(w.size() / width);
    compared += count;
    for (int64_t i = 0; i < count; ++i) {
      const std::byte* x = g.data() + size_t(i) * width;
      const std::byte* y = w.data() + size_t(i) * width;
      if (std::memcmp(x, y, width) == 0) continue;
      if (differing++ >= int64_t(kReportedMismatches)) continue;
      const CacheElement e = scale ? locate_scale(want, value, i) : locate_element(want, value, i);
      first << "\n  " << describe(want, e, lengths_before, refused) << ": got " << stored_value(x, width, want.dtype())
            << ", expected " << stored_value(y, width, want.dtype());
    }
  };
  const size_t e = element_bytes(want);
  compare(got.k_bytes(), want.k_bytes(), e, false, false);
  compare(got.v_bytes(), want.v_bytes(), e, true, false);
  if (want.scale_bytes() > 0) {
    const int64_t layers = want.shape().num_layers;
    const size_t k_width = want.k_scale_bytes().size() / size_t(layers * want.k_scales_per_layer());
    const size_t v_width = want.v_scale_bytes().size() / size_t(layers * want.rows_per_layer());
    compare(got.k_scale_bytes(), want.k_scale_bytes(), k_width, false, true);
    compare(got.v_scale_bytes(), want.v_scale_bytes(), v_width, true, true);
  }
  if (differing == 0) return "";
  std::ostringstream out;
  out << differing << " of " << compared << " stored values (K and V" << (want.scale_bytes() > 0 ? " and scales" : "")
      << ") differ from " << against << ":" << first.str();
  if (differing > int64_t(kReportedMismatches))
    out << "\n  … and " << differing - int64_t(kReportedMismatches) << " more";
  return out.str();
}

// Names 4-byte word @p word of cache_bytes(@p cache) (the schedule check compares those).
ElementName cache_word_name(const KvCache& cache, std::vector<int32_t> lengths_before) {
  return [&cache, lengths_before = std::move(lengths_before)](int64_t word) {
    const size_t e = element_bytes(cache), bytes = cache.bytes_per_tensor(), at = size_t(word) * 4;
    const bool value = at >= bytes;
    std::string text =
        describe(cache, locate_element(cache, value, int64_t((value ? at - bytes : at) / e)), lengths_before);
    if (e < 4) text += " and the " + std::to_string(4 / e - 1) + " element(s) after it in the same 4 bytes";
    return text;
  };
}

// The bytes of K then V (padded to whole floats), as a tensor the schedule check can compare.
Tensor<float> cache_bytes(const KvCache& cache) {
  const size_t bytes = cache.bytes_per_tensor();
  const int64_t words = int64_t((2 * bytes + 3) / 4);
  Tensor<float> out({words}, 0.0f);
  std::memcpy(reinterpret_cast<unsigned char*>(out.data()), cache.k_bytes().data(), bytes);
  std::memcpy(reinterpret_cast<unsigned char*>(out.data()) + bytes, cache.v_bytes().data(), bytes);
  return out;
}

}  // namespace

std::string kv_cache_differences(const KvCache& got, const KvCache& want, const std::vector<int32_t>& lengths_before) {
  return differences(got, want, lengths_before, "the expected cache", false);
}

::testing::AssertionResult decode_steps_match_prefill(const DecodeFn& decode, KvDtype dtype, const KvAppendFn& append,
                                                      const DecodeCase& c) {
  const int64_t shortest = *std::min_element(c.lengths.begin(), c.lengths.end());
  if (c.steps < 1 || c.steps > shortest)
    return ::testing::AssertionFailure() << c.name() << ": steps must be in [1, shortest length]";
  SeededRng rng;
  const Sequences s = random_sequences(rng, c);
  const int64_t batch = int64_t(c.lengths.size()), d = c.head_dim;
  // The oracle sees what the cache holds: K and V rounded to its element type (an fp16 cache:
  // to nearest even, as every append stores them); q stays fp32, as every decode reads it.
  const Precision precision = precision_of(dtype);
  Sequences cached = s;
  for (size_t b = 0; b < cached.k.size(); ++b) {
    cached.k[b] = round_to_precision(cached.k[b], precision);
    cached.v[b] = round_to_precision(cached.v[b], precision);
  }
  const Tolerance tolerance = attention_tolerance(precision, max_abs_logit(cached, c));

  // The chapter-02 oracle: a causal prefill over each whole sequence. Its row t depends on
  // tokens 0..t only, so it is the prefill over the first t+1 tokens.
  std::vector<Tensor<double>> prefill;
  for (int64_t b = 0; b < batch; ++b)
    prefill.push_back(attention_reference(cached.q[size_t(b)], cached.k[size_t(b)], cached.v[size_t(b)], true));

  KvCache cache = empty_cache(c, dtype, rng.seed());
  std::vector<int64_t> t(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    t[size_t(b)] = c.lengths[size_t(b)] - c.steps;  // the prompt: tokens before the first step
    if (t[size_t(b)] > 0)
      cache.prefill(b, first_tokens(s.k[size_t(b)], t[size_t(b)]), first_tokens(s.v[size_t(b)], t[size_t(b)]));
  }

  for (int64_t step = 0; step < c.steps; ++step) {
    const std::string where = c.name() + " (" + std::string(to_string(dtype)) + " cache), step " +
                              std::to_string(step) + " of " + std::to_string(c.steps) + ", " + positions(t);
    try {
      append(cache, token_of_each(s.k, t), token_of_each(s.v, t));
    } catch (const std::exception& error) {
      return ::testing::AssertionFailure()
             << where << ": append threw " << error.what() << "\n  " << seed_note(rng.seed());
    }
    for (int64_t b = 0; b < batch; ++b) {
      if (cache.length(b) != t[size_t(b)] + 1)
        return ::testing::AssertionFailure() << where << ": after the append lengths[" << b << "] = " << cache.length(b)
                                             << ", expected " << t[size_t(b)] + 1 << "\n  " << seed_note(rng.seed());
    }
    const Tensor<float> q = token_of_each(s.q, t);
    Tensor<float> out(q.shape());
    out.poison();
    try {
      decode(q, cache, out);
    } catch (const std::exception& error) {
      return ::testing::AssertionFailure()
             << where << ": decode threw " << error.what() << "\n  " << seed_note(rng.seed());
    }
    if (out.shape() != q.shape())
      return ::testing::AssertionFailure() << where << ": the output's shape changed to " << to_string(out.shape())
                                           << "\n  " << seed_note(rng.seed());
    Tensor<double> expected(q.shape());
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t T = c.lengths[size_t(b)];
      for (int64_t h = 0; h < c.num_heads; ++h)
        std::copy_n(prefill[size_t(b)].data() + (h * T + t[size_t(b)]) * d, d,
                    expected.data() + (b * c.num_heads + h) * d);
    }
    const Comparison comparison = compare_to_oracle(out, expected, tolerance, kDecodeOutputAxes);
    if (!comparison.ok) {
      return ::testing::AssertionFailure() << where << ": out [batch, num_heads, head_dim] is not row t of the causal "
                                           << "prefill over tokens 0..t:\n"
                                           << comparison.report()
             << (comparison.non_finite > 0
                     ? "\n  (out is filled with NaN before the call, and the cache past each sequence's length: a "
                       "NaN is an element never written, or one that read a slot at or past its sequence's length)"
                     : "")
             << "\n  " << seed_note(rng.seed());
    }
    for (int64_t& position : t) ++position;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult decode_same_under_schedules(const DecodeFn& decode, KvDtype dtype, const DecodeCase& c) {
  SeededRng rng;
  const Sequences s = random_sequences(rng, c);
  KvCache cache = empty_cache(c, dtype, rng.seed());
  std::vector<int64_t> last(c.lengths.size());
  for (size_t b = 0; b < c.lengths.size(); ++b) {
    cache.prefill(int64_t(b), s.k[b], s.v[b]);
    last[b] = c.lengths[b] - 1;
  }
  const Tensor<float> q = token_of_each(s.q, last);
  const ::testing::AssertionResult same =
      host_same_under_schedules([&](Tensor<float>& out) { decode(q, cache, out); }, q.shape(), nullptr,
                                default_schedules(), element_name(q.shape(), kDecodeOutputAxes));
  if (!same)
    return ::testing::AssertionFailure() << c.name() << " (" << to_string(dtype) << " cache): " << same.message()
                                         << "\n  " << seed_note(rng.seed());
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult append_matches_reference(const KvAppendFn& append, KvDtype dtype, const DecodeCase& c,
                                                    bool check_schedules) {
  SeededRng rng;
  const Sequences s = random_sequences(rng, c);
  KvCache before = empty_cache(c, dtype, rng.seed());
  std::vector<int64_t> t(c.lengths.size());
  for (size_t b = 0; b < c.lengths.size(); ++b) {
    t[b] = c.lengths[b] - 1;
    if (t[b] > 0) before.prefill(int64_t(b), first_tokens(s.k[b], t[b]), first_tokens(s.v[b], t[b]));
  }
  const Tensor<float> k_new = token_of_each(s.k, t), v_new = token_of_each(s.v, t);
  KvCache expected = before;
  expected.append(k_new, v_new);

  KvCache cache = before;
  const std::string name = c.name() + " (" + std::string(to_string(dtype)) + " cache)";
  try {
    append(cache, k_new, v_new);
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << name << ": append threw " << error.what() << "\n  "
                                         << seed_note(rng.seed());
  }
  if (cache.lengths() != expected.lengths()) {
    std::ostringstream lengths;
    for (size_t b = 0; b < c.lengths.size(); ++b)
      if (cache.lengths()[b] != expected.lengths()[b])
        lengths << " lengths[" << b << "] = " << cache.lengths()[b] << ", expected " << expected.lengths()[b] << ";";
    return ::testing::AssertionFailure() << name
                                         << ": the lengths after the append are not lengths + 1:" << lengths.str()
                                         << "\n  " << seed_note(rng.seed());
  }
  if (const std::string differ = differences(cache, expected, before.lengths(), "the CPU append's", false);
      !differ.empty())
    return ::testing::AssertionFailure() << name << ": " << differ << "\n  " << seed_note(rng.seed());
  if (check_schedules) {
    const Tensor<float> want = cache_bytes(expected);
    const ::testing::AssertionResult same = host_same_under_schedules(
        [&](Tensor<float>& out) {
          KvCache copy = before;
          append(copy, k_new, v_new);
          out = cache_bytes(copy);
        },
        want.shape(), nullptr, default_schedules(), cache_word_name(expected, before.lengths()));
    if (!same)
      return ::testing::AssertionFailure() << name << ": " << same.message() << "\n  " << seed_note(rng.seed());
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult append_rejects_full_sequence(const KvAppendFn& append, KvDtype dtype) {
  SeededRng rng;
  const std::string seed = "\n  " + seed_note(rng.seed());
  KvCache cache({3, 2, 4, 16}, dtype);
  cache.prefill(0, rng.normal_tensor({2, 2, 16}), rng.normal_tensor({2, 2, 16}));
  cache.prefill(1, rng.normal_tensor({2, 4, 16}), rng.normal_tensor({2, 4, 16}));  // full
  const KvCache before = cache;
  try {
    append(cache, rng.normal_tensor({3, 2, 16}), rng.normal_tensor({3, 2, 16}));
    return ::testing::AssertionFailure() << "appending to a full sequence did not throw" << seed;
  } catch (const std::invalid_argument& error) {
    const std::string message = error.what();
    if (message.find("lengths[1]") == std::string::npos || message.find("is full") == std::string::npos)
      return ::testing::AssertionFailure() << "the error does not name the full sequence: " << message << seed;
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << "threw something other than std::invalid_argument: " << error.what()
                                         << seed;
  }
  if (cache.lengths() != before.lengths())
    return ::testing::AssertionFailure() << "a failed append changed lengths" << seed;
  if (const std::string differ =
          differences(cache, before, before.lengths(), "the cache before the refused append", true);
      !differ.empty())
    return ::testing::AssertionFailure() << "a failed append changed the cache: " << differ << seed;
  return ::testing::AssertionSuccess();
}

}  // namespace inferlab::testing
