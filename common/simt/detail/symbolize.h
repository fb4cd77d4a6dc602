#pragma once
/// @file symbolize.h
/// Names for the checks' reports (the emulator's own sources only): the source line of a code
/// address and the static __shared__ variable at an offset of the executable's TLS block.

#include <cstddef>
#include <cstdint>
#include <string>

/// @cond SIMT_DETAIL
namespace simt::detail {

// "decode_attention.cu:71 (in decode_kernel)" for the instruction just before the return address
// @p pc; an inlined helper shows as "vec.h:12 (in load4), inlined at decode.cu:71 (in decode_kernel)".
// Needs the kernels' line tables (-g1); without them: "decode_kernel+0x1c4" or the bare address.
std::string code_location(uintptr_t pc);

// The first of @p pcs (return addresses, innermost first; 0 ends the list) whose source line is
// the program's own — not a system header or library, not the emulator (common/simt/, its
// DeviceBuffer included) — named as code_location() names a line: "vector_sum.cu:40 (in
// vector_sum)". Without line tables, the first such function's name plus "(no line table …)";
// "" when there is neither.
std::string own_code_location(const uintptr_t* pcs, size_t count);

// A thread_local variable of the executable (a static __shared__ array, in the emulator).
struct TlsVariable {
  std::string name;  // demangled, e.g. "inferlab::sim::block_sum(float const*, float*, int)::partial"
  size_t offset = 0;  // where it starts in the TLS block
  size_t size = 0;
};
// The variable whose bytes include @p offset of the executable's TLS block; false if none.
bool tls_variable_at(size_t offset, TlsVariable& out);

// Loads line tables and symbols now (idempotent, thread-safe).
void prepare_symbols();

}  // namespace simt::detail
/// @endcond
