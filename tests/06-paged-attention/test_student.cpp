// Chapter 06 exercises, graded: the student's block allocator (6.1) and chained prefix hash
// (6.2) on the CPU, and paged decode kernel (6.3) on the sim backend (run by the SIMT emulator).
// Every call into the student's library runs in a sandboxed child process
// (tests/support/isolation.h): this process draws the inputs, computes the expected results and
// decides; the student's code only ever sends back what it returned.
//   6.1 is stateful, so each scenario (the allocator's construction, every operation, its
//       destruction) runs in ONE child, which sends back a trace: every result — status, slot,
//       copy-on-write copy, fresh block, the caller's table, the exception and its message — and
//       every refcount and num_free() after each operation. The operations are fixed before the
//       child starts (planned on the test's model of the pool, PoolModel: one refcount per block,
//       nothing else, so never from the student's answers); this process then replays them on
//       the model and compares the trace step by step, in scripted scenarios, scenarios with
//       fresh random sizes, and thousands of random operations (fresh seed, printed on failure).
//   6.2 against an FNV-1a 64 written independently here (itself checked on the published FNV
//       test vectors), on the contract's worked values and on fresh random tokens; a wrong value
//       is diagnosed (parent missing, byte order, FNV-1 …).
//   6.3 against the float64 oracle: generation replayed through the block table
//       (tests/support/decode_check.h over to_paged caches: scattered blocks, poisoned tails),
//       and pools built here (blocks shared by two sequences, unmapped −1 entries, unused blocks
//       poisoned) with the oracle computed from the pool directly; a wrong output names the
//       sequence, head and block table, and says when it matches a typical lookup mistake.
//       Every call must launch a kernel and stay within the device-memory budget of ch06.h.
// Every output is poisoned before a run. The three exercises are graded separately; each TEST
// is one grading unit.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "06-paged-attention/ch06.h"
#include "common/check.h"
#include "common/compare.h"
#include "common/tolerance.h"
#include "kernels/decode/decode.h"
#include "kernels/kv/kv_cache.h"
#include "kernels/kv/kv_factories.h"
#include "kernels/registry.h"
#include "tests/support/decode_check.h"
#include "tests/support/expect_all.h"
#include "tests/support/isolation.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"
#include "tests/support/student_code.h"

namespace inferlab {
namespace {

// The student function each TEST grades: a failure is printed there first (tests/support/student_code.h).
INFERLAB_GRADED_FUNCTIONS({
    {"Ch06Allocator", "StudentBlockAllocator"},
    {"Ch06Allocator.AllocateHandsOutEachBlockOnce", "StudentBlockAllocator::allocate"},
    {"Ch06Allocator.AppendFillsBlocksInOrder", "StudentBlockAllocator::append_token"},
    {"Ch06Allocator.ForkSharesEveryBlock", "StudentBlockAllocator::fork"},
    {"Ch06Allocator.CopyOnWriteExactlyWhenSharedAndPartial", "StudentBlockAllocator::append_token"},
    {"Ch06Allocator.FreeReturnsEveryBlockExactlyOnce", "StudentBlockAllocator::free"},
    {"Ch06PrefixHash", "student_prefix_hashes"},
    {"Ch06PrefixHash.BlockHashExactValues", "student_block_hash"},
    {"Ch06PagedDecode", "paged_decode_attention"},
});

using student::BlockCopy;
using student::BlockStatus;
using student::BlockTable;
using student::SlotResult;
using student::StudentBlockAllocator;
using testing::expect_all;

std::string str(const BlockTable& table) {
  std::string text = "[";
  for (size_t i = 0; i < table.size() && i < 64; ++i) text += (i ? ", " : "") + std::to_string(table[i]);
  if (table.size() > 64) text += ", … (" + std::to_string(table.size()) + " entries)";
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
  const std::string status = r.status == BlockStatus::ok              ? "ok"
                             : r.status == BlockStatus::out_of_blocks ? "out_of_blocks"
                                                                      : "status " + std::to_string(int(r.status));
  return status + ", slot " + std::to_string(r.slot) + ", " + str(r.copy) + ", new_block " + str(r.new_block);
}

// ---- the wire: what a sandboxed child sends back ----
//
// A child returns one flat std::vector<int64_t>: numbers as they are; a table as its size and
// its entries; an exception as its kind, its message's length and the message's bytes. A student
// call's NotImplemented is not traced: it ends the child, and the whole check reports it.

enum class Thrown : int64_t { nothing = 0, invalid_argument = 1, logic_error = 2, other = 3 };

std::string str(Thrown kind) {
  switch (kind) {
    case Thrown::nothing:
      return "nothing";
    case Thrown::invalid_argument:
      return "std::invalid_argument";
    case Thrown::logic_error:
      return "std::logic_error";
    case Thrown::other:
      return "an exception";
  }
  return "?";
}

// What a student call threw.
struct Caught {
  Thrown kind = Thrown::nothing;
  std::string message;
  explicit operator bool() const { return kind != Thrown::nothing; }
};

// Runs @p call (in the child) and returns what it threw; NotImplemented goes on up.
template <class F>
Caught catching(F&& call) {
  try {
    call();
    return {};
  } catch (const NotImplemented&) {
    throw;
  } catch (const std::invalid_argument& error) {
    return {Thrown::invalid_argument, error.what()};
  } catch (const std::logic_error& error) {
    return {Thrown::logic_error, error.what()};
  } catch (const std::exception& error) {
    return {Thrown::other, std::string(typeid(error).name()) + ": " + error.what()};
  }
}

constexpr size_t kMaxTracedEntries = 4096;  // a table or hash list longer than this: its size only
constexpr size_t kMaxTracedMessage = 2000;  // bytes of an exception's message

class TraceWriter {
 public:
  void push(int64_t value) { values_.push_back(value); }
  void push(const BlockTable& table) {
    push(int64_t(table.size()));
    for (size_t i = 0; i < table.size() && i < kMaxTracedEntries; ++i) push(table[i]);
  }
  void push(const Caught& caught) {
    push(int64_t(caught.kind));
    if (!caught) return;
    const size_t n = std::min(caught.message.size(), kMaxTracedMessage);
    push(int64_t(n));
    for (size_t i = 0; i < n; ++i) push(int64_t(static_cast<unsigned char>(caught.message[i])));
  }
  std::vector<int64_t>& values() { return values_; }

 private:
  std::vector<int64_t> values_;
};

// The trace came back cut short or garbled (the student code wrote over the child's memory?).
class MalformedTrace : public std::runtime_error {
 public:
  MalformedTrace() : std::runtime_error("the trace sent back by the sandboxed child is cut short or garbled") {}
};

class TraceReader {
 public:
  explicit TraceReader(const std::vector<int64_t>& values) : values_(values) {}
  int64_t next() {
    if (position_ >= values_.size()) throw MalformedTrace();
    return values_[position_++];
  }
  BlockTable table() {
    const int64_t size = next();
    if (size < 0) throw MalformedTrace();
    BlockTable table;
    // A table longer than kMaxTracedEntries came back truncated; its true size is kept with
    // INT32_MIN entries, which no correct table holds.
    for (int64_t i = 0; i < size; ++i)
      table.push_back(size_t(i) < kMaxTracedEntries ? int32_t(next()) : std::numeric_limits<int32_t>::min());
    return table;
  }
  Caught caught() {
    const int64_t kind = next();
    if (kind < 0 || kind > 3) throw MalformedTrace();
    Caught caught{Thrown(kind), {}};
    if (!caught) return caught;
    const int64_t n = next();
    if (n < 0 || size_t(n) > kMaxTracedMessage) throw MalformedTrace();
    for (int64_t i = 0; i < n; ++i) caught.message += char(next());
    return caught;
  }
  bool done() const { return position_ == values_.size(); }

