#pragma once
/// @file model_shape.h
/// The shape of a llama-style decoder-only model (RMSNorm, rotary positions, grouped-query
/// attention, SwiGLU MLP) and the parameter counts that follow from it. This is all the
/// analytic calculator (`inferlab analyze`) needs to know about a model: weights bytes come from
/// the parameter counts, KV-cache bytes from the number of KV heads and the head dimension.
///
/// Parameters of one layer, hidden size H, FFN size F, head dimension d (H / num_heads unless
/// set), query width H_q = num_heads · d and KV width H_kv = num_kv_heads · d:
///  - attention: W_q (H × H_q), W_k and W_v (H × H_kv each), W_o (H_q × H);
///  - MLP (SwiGLU): gate, up and down projections, 3 · H · F;
///  - two RMSNorm weight vectors, 2 · H.
/// Plus the token embedding (vocab × H), the final norm (H) and the LM head (vocab × H), which is
/// a separate matrix (LLaMA) or the embedding table itself (tied embeddings: SmolLM2, Gemma).
/// LLaMA-7B: 32 · 202,383,360 + 2 · 131,072,000 + 4096 = 6,738,415,616 ≈ 6.74 B.
/// SmolLM2-135M (tied): 30 · 3,540,096 + 28,311,552 + 576 = 134,515,008 ≈ 134.5 M.

#include <cstdint>
#include <string>
#include <vector>

namespace inferlab::analysis {

/// The shape of a llama-style decoder-only transformer.
struct ModelShape {
  std::string name = "custom";   ///< display name, e.g. "LLaMA-7B"
  std::string key = "custom";    ///< the name `--model` accepts, e.g. "llama-7b"
  int64_t hidden_size = 0;       ///< H, the residual-stream width (usually num_heads · head_dim)
  int64_t num_layers = 0;        ///< transformer blocks
  int64_t num_heads = 0;         ///< query heads
  int64_t num_kv_heads = 0;      ///< key/value heads (= num_heads for MHA, fewer for GQA)
  int64_t ffn_size = 0;          ///< F, the MLP's inner width (SwiGLU: three H × F matrices)
  int64_t vocab_size = 0;        ///< tokens in the vocabulary (embedding and LM-head rows)
  int64_t head_dim_size = 0;     ///< d when set (> 0); 0: hidden_size / num_heads
  bool tied_embeddings = false;  ///< the LM head is the embedding table (one vocab × H matrix)

  /// d: head_dim_size when set, else hidden_size / num_heads.
  int64_t head_dim() const { return head_dim_size > 0 ? head_dim_size : hidden_size / num_heads; }
  /// H_q = num_heads · head_dim: the width of Q (and of the attention output) per token per layer.
  int64_t q_dim() const { return num_heads * head_dim(); }
  /// H_kv = num_kv_heads · head_dim: the width of K (and of V) per token per layer.
  int64_t kv_dim() const { return num_kv_heads * head_dim(); }
  /// Query heads served by one KV head (1 for MHA; 4 for Llama-3-8B).
  int64_t gqa_group_size() const { return num_heads / num_kv_heads; }

  /// Weights of the four attention projections of one layer: 2·H·H_q + 2·H·H_kv (2·H² + 2·H·H_kv
  /// when d = H / num_heads).
  int64_t attention_params_per_layer() const;
  /// Weights of the SwiGLU MLP of one layer: 3·H·F.
  int64_t mlp_params_per_layer() const;
  /// Weights of the linear layers of one block (attention + MLP): what a matrix multiply reads.
  int64_t matmul_params_per_layer() const { return attention_params_per_layer() + mlp_params_per_layer(); }
  /// The two RMSNorm weight vectors of one layer: 2·H.
  int64_t norm_params_per_layer() const { return 2 * hidden_size; }
  /// Linear-layer weights of all blocks: num_layers · matmul_params_per_layer().
  int64_t block_matmul_params() const { return num_layers * matmul_params_per_layer(); }
  /// The token-embedding table: vocab · H (a lookup reads only the rows of the batch's tokens).
  int64_t embedding_params() const { return vocab_size * hidden_size; }
  /// The matrix the LM head reads: vocab · H (with tied embeddings, the embedding table itself).
  int64_t lm_head_params() const { return vocab_size * hidden_size; }
  /// Parameters of the LM head that are not the embedding table: lm_head_params(), or 0 when tied.
  int64_t untied_lm_head_params() const { return tied_embeddings ? 0 : lm_head_params(); }
  /// All norm weights: per-layer norms plus the final norm.
  int64_t norm_params() const { return num_layers * norm_params_per_layer() + hidden_size; }
  /// Every parameter of the model (a tied head counted once, as the embedding table).
  int64_t total_params() const;
  /// Parameters that every forward pass streams from memory: the blocks, the norms and the LM
  /// head's matrix (tied or not); an untied embedding table is only looked up.
  int64_t streamed_params() const { return block_matmul_params() + norm_params() + lm_head_params(); }

  /// Throws std::invalid_argument naming the first field that is not valid (non-positive sizes;
  /// a negative head_dim_size; num_heads not dividing hidden_size when head_dim_size is not set;
  /// num_kv_heads not dividing num_heads).
  void validate() const;
  /// One line: "hidden 4096, 32 layers, 32 heads (head_dim 128), 32 KV heads (MHA), FFN 11008, vocab 32000"
  /// (", tied embeddings" appended when they are).
  std::string describe() const;
};

/// The built-in models: LLaMA-7B, LLaMA-2-13B, Llama-3-8B (GQA), SmolLM2-135M (GQA, tied
/// embeddings: a model this CPU decodes).
const std::vector<ModelShape>& builtin_models();

/// The built-in model called @p key (case-insensitive; "llama2-13b" and "llama3-8b" work too).
/// Throws std::invalid_argument("model = <key>: unknown (known: …)") otherwise.
const ModelShape& find_model(const std::string& key);

/// The FFN size llama uses when only H is known: 8H/3 rounded up to a multiple of 256
/// (11008 for H = 4096).
int64_t default_ffn_size(int64_t hidden_size);

}  // namespace inferlab::analysis
