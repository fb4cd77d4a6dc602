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
/// weight W[out × in] is stored ne = [in, out]. Versions 2 and 3 share this layout (3 added
/// big-endian files, which this reader rejects: their version reads as 0x03000000).
///
/// Every malformed file gets std::invalid_argument naming the file, the byte offset and what is
/// wrong (bad magic, an unknown version, a truncation anywhere, an unknown value or tensor type,
/// a nested array, a bool that is neither 0 nor 1, a duplicate key or tensor name, a
/// general.alignment that is not a u32 power of two, n_dims outside 1–4, a zero ne, ne[0] not a
/// multiple of the type's block, an offset that is not a multiple of the alignment, an offset or
/// size past the end, overlapping tensors) — never a crash, an over-read or an allocation sized
/// by the file before the file is known to hold that many bytes.

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
  u8 = 0,       ///< uint8
  i8 = 1,       ///< int8
  u16 = 2,      ///< uint16
  i16 = 3,      ///< int16
  u32 = 4,      ///< uint32
  i32 = 5,      ///< int32
  f32 = 6,      ///< IEEE fp32
  boolean = 7,  ///< one byte, 0 or 1
  string = 8,   ///< u64 length + bytes (no NUL)
  array = 9,    ///< u32 element type, u64 count, the elements (never arrays)
  u64 = 10,     ///< uint64
  i64 = 11,     ///< int64
  f64 = 12,     ///< IEEE fp64
};

/// "u8", "i8", … "array", "u64", "i64", "f64" ("unknown" for a number outside 0–12).
std::string_view to_string(ValueType type);

/// True for u8 … i64: the types the integer getters convert from.
bool is_integer(ValueType type);

/// One metadata value. Scalars are widened into the variant (unsigned integers to uint64_t,
/// signed ones to int64_t, floats to double) with their file type kept in @ref type; an array
/// keeps its element type and its elements, each a Value of that type (GGUF forbids nested
/// arrays).
struct Value {
  ValueType type = ValueType::u8;          ///< the type in the file
  ValueType element_type = ValueType::u8;  ///< for arrays: the elements' type; for a scalar: @ref type
  /// The value: uint64_t (u8, u16, u32, u64), int64_t (i8 … i64), double (f32, f64), bool,
  /// std::string or, for an array, its elements.
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<Value>> data;
};

/// One tensor's entry: its name, shape (ne[0] contiguous), type, where its bytes are.
struct TensorInfo {
  std::string name;          ///< e.g. "blk.0.attn_q.weight"
  std::vector<int64_t> ne;   ///< 1–4 dimensions, each > 0, ne[0] contiguous
  quant::GgmlType type{};    ///< the storage type (quant::is_supported)
  uint64_t offset = 0;       ///< from the start of the data section
  uint64_t bytes = 0;        ///< quant::row_bytes(type, ne[0]) · ne[1] · …
  int64_t elements() const;  ///< ne[0] · ne[1] · … (checked not to overflow when parsed)
};

/// An open GGUF file: the metadata and tensor infos parsed, the data mapped read-only.
class GgufFile {
 public:
  /// Memory-maps @p path read-only (POSIX mmap; the bytes are never copied) and parses it.
  /// Throws std::invalid_argument naming the path when it cannot be opened or is malformed (the
  /// file comment's list). The file must not shrink while it is mapped.
  static GgufFile open(const std::string& path);
  /// Parses @p bytes (a whole file in memory; the result keeps its own copy) — what the fuzzer
  /// and the tests that build files in memory use. @p name appears in error messages.
  static GgufFile parse(std::span<const uint8_t> bytes, std::string name = "<memory>");

  /// The file's GGUF version (2 or 3).
  uint32_t version() const;
  /// The data section's alignment (general.alignment, default 32).
  uint64_t alignment() const;
  /// Where the data section starts: the first multiple of alignment() after the tensor infos.
  uint64_t data_offset() const;
  /// Every key in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const;
  /// The value of @p key, or nullptr.
  const Value* find(std::string_view key) const;

  /// Typed getters: each throws std::invalid_argument naming the file and @p key when the key is
  /// missing or its value has another type (integers of any width convert when the value fits).
  uint64_t get_uint(std::string_view key) const;
  /// A signed integer of any width, or an unsigned one up to INT64_MAX (see get_uint()).
  int64_t get_int(std::string_view key) const;
  /// An f32 or f64 value (see get_uint()).
  double get_float(std::string_view key) const;
  /// A bool value (see get_uint()).
  bool get_bool(std::string_view key) const;
  /// A string value (see get_uint()).
  std::string get_string(std::string_view key) const;
  /// An array of strings (see get_uint()).
  std::vector<std::string> get_string_array(std::string_view key) const;
  /// An array of integers of any width, each of which must fit int64_t (see get_uint()).
  std::vector<int64_t> get_int_array(std::string_view key) const;
  /// An array of f32 or f64 (see get_uint()).
  std::vector<double> get_float_array(std::string_view key) const;

  /// Every tensor in file order.
  const std::vector<TensorInfo>& tensors() const;
  /// The tensor named @p name, or nullptr.
  const TensorInfo* find_tensor(std::string_view name) const;
  /// The tensor named @p name; throws std::invalid_argument naming the file and @p name when
  /// there is none.
  const TensorInfo& tensor(std::string_view name) const;
  /// The bytes of @p info in the mapping (info.bytes of them), valid while this file or any
  /// copy of storage() lives. Throws std::invalid_argument when @p info does not lie inside this
  /// file's data section (an info of another file).
  std::span<const uint8_t> data(const TensorInfo& info) const;
  /// Keeps the mapping alive: a weight that views tensor bytes holds this.
  std::shared_ptr<const void> storage() const;
  /// The path given to open() (or the name given to parse()).
  const std::string& path() const;

 private:
  struct State;
  explicit GgufFile(std::shared_ptr<const State> state);
  const Value& require(std::string_view key) const;
  [[noreturn]] void fail_key(std::string_view key, const std::string& what) const;
  std::shared_ptr<const State> state_;
};

}  // namespace inferlab::gguf
