#include "tests/support/fp8_check.h"

#include <algorithm>
#include <cmath>
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
             << "encode(" << x << ") = 0x" << std::hex << got << " (" << e4m3_definition(uint8_t(got)) << "), expected 0x"
             << expected << std::dec << " (" << e4m3_definition(uint8_t(expected))
             << "): the nearest E4M3 value, ties to the even code, saturating at ±448";
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
    if (scale != max_abs / 448.0f)
      return ::testing::AssertionFailure() << "row " << r << ": scale " << scale << ", expected max|x|/448 = "
                                           << max_abs / 448.0f << " (the row's largest element maps to ±448)";
    for (size_t c = 0; c < row.size(); ++c) {
      const double x_hat = double(scale) * e4m3_definition(codes[c]);
      if (!(std::fabs(x_hat - row[c]) <= fp8_e4m3_round_trip_bound(row[c], scale)))
        return ::testing::AssertionFailure() << "row " << r << "[" << c << "] = " << row[c] << " comes back as "
                                             << x_hat << " (code 0x" << std::hex << int(codes[c]) << std::dec
                                             << ", scale " << scale << "): more than half an E4M3 step away";
      if (std::fabs(row[c]) == max_abs && max_abs > 0.0f && (codes[c] & 0x7F) != 0x7E)
        return ::testing::AssertionFailure() << "row " << r << ": its largest element is not stored as ±448";
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

::testing::AssertionResult fp8_decode_within_budget(const DecodeFn& decode, const Int8Case& c, Int8Errors* errors) {
  SeededRng rng;
  const int64_t B = int64_t(c.lengths.size()), G = c.num_kv_heads, d = c.head_dim, H = c.num_heads;
  const ReplayKv data(rng, c);
  KvCache fp8_cache(data.cache_shape(), KvFormat::fp8());
  KvCache fp32_cache(data.cache_shape(), KvDtype::fp32);
  data.prefill(fp8_cache, fp32_cache);
  for (int64_t step = 1; step <= std::max<int64_t>(c.steps, 1); ++step) {
    if (c.steps > 0) {  // append token length − steps + step − 1 of every sequence
      const auto [k_new, v_new] = data.token(step);
      fp8_cache.append(k_new, v_new);
      fp32_cache.append(k_new, v_new);
    }
    const Tensor<float> q = rng.normal_tensor({B, H, d});
    Tensor<float> out(q.shape());
    out.poison();
    decode(q, fp8_cache, out);
    const Tensor<double> exact = decode_reference(q, fp32_cache);
    const Tensor<double> dequantized = decode_reference(q, fp8_cache.dequantized());

    Int8Errors e;
    e.bound = std::numeric_limits<double>::infinity();
    double diff2 = 0.0, ref2 = 0.0;
    std::ostringstream where;
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
            e_j += std::fabs(double(q_row[ch])) * fp8_e4m3_round_trip_bound(k, fp8_cache.key_scale(b, g, j));
            s[size_t(j)] += double(q_row[ch]) * k / std::sqrt(double(d));
            s_hat[size_t(j)] += double(q_row[ch]) * fp8_cache.key(b, g, j, ch) / std::sqrt(double(d));
            max_v = std::max(max_v, std::fabs(v));
            max_verr = std::max(max_verr, fp8_e4m3_round_trip_bound(v, fp8_cache.value_scale(b, g, j)));
          }
          E = std::max(E, e_j / std::sqrt(double(d)));
          max_logit = std::max(max_logit, std::fabs(s[size_t(j)]));
        }
        const double kl = softmax_kl(s, s_hat);
        e.max_kl = std::max(e.max_kl, kl);
        const double bound = fp8_kv_output_bound(E, max_v, max_verr, max_logit);
        e.bound = std::min(e.bound, bound);
        const double exact_tol = attention_tolerance(Precision::fp32, max_logit).max_abs * std::max(1.0, max_v);
        for (int64_t ch = 0; ch < d; ++ch) {
          const int64_t i = (b * H + h) * d + ch;
          const double o = out[i];
          if (!std::isfinite(o))
            return ::testing::AssertionFailure() << c.name() << ": out[" << b << "][" << h << "][" << ch << "] = " << o
                                                 << " (NaN/Inf)";
          if (std::fabs(o - dequantized[i]) > exact_tol)
            return ::testing::AssertionFailure()
                   << c.name() << ": out[" << b << "][" << h << "][" << ch << "] = " << o
                   << " differs from the float64 decode of its own dequantized cache (" << dequantized[i] << ") by "
                   << std::fabs(o - dequantized[i]) << " > " << exact_tol
                   << ": not a quantization error but a kernel error (conversion, scale or row?)";
          const double err = std::fabs(o - exact[i]);
          e.max_abs = std::max(e.max_abs, err);
          diff2 += err * err;
          ref2 += exact[i] * exact[i];
          if (err > bound)
            where << " out[" << b << "][" << h << "][" << ch << "]: |err| = " << err << " > bound " << bound
                  << " (E = " << E << ", max|v| = " << max_v << ", max value error = " << max_verr << ");";
        }
      }
    }
    e.rel_frobenius = std::sqrt(diff2 / std::max(ref2, 1e-300));
    if (errors != nullptr) *errors = e;
    if (!where.str().empty())
      return ::testing::AssertionFailure() << c.name() << " step " << step << ": relative error " << e.rel_frobenius
                                           << ", outside the derived FP8 bound:" << where.str().substr(0, 2000);
  }
  return ::testing::AssertionSuccess();
}

}  // namespace inferlab::testing