 private:
  const std::vector<int64_t>& values_;
  size_t position_ = 0;
};

// ---- 6.1 the block allocator: a scenario in one sandboxed child, replayed on a model here ----

// One operation of a scenario. Sequences are numbered by the test; the caller (the test's code,
// in the child and in the model alike) owns their tables and token counts.
enum class OpKind : int64_t {
  allocate,      // allocate(); a block it returns joins sequence `seq`'s table as a full block (seq −1: none)
  append,        // append_token(seq's table, seq's token count); ok: the table becomes the returned one
  fork,          // fork(seq's table): sequence `child` gets the returned table and seq's token count
  free,          // free(a copy of seq's table); seq is gone (its last table is kept, for later cases to name)
  free_table,    // free(an explicit table): an error case
  fork_table,    // fork(an explicit table): an error case
  append_table,  // append_token(an explicit table, num_tokens): an error case
  refcount,      // refcount(block): an error case
};

// A block id of an explicit table: @c literal, or entry @c index of sequence @c seq's table (its
// last table, once freed) — resolved the same way in the child and in the model.
struct BlockRef {
  int seq = -1;
  int index = 0;
  int32_t literal = 0;
};

// What an error case must throw.
enum class Expect { logic_error, invalid_argument };

struct Op {
  OpKind kind = OpKind::allocate;
  int seq = -1;
  int child = -1;
  // The error cases:
  std::vector<BlockRef> table{};  // the explicit table
  int64_t num_tokens = 0;         // append_table
  int32_t block = 0;              // refcount
  Expect expect = Expect::logic_error;
  std::vector<std::string> words{};  // the message must name each of them …
  int named_ref = -1;                // … and "block <id>" of table[named_ref], when ≥ 0
  std::string why{};                 // the case, in words
};

// A scenario: the pool and the operations, fixed before the child runs them.
struct Scenario {
  std::string name;
  int64_t num_blocks = 1;
  int64_t block_size = 1;
  int num_sequences = 0;
  std::vector<Op> ops;
};

// The caller's view of one sequence.
struct Sequence {
  BlockTable table;
  int64_t tokens = 0;
  bool live = true;  // false once freed: the table is kept as it was
};

int32_t resolve(const BlockRef& ref, const std::vector<Sequence>& sequences) {
  if (ref.seq < 0) return ref.literal;
  const BlockTable& table = sequences.at(size_t(ref.seq)).table;
  return size_t(ref.index) < table.size() ? table[size_t(ref.index)] : std::numeric_limits<int32_t>::min();
}

BlockTable resolve(const std::vector<BlockRef>& refs, const std::vector<Sequence>& sequences) {
  BlockTable table;
  for (const BlockRef& ref : refs) table.push_back(resolve(ref, sequences));
  return table;
}

constexpr int64_t kRefcountThrew = std::numeric_limits<int64_t>::min();

// The child: runs the first @p count operations of @p s on the student's allocator, and sends
// back the trace. Per operation: its index, what it threw, its results (by kind), then num_free()
// and every refcount.
std::vector<int64_t> run_scenario_in_sandbox(const Scenario& s, size_t count) {
  return testing::isolated_result([&s, count] {
    TraceWriter trace;
    StudentBlockAllocator allocator(s.num_blocks, s.block_size);
    std::vector<Sequence> sequences(size_t(s.num_sequences));
    for (size_t i = 0; i < count && i < s.ops.size(); ++i) {
      const Op& op = s.ops[i];
      trace.push(int64_t(i));
      switch (op.kind) {
        case OpKind::allocate: {
          std::optional<int32_t> got;
          const Caught caught = catching([&] { got = allocator.allocate(); });
          trace.push(caught);
          if (caught) break;
          trace.push(got.has_value());
          trace.push(got.value_or(0));
          if (got && op.seq >= 0) {
            sequences[size_t(op.seq)].table.push_back(*got);
            sequences[size_t(op.seq)].tokens += s.block_size;
          }
          break;
        }
        case OpKind::append:
        case OpKind::append_table: {
          Sequence* sequence = op.kind == OpKind::append ? &sequences[size_t(op.seq)] : nullptr;
          BlockTable table = sequence ? sequence->table : resolve(op.table, sequences);
          const int64_t tokens = sequence ? sequence->tokens : op.num_tokens;
          SlotResult r;
          const Caught caught = catching([&] { r = allocator.append_token(table, tokens); });
          trace.push(caught);
          trace.push(table);
          if (caught) break;
          trace.push(int64_t(r.status));
          trace.push(r.slot);
          trace.push(r.copy.has_value());
          trace.push(r.copy ? r.copy->from : 0);
          trace.push(r.copy ? r.copy->to : 0);
          trace.push(r.new_block.has_value());
          trace.push(r.new_block.value_or(0));
          if (sequence && r.status == BlockStatus::ok) {
            sequence->table = table;
            ++sequence->tokens;
          }
          break;
        }
        case OpKind::fork:
        case OpKind::fork_table: {
          const BlockTable parent =
              op.kind == OpKind::fork ? sequences[size_t(op.seq)].table : resolve(op.table, sequences);
          BlockTable child;
          const Caught caught = catching([&] { child = allocator.fork(parent); });
          trace.push(caught);
          if (caught) break;
          trace.push(child);
          if (op.kind == OpKind::fork) sequences[size_t(op.child)] = {child, sequences[size_t(op.seq)].tokens, true};
          break;
        }
        case OpKind::free:
        case OpKind::free_table: {
          BlockTable table = op.kind == OpKind::free ? sequences[size_t(op.seq)].table : resolve(op.table, sequences);
          const Caught caught = catching([&] { allocator.free(table); });
          trace.push(caught);
          trace.push(table);
          if (op.kind == OpKind::free) sequences[size_t(op.seq)].live = false;
          break;
        }
        case OpKind::refcount: {
          int32_t got = 0;
          const Caught caught = catching([&] { got = allocator.refcount(op.block); });
          trace.push(caught);
          if (!caught) trace.push(got);
          break;
        }
      }
      int64_t free_blocks = kRefcountThrew;
      catching([&] { free_blocks = allocator.num_free(); });
      trace.push(free_blocks);
      for (int32_t block = 0; block < int32_t(s.num_blocks); ++block) {
        int64_t refcount = kRefcountThrew;
        catching([&] { refcount = allocator.refcount(block); });
        trace.push(refcount);
      }
    }
    return std::move(trace.values());
  });
}

// What a run exercised, so that a test can insist that each path was taken.
struct AllocatorStats {
  int64_t appends = 0, fresh_blocks = 0, copies = 0, shared_full = 0, out_of_blocks = 0, forks = 0, frees = 0;
  void add(const AllocatorStats& o) {
    appends += o.appends, fresh_blocks += o.fresh_blocks, copies += o.copies, shared_full += o.shared_full;
    out_of_blocks += o.out_of_blocks, forks += o.forks, frees += o.frees;
  }
};

// The test's model of the pool: a refcount per block, free exactly when 0 (which free block
// allocate() hands out is the allocator's choice: any is accepted), and the caller's sequences.
struct PoolModel {
  int64_t block_size = 1;
  std::vector<int32_t> refcount;
  std::vector<Sequence> sequences;
  AllocatorStats stats;

  PoolModel(int64_t num_blocks, int64_t size) : block_size(size), refcount(size_t(num_blocks), 0) {}
  int64_t num_blocks() const { return int64_t(refcount.size()); }
  int64_t num_free() const { return std::count(refcount.begin(), refcount.end(), 0); }
  int32_t lowest_free() const { return int32_t(std::find(refcount.begin(), refcount.end(), 0) - refcount.begin()); }

  // Who holds @p block: "held by sequence 2 (logical block 1), sequence 5 (logical block 1)".
  std::string holders(int32_t block) const {
    std::string text;
    for (size_t id = 0; id < sequences.size(); ++id) {
      const Sequence& s = sequences[id];
      if (!s.live) continue;
      for (size_t i = 0; i < s.table.size(); ++i)
        if (s.table[i] == block)
          text += (text.empty() ? "" : ", ") + std::string("sequence ") + std::to_string(id) + " (logical block " +
                  std::to_string(i) + ")";
    }
    return text.empty() ? "held by no sequence's table" : "held by " + text;
  }

  // Why @p block cannot be the fresh block just handed out, if it cannot.
  std::optional<std::string> not_fresh(int32_t block) const {
    if (block < 0 || block >= num_blocks())
      return "block " + std::to_string(block) + " is outside the pool [0, " + std::to_string(num_blocks()) + ")";
    if (refcount[size_t(block)] != 0)
      return "handed out block " + std::to_string(block) + " as fresh, but it is held (refcount " +
             std::to_string(refcount[size_t(block)]) + ", " + holders(block) +
             (holders(block) == "held by no sequence's table" ? ": allocate() handed it out already — it was on the "
                                                                "free stack twice, a double free)"
                                                              : ")");
    return std::nullopt;
  }

  void allocate(int seq, std::optional<int32_t> block) {
    if (!block) {
      ++stats.out_of_blocks;
      return;
    }
    refcount[size_t(*block)] = 1;
    if (seq >= 0) {
      sequences[size_t(seq)].table.push_back(*block);
      sequences[size_t(seq)].tokens += block_size;
    }
  }

  void fork(int parent, int child) {
    for (const int32_t block : sequences[size_t(parent)].table) ++refcount[size_t(block)];
    sequences[size_t(child)] = {sequences[size_t(parent)].table, sequences[size_t(parent)].tokens, true};
    ++stats.forks;
  }

  void free(int seq) {
    for (const int32_t block : sequences[size_t(seq)].table) --refcount[size_t(block)];
    sequences[size_t(seq)].live = false;
    ++stats.frees;
  }
};

// What append_token() must do for one more token of sequence @p seq.
struct AppendPlan {
  int64_t offset = 0;
  int32_t last = -1;
  int32_t last_refcount = 0;
  bool starts_block = false, shared_partial = false, needs_block = false, out_of_blocks = false;

  AppendPlan(const PoolModel& m, int seq) {
    const Sequence& s = m.sequences[size_t(seq)];
    offset = s.tokens % m.block_size;
    last = s.table.empty() ? -1 : s.table.back();
    starts_block = offset == 0;
    last_refcount = last >= 0 ? m.refcount[size_t(last)] : 0;
    shared_partial = !starts_block && last_refcount > 1;
    needs_block = starts_block || shared_partial;
    out_of_blocks = needs_block && m.num_free() == 0;
  }

