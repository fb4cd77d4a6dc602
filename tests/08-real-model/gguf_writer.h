#pragma once
/// @file gguf_writer.h
/// A test utility: GGUF files built in memory, written from the format's specification (ggml
/// `docs/gguf.md`; the layout is in runtime/gguf/gguf.h). Valid files by default, and every knob
/// the error tests and the fuzzer need to make them malformed: raw value types and bytes, raw
/// tensor infos with any type, shape and offset, header counts that lie, any version.
///
/// A built file also says where its parts are: a mark per key, value, tensor info and offset
/// field (so a test can assert the byte offset an error names), and every integer field with its
/// width (so the fuzzer can aim its interesting integers at lengths and counts).
///
///     GgufWriter w;                      // version 3, alignment 32
///     w.add_string("general.name", "x").add_tensor("t", GgmlType::f32, {8, 2});
///     BuiltGguf file = w.build();        // file.bytes, file.at("value:general.name")

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/quant/block_formats.h"
#include "runtime/gguf/gguf.h"

namespace inferlab::test {

/// An integer field of a built file: where it starts, its width in bytes and what it holds.
struct GgufField {
  size_t offset = 0;  ///< byte offset in the file
  int width = 0;      ///< 1, 2, 4 or 8
  std::string what;   ///< e.g. "string length", "array count", "ne", "tensor offset"
};

/// A built file: its bytes, where its parts start, its integer fields.
struct BuiltGguf {
  std::vector<uint8_t> bytes;           ///< the whole file
  std::map<std::string, size_t> marks;  ///< "key:K", "value:K", "tensor:N", "offset:N", "data:N", "data"
  std::vector<GgufField> fields;        ///< every integer field (counts, lengths, types, ne, offsets)

  /// The offset marked @p name; throws std::out_of_range when there is none.
  size_t at(const std::string& name) const {
    const auto it = marks.find(name);
    if (it == marks.end()) throw std::out_of_range("gguf_writer: no mark " + name);
    return it->second;
  }
};

/// Little-endian appenders of the format's integers and strings.
inline void put_le(std::vector<uint8_t>& out, uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out.push_back(uint8_t(value >> (8 * i)));
}
/// Appends a u32.
inline void put_u32(std::vector<uint8_t>& out, uint32_t value) {
  put_le(out, value, 4);
}
/// Appends a u64.
inline void put_u64(std::vector<uint8_t>& out, uint64_t value) {
  put_le(out, value, 8);
}
/// Appends a GGUF string: u64 length, then the bytes.
inline void put_string(std::vector<uint8_t>& out, const std::string& text) {
  put_u64(out, text.size());
  out.insert(out.end(), text.begin(), text.end());
}

/// Builds one GGUF file in memory.
class GgufWriter {
 public:
  using ValueType = gguf::ValueType;

  /// A writer of a file of @p version (2 and 3 are valid).
  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  // --- metadata -------------------------------------------------------------------------------

  /// Adds @p key with the scalar @p value stored as @p type (any numeric type or bool).
  template <class T>
  GgufWriter& add_scalar(const std::string& key, ValueType type, T value) {
    Pair p{key, uint32_t(type), {}, {}};
    put_scalar(p.value, type, value);
    pairs_.push_back(std::move(p));
    return *this;
  }
  /// Adds a u8 value.
  GgufWriter& add_u8(const std::string& key, uint8_t v) { return add_scalar(key, ValueType::u8, v); }
  /// Adds an i8 value.
  GgufWriter& add_i8(const std::string& key, int8_t v) { return add_scalar(key, ValueType::i8, v); }
  /// Adds a u16 value.
  GgufWriter& add_u16(const std::string& key, uint16_t v) { return add_scalar(key, ValueType::u16, v); }
  /// Adds an i16 value.
  GgufWriter& add_i16(const std::string& key, int16_t v) { return add_scalar(key, ValueType::i16, v); }
  /// Adds a u32 value.
  GgufWriter& add_u32(const std::string& key, uint32_t v) { return add_scalar(key, ValueType::u32, v); }
  /// Adds an i32 value.
  GgufWriter& add_i32(const std::string& key, int32_t v) { return add_scalar(key, ValueType::i32, v); }
  /// Adds a u64 value.
  GgufWriter& add_u64(const std::string& key, uint64_t v) { return add_scalar(key, ValueType::u64, v); }
  /// Adds an i64 value.
  GgufWriter& add_i64(const std::string& key, int64_t v) { return add_scalar(key, ValueType::i64, v); }
  /// Adds an f32 value.
  GgufWriter& add_f32(const std::string& key, float v) { return add_scalar(key, ValueType::f32, v); }
  /// Adds an f64 value.
  GgufWriter& add_f64(const std::string& key, double v) { return add_scalar(key, ValueType::f64, v); }
  /// Adds a bool value (one byte, 0 or 1).
  GgufWriter& add_bool(const std::string& key, bool v) { return add_scalar(key, ValueType::boolean, v); }

