// The step plan (step_plan.h): how a sequence's step is appended, and the well-formedness check
// that the model runner and the engine's check_invariants mode run.
#include "runtime/model/step_plan.h"

#include <algorithm>
#include <cstring>
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

namespace {

// The plan's wire format: each vector as a uint64 count and its elements' bytes.
class PlanWriter {
 public:
  template <typename T>
  void put(const std::vector<T>& values) {
    put_count(values.size());
    append(values.data(), values.size() * sizeof(T));
  }
  void put_count(uint64_t n) { append(&n, sizeof n); }
  std::vector<uint8_t> bytes;

 private:
  void append(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + n);
  }
};

class PlanReader {
 public:
  explicit PlanReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  template <typename T>
  std::vector<T> get(const char* field) {
    const uint64_t n = get_count(field);
    require(n <= (bytes_.size() - at_) / sizeof(T), field, n, "elements: more than the bytes left");
    std::vector<T> values(n);
    take(values.data(), n * sizeof(T), field);
    return values;
  }
  uint64_t get_count(const char* field) {
    uint64_t n = 0;
    take(&n, sizeof n, field);
    return n;
  }
  void expect_end() const {
    require(at_ == bytes_.size(), "plan bytes", bytes_.size() - at_, "left over after the plan's last field");
  }

 private:
  void take(void* out, size_t n, const char* field) {
    require(n <= bytes_.size() - at_, field, "the plan's bytes", "end before this field");
    if (n > 0) std::memcpy(out, bytes_.data() + at_, n);
    at_ += n;
  }
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

}  // namespace

std::vector<uint8_t> encode_step_plan(const StepPlan& plan) {
  PlanWriter w;
  w.put(plan.token_ids);
  w.put(plan.positions);
  w.put(plan.cu_seqlens_q);
  w.put(plan.context_lens);
  w.put_count(plan.block_tables.size());
  for (const std::vector<int32_t>& table : plan.block_tables) w.put(table);
  w.put(plan.slot_mapping);
  w.put(plan.logits_indices);
  w.put(plan.block_copies);
  w.put(plan.fresh_blocks);
  return std::move(w.bytes);
}

StepPlan decode_step_plan(std::span<const uint8_t> bytes) {
  PlanReader r(bytes);
  StepPlan plan;
  plan.token_ids = r.get<int32_t>("token_ids");
  plan.positions = r.get<int64_t>("positions");
  plan.cu_seqlens_q = r.get<int64_t>("cu_seqlens_q");
  plan.context_lens = r.get<int64_t>("context_lens");
  const uint64_t tables = r.get_count("block_tables");
  require(tables <= bytes.size(), "block_tables", tables, "tables: more than the bytes left");
  plan.block_tables.resize(tables);
  for (std::vector<int32_t>& table : plan.block_tables) table = r.get<int32_t>("block_tables[i]");
  plan.slot_mapping = r.get<int64_t>("slot_mapping");
  plan.logits_indices = r.get<int64_t>("logits_indices");
  plan.block_copies = r.get<paged::BlockCopy>("block_copies");
  plan.fresh_blocks = r.get<int32_t>("fresh_blocks");
  r.expect_end();
  return plan;
}

std::vector<MicroBatch> split_micro_batches(const StepPlan& plan, int micro_batches) {
  require(micro_batches >= 1, "micro_batches", micro_batches, "must be at least 1");
  const int64_t tokens = int64_t(plan.token_ids.size());
  const int64_t m = std::min<int64_t>(micro_batches, tokens);
  if (m <= 1 || plan.block_tables.empty()) {  // one micro-batch: the plan itself
    MicroBatch whole{plan, {}};
    for (size_t r = 0; r < plan.logits_indices.size(); ++r) whole.logits_rows.push_back(int64_t(r));
    return {whole};
  }
  std::vector<MicroBatch> out(static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j) {
    const int64_t lo = j * tokens / m, hi = (j + 1) * tokens / m;  // this slice of the packed tokens
    MicroBatch& mb = out[size_t(j)];
    for (int64_t i = 0; i < plan.num_seqs(); ++i) {
      const int64_t a = plan.cu_seqlens_q[size_t(i)], b = plan.cu_seqlens_q[size_t(i) + 1];
      const int64_t s = std::max(a, lo), e = std::min(b, hi);
      if (s >= e) continue;
      // The sequence's tokens [s, e): its context ends at e (its tokens after e come later).
      const int64_t context = plan.context_lens[size_t(i)] - (b - e);
      mb.plan.add_sequence(std::span(plan.token_ids).subspan(size_t(s), size_t(e - s)),
                           std::span(plan.slot_mapping).subspan(size_t(s), size_t(e - s)), context,
                           plan.block_tables[size_t(i)], false);
      const int64_t local = int64_t(mb.plan.token_ids.size()) - (e - s);  // the slice's first token here
      for (size_t r = 0; r < plan.logits_indices.size(); ++r) {
        const int64_t t = plan.logits_indices[r];
        if (t >= s && t < e) {
          mb.plan.logits_indices.push_back(local + (t - s));
          mb.logits_rows.push_back(int64_t(r));
        }
      }
    }
  }
  out[0].plan.block_copies = plan.block_copies;
  out[0].plan.fresh_blocks = plan.fresh_blocks;
  return out;
}

}  // namespace inferlab::model
