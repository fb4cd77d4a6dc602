#include "tests/support/fp8_check.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>
#include <vector>

#include "common/tolerance.h"
#include "tests/support/quantized_replay.h"
#include "tests/support/seeded.h"

namespace inferlab::testing {

namespace {

// The 127 non-negative finite E4M3 values, in code order (= ascending).
std::vector<double> non_negative_values() {
  std::vector<double> values;
  for (int code = 0; code <= 0x7E; ++code) values.push_back(e4m3_definition(uint8_t(code)));
  return values;
}

// The nearest E4M3 code to @p x by search: ties to the even code, saturating, NaN → 0x7F.
int nearest_code(float x, const std::vector<double>& values) {
  if (std::isnan(x)) return 0x7F;
  const int sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(double(x));
  if (a >= 448.0) return sign | 0x7E;
  int best = 0;
  for (int code = 1; code < int(values.size()); ++code) {
    const double d = std::fabs(a - values[size_t(code)]), d_best = std::fabs(a - values[size_t(best)]);
    if (d < d_best || (d == d_best && code % 2 == 0)) best = code;
  }
  return sign | best;
}

}  // namespace

double e4m3_definition(uint8_t code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = e == 0 ? (m / 8.0) * std::pow(2.0, -6) : (1.0 + m / 8.0) * std::pow(2.0, e - 7);
  return s ? -magnitude : magnitude;
}

::testing::AssertionResult fp8_decoder_matches_definition(const std::function<float(uint8_t)>& decode) {
  for (int code = 0; code < 256; ++code) {
    const double expected = e4m3_definition(uint8_t(code));
    const float got = decode(uint8_t(code));
    const bool same = std::isnan(expected) ? std::isnan(got)
                                           : double(got) == expected && std::signbit(got) == std::signbit(expected);
    if (!same)
      return ::testing::AssertionFailure() << "E4M3 code 0x" << std::hex << code << std::dec << " decodes to " << got
                                           << ", the format defines " << expected;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult fp8_encoder_matches_definition(const std::function<uint8_t(float)>& encode) {
  const std::vector<double> values = non_negative_values();
  std::vector<float> inputs = {0.0f, -0.0f, 1e-30f, -1e-30f, 0x1p-11f, 0x1p-10f, 3 * 0x1p-11f, 448.0f, 463.9f,
                               464.0f, 465.0f, 480.0f, 1e30f, -1e30f, std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::denorm_min()};
  for (size_t i = 0; i < values.size(); ++i) {
    const float x = float(values[i]);
    inputs.push_back(x);
    if (i + 1 < values.size()) {
      const float mid = float((values[i] + values[i + 1]) / 2);  // 5 significant bits: exact
      for (float y : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) inputs.push_back(y);
    }
  }
  SeededRng rng;
  for (int i = 0; i < 20000; ++i) inputs.push_back(std::ldexp(rng.uniform(1.0f, 2.0f), int(rng.integer(-14, 9))));
  for (const float x : std::vector<float>(inputs)) inputs.push_back(-x);
  for (const float x : inputs) {
    const int expected = nearest_code(x, values), got = encode(x);
    const bool nan_ok = std::isnan(x) && (got & 0x7F) == 0x7F;
    if (got != expected && !nan_ok)
      return ::testing::AssertionFailure()
             << "encode(" << x << ") = 0x" << std::hex << got << " (" << e4m3_definition(uint8_t(got))
             << "), expected 0x" << expected << std::dec << " (" << e4m3_definition(uint8_t(expected))
             << "): the nearest E4M3 value, ties to the even code, saturating at ±448\n  " << seed_note(rng.seed());
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult fp8_row_round_trip(const Fp8RowQuantizer& quantize) {
  SeededRng rng;
  for (int r = 0; r < 64; ++r) {
    const int64_t d = 1 + r * 3;
    std::vector<float> row(static_cast<size_t>(d));
    for (float& x : row) x = r == 0 ? 0.0f : rng.normal() * std::ldexp(1.0f, r % 9 - 4);
    if (r % 4 == 1) row[size_t(r) % row.size()] *= 50.0f;            // an outlier
    if (r % 4 == 2) row[0] = std::ldexp(row[0], -20);               // a tiny element (subnormal after scaling)
    std::vector<uint8_t> codes(row.size(), 0xAB);
    const float scale = quantize(row, codes);
    float max_abs = 0.0f;
    for (const float x : row) max_abs = std::max(max_abs, std::fabs(x));
    if (scale != defined_fp8_scale(max_abs))
      return ::testing::AssertionFailure()
             << "row " << r << ": scale " << scale << ", expected max|x|/448 = " << max_abs / 448.0f
             << " (the row's largest element maps to ±448)\n  " << seed_note(rng.seed());
    for (size_t c = 0; c < row.size(); ++c) {
      const double x_hat = double(scale) * e4m3_definition(codes[c]);
      if (!(std::fabs(x_hat - row[c]) <= fp8_e4m3_round_trip_bound(row[c], scale)))
        return ::testing::AssertionFailure()
               << "row " << r << ", element " << c << " = " << row[c] << " comes back as " << x_hat << " (code 0x"
               << std::hex << int(codes[c]) << std::dec << ", scale " << scale
               << "): more than half an E4M3 step away\n  " << seed_note(rng.seed());
      if (std::fabs(row[c]) == max_abs && max_abs > 0.0f && (codes[c] & 0x7F) != 0x7E)
        return ::testing::AssertionFailure() << "row " << r << ", element " << c << ": the row's largest element is "
                                             << "not stored as ±448 (code 0x" << std::hex << int(codes[c]) << std::dec
                                             << ")\n  " << seed_note(rng.seed());
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<Int8Case> fp8_decode_cases(int64_t max_length) {
  std::vector<Int8Case> cases;
  for (const Int8Case& c : int8_decode_cases(max_length))
    if (c.key_scaling == KeyScaling::per_token && c.scale_dtype == ScaleDtype::fp32) cases.push_back(c);
  // Off the 4-code vectors (head_dim 18) and past 128 (several vectors per lane: 200).
  cases.push_back({{9, 4}, 2, 4, 2, 18, KeyScaling::per_token, 1});
  cases.push_back({{5, 12}, 2, 4, 1, 200, KeyScaling::per_token, 3});
  return cases;
}

float defined_fp8_scale(float max_abs) {
  return max_abs / 448.0f;  // the row's largest element maps to ±448, E4M3's largest finite value
}

namespace {

// The defined scales (defined_fp8_scale) of every row of the unquantized data in @p exact (an
// fp32 cache), K's and V's, indexed [b][g][token].
struct DefinedFp8Scales {
  explicit DefinedFp8Scales(const KvCache& exact) : shape(exact.shape()) {
    const int64_t B = shape.batch, G = shape.num_kv_heads, T = shape.max_seq_len, d = shape.head_dim;
    k.assign(size_t(B * G * T), 0.0f);
    v.assign(size_t(B * G * T), 0.0f);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t j = 0; j < exact.length(b); ++j) {
          float k_max = 0.0f, v_max = 0.0f;
          for (int64_t c = 0; c < d; ++c) {
            k_max = std::max(k_max, std::fabs(exact.key(b, g, j, c)));
            v_max = std::max(v_max, std::fabs(exact.value(b, g, j, c)));
          }
          k[size_t((b * G + g) * T + j)] = defined_fp8_scale(k_max);
          v[size_t((b * G + g) * T + j)] = defined_fp8_scale(v_max);
        }
  }
  float key(int64_t b, int64_t g, int64_t j) const { return k[size_t((b * shape.num_kv_heads + g) * shape.max_seq_len + j)]; }
  float value(int64_t b, int64_t g, int64_t j) const {
    return v[size_t((b * shape.num_kv_heads + g) * shape.max_seq_len + j)];
  }
  KvCacheShape shape;
  std::vector<float> k, v;
};

// (e) of the checks: every cached element of @p fp8_cache within fp8_e4m3_round_trip_bound of its
// input in @p exact at its row's defined scale; the failure names the element and both scales.
::testing::AssertionResult elements_within_defined_bound(const KvCache& fp8_cache, const KvCache& exact,
                                                         const DefinedFp8Scales& defined, const std::string& name,
                                                         uint64_t seed) {
  const KvCacheShape& s = exact.shape();
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t g = 0; g < s.num_kv_heads; ++g)
      for (int64_t j = 0; j < exact.length(b); ++j)
        for (int64_t ch = 0; ch < s.head_dim; ++ch)
          for (int kv = 0; kv < 2; ++kv) {
            const float x = kv == 0 ? exact.key(b, g, j, ch) : exact.value(b, g, j, ch);
            const float x_hat = kv == 0 ? fp8_cache.key(b, g, j, ch) : fp8_cache.value(b, g, j, ch);
            const float scale = kv == 0 ? defined.key(b, g, j) : defined.value(b, g, j);
            const double ceiling = fp8_e4m3_round_trip_bound(x, scale);
            if (!(std::fabs(double(x_hat) - x) <= ceiling))
              return ::testing::AssertionFailure()
                     << name << ": " << cache_element(kv == 1, b, g, j, ch) << " = " << x << " is cached as " << x_hat
                     << ", off by " << std::fabs(double(x_hat) - x) << " > " << ceiling
                     << ", half an E4M3 step at the defined scale max|row|/448 = " << scale
                     << " (the cache stored the scale "
                     << (kv == 0 ? fp8_cache.key_scale(b, g, j) : fp8_cache.value_scale(b, g, j)) << ")\n  "
                     << seed_note(seed);
          }
  return ::testing::AssertionSuccess();
}

}  // namespace

::testing::AssertionResult fp8_decode_within_budget(const DecodeFn& decode, const Int8Case& c, Int8Errors* errors) {
  const KvAppendFn cpu_append = [](KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
    cache.append(k_new, v_new);
  };
  return fp8_decode_within_budget(decode, cpu_append, c, errors);
}

::testing::AssertionResult fp8_decode_within_budget(const DecodeFn& decode, const KvAppendFn& append,
                                                    const Int8Case& c, Int8Errors* errors,
                                                    std::optional<uint64_t> seed) {
  SeededRng rng(seed.value_or(Rng::fresh_seed()));
  const int64_t B = int64_t(c.lengths.size()), G = c.num_kv_heads, d = c.head_dim, H = c.num_heads;
  const ReplayKv data(rng, c);
  KvCache fp8_cache(data.cache_shape(), KvFormat::fp8());
  KvCache fp32_cache(data.cache_shape(), KvDtype::fp32);
  data.prefill(fp8_cache, fp32_cache);
  for (int64_t step = 1; step <= std::max<int64_t>(c.steps, 1); ++step) {
    if (c.steps > 0) {  // append token length − steps + step − 1 of every sequence
      const auto [k_new, v_new] = data.token(step);
      append(fp8_cache, k_new, v_new);
      fp32_cache.append(k_new, v_new);
    }
    const DefinedFp8Scales defined(fp32_cache);
    const ::testing::AssertionResult stored = elements_within_defined_bound(
        fp8_cache, fp32_cache, defined, c.name() + " step " + std::to_string(step), rng.seed());
    if (!stored) return stored;
    const Tensor<float> q = replay_queries(rng.seed(), c, std::max<int64_t>(c.steps, 1) - step);
    Tensor<float> out(q.shape());
    out.poison();
    decode(q, fp8_cache, out);
    const Tensor<double> exact = decode_reference(q, fp32_cache);
    const Tensor<double> dequantized = decode_reference(q, fp8_cache.dequantized());

    Int8Errors e;
    double diff2 = 0.0, ref2 = 0.0;
    StepFailures failures;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t L = fp8_cache.length(b);
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / (H / G);
        const float* q_row = q.data() + (b * H + h) * d;
        double E = 0.0, max_v = 0.0, max_verr = 0.0, max_logit = 0.0;
        std::vector<double> s(size_t(L), 0.0), s_hat(size_t(L), 0.0);
        for (int64_t j = 0; j < L; ++j) {
          double e_j = 0.0;
          for (int64_t ch = 0; ch < d; ++ch) {
            const double k = fp32_cache.key(b, g, j, ch), v = fp32_cache.value(b, g, j, ch);
            e_j += std::fabs(double(q_row[ch])) * fp8_e4m3_round_trip_bound(k, defined.key(b, g, j));
            s[size_t(j)] += double(q_row[ch]) * k / std::sqrt(double(d));
            s_hat[size_t(j)] += double(q_row[ch]) * fp8_cache.key(b, g, j, ch) / std::sqrt(double(d));
            max_v = std::max(max_v, std::fabs(v));
            max_verr = std::max(max_verr, fp8_e4m3_round_trip_bound(v, defined.value(b, g, j)));
          }
          E = std::max(E, e_j / std::sqrt(double(d)));
          max_logit = std::max(max_logit, std::fabs(s[size_t(j)]));
        }
        const double kl = softmax_kl(s, s_hat);
        e.max_kl = std::max(e.max_kl, kl);
        const double bound = fp8_kv_output_bound(E, max_v, max_verr, max_logit);
        HeadError head{b, h, 0.0, bound};
        const double exact_tol = attention_tolerance(Precision::fp32, max_logit).max_abs * std::max(1.0, max_v);
        for (int64_t ch = 0; ch < d; ++ch) {
          const int64_t i = (b * H + h) * d + ch;
          const double o = out[i];
          if (!std::isfinite(o)) {  // counted and named first; the errors are over the finite outputs
            failures.non_finite(b, h, ch, o);
            continue;
          }
          const double err = std::fabs(o - exact[i]);
          head.max_abs = std::max(head.max_abs, err);
          e.max_abs = std::max(e.max_abs, err);
          diff2 += err * err;
          ref2 += exact[i] * exact[i];
          std::ostringstream line;
          line << std::setprecision(4) << output_element(b, h, ch) << ": out = " << o;
          if (std::fabs(o - dequantized[i]) > exact_tol) {
            line << " differs from the float64 decode of its own dequantized cache (" << dequantized[i] << ") by "
                 << std::fabs(o - dequantized[i]) << " > " << exact_tol;
            failures.kernel_error(line.str());
          } else if (err > bound) {
            line << ", |err| = " << err << " > bound " << bound << " (E = " << E << ", max|v| = " << max_v
                 << ", max value error = " << max_verr << ")";
            failures.outside_bound(line.str());
          }
        }
        e.heads.push_back(head);
      }
    }
    e.rel_frobenius = std::sqrt(diff2 / std::max(ref2, 1e-300));
    if (errors != nullptr) *errors = e;
    if (failures.any()) {
      std::ostringstream stats;
      stats << "relative error " << e.rel_frobenius << ", max |err| " << e.max_abs << ", max KL " << e.max_kl;
      return ::testing::AssertionFailure() << failures.report(c.name() + " step " + std::to_string(step), out.size(),
                                                              stats.str(), "the derived FP8 bound", rng.seed());
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult fp8_cache_scales_match_definition(const KvAppendFn& append, int64_t tokens) {
  SeededRng rng;
  const int64_t B = 3, G = 2, d = 20;
  const std::vector<int64_t> prompts{3, 0, 6};
  const KvCacheShape shape{B, G, 6 + tokens + 1, d};
  KvCache cache(shape, KvFormat::fp8()), exact(shape, KvDtype::fp32);
  // Rows of N(0, σ) with σ from 2^-20 to 2^4, an outlier channel, and an all-zero row.
  int64_t row = 0;
  const auto fill = [&](Tensor<float>& x) {
    for (int64_t r = 0; r < x.size() / d; ++r, ++row) {
      const float sigma = std::ldexp(1.0f, int(row % 25) - 20);
      for (int64_t ch = 0; ch < d; ++ch) x[r * d + ch] = row % 11 == 5 ? 0.0f : sigma * rng.normal();
      if (row % 3 == 1) x[r * d + row % d] *= 40.0f;
    }
  };
  for (int64_t b = 0; b < B; ++b) {
    Tensor<float> k({G, prompts[size_t(b)], d}), v({G, prompts[size_t(b)], d});
    fill(k);
    fill(v);
    cache.prefill(b, k, v);
    exact.prefill(b, k, v);
  }
  for (int64_t t = 0; t <= tokens; ++t) {
    if (t > 0) {
      Tensor<float> k_new({B, G, d}), v_new({B, G, d});
      fill(k_new);
      fill(v_new);
      append(cache, k_new, v_new);
      exact.append(k_new, v_new);
    }
    const DefinedFp8Scales defined(exact);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t j = 0; j < cache.length(b); ++j)
          for (int kv = 0; kv < 2; ++kv) {
            const float stored = kv == 0 ? cache.key_scale(b, g, j) : cache.value_scale(b, g, j);
            const float wanted = kv == 0 ? defined.key(b, g, j) : defined.value(b, g, j);
            if (stored != wanted)
              return ::testing::AssertionFailure()
                     << "sequence " << b << ", KV head " << g << ", token " << j << " ("
                     << (j < prompts[size_t(b)] ? "prefilled" : "appended") << "): " << (kv == 0 ? "K" : "V")
                     << "'s scale is " << stored << ", the definition max|row|/448 gives " << wanted << "\n  "
                     << seed_note(rng.seed());
          }
    const ::testing::AssertionResult elements =
        elements_within_defined_bound(cache, exact, defined, "after " + std::to_string(t) + " appends", rng.seed());
    if (!elements) return elements;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace inferlab::testing
