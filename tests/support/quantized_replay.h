#pragma once
/// @file quantized_replay.h
/// The data the chapter-04 decode checks (int8_check.h, fp8_check.h) replay generation with: K
/// with a few outlier channels (large magnitude and a bias, as real models' keys have) and plain
/// V, drawn once per sequence and cut into the prompt and the tokens appended one at a time —
/// and the KL divergence of two softmax distributions, the checks' measure of how far the
/// quantized scores move the attention weights.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/rng.h"
#include "common/tensor.h"
#include "kernels/kv/kv_cache.h"
#include "tests/support/int8_check.h"

namespace inferlab::testing {

/// Fills @p rows rows of head_dim floats at @p k and @p v: K channel ch is an outlier when
/// (ch + @p channels_offset) mod head_dim < c.outlier_channels (c.outlier_magnitude · (1 + N/2)),
/// else N(0, 1); V is N(0, 1). A nonzero offset moves the outliers to other channels.
void fill_outlier_kv(Rng& rng, const Int8Case& c, int64_t channels_offset, float* k, float* v, int64_t rows);

/// Each sequence's whole K and V for a replay of @p c, [num_kv_heads][length][head_dim] per
/// sequence (fill_outlier_kv), and the pieces the replay feeds the caches.
class ReplayKv {
 public:
  /// Draws every sequence's K and V from @p rng, sequence by sequence.
  ReplayKv(Rng& rng, const Int8Case& c);
  /// The sizes of the caches the replay fills: max_seq_len = the longest length + 2, so every
  /// sequence has poisoned slots past its end.
  KvCacheShape cache_shape() const;
  /// The prompt of @p sequence: its first length − steps tokens, K and V
  /// [num_kv_heads, length − steps, head_dim] (what a cache's prefill takes).
  std::pair<Tensor<float>, Tensor<float>> prompt(int64_t sequence) const;
  /// Prefills every sequence's prompt into each of @p caches (any cache with prefill(b, k, v)).
  template <class... Caches>
  void prefill(Caches&... caches) const {
    for (int64_t b = 0; b < int64_t(lengths_.size()); ++b) {
      const auto [k, v] = prompt(b);
      (caches.prefill(b, k, v), ...);
    }
  }
  /// Token length − steps + step − 1 of every sequence (@p step = 1 … steps): k_new and v_new
  /// [batch, num_kv_heads, head_dim] (what an append takes).
  std::pair<Tensor<float>, Tensor<float>> token(int64_t step) const;

 private:
  std::vector<int64_t> lengths_;
  int64_t steps_, num_kv_heads_, head_dim_;
  std::vector<Tensor<float>> k_, v_;
};

/// The queries [batch, num_heads, head_dim] of one decode step of a replay of @p c drawn from
/// @p seed: a function of the seed and of @p decodes_left (the decode steps still to come after
/// this one) only, so the last step's queries are the same whatever c.steps, c.key_scaling or the
/// cache format — checks replaying one seed compare schemes on one dataset, queries included.
Tensor<float> replay_queries(uint64_t seed, const Int8Case& c, int64_t decodes_left);

/// KL(p ‖ p̂) of p = softmax(@p s) and p̂ = softmax(@p s_hat) (max subtracted), in double.
double softmax_kl(const std::vector<double>& s, const std::vector<double>& s_hat);

/// "K (sequence 1, KV head 0, token 7, channel 17)": element (sequence, KV head, token, channel)
/// of a cache's K (or V, when @p value).
std::string cache_element(bool value, int64_t sequence, int64_t kv_head, int64_t token, int64_t channel);

/// "(sequence 1, head 3, channel 17)": an element of a decode output [batch, num_heads, head_dim].
std::string output_element(int64_t sequence, int64_t head, int64_t channel);

/// The failures of one quantized decode step, gathered over every output and reported NaN first:
/// the count of NaN/Inf outputs and the first one, then the errors over the finite outputs, then
/// each kind of failure with its count and at most kReportedMismatches examples.
class StepFailures {
 public:
  /// Output (@p sequence, @p head, @p channel) is NaN or ±Inf.
  void non_finite(int64_t sequence, int64_t head, int64_t channel, double value);
  /// An output that differs from the float64 decode of its own dequantized cache: @p line says
  /// which and by how much.
  void kernel_error(const std::string& line);
  /// An output outside the derived bound: @p line says which and why.
  void outside_bound(const std::string& line);
  /// Whether anything failed.
  bool any() const { return non_finite_ > 0 || kernel_errors_ > 0 || outside_ > 0; }
  /// The message: "@p what: 2 of 96 outputs are NaN, first at (sequence 0, head 1, channel 5)",
  /// then @p errors (the error statistics, over the finite outputs when some are not), then the
  /// kernel errors and the outputs outside @p bound_name ("the derived INT8 bound"), each with
  /// a count and the first few, then the seed and its replay hint.
  std::string report(const std::string& what, int64_t outputs, const std::string& errors, const std::string& bound_name,
                     uint64_t seed) const;

 private:
  int64_t non_finite_ = 0, nan_ = 0, kernel_errors_ = 0, outside_ = 0;
  std::string first_non_finite_;
  std::vector<std::string> kernel_lines_, outside_lines_;
};

}  // namespace inferlab::testing
