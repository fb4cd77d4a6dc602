#include "tests/support/int8_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "common/half.h"
#include "common/tolerance.h"
#include "tests/support/quantized_replay.h"
#include "tests/support/seeded.h"

namespace inferlab::testing {

std::vector<QuantizedVersionCase> quantized_version_cases(KvDtype dtype, Backend backend,
                                                          const std::vector<Int8Case>& shapes) {
  std::vector<QuantizedVersionCase> cases;
  for (const DecodeVersion& version : decode_versions())
    if (version.backend == backend && version.input == dtype)
      for (const Int8Case& shape : shapes) cases.push_back({&version, shape});
  return cases;
}

void PrintTo(const QuantizedVersionCase& c, std::ostream* out) {
  *out << c.version->name << " (" << to_string(c.version->backend) << ") " << c.shape.name();
}

std::string quantized_version_case_name(const ::testing::TestParamInfo<QuantizedVersionCase>& info) {
  std::string name = info.param.version->name + "_" + info.param.shape.name();
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

double Int8Errors::worst_fraction_of_bound() const {
  double worst = 0.0;
  for (const HeadError& head : heads) worst = std::max(worst, head.bound > 0.0 ? head.max_abs / head.bound : INFINITY);
  return worst;
}

std::string Int8Errors::per_head() const {
  std::ostringstream out;
  out << std::setprecision(3);
  for (size_t i = 0; i < heads.size(); ++i)
    out << (i ? ", " : "") << "b" << heads[i].sequence << " h" << heads[i].head << " " << heads[i].max_abs
        << (heads[i].max_abs <= heads[i].bound ? " ≤ " : " > ") << heads[i].bound;
  return out.str();
}

float defined_int8_step(float max_abs, ScaleDtype scale_dtype) {
  const float step = max_abs / 127.0f;  // the definition, in fp32 (ch04.h: max_abs / 127.0f)
  if (scale_dtype == ScaleDtype::fp32) return step;
  // fp16 scales: the smallest fp16 ≥ the step (so max|x|/Δ ≤ 127 still holds), at most 65504.
  if (!(step < 65504.0f)) return 65504.0f;
  uint16_t bits = float_to_half_bits(step);
  if (half_bits_to_float(bits) < step) ++bits;  // positive: the next bit pattern is the next fp16 up
  return half_bits_to_float(bits);
}

namespace {

// The defined steps (defined_int8_step) of the unquantized data in @p exact (an fp32 cache) for
// an INT8 cache of @p format whose sequence b was prefilled with prompt[b] tokens and then
// appended to: V and per-token K per row, per-channel K per channel over the prompt's tokens
// (over token 0 when the prompt is empty: the first appended token calibrates).
class DefinedSteps {
 public:
  DefinedSteps(const KvCache& exact, KvFormat format, const std::vector<int64_t>& prompt)
      : format_(format), shape_(exact.shape()) {
    const int64_t B = shape_.batch, G = shape_.num_kv_heads, T = shape_.max_seq_len, d = shape_.head_dim;
    k_.assign(size_t(B * G * (format.per_channel() ? d : T)), 0.0f);
    v_.assign(size_t(B * G * T), 0.0f);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t g = 0; g < G; ++g) {
        const int64_t L = exact.length(b);
        for (int64_t j = 0; j < L; ++j) {
          float k_max = 0.0f, v_max = 0.0f;
          for (int64_t c = 0; c < d; ++c) {
            k_max = std::max(k_max, std::fabs(exact.key(b, g, j, c)));
            v_max = std::max(v_max, std::fabs(exact.value(b, g, j, c)));
          }
          v_[size_t((b * G + g) * T + j)] = defined_int8_step(v_max, format.scale_dtype);
          if (!format.per_channel()) k_[size_t((b * G + g) * T + j)] = defined_int8_step(k_max, format.scale_dtype);
        }
        if (!format.per_channel() || L == 0) continue;
        const int64_t calibration = std::max<int64_t>(prompt[size_t(b)], 1);
        for (int64_t c = 0; c < d; ++c) {
          float max_abs = 0.0f;
          for (int64_t j = 0; j < calibration; ++j) max_abs = std::max(max_abs, std::fabs(exact.key(b, g, j, c)));
          k_[size_t((b * G + g) * d + c)] = defined_int8_step(max_abs, format.scale_dtype);
        }
      }
  }
  // The step of K element (b, g, j, c) and of V row (b, g, j).
  float key(int64_t b, int64_t g, int64_t j, int64_t c) const {
    const int64_t G = shape_.num_kv_heads;
    return format_.per_channel() ? k_[size_t((b * G + g) * shape_.head_dim + c)]
                                 : k_[size_t((b * G + g) * shape_.max_seq_len + j)];
  }
  float value(int64_t b, int64_t g, int64_t j) const {
    return v_[size_t((b * shape_.num_kv_heads + g) * shape_.max_seq_len + j)];
  }

 private:
  KvFormat format_;
  KvCacheShape shape_;
  std::vector<float> k_, v_;
};

// A value x stored with step Δ has to be clamped: |round(x/Δ)| > 127 (Δ = 0: any x ≠ 0).
bool clamped(float x, float step) {
  return step > 0.0f ? std::fabs(std::round(x / step)) > 127.0f : x != 0.0f;
}

}  // namespace

std::string Int8Case::name() const {
  std::ostringstream out;
  out << "b" << lengths.size() << "_L";
  for (size_t i = 0; i < lengths.size(); ++i) out << (i ? "_" : "") << lengths[i];
  out << "_steps" << steps << "_h" << num_heads << "_kv" << num_kv_heads << "_d" << head_dim << "_"
      << to_string(key_scaling) << "_out" << outlier_channels;
  if (scale_dtype == ScaleDtype::fp16) out << "_fp16scales";
  return out.str();
}

std::vector<Int8Case> int8_decode_cases(int64_t max_length) {
  std::vector<Int8Case> all;
  for (KeyScaling scaling : {KeyScaling::per_token, KeyScaling::per_channel}) {
    // The last `steps` tokens are appended one at a time after the prefill: per-channel K
    // scales are calibrated on the prompt (on the first token when the prompt is empty, as for
    // L = 1), so later tokens of the outlier channels may exceed them and saturate.
    all.push_back({{1}, 1, 1, 1, 64, scaling, 0});
    all.push_back({{2, 31, 9}, 2, 4, 4, 96, scaling, 3});
    all.push_back({{33, 5}, 3, 8, 2, 80, scaling, 4});
    all.push_back({{129, 17}, 2, 8, 1, 128, scaling, 2});
    all.push_back({{57}, 4, 2, 2, 128, scaling, 4, 20.0f});
    all.push_back({{9, 4}, 2, 4, 2, 36, scaling, 1});
    all.push_back({{7, 12, 3}, 2, 8, 8, 20, scaling, 0});
    // fp16 scales (rounded up): a GQA case with outliers and one off the vector path.
    all.push_back({{41, 6}, 2, 8, 2, 128, scaling, 3, 10.0f, ScaleDtype::fp16});
    all.push_back({{13}, 2, 2, 1, 36, scaling, 1, 10.0f, ScaleDtype::fp16});
  }
  // The prefilled state decoded without any append (steps = 0).
  all.push_back({{21, 8}, 0, 4, 2, 64, KeyScaling::per_channel, 2});
  std::vector<Int8Case> kept;
  for (const Int8Case& c : all)
    if (*std::max_element(c.lengths.begin(), c.lengths.end()) <= max_length) kept.push_back(c);
  return kept;
}

::testing::AssertionResult int8_decode_within_budget(const DecodeFn& decode, const KvAppendFn& append,
                                                     const Int8Case& c, Int8Errors* errors,
                                                     std::optional<uint64_t> seed) {
  SeededRng rng(seed.value_or(Rng::fresh_seed()));
  const int64_t B = int64_t(c.lengths.size()), G = c.num_kv_heads, d = c.head_dim, H = c.num_heads;
  const ReplayKv data(rng, c);
  const KvFormat format = KvFormat::int8(c.key_scaling, c.scale_dtype);
  KvCache int8_cache(data.cache_shape(), format);
  KvCache fp32_cache(data.cache_shape(), KvDtype::fp32);
  data.prefill(int8_cache, fp32_cache);
  std::vector<int64_t> prompt;
  for (const int64_t L : c.lengths) prompt.push_back(L - c.steps);
  const DecodeVersion& ch03 = find_decode_version("cpu/decode_simd", Backend::cpu, KvDtype::fp32);
  for (int64_t step = 0; step <= c.steps; ++step) {
    if (step > 0) {  // append token (length − steps + step − 1) of every sequence
      const auto [k_new, v_new] = data.token(step);
      append(int8_cache, k_new, v_new);
      fp32_cache.append(k_new, v_new);
    }
    if (step == 0 && c.steps > 0) continue;  // decode follows each append (steps = 0: the prefilled state)
    const DefinedSteps defined(fp32_cache, format, prompt);

    // (e) every cached element within half its *defined* step of its input (or its clamped
    // excess), and (d) every clamp counted — both from the inputs and the defined steps alone.
    int64_t expected_saturated = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t j = 0; j < int8_cache.length(b); ++j)
          for (int64_t ch = 0; ch < d; ++ch)
            for (int kv = 0; kv < 2; ++kv) {
              const float x = kv == 0 ? fp32_cache.key(b, g, j, ch) : fp32_cache.value(b, g, j, ch);
              const float x_hat = kv == 0 ? int8_cache.key(b, g, j, ch) : int8_cache.value(b, g, j, ch);
              const float step_def = kv == 0 ? defined.key(b, g, j, ch) : defined.value(b, g, j);
              expected_saturated += clamped(x, step_def);
              const double ceiling = int8_element_error_bound(x, step_def);
              if (!(std::fabs(double(x_hat) - x) <= ceiling))
                return ::testing::AssertionFailure()
                       << c.name() << " step " << step << ": " << cache_element(kv == 1, b, g, j, ch) << " = " << x
                       << " is cached as " << x_hat << ", off by " << std::fabs(double(x_hat) - x) << " > " << ceiling
                       << " = half the defined step max|x|/127 = " << step_def
                       << " of its group (the cache stored the step "
                       << (kv == 0 ? int8_cache.key_scale(b, g, j, ch) : int8_cache.value_scale(b, g, j))
                       << "): the quantization step is not max|x|/127\n  " << seed_note(rng.seed());
            }
    if (int8_cache.saturated_count() != expected_saturated)
      return ::testing::AssertionFailure()
             << c.name() << " step " << step << ": saturated_count() = " << int8_cache.saturated_count() << ", but "
             << expected_saturated << " values lie outside ±127.5 defined steps of their group\n  "
             << seed_note(rng.seed());

    const Tensor<float> q = replay_queries(rng.seed(), c, c.steps - step);
    Tensor<float> out(q.shape()), out_ch03(q.shape());
    std::fill(out.data(), out.data() + out.size(), std::numeric_limits<float>::quiet_NaN());
    decode(q, int8_cache, out);
    ch03.run(q, fp32_cache, out_ch03);
    const Tensor<double> exact = decode_reference(q, fp32_cache);
    const Tensor<double> dequantized = decode_reference(q, int8_cache);

    Int8Errors e;
    e.saturated = expected_saturated;
    double diff2 = 0.0, ref2 = 0.0, max_logit = 0.0;
    StepFailures failures;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t L = int8_cache.length(b);
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / (H / G);
        const float* q_row = q.data() + (b * H + h) * d;
        // The derived bound for this (sequence, head): E from the K elements' quantization errors
        // at the defined steps (half a step, or a saturated value's clamped excess), max|v|, and
        // the largest V error at the defined steps.
        double E = 0.0, max_v = 0.0, max_v_error = 0.0;
        std::vector<double> s(static_cast<size_t>(L)), s_hat(static_cast<size_t>(L));
        for (int64_t j = 0; j < L; ++j) {
          double e_j = 0.0, dot = 0.0, dot_hat = 0.0;
          for (int64_t ch = 0; ch < d; ++ch) {
            const double k_x = fp32_cache.key(b, g, j, ch), v_x = fp32_cache.value(b, g, j, ch);
            e_j += std::fabs(double(q_row[ch])) * int8_element_error_bound(k_x, defined.key(b, g, j, ch));
            dot += double(q_row[ch]) * k_x;
            dot_hat += double(q_row[ch]) * int8_cache.key(b, g, j, ch);
            max_v = std::max(max_v, std::fabs(v_x));
            max_v_error = std::max(max_v_error, int8_element_error_bound(v_x, defined.value(b, g, j)));
          }
          E = std::max(E, e_j / std::sqrt(double(d)));
          s[size_t(j)] = dot / std::sqrt(double(d));
          s_hat[size_t(j)] = dot_hat / std::sqrt(double(d));
          max_logit = std::max(max_logit, std::fabs(s[size_t(j)]));
        }
        const double kl = softmax_kl(s, s_hat);  // KL(p ‖ p̂) of the softmax weights
        e.max_kl = std::max(e.max_kl, kl);
        // int8_kv_output_bound takes the largest V step and adds half of it: pass twice the error.
        const double bound = int8_kv_output_bound(E, max_v, 2.0 * max_v_error, max_logit);
        HeadError head{b, h, 0.0, bound};
        const Tolerance exact_tol = attention_tolerance(Precision::fp32, max_logit);
        for (int64_t ch = 0; ch < d; ++ch) {
          const int64_t i = (b * H + h) * d + ch;
          const double o = out[i];
          if (!std::isfinite(o)) {  // counted and named first; the errors are over the finite outputs
            failures.non_finite(b, h, ch, o);
            continue;
          }
          const double own = std::fabs(o - dequantized[i]);
          const double err = std::fabs(o - exact[i]), err_ch03 = std::fabs(o - double(out_ch03[i]));
          head.max_abs = std::max(head.max_abs, err);
          e.max_abs = std::max(e.max_abs, err);
          diff2 += err * err;
          ref2 += exact[i] * exact[i];
          std::ostringstream line;
          line << std::setprecision(4) << output_element(b, h, ch) << ": out = " << o;
          if (own > exact_tol.max_abs * std::max(1.0, max_v)) {
            line << " differs from the float64 decode of its own dequantized cache (" << dequantized[i] << ") by "
                 << own;
            failures.kernel_error(line.str());
          } else if (err > bound || err_ch03 > bound + exact_tol.max_abs * std::max(1.0, max_v)) {
            line << ", |err| = " << err << " (vs ch03 " << err_ch03 << ") > bound " << bound << " (E = " << E
                 << ", max|v| = " << max_v << ", max V error = " << max_v_error << ", KL = " << kl << ")";
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
      stats << "relative error " << e.rel_frobenius << ", max |err| " << e.max_abs << ", max KL " << e.max_kl << ", "
            << e.saturated << " saturated values";
      return ::testing::AssertionFailure() << failures.report(c.name() + " step " + std::to_string(step), out.size(),
                                                              stats.str(), "the derived INT8 bound", rng.seed());
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult quantizer_saturates(const std::function<int8_t(float x, float scale)>& quantize) {
  const float scale = 0.1f;
  for (float x : {0.0f, 0.04f, -0.06f, 3.3f, 12.7f, 12.74f, 12.76f, 12.8f, 13.0f, 50.0f, 1e30f, -12.76f, -12.8f, -50.0f,
                  -1e30f}) {
    const float r = std::round(x / scale);
    const int expected = int(std::clamp(r, -127.0f, 127.0f));
    const int got = quantize(x, scale);
    if (got != expected)
      return ::testing::AssertionFailure() << "quantize(" << x << ", scale " << scale << ") = " << got << ", expected "
                                           << expected << " (round, then clamp to [−127, 127]: never wrap)";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult round_trip_within_half_step(const KvAppendFn& append, KeyScaling key_scaling,
                                                       int64_t tokens, ScaleDtype scale_dtype) {
  SeededRng rng;
  const Int8Case c{{tokens, tokens}, tokens, 4, 2, 80, key_scaling, 3, 10.0f, scale_dtype};
  const int64_t B = 2, G = 2, d = c.head_dim;
  const KvFormat format = KvFormat::int8(key_scaling, scale_dtype);
  KvCache cache({B, G, tokens + 1, d}, format);
  KvCache exact({B, G, tokens + 1, d}, KvDtype::fp32);  // the inputs, for the defined steps
  for (int64_t t = 0; t < tokens; ++t) {
    Tensor<float> k_new({B, G, d}), v_new({B, G, d});
    fill_outlier_kv(rng, c, t % 2, k_new.data(), v_new.data(), B * G);  // outliers move: per-channel must saturate
    append(cache, k_new, v_new);
    exact.append(k_new, v_new);
    const DefinedSteps defined(exact, format, {0, 0});
    for (int64_t b = 0; b < B; ++b) {
      if (cache.length(b) != t + 1)
        return ::testing::AssertionFailure() << "lengths[" << b << "] = " << cache.length(b) << " after " << t + 1
                                             << " appends\n  " << seed_note(rng.seed());
      for (int64_t g = 0; g < G; ++g)
        for (int64_t ch = 0; ch < d; ++ch) {
          const size_t i = size_t((b * G + g) * d + ch);
          const int8_t byte = cache.k_int8()[size_t(cache.shape().offset(b, g, t) + ch)];
          if (byte == -128)
            return ::testing::AssertionFailure() << cache_element(false, b, g, t, ch) << " is stored as the code −128 "
                                                 << "(codes lie in [−127, 127])\n  " << seed_note(rng.seed());
          for (int kv = 0; kv < 2; ++kv) {
            const double x = kv == 0 ? k_new[int64_t(i)] : v_new[int64_t(i)];
            const double step = kv == 0 ? defined.key(b, g, t, ch) : defined.value(b, g, t);  // from the inputs
            const double stored = kv == 0 ? cache.key_scale(b, g, t, ch) : cache.value_scale(b, g, t);
            const double x_hat = kv == 0 ? cache.key(b, g, t, ch) : cache.value(b, g, t, ch);
            const double limit = 127.0 * step;
            const bool inside = std::fabs(x) <= limit + 0.5 * step;
            const double expected = inside ? x : std::copysign(limit, x);
            const double allowed = inside ? int8_round_trip_bound(step) : 1e-6 * limit;
            if (!(std::fabs(x_hat - expected) <= allowed))
              return ::testing::AssertionFailure()
                     << cache_element(kv == 1, b, g, t, ch) << " = " << x << " dequantizes to " << x_hat
                     << " (defined step max|x|/127 = " << step << ", stored step " << stored
                     << "): " << (inside ? "more than half a defined step away" : "not saturated to ±127·step")
                     << "\n  " << seed_note(rng.seed());
          }
        }
    }
  }
  if (key_scaling == KeyScaling::per_channel && cache.saturated_count() == 0)
    return ::testing::AssertionFailure() << "per-channel K: no value saturated (saturated_count() = 0), though "
                                            "the outlier channels moved past the calibrated range\n  "
                                         << seed_note(rng.seed());
  if (key_scaling == KeyScaling::per_token && cache.saturated_count() != 0)
    return ::testing::AssertionFailure() << "per-token " << to_string(scale_dtype)
                                         << " scales: " << cache.saturated_count()
                                         << " values saturated; a row's own scale (rounded up) must hold it\n  "
                                         << seed_note(rng.seed());
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult int8_scales_match_definition(const KvAppendFn& append, KeyScaling key_scaling,
                                                        ScaleDtype scale_dtype, int64_t prompt, int64_t tokens) {
  SeededRng rng;
  const int64_t B = 2, G = 3, d = 36;
  const Int8Case c{{prompt + tokens, prompt + 1 + tokens}, tokens, G, G, d, key_scaling, 2, 10.0f, scale_dtype};
  const KvFormat format = KvFormat::int8(key_scaling, scale_dtype);
  const KvCacheShape shape{B, G, prompt + 1 + tokens + 1, d};
  KvCache cache(shape, format), exact(shape, KvDtype::fp32);
  const std::vector<int64_t> prompts{prompt, prompt + 1};
  for (int64_t b = 0; b < B; ++b) {
    Tensor<float> k({G, prompts[size_t(b)], d}), v({G, prompts[size_t(b)], d});
    fill_outlier_kv(rng, c, 0, k.data(), v.data(), G * prompts[size_t(b)]);
    cache.prefill(b, k, v);
    exact.prefill(b, k, v);
  }
  for (int64_t t = 0; t <= tokens; ++t) {
    if (t > 0) {
      Tensor<float> k_new({B, G, d}), v_new({B, G, d});
      fill_outlier_kv(rng, c, t % 3, k_new.data(), v_new.data(), B * G);  // outliers move between channels
      append(cache, k_new, v_new);
      exact.append(k_new, v_new);
    }
    const DefinedSteps defined(exact, format, prompts);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t j = 0; j < cache.length(b); ++j) {
          const std::string where = "sequence " + std::to_string(b) + ", KV head " + std::to_string(g) + ", token " +
                                    std::to_string(j) + " (" + (j < prompts[size_t(b)] ? "prefilled" : "appended") +
                                    ", " + std::string(to_string(key_scaling)) + " K, " +
                                    std::string(to_string(scale_dtype)) + " scales): ";
          if (cache.value_scale(b, g, j) != defined.value(b, g, j))
            return ::testing::AssertionFailure()
                   << where << "V's step is " << cache.value_scale(b, g, j) << ", the definition max|v|/127 gives "
                   << defined.value(b, g, j) << "\n  " << seed_note(rng.seed());
          for (int64_t ch = 0; ch < (key_scaling == KeyScaling::per_channel ? d : 1); ++ch)
            if (cache.key_scale(b, g, j, ch) != defined.key(b, g, j, ch))
              return ::testing::AssertionFailure()
                     << where << "K's step"
                     << (key_scaling == KeyScaling::per_channel ? " of channel " + std::to_string(ch) : "") << " is "
                     << cache.key_scale(b, g, j, ch) << ", the definition max|k|/127 "
                     << (key_scaling == KeyScaling::per_channel ? "over the prompt (the first token when it is empty) "
                                                                : "over the row ")
                     << "gives " << defined.key(b, g, j, ch) << "\n  " << seed_note(rng.seed());
        }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult fp16_scales_round_up() {
  SeededRng rng;
  std::vector<float> scales{0.0f,    1e-9f,   5.96e-8f, 6.0e-8f,  6.1e-5f,  1.0f / 127.0f, 0.1f, 1.0f,
                            1.0005f, 2048.5f, 65504.0f, 65505.0f, 65519.0f, 65520.0f,      1e7f, 3.0e38f};
  for (int i = 0; i < 2000; ++i) scales.push_back(std::exp(rng.normal() * 6.0f) / 127.0f);
  for (const float scale : scales) {
    const uint16_t bits = scale_to_fp16_up(scale);
    const float up = half_bits_to_float(bits);
    if (scale > 65504.0f) {
      if (up != 65504.0f)
        return ::testing::AssertionFailure()
               << "scale_to_fp16_up(" << scale << ") = " << up << ", expected the largest finite fp16, 65504\n  "
               << seed_note(rng.seed());
      continue;
    }
    if (!(up >= scale))
      return ::testing::AssertionFailure()
             << "scale_to_fp16_up(" << scale << ") = " << up << " is below the scale: |x|/scale could exceed 127\n  "
             << seed_note(rng.seed());
    if (bits > 0 && !(half_bits_to_float(uint16_t(bits - 1)) < scale))
      return ::testing::AssertionFailure()
             << "scale_to_fp16_up(" << scale << ") = " << up << " is not the smallest fp16 ≥ the scale ("
             << half_bits_to_float(uint16_t(bits - 1)) << " is one too)\n  " << seed_note(rng.seed());
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult append_rejects_non_finite(const KvAppendFn& append) {
  SeededRng rng;
  const int64_t B = 2, G = 3, d = 64;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()})
    for (int which = 0; which < 2; ++which) {
      KvCache cache({B, G, 8, d}, KvFormat::int8(KeyScaling::per_token));
      Tensor<float> k_new({B, G, d}), v_new({B, G, d});
      for (int64_t i = 0; i < k_new.size(); ++i) k_new[i] = rng.normal(), v_new[i] = rng.normal();
      append(cache, k_new, v_new);
      const KvCache before = cache;
      (which == 0 ? k_new : v_new)[(1 * G + 2) * d + 5] = bad;
      try {
        append(cache, k_new, v_new);
        return ::testing::AssertionFailure()
               << "a " << bad << " in " << (which == 0 ? "k_new" : "v_new")
               << " (sequence 1, KV head 2, channel 5) was appended without an error\n  " << seed_note(rng.seed());
      } catch (const std::invalid_argument& error) {
        const std::string message = error.what();
        if (message.find("sequence 1") == std::string::npos || message.find("KV head 2") == std::string::npos)
          return ::testing::AssertionFailure()
                 << "the error does not name sequence 1, KV head 2: " << message << "\n  " << seed_note(rng.seed());
      }
      if (cache.lengths() != before.lengths() || !std::ranges::equal(cache.k_int8(), before.k_int8()) ||
          !std::ranges::equal(cache.v_int8(), before.v_int8()) ||
          std::memcmp(cache.v_scales().data(), before.v_scales().data(), 4 * cache.v_scales().size()) != 0)
        return ::testing::AssertionFailure() << "a refused append changed the cache\n  " << seed_note(rng.seed());
    }
  return ::testing::AssertionSuccess();
}

}  // namespace inferlab::testing