  /// Adds a string value.
  GgufWriter& add_string(const std::string& key, const std::string& value) {
    Pair p{key, uint32_t(ValueType::string), {}, {}};
    p.fields.push_back({0, 8, "string length"});
    put_string(p.value, value);
    pairs_.push_back(std::move(p));
    return *this;
  }

  /// Adds an array of @p element_type (numeric or bool) holding @p values.
  template <class T>
  GgufWriter& add_array(const std::string& key, ValueType element_type, const std::vector<T>& values) {
    Pair p = array_head(key, element_type, values.size());
    for (const T& v : values) put_scalar(p.value, element_type, v);
    pairs_.push_back(std::move(p));
    return *this;
  }

  /// Adds an array of strings.
  GgufWriter& add_string_array(const std::string& key, const std::vector<std::string>& values) {
    Pair p = array_head(key, ValueType::string, values.size());
    for (const std::string& v : values) {
      p.fields.push_back({p.value.size(), 8, "string length"});
      put_string(p.value, v);
    }
    pairs_.push_back(std::move(p));
    return *this;
  }

  /// Adds @p key with any type number and value bytes (malformed values: unknown types, nested
  /// arrays, bad bools, lengths that lie).
  GgufWriter& add_raw(const std::string& key, uint32_t type, std::vector<uint8_t> value) {
    pairs_.push_back({key, type, std::move(value), {}});
    return *this;
  }

  /// Adds general.alignment = @p alignment (u32) and lays the data out with it when it is a
  /// nonzero power of two.
  GgufWriter& set_alignment(uint32_t alignment) {
    add_u32("general.alignment", alignment);
    if (alignment != 0 && (alignment & (alignment - 1)) == 0) alignment_ = alignment;
    return *this;
  }

  // --- tensors --------------------------------------------------------------------------------

  /// Adds tensor @p name of @p type and shape @p ne (ne[0] contiguous) at the next aligned offset
  /// of the data section, with @p data as its bytes (empty: a deterministic filler of the right
  /// size, quant::row_bytes(type, ne[0]) · ne[1] · …).
  GgufWriter& add_tensor(const std::string& name, quant::GgmlType type, const std::vector<int64_t>& ne,
                         std::vector<uint8_t> data = {}) {
    uint64_t bytes = uint64_t(quant::row_bytes(type, ne.at(0)));
    for (size_t d = 1; d < ne.size(); ++d) bytes *= uint64_t(ne[d]);
    if (data.empty()) data = filler(bytes, tensors_.size());
    if (data.size() != bytes)
      throw std::invalid_argument("gguf_writer: tensor " + name + " needs " + std::to_string(bytes) + " bytes of data");
    Tensor t{name, uint32_t(type), {}, std::nullopt, std::move(data)};
    for (int64_t n : ne) t.ne.push_back(uint64_t(n));
    tensors_.push_back(std::move(t));
    return *this;
  }

  /// Adds a tensor info only, with any type number, shape and @p offset, and no data.
  GgufWriter& add_tensor_info(const std::string& name, uint32_t type, const std::vector<uint64_t>& ne,
                              uint64_t offset) {
    tensors_.push_back({name, type, ne, offset, {}});
    return *this;
  }

  // --- the header and the layout --------------------------------------------------------------

  /// Writes @p tensors and @p pairs as the header's counts instead of the true ones.
  GgufWriter& override_counts(std::optional<uint64_t> tensors, std::optional<uint64_t> pairs) {
    tensor_count_ = tensors;
    pair_count_ = pairs;
    return *this;
  }
  /// Writes @p magic instead of "GGUF".
  GgufWriter& set_magic(const std::string& magic) {
    magic_ = magic;
    return *this;
  }
  /// Appends @p bytes after everything else.
  GgufWriter& append(std::vector<uint8_t> bytes) {
    trailer_ = std::move(bytes);
    return *this;
  }

  /// The file. The data section starts at the first multiple of the alignment after the tensor
  /// infos (no padding when there are no tensors); each tensor added with data sits at its
  /// offset; the file ends where the last tensor's bytes end (then the appended bytes).
  BuiltGguf build() const {
    BuiltGguf f;
    std::vector<uint8_t>& out = f.bytes;
    out.insert(out.end(), magic_.begin(), magic_.end());
    f.fields.push_back({out.size(), 4, "version"});
    put_u32(out, version_);
    f.fields.push_back({out.size(), 8, "tensor count"});
    put_u64(out, tensor_count_.value_or(tensors_.size()));
    f.fields.push_back({out.size(), 8, "metadata pair count"});
    put_u64(out, pair_count_.value_or(pairs_.size()));
    for (const Pair& p : pairs_) write_pair(f, p);

    const std::vector<uint64_t> offsets = tensor_offsets();
    for (size_t i = 0; i < tensors_.size(); ++i) write_tensor_info(f, tensors_[i], offsets[i]);

    if (!tensors_.empty()) {
      while (out.size() % alignment_ != 0) out.push_back(0);
      const size_t data_start = out.size();
      f.marks["data"] = data_start;
      for (size_t i = 0; i < tensors_.size(); ++i) {
        const Tensor& t = tensors_[i];
        if (t.data.empty()) continue;
        const size_t at = data_start + size_t(offsets[i]);
        if (out.size() < at + t.data.size()) out.resize(at + t.data.size(), 0);
        std::memcpy(out.data() + at, t.data.data(), t.data.size());
        f.marks["data:" + t.name] = at;
      }
    }
    out.insert(out.end(), trailer_.begin(), trailer_.end());
    return f;
  }

