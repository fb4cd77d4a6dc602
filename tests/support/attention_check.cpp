#include "tests/support/attention_check.h"

#include <cmath>
#include <iterator>
#include <sstream>

#include "common/compare.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"

namespace inferlab::testing {

std::string AttentionCase::name() const {
  std::ostringstream out;
  out << "h" << num_heads << "_kv" << num_kv_heads << "_L" << seq_len << "_d" << head_dim << (causal ? "_causal" : "");
  if (logit_scale != 1.0f) out << "_logits_x" << static_cast<int>(logit_scale);
  return out.str();
}

std::vector<AttentionCase> odd_attention_cases(int64_t max_seq_len) {
  const int64_t seq_lens[] = {1, 2, 31, 33, 127, 257};
  const int64_t head_dims[] = {64, 80, 96, 128};
  const int64_t ratios[] = {1, 2, 4, 8};
  std::vector<AttentionCase> cases;
  // Every seq_len meets every head_dim and every GQA ratio, and every head_dim every ratio: the
  // ratio is a Latin square over (seq_len, head_dim), which keeps the product small. (Stepping
  // the ratio with the head_dim alone would pair each head_dim with one ratio only.)
  for (size_t i = 0; i < std::size(seq_lens); ++i) {
    const int64_t L = seq_lens[i];
    if (L > max_seq_len) continue;
    for (size_t j = 0; j < std::size(head_dims); ++j) {
      const int64_t ratio = ratios[(i + j) % std::size(ratios)];
      const int64_t kv_heads = ratio == 8 ? 1 : 2;
      for (bool causal : {false, true}) cases.push_back({kv_heads * ratio, kv_heads, L, head_dims[j], causal});
    }
  }
  // Extreme logits: |score| in the hundreds. exp() without the max subtraction overflows.
  for (float scale : {40.0f, 400.0f}) {
    cases.push_back({2, 1, std::min<int64_t>(33, max_seq_len), 64, false, scale});
    cases.push_back({4, 2, std::min<int64_t>(31, max_seq_len), 80, true, scale});
  }
  return cases;
}

namespace {

// The prefill output [num_heads, seq_len, head_dim]: row i of head h is query i's output.
const AxisNames kPrefillOutputAxes{"head", "query", "channel"};

double max_abs_logit(const Tensor<float>& q, const Tensor<float>& k, const AttentionShape& s) {
  double max_logit = 0.0;
  const double scale = 1.0 / std::sqrt(double(s.head_dim));
  for (int64_t h = 0; h < s.num_heads; ++h) {
    const int64_t g = h / s.group_size();
    for (int64_t i = 0; i < s.seq_len; ++i)
      for (int64_t j = 0; j < s.seq_len; ++j) {
        double dot = 0.0;
        for (int64_t c = 0; c < s.head_dim; ++c)
          dot += double(q[(h * s.seq_len + i) * s.head_dim + c]) * k[(g * s.seq_len + j) * s.head_dim + c];
        max_logit = std::max(max_logit, std::abs(dot * scale));
      }
  }
  return max_logit;
}

}  // namespace

::testing::AssertionResult attention_matches_oracle(const AttentionFn& run, Precision precision,
                                                    const AttentionCase& c) {
  SeededRng rng;
  Tensor<float> q = rng.normal_tensor({c.num_heads, c.seq_len, c.head_dim}, 0.0f, c.logit_scale);
  const Tensor<float> k = rng.normal_tensor({c.num_kv_heads, c.seq_len, c.head_dim});
  const Tensor<float> v = rng.normal_tensor({c.num_kv_heads, c.seq_len, c.head_dim});
  Tensor<float> out({c.num_heads, c.seq_len, c.head_dim});
  out.poison();

  try {
    run(q, k, v, c.causal, out);
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << c.name() << ": threw " << error.what() << "\n  " << seed_note(rng.seed());
  }
  if (out.shape() != Shape{c.num_heads, c.seq_len, c.head_dim}) {
    return ::testing::AssertionFailure() << c.name() << ": the output's shape changed to " << to_string(out.shape())
                                         << "\n  " << seed_note(rng.seed());
  }
  // The oracle of what the implementation was given: the inputs rounded to its precision
  // (tolerance.h: attention_tolerance()).
  const Tensor<float> q_in = round_to_precision(q, precision), k_in = round_to_precision(k, precision),
                      v_in = round_to_precision(v, precision);
  const AttentionShape shape = attention_shape(q_in, k_in, v_in, c.causal);
  const Tensor<double> expected = attention_reference(q_in, k_in, v_in, c.causal);
  const Comparison comparison = compare_to_oracle(
      out, expected, attention_tolerance(precision, max_abs_logit(q_in, k_in, shape)), kPrefillOutputAxes);
  if (!comparison.ok) {
    return ::testing::AssertionFailure()
           << c.name() << " (" << to_string(precision) << "): " << comparison.report()
           << (comparison.non_finite > 0 ? "\n  (out is filled with NaN before the call: a NaN is an element never "
                                           "written, or one computed from a NaN)"
                                         : "")
           << "\n  " << seed_note(rng.seed());
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult attention_same_under_schedules(const AttentionFn& run, const AttentionCase& c) {
  SeededRng rng;
  const Tensor<float> q = rng.normal_tensor({c.num_heads, c.seq_len, c.head_dim}, 0.0f, c.logit_scale);
  const Tensor<float> k = rng.normal_tensor({c.num_kv_heads, c.seq_len, c.head_dim});
  const Tensor<float> v = rng.normal_tensor({c.num_kv_heads, c.seq_len, c.head_dim});
  const Shape shape{c.num_heads, c.seq_len, c.head_dim};
  const ::testing::AssertionResult same =
      host_same_under_schedules([&](Tensor<float>& out) { run(q, k, v, c.causal, out); }, shape, nullptr,
                                default_schedules(), element_name(shape, kPrefillOutputAxes));
  if (!same)
    return ::testing::AssertionFailure() << c.name() << ": " << same.message() << "\n  " << seed_note(rng.seed());
  return ::testing::AssertionSuccess();
}

}  // namespace inferlab::testing
