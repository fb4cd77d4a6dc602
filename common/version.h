#pragma once
/// @file version.h
/// Registered versions: every operation (prefill attention, decode attention, KV-cache append)
/// lists its implementations as rows of one generic type, and tests, benchmarks and the CLI
/// find them with one generic function. Adding an implementation is one file plus one row.

#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/backend.h"
#include "common/config.h"
#include "common/tolerance.h"

namespace inferlab {

/// One registered implementation of an operation whose signature is @p Fn, on one backend.
/// @p Input tells rows of the same name and backend apart (decode and append: the cache's
/// element type, one row per type the implementation reads); std::monostate when nothing does.
template <class Fn, class Input = std::monostate>
struct Version {
  std::string name;     ///< e.g. "cpu/naive", "cuda/decode" (a cuda/... kernel runs on sim and cuda)
  Backend backend;      ///< where this row runs
  Input input{};        ///< the input this row is registered for (see the struct comment)
  int chapter = 0;      ///< the chapter that teaches it
  Precision precision;  ///< the arithmetic, which picks the test tolerance
  std::string summary;  ///< one line for listings
  Fn run;               ///< the implementation
};

/// "" for a version without an input kind; else what to_string() says of it.
inline std::string describe_input(std::monostate) {
  return "";
}
/// The name of @p input, as to_string() writes it.
template <class Input>
std::string describe_input(const Input& input) {
  return std::string(to_string(input));
}

/// The row of @p versions called @p name on @p backend for @p input. Throws
/// std::invalid_argument naming what was asked and listing the rows that exist otherwise.
template <class Fn, class Input>
const Version<Fn, Input>& find_version(const std::vector<Version<Fn, Input>>& versions, std::string_view name,
                                       Backend backend, const Input& input = {}) {
  std::string known;
  for (const Version<Fn, Input>& version : versions) {
    if (version.name == name && version.backend == backend && version.input == input) return version;
    const std::string kind = describe_input(version.input);
    known += (known.empty() ? "" : ", ") + version.name + " (" + std::string(to_string(version.backend)) +
             (kind.empty() ? "" : ", " + kind) + ")";
  }
  const std::string kind = describe_input(input);
  throw std::invalid_argument("version = " + std::string(name) + " on backend " + std::string(to_string(backend)) +
                              (kind.empty() ? "" : " for " + kind) + ": is not registered; known: " + known);
}

/// A CUDA version before it is placed on a backend: one kernel source compiled for the emulator
/// (sim) and, with nvcc, for a GPU (cuda; empty in a build without nvcc). Write the two
/// functions with INFERLAB_SIM_AND_CUDA(function).
template <class Fn, class Input = std::monostate>
struct DeviceRow {
  std::string name;     ///< e.g. "cuda/decode"
  Input input{};        ///< as Version::input
  int chapter = 0;      ///< the chapter that teaches it
  Precision precision;  ///< the arithmetic
  std::string summary;  ///< one line for listings
  Fn sim;               ///< the emulator's build of the function
  Fn cuda;              ///< nvcc's build, or empty
};

/// Appends every row of @p rows to @p versions on each device backend this build has: all of
/// them on sim, then all of them on cuda (when compiled with nvcc).
template <class Fn, class Input>
void add_device_rows(std::vector<Version<Fn, Input>>& versions, const std::vector<DeviceRow<Fn, Input>>& rows) {
  for (const Backend backend : {Backend::sim, Backend::cuda})
    for (const DeviceRow<Fn, Input>& row : rows) {
      const Fn& run = backend == Backend::sim ? row.sim : row.cuda;
      if (run) versions.push_back({row.name, backend, row.input, row.chapter, row.precision, row.summary, run});
    }
}

}  // namespace inferlab

#if INFERLAB_WITH_CUDA
/// The sim and cuda builds of a CUDA entry point, for DeviceRow (cuda empty without nvcc).
#define INFERLAB_SIM_AND_CUDA(function) ::inferlab::sim::function, ::inferlab::cuda::function
#else
/// The sim and cuda builds of a CUDA entry point, for DeviceRow (cuda empty without nvcc).
#define INFERLAB_SIM_AND_CUDA(function) ::inferlab::sim::function, nullptr
#endif