  /// The bytes of build().
  std::vector<uint8_t> bytes() const { return build().bytes; }

 private:
  struct Pair {
    std::string key;
    uint32_t type;
    std::vector<uint8_t> value;     // the value's bytes
    std::vector<GgufField> fields;  // offsets relative to the value's start
  };
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> ne;
    std::optional<uint64_t> offset;  // none: the next aligned offset
    std::vector<uint8_t> data;
  };

  template <class T>
  static void put_scalar(std::vector<uint8_t>& out, ValueType type, T value) {
    switch (type) {
      case ValueType::u8:
      case ValueType::i8:
      case ValueType::boolean:
        put_le(out, uint64_t(value), 1);
        return;
      case ValueType::u16:
      case ValueType::i16:
        put_le(out, uint64_t(value), 2);
        return;
      case ValueType::u32:
      case ValueType::i32:
        put_le(out, uint64_t(value), 4);
        return;
      case ValueType::u64:
      case ValueType::i64:
        put_le(out, uint64_t(value), 8);
        return;
      case ValueType::f32: {
        uint32_t bits = 0;
        const float f = float(value);
        std::memcpy(&bits, &f, 4);
        put_u32(out, bits);
        return;
      }
      case ValueType::f64: {
        uint64_t bits = 0;
        const double d = double(value);
        std::memcpy(&bits, &d, 8);
        put_u64(out, bits);
        return;
      }
      default:
        throw std::invalid_argument("gguf_writer: put_scalar of a string or an array");
    }
  }

  static Pair array_head(const std::string& key, ValueType element_type, size_t count) {
    Pair p{key, uint32_t(ValueType::array), {}, {}};
    p.fields.push_back({0, 4, "array element type"});
    put_u32(p.value, uint32_t(element_type));
    p.fields.push_back({4, 8, "array count"});
    put_u64(p.value, count);
    return p;
  }

  // Bytes that differ per tensor and per position, so a misplaced read shows.
  static std::vector<uint8_t> filler(uint64_t bytes, size_t tensor) {
    std::vector<uint8_t> data(static_cast<size_t>(bytes));
    for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 131 + tensor * 29 + 7);
    return data;
  }

  std::vector<uint64_t> tensor_offsets() const {
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const Tensor& t : tensors_) {
      if (t.offset) {
        offsets.push_back(*t.offset);
        continue;
      }
      next = (next + alignment_ - 1) / alignment_ * alignment_;
      offsets.push_back(next);
      next += t.data.size();
    }
    return offsets;
  }

  static void write_pair(BuiltGguf& f, const Pair& p) {
    std::vector<uint8_t>& out = f.bytes;
    f.marks["key:" + p.key] = out.size();
    f.fields.push_back({out.size(), 8, "key length"});
    put_string(out, p.key);
    f.marks["type:" + p.key] = out.size();
    f.fields.push_back({out.size(), 4, "value type"});
    put_u32(out, p.type);
    f.marks["value:" + p.key] = out.size();
    for (const GgufField& field : p.fields) f.fields.push_back({out.size() + field.offset, field.width, field.what});
    out.insert(out.end(), p.value.begin(), p.value.end());
  }

  static void write_tensor_info(BuiltGguf& f, const Tensor& t, uint64_t offset) {
    std::vector<uint8_t>& out = f.bytes;
    f.marks["tensor:" + t.name] = out.size();
    f.fields.push_back({out.size(), 8, "tensor name length"});
    put_string(out, t.name);
    f.marks["n_dims:" + t.name] = out.size();
    f.fields.push_back({out.size(), 4, "n_dims"});
    put_u32(out, uint32_t(t.ne.size()));
    for (size_t d = 0; d < t.ne.size(); ++d) {
      f.marks["ne" + std::to_string(d) + ":" + t.name] = out.size();
      f.fields.push_back({out.size(), 8, "ne"});
      put_u64(out, t.ne[d]);
    }
    f.marks["ggml_type:" + t.name] = out.size();
    f.fields.push_back({out.size(), 4, "ggml type"});
    put_u32(out, t.type);
    f.marks["offset:" + t.name] = out.size();
    f.fields.push_back({out.size(), 8, "tensor offset"});
    put_u64(out, offset);
  }

  uint32_t version_;
  uint64_t alignment_ = 32;
  std::string magic_ = "GGUF";
  std::optional<uint64_t> tensor_count_, pair_count_;
  std::vector<Pair> pairs_;
  std::vector<Tensor> tensors_;
  std::vector<uint8_t> trailer_;
};

}  // namespace inferlab::test
