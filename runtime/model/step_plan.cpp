// The step plan (step_plan.h): how a sequence's step is appended, and the well-formedness check
// that the model runner and the engine's check_invariants mode run.
#include "runtime/model/step_plan.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/ceil_div.h"
#include "common/check.h"

namespace inferlab::model {

namespace {

std::string at(const char* field, size_t i) {
  return std::string(field) + "[" + std::to_string(i) + "]";
}

}  // namespace

void StepPlan::add_sequence(std::span<const int32_t> tokens, std::span<const int64_t> slots, int64_t context_len,
                            std::vector<int32_t> table, bool sample) {
  require(slots.size() == tokens.size(), "slots.size()", slots.size(),
          "must equal tokens.size() = " + std::to_string(tokens.size()));
  if (cu_seqlens_q.empty()) cu_seqlens_q.push_back(0);
  const int64_t first = context_len - int64_t(tokens.size());
  for (size_t j = 0; j < tokens.size(); ++j) {
    token_ids.push_back(tokens[j]);
    positions.push_back(first + int64_t(j));
    slot_mapping.push_back(slots[j]);
  }
  cu_seqlens_q.push_back(int64_t(token_ids.size()));
  context_lens.push_back(context_len);
  if (!table.empty()) block_tables.push_back(std::move(table));
  if (sample) logits_indices.push_back(int64_t(token_ids.size()) - 1);
}

void check_step_plan(const StepPlan& plan, const KvCache& cache) {
  check_step_plan(plan, cache.shape(), cache.paging());
}

void check_step_plan(const StepPlan& plan, const KvCacheShape& shape, const KvPaging& paging) {
  const int64_t num_rows = shape.batch, block_size = paging.block_size;
  const int64_t slots_per_row = shape.max_seq_len, num_blocks = paging.num_blocks;
  const int64_t max_blocks_per_seq = block_size > 0 ? ceil_div(shape.max_seq_len, block_size) : 0;
  const size_t T = plan.token_ids.size();
  const int64_t n = plan.num_seqs();
  require(plan.positions.size() == T, "positions.size()", plan.positions.size(),
          "must equal token_ids.size() = " + std::to_string(T));
  require(plan.slot_mapping.size() == T, "slot_mapping.size()", plan.slot_mapping.size(),
          "must equal token_ids.size() = " + std::to_string(T));
  require(n <= num_rows, "num_seqs()", n, "exceeds the cache's " + std::to_string(num_rows) + " rows");
  require(int64_t(plan.context_lens.size()) == n, "context_lens.size()", plan.context_lens.size(),
          "must equal num_seqs() = " + std::to_string(n));
  const bool paged = block_size > 0;
  require(int64_t(plan.block_tables.size()) == (paged ? n : 0), "block_tables.size()", plan.block_tables.size(),
          paged ? "must equal num_seqs() = " + std::to_string(n) + " (a paged cache)"
                : std::string("must be 0 (a contiguous cache has no block tables)"));
  require(plan.cu_seqlens_q.empty() ? T == 0 : plan.cu_seqlens_q.front() == 0, "cu_seqlens_q[0]",
          plan.cu_seqlens_q.empty() ? -1 : plan.cu_seqlens_q.front(), "must be 0");
  if (n > 0)
    require(plan.cu_seqlens_q.back() == int64_t(T), at("cu_seqlens_q", size_t(n)), plan.cu_seqlens_q.back(),
            "must equal token_ids.size() = " + std::to_string(T));
  require(paged || (plan.block_copies.empty() && plan.fresh_blocks.empty()), "block_copies.size()",
          plan.block_copies.size() + plan.fresh_blocks.size(), "must be 0 with fresh_blocks (a contiguous cache)");
  const auto require_block = [&](int32_t block, const std::string& field) {
    if (block < 0 || block >= num_blocks)
      require(false, field, block, "must be a block of the pool [0, " + std::to_string(num_blocks) + ")");
  };
  for (size_t i = 0; i < plan.block_copies.size(); ++i) {
    require_block(plan.block_copies[i].from, at("block_copies", i) + ".from");
    require_block(plan.block_copies[i].to, at("block_copies", i) + ".to");
  }
  for (size_t i = 0; i < plan.fresh_blocks.size(); ++i) require_block(plan.fresh_blocks[i], at("fresh_blocks", i));
  std::vector<int64_t> written;
  written.reserve(T);
  // Messages are built only for a bad entry (this runs every step).
  for (int64_t i = 0; i < n; ++i) {
    const size_t s = size_t(i);
    const int64_t begin = plan.cu_seqlens_q[s], end = plan.cu_seqlens_q[s + 1], context = plan.context_lens[s];
    if (end < begin)
      require(false, at("cu_seqlens_q", s + 1), end, "must be ≥ cu_seqlens_q[i] = " + std::to_string(begin));
    if (context < end - begin)
      require(false, at("context_lens", s), context,
              "must be ≥ the sequence's query length " + std::to_string(end - begin));
    if (paged) {
      const std::vector<int32_t>& table = plan.block_tables[s];
      if (int64_t(table.size()) * block_size < context)
        require(false, at("block_tables", s) + ".size()", table.size(),
                "must cover context_lens[i] = " + std::to_string(context) + " tokens in blocks of " +
                    std::to_string(block_size));
      if (int64_t(table.size()) > max_blocks_per_seq)
        require(false, at("block_tables", s) + ".size()", table.size(),
                "exceeds the cache's " + std::to_string(max_blocks_per_seq) + " blocks per sequence");
      for (size_t j = 0; j < table.size(); ++j) require_block(table[j], at("block_tables", s) + at("", j));
      for (size_t j = 0; j < table.size(); ++j)
        if (std::find(table.begin(), table.begin() + std::ptrdiff_t(j), table[j]) != table.begin() + std::ptrdiff_t(j))
          require(false, at("block_tables", s) + at("", j), table[j], "names a block the table already holds");
    } else if (context > slots_per_row) {
      require(false, at("context_lens", s), context, "exceeds a row's " + std::to_string(slots_per_row) + " slots");
    }
    for (int64_t t = begin; t < end; ++t) {
      const size_t k = size_t(t);
      const int64_t position = context - (end - begin) + (t - begin);
      if (plan.positions[k] != position)
        require(
            false, at("positions", k), plan.positions[k],
            "must be " + std::to_string(position) + " (context_lens[" + std::to_string(i) + "] − query length + j)");
      const int64_t expected =
          paged ? int64_t{plan.block_tables[s][size_t(position / block_size)]} * block_size + position % block_size
                : i * slots_per_row + position;
      if (plan.slot_mapping[k] != expected)
        require(false, at("slot_mapping", k), plan.slot_mapping[k],
                "must be " + std::to_string(expected) + ", the slot of sequence " + std::to_string(i) + "'s position " +
                    std::to_string(position) + (paged ? " in its block table" : " in its row"));
      written.push_back(plan.slot_mapping[k]);
    }
  }
  std::sort(written.begin(), written.end());
  if (const auto twice = std::adjacent_find(written.begin(), written.end()); twice != written.end())
    require(false, "slot_mapping", *twice, "is written twice in one step");
  for (size_t i = 0; i < plan.logits_indices.size(); ++i)
    if (plan.logits_indices[i] < 0 || plan.logits_indices[i] >= int64_t(T))
      require(false, at("logits_indices", i), plan.logits_indices[i],
              "must index token_ids (size " + std::to_string(T) + ")");
}

}  // namespace inferlab::model
