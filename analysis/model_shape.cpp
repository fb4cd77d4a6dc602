#include "analysis/model_shape.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <stdexcept>

#include "common/check.h"

namespace inferlab::analysis {

int64_t ModelShape::attention_params_per_layer() const {
  return 2 * hidden_size * q_dim() + 2 * hidden_size * kv_dim();  // W_q, W_o; W_k, W_v
}

int64_t ModelShape::mlp_params_per_layer() const {
  return 3 * hidden_size * ffn_size;
}

int64_t ModelShape::total_params() const {
  return block_matmul_params() + norm_params() + embedding_params() + untied_lm_head_params();
}

void ModelShape::validate() const {
  require_positive("hidden_size", hidden_size);
  require_positive("num_layers", num_layers);
  require_positive("num_heads", num_heads);
  require_positive("num_kv_heads", num_kv_heads);
  require_positive("ffn_size", ffn_size);
  require_positive("vocab_size", vocab_size);
  require(head_dim_size >= 0, "head_dim", head_dim_size, "must be > 0 (or 0: hidden_size / num_heads)");
  require(head_dim_size > 0 || hidden_size % num_heads == 0, "num_heads", num_heads,
          "must divide hidden_size = " + std::to_string(hidden_size) + " (or give head_dim)");
  require(num_heads % num_kv_heads == 0, "num_kv_heads", num_kv_heads,
          "must divide num_heads = " + std::to_string(num_heads));
}

std::string ModelShape::describe() const {
  std::ostringstream out;
  out << "hidden " << hidden_size << ", " << num_layers << " layers, " << num_heads << " heads (head_dim " << head_dim()
      << "), " << num_kv_heads << " KV heads ";
  if (num_kv_heads == num_heads) {
    out << "(MHA)";
  } else {
    out << "(GQA, " << gqa_group_size() << " query heads per KV head)";
  }
  out << ", FFN " << ffn_size << ", vocab " << vocab_size;
  if (tied_embeddings) out << ", tied embeddings";
  return out.str();
}

const std::vector<ModelShape>& builtin_models() {
  // Shapes from the models' published configs (Touvron et al. 2023a/b; Meta's Llama 3 card;
  // HuggingFaceTB/SmolLM2-135M's config.json: tie_word_embeddings true, head_dim 576 / 9 = 64).
  static const std::vector<ModelShape> models = {
      {"LLaMA-7B", "llama-7b", 4096, 32, 32, 32, 11008, 32000, 0, false},
      {"LLaMA-2-13B", "llama-2-13b", 5120, 40, 40, 40, 13824, 32000, 0, false},
      {"Llama-3-8B", "llama-3-8b", 4096, 32, 32, 8, 14336, 128256, 0, false},
      {"SmolLM2-135M", "smollm2-135m", 576, 30, 9, 3, 1536, 49152, 64, true},
  };
  return models;
}

const ModelShape& find_model(const std::string& key) {
  std::string wanted = key;
  std::transform(wanted.begin(), wanted.end(), wanted.begin(), [](unsigned char c) { return std::tolower(c); });
  if (wanted == "llama2-13b") wanted = "llama-2-13b";
  if (wanted == "llama3-8b") wanted = "llama-3-8b";
  if (wanted == "smollm2" || wanted == "smollm2-135") wanted = "smollm2-135m";
  std::string known;
  for (const ModelShape& model : builtin_models()) {
    if (model.key == wanted) return model;
    known += (known.empty() ? "" : ", ") + model.key;
  }
  throw std::invalid_argument("model = " + key + ": unknown (known: " + known + ", or custom shape flags)");
}

int64_t default_ffn_size(int64_t hidden_size) {
  const int64_t two_thirds_of_4h = (8 * hidden_size + 2) / 3;  // ceil(8H/3)
  return (two_thirds_of_4h + 255) / 256 * 256;
}

}  // namespace inferlab::analysis
