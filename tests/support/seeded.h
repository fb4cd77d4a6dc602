#pragma once
/// @file seeded.h
/// Fresh random data in tests, with the seed printed on failure.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "common/rng.h"

namespace inferlab::testing {

/// How to get the same data again: "rerun with INFERLAB_SEED=<seed>", or in a graded run (where
/// the environment is ignored) "replay: ./inferlab grade --seed <seed>".
std::string replay_hint(uint64_t seed);

/// "seed 42 (rerun with INFERLAB_SEED=42)": the seed and replay_hint(), for the end of a failure
/// message (an AssertionResult returned by a check outlives the check's SeededRng trace).
std::string seed_note(uint64_t seed);

/// An Rng seeded freshly (or from INFERLAB_SEED, or from the grader's --inferlab_seed) whose seed
/// is attached to every failure in the enclosing scope, with replay_hint().
class SeededRng : public Rng {
 public:
  SeededRng();
  /// A generator started from @p seed (several checks replaying one dataset), traced the same way.
  explicit SeededRng(uint64_t seed);

 private:
  ::testing::ScopedTrace trace_;
};

}  // namespace inferlab::testing
