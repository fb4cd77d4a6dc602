#pragma once
/// @file step_plan.h
/// One step of the serving engine, planned once, memory included (chapter 07): the plain struct
/// that the scheduler (runtime/engine) writes and the model runner (LlamaModel::forward)
/// consumes — nothing else describes a step. Its shape is vLLM's and nano-vllm's attention
/// metadata: the scheduled sequences' new tokens packed one sequence after another, each
/// sequence's query offsets (cu_seqlens_q) and context length, its block table, the slot of
/// every new token (slot_mapping), the tokens whose logits are wanted, and the block operations
/// the scheduler's allocations asked for (copy-on-write copies, fresh blocks to poison).
///
/// Sequence i of the plan is row i of the KV cache for this step only: the runner maps row i to
/// block_tables[i] and sets its length to context_lens[i]; rows past the plan's sequences are
/// empty. No row belongs to a request across steps.

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/kv/kv_cache.h"
#include "runtime/paged/block_pool.h"

namespace inferlab::model {

/// A step: what the model runs and where each token's K/V goes.
struct StepPlan {
  /// The new tokens, packed: sequence 0's, then sequence 1's, …
  std::vector<int32_t> token_ids;
  /// Per token: its position in its sequence (context_lens[i] − query length + j for token j).
  std::vector<int64_t> positions;
  /// Query offsets: sequence i's tokens are token_ids[cu_seqlens_q[i] .. cu_seqlens_q[i + 1]);
  /// num_seqs() + 1 entries, non-decreasing, from 0 to token_ids.size(). A query length of 1 is a
  /// decode step; 0 keeps the sequence's context visible without running it (a contiguous cache,
  /// where row i is fixed, whose sequence sits this step out).
  std::vector<int64_t> cu_seqlens_q;
  /// Per sequence: tokens in the cache after the step (its new tokens are the last of them).
  std::vector<int64_t> context_lens;
  /// Per sequence: its physical blocks (logical block j → block id), covering context_lens[i]
  /// tokens. Empty for a contiguous cache (row i is sequence i's own memory).
  std::vector<std::vector<int32_t>> block_tables;
  /// Per token: the cache slot where its K and V go (block · block_size + offset when paged).
  std::vector<int64_t> slot_mapping;
  /// Indices into token_ids whose logits are wanted, in the order the logits rows come out (a
  /// sequence's last token when it samples next).
  std::vector<int64_t> logits_indices;
  /// Copy-on-write: copy every row of block `from` into block `to` before any write (paged).
  std::vector<paged::BlockCopy> block_copies;
  /// Fresh blocks handed out for this step: poisoned after the copies, before any write (paged).
  std::vector<int32_t> fresh_blocks;

  /// The scheduled sequences: cu_seqlens_q.size() − 1 (0 for an empty plan).
  int64_t num_seqs() const { return cu_seqlens_q.empty() ? 0 : int64_t(cu_seqlens_q.size()) - 1; }
  /// Sequence @p i's new tokens: cu_seqlens_q[i + 1] − cu_seqlens_q[i].
  int64_t query_len(int64_t i) const { return cu_seqlens_q[size_t(i) + 1] - cu_seqlens_q[size_t(i)]; }
  /// Appends sequence @p context_len's step: @p tokens new tokens at @p slots, the last context
  /// positions; with @p sample, the last token's logits are wanted. @p table: its blocks (empty
  /// for a contiguous cache).
  void add_sequence(std::span<const int32_t> tokens, std::span<const int64_t> slots, int64_t context_len,
                    std::vector<int32_t> table, bool sample);
};

/// @p plan as bytes, every field in order (each vector as its length, a uint64, then its
/// elements, little-endian as the machine stores them): what rank 0 of a model split over ranks
/// sends the others each step (chapter 10), which decode_step_plan() reads back field for field.
std::vector<uint8_t> encode_step_plan(const StepPlan& plan);

/// The plan encode_step_plan() wrote into @p bytes. Throws std::invalid_argument naming the
/// field when the bytes end early or hold more than one plan. (It does not check the plan
/// itself: check_step_plan() does.)
StepPlan decode_step_plan(std::span<const uint8_t> bytes);

/// Checks that @p plan is well formed for @p cache (its rows, its paging: block size and count,
/// or a contiguous row's max_seq_len slots): sizes agree (positions, slot_mapping = token_ids;
/// context_lens = num_seqs; block_tables = num_seqs when paged, none when contiguous);
/// num_seqs ≤ the cache's rows; block copies and fresh blocks name blocks of the pool (none
/// when contiguous);
/// cu_seqlens_q starts at 0, never decreases and ends at the token count; each query fits in its
/// context; positions are context_len − query_len + j; each table covers its context and names
/// no block twice; each token's slot is the one its table (or its row, contiguous) gives its
/// position; no slot is written twice; logits indices are in range. Throws
/// std::invalid_argument naming the first bad field and entry.
void check_step_plan(const StepPlan& plan, const KvCache& cache);

/// check_step_plan() for a cache of @p shape and @p paging ({0, 0}: contiguous) that is not a host
/// KvCache — a device-resident pool (model_runner.h). Block tables reach ⌈max_seq_len /
/// block_size⌉ blocks, as KvCache::max_blocks_per_seq().
void check_step_plan(const StepPlan& plan, const KvCacheShape& shape, const KvPaging& paging);

/// One micro-batch of a step (chapter 10's pipeline): a plan of its own, and where its logits go
/// in the step's.
struct MicroBatch {
  StepPlan plan;                     ///< a slice of the step's tokens, itself a well-formed plan
  std::vector<int64_t> logits_rows;  ///< per logits row of this plan: its row in the step's logits
};

/// Cuts paged @p plan's packed tokens into min(@p micro_batches, tokens) slices of as equal a
/// size as whole tokens allow, in order; each is a plan of the sequences it has tokens of: their
/// tokens, positions and slots, a context that ends at its last token (the tokens after it are
/// not in the cache yet), the sequence's block table, and the logits indices that fall in it.
/// The first micro-batch carries the step's block copies and fresh blocks (done before any
/// write). Running the micro-batches in order through the forward gives the step's K/V and, row
/// by row, its logits: what a pipeline stage of a model split over ranks runs
/// (runtime/parallel/pipeline_parallel.h). A contiguous plan (no block tables: its rows are
/// fixed) and an empty one are not cut. Throws std::invalid_argument naming "micro_batches" when
/// it is below 1.
std::vector<MicroBatch> split_micro_batches(const StepPlan& plan, int micro_batches);

}  // namespace inferlab::model
