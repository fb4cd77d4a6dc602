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

}  // namespace inferlab
