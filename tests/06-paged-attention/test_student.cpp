// Chapter 06 exercises, graded: the student's block allocator (6.1) and chained prefix hash
// (6.2) on the CPU, and paged decode kernel (6.3) on the sim backend (run by the SIMT emulator).
//   6.1 runs beside a reference model of the pool written plainly in this file (PoolModel: one
//       refcount per block, nothing else): every result — status, slot, copy-on-write copy,
//       fresh block, the caller's table — and every refcount and num_free() are compared after
//       every operation, in scripted scenarios and in thousands of random operations (fresh
//       seed, printed on failure).
//   6.2 against an FNV-1a 64 written independently here (itself checked on the published FNV
//       test vectors); a wrong value is diagnosed (parent missing, byte order, FNV-1 …).
//   6.3 against the float64 oracle: generation replayed through the block table
//       (tests/support/decode_check.h over to_paged caches: scattered blocks, poisoned tails),
//       and pools built here (blocks shared by two sequences, unmapped −1 entries, unused blocks
//       poisoned) with the oracle computed from the pool directly; a wrong output names the
//       sequence, head and block table, and says when it matches a typical lookup mistake.
// Every output is poisoned before a run. The three exercises are graded separately; each TEST
// is one grading unit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "06-paged-attention/ch06.h"
#include "common/check.h"
#include "common/compare.h"
#include "common/tolerance.h"
#include "kernels/decode/decode.h"
#include "kernels/kv/kv_cache.h"
#include "kernels/registry.h"
#include "tests/support/decode_check.h"
#include "tests/support/expect_all.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

using student::BlockCopy;
using student::BlockStatus;
using student::BlockTable;
using student::SlotResult;
using student::StudentBlockAllocator;
using testing::expect_all;

std::string str(const BlockTable& table) {
  std::string text = "[";
  for (size_t i = 0; i < table.size(); ++i) text += (i ? ", " : "") + std::to_string(table[i]);
  return text + "]";
}

std::string str(const std::optional<BlockCopy>& copy) {
  if (!copy) return "no copy";
  return "copy {from " + std::to_string(copy->from) + ", to " + std::to_string(copy->to) + "}";
}

std::string str(const std::optional<int32_t>& block) {
  return block ? "block " + std::to_string(*block) : "no block";
}

std::string str(const SlotResult& r) {
  return std::string(r.status == BlockStatus::ok ? "ok" : "out_of_blocks") + ", slot " + std::to_string(r.slot) + ", " +
         str(r.copy) + ", new_block " + str(r.new_block);
}

// ---- 6.1 the block allocator, beside a model ----

// The test's model of the pool: a refcount per block. A block is free exactly when its refcount
// is 0; which free block allocate() hands out is the allocator's choice (any is accepted).
struct PoolModel {
  int64_t block_size = 1;
  std::vector<int32_t> refcount;

  int64_t num_free() const { return std::count(refcount.begin(), refcount.end(), 0); }
};

// A sequence as the caller keeps it: its block table and its token count.
struct Sequence {
  BlockTable table;
  int64_t tokens = 0;
};

// What a run exercised, so that a test can insist that each path was taken.
struct AllocatorStats {
  int64_t appends = 0, fresh_blocks = 0, copies = 0, shared_full = 0, out_of_blocks = 0, forks = 0, frees = 0;
};

// The student's allocator and the model side by side, with the caller's sequences. Every
// operation checks the allocator's results against the model's, then every refcount and
// num_free(); a failure names the operation, what was expected, what came and which sequences
// hold the block in question.
class AllocatorRun {
 public:
  AllocatorRun(int64_t num_blocks, int64_t block_size)
      : allocator_(num_blocks, block_size), model_{block_size, std::vector<int32_t>(size_t(num_blocks), 0)} {}

  StudentBlockAllocator& allocator() { return allocator_; }
  const PoolModel& model() const { return model_; }
  std::map<int, Sequence>& sequences() { return sequences_; }
  Sequence& sequence(int id) { return sequences_.at(id); }
  AllocatorStats& stats() { return stats_; }
  int64_t block_size() const { return model_.block_size; }
  int64_t num_blocks() const { return int64_t(model_.refcount.size()); }

  // A new sequence with no token (an empty table).
  int add_sequence() {
    sequences_[next_id_] = Sequence{};
    return next_id_++;
  }

  // allocate() for a block outside any sequence; its result is stored in @p got.
  ::testing::AssertionResult allocate(std::optional<int32_t>& got) {
    const std::string op = "allocate() with " + std::to_string(model_.num_free()) + " free blocks";
    try {
      got = allocator_.allocate();
    } catch (const std::exception& error) {
      return failure(op + " threw: " + error.what());
    }
    if (model_.num_free() == 0) {
      if (got)
        return failure(op + ": every block is held, expected std::nullopt (out of blocks), got block " +
                       std::to_string(*got));
      ++stats_.out_of_blocks;
      return same_state(op);
    }
    if (!got) return failure(op + ": expected a block, got std::nullopt");
    if (const auto bad = not_fresh(*got)) return failure(op + ": " + *bad);
    model_.refcount[size_t(*got)] = 1;
    return same_state(op + " → block " + std::to_string(*got));
  }

  // append_token() for one more token of sequence @p id.
  ::testing::AssertionResult append(int id) {
    Sequence& s = sequences_.at(id);
    const int64_t bs = model_.block_size, offset = s.tokens % bs;
    const std::string op = "append_token(table " + str(s.table) + " of sequence " + std::to_string(id) +
                           ", num_tokens " + std::to_string(s.tokens) + ") with block_size " + std::to_string(bs);
    const int32_t last = s.table.empty() ? -1 : s.table.back();
    const bool starts_block = offset == 0;
    const int32_t last_refcount = last >= 0 ? model_.refcount[size_t(last)] : 0;
    const bool shared_partial = !starts_block && last_refcount > 1;
    const bool needs_block = starts_block || shared_partial;
    const std::string why =
        starts_block     ? (s.table.empty() ? "the table is empty"
                                            : "the last block " + std::to_string(last) + " is full (" + std::to_string(bs) +
                                              " tokens), so the token starts a new block")
        : shared_partial ? "the last block " + std::to_string(last) + " is shared (refcount " +
                               std::to_string(last_refcount) + ", " + holders(last) + ") and partly filled (" +
                               std::to_string(offset) + " of " + std::to_string(bs) + " tokens): copy-on-write"
                         : "the last block " + std::to_string(last) + " has room (" + std::to_string(offset) + " of " +
                               std::to_string(bs) + " tokens) and only this table holds it: write in place";

    BlockTable table = s.table;
    SlotResult r;
    try {
      r = allocator_.append_token(table, s.tokens);
    } catch (const std::exception& error) {
      return failure(op + " threw: " + error.what());
    }
    ++stats_.appends;
    const std::string got = " — got " + str(r) + ", table " + str(table);

    if (needs_block && model_.num_free() == 0) {  // out of blocks: nothing may change
      if (r.status != BlockStatus::out_of_blocks)
        return failure(op + ": " + why +
                       ", so it needs a fresh block, and none is free: expected status "
                       "out_of_blocks" +
                       got);
      if (r.slot != -1 || r.copy || r.new_block)
        return failure(op + ": out_of_blocks must come with slot −1, no copy and no new block" + got);
      if (table != s.table)
        return failure(op + ": out_of_blocks must leave the table as it was, " + str(s.table) + got);
      ++stats_.out_of_blocks;
      return same_state(op + " → out_of_blocks");
    }
    if (r.status != BlockStatus::ok)
      return failure(op + ": " + why +
                     (needs_block ? "; " + std::to_string(model_.num_free()) + " blocks are free" : "") +
                     ", so the append must succeed" + got);

    BlockTable expected_table = s.table;
    int64_t expected_slot = 0;
    if (!needs_block) {
      if (r.copy) return failure(op + ": " + why + " — no copy-on-write for a block only this table holds" + got);
      if (r.new_block) return failure(op + ": " + why + " — no fresh block needed" + got);
      expected_slot = int64_t(last) * bs + offset;
    } else {
      if (!r.new_block)
        return failure(op + ": " + why +
                       (shared_partial ? " — expected copy {from " + std::to_string(last) +
                                             ", to a fresh block} and new_block naming that block: written in place, "
                                             "the token would appear in the other holders' sequences too"
                                       : " — expected new_block to name the fresh block") +
                       got);
      const int32_t fresh = *r.new_block;
      if (const auto bad = not_fresh(fresh)) return failure(op + ": " + *bad + got);
      if (starts_block) {
        if (r.copy)
          return failure(op + ": " + why +
                         (last_refcount > 1 ? " — a full block is never written again, so even "
                                              "shared (refcount " +
                                                  std::to_string(last_refcount) + ") it is never copied"
                                            : " — nothing to copy") +
                         got);
        expected_table.push_back(fresh);
        stats_.shared_full += last_refcount > 1;
      } else {
        const BlockCopy expected{last, fresh};
        if (r.copy != std::optional<BlockCopy>(expected))
          return failure(op + ": " + why + " — expected " + str(std::optional<BlockCopy>(expected)) +
                         " (the shared block's rows into the fresh one, before the write)" + got);
        expected_table.back() = fresh;
        --model_.refcount[size_t(last)];  // the other holders keep it
        ++stats_.copies;
      }
      model_.refcount[size_t(fresh)] = 1;
      expected_slot = int64_t(fresh) * bs + offset;
      ++stats_.fresh_blocks;
    }
    if (table != expected_table)
      return failure(op + ": " + why + " — expected the table to become " + str(expected_table) + got);
    if (r.slot != expected_slot)
      return failure(op + ": " + why + " — expected slot " + std::to_string(expected_slot) + " = block " +
                     std::to_string(expected_table.back()) + " · block_size " + std::to_string(bs) + " + offset " +
                     std::to_string(offset) + got);
    s.table = table;
    ++s.tokens;
    return same_state(op + " → slot " + std::to_string(r.slot));
  }

