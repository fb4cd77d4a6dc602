#pragma once
/// @file tour.h
/// Each chapter's part of `inferlab tour`: a short demonstration on the default backend that
/// prints what the chapter teaches, measured on this machine.

#include <cstdint>
#include <ostream>

#include "common/cost.h"
#include "common/roofline.h"
#include "kernels/registry.h"
#include "kernels/registry.h"

namespace inferlab {

/// Options shared by the chapter demos.
struct TourOptions {
  bool quick = false;  ///< smaller sizes and one timed run each (used by tests; well under a second)
};

/// Chapter 01: naive CPU attention checked against the float64 oracle (GQA, causal), then a
/// seq_len sweep (L = 64 … 2048, or 32 and 128 when @p options.quick) printing, per L: FLOPs,
/// bytes and AI under the article's traffic model, AI under the unfused model, the measured
/// GFLOP/s (fastest of a few runs), the roof min(peak, AI × triad) at that AI and the percentage
/// of it reached; then the AI of one decode step for contrast. @p roofline supplies the ceilings.
void tour_chapter01(std::ostream& out, const Roofline& roofline, const TourOptions& options);

/// Chapter 02: the CUDA versions run on the SIMT emulator (sim backend) against the float64
/// oracle, then the CPU versions (cpu/naive, cpu/blocked, cpu/openblas) timed side by side at one
/// size with GFLOP/s, % of the measured FMA peak and the speed-up over cpu/naive.
void tour_chapter02(std::ostream& out, const Roofline& roofline, const TourOptions& options);

/// Chapter 03: the KV cache's size per token, cuda/decode on the SIMT emulator against the
/// float64 oracle (ragged GQA batch, fp32 and fp16 caches), then one decode step measured with
/// cpu/decode and cpu/decode_simd on fp32 and fp16 caches well beyond the last-level cache (a
/// few MiB with @p options.quick), printing MiB, × LLC, AI, ms, GB/s, % of the measured read
/// bandwidth and GFLOP/s.
void tour_chapter03(std::ostream& out, const Roofline& roofline, const TourOptions& options);

/// Chapter 04: a cache with outlier channels in K quantized as INT8 (per-token and per-channel K
/// scales) and FP8 E4M3: its bytes beside fp32 and fp16, one decode step over each
/// (cpu/decode_int8_simd; cuda/decode_fp8 on the SIMT emulator) with the relative error and the
/// softmax KL against the fp32 attention, and a check against the float64 decode of the same
/// quantized cache. A fraction of a second (smaller with @p options.quick).
void tour_chapter04(std::ostream& out, const Roofline& roofline, const TourOptions& options);

/// Chapter 05: cuda/flash on the SIMT emulator (a tiny GQA causal shape) against the float64
/// oracle; then one prefill computed by chapter 02's unfused cpu/blocked and by the fused
/// cpu/flash on the same inputs, each checked against the float64 oracle and timed, beside the
/// modelled bytes of each (unfused: ~4·L² score elements per head; fused: Q, K, V, O only) and
/// their AI (fused: L/4 in fp32); then one split-KV decode step at batch 1 with one KV head and
/// a long context (32768 tokens; 4096 with @p options.quick): cpu/decode_split with S = 1 and
/// with the S that choose_num_splits() picks, each checked against the float64 decode, timed,
/// with GB/s and % of the measured read bandwidth. About a second.
void tour_chapter05(std::ostream& out, const Roofline& roofline, const TourOptions& options);

/// Chapter 06: the KV memory a contiguous max-length reservation wastes against paged blocks
/// (LLaMA-7B sizes, ShareGPT-like lengths, 16 GiB), one decode step over the same tokens held
/// contiguously and paged over scattered blocks (cpu/decode_simd timed side by side, cuda/decode
/// on the emulator, both against the float64 oracle), then the block manager sharing a system
/// prompt through the prefix cache and a fork through copy-on-write.
void tour_chapter06(std::ostream& out, const Roofline& roofline, const TourOptions& options);

/// Chapter 07: stories260K (models/) generating from BOS on the lab's kernels; the same requests
/// served by static and continuous batching with the same KV memory (tokens/s, TTFT, TPOT, steps,
/// batch), real clock; one decode step of a random model for B = 1 … 32 with AI, time, GFLOP/s,
/// tokens/s and % of the roof min(peak, AI × read bandwidth) from @p roofline.
void tour_chapter07(std::ostream& out, const Roofline& roofline, const TourOptions& options);

/// Chapter 08: SmolLM2-135M-Instruct (models/, installed by ./inferlab setup; skipped with a
/// message when it is not) answers one question through its chat template, greedy, on the file's
/// Q4_1 / Q8_0 weights and on the same weights dequantized to f32: the answer, the prompt's time,
/// decode tokens/s beside the ceiling read bandwidth / bytes per token from @p roofline.
void tour_chapter08(std::ostream& out, const Roofline& roofline, const TourOptions& options);

/// Chapter 11: the int8 ceiling beside the fp32 peak, one Q8_0 GEMM at SmolLM2's gate/up shape by
/// chapter 08's kernel and by the packed one (GOP/s, % of the int8 ceiling, the ratio), and
/// SmolLM2's prefill with the packed GEMM (tokens/s and % of the int8 ceiling; skipped with a
/// message when the model is not installed).
void tour_chapter11(std::ostream& out, const Roofline& roofline, const TourOptions& options);

/// Chapter 12: SmolLM2 (Q4_1) repeats a sentence of the Alice text through the engine at batch 1,
/// greedy, without speculation and with prompt lookup (ngram, γ = 4), each on a fresh engine (the
/// fastest of three runs each, alternated; one with @p options.quick, and fewer tokens): the
/// answer, whether both gave the same tokens (checked token for token; "DIFFERENT" otherwise),
/// the guesses accepted, the mean accepted length and both decode rates with their ratio. Skipped
/// with a message when SmolLM2 is not installed. A few seconds.
void tour_chapter12(std::ostream& out, const Roofline& roofline, const TourOptions& options);

/// Seconds of the fastest of a few calls of @p version on @p q, @p k, @p v (after one untimed
/// call; about 0.3 s of calls, 2 to 20 of them; one with @p quick). The output is scratch.
double time_prefill(const AttentionVersion& version, const Tensor<float>& q, const Tensor<float>& k,
                    const Tensor<float>& v, bool causal, bool quick);

/// One decode step measured by measure_decode().
struct DecodeMeasurement {
  Cost cost;                 ///< decode_step_cost(): FLOPs and bytes (K, V of every cached token, q, out)
  double seconds = 0.0;      ///< the fastest timed call
  double cache_bytes = 0.0;  ///< K + V bytes of the cache (its capacity)
  /// Achieved GB/s.
  double gbs() const { return seconds > 0.0 ? cost.bytes / seconds / 1e9 : 0.0; }
  /// Achieved GFLOP/s.
  double gflops() const { return seconds > 0.0 ? cost.flops / seconds / 1e9 : 0.0; }
};

/// Times @p version on @p cache with random queries for @p num_heads query heads: one untimed
/// call, then the fastest of 2–10 calls (one with @p quick).
DecodeMeasurement measure_decode(const DecodeVersion& version, const KvCache& cache, int64_t num_heads, bool quick);

/// The tour's closing table: prefill measured at several L (cpu/blocked) beside one decode step
/// measured with cpu/decode_simd (fp32 cache, batch sized so the cache is ~4× the last-level
/// cache, at most 2 GiB; tens of MiB with --quick), and cpu/flash (chapter 05) measured on the
/// inputs of one prefill row (L = 1024; 256 with --quick), with AI under the article's, the unfused and
/// the fused traffic models, GFLOP/s, % of the roof and whether each is memory- or compute-bound
/// on this machine.
void tour_summary(std::ostream& out, const Roofline& roofline, const TourOptions& options);

}  // namespace inferlab
