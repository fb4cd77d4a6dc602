#pragma once
/// @file llama_weights.h
/// A Llama model's weights as the forward uses them, and the loaders that make them: llama2.c
/// checkpoint files (read and written) and seeded random weights. The weight *format* is the
/// loader's business: the forward sees fp32 matrices [out][in] (x_out = W · x_in), with the
/// three attention projections side by side (wqkv) and SwiGLU's two input projections side by
/// side (w13), so one linear layer serves each. A loader for another format (chapter 08's
/// block-quantized GGUF) produces the same structure.

#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "runtime/model/llama_config.h"

namespace inferlab::model {

/// One decoder block's weights.
struct LlamaLayerWeights {
  std::vector<float> attention_norm;  ///< [dim] RMSNorm weight before attention
  Tensor<float> wqkv;                 ///< [dim + 2·kv_dim, dim]: rows of wq, then wk, then wv
  Tensor<float> wo;                   ///< [dim, dim] attention output projection
  std::vector<float> ffn_norm;        ///< [dim] RMSNorm weight before the MLP
  Tensor<float> w13;                  ///< [2·hidden, dim]: rows of w1 (gate), then w3 (up)
  Tensor<float> w2;                   ///< [dim, hidden] down projection
};

/// All of a model's weights.
struct LlamaWeights {
  LlamaConfig config;                      ///< the shape
  Tensor<float> embedding;                 ///< [vocab, dim] token embedding
  std::vector<LlamaLayerWeights> layers;   ///< n_layers blocks
  std::vector<float> final_norm;           ///< [dim]
  Tensor<float> classifier;                ///< [vocab, dim]; empty when tied to the embedding

  /// The output head: the classifier, or the embedding when tied.
  const Tensor<float>& output_head() const { return config.shared_classifier ? embedding : classifier; }
};

/// Reads a llama2.c checkpoint (the legacy format: 7 int32 — dim, hidden_dim, n_layers, n_heads,
/// n_kv_heads, vocab_size (negative: a separate classifier follows), seq_len — then the fp32
/// weights in llama2.c's order, the legacy RoPE tables skipped). Throws std::invalid_argument
/// naming the file and what is wrong (missing, bad header, wrong size).
LlamaWeights load_llama2c(const std::string& path);

/// Writes @p weights as a llama2.c checkpoint that load_llama2c() (and llama2.c's run.c) reads.
/// Throws std::runtime_error when the file cannot be written.
void save_llama2c(const LlamaWeights& weights, const std::string& path);

/// Seeded random weights of shape @p config: matrices N(0, 1/in) so activations keep their
/// scale through the layers, norms 1 + N(0, 0.1²), embedding N(0, 1). The same seed gives the
/// same weights on every machine (common/rng.h's generator).
LlamaWeights random_llama(const LlamaConfig& config, uint64_t seed);

/// The model named @p spec: `random:<preset>[,key=value…]` (parse_random_spec()) or the path of a
/// llama2.c checkpoint.
LlamaWeights load_model(const std::string& spec);

}  // namespace inferlab::model
