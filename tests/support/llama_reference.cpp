#include "tests/support/llama_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>

namespace inferlab::testing {
namespace {

constexpr int64_t kHeaderInts = 7;
constexpr int64_t kHeaderBytes = kHeaderInts * 4;
constexpr double kRmsEps = 1e-5;
constexpr double kRopeBase = 10000.0;

[[noreturn]] void bad_file(const std::string& path, const std::string& problem) {
  throw std::invalid_argument("llama2.c checkpoint '" + path + "': " + problem);
}

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) bad_file(path, "cannot be opened");
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// a · b, or an exception naming the file when the product leaves the range a file can have.
int64_t checked_mul(const std::string& path, int64_t a, int64_t b) {
  constexpr int64_t kLimit = std::numeric_limits<int64_t>::max() / 8;
  if (b != 0 && a > kLimit / b) bad_file(path, "sizes overflow (" + std::to_string(a) + " x " + std::to_string(b) + ")");
  return a * b;
}

LlamaReferenceConfig parse_header(const std::string& path, const std::vector<char>& bytes) {
  if (static_cast<int64_t>(bytes.size()) < kHeaderBytes) {
    bad_file(path, "truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the " +
                       std::to_string(kHeaderBytes) + "-byte header");
  }
  int32_t h[kHeaderInts];
  std::memcpy(h, bytes.data(), sizeof h);
  const char* names[kHeaderInts] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < kHeaderInts; ++i) {
    const bool ok = i == 5 ? h[i] != 0 : h[i] > 0;  // vocab_size < 0: a separate classifier
    if (!ok) bad_file(path, std::string(names[i]) + " = " + std::to_string(h[i]) + ": must be " + (i == 5 ? "non-zero" : "positive"));
  }
  LlamaReferenceConfig c;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.vocab_size = h[5] > 0 ? h[5] : -static_cast<int64_t>(h[5]);
  c.shared_classifier = h[5] > 0;
  c.seq_len = h[6];
  if (c.dim % c.n_heads != 0) {
    bad_file(path, "n_heads = " + std::to_string(c.n_heads) + ": does not divide dim = " + std::to_string(c.dim));
  }
  if (c.n_kv_heads > c.n_heads || c.n_heads % c.n_kv_heads != 0) {
    bad_file(path, "n_kv_heads = " + std::to_string(c.n_kv_heads) + ": does not divide n_heads = " + std::to_string(c.n_heads));
  }
  if (c.head_size() % 2 != 0) {
    bad_file(path, "head size = dim / n_heads = " + std::to_string(c.head_size()) + ": must be even (RoPE rotates pairs)");
  }
  return c;
}

/// Floats the file must hold after the header, in file order.
int64_t expected_floats(const std::string& path, const LlamaReferenceConfig& c) {
  const int64_t dim = c.dim;
  const int64_t per_layer = 2 * dim + checked_mul(path, dim, dim) * 2 + checked_mul(path, c.kv_dim(), dim) * 2 +
                            checked_mul(path, checked_mul(path, c.hidden_dim, dim), 3);
  int64_t total = checked_mul(path, c.vocab_size, dim);  // token embedding
  total += checked_mul(path, c.n_layers, per_layer);
  total += dim;                                              // rms_final
  total += checked_mul(path, c.seq_len, c.head_size());     // freq_cis_real + freq_cis_imag (skipped)
  if (!c.shared_classifier) total += checked_mul(path, c.vocab_size, dim);  // wcls
  return total;
}

/// Reads consecutive little-endian float32 values as doubles.
class FloatCursor {
 public:
  explicit FloatCursor(const char* at) : at_(at) {}
  std::vector<double> take(int64_t count) {
    std::vector<double> out(static_cast<size_t>(count));
    for (auto& value : out) {
      float f;
      std::memcpy(&f, at_, sizeof f);
      at_ += sizeof f;
      value = f;
    }
    return out;
  }
  void skip(int64_t count) { at_ += count * static_cast<int64_t>(sizeof(float)); }

 private:
  const char* at_;
};

/// out[r] = Σ_c w[r][c] · x[c] for a row-major rows × x.size() matrix.
std::vector<double> matvec(const std::vector<double>& w, const std::vector<double>& x, int64_t rows) {
  const auto cols = static_cast<int64_t>(x.size());
  std::vector<double> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = w.data() + r * cols;
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += row[c] * x[c];
    out[r] = sum;
  }
  return out;
}

/// x · w / sqrt(mean(x²) + eps).
std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w) {
  double squares = 0.0;
  for (double v : x) squares += v * v;
  const double scale = 1.0 / std::sqrt(squares / static_cast<double>(x.size()) + kRmsEps);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = w[i] * (scale * x[i]);
  return out;
}

