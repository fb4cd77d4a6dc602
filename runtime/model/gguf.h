#pragma once
/// @file gguf.h
/// A reader of GGUF files (ggml `docs/gguf.md`), versions 2 and 3: the header, every metadata
/// value type including arrays, the tensor infos, the alignment and the data section, which is
/// memory-mapped — a tensor's bytes are read in place, never copied to be read.
///
/// Layout (little-endian): u32 magic "GGUF", u32 version, u64 tensor_count, u64 kv_count; then
/// kv_count pairs (string key, u32 type, value), then tensor_count infos (string name, u32 n_dims
/// ≤ 4, u64 ne[n_dims], u32 ggml type, u64 offset), then padding to general.alignment (default
/// 32), then the data section; each tensor's offset is relative to it and a multiple of the
/// alignment. A string is u64 length + bytes (no NUL). ne[0] is the contiguous dimension: a
/// weight W[out × in] is stored ne = [in, out].
///
/// Every malformed file gets std::invalid_argument naming the file, the byte offset and what is
/// wrong (bad magic, an unknown version, a truncation anywhere, an unknown value or tensor type,
/// a nested array, a duplicate key or tensor name, an offset or size past the end, overlapping
/// tensors, ne[0] not a multiple of the type's block) — never a crash or an over-read.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kernels/quant/block_formats.h"

namespace inferlab::gguf {

/// A metadata value's type, numbered as in the file.
enum class ValueType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8,
  array = 9, u64 = 10, i64 = 11, f64 = 12,
};

/// "u8", "i8", … "array", "u64", "i64", "f64".
std::string_view to_string(ValueType type);

/// One metadata value. Scalars are widened into the variant (integers to int64_t or uint64_t,
/// floats to double) with their file type kept in @ref type; an array keeps its element type and
/// its elements, each a Value of that type (GGUF forbids nested arrays).
struct Value {
  ValueType type = ValueType::u8;       ///< the type in the file
  ValueType element_type = ValueType::u8;  ///< for arrays: the elements' type
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<Value>> data;
};

/// One tensor's entry: its name, shape (ne[0] contiguous), type, where its bytes are.
struct TensorInfo {
  std::string name;               ///< e.g. "blk.0.attn_q.weight"
  std::vector<int64_t> ne;        ///< 1–4 dimensions, ne[0] contiguous
  quant::GgmlType type{};         ///< the storage type
  uint64_t offset = 0;            ///< from the start of the data section
  uint64_t bytes = 0;             ///< quant::row_bytes(type, ne[0]) · ne[1] · …
  int64_t elements() const;       ///< ne[0] · ne[1] · …
};

/// An open GGUF file: the metadata and tensor infos parsed, the data mapped read-only.
class GgufFile {
 public:
  /// Memory-maps @p path and parses it. Throws std::invalid_argument naming the path when it
  /// cannot be opened or is malformed (the file comment's list).
  static GgufFile open(const std::string& path);
  /// Parses @p bytes (a whole file in memory; the result keeps its own copy) — what the fuzzer
  /// and the tests that build files in memory use. @p name appears in error messages.
  static GgufFile parse(std::span<const uint8_t> bytes, std::string name = "<memory>");

  /// The file's GGUF version (2 or 3).
  uint32_t version() const;
  /// The data section's alignment (general.alignment, default 32).
  uint64_t alignment() const;
  /// Every key in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const;
  /// The value of @p key, or nullptr.
  const Value* find(std::string_view key) const;

  /// Typed getters: each throws std::invalid_argument naming the file and @p key when the key is
  /// missing or its value has another type (integers of any width convert when the value fits).
  uint64_t get_uint(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;  ///< f32 or f64
  bool get_bool(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<double> get_float_array(std::string_view key) const;

  /// Every tensor in file order.
  const std::vector<TensorInfo>& tensors() const;
  /// The tensor named @p name, or nullptr.
  const TensorInfo* find_tensor(std::string_view name) const;
  /// The tensor named @p name; throws std::invalid_argument naming the file and @p name when
  /// there is none.
  const TensorInfo& tensor(std::string_view name) const;
  /// The bytes of @p info in the mapping (info.bytes of them), valid while this file or any
  /// copy of storage() lives.
  std::span<const uint8_t> data(const TensorInfo& info) const;
  /// Keeps the mapping alive: a weight that views tensor bytes holds this.
  std::shared_ptr<const void> storage() const;
  /// The path given to open() (or the name given to parse()).
  const std::string& path() const;

 private:
  struct State;
  std::shared_ptr<const State> state_;
};

}  // namespace inferlab::gguf
