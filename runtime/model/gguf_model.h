#pragma once
/// @file gguf_model.h
/// A Llama model from a GGUF file (chapter 08): the shape from the file's `llama.*` metadata and
/// the weights in the formats the file stores them in — SmolLM2-135M-Instruct's Q4_1 matrices,
/// its Q8_0 token embedding (also the tied output head), its fp32 norms.
///
/// What the file says and how it maps onto LlamaConfig / LlamaWeights:
///   - `llama.embedding_length` → dim, `.feed_forward_length` → hidden_dim, `.block_count` →
///     n_layers, `.attention.head_count(_kv)` → n_heads / n_kv_heads, `.context_length` →
///     max_seq_len, `.rope.freq_base` → rope_theta (default 10000), `.attention.
///     layer_norm_rms_epsilon` → norm_eps, `.rope.dimension_count` (or `.attention.key_length`)
///     → head_dim; vocab_size from `token_embd.weight`'s rows.
///   - RoPE on adjacent pairs: llama.cpp's converter permuted the Hugging Face q/k rows so that
///     GGUF llama files use the "normal" (adjacent-pair) rotation (layers.h's RopeStyle).
///   - No `output.weight`: the output head is tied to `token_embd.weight`.
///   - A weight W[out × in] is stored with ne = [in, out]: one row of `in` values per output
///     feature, exactly Weight's [out_features, in_features] layout — so the embedding, wo, w2 and
///     the norms are views of the memory-mapped file (no copy), kept alive by the mapping. The
///     fused matrices the forward reads (wqkv: the rows of attn_q, attn_k, attn_v; w13: ffn_gate
///     then ffn_up) are each one copy of their parts' stored bytes, made once at load.
/// Errors (a missing key or tensor, a shape that does not match the metadata, a type the lab
/// cannot compute with, rows of different formats to fuse) are std::invalid_argument naming the
/// file and the key or tensor.

#include <string>

#include "runtime/gguf/gguf.h"
#include "runtime/model/llama_config.h"
#include "runtime/model/llama_weights.h"

namespace inferlab::model {

/// The shape of the Llama model in @p file (see the file comment). Throws std::invalid_argument
/// when general.architecture is not "llama" or a key is missing or out of range.
LlamaConfig gguf_llama_config(const gguf::GgufFile& file);

/// The weights of the Llama model in @p file, in the file's formats (views of its mapping where
/// the layout allows, see the file comment). They keep the mapping alive: @p file may go.
LlamaWeights load_gguf_weights(const gguf::GgufFile& file);

/// Opens the GGUF file at @p path and loads its weights (load_gguf_weights()).
LlamaWeights load_gguf(const std::string& path);

/// True when @p path names a GGUF file: it ends in ".gguf" or its first four bytes are "GGUF".
bool is_gguf_path(const std::string& path);

}  // namespace inferlab::model
