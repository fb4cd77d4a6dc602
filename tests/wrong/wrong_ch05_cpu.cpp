// Wrong chapter-05 CPU code: the mistakes that fusion invites, run through the very checks the
// real versions pass (tests/support/attention_check.h for prefill, decode_check.h for decode).
//  - a fused prefill (a small scalar copy of cpu/flash's structure: blocks of query rows, key
//    blocks, online softmax) with switchable mistakes: the running sum not rescaled when the
//    max grows, the output not rescaled, the causal diagonal key block skipped;
//  - a split-KV decode whose reduce adds the partial outputs without rescaling each by
//    exp(m_i − m).
// Each mistake must be rejected on the graded shapes, and each fixture without its mistake must
// pass (so a rejection is the mistake's doing, not the fixture's).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/registry.h"
#include "kernels/fused/split_kv.h"
#include "tests/support/attention_check.h"
#include "tests/support/decode_check.h"

namespace inferlab {
namespace {

using testing::AttentionCase;
using testing::DecodeCase;

constexpr int64_t kBlockRows = 16;  // Br
constexpr int64_t kKeyBlock = 16;   // Bc

struct Mistakes {
  bool sum_not_rescaled = false;        // l ← l + Σ p instead of α·l + Σ p
  bool output_not_rescaled = false;     // O ← O + P·V instead of α·O + P·V
  bool diagonal_block_skipped = false;  // causal: only key blocks that start before the query
                                        // block (j0 < i0), so each row misses keys i0 … i
};

void fused_attention(const Mistakes& m, const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v,
                     bool causal, Tensor<float>& out) {
  const AttentionShape s = attention_shape(q, k, v, causal);
  check_attention_output(out, s);
  const int64_t L = s.seq_len, d = s.head_dim;
  const float scale = 1.0f / std::sqrt(float(d));
  std::vector<float> o(static_cast<size_t>(kBlockRows * d)), row_max(kBlockRows), row_sum(kBlockRows);
  for (int64_t h = 0; h < s.num_heads; ++h) {
    const int64_t g = h / s.group_size();
    for (int64_t i0 = 0; i0 < L; i0 += kBlockRows) {
      const int64_t rows = std::min(kBlockRows, L - i0);
      const int64_t kv_end = !causal ? L : m.diagonal_block_skipped ? i0 : i0 + rows;
      std::fill(o.begin(), o.end(), 0.0f);
      std::fill(row_max.begin(), row_max.end(), -std::numeric_limits<float>::infinity());
      std::fill(row_sum.begin(), row_sum.end(), 0.0f);
      for (int64_t j0 = 0; j0 < kv_end; j0 += kKeyBlock) {
        const int64_t j_end = std::min(j0 + kKeyBlock, kv_end);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = i0 + r;
          const int64_t visible_end = causal ? std::min(j_end, i + 1) : j_end;
          if (visible_end <= j0) continue;
          std::vector<float> scores;
          for (int64_t j = j0; j < visible_end; ++j) {
            float dot = 0.0f;
            for (int64_t c = 0; c < d; ++c) dot += q[(h * L + i) * d + c] * k[(g * L + j) * d + c];
            scores.push_back(dot * scale);
          }
          const float new_max = std::max(row_max[size_t(r)], *std::max_element(scores.begin(), scores.end()));
          const float alpha = std::exp(row_max[size_t(r)] - new_max);
          float block_sum = 0.0f;
          for (float& score : scores) block_sum += (score = std::exp(score - new_max));
          row_sum[size_t(r)] = (m.sum_not_rescaled ? 1.0f : alpha) * row_sum[size_t(r)] + block_sum;
          row_max[size_t(r)] = new_max;
          for (int64_t c = 0; c < d; ++c) {
            float pv = 0.0f;
            for (int64_t j = j0; j < visible_end; ++j) pv += scores[size_t(j - j0)] * v[(g * L + j) * d + c];
            float& acc = o[size_t(r * d + c)];
            acc = (m.output_not_rescaled ? 1.0f : alpha) * acc + pv;
          }
        }
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < d; ++c) out[(h * L + i0 + r) * d + c] = o[size_t(r * d + c)] / row_sum[size_t(r)];
    }
  }
}

// True when the shared check rejects the fixture on at least one of @p cases.
bool rejected(const Mistakes& mistakes, const std::vector<AttentionCase>& cases) {
  auto run = [&](const Tensor<float>& q, const Tensor<float>& k, const Tensor<float>& v, bool causal,
                 Tensor<float>& out) { fused_attention(mistakes, q, k, v, causal, out); };
  for (const AttentionCase& c : cases)
    if (!testing::attention_matches_oracle(run, Precision::fp32, c)) return true;
  return false;
}

TEST(WrongCh05Cpu, TheHarnessAcceptsTheFusedFixtureWithNoMistakes) {
  EXPECT_FALSE(rejected(Mistakes{}, testing::odd_attention_cases(127)));
}

TEST(WrongCh05Cpu, RunningSumNotRescaledIsRejected) {
  EXPECT_TRUE(rejected({.sum_not_rescaled = true}, {{2, 1, 33, 64, false}}));
  // One key block (L ≤ Bc) never rescales anything: the mistake hides. Longer rows catch it.
  EXPECT_FALSE(rejected({.sum_not_rescaled = true}, {{2, 1, 16, 64, false}}));
  EXPECT_TRUE(rejected({.sum_not_rescaled = true}, testing::odd_attention_cases(127)));
}

TEST(WrongCh05Cpu, OutputNotRescaledIsRejected) {
  EXPECT_TRUE(rejected({.output_not_rescaled = true}, {{1, 1, 65, 80, true}}));
}

TEST(WrongCh05Cpu, SkippedDiagonalBlockIsRejected) {
  EXPECT_TRUE(rejected({.diagonal_block_skipped = true}, {{2, 2, 31, 64, true}}));
  EXPECT_FALSE(rejected({.diagonal_block_skipped = true}, {{2, 2, 31, 64, false}}));  // only causal skips
}

// ---- split-KV decode with a reduce that forgets the maxima ----

// A scalar split-KV decode: partials per (sequence, query head, split) as split_kv.h defines
// them, then the real reduce (reduce_splits) or the wrong one: Σ acc_i / Σ l_i, as if every
// split had subtracted the same max.
void split_decode(bool reduce_without_rescale, int64_t num_splits, const Tensor<float>& q, const KvCache& cache,
                  Tensor<float>& out) {
  const DecodeShape s = decode_shape(q, cache);
  check_decode_output(out, s);
  const int64_t d = s.head_dim;
  const float scale = 1.0f / std::sqrt(float(d));
  SplitPartials partials(s, num_splits);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t h = 0; h < s.num_heads; ++h)
      for (int64_t split = 0; split < num_splits; ++split) {
        const SplitRange keys = split_range(cache.length(b), num_splits, split);
        const int64_t i = partials.index(b * s.num_heads + h, split);
        float* acc = partials.acc.data() + i * d;
        std::fill(acc, acc + d, 0.0f);
        std::vector<float> p;
        for (int64_t j = keys.begin; j < keys.end; ++j) {
          float dot = 0.0f;
          for (int64_t c = 0; c < d; ++c)
            dot += q[(b * s.num_heads + h) * d + c] * cache.key(b, h / s.group_size(), j, c);
          p.push_back(dot * scale);
        }
        const float m = p.empty() ? -INFINITY : *std::max_element(p.begin(), p.end());
        float l = 0.0f;
        for (size_t j = 0; j < p.size(); ++j) {
          l += (p[j] = std::exp(p[j] - m));
          for (int64_t c = 0; c < d; ++c)
            acc[c] += p[j] * cache.value(b, h / s.group_size(), keys.begin + int64_t(j), c);
        }
        partials.max[size_t(i)] = m;
        partials.sum[size_t(i)] = l;
      }
  if (!reduce_without_rescale) {
    reduce_splits(partials, out);
    return;
  }
  for (int64_t row = 0; row < s.batch * s.num_heads; ++row) {
    float total = 0.0f;
    for (int64_t c = 0; c < d; ++c) out[row * d + c] = 0.0f;
    for (int64_t split = 0; split < num_splits; ++split) {
      const int64_t i = partials.index(row, split);
      total += partials.sum[size_t(i)];
      for (int64_t c = 0; c < d; ++c) out[row * d + c] += partials.acc[size_t(i * d + c)];
    }
    for (int64_t c = 0; c < d; ++c) out[row * d + c] /= total;
  }
}

