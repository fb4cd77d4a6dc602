#pragma once
/// @file seeded.h
/// Fresh random data in tests, with the seed printed on failure.

#include <gtest/gtest.h>

#include "common/rng.h"

namespace inferlab::testing {

/// An Rng seeded freshly (or from INFERLAB_SEED) whose seed is attached to every failure in
/// the enclosing scope: "rerun with INFERLAB_SEED=<seed>".
class SeededRng : public Rng {
 public:
  SeededRng();

 private:
  ::testing::ScopedTrace trace_;
};

}  // namespace inferlab::testing
