#pragma once
// The first lines of every file that cuda-run compiles (cuda_translate.py writes
// `#include "cuda_run_prelude.h"` before `#line 1 "FILE.cu"`): what nvcc gives a .cu file
// implicitly — the CUDA runtime and device built-ins (here: the SIMT emulator's) and printf —
// plus the accessor that translated `extern __shared__` declarations use and the launch of
// template kernels whose arguments choose the specialization.

#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include "simt/simt.h"

namespace inferlab_cuda_run {
/// The running block's dynamic shared memory as a `T*` (what `extern __shared__ T name[]` names).
template <class T>
inline T* dynamic_shared() {
  return reinterpret_cast<T*>(::simt::detail::dynamic_shared_memory());
}
}  // namespace inferlab_cuda_run

namespace inferlab_cuda_run {
/// A type carried as a value (launch_deduced's resolver takes the function-pointer type to try).
template <class T>
struct type_tag {
  using type = T;
};

/// @cond CUDA_RUN_DETAIL
namespace detail {
// Bit i set: argument i is a pointer (at most 8 are tried both ways, else exact types only).
template <class... A>
constexpr unsigned pointer_mask() {
  unsigned mask = 0, i = 0;
  ((mask |= std::is_pointer_v<A> ? 1u << i : 0u, ++i), ...);
  return std::popcount(mask) <= 8 ? mask : 0u;
}
// void(*)(A...) with the pointers named by Mask made pointers to const.
template <unsigned Mask, class Sequence, class... A>
struct signature;
template <unsigned Mask, size_t... I, class... A>
struct signature<Mask, std::index_sequence<I...>, A...> {
  using type = void (*)(std::conditional_t<((Mask >> I) & 1u) != 0,
                                           std::add_pointer_t<std::add_const_t<std::remove_pointer_t<A>>>, A>...);
};
// The kernel's specialization whose parameters are the arguments' types, up to const on
// pointees (`const T* in` called with a T*), or nullptr when there is none.
template <unsigned All, unsigned Mask, class Resolve, class... A>
auto find_kernel(Resolve resolve) {
  using Signature = typename signature<Mask, std::index_sequence_for<A...>, A...>::type;
  if constexpr (std::is_invocable_v<Resolve, type_tag<Signature>>) {
    return resolve(type_tag<Signature>{});
  } else if constexpr (Mask == All) {
    return nullptr;
  } else {
    return find_kernel<All, ((Mask - All) & All), Resolve, A...>(resolve);  // the next subset of All
  }
}
// What runs when no specialization matches the argument types exactly: calls the kernel with
// them (the emulator names this function in its reports).
template <class Call, class... Params>
void deduced_kernel(Params... values) {
  Call{}(values...);
}
}  // namespace detail
/// @endcond

/// `kernel<<<grid, block, shared_bytes, stream>>>(args...)` for a template (or overloaded) kernel
/// named without its template arguments, so that the arguments choose the specialization. The
/// translation passes two lambdas: @p call calls the kernel with the arguments, @p resolve
/// converts its name to a given function-pointer type. When a specialization takes the (decayed)
/// argument types, up to const on pointees, the emulator gets that function itself (its name in
/// reports, its cudaFuncSetAttribute limits); otherwise a trampoline that calls it.
template <class Call, class Resolve, class... Args>
cudaError_t launch_deduced(Call, Resolve resolve, ::simt::GridArg grid, dim3 block, size_t shared_bytes,
                           cudaStream_t stream, Args&&... args) {
  constexpr unsigned pointers = detail::pointer_mask<std::decay_t<Args>...>();
  auto kernel = detail::find_kernel<pointers, 0u, Resolve, std::decay_t<Args>...>(resolve);
  if constexpr (!std::is_same_v<decltype(kernel), std::nullptr_t>) {
    return ::simt::launch(kernel, grid, block, shared_bytes, stream, std::forward<Args>(args)...);
  } else {
    static_assert(std::is_empty_v<Call>, "the kernel-calling lambda captures nothing");
    return ::simt::launch(&detail::deduced_kernel<Call, std::decay_t<Args>...>, grid, block, shared_bytes, stream,
                          std::forward<Args>(args)...);
  }
}
}  // namespace inferlab_cuda_run
