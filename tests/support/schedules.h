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
/// writes fails too. On a difference the message names the kernel and where it was launched
/// (the launch, not the faulty line), how many elements differ and the first of them in the
/// output's own coordinates, its value under each schedule and, from a watched rerun, the block,
/// thread and source lines of its last writer under each schedule; and it says what differing
/// results mean: a race or a read of memory no thread wrote (a missing barrier, an out-of-bounds
/// or an uninitialised read), which the emulator's checkers name by line when they catch it
/// (thread_order_explanation()).

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "common/compare.h"
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
  Shape shape{};                 ///< when given: the output as a tensor of 4-byte elements of this
                                 ///< shape, so a difference is named by its multi-index …
  AxisNames axes{};              ///< … with these names ("(row 3, col 17)")
};

/// Names element @p index of a flat output in the tensor's own coordinates, e.g. "(head 1,
/// query 3, channel 17)" or "V (sequence 1, KV head 0, token 7, channel 17)".
using ElementName = std::function<std::string(int64_t index)>;

/// An ElementName for an output of @p shape whose dimensions are called @p axes
/// (format_position() of the element's multi-index).
ElementName element_name(Shape shape, AxisNames axes);

/// What results that differ between thread orders mean, for a failure message: the launch site
/// of @p launch is where the kernel was launched, not the faulty line; the cause is a race or a
/// read of memory no thread wrote (a missing __syncthreads/__syncwarp, an out-of-bounds read, an
/// uninitialised read); the emulator's checker report (its racecheck, memcheck and initcheck
/// lines), when it printed one, names the faulty line.
std::string thread_order_explanation(const simt::LaunchRecord& launch);

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
/// differs from the first schedule's (the message counts the differing elements, names the
/// first by @p name — by its multi-index in @p output_shape when @p name is empty — and gives
/// the last kernel launched and thread_order_explanation()). On success, @p output (when given)
/// receives the output.
::testing::AssertionResult host_same_under_schedules(const std::function<void(Tensor<float>& out)>& run,
                                                     const Shape& output_shape, Tensor<float>* output = nullptr,
                                                     const std::vector<simt::Schedule>& schedules = default_schedules(),
                                                     const ElementName& name = {});

/// host_same_under_schedules() for a graded check: the output's elements named by @p axes, the
/// failure message prefixed with @p what and ended with the seed's reproduction note.
::testing::AssertionResult host_same_under_schedules_seeded(const std::string& what, uint64_t seed,
                                                            const std::function<void(Tensor<float>& out)>& run,
                                                            const Shape& output_shape, const AxisNames& axes,
                                                            Tensor<float>& output);

}  // namespace inferlab::testing
