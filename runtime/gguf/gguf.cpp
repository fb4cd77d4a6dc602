// The GGUF reader (gguf.h): one pass over the file's bytes through a bounds-checked cursor.
// Every count the file states is checked against the bytes left before anything is sized by it,
// and every sum or product of the file's numbers is checked for overflow, so a malformed file
// can only ever produce std::invalid_argument.
#include "runtime/gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <utility>

namespace inferlab::gguf {

namespace {

constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint64_t kDefaultAlignment = 32;
constexpr std::string_view kAlignmentKey = "general.alignment";
constexpr uint32_t kLastValueType = 12;
constexpr uint32_t kMaxDims = 4;
// The smallest a metadata pair can be: an empty key (u64 length), the u32 type, a 1-byte value.
constexpr uint64_t kMinPairBytes = 8 + 4 + 1;
// The smallest a tensor info can be: an empty name, n_dims, one ne, the type, the offset.
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

std::string str(uint64_t v) {
  return std::to_string(v);
}

// @p text for an error message: printable ASCII kept, other bytes as \xNN, cut at 80 characters
// (a fuzzed key can be anything).
std::string quoted(std::string_view text) {
  constexpr size_t kMaxShown = 80;
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (text.size() > kMaxShown) out += "…";
  return out + "'";
}

bool add_overflows(uint64_t a, uint64_t b, uint64_t* sum) {
  return __builtin_add_overflow(a, b, sum);
}
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* product) {
  return __builtin_mul_overflow(a, b, product);
}

// Bytes of one scalar of @p type in the file; strings take at least their u64 length.
uint64_t min_value_bytes(ValueType type) {
  switch (type) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::boolean:
      return 1;
    case ValueType::u16:
    case ValueType::i16:
      return 2;
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::f32:
      return 4;
    case ValueType::u64:
    case ValueType::i64:
    case ValueType::f64:
    case ValueType::string:
      return 8;
    case ValueType::array:
      return 4 + 8;
  }
  return 1;
}

// Little-endian reads over the file's bytes, each checked against the bytes left. Errors name
// the file, the byte offset and the context being read (a key, a tensor, an array element).
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const std::string& file) : bytes_(bytes), file_(file) {}

  uint64_t at() const { return pos_; }
  uint64_t left() const { return bytes_.size() - pos_; }
  uint64_t size() const { return bytes_.size(); }

  /// What is being read, for error messages ("key 'general.name'", "tensor 'x'").
  void set_context(std::string context) {
    context_ = std::move(context);
    element_ = -1;
  }
  /// The array element being read (-1: none).
  void set_element(int64_t element) { element_ = element; }

  [[noreturn]] void fail(uint64_t offset, const std::string& what) const {
    std::string where = context_;
    if (element_ >= 0) where += (where.empty() ? "" : ", ") + std::string("element ") + std::to_string(element_);
    throw std::invalid_argument("GGUF file " + file_ + ": byte " + str(offset) + ": " +
                                (where.empty() ? "" : where + ": ") + what);
  }

  uint8_t u8(const char* field) { return uint8_t(little_endian(1, field)); }
  uint16_t u16(const char* field) { return uint16_t(little_endian(2, field)); }
  uint32_t u32(const char* field) { return uint32_t(little_endian(4, field)); }
  uint64_t u64(const char* field) { return little_endian(8, field); }

  /// A u64 length and that many bytes; the length is checked against the bytes left first.
  std::string string(const char* field) {
    const uint64_t length_at = pos_;
    const uint64_t length = u64(field);
    if (length > left())
      fail(length_at, std::string(field) + ": string length " + str(length) + " is more than the " + str(left()) +
                          " bytes left in the file");
    const uint8_t* p = take(length, field);
    return std::string(reinterpret_cast<const char*>(p), size_t(length));
  }

  /// @p n bytes at the cursor, or an error naming the truncation.
  const uint8_t* take(uint64_t n, const char* field) {
    if (n > left())
      fail(pos_, std::string("truncated: ") + field + " needs " + str(n) + " bytes, " + str(left()) + " are left");
    const uint8_t* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }

 private:
  uint64_t little_endian(int n, const char* field) {
    const uint8_t* p = take(uint64_t(n), field);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(p[i]) << (8 * i);
    return v;
  }

  std::span<const uint8_t> bytes_;
  const std::string& file_;
  uint64_t pos_ = 0;
  std::string context_;
  int64_t element_ = -1;
};

