#include "runtime/model/llama_weights.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/check.h"
#include "common/rng.h"
#include "common/tensor.h"
#include "runtime/model/gguf_model.h"

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

// The weights while a loader fills them: fp32 tensors it can write into, made Weights at the end
// (without a copy) by typed().
struct F32Layer {
  std::vector<float> attention_norm, ffn_norm;
  Tensor<float> wqkv, wo, w13, w2;
};
struct F32Weights {
  LlamaConfig config;
  Tensor<float> embedding, classifier;
  std::vector<F32Layer> layers;
  std::vector<float> final_norm;
};

// Reads rows [row0, row0 + n) of matrix @p m ([*, in]) for each of @p layers layers: llama2.c
// stores each weight kind for all layers together.
void read_rows(FloatReader& r, std::vector<F32Layer>& layers, Tensor<float> F32Layer::*m, int64_t row0, int64_t n,
               const char* what) {
  for (auto& layer : layers) {
    Tensor<float>& t = layer.*m;
    r.read(t.data() + row0 * t.dim(1), n * t.dim(1), what);
  }
}

void write_floats(std::ofstream& out, const float* p, int64_t count) {
  out.write(reinterpret_cast<const char*>(p), std::streamsize(count * 4));
}

F32Weights empty_weights(const LlamaConfig& c) {
  F32Weights w;
  w.config = c;
  w.embedding = Tensor<float>({c.vocab_size, c.dim});
  w.layers.resize(size_t(c.n_layers));
  for (auto& l : w.layers) {
    l.attention_norm.resize(size_t(c.dim));
    l.wqkv = Tensor<float>({c.q_dim() + 2 * c.kv_dim(), c.dim});
    l.wo = Tensor<float>({c.dim, c.q_dim()});
    l.ffn_norm.resize(size_t(c.dim));
    l.w13 = Tensor<float>({2 * c.hidden_dim, c.dim});
    l.w2 = Tensor<float>({c.dim, c.hidden_dim});
  }
  w.final_norm.resize(size_t(c.dim));
  if (!c.shared_classifier) w.classifier = Tensor<float>({c.vocab_size, c.dim});
  return w;
}

// The fp32 tensors as fp32 Weights, moved (no copy, no rounding).
LlamaWeights typed(F32Weights&& f) {
  LlamaWeights w;
  w.config = f.config;
  w.embedding = Weight(std::move(f.embedding));
  for (F32Layer& l : f.layers)
    w.layers.push_back({std::move(l.attention_norm), Weight(std::move(l.wqkv)), Weight(std::move(l.wo)),
                        std::move(l.ffn_norm), Weight(std::move(l.w13)), Weight(std::move(l.w2))});
  w.final_norm = std::move(f.final_norm);
  if (!w.config.shared_classifier) w.classifier = Weight(std::move(f.classifier));
  return w;
}

// @p w in @p format: kept when it is already, else widened to fp32 and rounded once.
Weight converted(Weight w, WeightFormat format) {
  if (w.format() == format || w.empty()) return w;
  if (w.format() == WeightFormat::f32) return Weight::convert(w.f32(), format);
  return Weight::convert(w.to_f32(), format);
}

void require_shape(const Weight& w, const Shape& want, const std::string& name) {
  if (w.shape() != want)
    require(false, name + ".shape", to_string(w.shape()), "must be " + to_string(want) + " for this config");
}

void require_size(const std::vector<float>& v, int64_t want, const std::string& name) {
  if (int64_t(v.size()) != want)
    require(false, name + ".size()", v.size(), "must be " + std::to_string(want) + " (dim) for this config");
}