  // The rule that applies, in words (built only for a failure message).
  std::string why(const PoolModel& m, int seq) const {
    const int64_t bs = m.block_size;
    if (starts_block)
      return m.sequences[size_t(seq)].table.empty()
                 ? "the table is empty"
                 : "the last block " + std::to_string(last) + " is full (" + std::to_string(bs) +
                       " tokens), so the token starts a new block";
    if (shared_partial)
      return "the last block " + std::to_string(last) + " is shared (refcount " + std::to_string(last_refcount) + ", " +
             m.holders(last) + ") and partly filled (" + std::to_string(offset) + " of " + std::to_string(bs) +
             " tokens): copy-on-write";
    return "the last block " + std::to_string(last) + " has room (" + std::to_string(offset) + " of " +
           std::to_string(bs) + " tokens) and only this table holds it: write in place";
  }

  // The model after the append, @p fresh the block handed out (when one is needed and free).
  void apply(PoolModel& m, int seq, std::optional<int32_t> fresh) const {
    Sequence& s = m.sequences[size_t(seq)];
    ++m.stats.appends;
    if (out_of_blocks) {
      ++m.stats.out_of_blocks;
      return;
    }
    if (needs_block) {
      if (starts_block) {
        s.table.push_back(*fresh);
        m.stats.shared_full += last_refcount > 1;
      } else {
        s.table.back() = *fresh;
        --m.refcount[size_t(last)];  // the other holders keep it
        ++m.stats.copies;
      }
      m.refcount[size_t(*fresh)] = 1;
      ++m.stats.fresh_blocks;
    }
    ++s.tokens;
  }
};

// Builds a scenario: each operation is recorded and applied to the model, which predicts its
// outcome (so that a script can stop appending when the pool runs out). The model hands out the
// lowest free block; the allocator may hand out any — the operations do not depend on which.
class Planner {
 public:
  Planner(int64_t num_blocks, int64_t block_size) : model_(num_blocks, block_size) {
    scenario_.num_blocks = num_blocks;
    scenario_.block_size = block_size;
  }

  PoolModel& model() { return model_; }
  const Sequence& sequence(int id) const { return model_.sequences[size_t(id)]; }
  std::vector<int> live() const {
    std::vector<int> ids;
    for (size_t id = 0; id < model_.sequences.size(); ++id)
      if (model_.sequences[id].live) ids.push_back(int(id));
    return ids;
  }

  // A new sequence with no token (an empty table).
  int add_sequence() {
    model_.sequences.push_back(Sequence{});
    return int(model_.sequences.size()) - 1;
  }
  // allocate(), its block (if any) joining sequence @p seq's table; false when out of blocks.
  bool allocate(int seq = -1) {
    push(Op{OpKind::allocate, seq});
    const bool any = model_.num_free() > 0;
    model_.allocate(seq, any ? std::optional<int32_t>(model_.lowest_free()) : std::nullopt);
    return any;
  }
  // One more token of sequence @p seq; false when out of blocks.
  bool append(int seq) {
    push(Op{OpKind::append, seq});
    const AppendPlan plan(model_, seq);
    plan.apply(model_, seq,
               plan.needs_block && !plan.out_of_blocks ? std::optional(model_.lowest_free()) : std::nullopt);
    return !plan.out_of_blocks;
  }
  // Up to @p count tokens; stops at the first out_of_blocks.
  void append_tokens(int seq, int64_t count) {
    for (int64_t i = 0; i < count; ++i)
      if (!append(seq)) break;
  }
  // fork() of @p parent: the new sequence's id.
  int fork(int parent) {
    const int child = add_sequence();
    push(Op{OpKind::fork, parent, child});
    model_.fork(parent, child);
    return child;
  }
  void free(int seq) {
    push(Op{OpKind::free, seq});
    model_.free(seq);
  }
  // Frees every live sequence, then checks that every block came back exactly once: allocate()
  // hands out each id once, then std::nullopt.
  void free_all_and_drain() {
    for (const int id : live()) free(id);
    for (int64_t i = 0; i <= model_.num_blocks(); ++i) {
      allocate();
      scenario_.ops.back().why = "draining the pool after every table was freed: each block must come back once";
    }
  }
  // An error case (a correct allocator throws and changes nothing).
  void error(Op op) { push(std::move(op)); }

  Scenario scenario(std::string name) {
    scenario_.name = std::move(name);
    scenario_.num_sequences = int(model_.sequences.size());
    return scenario_;
  }

 private:
  void push(Op op) { scenario_.ops.push_back(std::move(op)); }

  PoolModel model_;
  Scenario scenario_;
};

// This process's replay of a scenario: the model, fed the operations, against the child's trace.
class Replay {
 public:
  Replay(const Scenario& s, const std::vector<int64_t>& trace) : s_(s), model_(s.num_blocks, s.block_size), in_(trace) {
    model_.sequences.assign(size_t(s.num_sequences), Sequence{});
  }

  // Checks operations [0, count) against the trace; fails at the first divergence.
  ::testing::AssertionResult run(size_t count) {
    try {
      for (size_t i = 0; i < count; ++i) {
        if (in_.next() != int64_t(i)) throw MalformedTrace();
        const std::string op = describe(s_.ops[i]);
        const bool error_case = s_.ops[i].kind >= OpKind::free_table;
        ::testing::AssertionResult result = check(s_.ops[i], op);
        if (result)
          result = same_state(error_case ? op + " (a call that throws must change nothing: it checks every block with "
                                                "require_held() before changing any)"
                                         : op);
        if (!result) return failure(i, result.message());
        history_.push_back(op);
        if (history_.size() > 4) history_.erase(history_.begin());
      }
      if (count == s_.ops.size() && !in_.done()) throw MalformedTrace();
    } catch (const MalformedTrace& error) {
      return ::testing::AssertionFailure() << s_.name << ": " << error.what();
    }
    return ::testing::AssertionSuccess();
  }

  // The operation as the caller makes it, from the model's state.
  std::string describe(const Op& op) const {
    const auto of = [&](int seq) {
      return "table " + str(model_.sequences[size_t(seq)].table) + " of sequence " + std::to_string(seq);
    };
    switch (op.kind) {
      case OpKind::allocate:
        return "allocate() with " + std::to_string(model_.num_free()) + " free blocks" +
               (op.why.empty() ? "" : " (" + op.why + ")");
      case OpKind::append:
        return "append_token(" + of(op.seq) + ", num_tokens " +
               std::to_string(model_.sequences[size_t(op.seq)].tokens) + ") with block_size " +
               std::to_string(model_.block_size);
      case OpKind::fork:
        return "fork(" + of(op.seq) + ")";
      case OpKind::free:
        return "free(" + of(op.seq) + ")";
      case OpKind::free_table:
        return "free(" + str(resolve(op.table, model_.sequences)) + ") " + op.why;
      case OpKind::fork_table:
        return "fork(" + str(resolve(op.table, model_.sequences)) + ") " + op.why;
      case OpKind::append_table:
        return "append_token(" + str(resolve(op.table, model_.sequences)) + ", num_tokens " +
               std::to_string(op.num_tokens) + ") " + op.why;
      case OpKind::refcount:
        return "refcount(" + std::to_string(op.block) + ") " + op.why;
    }
    return "?";
  }

  // The failure of operation @p i, with the last few operations before it.
  ::testing::AssertionResult failure(size_t i, const std::string& message) const {
    std::string recent;
    for (const std::string& op : history_) recent += "\n    " + op;
    return ::testing::AssertionFailure() << "operation " << i << " of " << s_.ops.size() << ": " << message << "\n  ("
                                         << s_.name
                                         << (recent.empty() ? std::string(")")
                                                            : "; the operations before:" + recent + ")");
  }

 private:
  static std::string threw(const std::string& op, const Caught& caught) {
    return op + " threw " + str(caught.kind) + ": " + caught.message;
  }

  ::testing::AssertionResult check(const Op& op, const std::string& desc) {
    switch (op.kind) {
      case OpKind::allocate:
        return check_allocate(op, desc);
      case OpKind::append:
        return check_append(op, desc);
      case OpKind::fork:
        return check_fork(op, desc);
      case OpKind::free:
        return check_free(op, desc);
      default:
        return check_error(op, desc);
    }
  }

