#include "runtime/model/gguf_model.h"

#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/check.h"

namespace inferlab::model {
namespace {

[[noreturn]] void fail(const gguf::GgufFile& file, const std::string& what) {
  throw std::invalid_argument("GGUF model " + file.path() + ": " + what);
}

// The WeightFormat a GGUF tensor of @p type is read in, or a clear error.
WeightFormat weight_format(const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  using quant::GgmlType;
  switch (t.type) {
    case GgmlType::f32: return WeightFormat::f32;
    case GgmlType::f16: return WeightFormat::f16;
    case GgmlType::bf16: return WeightFormat::bf16;
    case GgmlType::q8_0: return WeightFormat::q8_0;
    case GgmlType::q4_0: return WeightFormat::q4_0;
    case GgmlType::q4_1: return WeightFormat::q4_1;
    default: break;
  }
  fail(file, "tensor " + t.name + " is " + std::string(quant::to_string(t.type)) +
                 ", not a weight format the lab computes with (F32, F16, BF16, Q8_0, Q4_0, Q4_1)");
}

// The tensor @p name, checked to have shape ne = [in, out] (a weight W[out × in]).
const gguf::TensorInfo& matrix_info(const gguf::GgufFile& file, const std::string& name, int64_t out, int64_t in) {
  const gguf::TensorInfo& t = file.tensor(name);
  if (t.ne.size() != 2 || t.ne[0] != in || t.ne[1] != out)
    fail(file, "tensor " + name + " has ne " + to_string(Shape(t.ne.begin(), t.ne.end())) + ", expected [" +
                   std::to_string(in) + ", " + std::to_string(out) + "] (in, out) from the metadata");
  return t;
}

// The weight @p name as a view of the file's mapping.
Weight matrix(const gguf::GgufFile& file, const std::string& name, int64_t out, int64_t in) {
  const gguf::TensorInfo& t = matrix_info(file, name, out, in);
  return Weight::view(weight_format(file, t), out, in, file.data(t), file.storage());
}

// The rows of @p names stacked in order (each [rows_i × in], one format): one copy of their bytes.
Weight fused(const gguf::GgufFile& file, const std::vector<std::pair<std::string, int64_t>>& names, int64_t in) {
  std::vector<const gguf::TensorInfo*> parts;
  int64_t rows = 0;
  size_t bytes = 0;
  for (const auto& [name, out] : names) {
    parts.push_back(&matrix_info(file, name, out, in));
    if (parts.back()->type != parts.front()->type)
      fail(file, "tensors " + names.front().first + " and " + name + " have different types (" +
                     std::string(quant::to_string(parts.front()->type)) + ", " +
                     std::string(quant::to_string(parts.back()->type)) + "): the lab fuses them into one matrix");
    rows += out;
    bytes += parts.back()->bytes;
  }
  auto storage = std::make_shared<std::vector<uint8_t>>(bytes);
  size_t at = 0;
  for (const gguf::TensorInfo* t : parts) {
    const std::span<const uint8_t> src = file.data(*t);
    std::memcpy(storage->data() + at, src.data(), src.size());
    at += src.size();
  }
  const std::span<const uint8_t> all(storage->data(), storage->size());
  return Weight::view(weight_format(file, *parts.front()), rows, in, all, storage);
}

// The fp32 vector @p name of @p n values (a norm weight).
std::vector<float> vector_f32(const gguf::GgufFile& file, const std::string& name, int64_t n) {
  const gguf::TensorInfo& t = file.tensor(name);
  if (t.ne.size() != 1 || t.ne[0] != n)
    fail(file, "tensor " + name + " has ne " + to_string(Shape(t.ne.begin(), t.ne.end())) + ", expected [" +
                   std::to_string(n) + "] from the metadata");
  if (t.type != quant::GgmlType::f32)
    fail(file, "tensor " + name + " is " + std::string(quant::to_string(t.type)) + "; norm weights must be F32");
  std::vector<float> v(static_cast<size_t>(n));
  std::memcpy(v.data(), file.data(t).data(), size_t(n) * sizeof(float));
  return v;
}

int64_t positive(const gguf::GgufFile& file, const std::string& key) {
  const uint64_t v = file.get_uint(key);
  if (v == 0 || v > uint64_t(INT32_MAX)) fail(file, key + " = " + std::to_string(v) + " is out of range");
  return int64_t(v);
}

}  // namespace

LlamaConfig gguf_llama_config(const gguf::GgufFile& file) {
  const std::string arch = file.get_string("general.architecture");
  if (arch != "llama") fail(file, "general.architecture is '" + arch + "'; the lab reads llama models");
  LlamaConfig c;
  c.dim = positive(file, "llama.embedding_length");
  c.hidden_dim = positive(file, "llama.feed_forward_length");
  c.n_layers = positive(file, "llama.block_count");
  c.n_heads = positive(file, "llama.attention.head_count");
  c.n_kv_heads = file.find("llama.attention.head_count_kv") ? positive(file, "llama.attention.head_count_kv") : c.n_heads;
  c.max_seq_len = positive(file, "llama.context_length");
  if (file.find("llama.attention.key_length"))
    c.head_dim_size = positive(file, "llama.attention.key_length");
  else if (file.find("llama.rope.dimension_count"))
    c.head_dim_size = positive(file, "llama.rope.dimension_count");
  if (c.head_dim_size * c.n_heads == c.dim) c.head_dim_size = 0;  // the llama2.c default, said once
  c.rope_style = RopeStyle::adjacent;
  c.rope_theta = file.find("llama.rope.freq_base") ? file.get_float("llama.rope.freq_base") : 10000.0;
  c.norm_eps = float(file.get_float("llama.attention.layer_norm_rms_epsilon"));
  const gguf::TensorInfo& embedding = file.tensor("token_embd.weight");
  if (embedding.ne.size() != 2 || embedding.ne[0] != c.dim)
    fail(file, "token_embd.weight has ne " + to_string(Shape(embedding.ne.begin(), embedding.ne.end())) +
                   ", expected [" + std::to_string(c.dim) + ", vocab]");
  c.vocab_size = embedding.ne[1];
  if (file.find("llama.vocab_size") && int64_t(file.get_uint("llama.vocab_size")) != c.vocab_size)
    fail(file, "llama.vocab_size = " + std::to_string(file.get_uint("llama.vocab_size")) +
                   " but token_embd.weight has " + std::to_string(c.vocab_size) + " rows");
  c.shared_classifier = file.find_tensor("output.weight") == nullptr;
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    fail(file, std::string("the metadata gives an invalid shape: ") + e.what());
  }
  return c;
}

