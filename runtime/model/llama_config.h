#pragma once
/// @file llama_config.h
/// The shape of a Llama-architecture decoder (chapter 07): embedding, n_layers blocks of
/// RMSNorm → GQA attention with RoPE → residual, RMSNorm → SwiGLU MLP → residual, a final RMSNorm
/// and the output head (tied to the embedding or separate) — and the names of the models the lab
/// can build: a llama2.c checkpoint file, or `random:<preset>[,key=value…]` seeded random weights.
///
/// Besides llama2.c's seven sizes the config holds what other model files state and llama2.c
/// fixes: the head width (head_dim: dim / n_heads unless set, so Q's width q_dim() may differ from
/// dim), the RoPE style (which elements form a rotated pair) and base θ, and RMSNorm's ε. A
/// llama2.c checkpoint always has the defaults.

#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/layers/layers.h"
#include "kernels/layers/weight.h"

namespace inferlab::model {

/// Sizes and constants of a Llama-style model (llama2.c's Config, plus the constants its run.c
/// fixes: head_dim = dim / n_heads, adjacent-pair RoPE with θ = 10000, RMSNorm ε = 1e-5).
struct LlamaConfig {
  int64_t dim = 0;                             ///< residual stream width
  int64_t hidden_dim = 0;                      ///< SwiGLU hidden width
  int64_t n_layers = 0;                        ///< decoder blocks
  int64_t n_heads = 0;                         ///< query heads
  int64_t n_kv_heads = 0;                      ///< key/value heads (GQA: n_heads / n_kv_heads query heads share one)
  int64_t vocab_size = 0;                      ///< token ids 0 … vocab_size − 1
  int64_t max_seq_len = 0;                     ///< positions the model supports (the RoPE table's length)
  int64_t head_dim_size = 0;                   ///< width of one attention head; 0: dim / n_heads (llama2.c)
  bool shared_classifier = true;               ///< the output head is the token embedding (tied)
  RopeStyle rope_style = RopeStyle::adjacent;  ///< which elements of a head RoPE rotates together
  double rope_theta = 10000.0;                 ///< RoPE base θ
  float norm_eps = 1e-5f;                      ///< RMSNorm ε

  /// The width of one attention head: head_dim_size when set, else dim / n_heads.
  int64_t head_dim() const { return head_dim_size > 0 ? head_dim_size : dim / n_heads; }
  /// n_heads · head_dim: the width of Q per token, and the input width of wo (it need not equal
  /// dim: SmolLM2 and Llama have q_dim = dim, Gemma does not).
  int64_t q_dim() const { return n_heads * head_dim(); }
  /// n_kv_heads · head_dim: the width of K (and of V) per token.
  int64_t kv_dim() const { return n_kv_heads * head_dim(); }
  /// Parameters, counting a tied head once: the matrices' and the norms'.
  int64_t parameters() const;
  /// Parameters of the RMSNorm weights: (2 · n_layers + 1) · dim. They stay fp32 in every format.
  int64_t norm_parameters() const { return (2 * n_layers + 1) * dim; }
  /// Bytes of the weights with every matrix in @p format and the norms in fp32 (what
  /// LlamaWeights::bytes() of this shape in that format is).
  int64_t weight_bytes(WeightFormat format) const;
  /// Bytes of fp32 K and V per token, all layers.
  int64_t kv_bytes_per_token() const { return 2 * 4 * n_layers * kv_dim(); }
  /// Throws std::invalid_argument naming the first field that is not positive or not consistent
  /// (n_heads must divide dim when head_dim_size is 0, n_kv_heads divide n_heads, head_dim be
  /// even, head_dim_size not negative, rope_theta finite and > 0, norm_eps finite and > 0,
  /// rope_style one of the enum's), with its value.
  void validate() const;
  /// "dim 64, hidden 172, 5 layers, 8 heads / 4 KV heads (head_dim 8), vocab 512, 512 positions,
  /// tied output head", with q_dim when it is not dim and the RoPE style and θ when they are not
  /// llama2.c's (adjacent, 10000).
  std::string describe() const;
};

/// A random model's recipe: its shape and the seed of its weights.
struct RandomModelSpec {
  LlamaConfig config;  ///< the shape
  uint64_t seed = 1;   ///< weights are a function of it
};

/// Parses `random:<preset>[,key=value…]` (or `random:key=value,…`, starting from the `tiny`
/// preset). Presets: `tiny` (dim 32, 2 layers, 4/2 heads, vocab 64, separate output head — for
/// tests), `stories260K`
/// (the shape of models/stories260K.bin), `bench` (dim 768, 12 layers, 12/4 heads, hidden 2048,
/// vocab 32000 — about 100 M parameters: big enough that a decode step's time is the kernels',
/// not the overheads'). Keys: dim, hidden, layers, heads, kv_heads, vocab, seq_len, seed,
/// tied (0 or 1), head_dim (0: dim / heads), rope (adjacent or half_split), theta (RoPE base, a
/// number such as 10000 or 1e5). Throws std::invalid_argument naming an unknown preset or key,
/// or a bad value.
RandomModelSpec parse_random_spec(std::string_view spec);

}  // namespace inferlab::model
