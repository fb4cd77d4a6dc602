#pragma once
/// @file prediction_isolated.h
/// A student's prediction function, called in the sandbox (tests/support/isolation.h): the
/// graded prediction tests pass `isolated(student::predict_…)` to the chapter's checks, the
/// tests/wrong/ fixtures pass plain wrong formulas to the same checks.

#include "tests/support/isolation.h"

namespace inferlab::testing {

/// @p predict wrapped so that each call runs in a sandboxed child and returns its value.
template <class F>
auto isolated(F predict) {
  return [predict](auto... args) { return isolated_result([&] { return predict(args...); }); };
}

}  // namespace inferlab::testing
