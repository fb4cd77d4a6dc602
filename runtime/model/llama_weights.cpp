#include "runtime/model/llama_weights.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>

#include "common/check.h"
#include "common/rng.h"

namespace inferlab::model {
namespace {

// Reads the checkpoint's floats in order, with the file's name and a clear error when it ends.
class FloatReader {
 public:
  FloatReader(std::ifstream& in, const std::string& path) : in_(in), path_(path) {}
  void read(float* dst, int64_t count, const char* what) {
    in_.read(reinterpret_cast<char*>(dst), std::streamsize(count * 4));
    if (!in_) throw std::invalid_argument("model file " + path_ + ": ends inside " + what + " (truncated?)");
  }
  void skip(int64_t count) { in_.seekg(std::streamoff(count * 4), std::ios::cur); }

 private:
  std::ifstream& in_;
  std::string path_;
};

// Reads rows [row0, row0 + n) of matrix @p m ([*, in]) for each of @p layers layers: llama2.c
// stores each weight kind for all layers together.
void read_rows(FloatReader& r, std::vector<LlamaLayerWeights>& layers, Tensor<float> LlamaLayerWeights::*m,
               int64_t row0, int64_t n, const char* what) {
  for (auto& layer : layers) {
    Tensor<float>& t = layer.*m;
    r.read(t.data() + row0 * t.dim(1), n * t.dim(1), what);
  }
}

void write_floats(std::ofstream& out, const float* p, int64_t count) {
  out.write(reinterpret_cast<const char*>(p), std::streamsize(count * 4));
}

LlamaWeights empty_weights(const LlamaConfig& c) {
  LlamaWeights w;
  w.config = c;
  w.embedding = Tensor<float>({c.vocab_size, c.dim});
  w.layers.resize(size_t(c.n_layers));
  for (auto& l : w.layers) {
    l.attention_norm.resize(size_t(c.dim));
    l.wqkv = Tensor<float>({c.dim + 2 * c.kv_dim(), c.dim});
    l.wo = Tensor<float>({c.dim, c.dim});
    l.ffn_norm.resize(size_t(c.dim));
    l.w13 = Tensor<float>({2 * c.hidden_dim, c.dim});
    l.w2 = Tensor<float>({c.dim, c.hidden_dim});
  }
  w.final_norm.resize(size_t(c.dim));
  if (!c.shared_classifier) w.classifier = Tensor<float>({c.vocab_size, c.dim});
  return w;
}

}  // namespace

LlamaWeights load_llama2c(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("model file " + path + ": cannot be opened");
  int32_t header[7];
  in.read(reinterpret_cast<char*>(header), sizeof header);
  if (!in) throw std::invalid_argument("model file " + path + ": shorter than the 28-byte llama2.c header");
  LlamaConfig c;
  c.dim = header[0], c.hidden_dim = header[1], c.n_layers = header[2], c.n_heads = header[3];
  c.n_kv_heads = header[4], c.vocab_size = header[5] < 0 ? -int64_t(header[5]) : header[5];
  c.max_seq_len = header[6], c.shared_classifier = header[5] > 0;
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("model file " + path + ": bad llama2.c header: " + e.what());
  }
  const int64_t half_head = c.head_dim() / 2;
  const int64_t expected = 28 + 4 * (c.parameters() + 2 * c.max_seq_len * half_head);
  const auto size = int64_t(std::filesystem::file_size(path));
  require(size == expected, "model file " + path + " size", size,
          "a llama2.c checkpoint of " + c.describe() + " has " + std::to_string(expected) + " bytes");

