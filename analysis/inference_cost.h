#pragma once
/// @file inference_cost.h
/// The analytic calculator behind `inferlab analyze`: KV-cache size, FLOPs and bytes of a prefill
/// and of one decode step, their arithmetic intensity, the bound (compute or memory) and the time
/// and throughput floors on a device — in the spirit of LLM-Viewer (Yuan et al. 2024).
///
/// The model of the work (all of it is printed by the report; see chapters/03-kv-cache-decode):
///  - **Weights.** A forward pass streams every weight once — all blocks' linear layers, the
///    norms and the LM head — whatever the number of tokens in it. The embedding table is a
///    lookup: only the rows of the batch's tokens are read, so it is held but not streamed.
///    Quantized formats (int8, int4, fp8) apply to the blocks' linear layers; embedding, LM head
///    and norms stay 16-bit (as GPTQ, AWQ and LLM.int8() leave them); with fp32 weights (a CPU
///    running the lab's fp32 kernels) everything is fp32, activations included. With tied
///    embeddings the LM head is the embedding table: held once, streamed as the head. int8 is per-output-channel
///    (scales < 0.1 %, left out); int4 is group-wise with an fp16 scale per 128 weights
///    (0.5 + 2/128 bytes per weight). int8 and int4 are weight-only: the math runs in 16-bit; fp8
///    weights use the FP8 peak where the device has one, and on a device without FP8 math (A100)
///    are dequantized to 16-bit: the 16-bit peak, with a warning. fp32 weights use the device's
///    fp32 (non-tensor) peak; a CPU's measured peak is fp32 already.
///  - **KV cache.** Per token per layer: 2 (K and V) · num_kv_heads · head_dim elements; for
///    H = 4096 in fp16 that is 2 · 4096 · 2 = 16 KiB. int8 KV adds one fp16 scale per token per KV
///    head for K and for V (per-token-per-head, as chapter 04 quantizes): 2 · num_kv_heads · 2
///    bytes. fp8 (E4M3) KV uses a per-tensor scale (left out).
///  - **Prefill** of `prompt` tokens per sequence: linear FLOPs 2 · (block weights) per token,
///    plus the LM head for the last position only (the next token needs only its logits);
///    attention FLOPs of a fused causal kernel (cost.h, causal_useful: 2·d·L·(L+1) per head, the
///    work a kernel that skips masked tiles does); bytes = weights read once + KV written + the
///    fused attention's Q, K, V, O traffic (16-bit activations).
///  - **Decode step** (one new token per sequence, `context` tokens already cached): linear
///    FLOPs 2 · (block weights + LM head) per sequence; attention over context + 1 keys (cost.h);
///    bytes = weights (once per step, shared by the whole batch) + the KV of all `context` cached
///    tokens of every sequence + the new token's K and V written. On a measured CPU the step
///    streams at the read bandwidth (DeviceSpec::decode_bandwidth_gbs), not triad.
///  - Left out everywhere: activations between layers, norms', RoPE's and SwiGLU's elementwise
///    FLOPs, embedding rows, sampling — each a few KB or MFLOP per token.
///  - **Floors.** time ≥ max(FLOPs / peak, bytes / bandwidth); the stage is compute-bound when
///    FLOPs / peak is the larger, i.e. when AI = FLOPs / bytes exceeds the ridge point
///    peak / bandwidth. Real kernels reach 60–90 % of these floors.
///  - **KV capacity** (chapter 06, kv_capacity.h): the device memory left after the weights, as
///    KV cache, filled with sequences of the ShareGPT length mix (the vLLM paper's Fig. 11 means)
///    no longer than `context`: how many fit with a contiguous `context`-token slot per sequence
///    vs 16-token blocks, and the share of the reserved bytes that holds tokens. Activations and
///    the runtime's own memory are left out, so the counts are ceilings. The largest batch (at
///    `context` tokens) and the longest context (at `batch` sequences) whose KV fits beside the
///    weights follow from the same budget, ⌊budget / (KV bytes per token · context or batch)⌋.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/device_spec.h"
#include "analysis/kv_capacity.h"
#include "analysis/model_shape.h"