  // @p count appends to sequence @p id; stops at the first out_of_blocks.
  ::testing::AssertionResult append_tokens(int id, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
      const int64_t before = sequences_.at(id).tokens;
      const ::testing::AssertionResult result = append(id);
      if (!result) return result;
      if (sequences_.at(id).tokens == before) break;  // out of blocks
    }
    return ::testing::AssertionSuccess();
  }

  // fork() of sequence @p parent into a new sequence, whose id is stored in @p child.
  ::testing::AssertionResult fork(int parent, int& child) {
    const Sequence& p = sequences_.at(parent);
    const std::string op = "fork(table " + str(p.table) + " of sequence " + std::to_string(parent) + ")";
    const BlockTable before = p.table;
    BlockTable table;
    try {
      table = allocator_.fork(p.table);
    } catch (const std::exception& error) {
      return failure(op + " threw: " + error.what());
    }
    if (table != before)
      return failure(op + ": the child must map its logical blocks to the very same physical blocks, " + str(before) +
                     " — got " + str(table));
    for (const int32_t block : table) ++model_.refcount[size_t(block)];
    child = add_sequence();
    sequences_[child] = Sequence{table, p.tokens};
    ++stats_.forks;
    return same_state(op + " → sequence " + std::to_string(child));
  }

  // free() of sequence @p id, which is then forgotten.
  ::testing::AssertionResult free(int id) {
    BlockTable table = sequences_.at(id).table;
    const std::string op = "free(table " + str(table) + " of sequence " + std::to_string(id) + ")";
    try {
      allocator_.free(table);
    } catch (const std::exception& error) {
      return failure(op + " threw: " + error.what());
    }
    if (!table.empty()) return failure(op + ": the table must be left empty — got " + str(table));
    for (const int32_t block : sequences_.at(id).table) --model_.refcount[size_t(block)];
    sequences_.erase(id);
    ++stats_.frees;
    return same_state(op);
  }

  // Every refcount and num_free() equal the model's.
  ::testing::AssertionResult same_state(const std::string& op) {
    for (int32_t block = 0; block < int32_t(num_blocks()); ++block) {
      int32_t got = 0;
      try {
        got = allocator_.refcount(block);
      } catch (const std::exception& error) {
        return failure("after " + op + ": refcount(" + std::to_string(block) + ") threw: " + error.what());
      }
      const int32_t want = model_.refcount[size_t(block)];
      if (got != want)
        return failure("after " + op + ": refcount(block " + std::to_string(block) + ") = " + std::to_string(got) +
                       ", expected " + std::to_string(want) + " (" + holders(block) + ")" +
                       (got > want ? " — a reference was not released (a leak)" : " — a reference was lost"));
    }
    if (allocator_.num_free() != model_.num_free())
      return failure("after " + op + ": num_free() = " + std::to_string(allocator_.num_free()) + ", expected " +
                     std::to_string(model_.num_free()) +
                     " (the blocks with refcount 0: each on the free stack "
                     "exactly once)");
    history_.push_back(op);
    if (history_.size() > 4) history_.erase(history_.begin());
    return ::testing::AssertionSuccess();
  }

  // Who holds @p block: "held by sequence 2 (logical block 1), sequence 5 (logical block 1)".
  std::string holders(int32_t block) const {
    std::string text;
    for (const auto& [id, s] : sequences_)
      for (size_t i = 0; i < s.table.size(); ++i)
        if (s.table[i] == block)
          text += (text.empty() ? "" : ", ") + std::string("sequence ") + std::to_string(id) + " (logical block " +
                  std::to_string(i) + ")";
    return text.empty() ? "held by no sequence's table" : "held by " + text;
  }

  // Frees every sequence, then checks that every block came back exactly once: allocate() hands
  // out each id once, then std::nullopt.
  ::testing::AssertionResult free_all_and_drain() {
    while (!sequences_.empty()) {
      const ::testing::AssertionResult result = free(sequences_.begin()->first);
      if (!result) return result;
    }
    std::set<int32_t> seen;
    for (int64_t i = 0; i < num_blocks(); ++i) {
      std::optional<int32_t> block;
      try {
        block = allocator_.allocate();
      } catch (const std::exception& error) {
        return failure(std::string("draining the pool: allocate() threw: ") + error.what());
      }
      if (!block)
        return failure("after freeing every table, allocate() number " + std::to_string(i + 1) + " of " +
                       std::to_string(num_blocks()) + " returned std::nullopt: a block never came back (a leak)");
      if (*block < 0 || *block >= num_blocks() || !seen.insert(*block).second)
        return failure("after freeing every table, allocate() returned block " + std::to_string(*block) +
                       (seen.contains(*block) ? " a second time: it was on the free stack twice (a double free)"
                                              : ", outside the pool"));
    }
    std::optional<int32_t> extra;
    try {
      extra = allocator_.allocate();
    } catch (const std::exception& error) {
      return failure(std::string("draining the pool: allocate() threw: ") + error.what());
    }
    if (extra)
      return failure("after handing out all " + std::to_string(num_blocks()) + " blocks, allocate() returned block " +
                     std::to_string(*extra) + " again: it was on the free stack twice (a double free)");
    return ::testing::AssertionSuccess();
  }

  // The failure with the last few successful operations before it.
  ::testing::AssertionResult failure(const std::string& message) const {
    std::string recent;
    for (const std::string& op : history_) recent += "\n    " + op;
    return ::testing::AssertionFailure() << message << "\n  (pool of " << num_blocks() << " blocks of "
                                         << model_.block_size << " tokens"
                                         << (recent.empty() ? std::string(")")
                                                            : "; the operations before:" + recent + ")");
  }

 private:
  // Why @p block cannot be the fresh block just handed out, if it cannot.
  std::optional<std::string> not_fresh(int32_t block) const {
    if (block < 0 || block >= num_blocks())
      return "block " + std::to_string(block) + " is outside the pool [0, " + std::to_string(num_blocks()) + ")";
    if (model_.refcount[size_t(block)] != 0)
      return "handed out block " + std::to_string(block) + " as fresh, but it is held (refcount " +
             std::to_string(model_.refcount[size_t(block)]) + ", " + holders(block) + ")";
    return std::nullopt;
  }

  StudentBlockAllocator allocator_;
  PoolModel model_;
  std::map<int, Sequence> sequences_;
  int next_id_ = 0;
  AllocatorStats stats_;
  std::vector<std::string> history_;
};

// Runs @p steps and stops at the first failure (ASSERT-like, for the scripted scenarios).
#define CH06_CHECK(expression)                               \
  do {                                                       \
    const ::testing::AssertionResult result_ = (expression); \
    if (!result_) {                                          \
      ADD_FAILURE() << result_.message();                    \
      return;                                                \
    }                                                        \
  } while (false)

TEST(Ch06Allocator, AllocateHandsOutEachBlockOnce) {
  // Every block once, each with refcount 1; then std::nullopt with nothing changed; after
  // freeing them (as one table), every block again.
  for (const int64_t num_blocks : {1, 5, 17}) {
    AllocatorRun run(num_blocks, 4);
    const int id = run.add_sequence();
    for (int pass = 0; pass < 2; ++pass) {
      std::set<int32_t> seen;
      for (int64_t i = 0; i < num_blocks; ++i) {
        std::optional<int32_t> block;
        CH06_CHECK(run.allocate(block));
        run.sequence(id).table.push_back(*block);
        run.sequence(id).tokens += run.block_size();
      }
      std::optional<int32_t> none;
      CH06_CHECK(run.allocate(none));  // out of blocks: std::nullopt, nothing changed
      CH06_CHECK(run.allocate(none));
      CH06_CHECK(run.free(id));
      run.sequences()[id] = Sequence{};
    }
  }
}

