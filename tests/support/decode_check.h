#pragma once
/// @file decode_check.h
/// The checks every chapter-03 implementation goes through — reference versions, student code
/// and the wrong fixtures in tests/wrong alike. The central one replays generation: prefill
/// each sequence's prompt into a KV cache, then step by step append one token (an append
/// version) and decode it (a decode version), and compare every step with the chapter-02
/// oracle: decoding token t must equal row t of a causal prefill over the first t+1 tokens.
/// The cache is poisoned (NaN) past every sequence's length, so a kernel that reads one slot
/// too far produces NaN and fails.

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "kernels/kv/kv_cache.h"
#include "kernels/registry.h"

namespace inferlab::testing {

/// One test shape: a ragged batch and the heads.
struct DecodeCase {
  std::vector<int64_t> lengths{1};  ///< final length of each sequence (after the decode steps)
  int64_t steps = 1;                ///< decode steps: the last `steps` tokens of each sequence
                                    ///< are appended and decoded one at a time (≤ min length)
  int64_t num_heads = 1;            ///< query heads
  int64_t num_kv_heads = 1;         ///< KV heads (divides num_heads)
  int64_t head_dim = 64;            ///< d
  int64_t capacity_slack = 3;       ///< max_seq_len = max(lengths) + slack; 0 fills the longest
  float logit_scale = 1.0f;         ///< q is multiplied by this: large values give extreme logits
  int64_t block_size = 0;           ///< 0: a contiguous cache; else paged (chapter 06), blocks of
                                    ///< this many tokens in scattered order (to_paged)

  /// The cache's capacity per sequence.
  int64_t max_seq_len() const;
  /// "b3_L1-17-33_steps5_h8_kv2_d80" (+ "_bs16" when paged) — usable as a gtest parameter name.
  std::string name() const;
};

/// The odd shapes of the testing policy for decode: lengths 1, 2, 31, 33, … (ragged batches,
/// a batch of one, a sequence that fills its cache exactly), head_dim ∈ {64, 80, 96, 128}, GQA
/// ratios 1/2/4/8, a decode from t = 0 (empty prompt), extreme logits. @p max_length drops
/// longer sequences (the emulator runs smaller grids).
std::vector<DecodeCase> odd_decode_cases(int64_t max_length = 129);

/// One registered decode version on one test shape: the parameter of the chapter's suites.
struct DecodeVersionCase {
  const DecodeVersion* version = nullptr;  ///< the version under test (and its cache dtype)
  DecodeCase shape;                        ///< the shape it runs on
};

/// Prints "cuda/decode (sim, fp16) b3_L2-31-9_steps2_h4_kv4_d96" in gtest messages.
void PrintTo(const DecodeVersionCase& c, std::ostream* out);

/// "cuda_decode_sim_fp16_b3_L2_31_9_steps2_h4_kv4_d96": a gtest parameter name for @p info's case.
std::string decode_version_case_name(const ::testing::TestParamInfo<DecodeVersionCase>& info);

/// Every decode version of chapter 3 registered on @p backend (both cache dtypes), crossed with
/// odd_decode_cases(@p max_length).
std::vector<DecodeVersionCase> decode_version_cases(Backend backend, int64_t max_length = 129);

/// Replays generation for @p c with a cache of @p dtype: prefill each sequence's first
/// length − steps tokens, then `steps` times: @p append the next token of every sequence, run
/// @p decode (output poisoned first), and compare with row t of the float64 causal prefill
/// oracle (attention_reference) of each sequence — over K and V rounded to @p dtype, what the
/// cache holds (round_to_precision), and the fp32 q — under attention_tolerance(precision of
/// @p dtype, max |logit|). Fails naming the step, the token positions, the comparison (NaN
/// outputs first; elements as (sequence, head, channel)) and the seed.
::testing::AssertionResult decode_steps_match_prefill(const DecodeFn& decode, KvDtype dtype, const KvAppendFn& append,
                                                      const DecodeCase& c);

/// Runs @p decode (a sim-backend version) on one cache state of @p c under every schedule of
/// default_schedules() and fails when any output bit differs between thread orders.
::testing::AssertionResult decode_same_under_schedules(const DecodeFn& decode, KvDtype dtype, const DecodeCase& c);

/// Appends one token with @p append to a cache of @p c (every sequence one short of its final
/// length) and checks that the cache's bytes and lengths equal those of the CPU append
/// (KvCache::append): the new slots hold the token (fp16: rounded to nearest even), nothing
/// else changed. A failure counts the differing elements and names the first few in the
/// cache's own coordinates — "V (sequence 1, KV head 0, token 7, channel 17; slot 19: the
/// token this append writes): got …, expected …" (paged: with the block and offset) — and the
/// seed. With @p check_schedules (sim versions) the append also runs under every schedule and
/// must write the same bytes.
::testing::AssertionResult append_matches_reference(const KvAppendFn& append, KvDtype dtype, const DecodeCase& c,
                                                    bool check_schedules = false);

/// "" when the stored K and V elements and scales of @p got equal @p want's byte for byte (both
/// of the same shape, format and layout); else how many differ and the first few
/// (kReportedMismatches), each in the cache's own coordinates with both values — "3 of 4096
/// stored values (K and V) differ from the expected cache:", then "V (sequence 1,
/// KV head 0, token 7, channel 17; slot 19): got 0.5, expected 0.25" — paged, "slot 19 = block 4
/// offset 3"; an unmapped block's row by (block, KV head, offset); scales as "K scale (sequence,
/// KV head, token …)" or, per channel, "(sequence, KV head, channel)". With @p lengths_before
/// (the lengths before an append) each also says whether it is the appended token, one cached
/// before, or past the length.
std::string kv_cache_differences(const KvCache& got, const KvCache& want,
                                 const std::vector<int32_t>& lengths_before = {});

/// Appending to a batch in which one sequence is full must throw std::invalid_argument naming
/// that sequence ("lengths[b]", "is full") and change nothing: no byte, no length.
::testing::AssertionResult append_rejects_full_sequence(const KvAppendFn& append, KvDtype dtype);

}  // namespace inferlab::testing
