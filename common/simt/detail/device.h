#pragma once
/// @file device.h
/// Device-side CUDA as the emulator provides it (g++ only; included by simt/simt.h): keywords,
/// built-in indices, barriers, warp collectives, atomics and the intrinsics the lessons use.

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <source_location>
#include <type_traits>

/// @cond SIMT_DETAIL
// Keywords. The toolkit's host_defines.h defines them as attributes that g++ ignores or warns
// about; the emulator gives them meanings. `__shared__` is one copy per OS thread = per running
// block (a worker runs one block at a time).
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __constant__
#undef __managed__
#undef __forceinline__
#undef __launch_bounds__
#undef __grid_constant__
#define __global__
#define __device__
#define __host__
#define __shared__ static thread_local
#define __constant__
#define __managed__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#ifndef __align__
#define __align__(n) alignas(n)
#endif
/// @endcond

/// Dynamic shared memory of the running block as a `T*` called @p name (under nvcc:
/// `extern __shared__` storage). Its size is the launch's shared_bytes; the emulator fills it
/// with 0xFF at the start of every block so that reading an element nobody wrote shows up.
#define SIMT_DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(::simt::detail::dynamic_shared_memory())

/// @cond SIMT_DETAIL
// Built-in indices: set by the scheduler before it resumes a thread (fiber) or starts a block.
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local uint3 blockDim;
inline thread_local uint3 gridDim;
constexpr int warpSize = 32;

namespace simt::detail {

/// What a parked thread waits for.
enum class Op : uint8_t {
  barrier,  // __syncthreads and its _count/_and/_or forms (value = predicate)
  syncwarp,
  shfl_idx,
  shfl_up,
  shfl_down,
  shfl_xor,
  ballot,
  any,
  all,
  reduce_add,
  reduce_min_signed,
  reduce_min_unsigned,
  reduce_max_signed,
  reduce_max_unsigned,
  reduce_and,
  reduce_or,
  reduce_xor,
  match_any,
};

/// Parks the calling thread at a synchronisation point and returns the collective's result.
/// For barriers: low 32 bits = count of true predicates, high 32 = number of participants.
uint64_t park(Op op, unsigned mask, uint64_t value, int arg, int width, const std::source_location& site);
/// Lanes of the caller's warp that have not exited.
unsigned active_mask();
/// The running block's dynamic shared memory.
unsigned char* dynamic_shared_memory();

template <class T>
uint64_t to_bits(T value) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "the emulator shuffles values of at most 8 bytes; shuffle wider types in parts");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}
template <class T>
T from_bits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

}  // namespace simt::detail

// ---- block barriers ---------------------------------------------------------------------------
inline void __syncthreads(const std::source_location site = std::source_location::current()) {
  simt::detail::park(simt::detail::Op::barrier, 0, 0, 0, 0, site);
}
inline int __syncthreads_count(int predicate, const std::source_location site = std::source_location::current()) {
  return static_cast<int>(simt::detail::park(simt::detail::Op::barrier, 0, predicate != 0, 0, 0, site) & 0xffffffffu);
}
inline int __syncthreads_and(int predicate, const std::source_location site = std::source_location::current()) {
  const uint64_t r = simt::detail::park(simt::detail::Op::barrier, 0, predicate != 0, 0, 0, site);
  return (r & 0xffffffffu) == (r >> 32);
}
inline int __syncthreads_or(int predicate, const std::source_location site = std::source_location::current()) {
  return (simt::detail::park(simt::detail::Op::barrier, 0, predicate != 0, 0, 0, site) & 0xffffffffu) != 0;
}

