#pragma once
/// @file llama_reference.h
/// The float64 oracle of a Llama-architecture model stored in llama2.c's legacy checkpoint
/// format: its own reader and its own forward, written apart from the engine in runtime/ so
/// that the two can check each other. The forward is the one llama2.c's run.c defines —
/// RMSNorm (eps 1e-5), RoPE on consecutive pairs (base 10000), causal grouped-query attention,
/// SwiGLU, a final RMSNorm and the classifier — computed entirely in double precision.

#include <cstdint>
#include <string>
#include <vector>

namespace inferlab::testing {

/// The header of a llama2.c checkpoint (7 int32), with the classifier's sign decoded.
struct LlamaReferenceConfig {
  int64_t dim = 0;                 ///< model width
  int64_t hidden_dim = 0;          ///< feed-forward width
  int64_t n_layers = 0;            ///< transformer blocks
  int64_t n_heads = 0;             ///< query heads (n_heads · head_size = dim)
  int64_t n_kv_heads = 0;          ///< key/value heads (divides n_heads)
  int64_t vocab_size = 0;          ///< tokens (always positive here)
  int64_t seq_len = 0;             ///< longest sequence the model was built for
  bool shared_classifier = true;   ///< true: logits use the token embedding (header vocab > 0);
                                   ///< false: a separate wcls follows (header vocab < 0)

  /// dim / n_heads.
  int64_t head_size() const { return dim / n_heads; }
  /// n_kv_heads · head_size.
  int64_t kv_dim() const { return n_kv_heads * head_size(); }
};

/// A llama2.c legacy checkpoint read into float64, and its forward in float64.
class LlamaReference {
 public:
  /// Reads the checkpoint at @p path. Throws std::invalid_argument naming the file and the bad
  /// field or size: a non-positive size, heads that do not divide dim (or n_kv_heads that does
  /// not divide n_heads, or an odd head size), a file shorter or longer than the header implies.
  explicit LlamaReference(const std::string& path);

  /// The checkpoint's header.
  const LlamaReferenceConfig& config() const { return config_; }

  /// Logits at every position for @p tokens: result[pos][vocab], causal (position p sees
  /// tokens 0..p only). Throws std::invalid_argument on an empty sequence, one longer than
  /// seq_len, or a token outside [0, vocab_size).
  std::vector<std::vector<double>> logits(const std::vector<int32_t>& tokens) const;

  /// Greedy generation as run.c does it: feeds @p prompt (position 0 first), then each new
  /// token; the next token is the first maximum of the logits; stops after @p max_new_tokens
  /// or when the next token would be 1 (BOS). Returns only the generated ids. Throws
  /// std::invalid_argument on an empty prompt, a bad token, a negative count, or when the
  /// positions needed (prompt + max_new_tokens - 1) exceed seq_len.
  std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, int64_t max_new_tokens) const;

 private:
  class Session;  // one sequence's float64 KV cache and the forward of one token

  /// One transformer block's weights, row-major out × in.
  struct Layer {
    std::vector<double> rms_att;  ///< [dim]
    std::vector<double> wq;       ///< [dim][dim]
    std::vector<double> wk;       ///< [kv_dim][dim]
    std::vector<double> wv;       ///< [kv_dim][dim]
    std::vector<double> wo;       ///< [dim][dim]
    std::vector<double> rms_ffn;  ///< [dim]
    std::vector<double> w1;       ///< [hidden][dim]
    std::vector<double> w2;       ///< [dim][hidden]
    std::vector<double> w3;       ///< [hidden][dim]
  };

  void check_tokens(const std::vector<int32_t>& tokens, const char* what) const;

  std::string path_;
  LlamaReferenceConfig config_;
  std::vector<double> token_embedding_;  ///< [vocab][dim]
  std::vector<Layer> layers_;
  std::vector<double> rms_final_;  ///< [dim]
  std::vector<double> wcls_;       ///< [vocab][dim] (a copy of the embedding when shared)
};

}  // namespace inferlab::testing
