#pragma once
/// @file llama_weights.h
/// A Llama model's weights as the forward uses them, and the loaders that make them: llama2.c
/// checkpoint files (read and written) and seeded random weights. Every matrix is a Weight
/// (kernels/layers/weight.h: fp32, fp16 or bf16, [out][in] with x_out = W · x_in), the three
/// attention projections side by side (wqkv) and SwiGLU's two input projections side by side
/// (w13), so one linear layer serves each; the RMSNorm weights stay fp32 vectors (a few
/// thousand numbers, read once a step). The token embedding is a Weight too, read one row per
/// token (Weight::row_to_f32(), widened to fp32) — and read whole by the output head when tied.
/// The loaders read fp32 and round every matrix to the format asked for (convert_weights()); a
/// loader for another file format (chapter 08's block-quantized GGUF) produces the same
/// structure with its own formats.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/layers/weight.h"
#include "runtime/model/llama_config.h"

namespace inferlab::model {

/// One decoder block's weights.
struct LlamaLayerWeights {
  std::vector<float> attention_norm;  ///< [dim] RMSNorm weight before attention
  Weight wqkv;                        ///< [q_dim + 2·kv_dim, dim]: rows of wq, then wk, then wv
  Weight wo;                          ///< [dim, q_dim] attention output projection
  std::vector<float> ffn_norm;        ///< [dim] RMSNorm weight before the MLP
  Weight w13;                         ///< [2·hidden, dim]: rows of w1 (gate), then w3 (up)
  Weight w2;                          ///< [dim, hidden] down projection
};

/// Which part of a model split over ranks by tensor parallelism (chapter 10,
/// runtime/parallel/tensor_parallel.h) a LlamaWeights holds: rank @ref rank of @ref ranks. Its
/// config is then the rank's own (its query and KV heads, its share of the SwiGLU hidden width;
/// dim and vocab_size stay the model's), and its embedding (and untied classifier) rows are the
/// vocabulary ids [vocab_begin, vocab_begin + vocab_rows). The whole model: rank 0 of 1, every id.
struct TensorShard {
  int rank = 0;             ///< this rank: 0 … ranks − 1
  int ranks = 1;            ///< ranks the model is split over (1: not split)
  int64_t vocab_begin = 0;  ///< the first token id of the embedding's rows
  int64_t vocab_rows = 0;   ///< the embedding's rows; 0: the whole vocabulary
  int64_t vocab_stride = 0; ///< ⌈vocab_size / ranks⌉: rank r's ids start at r · vocab_stride (0: not split)

  /// True when the model is split over more than one rank.
  bool split() const { return ranks > 1; }
  /// Rows of the embedding (and of the output head): vocab_rows, or @p vocab_size when whole.
  int64_t rows(int64_t vocab_size) const { return vocab_rows > 0 ? vocab_rows : vocab_size; }
};

/// Which layers of a model split over ranks by pipeline parallelism (chapter 10,
/// runtime/parallel/pipeline_parallel.h) a LlamaWeights holds: stage @ref stage of @ref stages,
/// the model's layers [layer_begin, layer_begin + config.n_layers) — its config's n_layers is the
/// stage's own. The first stage holds the embedding, the last the final norm and the output
/// head (the embedding again when the head is tied to it, as Megatron keeps a tied embedding on
/// both ends); the others hold neither (empty). Each step is cut into @ref micro_batches
/// micro-batches (GPipe's m), the same number on every stage. The whole model: stage 0 of 1.
struct PipelineStage {
  int stage = 0;             ///< this stage: 0 … stages − 1 (its rank)
  int stages = 1;            ///< stages the model is split over (1: not split)
  int64_t layer_begin = 0;   ///< the model's index of this stage's first layer
  int micro_batches = 1;     ///< micro-batches a step is cut into (step_plan.h: split_micro_batches())
  /// True when the model is split over more than one stage.
  bool split() const { return stages > 1; }
  /// True on the stage that embeds the tokens (and on the whole model).
  bool first() const { return stage == 0; }
  /// True on the stage that computes the logits (and on the whole model).
  bool last() const { return stage == stages - 1; }
};

/// All of a model's weights.
struct LlamaWeights {
  LlamaConfig config;                     ///< the shape (a rank's own when split: TensorShard)
  TensorShard shard;                      ///< the part of the model these are (the whole by default)
  PipelineStage stage;                    ///< the layers these are (every one by default)
  Weight embedding;                       ///< [vocab, dim] token embedding: one row per token id (a shard's ids only; empty on a middle stage)
  std::vector<LlamaLayerWeights> layers;  ///< n_layers blocks
  std::vector<float> final_norm;          ///< [dim] (empty but on the last stage)
  Weight classifier;                      ///< [vocab, dim]; empty when tied to the embedding (or not the last stage)

  /// The output head: the classifier, or the embedding when tied.
  const Weight& output_head() const { return config.shared_classifier ? embedding : classifier; }
  /// Bytes of every weight as stored: each matrix's Weight::bytes() (the embedding and the
  /// classifier once each; a tied head is the embedding) and the norms at 4 bytes. For weights
  /// all in one format, config.weight_bytes(format).
  int64_t bytes() const;
  /// Throws std::invalid_argument when the config is not valid (LlamaConfig::validate()) or a
  /// matrix or norm does not have the shape the config gives it, naming it and both shapes.
  void validate() const;
};

/// @p weights with every matrix converted to @p format (requantized on load): each is widened
/// to fp32 (exact) and rounded once to the format, to nearest even; a matrix already in
/// @p format is kept as it is, so converting fp32 weights to f32 changes no bit. The norms stay
/// fp32.
LlamaWeights convert_weights(LlamaWeights weights, WeightFormat format);

/// Reads a llama2.c checkpoint (the legacy format: 7 int32 — dim, hidden_dim, n_layers, n_heads,
/// n_kv_heads, vocab_size (negative: a separate classifier follows), seq_len — then the fp32
/// weights in llama2.c's order, the legacy RoPE tables skipped). Throws std::invalid_argument
/// naming the file and what is wrong (missing, bad header, wrong size).
LlamaWeights load_llama2c(const std::string& path);

/// Writes @p weights as a llama2.c checkpoint that load_llama2c() (and llama2.c's run.c) reads.
/// The format holds fp32 only: 16-bit matrices are widened (exactly), so loading the file and
/// converting back to their format gives the same bits. Throws std::invalid_argument when the
/// config is one llama2.c cannot express (head_dim other than dim / n_heads, half_split RoPE,
/// θ ≠ 10000, ε ≠ 1e-5), naming the field, and std::runtime_error when the file cannot be
/// written.
void save_llama2c(const LlamaWeights& weights, const std::string& path);

/// Seeded random weights of shape @p config: matrices N(0, 1/in) so activations keep their
/// scale through the layers, norms 1 + N(0, 0.1²), embedding N(0, 1). The same seed gives the
/// same weights on every machine (common/rng.h's generator).
LlamaWeights random_llama(const LlamaConfig& config, uint64_t seed);

/// The model named @p spec — `random:<preset>[,key=value…]` (parse_random_spec()), the path of a
/// GGUF file (gguf_model.h: its own formats, e.g. Q4_1 matrices and a Q8_0 embedding) or of a
/// llama2.c checkpoint (fp32) — with every matrix converted to @p format when one is given
/// (convert_weights(): requantized on load; block formats are dequantized to fp32 first). Without
/// a format the weights are the file's or the generator's, bit for bit.
LlamaWeights load_model(const std::string& spec, std::optional<WeightFormat> format = std::nullopt);

}  // namespace inferlab::model