// ---- warp collectives -------------------------------------------------------------------------
inline void __syncwarp(unsigned mask = 0xffffffffu, const std::source_location site = std::source_location::current()) {
  simt::detail::park(simt::detail::Op::syncwarp, mask, 0, 0, 32, site);
}
inline unsigned __activemask() {
  return simt::detail::active_mask();
}
template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32,
              const std::source_location site = std::source_location::current()) {
  return simt::detail::from_bits<T>(
      simt::detail::park(simt::detail::Op::shfl_idx, mask, simt::detail::to_bits(var), src_lane, width, site));
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32,
                 const std::source_location site = std::source_location::current()) {
  return simt::detail::from_bits<T>(simt::detail::park(simt::detail::Op::shfl_up, mask, simt::detail::to_bits(var),
                                                       static_cast<int>(delta), width, site));
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32,
                   const std::source_location site = std::source_location::current()) {
  return simt::detail::from_bits<T>(simt::detail::park(simt::detail::Op::shfl_down, mask, simt::detail::to_bits(var),
                                                       static_cast<int>(delta), width, site));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32,
                  const std::source_location site = std::source_location::current()) {
  return simt::detail::from_bits<T>(
      simt::detail::park(simt::detail::Op::shfl_xor, mask, simt::detail::to_bits(var), lane_mask, width, site));
}
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              const std::source_location site = std::source_location::current()) {
  return static_cast<unsigned>(simt::detail::park(simt::detail::Op::ballot, mask, predicate != 0, 0, 32, site));
}
inline int __any_sync(unsigned mask, int predicate, const std::source_location site = std::source_location::current()) {
  return static_cast<int>(simt::detail::park(simt::detail::Op::any, mask, predicate != 0, 0, 32, site));
}
inline int __all_sync(unsigned mask, int predicate, const std::source_location site = std::source_location::current()) {
  return static_cast<int>(simt::detail::park(simt::detail::Op::all, mask, predicate != 0, 0, 32, site));
}
inline unsigned __reduce_add_sync(unsigned mask, unsigned value,
                                  const std::source_location site = std::source_location::current()) {
  return static_cast<unsigned>(simt::detail::park(simt::detail::Op::reduce_add, mask, value, 0, 32, site));
}
inline int __reduce_add_sync(unsigned mask, int value,
                             const std::source_location site = std::source_location::current()) {
  return static_cast<int>(
      simt::detail::park(simt::detail::Op::reduce_add, mask, static_cast<unsigned>(value), 0, 32, site));
}
inline unsigned __reduce_min_sync(unsigned mask, unsigned value,
                                  const std::source_location site = std::source_location::current()) {
  return static_cast<unsigned>(simt::detail::park(simt::detail::Op::reduce_min_unsigned, mask, value, 0, 32, site));
}
inline int __reduce_min_sync(unsigned mask, int value,
                             const std::source_location site = std::source_location::current()) {
  return static_cast<int>(
      simt::detail::park(simt::detail::Op::reduce_min_signed, mask, static_cast<unsigned>(value), 0, 32, site));
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned value,
                                  const std::source_location site = std::source_location::current()) {
  return static_cast<unsigned>(simt::detail::park(simt::detail::Op::reduce_max_unsigned, mask, value, 0, 32, site));
}
inline int __reduce_max_sync(unsigned mask, int value,
                             const std::source_location site = std::source_location::current()) {
  return static_cast<int>(
      simt::detail::park(simt::detail::Op::reduce_max_signed, mask, static_cast<unsigned>(value), 0, 32, site));
}
inline unsigned __reduce_and_sync(unsigned mask, unsigned value,
                                  const std::source_location site = std::source_location::current()) {
  return static_cast<unsigned>(simt::detail::park(simt::detail::Op::reduce_and, mask, value, 0, 32, site));
}
inline unsigned __reduce_or_sync(unsigned mask, unsigned value,
                                 const std::source_location site = std::source_location::current()) {
  return static_cast<unsigned>(simt::detail::park(simt::detail::Op::reduce_or, mask, value, 0, 32, site));
}
inline unsigned __reduce_xor_sync(unsigned mask, unsigned value,
                                  const std::source_location site = std::source_location::current()) {
  return static_cast<unsigned>(simt::detail::park(simt::detail::Op::reduce_xor, mask, value, 0, 32, site));
}
template <class T>
unsigned __match_any_sync(unsigned mask, T value, const std::source_location site = std::source_location::current()) {
  return static_cast<unsigned>(
      simt::detail::park(simt::detail::Op::match_any, mask, simt::detail::to_bits(value), 0, 32, site));
}

// ---- memory ordering, read-only loads ---------------------------------------------------------
// Fibers of a block never run at the same time and the emulator is sequentially consistent, so
// fences only order memory between blocks on different workers.
inline void __threadfence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
template <class T>
T __ldg(const T* pointer) {
  return *pointer;
}

// ---- atomics (std::atomic_ref: blocks on different workers really run at the same time) --------
#define SIMT_ATOMIC_RMW(name, type, expression)             \
  inline type name(type* address, type value) {             \
    std::atomic_ref<type> ref(*address);                    \
    type old = ref.load();                                  \
    while (!ref.compare_exchange_weak(old, (expression))) { \
    }                                                       \
    return old;                                             \
  }
