#pragma once
/// @file 10-parallelism/predictions.h
/// Chapter 10 — predict, then measure. Each function is a question about a model split over
/// ranks: work the number out from the lesson (chapters/10-parallelism/README.md), write it as a
/// formula in `predictions.cpp`, then run the measurement named in its comment and compare. The
/// graded tests (tests/10-parallelism/test_predictions.cpp) ask each question over several
/// scenarios — SmolLM2 and a 768-wide model on this machine, Llama-2-70B's shape on H100s, odd
/// ones, fresh random ones — and accept an answer within 1% (P10.6, a count: exactly). Units:
/// seconds, bytes, GB/s = 1e9 bytes/s (an H100's 3.35 TB/s is 3350 GB/s).
///
/// P10.1 is pipeline parallelism's price, P10.2–P10.5 tensor parallelism's: what one decode step
/// sends (P10.2, P10.3), and what that costs a step and its speed-up when the link's latency is
/// paid twice a layer (P10.4, P10.5); P10.6 is the rule that decides whether a split exists at all.

#include <cstdint>

namespace inferlab::student {

/// Prediction P10.1 — the pipeline bubble: the fraction of a step's time each stage is idle when
/// the layers are cut into @p stages equal stages (one a rank) and the step's tokens into
/// @p micro_batches equal micro-batches that flow through them one after another (GPipe, Huang et
/// al. 2019, forward only). Draw the schedule: a slot is one micro-batch on one stage; the step
/// lasts from the first micro-batch entering stage 0 until the last one leaves the last stage.
/// Worked example: 2 stages, 2 micro-batches: the step lasts 3 slots, each stage works 2 of them
/// and waits 1 — a bubble of 1/3.
/// Then measure: chapters/10-parallelism/parallel_study.py runs the model in pipeline stages
/// (parallel_bench's `--split pp --micro-batches M`) and reports this bubble beside the time the
/// stages measured waiting.
double predict_pipeline_bubble(int64_t stages, int64_t micro_batches);

/// Prediction P10.2 — the bytes a tensor-parallel decode step all-reduces for one token in one
/// layer: the activations of width @p dim, @p bytes_per_element bytes each (4: fp32; 2: fp16),
/// summed after each row-parallel layer (W_o, then W_down).
/// Worked example: SmolLM2 (dim 576), fp32 activations: 4 608 bytes.
/// Then measure: `parallel_study.py` counts the bytes the communicator is handed (the lesson's
/// "payload a token a layer" column).
double predict_allreduce_bytes_per_token_layer(int64_t dim, int64_t bytes_per_element);

/// Prediction P10.3 — the bytes ONE rank sends in a ring all-reduce (exercise 10.2) of a message
/// of @p message_bytes over @p ranks ranks (a reduce-scatter, then an all-gather; chunks of
/// message_bytes / ranks — take the division as exact).
/// Worked example: 6 144 bytes over 2 ranks: 6 144 bytes (two steps of 3 072).
/// Then measure: the traffic tests/10-parallelism/test_student.cpp counts for your ring, or
/// `./inferlab student test ch10`'s traffic test.
double predict_ring_bytes_sent_per_rank(double message_bytes, int64_t ranks);

/// Prediction P10.4 — the time of one batch-1 decode step of a model split over @p ranks devices:
/// each reads its 1/ranks of the @p weight_bytes at @p bandwidth_gbs GB/s, and the step makes two
/// all-reduces a layer over @p layers layers, each costing @p allreduce_latency_seconds (at batch
/// 1 the payload is tiny: latency, not bandwidth, is the price). A model that is not split
/// (ranks = 1) makes no all-reduce.
/// Worked example: Llama-2-70B's shape in fp16 (137.4 GB, 80 layers) on 8 H100s (3 350 GB/s)
/// over NVLink (6.8 µs an all-reduce): 137.4e9 / (8 · 3350e9) + 2 · 80 · 6.8e-6 = 6.21 ms.
/// Then measure: nothing on this machine (no GPUs); the lesson's table (c) is this formula.
double predict_tp_decode_step_seconds(double weight_bytes, int64_t ranks, double bandwidth_gbs, int64_t layers,
                                      double allreduce_latency_seconds);

/// Prediction P10.5 — the speed-up of that decode step over the same model on one device (its
/// step at ranks = 1 divided by its step at @p ranks), with P10.4's ingredients.
/// Worked example: the 70B shape above: 41.0 ms / 6.21 ms = 6.60; SmolLM2 (269 MB, 30 layers) on
/// the 3 H100s its 9 query heads split over: 0.080 ms / 0.435 ms = 0.18 — splitting it makes its
/// step 5.4× slower.
/// Then measure: the lesson's table (b) on this machine's ranks (`parallel_study.py`).
double predict_tp_speedup(double weight_bytes, int64_t ranks, double bandwidth_gbs, int64_t layers,
                          double allreduce_latency_seconds);

/// Prediction P10.6 — GQA's rule (vLLM's QKVParallelLinear, the lab's tensor_split()): a model of
/// @p n_heads query heads and @p n_kv_heads KV heads split over @p ranks ranks. Query heads are
/// always split evenly; KV heads are split evenly when there are at least as many as ranks, and
/// otherwise each rank keeps the one KV head its query heads read, replicated on several ranks.
/// Return how many ranks hold each KV head — 1 when the KV heads are split — or 0 when the model
/// cannot be split over @p ranks at all.
/// Worked example: SmolLM2, 9 query / 3 KV heads: 2 ranks → 0 (9 query heads do not split in
/// two); 3 ranks → 1. 8 query / 2 KV heads over 4 ranks → 2 (every KV head on two ranks).
/// Then measure: `./inferlab generate --model smollm2 --tp 2 …` refuses, naming the heads;
/// `--tp 3` runs.
int64_t predict_kv_replicas(int64_t n_heads, int64_t n_kv_heads, int64_t ranks);

}  // namespace inferlab::student
