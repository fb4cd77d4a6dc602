// Repacking GGUF's row-major blocks into packed_matrix.h's interleaved groups of 16 outputs.
#include "kernels/quant/packed_matrix.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "common/check.h"

namespace inferlab::quant {
namespace {

// Bytes of a GGUF block before its codes: d (and Q4_1's m).
int64_t header_bytes(GgmlType type) {
  return type == GgmlType::q4_1 ? 4 : 2;
}

// Bytes of codes in a block: 32 int8 codes, or 16 bytes of nibble pairs.
int64_t code_bytes(GgmlType type) {
  return type == GgmlType::q8_0 ? 32 : 16;
}

void require_weight_type(GgmlType type) {
  require(type == GgmlType::q8_0 || type == GgmlType::q4_0 || type == GgmlType::q4_1, "type", to_string(type),
          "must be Q8_0, Q4_0 or Q4_1 (the weight formats with a quantized matmul)");
}

}  // namespace

int64_t packed_block_bytes(GgmlType type) {
  require_weight_type(type);
  return packed_scale_bytes(type) + kPackedGroup * code_bytes(type);
}

int64_t packed_scale_bytes(GgmlType type) {
  return type == GgmlType::q4_1 ? 2 * 2 * kPackedGroup : 2 * kPackedGroup;
}

void PackedMatrix::Free::operator()(uint8_t* p) const {
  std::free(p);
}

PackedMatrix::PackedMatrix(const BlockMatrix& w) : type_(w.type), out_(w.out), in_(w.in) {
  require_weight_type(w.type);
  require(w.in > 0 && w.in % 32 == 0, "w.in", w.in, "must be a positive multiple of 32 (whole blocks)");
  require(w.out >= 0, "w.out", w.out, "must be >= 0");
  const int64_t src_row = row_bytes(w.type, w.in);
  require(int64_t(w.bytes.size()) == w.out * src_row, "w.bytes.size()", w.bytes.size(),
          "must be out · row_bytes(" + std::string(to_string(w.type)) + ", in) = " + std::to_string(w.out * src_row));
  const int64_t block = packed_block_bytes(type_), scales = packed_scale_bytes(type_);
  const int64_t header = header_bytes(type_), codes = code_bytes(type_), src_block = block_bytes(type_);
  size_ = groups() * blocks() * block;
  if (size_ == 0) return;
  // 64-byte aligned (a zmm load never splits a cache line); aligned_alloc wants a multiple of 64.
  void* memory = std::aligned_alloc(64, size_t((size_ + 63) / 64 * 64));
  if (memory == nullptr) throw std::bad_alloc();
  bytes_.reset(static_cast<uint8_t*>(memory));
  // The last group's padding: zero scales, and codes that decode to 0 (Q8_0's 128 is q = 0).
  std::memset(bytes_.get(), 0, size_t(size_));
  if (type_ == GgmlType::q8_0)
    for (int64_t g = 0; g < groups(); ++g)
      for (int64_t b = 0; b < blocks(); ++b) std::memset(bytes_.get() + (g * blocks() + b) * block + scales, 0x80, size_t(block - scales));
  for (int64_t row = 0; row < out_; ++row) {
    const int64_t g = row / kPackedGroup, o = row % kPackedGroup;
    for (int64_t b = 0; b < blocks(); ++b) {
      const uint8_t* from = w.bytes.data() + row * src_row + b * src_block;
      uint8_t* to = bytes_.get() + (g * blocks() + b) * block;
      std::memcpy(to + 2 * o, from, 2);                                             // d
      if (type_ == GgmlType::q4_1) std::memcpy(to + 2 * kPackedGroup + 2 * o, from + 2, 2);  // m
      // Chunk j holds bytes 4j … 4j + 3 of every output's codes, output o at 4·o; Q8_0's as q + 128.
      for (int64_t j = 0; j < codes / 4; ++j) {
        uint8_t* chunk = to + scales + j * 4 * kPackedGroup + 4 * o;
        std::memcpy(chunk, from + header + 4 * j, 4);
        if (type_ == GgmlType::q8_0)
          for (int t = 0; t < 4; ++t) chunk[t] ^= 0x80;
      }
    }
  }
}

int PackedMatrix::code(int64_t row, int64_t value) const {
  const int64_t g = row / kPackedGroup, o = row % kPackedGroup, b = value / 32, v = value % 32;
  const uint8_t* chunks = block(g, b) + packed_scale_bytes(type_);
  if (type_ == GgmlType::q8_0) return int(chunks[(v / 4) * 4 * kPackedGroup + 4 * o + v % 4]) - 128;
  const int64_t byte = v % 16;  // values v and v + 16 share byte v of qs
  const uint8_t pair = chunks[(byte / 4) * 4 * kPackedGroup + 4 * o + byte % 4];
  return v < 16 ? pair & 15 : pair >> 4;
}

uint16_t PackedMatrix::scale_bits(int64_t row, int64_t block_index) const {
  uint16_t bits;
  std::memcpy(&bits, block(row / kPackedGroup, block_index) + 2 * (row % kPackedGroup), 2);
  return bits;
}

uint16_t PackedMatrix::min_bits(int64_t row, int64_t block_index) const {
  if (type_ != GgmlType::q4_1) return 0;
  uint16_t bits;
  std::memcpy(&bits, block(row / kPackedGroup, block_index) + 2 * kPackedGroup + 2 * (row % kPackedGroup), 2);
  return bits;
}

}  // namespace inferlab::quant