Value scalar(ValueType type, decltype(Value::data) data) {
  Value v;
  v.type = type;
  v.element_type = type;
  v.data = std::move(data);
  return v;
}

// One value of a non-array @p type at the cursor.
Value read_scalar(Cursor& c, ValueType type) {
  switch (type) {
    case ValueType::u8:
      return scalar(type, uint64_t{c.u8("the u8 value")});
    case ValueType::i8:
      return scalar(type, int64_t{int8_t(c.u8("the i8 value"))});
    case ValueType::u16:
      return scalar(type, uint64_t{c.u16("the u16 value")});
    case ValueType::i16:
      return scalar(type, int64_t{int16_t(c.u16("the i16 value"))});
    case ValueType::u32:
      return scalar(type, uint64_t{c.u32("the u32 value")});
    case ValueType::i32:
      return scalar(type, int64_t{int32_t(c.u32("the i32 value"))});
    case ValueType::u64:
      return scalar(type, uint64_t{c.u64("the u64 value")});
    case ValueType::i64:
      return scalar(type, int64_t(c.u64("the i64 value")));
    case ValueType::f32:
      return scalar(type, double(std::bit_cast<float>(c.u32("the f32 value"))));
    case ValueType::f64:
      return scalar(type, std::bit_cast<double>(c.u64("the f64 value")));
    case ValueType::string:
      return scalar(type, c.string("the string value"));
    case ValueType::boolean: {
      const uint64_t at = c.at();
      const uint8_t b = c.u8("the bool value");
      if (b > 1) c.fail(at, "a bool is " + str(b) + ", neither 0 nor 1");
      return scalar(type, decltype(Value::data)(std::in_place_type<bool>, b == 1));
    }
    case ValueType::array:
      break;
  }
  c.fail(c.at(), "internal: read_scalar of an array");
}

// A u32 value type at the cursor, checked to be one of 0–12.
ValueType read_value_type(Cursor& c, const char* field) {
  const uint64_t at = c.at();
  const uint32_t raw = c.u32(field);
  if (raw > kLastValueType) c.fail(at, "unknown value type " + str(raw) + " (GGUF's are 0–12)");
  return ValueType(raw);
}

// An array's element type, count and elements at the cursor.
Value read_array(Cursor& c) {
  const uint64_t type_at = c.at();
  const ValueType element_type = read_value_type(c, "the array's element type (u32)");
  if (element_type == ValueType::array) c.fail(type_at, "an array of arrays: GGUF forbids nested arrays");
  const uint64_t count_at = c.at();
  const uint64_t count = c.u64("the array's count (u64)");
  const uint64_t each = min_value_bytes(element_type);
  if (count > c.left() / each)
    c.fail(count_at, "array count " + str(count) + " of " + std::string(to_string(element_type)) + " (at least " +
                         str(each) + " bytes each) is more than the " + str(c.left()) + " bytes left can hold");
  std::vector<Value> elements;
  elements.reserve(size_t(count));
  for (uint64_t i = 0; i < count; ++i) {
    c.set_element(int64_t(i));
    elements.push_back(read_scalar(c, element_type));
  }
  c.set_element(-1);
  Value v;
  v.type = ValueType::array;
  v.element_type = element_type;
  v.data = std::move(elements);
  return v;
}

Value read_value(Cursor& c, ValueType type) {
  return type == ValueType::array ? read_array(c) : read_scalar(c, type);
}

// "i32", "array of string": how a value's type reads in a message.
std::string type_name(const Value& v) {
  if (v.type == ValueType::array) return "array of " + std::string(to_string(v.element_type));
  return std::string(to_string(v.type));
}