TEST(Ch06Allocator, AppendFillsBlocksInOrder) {
  // One sequence grows until the pool is exhausted: slot t is in table[t / block_size] at offset
  // t % block_size; a fresh block exactly at each block boundary; then out_of_blocks.
  for (const int64_t block_size : {1, 3, 16}) {
    AllocatorRun run(5, block_size);
    const int id = run.add_sequence();
    CH06_CHECK(run.append_tokens(id, 5 * block_size + 1));  // the last one runs out
    if (run.stats().out_of_blocks != 1 || run.sequence(id).tokens != 5 * block_size) {
      ADD_FAILURE() << "block_size " << block_size << ": 5 blocks hold " << 5 * block_size
                    << " tokens, then the next append must be out_of_blocks";
      return;
    }
    CH06_CHECK(run.free(id));
    CH06_CHECK(run.free_all_and_drain());
  }
}

TEST(Ch06Allocator, ForkSharesEveryBlock) {
  // Forks share every block (one reference per table), take none; frees give them back one
  // reference at a time; a fork of an empty table is empty.
  AllocatorRun run(8, 4);
  const int a = run.add_sequence();
  CH06_CHECK(run.append_tokens(a, 10));  // 3 blocks, the last one partly filled
  int b = 0, c = 0, d = 0, e = 0;
  CH06_CHECK(run.fork(a, b));
  CH06_CHECK(run.fork(a, c));
  CH06_CHECK(run.fork(b, d));  // a fork of a fork: refcount 4
  CH06_CHECK(run.free(a));
  CH06_CHECK(run.free(c));
  CH06_CHECK(run.free(b));              // d alone holds them now
  CH06_CHECK(run.append_tokens(d, 3));  // … so it writes in place: no copy
  if (run.stats().copies != 0) {
    ADD_FAILURE() << "sequence " << d << " is the last holder of its blocks: its appends must not copy";
    return;
  }
  const int empty = run.add_sequence();
  CH06_CHECK(run.fork(empty, e));
  CH06_CHECK(run.free_all_and_drain());
}

TEST(Ch06Allocator, CopyOnWriteExactlyWhenSharedAndPartial) {
  // Copy-on-write for a shared, partly filled last block — and only then: not for an unshared
  // partial block, not for a shared full block (the token starts a fresh block), not once the
  // other holders are gone.
  for (const int64_t block_size : {2, 4, 7}) {
    AllocatorRun run(24, block_size);
    // A shared partial block: the child copies; then the parent is its only holder again.
    const int a = run.add_sequence();
    CH06_CHECK(run.append_tokens(a, block_size + 1));
    int b = 0;
    CH06_CHECK(run.fork(a, b));
    CH06_CHECK(run.append(b));  // copy-on-write
    CH06_CHECK(run.append(a));  // refcount 1 again: in place
    // A shared full block: both sides start fresh blocks, nothing is copied.
    const int c = run.add_sequence();
    CH06_CHECK(run.append_tokens(c, 2 * block_size));
    int d = 0;
    CH06_CHECK(run.fork(c, d));
    CH06_CHECK(run.append(d));
    CH06_CHECK(run.append(c));
    // Three holders of a partial block: two copies, the last holder writes in place.
    int e = 0, f = 0;
    CH06_CHECK(run.fork(a, e));
    CH06_CHECK(run.fork(e, f));
    CH06_CHECK(run.append(f));
    CH06_CHECK(run.append(e));
    CH06_CHECK(run.append(a));
    const int64_t expected_copies = block_size > 2 ? 3 : 1;  // block_size 2: a's block is full again after 2 appends
    if (run.stats().copies != expected_copies || run.stats().shared_full == 0) {
      ADD_FAILURE() << "block_size " << block_size << ": expected " << expected_copies << " copies and a shared full "
                    << "block left uncopied, saw " << run.stats().copies << " copies";
      return;
    }
    CH06_CHECK(run.free_all_and_drain());
  }
}

TEST(Ch06Allocator, OutOfBlocksChangesNothing) {
  // An exhausted pool: allocate() gives std::nullopt, an append that needs a fresh block — a
  // full last block, or copy-on-write of a shared partial one — is out_of_blocks and changes
  // nothing (the shared block keeps its refcount), while appends and forks that need no block
  // still succeed; once a block is freed, the same append succeeds.
  AllocatorRun run(3, 4);
  const int a = run.add_sequence();
  CH06_CHECK(run.append_tokens(a, 6));  // [a0, a1], a1 partly filled
  int b = 0;
  CH06_CHECK(run.fork(a, b));  // a1 shared
  const int c = run.add_sequence();
  CH06_CHECK(run.append_tokens(c, 4));  // the last block: the pool is exhausted
  std::optional<int32_t> none;
  CH06_CHECK(run.allocate(none));
  CH06_CHECK(run.append(b));  // copy-on-write needs a block: out_of_blocks
  CH06_CHECK(run.append(c));  // c's block is full: out_of_blocks
  int d = 0;
  CH06_CHECK(run.fork(c, d));  // a fork needs no block
  const int64_t outs = run.stats().out_of_blocks;
  if (outs != 3) {
    ADD_FAILURE() << "expected 3 out_of_blocks outcomes (allocate, copy-on-write, fresh block), saw " << outs;
    return;
  }
  CH06_CHECK(run.free(c));
  CH06_CHECK(run.free(d));    // one block free again
  CH06_CHECK(run.append(b));  // the copy-on-write now succeeds
  CH06_CHECK(run.append(a));  // a is a1's only holder: in place
  CH06_CHECK(run.free_all_and_drain());
}

// One random-operations configuration.
struct RandomConfig {
  int64_t num_blocks = 12;
  int64_t block_size = 4;
  int64_t operations = 3000;
  int64_t max_live = 6;
  int64_t max_tokens = 40;
};

// Random appends, new sequences, forks and frees against the model.
::testing::AssertionResult random_operations(const RandomConfig& config, AllocatorStats& total) {
  testing::SeededRng rng;
  AllocatorRun run(config.num_blocks, config.block_size);
  const auto seeded = [&](::testing::AssertionResult result) {
    if (result) return result;
    return ::testing::AssertionFailure() << result.message() << "\n  random operations with seed " << rng.seed()
                                         << " (rerun with INFERLAB_SEED=" << rng.seed() << ")";
  };
  for (int64_t op = 0; op < config.operations; ++op) {
    std::vector<int> live;
    for (const auto& [id, s] : run.sequences()) live.push_back(id);
    const auto pick = [&] { return live[size_t(rng.integer(0, int64_t(live.size()) - 1))]; };
    const int64_t dice = rng.integer(0, 99);
    ::testing::AssertionResult result = ::testing::AssertionSuccess();
    if (live.empty() || (dice < 15 && int64_t(live.size()) < config.max_live)) {
      result = run.append_tokens(run.add_sequence(), rng.integer(1, 2 * config.block_size + 1));
    } else if (dice < 65) {
      const int id = pick();
      if (run.sequence(id).tokens >= config.max_tokens)
        result = run.free(id);
      else
        result = run.append_tokens(id, rng.integer(1, config.block_size + 1));
    } else if (dice < 82 && int64_t(live.size()) < config.max_live) {
      int child = 0;
      result = run.fork(pick(), child);
    } else {
      result = run.free(pick());
    }
    if (!result) return seeded(::testing::AssertionFailure() << "random operation " << op << ": " << result.message());
  }
  const ::testing::AssertionResult drained = run.free_all_and_drain();
  if (!drained) return seeded(drained);
  const AllocatorStats& s = run.stats();
  total.appends += s.appends;
  total.copies += s.copies;
  total.shared_full += s.shared_full;
  total.out_of_blocks += s.out_of_blocks;
  total.forks += s.forks;
  total.frees += s.frees;
  return ::testing::AssertionSuccess();
}

TEST(Ch06Allocator, RandomOperationsMatchTheModel) {
  // Thousands of random operations on small pools (allocation fails often): every result and
  // every refcount equal the model's after each one; at the end every block comes back once.
  AllocatorStats stats;
  expect_all(std::vector<RandomConfig>{{12, 4}, {6, 1}, {8, 3}, {24, 16, 2000, 8, 80}, {16, 2}},
             [&](const RandomConfig& c) { return random_operations(c, stats); });
  if (::testing::Test::HasFailure()) return;
  EXPECT_GT(stats.copies, 0) << "the random operations made no copy-on-write (a test bug)";
  EXPECT_GT(stats.shared_full, 0) << "the random operations never appended after a shared full block (a test bug)";
  EXPECT_GT(stats.out_of_blocks, 0) << "the random operations never ran out of blocks (a test bug)";
}