inline int atomicAdd(int* a, int v) {
  return std::atomic_ref<int>(*a).fetch_add(v);
}
inline unsigned atomicAdd(unsigned* a, unsigned v) {
  return std::atomic_ref<unsigned>(*a).fetch_add(v);
}
inline unsigned long long atomicAdd(unsigned long long* a, unsigned long long v) {
  return std::atomic_ref<unsigned long long>(*a).fetch_add(v);
}
inline float atomicAdd(float* a, float v) {
  return std::atomic_ref<float>(*a).fetch_add(v);
}
inline double atomicAdd(double* a, double v) {
  return std::atomic_ref<double>(*a).fetch_add(v);
}
inline int atomicSub(int* a, int v) {
  return std::atomic_ref<int>(*a).fetch_sub(v);
}
inline unsigned atomicSub(unsigned* a, unsigned v) {
  return std::atomic_ref<unsigned>(*a).fetch_sub(v);
}
inline int atomicExch(int* a, int v) {
  return std::atomic_ref<int>(*a).exchange(v);
}
inline unsigned atomicExch(unsigned* a, unsigned v) {
  return std::atomic_ref<unsigned>(*a).exchange(v);
}
inline unsigned long long atomicExch(unsigned long long* a, unsigned long long v) {
  return std::atomic_ref<unsigned long long>(*a).exchange(v);
}
inline float atomicExch(float* a, float v) {
  return std::atomic_ref<float>(*a).exchange(v);
}
SIMT_ATOMIC_RMW(atomicMax, int, std::max(old, value))
SIMT_ATOMIC_RMW(atomicMax, unsigned, std::max(old, value))
SIMT_ATOMIC_RMW(atomicMax, long long, std::max(old, value))
SIMT_ATOMIC_RMW(atomicMax, unsigned long long, std::max(old, value))
SIMT_ATOMIC_RMW(atomicMin, int, std::min(old, value))
SIMT_ATOMIC_RMW(atomicMin, unsigned, std::min(old, value))
SIMT_ATOMIC_RMW(atomicMin, long long, std::min(old, value))
SIMT_ATOMIC_RMW(atomicMin, unsigned long long, std::min(old, value))
SIMT_ATOMIC_RMW(atomicInc, unsigned, (old >= value) ? 0u : old + 1)
SIMT_ATOMIC_RMW(atomicDec, unsigned, (old == 0 || old > value) ? value : old - 1)
inline int atomicAnd(int* a, int v) {
  return std::atomic_ref<int>(*a).fetch_and(v);
}
inline unsigned atomicAnd(unsigned* a, unsigned v) {
  return std::atomic_ref<unsigned>(*a).fetch_and(v);
}
inline int atomicOr(int* a, int v) {
  return std::atomic_ref<int>(*a).fetch_or(v);
}
inline unsigned atomicOr(unsigned* a, unsigned v) {
  return std::atomic_ref<unsigned>(*a).fetch_or(v);
}
inline int atomicXor(int* a, int v) {
  return std::atomic_ref<int>(*a).fetch_xor(v);
}
inline unsigned atomicXor(unsigned* a, unsigned v) {
  return std::atomic_ref<unsigned>(*a).fetch_xor(v);
}
#undef SIMT_ATOMIC_RMW
template <class T>
T simt_atomic_cas_(T* address, T compare, T value) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, value);
  return compare;  // the old value, whether or not the exchange happened
}
inline int atomicCAS(int* a, int c, int v) {
  return simt_atomic_cas_(a, c, v);
}
inline unsigned atomicCAS(unsigned* a, unsigned c, unsigned v) {
  return simt_atomic_cas_(a, c, v);
}
inline unsigned long long atomicCAS(unsigned long long* a, unsigned long long c, unsigned long long v) {
  return simt_atomic_cas_(a, c, v);
}

