#pragma once
/// @file isolation.h
/// Student code runs in a sandboxed child process; the test that grades it never does.
///
/// A graded test is trusted only if the code it grades cannot decide the verdict. So every call
/// into a student's library goes through run_isolated():
///
///     parent (the test: trusted)                  child (fork of the parent)
///     draws the inputs, computes the oracle
///     fork() ───────────────────────────────────► closes every descriptor but the result pipe,
///                                                 installs a seccomp filter (no open, no exec,
///                                                 no kill, no ptrace, no socket; writes only to
///                                                 stdout, stderr and the pipe),
///                                                 runs the student call,
///     reads the outputs from the pipe ◄────────── writes the named outputs (or the exception)
///     waits for the child, then compares          _exit(0)
///     the outputs with the oracle and records
///     the result
///
/// The child cannot write the test report (it can open no file), cannot touch the parent's
/// memory (it is a copy), and cannot end the parent's test with a pass: a crash, a hang or an
/// early exit of the child only ever makes the call fail. Its launches and device-memory peak
/// are counted in the child and sent back with the outputs (@ref IsolatedRun).
///
/// Outside grading, `--inferlab_no_isolation` on a test program's command line runs the calls
/// in-process (for a debugger); the grader never passes it and a graded run refuses it.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "simt/simt.h"

namespace inferlab::testing {

/// What one isolated call did besides producing its outputs.
struct IsolatedRun {
  uint64_t launches = 0;            ///< kernel launches the call made (the SIMT emulator's count)
  uint64_t device_bytes_peak = 0;   ///< the most device memory the call allocated at once, bytes
};

/// The student code run by run_isolated() crashed, exited, or broke the protocol.
class StudentCodeFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A host memory range the child's writes to are copied back to the parent.
using OutputBytes = std::span<std::byte>;

/// The bytes of @p value, as an output of run_isolated().
template <class T>
OutputBytes output_bytes(T& value) {
  static_assert(std::is_trivially_copyable_v<T>, "an isolated output must be trivially copyable");
  return {reinterpret_cast<std::byte*>(&value), sizeof(T)};
}

/// The bytes of the elements of @p values, as an output of run_isolated() (the size is fixed by
/// the parent: the child's call must not resize it).
template <class T>
OutputBytes output_bytes(std::span<T> values) {
  static_assert(std::is_trivially_copyable_v<T>, "an isolated output must be trivially copyable");
  return {reinterpret_cast<std::byte*>(values.data()), values.size_bytes()};
}

/// Runs @p call in a sandboxed child process and copies the child's final contents of each range
/// in @p outputs back into the same range of this process. An exception thrown by @p call is
/// rethrown here with its message (inferlab::NotImplemented as itself, anything else as
/// std::runtime_error naming its type); a child that crashes, exits or runs out of CPU time
/// throws StudentCodeFailed saying which. Returns the launches and device-memory peak of the call.
IsolatedRun run_isolated(const std::function<void()>& call, std::vector<OutputBytes> outputs = {});

/// Runs @p call in a sandboxed child and returns its result: a trivially copyable value, a
/// std::vector of them or a std::string. @p run, when given, receives the call's launches and
/// device-memory peak.
template <class F>
auto isolated_result(F&& call, IsolatedRun* run = nullptr) {
  using R = std::decay_t<decltype(call())>;
  R result{};
  std::vector<std::byte> bytes;
  IsolatedRun stats = run_isolated_raw([&] {
    R value = call();
    if constexpr (std::is_trivially_copyable_v<R>) {
      const auto* p = reinterpret_cast<const std::byte*>(&value);
      return std::vector<std::byte>(p, p + sizeof(R));
    } else {
      static_assert(std::is_trivially_copyable_v<typename R::value_type>,
                    "isolated_result returns a trivially copyable value, a vector of them or a string");
      const auto* p = reinterpret_cast<const std::byte*>(value.data());
      return std::vector<std::byte>(p, p + value.size() * sizeof(typename R::value_type));
    }
  }, bytes);
  if constexpr (std::is_trivially_copyable_v<R>) {
    if (bytes.size() != sizeof(R)) throw StudentCodeFailed("isolated call: the result has the wrong size");
    std::memcpy(&result, bytes.data(), sizeof(R));
  } else {
    using T = typename R::value_type;
    if (bytes.size() % sizeof(T) != 0) throw StudentCodeFailed("isolated call: the result has a partial element");
    result.resize(bytes.size() / sizeof(T));
    if (!bytes.empty()) std::memcpy(result.data(), bytes.data(), bytes.size());
  }
  if (run != nullptr) *run = stats;
  return result;
}

/// The primitive under run_isolated() and isolated_result(): runs @p call in the sandboxed child
/// and stores the bytes it returns in @p result.
IsolatedRun run_isolated_raw(const std::function<std::vector<std::byte>()>& call, std::vector<std::byte>& result);

/// The most recent kernel launch of this process or of an isolated call that returned since:
/// a failure report names the student's kernel even though it ran in the child.
simt::LaunchRecord last_launch();

/// Whether this program runs under the grader (`--inferlab_grading`).
bool grading_run();

/// Whether calls are isolated: true unless `--inferlab_no_isolation` was given outside grading.
bool isolation_enabled();

/// Reads the InferLab options of a graded test program and removes them from argv:
///   --inferlab_seed=N          the seed of every fresh Rng (the environment's INFERLAB_SEED is
///                              then ignored); the grader always passes one
///   --inferlab_grading         marks a graded run: --inferlab_no_isolation is refused
///   --inferlab_no_isolation    run student calls in-process (to debug them; never when grading)
/// Throws std::invalid_argument on a malformed value or a refused combination.
void parse_inferlab_options(int& argc, char** argv);

}  // namespace inferlab::testing
