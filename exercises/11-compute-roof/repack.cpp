// Exercise 11.1 — repack a Q8_0 matrix (see ch11.h).
#include "11-compute-roof/ch11.h"
#include "common/check.h"

namespace inferlab::student {

std::vector<uint8_t> repack_q8_0(std::span<const uint8_t> gguf_rows, int64_t out, int64_t in) {
  throw NotImplemented("repack_q8_0");  // TODO(student): delete this line once your code is written
  // TODO(student): check in, out and gguf_rows.size() (in that order, with require()); allocate
  // ⌈out / 16⌉ · (in / 32) packed blocks (scales 0, codes 0x80); for each row o and block b, copy the
  // scale to 2·(o % 16) of its packed block and the codes 4c … 4c + 3, each xor 0x80, to chunk c at
  // 4·(o % 16). (roughly 15 lines)
  (void)gguf_rows, (void)out, (void)in;
  return {};
}

}  // namespace inferlab::student