namespace inferlab::analysis {

/// Storage format of the weights.
enum class WeightFormat {
  fp32,  ///< 4 bytes (and fp32 math; the whole model in fp32)
  fp16,  ///< 2 bytes
  bf16,  ///< 2 bytes
  fp8,   ///< 1 byte (E4M3, per-tensor scale)
  int8,  ///< 1 byte, per-output-channel scales (weight-only)
  int4,  ///< 0.5 byte + an fp16 scale per group of 128 (weight-only, GPTQ/AWQ style)
};

/// Storage format of the KV cache.
enum class KvFormat {
  fp32,  ///< 4 bytes per element
  fp16,  ///< 2 bytes per element
  bf16,  ///< 2 bytes per element
  fp8,   ///< 1 byte per element (E4M3, per-tensor scale)
  int8,  ///< 1 byte per element + one fp16 scale per token per KV head, for K and for V
};

/// "fp32", "fp16", "bf16", "fp8", "int8", "int4".
std::string_view to_string(WeightFormat format);
/// "fp32", "fp16", "bf16", "fp8", "int8".
std::string_view to_string(KvFormat format);
/// Parses @p name (as to_string writes it); throws std::invalid_argument naming "weights".
WeightFormat parse_weight_format(const std::string& name);
/// Parses @p name (as to_string writes it); throws std::invalid_argument naming "kv".
KvFormat parse_kv_format(const std::string& name);

/// Bytes per quantized weight, scales included: 4, 2, 2, 1, 1, 0.515625.
double bytes_per_weight(WeightFormat format);

/// The KV cache's size.
struct KvCacheSize {
  int64_t data_bytes_per_token_per_layer = 0;   ///< K and V elements: 2 · num_kv_heads · head_dim · element size
  int64_t scale_bytes_per_token_per_layer = 0;  ///< int8 scales: 2 · num_kv_heads · 2; 0 otherwise
  int64_t bytes_per_token_per_layer = 0;        ///< data + scales
  int64_t bytes_per_token = 0;                  ///< all layers: bytes_per_token_per_layer · num_layers
  int64_t bytes_per_layer = 0;                  ///< one layer of one sequence at the context length
  int64_t bytes_per_sequence = 0;               ///< all layers of one sequence at the context length
  int64_t total_bytes = 0;                      ///< batch · context tokens, all layers
};

/// The KV cache of @p batch sequences of @p context tokens of @p model in @p format.
KvCacheSize kv_cache_size(const ModelShape& model, KvFormat format, int64_t batch, int64_t context);

/// Chapter 06's waste study (kv_capacity.h) for @p model's KV cache in @p format: the label, the
/// model and format keys and the bytes per token set; every other setting at its default.
KvWasteSettings kv_waste_settings(const ModelShape& model, KvFormat format);

/// The weights' bytes.
struct WeightBytes {
  double held = 0;        ///< in memory: every parameter (embedding table included, a tied head once)
  double streamed = 0;    ///< read by every forward pass: all but an untied embedding table
  double quantized = 0;   ///< the part in the chosen format: the blocks' linear layers
  double kept_16bit = 0;  ///< the streamed part kept 16-bit (fp32 with fp32 weights): LM head and norms
};

/// Bytes of @p model's weights in @p format (see the file comment for what is quantized).
WeightBytes weight_bytes(const ModelShape& model, WeightFormat format);

/// What to analyze: a model on a device, with a batch, lengths and formats.
struct Workload {
  ModelShape model;                           ///< the model's shape
  DeviceSpec device;                          ///< the device's ceilings
  int64_t batch = 1;                          ///< sequences processed together
  int64_t context = 2048;                     ///< decode: tokens already in each sequence's KV cache
  int64_t prompt = 0;                         ///< prefill: prompt tokens per sequence (0: = context)
  WeightFormat weights = WeightFormat::fp16;  ///< weight format
  KvFormat kv = KvFormat::fp16;               ///< KV-cache format

  /// The prefill length: prompt, or context when prompt is 0.
  int64_t prompt_tokens() const { return prompt > 0 ? prompt : context; }
  /// Throws std::invalid_argument naming the first invalid field (batch, context, prompt, the
  /// model's shape, the device's ceilings).
  void validate() const;
};

/// FLOPs and bytes of one stage (a prefill, or one decode step) and its floors on a device.
struct StageCost {
  double linear_flops = 0;     ///< matrix multiplies with the weights
  double attention_flops = 0;  ///< Q·Kᵀ and P·V
  double weight_bytes = 0;     ///< weights streamed
  double kv_read_bytes = 0;    ///< KV cache read (decode: every cached token of every sequence)
  double kv_write_bytes = 0;   ///< KV cache written (prefill: every prompt token; decode: the new one)
  double attention_bytes = 0;  ///< prefill only: the fused attention kernel's Q, K, V, O traffic
  double tokens = 0;           ///< tokens this stage processes (prefill: batch · prompt; decode: batch)
  double peak_gflops = 0;      ///< the compute roof used (16-bit, FP8 for fp8 weights, fp32 for fp32)
  double bandwidth_gbs = 0;    ///< the memory roof used