  LlamaWeights w = empty_weights(c);
  FloatReader r(in, path);
  const int64_t dim = c.dim, kv = c.kv_dim(), hidden = c.hidden_dim;
  r.read(w.embedding.data(), w.embedding.size(), "token_embedding");
  for (auto& l : w.layers) r.read(l.attention_norm.data(), dim, "rms_att");
  read_rows(r, w.layers, &LlamaLayerWeights::wqkv, 0, dim, "wq");
  read_rows(r, w.layers, &LlamaLayerWeights::wqkv, dim, kv, "wk");
  read_rows(r, w.layers, &LlamaLayerWeights::wqkv, dim + kv, kv, "wv");
  read_rows(r, w.layers, &LlamaLayerWeights::wo, 0, dim, "wo");
  for (auto& l : w.layers) r.read(l.ffn_norm.data(), dim, "rms_ffn");
  read_rows(r, w.layers, &LlamaLayerWeights::w13, 0, hidden, "w1");
  read_rows(r, w.layers, &LlamaLayerWeights::w2, 0, dim, "w2");
  read_rows(r, w.layers, &LlamaLayerWeights::w13, hidden, hidden, "w3");
  r.read(w.final_norm.data(), dim, "rms_final");
  r.skip(2 * c.max_seq_len * half_head);  // the legacy RoPE tables: recomputed, not read
  if (!c.shared_classifier) r.read(w.classifier.data(), w.classifier.size(), "wcls");
  return w;
}

void save_llama2c(const LlamaWeights& w, const std::string& path) {
  const LlamaConfig& c = w.config;
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("model file " + path + ": cannot be written");
  const int32_t header[7] = {int32_t(c.dim),        int32_t(c.hidden_dim),
                             int32_t(c.n_layers),   int32_t(c.n_heads),
                             int32_t(c.n_kv_heads), int32_t(c.shared_classifier ? c.vocab_size : -c.vocab_size),
                             int32_t(c.max_seq_len)};
  out.write(reinterpret_cast<const char*>(header), sizeof header);
  const int64_t dim = c.dim, kv = c.kv_dim(), hidden = c.hidden_dim;
  const auto rows = [&](Tensor<float> LlamaLayerWeights::*m, int64_t row0, int64_t n) {
    for (const auto& l : w.layers) write_floats(out, (l.*m).data() + row0 * (l.*m).dim(1), n * (l.*m).dim(1));
  };
  write_floats(out, w.embedding.data(), w.embedding.size());
  for (const auto& l : w.layers) write_floats(out, l.attention_norm.data(), dim);
  rows(&LlamaLayerWeights::wqkv, 0, dim);
  rows(&LlamaLayerWeights::wqkv, dim, kv);
  rows(&LlamaLayerWeights::wqkv, dim + kv, kv);
  rows(&LlamaLayerWeights::wo, 0, dim);
  for (const auto& l : w.layers) write_floats(out, l.ffn_norm.data(), dim);
  rows(&LlamaLayerWeights::w13, 0, hidden);
  rows(&LlamaLayerWeights::w2, 0, dim);
  rows(&LlamaLayerWeights::w13, hidden, hidden);
  write_floats(out, w.final_norm.data(), dim);
  const std::vector<float> legacy_rope(size_t(2 * c.max_seq_len * (c.head_dim() / 2)), 0.0f);  // unused by readers
  write_floats(out, legacy_rope.data(), int64_t(legacy_rope.size()));
  if (!c.shared_classifier) write_floats(out, w.classifier.data(), w.classifier.size());
  if (!out) throw std::runtime_error("model file " + path + ": write failed");
}

LlamaWeights random_llama(const LlamaConfig& config, uint64_t seed) {
  config.validate();
  LlamaWeights w = empty_weights(config);
  Rng rng(seed);
  const auto matrix = [&](Tensor<float>& m) {
    rng.fill_normal(m.span(), 0.0f, 1.0f / std::sqrt(float(m.dim(1))));
  };
  const auto norm = [&](std::vector<float>& v) {
    for (float& x : v) x = 1.0f + rng.normal(0.0f, 0.1f);
  };
  rng.fill_normal(w.embedding.span(), 0.0f, 1.0f);
  for (auto& l : w.layers) {
    norm(l.attention_norm);
    matrix(l.wqkv);
    matrix(l.wo);
    norm(l.ffn_norm);
    matrix(l.w13);
    matrix(l.w2);
  }
  norm(w.final_norm);
  if (!config.shared_classifier) matrix(w.classifier);
  return w;
}

LlamaWeights load_model(const std::string& spec) {
  if (spec.rfind("random:", 0) == 0) {
    const RandomModelSpec r = parse_random_spec(spec);
    return random_llama(r.config, r.seed);
  }
  return load_llama2c(spec);
}

}  // namespace inferlab::model