// ---- integer and bit intrinsics ---------------------------------------------------------------
inline int min(int a, int b) {
  return a < b ? a : b;
}
inline unsigned min(unsigned a, unsigned b) {
  return a < b ? a : b;
}
inline long long min(long long a, long long b) {
  return a < b ? a : b;
}
inline unsigned long long min(unsigned long long a, unsigned long long b) {
  return a < b ? a : b;
}
inline float min(float a, float b) {
  return std::fmin(a, b);
}
inline double min(double a, double b) {
  return std::fmin(a, b);
}
inline int max(int a, int b) {
  return a > b ? a : b;
}
inline unsigned max(unsigned a, unsigned b) {
  return a > b ? a : b;
}
inline long long max(long long a, long long b) {
  return a > b ? a : b;
}
inline unsigned long long max(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
}
inline float max(float a, float b) {
  return std::fmax(a, b);
}
inline double max(double a, double b) {
  return std::fmax(a, b);
}
inline int __popc(unsigned x) {
  return std::popcount(x);
}
inline int __popcll(unsigned long long x) {
  return std::popcount(x);
}
inline int __clz(int x) {
  return std::countl_zero(static_cast<unsigned>(x));
}
inline int __clzll(long long x) {
  return std::countl_zero(static_cast<unsigned long long>(x));
}
inline int __ffs(int x) {
  return x == 0 ? 0 : std::countr_zero(static_cast<unsigned>(x)) + 1;
}
inline int __ffsll(long long x) {
  return x == 0 ? 0 : std::countr_zero(static_cast<unsigned long long>(x)) + 1;
}
/// Four-way int8 dot product plus accumulator (signed bytes).
inline int __dp4a(int a, int b, int c) {
  int sum = c;
  for (int i = 0; i < 4; ++i) sum += static_cast<int8_t>(a >> (8 * i)) * static_cast<int8_t>(b >> (8 * i));
  return sum;
}
inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  unsigned sum = c;
  for (int i = 0; i < 4; ++i) sum += ((a >> (8 * i)) & 0xffu) * ((b >> (8 * i)) & 0xffu);
  return sum;
}
inline int __float_as_int(float x) {
  return std::bit_cast<int>(x);
}
inline unsigned __float_as_uint(float x) {
  return std::bit_cast<unsigned>(x);
}
inline float __int_as_float(int x) {
  return std::bit_cast<float>(x);
}
inline float __uint_as_float(unsigned x) {
  return std::bit_cast<float>(x);
}

// ---- float intrinsics (computed exactly: the GPU's fast versions are approximations) ----------
inline float __expf(float x) {
  return std::exp(x);
}
inline float __logf(float x) {
  return std::log(x);
}
inline float __fdividef(float a, float b) {
  return a / b;
}
inline float rsqrtf(float x) {
  return 1.0f / std::sqrt(x);
}
inline int __float2int_rn(float x) {
  return static_cast<int>(std::nearbyint(x));
}

// ---- half / bfloat16 math that the toolkit declares only for device code -----------------------
#define SIMT_HALF_UNARY(name, type, to_float, from_float, expression) \
  inline type name(type h) {                                          \
    const float x = to_float(h);                                      \
    return from_float(expression);                                    \
  }
#define SIMT_HALF_MATH(type, to_float, from_float)                         \
  SIMT_HALF_UNARY(hexp, type, to_float, from_float, std::exp(x))           \
  SIMT_HALF_UNARY(hexp2, type, to_float, from_float, std::exp2(x))         \
  SIMT_HALF_UNARY(hlog, type, to_float, from_float, std::log(x))           \
  SIMT_HALF_UNARY(hsqrt, type, to_float, from_float, std::sqrt(x))         \
  SIMT_HALF_UNARY(hrsqrt, type, to_float, from_float, 1.0f / std::sqrt(x)) \
  SIMT_HALF_UNARY(hrcp, type, to_float, from_float, 1.0f / x)              \
  inline type __hfma(type a, type b, type c) {                             \
    return from_float(std::fma(to_float(a), to_float(b), to_float(c)));    \
  }
SIMT_HALF_MATH(__half, __half2float, __float2half)
SIMT_HALF_MATH(__nv_bfloat16, __bfloat162float, __float2bfloat16)
#undef SIMT_HALF_MATH
#undef SIMT_HALF_UNARY
#define SIMT_HALF2_UNARY(name, pair, scalar_fn) \
  inline pair name(pair h) {                    \
    pair r = h;                                 \
    r.x = scalar_fn(h.x);                       \
    r.y = scalar_fn(h.y);                       \
    return r;                                   \
  }
#define SIMT_HALF2_MATH(pair)                   \
  SIMT_HALF2_UNARY(h2exp, pair, hexp)           \
  SIMT_HALF2_UNARY(h2exp2, pair, hexp2)         \
  SIMT_HALF2_UNARY(h2log, pair, hlog)           \
  SIMT_HALF2_UNARY(h2sqrt, pair, hsqrt)         \
  SIMT_HALF2_UNARY(h2rsqrt, pair, hrsqrt)       \
  SIMT_HALF2_UNARY(h2rcp, pair, hrcp)           \
  inline pair __hfma2(pair a, pair b, pair c) { \
    pair r = a;                                 \
    r.x = __hfma(a.x, b.x, c.x);                \
    r.y = __hfma(a.y, b.y, c.y);                \
    return r;                                   \
  }
SIMT_HALF2_MATH(__half2)
SIMT_HALF2_MATH(__nv_bfloat162)
#undef SIMT_HALF2_MATH
#undef SIMT_HALF2_UNARY
/// @endcond
