#include "tests/support/schedules.h"

#include "tests/support/isolation.h"
#include "tests/support/seeded.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <sstream>

namespace inferlab::testing {
namespace {

using Bytes = std::vector<unsigned char>;

std::string hex_word(const unsigned char* p, size_t n) {
  std::ostringstream out;
  out << "0x";
  for (size_t i = n; i-- > 0;) out << std::hex << std::setw(2) << std::setfill('0') << static_cast<int>(p[i]);
  return out.str();
}

std::string describe_value(const Bytes& bytes, size_t word) {
  const size_t at = word * 4;
  const size_t n = std::min<size_t>(4, bytes.size() - at);
  std::ostringstream out;
  out << hex_word(&bytes[at], n);
  if (n == 4) {
    float f;
    std::memcpy(&f, &bytes[at], 4);
    int32_t i;
    std::memcpy(&i, &bytes[at], 4);
    out << " (float " << f << ", int " << i << ")";
  }
  return out.str();
}

bool word_differs(const Bytes& a, const Bytes& b, size_t word, float tolerance) {
  const size_t at = word * 4;
  const size_t n = std::min<size_t>(4, a.size() - at);
  if (std::memcmp(&a[at], &b[at], n) == 0) return false;
  if (tolerance > 0.0f && n == 4) {
    float x, y;
    std::memcpy(&x, &a[at], 4);
    std::memcpy(&y, &b[at], 4);
    if (std::isfinite(x) && std::isfinite(y) && std::fabs(x - y) <= tolerance * std::max(std::fabs(x), std::fabs(y)))
      return false;
  }
  return true;
}

void poison(const std::vector<DeviceOutput>& outputs) {
  for (const DeviceOutput& o : outputs) cudaMemset(o.data, 0xFF, o.bytes);
}

struct RunResult {
  cudaError_t status = cudaSuccess;
  std::string message;
  std::vector<Bytes> outputs;
};

RunResult run_once(const std::function<cudaError_t()>& run, const std::vector<DeviceOutput>& outputs) {
  RunResult result;
  poison(outputs);
  result.status = run();
  if (result.status == cudaSuccess) result.status = cudaDeviceSynchronize();
  if (result.status != cudaSuccess) {
    result.message = simt::last_error_message();
    if (result.message.empty()) result.message = cudaGetErrorString(result.status);
    return result;
  }
  for (const DeviceOutput& o : outputs) {
    Bytes bytes(o.bytes);
    cudaMemcpy(bytes.data(), o.data, o.bytes, cudaMemcpyDeviceToHost);
    result.outputs.push_back(std::move(bytes));
  }
  return result;
}

// Reruns @p run under @p schedule on one worker, watching one word, and describes its last writer.
std::string last_writer(const std::function<cudaError_t()>& run, const std::vector<DeviceOutput>& outputs,
                        const DeviceOutput& output, size_t word, const simt::Schedule& schedule) {
  simt::ScopedSchedule scoped(schedule);
  const int workers = simt::workers();
  simt::set_workers(1);  // one block at a time: a change is always the running thread's
  poison(outputs);
  const size_t at = word * 4;
  simt::watch_writes(static_cast<unsigned char*>(output.data) + at, std::min<size_t>(4, output.bytes - at));
  run();
  const std::vector<simt::WatchedWrite> writes = simt::watched_writes();
  simt::watch_writes(nullptr, 0);
  simt::set_workers(workers);
  if (writes.empty()) return "no thread wrote it";
  const simt::WatchedWrite& w = writes.back();
  std::ostringstream out;
  out << "last written by block (" << w.block.x << "," << w.block.y << "," << w.block.z << ") thread (" << w.thread.x
      << "," << w.thread.y << "," << w.thread.z << ") between " << w.from << " and " << w.to << " (" << writes.size()
      << " write" << (writes.size() == 1 ? "" : "s") << " in all)";
  return out.str();
}

// "the first at byte 8 (word 2)", or "the first at (row 0, col 2)" when the output has a shape.
std::string first_word(const DeviceOutput& output, size_t word) {
  if (!output.shape.empty() && element_count(output.shape) * 4 == int64_t(output.bytes))
    return "the first at " + format_position(unflatten(int64_t(word), output.shape), output.axes) + " (byte " +
           std::to_string(word * 4) + ")";
  return "the first at byte " + std::to_string(word * 4) + " (4-byte word " + std::to_string(word) + ")";
}

}  // namespace

ElementName element_name(Shape shape, AxisNames axes) {
  return [shape = std::move(shape), axes = std::move(axes)](int64_t index) {
    return format_position(unflatten(index, shape), axes);
  };
}

std::string thread_order_explanation(const simt::LaunchRecord& launch) {
  std::ostringstream out;
  out << "  Results that differ between thread orders mean a race or a read of memory no thread wrote: a "
         "missing __syncthreads()/__syncwarp() between one thread's write and another's read, an "
         "out-of-bounds read, or a read of uninitialised memory.\n  ";
  if (launch.kernel.empty()) {
    out << "No kernel launch was recorded.";
  } else {
    out << launch.launched_at << " is where kernel '" << launch.kernel << "' was launched, not the faulty line.";
  }
  // (Not the literal prefix "simt: …": the grader takes the first such line of a test's output
  // for the emulator's own report.)
  out << " If the emulator printed a checker report above (a line beginning \"simt:\" and then racecheck, "
         "memcheck or initcheck), that report names the faulty line.";
  return out.str();
}

std::vector<simt::Schedule> default_schedules(int random_seeds) {
  uint64_t base = 0;
  if (const char* seed = std::getenv("INFERLAB_SEED"); seed != nullptr && *seed != '\0')
    base = std::strtoull(seed, nullptr, 10);
  std::vector<simt::Schedule> schedules{{simt::Order::forward, 0}, {simt::Order::reverse, 0}};
  for (int i = 1; i <= random_seeds; ++i) schedules.push_back({simt::Order::random, base + static_cast<uint64_t>(i)});
  return schedules;
}

::testing::AssertionResult same_under_schedules(const std::function<cudaError_t()>& run,
                                                const std::vector<DeviceOutput>& outputs,
                                                const std::vector<simt::Schedule>& schedules) {
  if (schedules.empty()) return ::testing::AssertionFailure() << "same_under_schedules: no schedules";
  std::vector<RunResult> results;
  for (const simt::Schedule& schedule : schedules) {
    simt::ScopedSchedule scoped(schedule);
    results.push_back(run_once(run, outputs));
    if (results.back().status != cudaSuccess) {
      const std::string message = results.back().message;
      cudaDeviceReset();  // clear the sticky error for the tests that follow
      return ::testing::AssertionFailure() << "under schedule " << schedule.to_string() << " the launch failed with "
                                           << cudaGetErrorName(results.back().status) << ":\n"
                                           << message;
    }
  }
  const simt::LaunchRecord launch = testing::last_launch();
  for (size_t s = 1; s < schedules.size(); ++s) {
    for (size_t o = 0; o < outputs.size(); ++o) {
      const Bytes& reference = results[0].outputs[o];
      const Bytes& other = results[s].outputs[o];
      const size_t words = (reference.size() + 3) / 4;
      size_t word = words, differing = 0;
      for (size_t w = 0; w < words; ++w) {
        if (!word_differs(reference, other, w, outputs[o].float_tolerance)) continue;
        if (word == words) word = w;
        ++differing;
      }
      if (differing == 0) continue;
      return ::testing::AssertionFailure()
             << "race: kernel '" << launch.kernel << "' writes different bytes under schedule "
             << schedules[s].to_string() << " than under " << schedules[0].to_string()
             << ": the result depends on the thread order\n"
             << "  output '" << outputs[o].name << "': " << differing << " of " << words << " 4-byte words differ; "
             << first_word(outputs[o], word) << "\n"
             << "  " << schedules[0].to_string() << ": " << describe_value(reference, word) << ", "
             << last_writer(run, outputs, outputs[o], word, schedules[0]) << "\n"
             << "  " << schedules[s].to_string() << ": " << describe_value(other, word) << ", "
             << last_writer(run, outputs, outputs[o], word, schedules[s]) << "\n"
             << thread_order_explanation(launch);
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult host_same_under_schedules(const std::function<void(Tensor<float>& out)>& run,
                                                     const Shape& output_shape, Tensor<float>* output,
                                                     const std::vector<simt::Schedule>& schedules,
                                                     const ElementName& name) {
  if (schedules.empty()) return ::testing::AssertionFailure() << "host_same_under_schedules: no schedules";
  const ElementName name_of = name ? name : element_name(output_shape, {});
  Tensor<float> first;
  for (const simt::Schedule& schedule : schedules) {
    const simt::ScopedSchedule scoped(schedule);
    Tensor<float> out(output_shape);
    out.poison();
    try {
      run(out);
    } catch (const std::exception& error) {
      std::string message = error.what();
      const std::string details = simt::last_error_message();
      if (!details.empty() && message.find(details) == std::string::npos) message += "\n" + details;
      cudaDeviceReset();  // clear a sticky kernel fault for the tests that follow
      return ::testing::AssertionFailure() << "under schedule " << schedule.to_string() << ": threw " << message;
    }
    if (out.shape() != output_shape) {
      return ::testing::AssertionFailure() << "the output's shape changed to " << to_string(out.shape());
    }
    if (&schedule == &schedules.front()) {
      first = std::move(out);
      continue;
    }
    int64_t differing = 0, at = -1;
    for (int64_t i = 0; i < out.size(); ++i) {
      if (std::memcmp(&out[i], &first[i], sizeof(float)) == 0) continue;
      if (differing++ == 0) at = i;
    }
    if (differing == 0) continue;
    const simt::LaunchRecord launch = testing::last_launch();
    return ::testing::AssertionFailure() << "the result depends on the thread order: " << differing << " of "
                                         << out.size() << " output elements differ between schedules "
                                         << schedules.front().to_string() << " and " << schedule.to_string()
                                         << "; the first at " << name_of(at) << " is " << first[at] << " under "
                                         << schedules.front().to_string() << " but " << out[at] << " under "
                                         << schedule.to_string() << "\n"
                                         << thread_order_explanation(launch);
  }
  if (output != nullptr) *output = std::move(first);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult host_same_under_schedules_seeded(const std::string& what, uint64_t seed,
                                                            const std::function<void(Tensor<float>& out)>& run,
                                                            const Shape& output_shape, const AxisNames& axes,
                                                            Tensor<float>& output) {
  const ::testing::AssertionResult same =
      host_same_under_schedules(run, output_shape, &output, default_schedules(), element_name(output_shape, axes));
  if (!same) return ::testing::AssertionFailure() << what << ": " << same.message() << "\n  " << seed_note(seed);
  return ::testing::AssertionSuccess();
}

}  // namespace inferlab::testing