TEST(Ch06Allocator, FreeReturnsEveryBlockExactlyOnce) {
  // Families of forks freed in random orders: each block goes back to the free stack when its
  // last holder lets go — not before (a table still reads it), not twice (two sequences would
  // get it) — and never leaks.
  testing::SeededRng rng;
  for (int round = 0; round < 20; ++round) {
    AllocatorRun run(16, 3);
    const int root = run.add_sequence();
    CH06_CHECK(run.append_tokens(root, rng.integer(1, 10)));
    std::vector<int> family{root};
    for (int i = 0; i < 5; ++i) {
      int child = 0;
      CH06_CHECK(run.fork(family[size_t(rng.integer(0, int64_t(family.size()) - 1))], child));
      CH06_CHECK(run.append_tokens(child, rng.integer(0, 4)));
      family.push_back(child);
    }
    std::shuffle(family.begin(), family.end(), rng.engine());
    for (const int id : family) CH06_CHECK(run.free(id));
    if (run.allocator().num_free() != run.num_blocks()) {
      ADD_FAILURE() << "after freeing every table, num_free() = " << run.allocator().num_free() << " of "
                    << run.num_blocks() << " blocks";
      return;
    }
    CH06_CHECK(run.free_all_and_drain());
  }
}

// Calls @p call, which must throw E with a message naming each of @p words, and fails otherwise.
template <class E>
::testing::AssertionResult throws_naming(const std::string& what, const std::function<void()>& call,
                                         const std::vector<std::string>& words) {
  try {
    call();
  } catch (const NotImplemented& error) {
    return ::testing::AssertionFailure() << what << ": " << error.what();
  } catch (const E& error) {
    const std::string message = error.what();
    for (const std::string& word : words)
      if (message.find(word) == std::string::npos)
        return ::testing::AssertionFailure()
               << what << ": the error must name \"" << word << "\", it says: " << message;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << what << ": threw the wrong exception type (expected "
                                         << (std::is_same_v<E, std::logic_error> ? "std::logic_error"
                                                                                 : "std::invalid_argument")
                                         << "): " << error.what();
  }
  return ::testing::AssertionFailure() << what << ": did not throw";
}

TEST(Ch06Allocator, ErrorsNameTheBlockAndTheOperation) {
  // A double free, a fork or an append over a freed block, a block id outside the pool: each
  // throws (std::logic_error / std::invalid_argument) naming the operation and the block, and
  // changes nothing — checked before any refcount moves.
  AllocatorRun run(6, 4);
  const int a = run.add_sequence(), b = run.add_sequence();
  CH06_CHECK(run.append_tokens(a, 2));
  CH06_CHECK(run.append_tokens(b, 2));
  const int32_t freed = run.sequence(a).table[0], held = run.sequence(b).table[0];
  const BlockTable stale = run.sequence(a).table;
  CH06_CHECK(run.free(a));
  const std::string block = "block " + std::to_string(freed);
  StudentBlockAllocator& allocator = run.allocator();

  // free(): the freed block comes first, so a free that releases as it checks (last to first)
  // would already have released `held`.
  BlockTable double_free{freed, held};
  CH06_CHECK(throws_naming<std::logic_error>(
      "free(" + str(double_free) + ") where block " + std::to_string(freed) + " was freed already (a double free)",
      [&] { allocator.free(double_free); }, {"free", block, "refcount 0"}));
  CH06_CHECK(run.same_state("the failed free(" + str(BlockTable{freed, held}) +
                            ") (it must change nothing: check every block with require_held() before releasing any)"));
  if (double_free != BlockTable{freed, held})
    return ADD_FAILURE() << "a free() that throws must leave the table as it was, got " << str(double_free);

  CH06_CHECK(throws_naming<std::logic_error>(
      "fork(" + str(BlockTable{held, freed}) + ") over freed block " + std::to_string(freed),
      [&] {
        allocator.fork(BlockTable{held, freed});
      },
      {"fork", block, "refcount 0"}));
  CH06_CHECK(run.same_state("the failed fork (it must change nothing: check every block before adding references)"));

  BlockTable stale_copy = stale;
  CH06_CHECK(throws_naming<std::logic_error>(
      "append_token(" + str(stale) + ", 2) on a table freed already (a use after free)",
      [&] { allocator.append_token(stale_copy, 2); }, {"append_token", block, "refcount 0"}));
  CH06_CHECK(run.same_state("the failed append_token (it must change nothing)"));

  const std::string outside = std::to_string(run.num_blocks() + 3);
  CH06_CHECK(throws_naming<std::invalid_argument>(
      "free([" + outside + "]) in a pool of " + std::to_string(run.num_blocks()) + " blocks",
      [&] {
        BlockTable bad{int32_t(run.num_blocks() + 3)};
        allocator.free(bad);
      },
      {"free", outside}));
  CH06_CHECK(
      throws_naming<std::invalid_argument>("fork([-1])", [&] { allocator.fork(BlockTable{-1}); }, {"fork", "-1"}));
  CH06_CHECK(throws_naming<std::invalid_argument>(
      "refcount(" + outside + ")", [&] { allocator.refcount(int32_t(run.num_blocks() + 3)); }, {outside}));
  BlockTable one{held};
  CH06_CHECK(throws_naming<std::invalid_argument>(
      "append_token([" + std::to_string(held) + "], num_tokens 9): 9 tokens need 3 blocks of 4",
      [&] { allocator.append_token(one, 9); }, {"table.size()", "num_tokens"}));
  CH06_CHECK(run.same_state("the failed calls (they must change nothing)"));
  CH06_CHECK(run.free_all_and_drain());
}

// ---- 6.2 the chained prefix hash ----

constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ULL, kPrime = 0x100000001b3ULL;

// FNV-1a 64 of a byte string, from the published definition (checked on its test vectors below).
uint64_t fnv1a(const std::vector<uint8_t>& bytes, uint64_t start = kOffsetBasis) {
  uint64_t h = start;
  for (const uint8_t x : bytes) {
    h ^= x;
    h *= kPrime;
  }
  return h;
}

// The bytes the contract hashes: @p value's @p n bytes, least (or most) significant first.
void append_bytes(std::vector<uint8_t>& bytes, uint64_t value, int n, bool big_endian = false) {
  for (int i = 0; i < n; ++i) bytes.push_back(uint8_t(value >> (8 * (big_endian ? n - 1 - i : i))));
}

uint64_t expected_block_hash(uint64_t parent, std::span<const int32_t> tokens) {
  std::vector<uint8_t> bytes;
  append_bytes(bytes, parent, 8);
  for (const int32_t t : tokens) append_bytes(bytes, uint32_t(t), 4);
  return fnv1a(bytes);
}

std::vector<uint64_t> expected_prefix_hashes(std::span<const int32_t> tokens, int64_t block_size) {
  std::vector<uint64_t> hashes;
  uint64_t parent = student::kFirstBlockParentHash;
  for (int64_t i = 0; i + block_size <= int64_t(tokens.size()); i += block_size)
    hashes.push_back(parent = expected_block_hash(parent, tokens.subspan(size_t(i), size_t(block_size))));
  return hashes;
}

std::string hex(uint64_t value) {
  std::ostringstream out;
  out << "0x" << std::hex << value;
  return out.str();
}

std::string str_tokens(std::span<const int32_t> tokens) {
  std::string text = "{";
  for (size_t i = 0; i < tokens.size() && i < 8; ++i) text += (i ? ", " : "") + std::to_string(tokens[i]);
  if (tokens.size() > 8) text += ", … (" + std::to_string(tokens.size()) + " tokens)";
  return text + "}";
}

// What a wrong block hash looks like it computed, when it matches a classic mistake.
std::string diagnose_block_hash(uint64_t got, uint64_t parent, std::span<const int32_t> tokens) {
  struct Variant {
    const char* hint;
    std::function<uint64_t()> hash;
  };
  const auto hash_of = [&](bool parent_first, bool with_parent, bool big_endian, int token_bytes, bool fnv1) {
    std::vector<uint8_t> bytes;
    if (with_parent && parent_first) append_bytes(bytes, parent, 8, big_endian);
    for (const int32_t t : tokens)
      append_bytes(bytes, token_bytes == 8 ? uint64_t(int64_t(t)) : uint32_t(t), token_bytes, big_endian);
    if (with_parent && !parent_first) append_bytes(bytes, parent, 8, big_endian);
    if (!fnv1) return fnv1a(bytes);
    uint64_t h = kOffsetBasis;
    for (const uint8_t x : bytes) h = (h * kPrime) ^ x;
    return h;
  };
  const std::vector<Variant> variants{
      {"the parent hash is missing: hash its 8 bytes first — it is what chains the blocks",
       [&] { return hash_of(true, false, false, 4, false); }},
      {"the parent hash comes after the tokens: hash its 8 bytes first",
       [&] { return hash_of(false, true, false, 4, false); }},
      {"the bytes are in big-endian order: take the least significant byte first ((value >> 8·k) & 0xff, k = 0, 1, …)",
       [&] { return hash_of(true, true, true, 4, false); }},
      {"each token was hashed as 8 bytes: hash the 4 bytes of uint32_t(token)",
       [&] { return hash_of(true, true, false, 8, false); }},
      {"that is FNV-1 (multiply, then XOR): FNV-1a XORs the byte first, then multiplies",
       [&] { return hash_of(true, true, false, 4, true); }},
      {"the parent hash was used as the starting value: start from the offset basis 0xcbf29ce484222325 and hash the "
       "parent's bytes",
       [&] {
         std::vector<uint8_t> bytes;
         for (const int32_t t : tokens) append_bytes(bytes, uint32_t(t), 4);
         return fnv1a(bytes, parent);
       }},
  };
  for (const Variant& v : variants)
    if (got == v.hash()) return " — " + std::string(v.hint);
  return "";
}