DecodeFn split_fixture(bool reduce_without_rescale, int64_t num_splits) {
  return [=](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    split_decode(reduce_without_rescale, num_splits, q, cache, out);
  };
}

bool split_rejected(bool reduce_without_rescale, int64_t num_splits, const DecodeCase& c) {
  const KvAppendFn& append = kv_append_version_for(Backend::cpu, KvDtype::fp32).run;
  return !testing::decode_steps_match_prefill(split_fixture(reduce_without_rescale, num_splits), KvDtype::fp32, append,
                                              c);
}

TEST(WrongCh05Cpu, TheHarnessAcceptsTheSplitFixtureWithTheRealReduce) {
  for (const int64_t splits : {int64_t(1), int64_t(3), int64_t(50)})
    for (const DecodeCase& c : testing::odd_decode_cases(65))
      EXPECT_FALSE(split_rejected(false, splits, c)) << c.name();
}

TEST(WrongCh05Cpu, ReduceWithoutRescalingByTheMaximaIsRejected) {
  EXPECT_TRUE(split_rejected(true, 3, {{33, 1, 17}, 1, 8, 2, 128}));
  // With one split there is nothing to rescale: the mistake hides, as it would in a test that
  // only ran S = 1. Hence the suite's S = 2, 3, 7 and S > length.
  EXPECT_FALSE(split_rejected(true, 1, {{33, 1, 17}, 1, 8, 2, 128}));
}

}  // namespace
}  // namespace inferlab
