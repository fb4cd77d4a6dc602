#pragma once
/// @file ceil_div.h
/// Ceiling division, the one way to write it: how many blocks of @p per hold @p count items
/// (tiles of a grid, KV blocks of a sequence, splits of a key range). Also callable from CUDA
/// device code (the kernels are compiled with --expt-relaxed-constexpr).

#include <concepts>
#include <type_traits>

namespace inferlab {

/// ⌈@p count / @p per⌉ for @p count ≥ 0 and @p per > 0: (count + per − 1) / per, in the type
/// both convert to (as the built-in operators would).
template <std::integral Count, std::integral Per>
constexpr std::common_type_t<Count, Per> ceil_div(Count count, Per per) {
  using T = std::common_type_t<Count, Per>;
  return (T(count) + T(per) - 1) / T(per);
}

}  // namespace inferlab