  ::testing::AssertionResult check_allocate(const Op& op, const std::string& desc) {
    const Caught caught = in_.caught();
    if (caught) return ::testing::AssertionFailure() << threw(desc, caught);
    const bool has = in_.next() != 0;
    const int64_t value = in_.next();
    if (model_.num_free() == 0) {
      if (has)
        return ::testing::AssertionFailure() << desc << ": every block is held, expected std::nullopt (out of "
                                             << "blocks), got block " << value;
      model_.allocate(op.seq, std::nullopt);
      return ::testing::AssertionSuccess();
    }
    if (!has)
      return ::testing::AssertionFailure() << desc << ": expected a block, got std::nullopt"
                                           << (op.why.empty() ? "" : " — a block never came back (a leak)");
    const int32_t block = int32_t(value);
    if (const auto bad = model_.not_fresh(block); bad || value != block)
      return ::testing::AssertionFailure() << desc << ": " << (bad ? *bad : "block " + std::to_string(value));
    model_.allocate(op.seq, block);
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult check_append(const Op& op, const std::string& desc) {
    const Caught caught = in_.caught();
    const BlockTable table = in_.table();
    if (caught) return ::testing::AssertionFailure() << threw(desc, caught);
    SlotResult r;
    r.status = BlockStatus(in_.next());
    r.slot = in_.next();
    const bool has_copy = in_.next() != 0;
    const int32_t from = int32_t(in_.next()), to = int32_t(in_.next());
    if (has_copy) r.copy = BlockCopy{from, to};
    const bool has_new = in_.next() != 0;
    const int32_t fresh_value = int32_t(in_.next());
    if (has_new) r.new_block = fresh_value;

    const Sequence& s = model_.sequences[size_t(op.seq)];
    const AppendPlan plan(model_, op.seq);
    const int64_t bs = model_.block_size;
    const std::string got = " — got " + str(r) + ", table " + str(table);
    const auto fail = [&](const std::string& what) { return ::testing::AssertionFailure() << desc << what << got; };

    if (plan.out_of_blocks) {  // out of blocks: nothing may change
      if (r.status != BlockStatus::out_of_blocks)
        return fail(": " + plan.why(model_, op.seq) +
                    ", so it needs a fresh block, and none is free: expected status out_of_blocks");
      if (r.slot != -1 || r.copy || r.new_block)
        return fail(": out_of_blocks must come with slot −1, no copy and no new block");
      if (table != s.table) return fail(": out_of_blocks must leave the table as it was, " + str(s.table));
      plan.apply(model_, op.seq, std::nullopt);
      return ::testing::AssertionSuccess();
    }
    if (r.status != BlockStatus::ok)
      return fail(": " + plan.why(model_, op.seq) +
                  (plan.needs_block ? "; " + std::to_string(model_.num_free()) + " blocks are free" : "") +
                  ", so the append must succeed");

    BlockTable expected_table = s.table;
    int64_t expected_slot = 0;
    if (!plan.needs_block) {
      if (r.copy)
        return fail(": " + plan.why(model_, op.seq) + " — no copy-on-write for a block only this table holds");
      if (r.new_block) return fail(": " + plan.why(model_, op.seq) + " — no fresh block needed");
      expected_slot = int64_t(plan.last) * bs + plan.offset;
    } else {
      if (!r.new_block)
        return fail(": " + plan.why(model_, op.seq) +
                    (plan.shared_partial
                         ? " — expected copy {from " + std::to_string(plan.last) +
                               ", to a fresh block} and new_block naming that block: written in place, the token "
                               "would appear in the other holders' sequences too"
                         : " — expected new_block to name the fresh block"));
      const int32_t fresh = *r.new_block;
      if (const auto bad = model_.not_fresh(fresh)) return fail(": " + *bad);
      if (plan.starts_block) {
        if (r.copy)
          return fail(": " + plan.why(model_, op.seq) +
                      (plan.last_refcount > 1 ? " — a full block is never written again, so even shared (refcount " +
                                                    std::to_string(plan.last_refcount) + ") it is never copied"
                                              : " — nothing to copy"));
        expected_table.push_back(fresh);
      } else {
        const BlockCopy expected{plan.last, fresh};
        if (r.copy != std::optional<BlockCopy>(expected))
          return fail(": " + plan.why(model_, op.seq) + " — expected " + str(std::optional<BlockCopy>(expected)) +
                      " (the shared block's rows into the fresh one, before the write)");
        expected_table.back() = fresh;
      }
      expected_slot = int64_t(fresh) * bs + plan.offset;
    }
    if (table != expected_table)
      return fail(": " + plan.why(model_, op.seq) + " — expected the table to become " + str(expected_table));
    if (r.slot != expected_slot)
      return fail(": " + plan.why(model_, op.seq) + " — expected slot " + std::to_string(expected_slot) + " = block " +
                  std::to_string(expected_table.back()) + " · block_size " + std::to_string(bs) + " + offset " +
                  std::to_string(plan.offset));
    plan.apply(model_, op.seq, r.new_block);
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult check_fork(const Op& op, const std::string& desc) {
    const Caught caught = in_.caught();
    if (caught) return ::testing::AssertionFailure() << threw(desc, caught);
    const BlockTable table = in_.table();
    const BlockTable& before = model_.sequences[size_t(op.seq)].table;
    if (table != before)
      return ::testing::AssertionFailure() << desc << ": the child must map its logical blocks to the very same "
                                           << "physical blocks, " << str(before) << " — got " << str(table);
    model_.fork(op.seq, op.child);
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult check_free(const Op& op, const std::string& desc) {
    const Caught caught = in_.caught();
    const BlockTable table = in_.table();
    if (caught) return ::testing::AssertionFailure() << threw(desc, caught);
    if (!table.empty())
      return ::testing::AssertionFailure() << desc << ": the table must be left empty — got " << str(table);
    model_.free(op.seq);
    return ::testing::AssertionSuccess();
  }

  // An error case: the right exception, naming what it must, and (same_state) nothing changed.
  ::testing::AssertionResult check_error(const Op& op, const std::string& desc) {
    const Caught caught = in_.caught();
    const BlockTable passed = resolve(op.table, model_.sequences);
    BlockTable after;
    if (op.kind == OpKind::free_table || op.kind == OpKind::append_table) after = in_.table();
    if (!caught) {
      // Consume the results of a call that returned.
      if (op.kind == OpKind::fork_table) in_.table();
      if (op.kind == OpKind::refcount) in_.next();
      if (op.kind == OpKind::append_table)
        for (int k = 0; k < 7; ++k) in_.next();
      return ::testing::AssertionFailure() << desc << ": did not throw";
    }
    const bool type_ok = op.expect == Expect::invalid_argument
                             ? caught.kind == Thrown::invalid_argument
                             : caught.kind == Thrown::logic_error || caught.kind == Thrown::invalid_argument;
    if (!type_ok)
      return ::testing::AssertionFailure()
             << desc << ": threw the wrong exception type (expected "
             << (op.expect == Expect::invalid_argument ? "std::invalid_argument" : "std::logic_error") << ", got "
             << str(caught.kind) << "): " << caught.message;
    std::vector<std::string> words = op.words;
    if (op.named_ref >= 0) words.push_back("block " + std::to_string(passed[size_t(op.named_ref)]));
    for (const std::string& word : words)
      if (caught.message.find(word) == std::string::npos)
        return ::testing::AssertionFailure()
               << desc << ": the error must name \"" << word << "\", it says: " << caught.message;
    if ((op.kind == OpKind::free_table || op.kind == OpKind::append_table) && after != passed)
      return ::testing::AssertionFailure() << desc << ": a call that throws must leave the table as it was, "
                                           << str(passed) << " — got " << str(after);
    return ::testing::AssertionSuccess();
  }

  // Every refcount and num_free() the child saw after the operation equal the model's.
  ::testing::AssertionResult same_state(const std::string& op) {
    const int64_t free_blocks = in_.next();
    std::vector<int64_t> refcounts(size_t(model_.num_blocks()));
    for (int64_t& r : refcounts) r = in_.next();
    for (int32_t block = 0; block < int32_t(model_.num_blocks()); ++block) {
      const int64_t got = refcounts[size_t(block)];
      if (got == kRefcountThrew)
        return ::testing::AssertionFailure() << "after " << op << ": refcount(" << block << ") threw";
      const int32_t want = model_.refcount[size_t(block)];
      if (got != want)
        return ::testing::AssertionFailure()
               << "after " << op << ": refcount(block " << block << ") = " << got << ", expected " << want << " ("
               << model_.holders(block) << ")"
               << (got > want ? " — a reference was not released (a leak)" : " — a reference was lost");
    }
    if (free_blocks != model_.num_free())
      return ::testing::AssertionFailure()
             << "after " << op << ": num_free() = " << free_blocks << ", expected " << model_.num_free()
             << " (the blocks with refcount 0: each on the free stack exactly once)";
    return ::testing::AssertionSuccess();
  }

  const Scenario& s_;
  PoolModel model_;
  TraceReader in_;
  std::vector<std::string> history_;
};

// The student code crashed (or exited) while running @p s: reruns shorter prefixes of the scenario
// in fresh children to find the operation it happened in, and reports the first divergence from
// the model before it, if any, else that operation.
::testing::AssertionResult crashed(const Scenario& s, const std::string& what) {
  const auto header = [&] { return s.name + ": " + what; };
  if (what.find("CPU time") != std::string::npos) return ::testing::AssertionFailure() << header();
  // ok(n): the first n operations (and the destructor) run to the end. ok(ops.size()) is false.
  int64_t lo = -1, hi = int64_t(s.ops.size());
  std::vector<int64_t> lo_trace;
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    try {
      std::vector<int64_t> trace = run_scenario_in_sandbox(s, size_t(mid));
      lo = mid;
      lo_trace = std::move(trace);
    } catch (const std::exception&) {
      hi = mid;
    }
  }
  if (hi == 0)
    return ::testing::AssertionFailure() << header() << "\n  (constructing or destroying the allocator, before or "
                                         << "after any operation)";
  Replay replay(s, lo_trace);
  const ::testing::AssertionResult before = replay.run(size_t(hi - 1));
  if (!before) return before;
  return replay.failure(size_t(hi - 1), replay.describe(s.ops[size_t(hi - 1)]) + ": " + what);
}

// Runs @p s — construction, every operation, destruction — in one sandboxed child and replays
// its trace on the model here.
::testing::AssertionResult scenario_matches_model(const Scenario& s) {
  std::vector<int64_t> trace;
  try {
    trace = run_scenario_in_sandbox(s, s.ops.size());
  } catch (const NotImplemented& error) {
    return ::testing::AssertionFailure() << error.what();
  } catch (const testing::StudentCodeFailed& error) {
    return crashed(s, error.what());
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << s.name << ": StudentBlockAllocator(" << s.num_blocks << ", " << s.block_size
                                         << "), its destructor or an operation threw: " << error.what();
  }
  return Replay(s, trace).run(s.ops.size());
}

std::string pool_name(int64_t num_blocks, int64_t block_size) {
  return "pool of " + std::to_string(num_blocks) + " blocks of " + std::to_string(block_size) + " tokens";
}

TEST(Ch06Allocator, AllocateHandsOutEachBlockOnce) {
  // Every block once, each with refcount 1; then std::nullopt with nothing changed; after
  // freeing them (as one table), every block again. Pools of 1, 5 and 17 blocks, and two of
  // fresh random sizes.
  testing::SeededRng rng;
  const std::vector<std::pair<int64_t, int64_t>> pools{
      {1, 4}, {5, 4}, {17, 4}, {rng.integer(2, 40), rng.integer(1, 16)}, {rng.integer(2, 40), rng.integer(1, 16)}};
  std::vector<Scenario> scenarios;
  for (const auto& [num_blocks, block_size] : pools) {
    Planner plan(num_blocks, block_size);
    for (int pass = 0; pass < 2; ++pass) {
      const int id = plan.add_sequence();
      for (int64_t i = 0; i < num_blocks; ++i) plan.allocate(id);
      plan.allocate(id);  // out of blocks: std::nullopt, nothing changed
      plan.allocate(id);
      plan.free(id);
    }
    scenarios.push_back(plan.scenario(pool_name(num_blocks, block_size)));
  }
  expect_all(scenarios, [](const Scenario& s) { return scenario_matches_model(s); });
}

TEST(Ch06Allocator, AppendFillsBlocksInOrder) {
  // One sequence grows until the pool is exhausted: slot t is in table[t / block_size] at offset
  // t % block_size; a fresh block exactly at each block boundary; then out_of_blocks. Block
  // sizes 1, 3 and 16, and a fresh random pool.
  testing::SeededRng rng;
  const std::vector<std::pair<int64_t, int64_t>> pools{
      {5, 1}, {5, 3}, {5, 16}, {rng.integer(2, 9), rng.integer(2, 12)}};
  std::vector<Scenario> scenarios;
  for (const auto& [num_blocks, block_size] : pools) {
    Planner plan(num_blocks, block_size);
    const int id = plan.add_sequence();
    plan.append_tokens(id, num_blocks * block_size + 1);  // the last one runs out
    plan.append(id);                                      // and still out
    plan.free(id);
    plan.free_all_and_drain();
    scenarios.push_back(plan.scenario(pool_name(num_blocks, block_size) + ", one sequence filling it"));
  }
  expect_all(scenarios, [](const Scenario& s) { return scenario_matches_model(s); });
}

TEST(Ch06Allocator, ForkSharesEveryBlock) {
  // Forks share every block (one reference per table), take none; frees give them back one
  // reference at a time; the last holder writes in place (no copy); a fork of an empty table is
  // empty. A scripted family, then a fresh random one.
  std::vector<Scenario> scenarios;
  {
    Planner plan(8, 4);
    const int a = plan.add_sequence();
    plan.append_tokens(a, 10);  // 3 blocks, the last one partly filled
    const int b = plan.fork(a), c = plan.fork(a);
    const int d = plan.fork(b);  // a fork of a fork: refcount 4
    plan.free(a);
    plan.free(c);
    plan.free(b);              // d alone holds them now
    plan.append_tokens(d, 3);  // … so it writes in place: no copy
    plan.fork(plan.add_sequence());
    plan.free_all_and_drain();
    scenarios.push_back(plan.scenario("pool of 8 blocks of 4 tokens, a family of forks"));
  }
  testing::SeededRng rng;
  const int64_t block_size = rng.integer(2, 8), num_blocks = rng.integer(8, 16);
  Planner plan(num_blocks, block_size);
  const int root = plan.add_sequence();
  plan.append_tokens(root, rng.integer(1, 3 * block_size));
  std::vector<int> family{root};
  for (int64_t i = 0, forks = rng.integer(3, 5); i < forks; ++i)
    family.push_back(plan.fork(family[size_t(rng.integer(0, int64_t(family.size()) - 1))]));
  std::shuffle(family.begin(), family.end(), rng.engine());
  for (size_t i = 0; i + 1 < family.size(); ++i) plan.free(family[i]);
  plan.append_tokens(family.back(), rng.integer(1, block_size + 1));  // the last holder: in place
  plan.fork(plan.add_sequence());
  plan.free_all_and_drain();
  if (plan.model().stats.copies != 0) FAIL() << "test bug: the last holder of its blocks copied";
  scenarios.push_back(plan.scenario(pool_name(num_blocks, block_size) + ", a random family of forks"));
  expect_all(scenarios, [](const Scenario& s) { return scenario_matches_model(s); });
}

TEST(Ch06Allocator, CopyOnWriteExactlyWhenSharedAndPartial) {
  // Copy-on-write for a shared, partly filled last block — and only then: not for an unshared
  // partial block, not for a shared full block (the token starts a fresh block), not once the
  // other holders are gone. Block sizes 2, 4 and 7, and a fresh random size and fill.
  testing::SeededRng rng;
  const int64_t random_size = rng.integer(3, 16);
  const std::vector<std::pair<int64_t, int64_t>> cases{
      // block_size, tokens of the first sequence
      {2, 3},
      {4, 5},
      {7, 8},
      {random_size, rng.integer(0, 2) * random_size + rng.integer(1, random_size - 2)}};
  std::vector<Scenario> scenarios;
  for (const auto& [block_size, tokens] : cases) {
    Planner plan(24, block_size);
    // A shared partial block: the child copies; then the parent is its only holder again.
    const int a = plan.add_sequence();
    plan.append_tokens(a, tokens);
    const int b = plan.fork(a);
    plan.append(b);  // copy-on-write
    plan.append(a);  // refcount 1 again: in place
    // A shared full block: both sides start fresh blocks, nothing is copied.
    const int c = plan.add_sequence();
    plan.append_tokens(c, 2 * block_size);
    const int d = plan.fork(c);
    plan.append(d);
    plan.append(c);
    // Three holders of a partial block: two copies, the last holder writes in place.
    const int e = plan.fork(a);
    const int f = plan.fork(e);
    plan.append(f);
    plan.append(e);
    plan.append(a);
    plan.free_all_and_drain();
    if (plan.model().stats.copies == 0 || plan.model().stats.shared_full == 0)
      FAIL() << "test bug: the scenario made no copy-on-write or appended after no shared full block";
    scenarios.push_back(plan.scenario(pool_name(24, block_size) + ", a first sequence of " + std::to_string(tokens) +
                                      " tokens forked"));
  }
  expect_all(scenarios, [](const Scenario& s) { return scenario_matches_model(s); });
}

TEST(Ch06Allocator, OutOfBlocksChangesNothing) {
  // An exhausted pool: allocate() gives std::nullopt, an append that needs a fresh block — a
  // full last block, or copy-on-write of a shared partial one — is out_of_blocks and changes
  // nothing (the shared block keeps its refcount), while forks that need no block still
  // succeed; once a block is freed, the same append succeeds. A pool of 3 blocks of 4, and a
  // fresh random one.
  testing::SeededRng rng;
  const int64_t random_size = rng.integer(2, 8);
  const std::vector<std::array<int64_t, 3>> cases{
      // num_blocks, block_size, tokens of the first sequence
      {3, 4, 6},
      {rng.integer(3, 10), random_size, random_size + rng.integer(1, random_size - 1)}};
  std::vector<Scenario> scenarios;
  for (const auto& [num_blocks, block_size, tokens] : cases) {
    Planner plan(num_blocks, block_size);
    const int a = plan.add_sequence();
    plan.append_tokens(a, tokens);  // two blocks, the last one partly filled
    const int b = plan.fork(a);     // … and shared
    const int c = plan.add_sequence();
    plan.append_tokens(c, (num_blocks - 2) * block_size);  // every other block, the last one full
    plan.allocate();                                       // out of blocks: std::nullopt
    plan.append(b);                                        // copy-on-write needs a block: out_of_blocks
    plan.append(c);                                        // c's last block is full: out_of_blocks
    const int d = plan.fork(c);                            // a fork needs no block
    if (plan.model().stats.out_of_blocks != 3) FAIL() << "test bug: the pool did not run out where planned";
    plan.free(c);
    plan.free(d);    // c's blocks are free again
    plan.append(b);  // the copy-on-write now succeeds
    plan.append(a);  // a is its last block's only holder: in place
    plan.free_all_and_drain();
    scenarios.push_back(plan.scenario(pool_name(num_blocks, block_size) + ", exhausted"));
  }
  expect_all(scenarios, [](const Scenario& s) { return scenario_matches_model(s); });
}

// One random-operations configuration.
struct RandomConfig {
  int64_t num_blocks = 12;
  int64_t block_size = 4;
  int64_t operations = 3000;
  int64_t max_live = 6;
  int64_t max_tokens = 40;
};

// Random appends, new sequences, forks and frees, chosen from the model's state and @p rng.
// @p planned receives what the operations exercise (predicted by the model, which a passing
// allocator matches).
Scenario random_scenario(const RandomConfig& config, Rng& rng, AllocatorStats& planned) {
  Planner plan(config.num_blocks, config.block_size);
  for (int64_t op = 0; op < config.operations; ++op) {
    const std::vector<int> live = plan.live();
    const auto pick = [&] { return live[size_t(rng.integer(0, int64_t(live.size()) - 1))]; };
    const int64_t dice = rng.integer(0, 99);
    if (live.empty() || (dice < 15 && int64_t(live.size()) < config.max_live)) {
      plan.append_tokens(plan.add_sequence(), rng.integer(1, 2 * config.block_size + 1));
    } else if (dice < 65) {
      const int id = pick();
      if (plan.sequence(id).tokens >= config.max_tokens)
        plan.free(id);
      else
        plan.append_tokens(id, rng.integer(1, config.block_size + 1));
    } else if (dice < 82 && int64_t(live.size()) < config.max_live) {
      plan.fork(pick());
    } else {
      plan.free(pick());
    }
  }
  plan.free_all_and_drain();
  planned.add(plan.model().stats);
  return plan.scenario(pool_name(config.num_blocks, config.block_size) + ", random operations with seed " +
                       std::to_string(rng.seed()) + " (" + testing::replay_hint(rng.seed()) + ")");
}

TEST(Ch06Allocator, RandomOperationsMatchTheModel) {
  // Thousands of random operations on small pools (allocation fails often): every result and
  // every refcount equal the model's after each one; at the end every block comes back once.
  testing::SeededRng rng;
  AllocatorStats planned;
  std::vector<Scenario> scenarios;
  for (const RandomConfig& config : std::vector<RandomConfig>{{12, 4}, {6, 1}, {8, 3}, {24, 16, 2000, 8, 80}, {16, 2}})
    scenarios.push_back(random_scenario(config, rng, planned));
  expect_all(scenarios, [](const Scenario& s) { return scenario_matches_model(s); });
  EXPECT_GT(planned.copies, 0) << "the random operations made no copy-on-write (a test bug)";
  EXPECT_GT(planned.shared_full, 0) << "the random operations never appended after a shared full block (a test bug)";
  EXPECT_GT(planned.out_of_blocks, 0) << "the random operations never ran out of blocks (a test bug)";
}

TEST(Ch06Allocator, FreeReturnsEveryBlockExactlyOnce) {
  // Families of forks freed in random orders: each block goes back to the free stack when its
  // last holder lets go — not before (a table still reads it), not twice (two sequences would
  // get it) — and never leaks.
  testing::SeededRng rng;
  std::vector<Scenario> scenarios;
  for (int round = 0; round < 20; ++round) {
    Planner plan(16, 3);
    const int root = plan.add_sequence();
    plan.append_tokens(root, rng.integer(1, 10));
    std::vector<int> family{root};
    for (int i = 0; i < 5; ++i) {
      const int child = plan.fork(family[size_t(rng.integer(0, int64_t(family.size()) - 1))]);
      plan.append_tokens(child, rng.integer(0, 4));
      family.push_back(child);
    }
    std::shuffle(family.begin(), family.end(), rng.engine());
    for (const int id : family) plan.free(id);
    plan.free_all_and_drain();
    scenarios.push_back(plan.scenario(pool_name(16, 3) + ", family " + std::to_string(round) + " of 20"));
  }
  expect_all(scenarios, [](const Scenario& s) { return scenario_matches_model(s); });
}

TEST(Ch06Allocator, ErrorsNameTheBlockAndTheOperation) {
  // A double free, a fork or an append over a freed block, a block id outside the pool: each
  // throws (std::logic_error / std::invalid_argument) naming the operation and the block, and
  // changes nothing — checked before any refcount moves. A pool of 6 blocks of 4, and a fresh
  // random one.
  testing::SeededRng rng;
  const int64_t random_size = rng.integer(2, 8);
  const std::vector<std::array<int64_t, 4>> cases{
      // num_blocks, block_size, tokens of a, tokens of b
      {6, 4, 2, 2},
      {rng.integer(6, 16), random_size, rng.integer(1, random_size - 1), rng.integer(1, 2 * random_size)}};
  std::vector<Scenario> scenarios;
  for (const auto& [num_blocks, block_size, tokens_a, tokens_b] : cases) {
    Planner plan(num_blocks, block_size);
    const int a = plan.add_sequence(), b = plan.add_sequence();
    plan.append_tokens(a, tokens_a);  // one block, partly filled
    plan.append_tokens(b, tokens_b);
    plan.free(a);
    const BlockRef freed{a, 0}, held{b, 0};
    const std::string outside = std::to_string(num_blocks + 3);
    // free(): the freed block comes first, so a free that releases as it checks (last to first)
    // would already have released `held`.
    plan.error({.kind = OpKind::free_table,
                .table = {freed, held},
                .expect = Expect::logic_error,
                .words = {"free", "refcount 0"},
                .named_ref = 0,
                .why = "whose first block was freed already (a double free)"});
    plan.error({.kind = OpKind::fork_table,
                .table = {held, freed},
                .expect = Expect::logic_error,
                .words = {"fork", "refcount 0"},
                .named_ref = 1,
                .why = "over a freed block (the second)"});
    plan.error({.kind = OpKind::append_table,
                .table = {freed},
                .num_tokens = tokens_a,
                .expect = Expect::logic_error,
                .words = {"append_token", "refcount 0"},
                .named_ref = 0,
                .why = "on a table freed already (a use after free)"});
    plan.error({.kind = OpKind::free_table,
                .table = {BlockRef{.literal = int32_t(num_blocks + 3)}},
                .expect = Expect::invalid_argument,
                .words = {"free", outside},
                .why = "in a pool of " + std::to_string(num_blocks) + " blocks"});
    plan.error({.kind = OpKind::fork_table,
                .table = {BlockRef{.literal = -1}},
                .expect = Expect::invalid_argument,
                .words = {"fork", "-1"},
                .why = "(no such block)"});
    plan.error({.kind = OpKind::refcount,
                .block = int32_t(num_blocks + 3),
                .expect = Expect::invalid_argument,
                .words = {outside},
                .why = "in a pool of " + std::to_string(num_blocks) + " blocks"});
    plan.error({.kind = OpKind::append_table,
                .table = {held},
                .num_tokens = 2 * block_size + 1,
                .expect = Expect::invalid_argument,
                .words = {"table.size()", "num_tokens"},
                .why = "— " + std::to_string(2 * block_size + 1) + " tokens need 3 blocks of " +
                       std::to_string(block_size) + ", the table holds 1"});
    plan.free_all_and_drain();
    scenarios.push_back(plan.scenario(pool_name(num_blocks, block_size) + ", error cases"));
  }
  expect_all(scenarios, [](const Scenario& s) { return scenario_matches_model(s); });
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

// One call of exercise 6.2: student_prefix_hashes(tokens, block_size), or
// student_block_hash(parent, tokens, count).
struct HashCall {
  bool prefix = false;
  uint64_t parent = 0;
  std::vector<int32_t> tokens;
  int64_t block_size = 1;

  std::string str() const {
    if (prefix)
      return "student_prefix_hashes(" + str_tokens(tokens) + ", block_size " + std::to_string(block_size) + ")";
    return "student_block_hash(parent " + hex(parent) + ", tokens " + str_tokens(tokens) + ", count " +
           std::to_string(tokens.size()) + ")";
  }
};

HashCall block_hash_call(uint64_t parent, std::vector<int32_t> tokens) {
  return {false, parent, std::move(tokens), 1};
}
HashCall prefix_hashes_call(std::vector<int32_t> tokens, int64_t block_size) {
  return {true, 0, std::move(tokens), block_size};
}

// What a call returned (its hashes: one for student_block_hash) or what it threw.
struct HashResult {
  Caught caught;
  std::vector<uint64_t> hashes;
};

// Runs @p calls in one sandboxed child; each call's result or exception comes back.
std::vector<HashResult> run_hash_calls_once(const std::vector<HashCall>& calls) {
  const std::vector<int64_t> trace = testing::isolated_result([&calls] {
    TraceWriter out;
    for (const HashCall& c : calls) {
      std::vector<uint64_t> hashes;
      const Caught caught = catching([&] {
        if (c.prefix)
          hashes = student::student_prefix_hashes(c.tokens, c.block_size);
        else
          hashes = {student::student_block_hash(c.parent, c.tokens.data(), int64_t(c.tokens.size()))};
      });
      out.push(caught);
      if (caught) continue;
      out.push(int64_t(hashes.size()));
      for (size_t i = 0; i < hashes.size() && i < kMaxTracedEntries; ++i) out.push(int64_t(hashes[i]));
    }
    return std::move(out.values());
  });
  TraceReader in(trace);
  std::vector<HashResult> results(calls.size());
  for (HashResult& r : results) {
    r.caught = in.caught();
    if (r.caught) continue;
    const int64_t n = in.next();
    if (n < 0) throw MalformedTrace();
    for (int64_t k = 0; k < n; ++k) r.hashes.push_back(size_t(k) < kMaxTracedEntries ? uint64_t(in.next()) : 0);
  }
  if (!in.done()) throw MalformedTrace();
  return results;
}

// run_hash_calls_once(); when the student code crashes, reruns the calls one child each to name
// the call that crashed.
std::vector<HashResult> run_hash_calls(const std::vector<HashCall>& calls) {
  try {
    return run_hash_calls_once(calls);
  } catch (const testing::StudentCodeFailed& error) {
    if (std::string(error.what()).find("CPU time") != std::string::npos) throw;
    for (const HashCall& c : calls) {
      try {
        run_hash_calls_once({c});
      } catch (const testing::StudentCodeFailed& crash) {
        throw testing::StudentCodeFailed(c.str() + ": " + crash.what());
      }
    }
    throw;
  }
}

// The results of @p calls, or a failure saying why there are none (a stub, a crash).
::testing::AssertionResult hash_results(const std::vector<HashCall>& calls, std::vector<HashResult>& results) {
  try {
    results = run_hash_calls(calls);
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << error.what();
  }
  return ::testing::AssertionSuccess();
}

// The student's student_block_hash for @p c (its result @p r) equals the contract's value.
::testing::AssertionResult block_hash_matches(const HashCall& c, const HashResult& r) {
  const uint64_t want = expected_block_hash(c.parent, c.tokens);
  if (r.caught)
    return ::testing::AssertionFailure() << c.str() << " threw " << str(r.caught.kind) << ": " << r.caught.message;
  if (r.hashes.size() != 1) return ::testing::AssertionFailure() << c.str() << ": the sandbox sent back no value";
  const uint64_t got = r.hashes[0];
  if (got == want) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << c.str() << " = " << hex(got) << ", expected " << hex(want)
                                       << diagnose_block_hash(got, c.parent, c.tokens);
}

// The student's student_prefix_hashes for @p c (its result @p r) equals the contract's chain,
// hash by hash.
::testing::AssertionResult prefix_hashes_match(const HashCall& c, const HashResult& r) {
  const std::span<const int32_t> tokens = c.tokens;
  const int64_t block_size = c.block_size;
  const std::vector<uint64_t> want = expected_prefix_hashes(tokens, block_size);
  const std::string call = c.str();
  if (r.caught)
    return ::testing::AssertionFailure() << call << " threw " << str(r.caught.kind) << ": " << r.caught.message;
  const std::vector<uint64_t>& got = r.hashes;
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
  // The contract's worked values, then fresh random tokens (negative and large ids too) after
  // random parents, counts 0 to 40, against the FNV-1a computed here.
  ASSERT_EQ(fnv1a({'a'}), 0xaf63dc4c8601ec8cULL) << "the test's own FNV-1a is wrong (a test bug)";
  ASSERT_EQ(fnv1a({'f', 'o', 'o', 'b', 'a', 'r'}), 0x85944171f73967e8ULL) << "the test's own FNV-1a is wrong";
  ASSERT_EQ(expected_block_hash(student::kFirstBlockParentHash, std::vector<int32_t>{1, 2, 3}), 0x731475a701ee4960ULL)
      << "test bug";
  ASSERT_EQ(expected_block_hash(student::kFirstBlockParentHash, {}), 0x0859c0f1287c5c20ULL) << "test bug";
  testing::SeededRng rng;
  std::vector<HashCall> calls{block_hash_call(student::kFirstBlockParentHash, {1, 2, 3}),
                              block_hash_call(student::kFirstBlockParentHash, {})};
  for (int i = 0; i < 200; ++i) {
    const uint64_t parent = i % 5 == 0 ? student::kFirstBlockParentHash : uint64_t(rng.engine()());
    calls.push_back(block_hash_call(parent, random_tokens(rng, rng.integer(0, 40))));
  }
  std::vector<HashResult> results;
  if (const ::testing::AssertionResult ran = hash_results(calls, results); !ran) FAIL() << ran.message();
  EXPECT_TRUE(block_hash_matches(calls[0], results[0])) << "(the worked value of ch06.h)";
  if (::testing::Test::HasFailure()) return;
  EXPECT_TRUE(block_hash_matches(calls[1], results[1])) << "(count 0: the parent's bytes only)";
  std::vector<size_t> random(calls.size() - 2);
  std::iota(random.begin(), random.end(), size_t(2));
  expect_all(random, [&](size_t i) { return block_hash_matches(calls[i], results[i]); });
}

TEST(Ch06PrefixHash, ChainsThroughThePrefix) {
  // Hash i names tokens [0, (i + 1)·block_size): two prompts that differ only in block k get the
  // same hashes before k and different ones from k on — even for later blocks whose own tokens
  // are equal; the same block after different parents gets different hashes.
  testing::SeededRng rng;
  constexpr int64_t kBlocks = 5;
  const std::vector<int64_t> block_sizes{1, 3, 16, rng.integer(2, 24)};
  std::vector<HashCall> calls;  // per block size: the first prompt, then kBlocks variants
  for (const int64_t block_size : block_sizes) {
    const std::vector<int32_t> first = random_tokens(rng, kBlocks * block_size + block_size / 2);
    calls.push_back(prefix_hashes_call(first, block_size));
    for (int64_t k = 0; k < kBlocks; ++k) {
      std::vector<int32_t> second = first;
      second[size_t(k * block_size + rng.integer(0, block_size - 1))] ^= 0x5a5a;  // block k differs, the rest is equal
      calls.push_back(prefix_hashes_call(second, block_size));
    }
  }
  const uint64_t parent = rng.engine()();
  calls.push_back(block_hash_call(parent, random_tokens(rng, 4)));
  calls.push_back(block_hash_call(parent ^ 1, calls.back().tokens));
  std::vector<HashResult> results;
  if (const ::testing::AssertionResult ran = hash_results(calls, results); !ran) FAIL() << ran.message();

  for (size_t s = 0; s < block_sizes.size(); ++s) {
    const int64_t block_size = block_sizes[s];
    const size_t base = s * (kBlocks + 1);
    EXPECT_TRUE(prefix_hashes_match(calls[base], results[base]));
    if (::testing::Test::HasFailure()) return;
    const std::vector<uint64_t>& h1 = results[base].hashes;
    for (int64_t k = 0; k < kBlocks; ++k) {
      const HashResult& second = results[base + 1 + size_t(k)];
      EXPECT_TRUE(prefix_hashes_match(calls[base + 1 + size_t(k)], second));
      if (second.caught) return;
      const std::vector<uint64_t>& h2 = second.hashes;
      for (int64_t i = 0; i < kBlocks && i < int64_t(std::min(h1.size(), h2.size())); ++i) {
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
  const HashResult& after_a = results[results.size() - 2];
  const HashResult& after_b = results.back();
  EXPECT_TRUE(block_hash_matches(calls[calls.size() - 2], after_a));
  EXPECT_TRUE(block_hash_matches(calls.back(), after_b));
  if (!after_a.caught && !after_b.caught && after_a.hashes.size() == 1 && after_b.hashes.size() == 1) {
    EXPECT_NE(after_a.hashes[0], after_b.hashes[0])
        << "the same block after parents " << hex(parent) << " and " << hex(parent ^ 1) << " got the same hash "
        << hex(after_a.hashes[0]) << ": the parent must be hashed";
  }
}

TEST(Ch06PrefixHash, HashesOnlyFullBlocks) {
  // tokens.size() / block_size hashes; a partial tail is ignored: adding tokens to it changes no
  // hash, and completing it adds exactly one.
  testing::SeededRng rng;
  std::vector<HashCall> calls;
  for (const int64_t block_size : {int64_t(2), int64_t(5), int64_t(16), rng.integer(3, 24)}) {
    const std::vector<int32_t> full = random_tokens(rng, 3 * block_size);
    calls.push_back(prefix_hashes_call(full, block_size));
    for (int64_t tail = 1; tail <= block_size; ++tail) {
      std::vector<int32_t> longer = full;
      const std::vector<int32_t> extra = random_tokens(rng, tail);
      longer.insert(longer.end(), extra.begin(), extra.end());
      calls.push_back(prefix_hashes_call(longer, block_size));
    }
  }
  std::vector<HashResult> results;
  if (const ::testing::AssertionResult ran = hash_results(calls, results); !ran) FAIL() << ran.message();
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_TRUE(prefix_hashes_match(calls[i], results[i]));
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(Ch06PrefixHash, BlockSizeOneAndLargerThanThePrompt) {
  // block_size 1: one hash per token, chained; block_size equal to the prompt: one hash; larger:
  // none; no tokens: none. A block_size ≤ 0 is refused (std::invalid_argument).
  testing::SeededRng rng;
  std::vector<HashCall> calls{prefix_hashes_call({1, 2, 3, 4, 5}, 2)};  // the worked value of ch06.h
  for (const int64_t n : {int64_t(1), int64_t(2), int64_t(7), int64_t(33), rng.integer(3, 64)}) {
    const std::vector<int32_t> tokens = random_tokens(rng, n);
    for (const int64_t block_size : {int64_t(1), n, n + 1, 4 * n + 3})
      calls.push_back(prefix_hashes_call(tokens, block_size));
  }
  calls.push_back(prefix_hashes_call({}, 4));
  const size_t valid = calls.size();
  const std::vector<int64_t> bad{0, -2, -rng.integer(3, 1000)};
  for (const int64_t block_size : bad) calls.push_back(prefix_hashes_call(random_tokens(rng, 5), block_size));
  std::vector<HashResult> results;
  if (const ::testing::AssertionResult ran = hash_results(calls, results); !ran) FAIL() << ran.message();
  ASSERT_EQ(expected_prefix_hashes(calls[0].tokens, 2),
            (std::vector<uint64_t>{0xc03d78b723e3e363ULL, 0x1c7b49e274fceec4ULL}))
      << "test bug";
  EXPECT_TRUE(prefix_hashes_match(calls[0], results[0])) << "(the worked value of ch06.h)";
  if (::testing::Test::HasFailure()) return;
  for (size_t i = 1; i < valid; ++i) {
    EXPECT_TRUE(prefix_hashes_match(calls[i], results[i]));
    if (::testing::Test::HasFailure()) return;
  }
  for (size_t i = valid; i < calls.size(); ++i) {
    const Caught& caught = results[i].caught;
    if (!caught)
      ADD_FAILURE() << calls[i].str() << " did not throw std::invalid_argument";
    else if (caught.kind != Thrown::invalid_argument)
      ADD_FAILURE() << calls[i].str() << " threw " << str(caught.kind)
                    << " instead of std::invalid_argument: " << caught.message;
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

// The grader's checks of how the call ran (not an exception of the student's code): it launched
// no kernel, or broke the device-memory budget of ch06.h.
class KernelCheckFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The device memory exercise 6.3 allows a call on @p pool (ch06.h, its budget): the device copies
// of q, k_pool, v_pool, the block table and the lengths, and out — exactly what the given launcher
// allocates.
uint64_t device_budget(const Tensor<float>& q, const Pool& pool) {
  return sizeof(float) * uint64_t(2 * q.size() + pool.k.size() + pool.v.size()) +
         sizeof(int32_t) * uint64_t(pool.block_table.size() + pool.lengths.size());
}

// sim::student::paged_decode_attention on @p pool, into @p out (poisoned first), in the sandbox.
// Throws KernelCheckFailed when the call launched no kernel, or held more device memory than the
// budget (a gathered copy of the cache) or less than the two pools (the cache gathered on the host).
void run_student(const Tensor<float>& q, const Pool& pool, Tensor<float>& out, int threads_per_block = 128) {
  out.poison();
  const testing::IsolatedRun run = testing::run_isolated(
      [&] {
        sim::student::paged_decode_attention(q, pool.k, pool.v, pool.block_table, pool.max_blocks_per_seq, pool.lengths,
                                             out, threads_per_block);
      },
      {testing::output_bytes(out.span())});
  if (run.launches == 0)
    throw KernelCheckFailed(
        "your function returned without launching a kernel — exercise 6.3 asks for a kernel: paged_decode_kernel, "
        "launched with simt::launch (the given launcher does it), computes out on the device");
  const uint64_t budget = device_budget(q, pool);
  const uint64_t pools = sizeof(float) * uint64_t(pool.k.size() + pool.v.size());
  const auto sizes = [&] {
    return "q " + std::to_string(4 * q.size()) + " + k_pool " + std::to_string(4 * pool.k.size()) + " + v_pool " +
           std::to_string(4 * pool.v.size()) + " + block table " + std::to_string(4 * pool.block_table.size()) +
           " + lengths " + std::to_string(4 * pool.lengths.size()) + " + out " + std::to_string(4 * q.size()) + " = " +
           std::to_string(budget) + " bytes";
  };
  if (run.device_bytes_peak > budget)
    throw KernelCheckFailed(
        "your call held " + std::to_string(run.device_bytes_peak) +
        " bytes of device memory at its peak, over the budget of exercise 6.3 (ch06.h): the device copies of q, the "
        "two pools, the block table and the lengths, and out — " +
        sizes() +
        ". The kernel reads each K and V row where the block table puts it in the pools: no gathered contiguous "
        "copy of the cache, no scratch buffer");
  if (run.device_bytes_peak < pools)
    throw KernelCheckFailed(
        "your call held only " + std::to_string(run.device_bytes_peak) +
        " bytes of device memory at its peak, less than the two pools alone (" + std::to_string(pools) +
        " bytes): exercise 6.3's kernel reads K and V from the pools on the device, through the block table (the "
        "budget of ch06.h: " +
        sizes() + ") — not from rows gathered on the host");
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
  } catch (const KernelCheckFailed& error) {
    return ::testing::AssertionFailure() << name << ": " << error.what();
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << name << ": paged_decode_attention threw: " << error.what();
  }
  const Tensor<double> expected =
      pool_oracle(q, pool, contract_row, [](int64_t h, int64_t group) { return h / group; });
  // Softmax amplifies the rounding of large logits: the tolerance widens with the largest one,
  // as in every decode test.
  const Tolerance tolerance = attention_tolerance(Precision::fp32, max_abs_logit(q, pool));
  const Comparison comparison = compare_to_oracle(out, expected, tolerance, {"sequence", "head", "channel"});
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

// A fresh random family of sequences: each takes its blocks in scattered order from a pool with
// spare (poisoned) blocks, or forks an earlier one — sharing a random number of its first blocks —
// and owns the rest; rows past the last block padded with −1.
PoolCase random_shared_case(Rng& rng) {
  PoolCase c;
  c.block_size = rng.integer(1, 8);
  c.num_kv_heads = rng.integer(1, 2);
  c.num_heads = c.num_kv_heads * std::vector<int64_t>{1, 2, 4}[size_t(rng.integer(0, 2))];
  c.head_dim = std::vector<int64_t>{33, 64, 80}[size_t(rng.integer(0, 2))];
  const int64_t batch = rng.integer(2, 5);
  std::vector<std::vector<int32_t>> shared_from(static_cast<size_t>(batch));  // blocks taken from an earlier sequence
  std::vector<int64_t> own(static_cast<size_t>(batch));                       // how many blocks of its own
  int64_t fresh = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const int32_t L = int32_t(rng.integer(1, 40));
    const int64_t blocks = (L + c.block_size - 1) / c.block_size;
    c.lengths.push_back(L);
    if (b > 0 && rng.integer(0, 2) > 0) {
      const size_t parent = size_t(rng.integer(0, b - 1));
      const int64_t shared = std::min<int64_t>(blocks, rng.integer(1, int64_t(c.tables[parent].size())));
      shared_from[size_t(b)].assign(c.tables[parent].begin(), c.tables[parent].begin() + shared);
    }
    own[size_t(b)] = blocks - int64_t(shared_from[size_t(b)].size());
    // Placeholders for the blocks of its own (numbered once the pool's size is known).
    c.tables.push_back(shared_from[size_t(b)]);
    for (int64_t i = 0; i < own[size_t(b)]; ++i) c.tables.back().push_back(int32_t(-2 - fresh++));
  }
  c.num_blocks = fresh + rng.integer(1, 4);  // spare blocks, poisoned
  const std::vector<int32_t> order = scattered_block_order(c.num_blocks, rng.engine()());
  for (auto& row : c.tables)
    for (int32_t& entry : row)
      if (entry <= -2) entry = order[size_t(-2 - entry)];
  size_t longest = 0;
  for (const auto& row : c.tables) longest = std::max(longest, row.size());
  c.tables[size_t(rng.integer(0, batch - 1))].resize(longest + size_t(rng.integer(1, 8)), -1);  // −1 past the end
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
    const std::string message = result.message();
    if (message.find("exercise 6.3 asks for a kernel") != std::string::npos ||
        message.find("bytes of device memory at its peak") != std::string::npos)
      return result;  // how the call ran, not what it computed
    return ::testing::AssertionFailure()
           << message << "\n  (a paged cache of " << c.block_size << "-token blocks handed out in scattered "
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
    } catch (const KernelCheckFailed& error) {
      return ::testing::AssertionFailure() << name << ": " << error.what();
    } catch (const std::exception& error) {
      return ::testing::AssertionFailure() << name << ": paged_decode_attention threw: " << error.what();
    }
    const Tolerance tolerance = tolerance_for(Precision::fp32);
    const Tensor<double> expected = decode_reference(q, contiguous);
    const Comparison comparison = compare_to_oracle(out, expected, tolerance, {"sequence", "head", "channel"});
    if (comparison.ok) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << name << ": out is not the float64 decode oracle over the same tokens:\n"
                                         << comparison.report() << explain_mismatch(q, pool, out, expected, tolerance)
                                         << "\n  seed " << rng.seed() << " (" << testing::replay_hint(rng.seed()) << ")";
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
  cases.push_back(random_shared_case(rng));
  cases.push_back(random_shared_case(rng));
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
        [&](Tensor<float>& out) { run_student(q, pool, out, c.threads_per_block); }, q.shape(), nullptr,
        testing::default_schedules(), testing::element_name(q.shape(), {"sequence", "head", "channel"}));
    const ::testing::AssertionResult right = same ? matches_pool_oracle(c.name(), q, pool, c.threads_per_block) : same;
    if (same && right) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << (same ? "" : c.name() + ": ") << right.message();
  });
}

}  // namespace
}  // namespace inferlab
