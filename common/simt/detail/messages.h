#pragma once
/// @file messages.h
/// How the emulator's messages name things: source lines, dimensions, operations, thread ranges
/// and kernels (the emulator's own sources only, never kernels or tests; messages.cpp defines them).

#include <cstring>
#include <source_location>
#include <string>
#include <vector>

#include "simt/simt.h"

/// @cond SIMT_DETAIL
namespace simt::detail {

// "file.cu:42": the file name without its directories, and the line.
std::string where(const std::source_location& site);
// Whether two source locations are the same call (line, column and file). Inline: the block
// runner compares every thread's site at every barrier.
inline bool same_site(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}
// "(x,y,z)".
std::string dims(uint3 d);
// The CUDA name of a synchronisation point, e.g. "__shfl_down_sync".
const char* op_name(Op op);
// Linear thread ids as ranges, e.g. "0-15, 17, 20-31".
std::string id_ranges(const std::vector<unsigned>& ids);
// The demangled name of @p kernel, else "<kernel launched at file:line>" (cached).
std::string kernel_name(const void* kernel, const std::source_location& site);

}  // namespace simt::detail
/// @endcond