LlamaWeights load_gguf_weights(const gguf::GgufFile& file) {
  LlamaWeights w;
  w.config = gguf_llama_config(file);
  const LlamaConfig& c = w.config;
  w.embedding = matrix(file, "token_embd.weight", c.vocab_size, c.dim);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LlamaLayerWeights l;
    l.attention_norm = vector_f32(file, p + "attn_norm.weight", c.dim);
    l.wqkv = fused(file, {{p + "attn_q.weight", c.q_dim()}, {p + "attn_k.weight", c.kv_dim()}, {p + "attn_v.weight", c.kv_dim()}},
                   c.dim);
    l.wo = matrix(file, p + "attn_output.weight", c.dim, c.q_dim());
    l.ffn_norm = vector_f32(file, p + "ffn_norm.weight", c.dim);
    l.w13 = fused(file, {{p + "ffn_gate.weight", c.hidden_dim}, {p + "ffn_up.weight", c.hidden_dim}}, c.dim);
    l.w2 = matrix(file, p + "ffn_down.weight", c.dim, c.hidden_dim);
    w.layers.push_back(std::move(l));
  }
  w.final_norm = vector_f32(file, "output_norm.weight", c.dim);
  if (!c.shared_classifier) w.classifier = matrix(file, "output.weight", c.vocab_size, c.dim);
  w.validate();
  return w;
}

LlamaWeights load_gguf(const std::string& path) { return load_gguf_weights(gguf::GgufFile::open(path)); }

bool is_gguf_path(const std::string& path) {
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) return true;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace inferlab::model
