#pragma once
/// @file wmma.h
/// Tensor-core fragments (WMMA, CUDA's `<mma.h>`) for both compilers, as `simt::wmma`.
///
/// Under nvcc, `simt::wmma` is `nvcuda::wmma`: the real 16×16×16 warp-level matrix operations.
/// Under g++ it is a small software model for the SIMT emulator, so that a tensor-core kernel's
/// algorithm (tiling, masking, its use of shared memory and barriers) is tested on the CPU and
/// only the instruction itself is emulated:
///
/// - a fragment holds the **whole** 16×16 tile in every lane of the warp (a GPU spreads it over
///   the 32 lanes in an unspecified order). The element array `x[]` and `num_elements` of real
///   fragments are deliberately missing: a kernel that touched fragment elements would depend on
///   that unspecified order, so it must go through shared memory instead (and then it compiles
///   here);
/// - load_matrix_sync(): each lane reads the whole tile (identical copies); the pointer must be
///   32-byte aligned and `ldm` a multiple of 16 bytes, as on a GPU — a violation throws, which the
///   emulator reports as a kernel fault naming the block and thread;
/// - mma_sync(): D = A·B + C with the products of the 16-bit inputs summed in fp32;
/// - store_matrix_sync(): a warp barrier (__syncwarp: every lane has finished the loads and
///   products before the destination is overwritten, as the collective guarantees on a GPU),
///   then lane 0 writes the tile. It adds no barrier after the write: as on a GPU, a kernel that
///   reads the stored tile from other lanes needs its own __syncwarp(), and the emulator's
///   schedule fuzzing catches a missing one;
/// - fill_fragment(): sets every element.
///
/// Only the shapes the kernels use are modelled: m16n16k16 with __half or __nv_bfloat16 inputs
/// and float accumulators.
#include "simt/simt.h"

#if defined(__CUDACC__)
#include <mma.h>

namespace simt {
/// The tensor-core fragments: CUDA's own under nvcc.
namespace wmma = nvcuda::wmma;
}  // namespace simt

#else

#include <cstdint>
#include <source_location>
#include <stdexcept>
#include <string>
#include <type_traits>

/// The SIMT emulator's software model of CUDA's WMMA API (see simt/wmma.h).
namespace simt::wmma {

struct matrix_a {};     ///< the left operand A (M×K)
struct matrix_b {};     ///< the right operand B (K×N)
struct accumulator {};  ///< C and D (M×N)
struct row_major {};    ///< element (r, c) of a tile at ptr[r·ldm + c]
struct col_major {};    ///< element (r, c) of a tile at ptr[c·ldm + r]

/// The memory layout of an accumulator tile in load/store calls.
enum layout_t {
  mem_row_major,  ///< element (r, c) at ptr[r·ldm + c]
  mem_col_major,  ///< element (r, c) at ptr[c·ldm + r]
};

/// One 16×16 tile of @p T held (whole) by every lane. @p Use is matrix_a, matrix_b or
/// accumulator; @p Layout is row_major/col_major for A and B, void for accumulators.
template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulator models the m16n16k16 shape only");
  static_assert(std::is_same_v<Use, accumulator> ? std::is_same_v<T, float>
                                                 : (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>),
                "the emulator models __half / __nv_bfloat16 inputs with float accumulators");

 public:
  /// Element (row, col) of the tile.
  float& at(int row, int col) { return tile_[row][col]; }
  /// Element (row, col) of the tile.
  float at(int row, int col) const { return tile_[row][col]; }

 private:
  float tile_[16][16] = {};  // inputs are stored already rounded to T
};

/// @cond SIMT_DETAIL
namespace detail {

template <class T>
float to_float(T x) {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else if constexpr (std::is_same_v<T, __half>)
    return __half2float(x);
  else
    return __bfloat162float(x);
}

// The alignment rules of the real instructions: a 256-bit aligned pointer, ldm a multiple of
// 16 bytes.
template <class T>
void check_tile_address(const T* pointer, unsigned ldm, const char* call, const std::source_location& site) {
  const bool aligned = reinterpret_cast<uintptr_t>(pointer) % 32 == 0;
  const bool stride_ok = (ldm * sizeof(T)) % 16 == 0 && ldm >= 16;
  if (aligned && stride_ok) return;
  throw std::invalid_argument(std::string("wmma::") + call + " at " + site.file_name() + ":" +
                              std::to_string(site.line()) + (aligned ? "" : ": the pointer is not 32-byte aligned") +
                              (stride_ok ? "" : ": ldm = " + std::to_string(ldm) + " is not a multiple of 16 bytes"));
}

}  // namespace detail
/// @endcond

/// Loads an A or B tile of 16-bit values from @p pointer (leading dimension @p ldm elements).
template <class Use, class T, class Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& frag, const T* pointer, unsigned ldm,
                      const std::source_location site = std::source_location::current()) {
  detail::check_tile_address(pointer, ldm, "load_matrix_sync", site);
  constexpr bool kRowMajor = std::is_same_v<Layout, row_major>;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      frag.at(r, c) = detail::to_float(kRowMajor ? pointer[r * ldm + c] : pointer[c * ldm + r]);
}

/// Loads an fp32 accumulator tile from @p pointer in @p layout.
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& frag, const float* pointer, unsigned ldm,
                             layout_t layout, const std::source_location site = std::source_location::current()) {
  detail::check_tile_address(pointer, ldm, "load_matrix_sync", site);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) frag.at(r, c) = layout == mem_row_major ? pointer[r * ldm + c] : pointer[c * ldm + r];
}

/// Stores an fp32 accumulator tile to @p pointer in @p layout: a warp barrier, then lane 0 writes.
inline void store_matrix_sync(float* pointer, const fragment<accumulator, 16, 16, 16, float>& frag, unsigned ldm,
                              layout_t layout, const std::source_location site = std::source_location::current()) {
  detail::check_tile_address(pointer, ldm, "store_matrix_sync", site);
  __syncwarp(0xffffffffu, site);  // every lane is done with its loads and products (the collective)
  if (threadIdx.x % 32 != 0) return;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      (layout == mem_row_major ? pointer[r * ldm + c] : pointer[c * ldm + r]) = frag.at(r, c);
}

/// Sets every element of @p frag to @p value.
template <class Use, class T, class Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& frag, float value) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) frag.at(r, c) = value;
}

/// D = A·B + C: products of the 16-bit inputs accumulated in fp32.
template <class T, class LayoutA, class LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d, const fragment<matrix_a, 16, 16, 16, T, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB>& b, const fragment<accumulator, 16, 16, 16, float>& c) {
  float result[16][16];  // d may alias c
  for (int r = 0; r < 16; ++r) {
    for (int n = 0; n < 16; ++n) result[r][n] = c.at(r, n);
    for (int k = 0; k < 16; ++k) {  // each element sums its products in k order
      const float a_rk = a.at(r, k);
      for (int n = 0; n < 16; ++n) result[r][n] += a_rk * b.at(k, n);
    }
  }
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 16; ++n) d.at(r, n) = result[r][n];
}

}  // namespace simt::wmma

#endif