  /// All FLOPs.
  double flops() const { return linear_flops + attention_flops; }
  /// All bytes.
  double bytes() const { return weight_bytes + kv_read_bytes + kv_write_bytes + attention_bytes; }
  /// FLOPs per byte.
  double arithmetic_intensity() const { return bytes() > 0 ? flops() / bytes() : 0.0; }
  /// The ridge point of the roofs used: peak / bandwidth, FLOP/byte.
  double ridge_point() const { return bandwidth_gbs > 0 ? peak_gflops / bandwidth_gbs : 0.0; }
  /// FLOPs / peak, seconds.
  double compute_seconds() const { return flops() / (peak_gflops * 1e9); }
  /// bytes / bandwidth, seconds.
  double memory_seconds() const { return bytes() / (bandwidth_gbs * 1e9); }
  /// The time floor: max(compute_seconds, memory_seconds).
  double seconds() const { return compute_seconds() > memory_seconds() ? compute_seconds() : memory_seconds(); }
  /// Whether moving the bytes takes longer than doing the FLOPs (AI below the ridge point).
  bool memory_bound() const { return memory_seconds() >= compute_seconds(); }
  /// The throughput ceiling: tokens / seconds().
  double tokens_per_second() const { return tokens / seconds(); }
};

/// Everything `inferlab analyze` reports.
struct Analysis {
  Workload workload;    ///< the input, validated
  KvCacheSize kv;       ///< the KV cache at batch × context
  WeightBytes weights;  ///< the weights' bytes
  StageCost prefill;    ///< a prefill of batch × prompt tokens
  StageCost decode;     ///< one decode step of batch sequences with context cached tokens each
  /// batch × context (cached tokens, summed over the batch) at which a decode step reads as many
  /// KV bytes as weight bytes: weights streamed / KV bytes per token (all layers). Below it the
  /// weights dominate and int8 KV barely helps; above it the KV does.
  double kv_equals_weights_tokens = 0;
  /// Weights held + KV cache at batch × context, bytes (compare with device.memory_gb).
  double memory_bytes = 0;
  /// Whether the device's memory is known (the fits verdict and the largest batch and context).
  bool memory_known = false;
  /// Whether weights held + KV at batch × context fit in the device's memory (when known).
  bool fits = false;
  /// The most sequences of `context` tokens whose KV fits beside the weights: ⌊(memory − weights
  /// held) / (KV bytes per token · context)⌋ (0 when the weights alone do not fit; when known).
  int64_t max_batch_fits = 0;
  /// The longest context whose KV fits beside the weights for `batch` sequences: ⌊(memory −
  /// weights held) / (KV bytes per token · batch)⌋ (when known).
  int64_t max_context_fits = 0;
  /// The KV = weights crossover as a batch size at this context: kv_equals_weights_tokens /
  /// context. Below it a decode step reads more weight bytes than KV bytes.
  double kv_equals_weights_batch = 0;
  /// Warnings about the figures: fp8 weights on a device without FP8 math (the 16-bit peak is
  /// used), a roofline measured under load, weights that do not fit.
  std::vector<std::string> warnings;
  /// What the figures assume (the model of the work above, in one line each).
  std::vector<std::string> assumptions;
  /// Sequences that fit in device memory − weights held: contiguous context-token slots vs
  /// 16-token blocks, for kAnalysisCapacityRequests ShareGPT-like sequences of at most context
  /// tokens. capacity.known is false when the device's memory is unknown or context < 2.
  KvCapacity capacity;
};

/// Requests drawn for Analysis::capacity (ShareGPT lengths, seed 6).
inline constexpr int64_t kAnalysisCapacityRequests = 10000;
/// The block size of Analysis::capacity's paged figure (vLLM's default).
inline constexpr int64_t kAnalysisCapacityBlockSize = 16;

/// The compute roof for @p format on @p device: the FP8 peak for fp8 weights where the device
/// has one; the fp32 peak for fp32 weights where it is known (a CPU's measured peak is fp32);
/// the 16-bit (CPU: fp32) peak otherwise.
double compute_peak_gflops(const DeviceSpec& device, WeightFormat format);

/// Analyzes @p workload (validated first; bad input throws std::invalid_argument).
Analysis analyze(const Workload& workload);

}  // namespace inferlab::analysis