// The value as an int64_t when it is an integer that fits.
std::optional<int64_t> as_int64(const Value& v) {
  if (!is_integer(v.type)) return std::nullopt;
  if (const auto* s = std::get_if<int64_t>(&v.data)) return *s;
  const uint64_t u = std::get<uint64_t>(v.data);
  if (u > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return int64_t(u);
}

// "-5", "18446744073709551615", "3.5", "true", "'text'": a scalar for a message.
std::string shown(const Value& v) {
  if (const auto* u = std::get_if<uint64_t>(&v.data)) return str(*u);
  if (const auto* s = std::get_if<int64_t>(&v.data)) return std::to_string(*s);
  if (const auto* d = std::get_if<double>(&v.data)) return std::to_string(*d);
  if (const auto* b = std::get_if<bool>(&v.data)) return *b ? "true" : "false";
  if (const auto* t = std::get_if<std::string>(&v.data)) return quoted(*t);
  return "an array of " + str(std::get<std::vector<Value>>(v.data).size());
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::string_view to_string(ValueType type) {
  constexpr std::string_view kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                         "bool", "string", "array", "u64", "i64", "f64"};
  const auto raw = static_cast<uint32_t>(type);
  return raw <= kLastValueType ? kNames[raw] : "unknown";
}

bool is_integer(ValueType type) {
  switch (type) {
    case ValueType::u8:
    case ValueType::i8:
    case ValueType::u16:
    case ValueType::i16:
    case ValueType::u32:
    case ValueType::i32:
    case ValueType::u64:
    case ValueType::i64:
      return true;
    default:
      return false;
  }
}

int64_t TensorInfo::elements() const {
  return std::accumulate(ne.begin(), ne.end(), int64_t{1}, [](int64_t a, int64_t b) { return a * b; });
}

namespace {

// What a parse finds (GgufFile::State is this; the parse functions below fill it).
struct Contents {
  std::string path;
  std::shared_ptr<const void> storage;  // the mapping, or parse()'s copy
  std::span<const uint8_t> bytes;       // the whole file
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<std::pair<std::string, Value>> metadata;
  std::map<std::string, size_t, std::less<>> key_index;
  std::vector<TensorInfo> tensors;
  std::map<std::string, size_t, std::less<>> tensor_index;
};

// Where each part of the file was read, for errors found after it was read.
struct Offsets {
  std::vector<uint64_t> pair;           // each metadata pair's start
  std::vector<uint64_t> value;          // each metadata value's start
  std::vector<uint64_t> tensor_info;    // each tensor info's start
  std::vector<uint64_t> tensor_offset;  // each tensor's offset field
};

struct Counts {
  uint64_t tensors = 0;
  uint64_t pairs = 0;
};

Counts read_header(Cursor& c, Contents& s) {
  const uint8_t* magic = c.take(4, "the magic \"GGUF\"");
  if (!std::equal(magic, magic + 4, kMagic))
    c.fail(0, "bad magic " + quoted(std::string_view(reinterpret_cast<const char*>(magic), 4)) +
                  ", expected 'GGUF': not a GGUF file");
  s.version = c.u32("the version (u32)");
  if (s.version == 1) c.fail(4, "GGUF version 1 (32-bit counts) is not supported: only versions 2 and 3");
  if (s.version != 2 && s.version != 3) {
    const bool swapped = s.version == 0x02000000u || s.version == 0x03000000u;
    c.fail(4, "unknown GGUF version " + str(s.version) + " (only 2 and 3 are read" +
                  (swapped ? "; this is a big-endian file)" : ")"));
  }
  Counts n;
  n.tensors = c.u64("the tensor count (u64)");
  n.pairs = c.u64("the metadata pair count (u64)");
  if (n.tensors > c.left() / kMinTensorInfoBytes)
    c.fail(8, "tensor count " + str(n.tensors) + " is more than the " + str(c.left()) + " bytes left can hold (" +
                  str(kMinTensorInfoBytes) + " bytes at least a tensor info)");
  const uint64_t left_for_pairs = c.left() - n.tensors * kMinTensorInfoBytes;
  if (n.pairs > left_for_pairs / kMinPairBytes)
    c.fail(16, "metadata pair count " + str(n.pairs) + " is more than the " + str(left_for_pairs) +
                   " bytes left can hold (" + str(kMinPairBytes) + " bytes at least a pair)");
  return n;
}

void read_metadata(Cursor& c, uint64_t pairs, Contents& s, Offsets& at) {
  s.metadata.reserve(size_t(pairs));
  for (uint64_t i = 0; i < pairs; ++i) {
    at.pair.push_back(c.at());
    c.set_context("metadata pair " + str(i));
    std::string key = c.string("the key");
    if (auto it = s.key_index.find(key); it != s.key_index.end())
      c.fail(at.pair.back(), "duplicate key " + quoted(key) + " (first at byte " + str(at.pair[it->second]) + ")");
    c.set_context("key " + quoted(key));
    const ValueType type = read_value_type(c, "the value type (u32)");
    at.value.push_back(c.at());
    Value value = read_value(c, type);
    s.key_index.emplace(key, s.metadata.size());
    s.metadata.emplace_back(std::move(key), std::move(value));
  }
}

// general.alignment: a u32, a nonzero power of two; 32 when absent.
void read_alignment(Cursor& c, Contents& s, const Offsets& at) {
  const auto it = s.key_index.find(kAlignmentKey);
  if (it == s.key_index.end()) return;
  const Value& v = s.metadata[it->second].second;
  const uint64_t value_at = at.value[it->second];
  c.set_context("key " + quoted(kAlignmentKey));
  if (v.type != ValueType::u32) c.fail(value_at, "is " + type_name(v) + "; it must be u32");
  const uint64_t alignment = std::get<uint64_t>(v.data);
  if (!std::has_single_bit(alignment)) c.fail(value_at, str(alignment) + " is not a nonzero power of two");
  s.alignment = alignment;
}

TensorInfo read_tensor_info(Cursor& c, Contents& s, Offsets& at) {
  TensorInfo t;
  const uint64_t info_at = at.tensor_info.back();
  t.name = c.string("the tensor name");
  if (auto it = s.tensor_index.find(t.name); it != s.tensor_index.end())
    c.fail(info_at,
           "duplicate tensor name " + quoted(t.name) + " (first at byte " + str(at.tensor_info[it->second]) + ")");
  c.set_context("tensor " + quoted(t.name));

  const uint64_t n_dims_at = c.at();
  const uint32_t n_dims = c.u32("n_dims (u32)");
  if (n_dims < 1 || n_dims > kMaxDims) c.fail(n_dims_at, "n_dims = " + str(n_dims) + ", expected 1 to 4");
  std::vector<uint64_t> ne_at;
  for (uint32_t d = 0; d < n_dims; ++d) {
    ne_at.push_back(c.at());
    const uint64_t ne = c.u64("ne (u64)");
    const std::string which = "ne[" + str(d) + "] = " + str(ne);
    if (ne == 0) c.fail(ne_at.back(), which + ": every dimension must be > 0");
    if (ne > uint64_t(std::numeric_limits<int64_t>::max())) c.fail(ne_at.back(), which + " does not fit int64");
    t.ne.push_back(int64_t(ne));
  }

  const uint64_t type_at = c.at();
  t.type = quant::GgmlType(c.u32("the ggml type (u32)"));
  if (!quant::is_supported(t.type))
    c.fail(type_at, "ggml type " + str(uint32_t(t.type)) +
                        " is not one the lab reads (F32 0, F16 1, Q4_0 2, Q4_1 3, Q8_0 8, Q8_1 9, BF16 30)");
  const auto block_values = uint64_t(quant::block_values(t.type));
  if (uint64_t(t.ne[0]) % block_values != 0)
    c.fail(ne_at[0], "ne[0] = " + str(uint64_t(t.ne[0])) + " is not a multiple of " +
                         std::string(quant::to_string(t.type)) + "'s block of " + str(block_values) + " values");

  // Elements and bytes: ne[0] / block · block_bytes · ne[1] · …, each product checked.
  uint64_t elements = uint64_t(t.ne[0]);
  uint64_t bytes = uint64_t(t.ne[0]) / block_values * uint64_t(quant::block_bytes(t.type));
  for (uint32_t d = 1; d < n_dims; ++d) {
    if (mul_overflows(elements, uint64_t(t.ne[d]), &elements) ||
        elements > uint64_t(std::numeric_limits<int64_t>::max()) || mul_overflows(bytes, uint64_t(t.ne[d]), &bytes))
      c.fail(ne_at[d], "the product of ne up to ne[" + str(d) + "] overflows 64 bits");
  }
  t.bytes = bytes;

  at.tensor_offset.push_back(c.at());
  t.offset = c.u64("the data offset (u64)");
  if (t.offset % s.alignment != 0)
    c.fail(at.tensor_offset.back(),
           "data offset " + str(t.offset) + " is not a multiple of the alignment " + str(s.alignment));
  return t;
}

void read_tensor_infos(Cursor& c, uint64_t count, Contents& s, Offsets& at) {
  s.tensors.reserve(size_t(count));
  for (uint64_t i = 0; i < count; ++i) {
    at.tensor_info.push_back(c.at());
    c.set_context("tensor info " + str(i));
    TensorInfo t = read_tensor_info(c, s, at);
    s.tensor_index.emplace(t.name, s.tensors.size());
    s.tensors.push_back(std::move(t));
  }
}

// "[a, b)": a tensor's bytes in the file, for messages.
std::string range(uint64_t data_offset, const TensorInfo& t) {
  return "[" + str(data_offset + t.offset) + ", " + str(data_offset + t.offset + t.bytes) + ")";
}

// The data section: where it starts, every tensor inside the file, no two overlapping.
void check_data_section(Cursor& c, Contents& s, const Offsets& at) {
  const uint64_t infos_end = c.at();
  uint64_t padded = 0;
  if (add_overflows(infos_end, s.alignment - 1, &padded))
    c.fail(infos_end, "the data section's start overflows 64 bits");
  s.data_offset = padded / s.alignment * s.alignment;

  for (size_t i = 0; i < s.tensors.size(); ++i) {
    const TensorInfo& t = s.tensors[i];
    c.set_context("tensor " + quoted(t.name));
    uint64_t start = 0;
    uint64_t end = 0;
    if (add_overflows(s.data_offset, t.offset, &start) || add_overflows(start, t.bytes, &end))
      c.fail(at.tensor_offset[i], "data offset " + str(t.offset) + " + " + str(t.bytes) + " bytes overflows 64 bits");
    if (end > c.size())
      c.fail(at.tensor_offset[i], "its " + str(t.bytes) + " bytes at " + range(s.data_offset, t) +
                                      " run past the end of the file (" + str(c.size()) + " bytes)");
  }

  std::vector<size_t> by_offset(s.tensors.size());
  std::iota(by_offset.begin(), by_offset.end(), size_t{0});
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [&](size_t a, size_t b) { return s.tensors[a].offset < s.tensors[b].offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const TensorInfo& before = s.tensors[by_offset[k - 1]];
    const TensorInfo& t = s.tensors[by_offset[k]];
    if (t.offset < before.offset + before.bytes) {  // no overflow: both end inside the file
      c.set_context("tensor " + quoted(t.name));
      c.fail(at.tensor_offset[by_offset[k]], "its bytes " + range(s.data_offset, t) + " overlap those of tensor " +
                                                 quoted(before.name) + " at " + range(s.data_offset, before));
    }
  }
}

void parse_state(Contents& s) {
  Cursor c(s.bytes, s.path);
  Offsets at;
  const Counts n = read_header(c, s);
  read_metadata(c, n.pairs, s, at);
  read_alignment(c, s, at);
  read_tensor_infos(c, n.tensors, s, at);
  check_data_section(c, s, at);
}

[[noreturn]] void fail_open(const std::string& path, const std::string& what, int error) {
  throw std::invalid_argument("GGUF file " + path + ": " + what + ": " + std::strerror(error));
}

// @p path mapped read-only (an empty file: no mapping, no bytes).
std::pair<std::shared_ptr<const void>, std::span<const uint8_t>> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_open(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    fail_open(path, "cannot stat", error);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::invalid_argument("GGUF file " + path + ": not a regular file");
  }
  const auto size = size_t(st.st_size);
  if (size == 0) {
    ::close(fd);
    return {};
  }
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int error = errno;
  ::close(fd);  // the mapping keeps the file
  if (addr == MAP_FAILED) fail_open(path, "cannot mmap " + str(size) + " bytes", error);
  std::shared_ptr<const void> mapping(addr, [size](void* p) { ::munmap(p, size); });
  return {std::move(mapping), std::span<const uint8_t>(static_cast<const uint8_t*>(addr), size)};
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct GgufFile::State : Contents {};

GgufFile::GgufFile(std::shared_ptr<const State> state) : state_(std::move(state)) {}

GgufFile GgufFile::open(const std::string& path) {
  auto state = std::make_shared<State>();
  state->path = path;
  std::tie(state->storage, state->bytes) = map_file(path);
  parse_state(*state);
  return GgufFile(std::move(state));
}

GgufFile GgufFile::parse(std::span<const uint8_t> bytes, std::string name) {
  auto copy = std::make_shared<const std::vector<uint8_t>>(bytes.begin(), bytes.end());
  auto state = std::make_shared<State>();
  state->path = std::move(name);
  state->bytes = std::span<const uint8_t>(copy->data(), copy->size());
  state->storage = std::move(copy);
  parse_state(*state);
  return GgufFile(std::move(state));
}

uint32_t GgufFile::version() const {
  return state_->version;
}
uint64_t GgufFile::alignment() const {
  return state_->alignment;
}
uint64_t GgufFile::data_offset() const {
  return state_->data_offset;
}
const std::vector<std::pair<std::string, Value>>& GgufFile::metadata() const {
  return state_->metadata;
}
const std::vector<TensorInfo>& GgufFile::tensors() const {
  return state_->tensors;
}
std::shared_ptr<const void> GgufFile::storage() const {
  return state_->storage;
}
const std::string& GgufFile::path() const {
  return state_->path;
}

const Value* GgufFile::find(std::string_view key) const {
  const auto it = state_->key_index.find(key);
  return it == state_->key_index.end() ? nullptr : &state_->metadata[it->second].second;
}

void GgufFile::fail_key(std::string_view key, const std::string& what) const {
  throw std::invalid_argument("GGUF file " + state_->path + ": key " + quoted(key) + " " + what);
}

const Value& GgufFile::require(std::string_view key) const {
  if (const Value* v = find(key)) return *v;
  fail_key(key, "is missing");
}

uint64_t GgufFile::get_uint(std::string_view key) const {
  const Value& v = require(key);
  if (!is_integer(v.type)) fail_key(key, "is " + type_name(v) + ", not an integer");
  if (const auto* u = std::get_if<uint64_t>(&v.data)) return *u;
  const int64_t s = std::get<int64_t>(v.data);
  if (s < 0) fail_key(key, "is " + type_name(v) + " " + std::to_string(s) + ", which does not fit an unsigned integer");
  return uint64_t(s);
}

int64_t GgufFile::get_int(std::string_view key) const {
  const Value& v = require(key);
  if (!is_integer(v.type)) fail_key(key, "is " + type_name(v) + ", not an integer");
  const std::optional<int64_t> s = as_int64(v);
  if (!s) fail_key(key, "is " + type_name(v) + " " + shown(v) + ", which does not fit int64");
  return *s;
}

double GgufFile::get_float(std::string_view key) const {
  const Value& v = require(key);
  if (v.type != ValueType::f32 && v.type != ValueType::f64) fail_key(key, "is " + type_name(v) + ", not f32 or f64");
  return std::get<double>(v.data);
}

bool GgufFile::get_bool(std::string_view key) const {
  const Value& v = require(key);
  if (v.type != ValueType::boolean) fail_key(key, "is " + type_name(v) + ", not bool");
  return std::get<bool>(v.data);
}

std::string GgufFile::get_string(std::string_view key) const {
  const Value& v = require(key);
  if (v.type != ValueType::string) fail_key(key, "is " + type_name(v) + ", not string");
  return std::get<std::string>(v.data);
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const Value& v = require(key);
  if (v.type != ValueType::array || v.element_type != ValueType::string)
    fail_key(key, "is " + type_name(v) + ", not an array of string");
  std::vector<std::string> out;
  for (const Value& e : std::get<std::vector<Value>>(v.data)) out.push_back(std::get<std::string>(e.data));
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const Value& v = require(key);
  if (v.type != ValueType::array || !is_integer(v.element_type))
    fail_key(key, "is " + type_name(v) + ", not an array of integers");
  const auto& elements = std::get<std::vector<Value>>(v.data);
  std::vector<int64_t> out;
  out.reserve(elements.size());
  for (const Value& e : elements) {
    const std::optional<int64_t> s = as_int64(e);
    if (!s) fail_key(key, "element " + str(out.size()) + " = " + shown(e) + " does not fit int64");
    out.push_back(*s);
  }
  return out;
}

std::vector<double> GgufFile::get_float_array(std::string_view key) const {
  const Value& v = require(key);
  if (v.type != ValueType::array || (v.element_type != ValueType::f32 && v.element_type != ValueType::f64))
    fail_key(key, "is " + type_name(v) + ", not an array of f32 or f64");
  std::vector<double> out;
  for (const Value& e : std::get<std::vector<Value>>(v.data)) out.push_back(std::get<double>(e.data));
  return out;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = state_->tensor_index.find(name);
  return it == state_->tensor_index.end() ? nullptr : &state_->tensors[it->second];
}

const TensorInfo& GgufFile::tensor(std::string_view name) const {
  if (const TensorInfo* t = find_tensor(name)) return *t;
  throw std::invalid_argument("GGUF file " + state_->path + ": no tensor named " + quoted(name));
}

std::span<const uint8_t> GgufFile::data(const TensorInfo& info) const {
  const uint64_t size = state_->bytes.size();
  const uint64_t section = state_->data_offset <= size ? size - state_->data_offset : 0;
  if (info.offset > section || info.bytes > section - info.offset)
    throw std::invalid_argument("GGUF file " + state_->path + ": tensor " + quoted(info.name) + "'s " +
                                str(info.bytes) + " bytes at data offset " + str(info.offset) +
                                " are not inside its data section (" + str(section) + " bytes)");
  return state_->bytes.subspan(size_t(state_->data_offset + info.offset), size_t(info.bytes));
}

}  // namespace inferlab::gguf