/// Rotates the pairs (2i, 2i+1) of every head of @p v by pos · 10000^(-2i/head_size).
void rope(std::vector<double>& v, int64_t head_size, int64_t pos) {
  for (size_t i = 0; i < v.size(); i += 2) {
    const auto in_head = static_cast<double>(static_cast<int64_t>(i) % head_size);
    const double angle = static_cast<double>(pos) / std::pow(kRopeBase, in_head / static_cast<double>(head_size));
    const double c = std::cos(angle), s = std::sin(angle);
    const double a = v[i], b = v[i + 1];
    v[i] = a * c - b * s;
    v[i + 1] = a * s + b * c;
  }
}

void softmax(std::vector<double>& x) {
  double max = x[0];
  for (double v : x) max = std::max(max, v);
  double sum = 0.0;
  for (double& v : x) sum += (v = std::exp(v - max));
  for (double& v : x) v /= sum;
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

void add_into(std::vector<double>& x, const std::vector<double>& delta) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += delta[i];
}

int32_t first_argmax(const std::vector<double>& x) {
  size_t best = 0;
  for (size_t i = 1; i < x.size(); ++i) {
    if (x[i] > x[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

}  // namespace

/// One sequence: the float64 K and V of every position fed so far, per layer.
class LlamaReference::Session {
 public:
  explicit Session(const LlamaReference& model) : m_(model), c_(model.config_) {
    const auto slots = static_cast<size_t>(c_.seq_len * c_.kv_dim());
    keys_.assign(static_cast<size_t>(c_.n_layers), std::vector<double>(slots));
    values_ = keys_;
  }

  /// Feeds @p token at the next position; returns the logits there.
  std::vector<double> step(int32_t token) {
    const int64_t dim = c_.dim;
    std::vector<double> x(m_.token_embedding_.begin() + token * dim, m_.token_embedding_.begin() + (token + 1) * dim);
    for (int64_t l = 0; l < c_.n_layers; ++l) {
      const Layer& w = m_.layers_[static_cast<size_t>(l)];
      add_into(x, attention(l, w, rmsnorm(x, w.rms_att)));
      add_into(x, feed_forward(w, rmsnorm(x, w.rms_ffn)));
    }
    ++pos_;
    return matvec(m_.wcls_, rmsnorm(x, m_.rms_final_), c_.vocab_size);
  }

 private:
  /// wo · (causal GQA attention of this position over positions 0..pos).
  std::vector<double> attention(int64_t l, const Layer& w, const std::vector<double>& xb) {
    const int64_t hs = c_.head_size(), kv_dim = c_.kv_dim();
    std::vector<double> q = matvec(w.wq, xb, c_.dim);
    std::vector<double> k = matvec(w.wk, xb, kv_dim);
    rope(q, hs, pos_);
    rope(k, hs, pos_);
    std::vector<double> v = matvec(w.wv, xb, kv_dim);
    std::vector<double>& keys = keys_[static_cast<size_t>(l)];
    std::vector<double>& values = values_[static_cast<size_t>(l)];
    std::copy(k.begin(), k.end(), keys.begin() + pos_ * kv_dim);
    std::copy(v.begin(), v.end(), values.begin() + pos_ * kv_dim);

    const int64_t group = c_.n_heads / c_.n_kv_heads;
    const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
    std::vector<double> out(static_cast<size_t>(c_.dim), 0.0);
    std::vector<double> scores(static_cast<size_t>(pos_ + 1));
    for (int64_t h = 0; h < c_.n_heads; ++h) {
      const double* qh = q.data() + h * hs;
      const int64_t kv_offset = (h / group) * hs;
      for (int64_t t = 0; t <= pos_; ++t) {
        const double* kt = keys.data() + t * kv_dim + kv_offset;
        double dot = 0.0;
        for (int64_t i = 0; i < hs; ++i) dot += qh[i] * kt[i];
        scores[t] = dot * scale;
      }
      softmax(scores);
      double* oh = out.data() + h * hs;
      for (int64_t t = 0; t <= pos_; ++t) {
        const double* vt = values.data() + t * kv_dim + kv_offset;
        for (int64_t i = 0; i < hs; ++i) oh[i] += scores[t] * vt[i];
      }
    }
    return matvec(w.wo, out, c_.dim);
  }

  /// w2 · (silu(w1 · xb) ⊙ (w3 · xb)).
  std::vector<double> feed_forward(const Layer& w, const std::vector<double>& xb) const {
    std::vector<double> gate = matvec(w.w1, xb, c_.hidden_dim);
    const std::vector<double> up = matvec(w.w3, xb, c_.hidden_dim);
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = silu(gate[i]) * up[i];
    return matvec(w.w2, gate, c_.dim);
  }

  const LlamaReference& m_;
  const LlamaReferenceConfig& c_;
  int64_t pos_ = 0;
  std::vector<std::vector<double>> keys_;    ///< [layer][pos · kv_dim]
  std::vector<std::vector<double>> values_;  ///< [layer][pos · kv_dim]
};

LlamaReference::LlamaReference(const std::string& path) : path_(path) {
  const std::vector<char> bytes = read_bytes(path);
  config_ = parse_header(path, bytes);
  const int64_t expected = kHeaderBytes + checked_mul(path, expected_floats(path, config_), 4);
  const auto actual = static_cast<int64_t>(bytes.size());
  if (actual != expected) {
    bad_file(path, std::string(actual < expected ? "truncated" : "too long") + ": " + std::to_string(actual) +
                       " bytes, the header implies " + std::to_string(expected));
  }
  const LlamaReferenceConfig& c = config_;
  const int64_t dim = c.dim, kv_dim = c.kv_dim(), hidden = c.hidden_dim, layers = c.n_layers;
  FloatCursor in(bytes.data() + kHeaderBytes);
  token_embedding_ = in.take(c.vocab_size * dim);
  layers_.resize(static_cast<size_t>(layers));
  // The file groups each weight across layers: all rms_att, then all wq, and so on.
  for (auto& l : layers_) l.rms_att = in.take(dim);
  for (auto& l : layers_) l.wq = in.take(dim * dim);
  for (auto& l : layers_) l.wk = in.take(kv_dim * dim);
  for (auto& l : layers_) l.wv = in.take(kv_dim * dim);
  for (auto& l : layers_) l.wo = in.take(dim * dim);
  for (auto& l : layers_) l.rms_ffn = in.take(dim);
  for (auto& l : layers_) l.w1 = in.take(hidden * dim);
  for (auto& l : layers_) l.w2 = in.take(dim * hidden);
  for (auto& l : layers_) l.w3 = in.take(hidden * dim);
  rms_final_ = in.take(dim);
  in.skip(c.seq_len * c.head_size());  // legacy RoPE tables: freq_cis_real, freq_cis_imag
  wcls_ = c.shared_classifier ? token_embedding_ : in.take(c.vocab_size * dim);
}

void LlamaReference::check_tokens(const std::vector<int32_t>& tokens, const char* what) const {
  if (tokens.empty()) throw std::invalid_argument(std::string(what) + ": empty");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= config_.vocab_size) {
      throw std::invalid_argument(std::string(what) + "[" + std::to_string(i) + "] = " + std::to_string(tokens[i]) +
                                  ": outside [0, " + std::to_string(config_.vocab_size) + ")");
    }
  }
}

std::vector<std::vector<double>> LlamaReference::logits(const std::vector<int32_t>& tokens) const {
  check_tokens(tokens, "tokens");
  if (static_cast<int64_t>(tokens.size()) > config_.seq_len) {
    throw std::invalid_argument("tokens: " + std::to_string(tokens.size()) + " of them, more than seq_len = " +
                                std::to_string(config_.seq_len));
  }
  Session session(*this);
  std::vector<std::vector<double>> out;
  out.reserve(tokens.size());
  for (int32_t token : tokens) out.push_back(session.step(token));
  return out;
}

std::vector<int32_t> LlamaReference::greedy(const std::vector<int32_t>& prompt, int64_t max_new_tokens) const {
  check_tokens(prompt, "prompt");
  if (max_new_tokens < 0) throw std::invalid_argument("max_new_tokens = " + std::to_string(max_new_tokens) + ": negative");
  const int64_t positions = static_cast<int64_t>(prompt.size()) + std::max<int64_t>(max_new_tokens - 1, 0);
  if (positions > config_.seq_len) {
    throw std::invalid_argument("max_new_tokens = " + std::to_string(max_new_tokens) + ": prompt (" +
                                std::to_string(prompt.size()) + ") + max_new_tokens - 1 exceeds seq_len = " +
                                std::to_string(config_.seq_len));
  }
  std::vector<int32_t> generated;
  if (max_new_tokens == 0) return generated;
  Session session(*this);
  std::vector<double> last;
  for (int32_t token : prompt) last = session.step(token);
  while (true) {
    const int32_t next = first_argmax(last);
    if (next == 1) break;  // BOS ends the sequence, as in run.c
    generated.push_back(next);
    if (static_cast<int64_t>(generated.size()) == max_new_tokens) break;
    last = session.step(next);
  }
  return generated;
}

}  // namespace inferlab::testing