// student_block_hash on @p tokens after @p parent equals the contract's value.
::testing::AssertionResult block_hash_matches(uint64_t parent, std::span<const int32_t> tokens) {
  const uint64_t want = expected_block_hash(parent, tokens);
  uint64_t got = 0;
  try {
    got = student::student_block_hash(parent, tokens.data(), int64_t(tokens.size()));
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << "student_block_hash(" << hex(parent) << ", " << str_tokens(tokens) << ", "
                                         << tokens.size() << ") threw: " << error.what();
  }
  if (got == want) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "student_block_hash(parent " << hex(parent) << ", tokens "
                                       << str_tokens(tokens) << ", count " << tokens.size() << ") = " << hex(got)
                                       << ", expected " << hex(want) << diagnose_block_hash(got, parent, tokens);
}

// student_prefix_hashes(@p tokens, @p block_size) equals the contract's chain, hash by hash.
::testing::AssertionResult prefix_hashes_match(std::span<const int32_t> tokens, int64_t block_size) {
  const std::vector<uint64_t> want = expected_prefix_hashes(tokens, block_size);
  std::vector<uint64_t> got;
  const std::string call =
      "student_prefix_hashes(" + str_tokens(tokens) + ", block_size " + std::to_string(block_size) + ")";
  try {
    got = student::student_prefix_hashes(tokens, block_size);
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << call << " threw: " << error.what();
  }
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << call << " returned " << got.size() << " hashes, expected " << want.size()
                                         << " = " << tokens.size() << " / " << block_size << " (one per FULL block"
                                         << (tokens.size() % size_t(block_size)
                                                 ? "; the partial last block of " +
                                                       std::to_string(tokens.size() % size_t(block_size)) +
                                                       " tokens gets none — its content can still change"
                                                 : "")
                                         << ")";
  uint64_t parent = student::kFirstBlockParentHash;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      const std::span<const int32_t> block = tokens.subspan(i * size_t(block_size), size_t(block_size));
      std::string hint;
      if (got[i] == expected_block_hash(student::kFirstBlockParentHash, block))
        hint = " — that is block " + std::to_string(i) +
               " hashed after kFirstBlockParentHash: each block's parent is "
               "the previous block's hash (the chain)";
      else if (i > 0 && got[i] == expected_block_hash(want[i - 1], tokens.subspan(0, (i + 1) * size_t(block_size))))
        hint = " — that hashes every token from the start: hash only block " + std::to_string(i) + "'s tokens";
      else
        hint = diagnose_block_hash(got[i], parent, block);
      return ::testing::AssertionFailure()
             << call << ": hash " << i << " (tokens " << i * size_t(block_size) << " … "
             << (i + 1) * size_t(block_size) - 1 << ") = " << hex(got[i]) << ", expected " << hex(want[i])
             << " = student_block_hash(hash " << int64_t(i) - 1 << (i == 0 ? " = kFirstBlockParentHash" : "")
             << ", its " << block_size << " tokens)" << hint;
    }
    parent = want[i];
  }
  return ::testing::AssertionSuccess();
}

std::vector<int32_t> random_tokens(Rng& rng, int64_t count) {
  std::vector<int32_t> tokens(static_cast<size_t>(count));
  for (int32_t& t : tokens) {
    const int64_t kind = rng.integer(0, 9);  // mostly vocabulary ids, sometimes extremes and negatives
    t = kind < 7   ? int32_t(rng.integer(0, 151935))
        : kind < 9 ? int32_t(rng.integer(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()))
                   : int32_t(rng.integer(-3, 3));
  }
  return tokens;
}

TEST(Ch06PrefixHash, BlockHashExactValues) {
  // The contract's worked values, then random tokens (negative and large ids too) after random
  // parents, counts 0 to 40.
  ASSERT_EQ(fnv1a({'a'}), 0xaf63dc4c8601ec8cULL) << "the test's own FNV-1a is wrong (a test bug)";
  ASSERT_EQ(fnv1a({'f', 'o', 'o', 'b', 'a', 'r'}), 0x85944171f73967e8ULL) << "the test's own FNV-1a is wrong";
  const std::vector<int32_t> worked{1, 2, 3};
  ASSERT_EQ(expected_block_hash(student::kFirstBlockParentHash, worked), 0x731475a701ee4960ULL) << "test bug";
  EXPECT_TRUE(block_hash_matches(student::kFirstBlockParentHash, worked)) << "(the worked value of ch06.h)";
  if (::testing::Test::HasFailure()) return;
  EXPECT_TRUE(block_hash_matches(student::kFirstBlockParentHash, {})) << "(count 0: the parent's bytes only)";
  testing::SeededRng rng;
  std::vector<std::pair<uint64_t, std::vector<int32_t>>> cases;
  for (int i = 0; i < 200; ++i) {
    const uint64_t parent = i % 5 == 0 ? student::kFirstBlockParentHash : uint64_t(rng.engine()());
    cases.push_back({parent, random_tokens(rng, rng.integer(0, 40))});
  }
  expect_all(cases, [](const auto& c) { return block_hash_matches(c.first, c.second); });
}

TEST(Ch06PrefixHash, ChainsThroughThePrefix) {
  // Hash i names tokens [0, (i + 1)·block_size): two prompts that differ only in block k get the
  // same hashes before k and different ones from k on — even for later blocks whose own tokens
  // are equal; the same block after different parents gets different hashes.
  testing::SeededRng rng;
  for (const int64_t block_size : {1, 3, 16}) {
    const int64_t blocks = 5;
    std::vector<int32_t> first = random_tokens(rng, blocks * block_size + block_size / 2);
    EXPECT_TRUE(prefix_hashes_match(first, block_size));
    if (::testing::Test::HasFailure()) return;
    for (int64_t k = 0; k < blocks; ++k) {
      std::vector<int32_t> second = first;
      second[size_t(k * block_size + rng.integer(0, block_size - 1))] ^= 0x5a5a;  // block k differs, the rest is equal
      std::vector<uint64_t> h1, h2;
      try {
        h1 = student::student_prefix_hashes(first, block_size);
        h2 = student::student_prefix_hashes(second, block_size);
      } catch (const std::exception& error) {
        return ADD_FAILURE() << "student_prefix_hashes threw: " << error.what();
      }
      EXPECT_TRUE(prefix_hashes_match(second, block_size));
      for (int64_t i = 0; i < blocks && i < int64_t(std::min(h1.size(), h2.size())); ++i) {
        if (i < k && h1[size_t(i)] != h2[size_t(i)])
          return ADD_FAILURE() << "block_size " << block_size << ": two prompts equal up to block " << k
                               << " must get the same hash for block " << i << ", got " << hex(h1[size_t(i)]) << " and "
                               << hex(h2[size_t(i)]);
        if (i >= k && h1[size_t(i)] == h2[size_t(i)])
          return ADD_FAILURE() << "block_size " << block_size << ": the prompts differ in block " << k << ", so block "
                               << i << " must get different hashes"
                               << (i > k ? " although its own tokens are equal: its parent hash differs" : "")
                               << " — both got " << hex(h1[size_t(i)]);
      }
    }
  }
  const std::vector<int32_t> block = random_tokens(rng, 4);
  try {
    const uint64_t after_a = student::student_block_hash(0x1234, block.data(), 4);
    const uint64_t after_b = student::student_block_hash(0x1235, block.data(), 4);
    EXPECT_NE(after_a, after_b) << "the same block after parents 0x1234 and 0x1235 got the same hash " << hex(after_a)
                                << ": the parent must be hashed";
  } catch (const std::exception& error) {
    ADD_FAILURE() << "student_block_hash threw: " << error.what();
  }
}

