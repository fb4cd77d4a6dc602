#include "tests/support/quantized_replay.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/compare.h"
#include "tests/support/seeded.h"

namespace inferlab::testing {

void fill_outlier_kv(Rng& rng, const Int8Case& c, int64_t channels_offset, float* k, float* v, int64_t rows) {
  const int64_t d = c.head_dim;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t ch = 0; ch < d; ++ch) {
      const bool outlier = (ch + channels_offset) % d < c.outlier_channels;
      k[r * d + ch] = outlier ? c.outlier_magnitude * (1.0f + 0.5f * rng.normal()) : rng.normal();
      v[r * d + ch] = rng.normal();
    }
}

ReplayKv::ReplayKv(Rng& rng, const Int8Case& c)
    : lengths_(c.lengths), steps_(c.steps), num_kv_heads_(c.num_kv_heads), head_dim_(c.head_dim) {
  for (const int64_t L : lengths_) {
    k_.emplace_back(Shape{num_kv_heads_, L, head_dim_});
    v_.emplace_back(Shape{num_kv_heads_, L, head_dim_});
    fill_outlier_kv(rng, c, 0, k_.back().data(), v_.back().data(), num_kv_heads_ * L);
  }
}

KvCacheShape ReplayKv::cache_shape() const {
  const int64_t longest = *std::max_element(lengths_.begin(), lengths_.end());
  return {int64_t(lengths_.size()), num_kv_heads_, longest + 2, head_dim_};
}

std::pair<Tensor<float>, Tensor<float>> ReplayKv::prompt(int64_t sequence) const {
  const int64_t G = num_kv_heads_, d = head_dim_, L = lengths_[size_t(sequence)], prompt = L - steps_;
  Tensor<float> k({G, prompt, d}), v({G, prompt, d});
  for (int64_t g = 0; g < G; ++g) {
    std::copy_n(k_[size_t(sequence)].data() + g * L * d, prompt * d, k.data() + g * prompt * d);
    std::copy_n(v_[size_t(sequence)].data() + g * L * d, prompt * d, v.data() + g * prompt * d);
  }
  return {std::move(k), std::move(v)};
}

std::pair<Tensor<float>, Tensor<float>> ReplayKv::token(int64_t step) const {
  const int64_t B = int64_t(lengths_.size()), G = num_kv_heads_, d = head_dim_;
  Tensor<float> k_new({B, G, d}), v_new({B, G, d});
  for (int64_t b = 0; b < B; ++b) {
    const int64_t L = lengths_[size_t(b)], t = L - steps_ + step - 1;
    for (int64_t g = 0; g < G; ++g) {
      std::copy_n(k_[size_t(b)].data() + (g * L + t) * d, d, k_new.data() + (b * G + g) * d);
      std::copy_n(v_[size_t(b)].data() + (g * L + t) * d, d, v_new.data() + (b * G + g) * d);
    }
  }
  return {std::move(k_new), std::move(v_new)};
}

Tensor<float> replay_queries(uint64_t seed, const Int8Case& c, int64_t decodes_left) {
  Rng rng(seed ^ (0x9E3779B97F4A7C15ull * uint64_t(decodes_left + 1)));
  return rng.normal_tensor({int64_t(c.lengths.size()), c.num_heads, c.head_dim});
}

double softmax_kl(const std::vector<double>& s, const std::vector<double>& s_hat) {
  const double m = *std::max_element(s.begin(), s.end()), m_hat = *std::max_element(s_hat.begin(), s_hat.end());
  double z = 0.0, z_hat = 0.0, kl = 0.0;
  for (size_t j = 0; j < s.size(); ++j) z += std::exp(s[j] - m), z_hat += std::exp(s_hat[j] - m_hat);
  for (size_t j = 0; j < s.size(); ++j) {
    const double p = std::exp(s[j] - m) / z, p_hat = std::exp(s_hat[j] - m_hat) / z_hat;
    if (p > 0.0) kl += p * std::log(p / p_hat);
  }
  return kl;
}

std::string cache_element(bool value, int64_t sequence, int64_t kv_head, int64_t token, int64_t channel) {
  return std::string(value ? "V" : "K") + " (sequence " + std::to_string(sequence) + ", KV head " +
         std::to_string(kv_head) + ", token " + std::to_string(token) + ", channel " + std::to_string(channel) + ")";
}

std::string output_element(int64_t sequence, int64_t head, int64_t channel) {
  return "(sequence " + std::to_string(sequence) + ", head " + std::to_string(head) + ", channel " +
         std::to_string(channel) + ")";
}

void StepFailures::non_finite(int64_t sequence, int64_t head, int64_t channel, double value) {
  if (non_finite_++ == 0) first_non_finite_ = output_element(sequence, head, channel);
  nan_ += std::isnan(value);
}

void StepFailures::kernel_error(const std::string& line) {
  if (kernel_errors_++ < int64_t(kReportedMismatches)) kernel_lines_.push_back(line);
}

void StepFailures::outside_bound(const std::string& line) {
  if (outside_++ < int64_t(kReportedMismatches)) outside_lines_.push_back(line);
}

std::string StepFailures::report(const std::string& what, int64_t outputs, const std::string& errors,
                                 const std::string& bound_name, uint64_t seed) const {
  std::ostringstream out;
  out << what << ": ";
  if (non_finite_ > 0)
    out << non_finite_summary(non_finite_, nan_, outputs) << ", first at " << first_non_finite_ << "\n  over the "
        << outputs - non_finite_ << " finite outputs: ";
  out << errors;
  const auto list = [&](int64_t count, const std::vector<std::string>& lines, const std::string& title) {
    if (count == 0) return;
    out << "\n  " << count << " of " << outputs << (count == 1 ? " output " : " outputs ") << title << ":";
    for (const std::string& line : lines) out << "\n    " << line;
    if (count > int64_t(lines.size())) out << "\n    … and " << count - int64_t(lines.size()) << " more";
  };
  list(kernel_errors_, kernel_lines_,
       "differ from the float64 decode of their own dequantized cache — not a quantization error but a kernel "
       "error (wrong conversion, scale or row?)");
  list(outside_, outside_lines_, "outside " + bound_name);
  out << "\n  " << seed_note(seed);
  return out.str();
}

}  // namespace inferlab::testing