// The matrix @p w as fp32 for the writer: its own storage, or widened (exactly) into @p scratch.
const Tensor<float>& as_f32(const Weight& w, Tensor<float>& scratch) {
  if (w.format() == WeightFormat::f32) return w.f32();
  scratch = w.to_f32();
  return scratch;
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

  F32Weights w = empty_weights(c);
  FloatReader r(in, path);
  const int64_t dim = c.dim, kv = c.kv_dim(), hidden = c.hidden_dim;
  r.read(w.embedding.data(), w.embedding.size(), "token_embedding");
  for (auto& l : w.layers) r.read(l.attention_norm.data(), dim, "rms_att");
  read_rows(r, w.layers, &F32Layer::wqkv, 0, dim, "wq");
  read_rows(r, w.layers, &F32Layer::wqkv, dim, kv, "wk");
  read_rows(r, w.layers, &F32Layer::wqkv, dim + kv, kv, "wv");
  read_rows(r, w.layers, &F32Layer::wo, 0, dim, "wo");
  for (auto& l : w.layers) r.read(l.ffn_norm.data(), dim, "rms_ffn");
  read_rows(r, w.layers, &F32Layer::w13, 0, hidden, "w1");
  read_rows(r, w.layers, &F32Layer::w2, 0, dim, "w2");
  read_rows(r, w.layers, &F32Layer::w13, hidden, hidden, "w3");
  r.read(w.final_norm.data(), dim, "rms_final");
  r.skip(2 * c.max_seq_len * half_head);  // the legacy RoPE tables: recomputed, not read
  if (!c.shared_classifier) r.read(w.classifier.data(), w.classifier.size(), "wcls");
  return typed(std::move(w));
}

void save_llama2c(const LlamaWeights& w, const std::string& path) {
  const LlamaConfig& c = w.config;
  w.validate();
  // llama2.c's run.c fixes what these fields state: a file cannot say otherwise.
  require(c.head_dim() * c.n_heads == c.dim, "head_dim", c.head_dim(),
          "must be dim / n_heads = " + std::to_string(c.dim / c.n_heads) + " in a llama2.c checkpoint");
  require(c.rope_style == RopeStyle::adjacent, "rope_style", to_string(c.rope_style),
          "must be adjacent in a llama2.c checkpoint");
  require(c.rope_theta == 10000.0, "rope_theta", c.rope_theta, "must be 10000 in a llama2.c checkpoint");
  require(c.norm_eps == 1e-5f, "norm_eps", c.norm_eps, "must be 1e-5 in a llama2.c checkpoint");
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("model file " + path + ": cannot be written");
  const int32_t header[7] = {int32_t(c.dim),        int32_t(c.hidden_dim),
                             int32_t(c.n_layers),   int32_t(c.n_heads),
                             int32_t(c.n_kv_heads), int32_t(c.shared_classifier ? c.vocab_size : -c.vocab_size),
                             int32_t(c.max_seq_len)};
  out.write(reinterpret_cast<const char*>(header), sizeof header);
  const int64_t dim = c.dim, kv = c.kv_dim(), hidden = c.hidden_dim;
  Tensor<float> scratch;
  const auto rows = [&](Weight LlamaLayerWeights::*m, int64_t row0, int64_t n) {
    for (const auto& l : w.layers) {
      const Tensor<float>& t = as_f32(l.*m, scratch);
      write_floats(out, t.data() + row0 * t.dim(1), n * t.dim(1));
    }
  };
  const auto matrix = [&](const Weight& m) {
    const Tensor<float>& t = as_f32(m, scratch);
    write_floats(out, t.data(), t.size());
  };
  matrix(w.embedding);
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
  if (!c.shared_classifier) matrix(w.classifier);
  if (!out) throw std::runtime_error("model file " + path + ": write failed");
}

LlamaWeights random_llama(const LlamaConfig& config, uint64_t seed) {
  config.validate();
  F32Weights w = empty_weights(config);
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
  return typed(std::move(w));
}

int64_t LlamaWeights::bytes() const {
  int64_t total = embedding.bytes() + classifier.bytes();  // a tied head has no classifier: counted once
  int64_t norms = int64_t(final_norm.size());  // a middle pipeline stage has no final norm
  for (const LlamaLayerWeights& l : layers) {
    total += l.wqkv.bytes() + l.wo.bytes() + l.w13.bytes() + l.w2.bytes();
    norms += int64_t(l.attention_norm.size() + l.ffn_norm.size());
  }
  return total + 4 * norms;
}

