// Wrong chapter-01 attention implementations. Each is a plausible student mistake; each test
// runs the same check the real versions pass (tests/support/attention_check.h) and expects it
// to reject the fixture on the shapes that expose the mistake.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention/attention.h"
#include "tests/support/attention_check.h"

namespace inferlab {
namespace {

using testing::AttentionCase;

// A parametrised naive attention with switchable mistakes.
struct Mistakes {
  bool ignore_causal = false;    // never masks
  bool no_max_shift = false;     // exp(s) instead of exp(s - max): overflows for big logits
  bool key_off_by_one = false;   // causal row i sees keys 0..i-1 (misses the diagonal), except row 0
  bool wrong_gqa = false;        // query head h reads KV head h % num_kv_heads instead of h / group
  bool skip_last_row = false;    // forgets the last query row (left poisoned)
  bool no_scale = false;         // forgets 1/sqrt(d)
};

void wrong_attention(const Mistakes& m, const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                     bool causal, Tensor<float>& out) {
  const AttentionShape s = attention_shape(q, k, v, causal);
  const int64_t L = s.seq_len, d = s.head_dim;
  const float scale = m.no_scale ? 1.0f : 1.0f / std::sqrt(float(d));
  std::vector<float> w(static_cast<size_t>(L));
  for (int64_t h = 0; h < s.num_heads; ++h) {
    const int64_t g = m.wrong_gqa ? h % s.num_kv_heads : h / s.group_size();
    for (int64_t i = 0; i < (m.skip_last_row ? L - 1 : L); ++i) {
      int64_t keys = (causal && !m.ignore_causal) ? i + 1 : L;
      if (m.key_off_by_one && causal && i > 0) keys = i;
      float max_score = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < keys; ++j) {
        float dot = 0.0f;
        for (int64_t c = 0; c < d; ++c) dot += q[(h * L + i) * d + c] * k[(g * L + j) * d + c];
        w[size_t(j)] = dot * scale;
        max_score = std::max(max_score, w[size_t(j)]);
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < keys; ++j) sum += (w[size_t(j)] = std::exp(w[size_t(j)] - (m.no_max_shift ? 0.0f : max_score)));
      for (int64_t c = 0; c < d; ++c) {
        float acc = 0.0f;
        for (int64_t j = 0; j < keys; ++j) acc += w[size_t(j)] * v[(g * L + j) * d + c];
        out[(h * L + i) * d + c] = acc / sum;
      }
    }
  }
}

// True when the shared check rejects the fixture on at least one of @p cases.
bool rejected(const Mistakes& mistakes, const std::vector<AttentionCase>& cases) {
  auto run = [&](const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                 Tensor<float>& out) { wrong_attention(mistakes, q, k, v, causal, out); };
  for (const AttentionCase& c : cases)
    if (!testing::attention_matches_oracle(run, Precision::fp32, c)) return true;
  return false;
}

TEST(WrongCh01, TheHarnessAcceptsTheFixtureWithNoMistakes) {
  // Guards the fixtures themselves: with every switch off, the same code passes.
  EXPECT_FALSE(rejected(Mistakes{}, testing::odd_attention_cases(33)));
}

TEST(WrongCh01, NoCausalMaskIsRejected) {
  EXPECT_TRUE(rejected({.ignore_causal = true}, {{2, 2, 31, 64, true}}));
}

TEST(WrongCh01, UnstableSoftmaxIsRejected) {
  // Ordinary logits hide it; the extreme-logit cases in the standard list expose it.
  EXPECT_FALSE(rejected({.no_max_shift = true}, {{2, 2, 31, 64, true}}));
  EXPECT_TRUE(rejected({.no_max_shift = true}, testing::odd_attention_cases(33)));
}

TEST(WrongCh01, CausalOffByOneIsRejected) {
  EXPECT_TRUE(rejected({.key_off_by_one = true}, {{1, 1, 33, 80, true}}));
}

TEST(WrongCh01, WrongGqaMappingIsRejected) {
  EXPECT_TRUE(rejected({.wrong_gqa = true}, {{4, 2, 31, 64, false}}));
}

TEST(WrongCh01, UnwrittenOutputRowIsRejected) {
  // The output is poisoned with NaN before the run; a row never written stays NaN.
  EXPECT_TRUE(rejected({.skip_last_row = true}, {{1, 1, 2, 64, false}}));
}

TEST(WrongCh01, MissingScaleIsRejected) {
  EXPECT_TRUE(rejected({.no_scale = true}, {{1, 1, 31, 64, false}}));
}

}  // namespace
}  // namespace inferlab
