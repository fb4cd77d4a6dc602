#pragma once
/// @file schedules.h
/// Race detection for kernel tests on the sim backend: run one launch under several thread
/// orders and insist that every output byte is the same.
///
/// @code
/// using inferlab::testing::DeviceOutput;
/// EXPECT_TRUE(inferlab::testing::same_under_schedules(
///     [&] { return sim::my_kernel(d_in, d_out, seq_len); },     // one complete run
///     {DeviceOutput{"out", d_out, seq_len * sizeof(float)}}));  // what it writes
/// @endcode
///
/// Before each run the outputs are poisoned with 0xFF bytes (NaN), so an element that no thread
/// writes fails too. On a difference the message names the kernel, the first differing element,
/// its value under each schedule and, from a watched rerun, the block, thread and source lines
/// of its last writer under each schedule.

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "simt/simt.h"

namespace inferlab::testing {

/// A device buffer written by the launch under test.
struct DeviceOutput {
  std::string name;              ///< shown in messages, e.g. "out"
  void* data = nullptr;          ///< device pointer (from cudaMalloc)
  size_t bytes = 0;              ///< how many bytes to compare
  float float_tolerance = 0.0f;  ///< 0: bytes must match; > 0: compare as float32 within this
                                 ///< relative tolerance (for order-dependent float atomics)
};

/// forward, reverse and @p random_seeds seeded shuffles (seeds 1, 2, …; INFERLAB_SEED, when set,
/// is added to them so that a rerun can explore other orders).
std::vector<simt::Schedule> default_schedules(int random_seeds = 3);

/// Runs @p run once per schedule (outputs poisoned first; multi-worker block order shuffled as
/// well) and compares every output with the first schedule's. Fails when @p run returns an error
/// (the message includes simt::last_error_message()) or when any output differs.
/// @param run       performs the whole launch (and any host-side preparation); returns its status
/// @param outputs   the buffers it writes
/// @param schedules the orders to try (default_schedules() by default)
::testing::AssertionResult same_under_schedules(const std::function<cudaError_t()>& run,
                                                const std::vector<DeviceOutput>& outputs,
                                                const std::vector<simt::Schedule>& schedules = default_schedules());

/// The host-level form, for a launcher that copies its inputs to the device, runs sim kernels
/// and copies its result back into a host tensor (the attention versions, the exercises): runs
/// @p run once per schedule, each time into a fresh output of @p output_shape poisoned with NaN,
/// and fails when @p run throws (the message includes simt::last_error_message(): a barrier
/// that some threads never reach is reported there with its line) or when any output bit
/// differs from the first schedule's (the message names the first differing element and the
/// last kernel launched). On success, @p output (when given) receives the output.
::testing::AssertionResult host_same_under_schedules(const std::function<void(Tensor<float>& out)>& run,
                                                     const Shape& output_shape, Tensor<float>* output = nullptr,
                                                     const std::vector<simt::Schedule>& schedules = default_schedules());

}  // namespace inferlab::testing