void LlamaWeights::validate() const {
  const LlamaConfig& c = config;
  c.validate();
  const TensorShard& t = shard;
  require(t.ranks >= 1 && t.rank >= 0 && t.rank < t.ranks, "shard.rank", t.rank,
          "must be in [0, ranks = " + std::to_string(t.ranks) + ")");
  require(t.vocab_begin >= 0 && t.vocab_rows >= 0 && t.vocab_begin + t.rows(c.vocab_size) <= c.vocab_size,
          "shard.vocab_begin", t.vocab_begin,
          "with " + std::to_string(t.rows(c.vocab_size)) + " rows must lie in [0, vocab_size = " +
              std::to_string(c.vocab_size) + ")");
  const PipelineStage& p = stage;
  require(p.stages >= 1 && p.stage >= 0 && p.stage < p.stages, "stage.stage", p.stage,
          "must be in [0, stages = " + std::to_string(p.stages) + ")");
  require(!(p.split() && t.split()), "stage.stages", p.stages,
          "a tensor-parallel shard (shard.ranks = " + std::to_string(t.ranks) + ") cannot also be a pipeline stage");
  require(p.micro_batches >= 1, "stage.micro_batches", p.micro_batches, "must be at least 1");
  require(p.layer_begin >= 0, "stage.layer_begin", p.layer_begin, "must not be negative");
  const int64_t vocab_rows = t.rows(c.vocab_size);
  // The embedding is the first stage's, and the last's when the head is tied to it.
  const bool holds_embedding = p.first() || (p.last() && c.shared_classifier);
  if (holds_embedding)
    require_shape(embedding, {vocab_rows, c.dim}, "embedding");
  else
    require(embedding.empty(), "embedding.shape", to_string(embedding.shape()),
            "must be empty: pipeline stage " + std::to_string(p.stage) + " neither embeds nor computes tied logits");
  require(int64_t(layers.size()) == c.n_layers, "layers.size()", layers.size(),
          "must be n_layers = " + std::to_string(c.n_layers));
  for (size_t i = 0; i < layers.size(); ++i) {
    const LlamaLayerWeights& l = layers[i];
    const std::string name = "layers[" + std::to_string(i) + "].";
    require_size(l.attention_norm, c.dim, name + "attention_norm");
    require_shape(l.wqkv, {c.q_dim() + 2 * c.kv_dim(), c.dim}, name + "wqkv");
    require_shape(l.wo, {c.dim, c.q_dim()}, name + "wo");
    require_size(l.ffn_norm, c.dim, name + "ffn_norm");
    require_shape(l.w13, {2 * c.hidden_dim, c.dim}, name + "w13");
    require_shape(l.w2, {c.dim, c.hidden_dim}, name + "w2");
  }
  if (!p.last()) {  // a stage before the last hands its activations on: no final norm, no head
    require(final_norm.empty(), "final_norm.size()", final_norm.size(),
            "must be 0: only the last pipeline stage holds the final norm");
    require(classifier.empty(), "classifier.shape", to_string(classifier.shape()),
            "must be empty: only the last pipeline stage holds the output head");
    return;
  }
  require_size(final_norm, c.dim, "final_norm");
  if (c.shared_classifier)
    require(classifier.empty(), "classifier.shape", to_string(classifier.shape()), "must be empty: the head is tied");
  else
    require_shape(classifier, {vocab_rows, c.dim}, "classifier");
}

LlamaWeights convert_weights(LlamaWeights w, WeightFormat format) {
  w.embedding = converted(std::move(w.embedding), format);
  for (LlamaLayerWeights& l : w.layers) {
    l.wqkv = converted(std::move(l.wqkv), format);
    l.wo = converted(std::move(l.wo), format);
    l.w13 = converted(std::move(l.w13), format);
    l.w2 = converted(std::move(l.w2), format);
  }
  w.classifier = converted(std::move(w.classifier), format);
  return w;
}

LlamaWeights load_model(const std::string& spec, std::optional<WeightFormat> format) {
  LlamaWeights w;
  if (spec.rfind("random:", 0) == 0) {
    const RandomModelSpec r = parse_random_spec(spec);
    w = random_llama(r.config, r.seed);
  } else if (is_gguf_path(spec)) {
    w = load_gguf(spec);
  } else {
    w = load_llama2c(spec);
  }
  return format ? convert_weights(std::move(w), *format) : w;
}

}  // namespace inferlab::model