TEST(Ch06PrefixHash, HashesOnlyFullBlocks) {
  // tokens.size() / block_size hashes; a partial tail is ignored: adding tokens to it changes no
  // hash, and completing it adds exactly one.
  testing::SeededRng rng;
  for (const int64_t block_size : {2, 5, 16}) {
    const std::vector<int32_t> full = random_tokens(rng, 3 * block_size);
    std::vector<uint64_t> base;
    try {
      base = student::student_prefix_hashes(full, block_size);
    } catch (const std::exception& error) {
      return ADD_FAILURE() << "student_prefix_hashes threw: " << error.what();
    }
    EXPECT_TRUE(prefix_hashes_match(full, block_size));
    for (int64_t tail = 1; tail <= block_size; ++tail) {
      std::vector<int32_t> longer = full;
      const std::vector<int32_t> extra = random_tokens(rng, tail);
      longer.insert(longer.end(), extra.begin(), extra.end());
      EXPECT_TRUE(prefix_hashes_match(longer, block_size));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(Ch06PrefixHash, BlockSizeOneAndLargerThanThePrompt) {
  // block_size 1: one hash per token, chained; block_size equal to the prompt: one hash; larger:
  // none; no tokens: none. A block_size ≤ 0 is refused (std::invalid_argument).
  testing::SeededRng rng;
  const std::vector<int32_t> worked{1, 2, 3, 4, 5};
  EXPECT_TRUE(prefix_hashes_match(worked, 2)) << "(the worked value of ch06.h)";
  if (::testing::Test::HasFailure()) return;
  for (const int64_t n : {1, 2, 7, 33}) {
    const std::vector<int32_t> tokens = random_tokens(rng, n);
    EXPECT_TRUE(prefix_hashes_match(tokens, 1));
    EXPECT_TRUE(prefix_hashes_match(tokens, n));
    EXPECT_TRUE(prefix_hashes_match(tokens, n + 1));
    EXPECT_TRUE(prefix_hashes_match(tokens, 4 * n + 3));
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_TRUE(prefix_hashes_match({}, 4));
  for (const int64_t bad : {0, -2}) {
    try {
      student::student_prefix_hashes(worked, bad);
      ADD_FAILURE() << "student_prefix_hashes(…, block_size " << bad << ") did not throw std::invalid_argument";
    } catch (const std::invalid_argument&) {
    } catch (const std::exception& error) {
      ADD_FAILURE() << "student_prefix_hashes(…, block_size " << bad << ") threw something other than "
                    << "std::invalid_argument: " << error.what();
    }
  }
}

// ---- 6.3 paged decode attention on the sim backend ----

// A pool [num_blocks, num_kv_heads, block_size, head_dim] with its block table and lengths, as
// the student's launcher takes them.
struct Pool {
  Tensor<float> k, v;
  std::vector<int32_t> block_table;
  int64_t max_blocks_per_seq = 0;
  std::vector<int32_t> lengths;

  int64_t num_blocks() const { return k.dim(0); }
  int64_t num_kv_heads() const { return k.dim(1); }
  int64_t block_size() const { return k.dim(2); }
  int64_t head_dim() const { return k.dim(3); }
};

// The pool of a paged fp32 KvCache, bit for bit (the poisoned rows stay NaN).
Pool pool_of(const KvCache& cache) {
  if (!cache.paged()) throw std::logic_error("test bug: the chapter-06 exercise reads a paged cache");
  const KvCacheShape& s = cache.shape();
  const Shape shape{cache.paging().num_blocks, s.num_kv_heads, cache.paging().block_size, s.head_dim};
  Pool pool{Tensor<float>(shape), Tensor<float>(shape), cache.block_table(), cache.max_blocks_per_seq(),
            cache.lengths()};
  std::memcpy(pool.k.data(), cache.k_fp32().data(), size_t(pool.k.size()) * sizeof(float));
  std::memcpy(pool.v.data(), cache.v_fp32().data(), size_t(pool.v.size()) * sizeof(float));
  return pool;
}

// sim::student::paged_decode_attention on @p pool, into @p out (poisoned first).
void run_student(const Tensor<float>& q, const Pool& pool, Tensor<float>& out, int threads_per_block = 128) {
  out.poison();
  sim::student::paged_decode_attention(q, pool.k, pool.v, pool.block_table, pool.max_blocks_per_seq, pool.lengths, out,
                                       threads_per_block);
}

// The student's kernel as a DecodeFn over a paged KvCache.
DecodeFn student_decode(int threads_per_block = 128) {
  return [threads_per_block](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    run_student(q, pool_of(cache), out, threads_per_block);
  };
}

void cpu_append(KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
  cache.append(k_new, v_new);
}

// The row of token j of KV head g of sequence b, or −1 where it lies outside the pool: the
// contract's lookup, or one of the mistakes the diagnosis tries.
using RowFn = std::function<int64_t(const Pool&, int64_t b, int64_t g, int64_t j)>;

int64_t contract_row(const Pool& p, int64_t b, int64_t g, int64_t j) {
  const int64_t block = p.block_table[size_t(b * p.max_blocks_per_seq + j / p.block_size())];
  return (block * p.num_kv_heads() + g) * p.block_size() + j % p.block_size();
}

// The float64 decode over @p pool with rows found by @p row_of (NaN where a row is outside the
// pool); query head h reads KV head g = kv_of(h).
Tensor<double> pool_oracle(const Tensor<float>& q, const Pool& p, const RowFn& row_of,
                           const std::function<int64_t(int64_t h, int64_t group)>& kv_of) {
  const int64_t batch = q.dim(0), heads = q.dim(1), d = q.dim(2), group = heads / p.num_kv_heads();
  const int64_t rows = p.num_blocks() * p.num_kv_heads() * p.block_size();
  const double scale = 1.0 / std::sqrt(double(d));
  Tensor<double> out(q.shape());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t L = p.lengths[size_t(b)], g = kv_of(h, group);
      std::vector<int64_t> row(static_cast<size_t>(L));
      std::vector<double> w(static_cast<size_t>(L));
      double max_score = -INFINITY;
      for (int64_t j = 0; j < L; ++j) {
        const int64_t r = row_of(p, b, g, j);  // a KV head past the last one spills into the next block, as on a GPU
        row[size_t(j)] = r >= 0 && r < rows ? r : -1;
        double dot = std::numeric_limits<double>::quiet_NaN();
        if (row[size_t(j)] >= 0) {
          dot = 0.0;
          for (int64_t c = 0; c < d; ++c) dot += double(q[(b * heads + h) * d + c]) * p.k[row[size_t(j)] * d + c];
        }
        w[size_t(j)] = dot * scale;
        max_score = std::isnan(w[size_t(j)]) ? w[size_t(j)] : std::max(max_score, w[size_t(j)]);
      }
      double sum = 0.0;
      for (double& x : w) sum += (x = std::exp(x - max_score));
      for (int64_t c = 0; c < d; ++c) {
        double acc = 0.0;
        for (int64_t j = 0; j < L; ++j)
          acc += row[size_t(j)] >= 0 ? w[size_t(j)] * p.v[row[size_t(j)] * d + c]
                                     : std::numeric_limits<double>::quiet_NaN();
        out[(b * heads + h) * d + c] = acc / sum;
      }
    }
  return out;
}

std::string table_row(const Pool& p, int64_t b) {
  std::string text = "[";
  for (int64_t i = 0; i < p.max_blocks_per_seq; ++i)
    text += (i ? ", " : "") + std::to_string(p.block_table[size_t(b * p.max_blocks_per_seq + i)]);
  return text + "]";
}

// True when @p out is what the mistaken lookup behind @p mistaken computes: NaN exactly where it
// reads a poisoned or missing row, within @p tolerance elsewhere.
bool matches_mistake(const Tensor<float>& out, const Tensor<double>& mistaken, const Tolerance& tolerance) {
  double max_ref = 1.0;
  for (int64_t i = 0; i < mistaken.size(); ++i)
    if (std::isfinite(mistaken[i])) max_ref = std::max(max_ref, std::abs(mistaken[i]));
  int64_t finite = 0;
  for (int64_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(mistaken[i])) {
      if (std::isfinite(out[i])) return false;
    } else if (!std::isfinite(out[i]) || std::abs(out[i] - mistaken[i]) > tolerance.max_abs * max_ref) {
      return false;
    } else {
      ++finite;
    }
  }
  return finite > 0;  // an output of NaN only matches no mistake in particular
}

// Where @p out first differs from @p expected, and which typical lookup mistake it matches.
std::string explain_mismatch(const Tensor<float>& q, const Pool& p, const Tensor<float>& out,
                             const Tensor<double>& expected, const Tolerance& tolerance) {
  const int64_t heads = q.dim(1), d = q.dim(2), group = heads / p.num_kv_heads();
  double max_ref = 1.0;
  for (int64_t i = 0; i < expected.size(); ++i) max_ref = std::max(max_ref, std::abs(expected[i]));
  std::ostringstream text;
  for (int64_t i = 0; i < out.size(); ++i) {
    if (std::isfinite(out[i]) && std::abs(out[i] - expected[i]) <= tolerance.max_abs * max_ref) continue;
    const int64_t b = i / (heads * d), h = i / d % heads, c = i % d;
    text << "\n  first wrong element: out[" << b << "][" << h << "][" << c << "] = " << out[i] << ", expected "
         << expected[i] << " — sequence " << b << " (length " << p.lengths[size_t(b)] << ", block table row "
         << table_row(p, b) << ", block_size " << p.block_size() << "), query head " << h << " reads KV head "
         << h / group;
    break;
  }
  const auto same_kv = [](int64_t h, int64_t group) { return h / group; };
  struct Mistake {
    const char* hint;
    RowFn row;
    std::function<int64_t(int64_t, int64_t)> kv;
  };
  const std::vector<Mistake> mistakes{
      {"the output matches a kernel that ignores the block table (logical block i of sequence b read from physical "
       "block b · max_blocks_per_seq + i): look up p = block_table[b · max_blocks_per_seq + j / block_size]",
       [](const Pool& p, int64_t b, int64_t g, int64_t j) {
         return ((b * p.max_blocks_per_seq + j / p.block_size()) * p.num_kv_heads() + g) * p.block_size() +
                j % p.block_size();
       },
       same_kv},
      {"the output matches a kernel that reads sequence 0's block-table row for every sequence: the row of sequence b "
       "starts at b · max_blocks_per_seq",
       [](const Pool& p, int64_t, int64_t g, int64_t j) { return contract_row(p, 0, g, j); }, same_kv},
      {"the output matches a pool read as [num_blocks][block_size][num_kv_heads][head_dim]: it is "
       "[num_blocks][num_kv_heads][block_size][head_dim], row (p · num_kv_heads + g) · block_size + j % block_size",
       [](const Pool& p, int64_t b, int64_t g, int64_t j) {
         const int64_t block = p.block_table[size_t(b * p.max_blocks_per_seq + j / p.block_size())];
         return (block * p.block_size() + j % p.block_size()) * p.num_kv_heads() + g;
       },
       same_kv},
      {"the output matches a kernel that reads KV head h (the query head) instead of g = h / group_size", contract_row,
       [](int64_t h, int64_t) { return h; }},
  };
  for (const Mistake& m : mistakes) {
    if (matches_mistake(out, pool_oracle(q, p, m.row, m.kv), tolerance)) {
      text << "\n  hint: " << m.hint;
      break;
    }
  }
  return text.str();
}

// The largest |q · k_j| / √head_dim over every query head and cached token.
double max_abs_logit(const Tensor<float>& q, const Pool& p) {
  const int64_t heads = q.dim(1), d = q.dim(2), group = heads / p.num_kv_heads();
  double max_logit = 0.0;
  for (int64_t b = 0; b < q.dim(0); ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < p.lengths[size_t(b)]; ++j) {
        const int64_t row = contract_row(p, b, h / group, j);
        double dot = 0.0;
        for (int64_t c = 0; c < d; ++c) dot += double(q[(b * heads + h) * d + c]) * p.k[row * d + c];
        max_logit = std::max(max_logit, std::abs(dot) / std::sqrt(double(d)));
      }
  return max_logit;
}

// The student's output on @p pool against the float64 oracle computed from the pool.
::testing::AssertionResult matches_pool_oracle(const std::string& name, const Tensor<float>& q, const Pool& pool,
                                               int threads_per_block = 128) {
  Tensor<float> out(q.shape());
  try {
    run_student(q, pool, out, threads_per_block);
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << name << ": paged_decode_attention threw: " << error.what();
  }
  const Tensor<double> expected =
      pool_oracle(q, pool, contract_row, [](int64_t h, int64_t group) { return h / group; });
  // Softmax amplifies the rounding of large logits: the tolerance widens with the largest one,
  // as in every decode test.
  const Tolerance tolerance = attention_tolerance(Precision::fp32, max_abs_logit(q, pool));
  const Comparison comparison = compare_to_oracle(out, expected, tolerance);
  if (comparison.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << name << ": out [batch, num_heads, head_dim] is not the attention over each "
                                       << "sequence's rows found through the block table:\n"
                                       << comparison.report() << explain_mismatch(q, pool, out, expected, tolerance);
}

// One pool built here: each sequence's blocks (its block-table row; −1 pads it), its length,
// the shapes. Rows that no sequence's first lengths[b] tokens map to are poisoned with NaN.
struct PoolCase {
  std::vector<std::vector<int32_t>> tables;
  std::vector<int32_t> lengths;
  int64_t num_blocks = 16, block_size = 4, num_heads = 4, num_kv_heads = 2, head_dim = 64;
  float logit_scale = 1.0f;
  int threads_per_block = 128;
  uint64_t seed = 0;  // of the pool's and q's values: derived from the TEST's printed seed

  std::string name() const {
    std::ostringstream out;
    out << "pool of " << num_blocks << " blocks of " << block_size << ", lengths [";
    for (size_t b = 0; b < lengths.size(); ++b) out << (b ? ", " : "") << lengths[b];
    out << "], h" << num_heads << " kv" << num_kv_heads << " d" << head_dim;
    if (logit_scale != 1.0f) out << " logits×" << logit_scale;
    if (threads_per_block != 128) out << ", " << threads_per_block << " threads";
    return out.str();
  }
};

Pool make_pool(const PoolCase& c, Rng& rng) {
  const Shape shape{c.num_blocks, c.num_kv_heads, c.block_size, c.head_dim};
  Pool pool{rng.normal_tensor(shape), rng.normal_tensor(shape), {}, 0, c.lengths};
  for (const auto& row : c.tables) pool.max_blocks_per_seq = std::max(pool.max_blocks_per_seq, int64_t(row.size()));
  for (const auto& row : c.tables) {
    std::vector<int32_t> padded = row;
    padded.resize(size_t(pool.max_blocks_per_seq), -1);
    pool.block_table.insert(pool.block_table.end(), padded.begin(), padded.end());
  }
  std::vector<bool> used(size_t(c.num_blocks * c.num_kv_heads * c.block_size), false);
  for (size_t b = 0; b < c.lengths.size(); ++b)
    for (int64_t g = 0; g < c.num_kv_heads; ++g)
      for (int64_t j = 0; j < c.lengths[b]; ++j) used[size_t(contract_row(pool, int64_t(b), g, j))] = true;
  for (size_t r = 0; r < used.size(); ++r)
    if (!used[r])
      for (int64_t x = 0; x < c.head_dim; ++x) {
        pool.k[int64_t(r) * c.head_dim + x] = std::numeric_limits<float>::quiet_NaN();
        pool.v[int64_t(r) * c.head_dim + x] = std::numeric_limits<float>::quiet_NaN();
      }
  return pool;
}

// The student's kernel on the pool of @p c against the oracle. The values come from c.seed, which
// each TEST derives from its SeededRng: the seed that the failure's trace prints replays it.
::testing::AssertionResult pool_case_matches(const PoolCase& c) {
  Rng rng(c.seed);
  const Pool pool = make_pool(c, rng);
  const Tensor<float> q = rng.normal_tensor({int64_t(c.lengths.size()), c.num_heads, c.head_dim}, 0.0f, c.logit_scale);
  return matches_pool_oracle(c.name(), q, pool, c.threads_per_block);
}

// A case whose sequences take blocks in scattered order from a pool with spare (poisoned) blocks.
PoolCase scattered_case(const std::vector<int32_t>& lengths, int64_t block_size, int64_t num_heads,
                        int64_t num_kv_heads, int64_t head_dim, uint64_t seed) {
  PoolCase c;
  c.lengths = lengths;
  c.block_size = block_size;
  c.num_heads = num_heads;
  c.num_kv_heads = num_kv_heads;
  c.head_dim = head_dim;
  c.seed = seed;
  int64_t needed = 0;
  for (const int32_t L : lengths) needed += (L + block_size - 1) / block_size;
  c.num_blocks = needed + 3;  // three spare blocks, poisoned
  const std::vector<int32_t> order = scattered_block_order(c.num_blocks, seed);
  size_t next = 0;
  for (const int32_t L : lengths) {
    c.tables.emplace_back();
    for (int64_t i = 0; i < (L + block_size - 1) / block_size; ++i) c.tables.back().push_back(order[next++]);
  }
  return c;
}

TEST(Ch06PagedDecode, GenerationThroughTheBlockTable) {
  // Prefill, then append (the CPU append, through the block table) and decode with your kernel
  // token after token: every step equals row t of the causal prefill. Blocks of 1, 2, 7 and 16
  // tokens in scattered order (no logical neighbour physically next to its predecessor), ragged
  // batches, GQA, a sequence that fills its last block exactly, the tails poisoned.
  std::vector<testing::DecodeCase> cases;
  for (const int64_t block_size : {1, 2, 7, 16}) {
    testing::DecodeCase ragged{{9, 3, 17}, 3, 8, 2, 80};
    ragged.block_size = block_size;
    testing::DecodeCase full{{12, 16}, 2, 4, 4, 64, 0};  // the longest sequence fills its cache
    full.block_size = block_size;
    testing::DecodeCase single{{1, 33}, 1, 2, 1, 96};
    single.block_size = block_size;
    cases.insert(cases.end(), {ragged, full, single});
  }
  expect_all(cases, [](const testing::DecodeCase& c) {
    const ::testing::AssertionResult result =
        testing::decode_steps_match_prefill(student_decode(), KvDtype::fp32, cpu_append, c);
    if (result) return result;
    return ::testing::AssertionFailure()
           << result.message() << "\n  (a paged cache of " << c.block_size << "-token blocks handed out in scattered "
           << "order: token j of KV head g of sequence b is row (block_table[b · max_blocks_per_seq + j / block_size] "
              "· "
           << "num_kv_heads + g) · block_size + j % block_size of the pool; NaN comes from a row that holds no token "
           << "of the sequence — a wrong block, a wrong row in it, or a token at or past the length)";
  });
}

TEST(Ch06PagedDecode, ScatteredBlocksEqualTheOracle) {
  // A contiguous cache copied block by block into a scattered pool (to_paged): your kernel on the
  // pool equals the float64 oracle over the original cache, for block sizes 1, 2, 7 and 16 and
  // lengths on both sides of block edges.
  std::vector<int64_t> block_sizes{1, 2, 7, 16};
  expect_all(block_sizes, [](const int64_t block_size) -> ::testing::AssertionResult {
    testing::SeededRng rng;
    const std::vector<int64_t> lengths{block_size, block_size + 1, 1, 2 * block_size + 3, 3 * block_size - 1};
    const int64_t batch = int64_t(lengths.size()), kv_heads = 2, heads = 4, d = 64;
    const int64_t max_len = *std::max_element(lengths.begin(), lengths.end()) + 2;
    const KvCache contiguous = make_kv_cache(rng.normal_tensor({batch, kv_heads, max_len, d}),
                                             rng.normal_tensor({batch, kv_heads, max_len, d}), lengths, KvDtype::fp32);
    const KvCache paged = to_paged(contiguous, block_size, rng.seed());
    const Tensor<float> q = rng.normal_tensor({batch, heads, d});
    const std::string name = "block_size " + std::to_string(block_size) + ", lengths [" + std::to_string(lengths[0]) +
                             ", " + std::to_string(lengths[1]) + ", 1, " + std::to_string(lengths[3]) + ", " +
                             std::to_string(lengths[4]) + "], h4 kv2 d64";
    const Pool pool = pool_of(paged);
    Tensor<float> out(q.shape());
    try {
      run_student(q, pool, out);
    } catch (const std::exception& error) {
      return ::testing::AssertionFailure() << name << ": paged_decode_attention threw: " << error.what();
    }
    const Tolerance tolerance = tolerance_for(Precision::fp32);
    const Tensor<double> expected = decode_reference(q, contiguous);
    const Comparison comparison = compare_to_oracle(out, expected, tolerance);
    if (comparison.ok) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << name << ": out is not the float64 decode oracle over the same tokens:\n"
                                         << comparison.report() << explain_mismatch(q, pool, out, expected, tolerance)
                                         << "\n  seed " << rng.seed() << " (rerun with INFERLAB_SEED=" << rng.seed()
                                         << ")";
  });
}

TEST(Ch06PagedDecode, SharedBlocksAndUnmappedEntries) {
  // Forked sequences share their prefix blocks (two block-table rows name the same physical
  // block); entries past a sequence's last block are −1; spare blocks hold NaN. Only the blocks
  // of each sequence's first lengths[b] tokens may be read.
  testing::SeededRng rng;
  std::vector<PoolCase> cases;
  PoolCase fork_case;  // sequences 0 and 1 share blocks 5 and 2 (a fork), then own their last blocks
  fork_case.tables = {{5, 2, 9}, {5, 2, 11}, {0}, {7, 3, 12, 1}};
  fork_case.lengths = {20, 17, 4, 28};
  fork_case.num_blocks = 14;
  fork_case.block_size = 7;
  cases.push_back(fork_case);
  PoolCase same_blocks;  // two sequences with the very same table and length (right after a fork)
  same_blocks.tables = {{3, 1}, {3, 1}, {6}};
  same_blocks.lengths = {6, 6, 1};
  same_blocks.num_blocks = 8;
  same_blocks.block_size = 4;
  same_blocks.num_heads = 8;
  same_blocks.num_kv_heads = 8;
  same_blocks.head_dim = 80;
  cases.push_back(same_blocks);
  PoolCase reversed;  // blocks in decreasing order, a long table mostly −1
  reversed.tables = {{15, 14, 13, 12, 11, 10, 9, 8, -1, -1, -1, -1}, {4, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}};
  reversed.lengths = {15, 2};
  reversed.num_blocks = 16;
  reversed.block_size = 2;
  reversed.num_heads = 2;
  reversed.num_kv_heads = 1;
  reversed.head_dim = 33;
  cases.push_back(reversed);
  for (size_t i = 0; i < cases.size(); ++i) cases[i].seed = rng.seed() + i;
  expect_all(cases, pool_case_matches);
}

TEST(Ch06PagedDecode, GroupedQueryAttention) {
  // Query head h reads KV head h / (num_heads / num_kv_heads): ratios 1, 2, 4, 8 over a pool of
  // 7-token blocks.
  testing::SeededRng rng;
  std::vector<PoolCase> cases;
  for (const int64_t kv_heads : {8, 4, 2, 1})
    cases.push_back(scattered_case({9, 4, 15}, 7, 8, kv_heads, 64, rng.seed() + uint64_t(kv_heads)));
  cases.push_back(scattered_case({13, 6}, 7, 6, 3, 80, rng.seed()));
  expect_all(cases, pool_case_matches);
}

TEST(Ch06PagedDecode, RaggedBatchesAndOddShapes) {
  // Each sequence its own length and its own blocks; head_dim below a warp (7), not a multiple
  // of 32 (36), above the block (160); extreme logits (subtract the max before exp).
  testing::SeededRng rng;
  std::vector<PoolCase> cases{
      scattered_case({1, 40, 7, 2, 19}, 16, 4, 2, 64, rng.seed()),
      scattered_case({3, 17, 33}, 2, 4, 2, 96, rng.seed() + 1), scattered_case({9, 4}, 3, 4, 2, 7, rng.seed() + 2),
      scattered_case({9, 4}, 5, 4, 2, 36, rng.seed() + 3), scattered_case({6, 11}, 4, 2, 1, 160, rng.seed() + 4)};
  PoolCase extreme = scattered_case({19, 23}, 7, 4, 2, 64, rng.seed() + 5);
  extreme.logit_scale = 40.0f;
  cases.push_back(extreme);
  expect_all(cases, pool_case_matches);
}

TEST(Ch06PagedDecode, ThreadsPerBlock) {
  // One warp, an odd number of warps, more threads than keys, 1024 threads.
  testing::SeededRng rng;
  std::vector<PoolCase> cases;
  for (const int threads : {32, 96, 256, 1024}) {
    PoolCase c = scattered_case({40, 3}, 7, 4, 2, 80, rng.seed() + uint64_t(threads));
    c.threads_per_block = threads;
    cases.push_back(c);
  }
  expect_all(cases, pool_case_matches);
}

TEST(Ch06PagedDecode, SameOutputUnderEverySchedule) {
  // Forward, reverse and shuffled thread orders must give the same bits — a missing
  // __syncthreads() makes the result depend on the order — and the right ones.
  testing::SeededRng rng;
  std::vector<PoolCase> cases{scattered_case({33, 5, 17}, 1, 8, 2, 80, rng.seed()),
                              scattered_case({33, 5, 17}, 7, 8, 2, 80, rng.seed() + 1)};
  cases.back().threads_per_block = 96;
  expect_all(cases, [](const PoolCase& c) -> ::testing::AssertionResult {
    Rng data(c.seed);
    const Pool pool = make_pool(c, data);
    const Tensor<float> q = data.normal_tensor({int64_t(c.lengths.size()), c.num_heads, c.head_dim});
    const ::testing::AssertionResult same = testing::host_same_under_schedules(
        [&](Tensor<float>& out) { run_student(q, pool, out, c.threads_per_block); }, q.shape());
    const ::testing::AssertionResult right = same ? matches_pool_oracle(c.name(), q, pool, c.threads_per_block) : same;
    if (same && right) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << (same ? "" : c.name() + ": ") << right.message();
  });
}

}  // namespace
}  // namespace inferlab
