#pragma once
/// @file test_backend.h
/// The backend a test source is compiled for. A source that covers several backends is built
/// once per backend (tests/*/CMakeLists.txt) with INFERLAB_TEST_BACKEND_SIM or
/// INFERLAB_TEST_BACKEND_CUDA defined (neither: the cpu build). kTestBackend names that backend,
/// and INFERLAB_SKIP_WITHOUT_BACKEND(), the first statement of a test that runs on it, skips the
/// test — saying why — when the backend is unavailable (the cuda build without a GPU).

#include <gtest/gtest.h>

#include <cstdint>

#include "common/backend.h"

namespace inferlab::testing {

#if defined(INFERLAB_TEST_BACKEND_SIM)
inline constexpr Backend kTestBackend = Backend::sim;
#elif defined(INFERLAB_TEST_BACKEND_CUDA)
inline constexpr Backend kTestBackend = Backend::cuda;
#else
/// The backend this test source is built for (see the file comment).
inline constexpr Backend kTestBackend = Backend::cpu;
#endif

/// The longest sequence of the decode tests' shapes, the same on every backend: the emulator
/// runs the shapes a GPU runs (decode grids are small), so that a machine without a GPU checks
/// the same kernels on the same shapes.
inline constexpr int64_t kTestMaxLength = 129;

}  // namespace inferlab::testing

/// Skips the enclosing test, with the reason, when kTestBackend is not available here.
#define INFERLAB_SKIP_WITHOUT_BACKEND()                                  \
  if (!::inferlab::backend_available(::inferlab::testing::kTestBackend)) \
  GTEST_SKIP() << ::inferlab::backend_unavailable_reason(::inferlab::testing::kTestBackend)
