#pragma once
/// @file 08-real-model/predictions.h
/// Chapter 08 — predict, then measure. Each function is a question about a real model's decode
/// step at batch 1: work the number out from the model's shape (for SmolLM2-135M-Instruct:
/// 30 layers, dim 576, FFN 1536, 9 query heads and 3 KV heads of 64, vocabulary 49152), write it
/// as a formula in `predictions.cpp`, then run the measurement named in its comment and compare.
/// The graded tests (tests/08-real-model/test_predictions.cpp) ask each question over several
/// models and formats — SmolLM2 as shipped, other shapes, fresh random ones — and accept an
/// answer within 1%. Units: bytes, GB/s = 1e9 bytes/s, tokens/s.
///
/// Bytes a weight takes, by format (block formats: 32 weights a block):
///
/// | format | bytes a weight | why |
/// | --- | --- | --- |
/// | f32 | 4 | |
/// | f16 | 2 | |
/// | q8_0 | 34/32 = 1.0625 | a block: fp16 d + 32 int8 codes = 34 bytes |
/// | q4_1 | 20/32 = 0.625 | a block: fp16 d + fp16 m + 16 bytes of 4-bit codes = 20 bytes |

#include <cstdint>

namespace inferlab::student {

/// A Llama-architecture model's shape, as the GGUF metadata gives it.
struct RealModelShape {
  int64_t layers = 0;      ///< transformer blocks (llama.block_count)
  int64_t dim = 0;         ///< embedding width (llama.embedding_length)
  int64_t hidden_dim = 0;  ///< SwiGLU's inner width (llama.feed_forward_length)
  int64_t heads = 0;       ///< query heads (llama.attention.head_count)
  int64_t kv_heads = 0;    ///< key/value heads (llama.attention.head_count_kv)
  int64_t head_dim = 0;    ///< dimension of each head
  int64_t vocab = 0;       ///< tokens in the vocabulary (rows of the output head)
};

/// The storage format of a set of matrices.
enum class WeightType {
  f32,   ///< 4 bytes a weight
  f16,   ///< 2 bytes a weight
  q8_0,  ///< 34 bytes per 32 weights
  q4_1,  ///< 20 bytes per 32 weights
};

/// Prediction P8.1 — the bytes of weights one decode step reads at batch 1 (every weight once).
///
/// Count: each layer's seven matrices in @p matrices — wq [heads·head_dim × dim], wk and wv
/// [kv_heads·head_dim × dim] each, wo [dim × heads·head_dim], and SwiGLU's gate, up [hidden_dim ×
/// dim] and down [dim × hidden_dim]; the output head [vocab × dim] in @p head (SmolLM2's is tied:
/// the head IS token_embd, stored Q8_0, read once, as the head); the norms in f32 (two of dim per
/// layer, and the final one). The embedding lookup reads one row: leave it out.
/// Worked example: SmolLM2 as shipped (Q4_1 matrices, Q8_0 head) reads 96.6 MB a token, of which
/// the head is 30.1 MB.
/// Then compare: `ls -l models/SmolLM2-135M-Instruct.Q4_1.gguf` — 98.4 MB, these tensors once
/// plus about 1.8 MB of vocabulary and metadata.
double predict_weight_bytes_per_token(const RealModelShape& model, WeightType matrices, WeightType head);

/// Prediction P8.2 — the tokens/s ceiling of batch-1 decode on a machine that reads
/// @p read_gbs GB/s, at a short context (the KV cache left out): each token must stream P8.1's
/// bytes. Real decoders reach a fraction of it (llama.cpp, two threads of a sister machine: 111
/// tokens/s on this file, 29% of its 37.5 GB/s read roof).
/// Then measure: `./inferlab roofline` prints this machine's read_gbs; time `./inferlab generate
/// --model smollm2` and compare its tokens/s with the ceiling.
double predict_tokens_per_second_ceiling(const RealModelShape& model, WeightType matrices, WeightType head,
                                         double read_gbs);

/// Prediction P8.3 — the bytes the KV cache holds per token, all layers: a K and a V row of
/// kv_heads·head_dim elements per layer, @p kv_element_bytes each (4 = fp32, 2 = fp16, 1 = int8
/// without its scales).
double predict_kv_bytes_per_token(const RealModelShape& model, double kv_element_bytes);

/// Prediction P8.4 — at @p context cached tokens, the ratio of the weight bytes (P8.1) to the KV
/// bytes (P8.3 × context) one batch-1 decode step reads: above 1 the weights dominate (quantize
/// the weights), below 1 the cache does (quantize the KV cache, chapter 04).
double predict_weight_to_kv_ratio(const RealModelShape& model, WeightType matrices, WeightType head,
                                  double kv_element_bytes, int64_t context);

}  // namespace inferlab::student
