#include "common/npy.h"

#include <bit>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "common/half.h"

static_assert(std::endian::native == std::endian::little, ".npy I/O assumes a little-endian host");

namespace inferlab {

size_t element_size(NpyDType dtype) {
  switch (dtype) {
    case NpyDType::f32: return 4;
    case NpyDType::f64: return 8;
    case NpyDType::f16: return 2;
    case NpyDType::i8: return 1;
    case NpyDType::i32: return 4;
    case NpyDType::i64: return 8;
  }
  return 0;
}

std::string_view npy_descr(NpyDType dtype) {
  switch (dtype) {
    case NpyDType::f32: return "<f4";
    case NpyDType::f64: return "<f8";
    case NpyDType::f16: return "<f2";
    case NpyDType::i8: return "|i1";
    case NpyDType::i32: return "<i4";
    case NpyDType::i64: return "<i8";
  }
  return "?";
}

namespace {

[[noreturn]] void bad_file(const std::filesystem::path& path, const std::string& problem) {
  throw std::invalid_argument("npy file '" + path.string() + "': " + problem);
}

NpyDType parse_descr(const std::filesystem::path& path, const std::string& descr) {
  if (descr == "<f4") return NpyDType::f32;
  if (descr == "<f8") return NpyDType::f64;
  if (descr == "<f2") return NpyDType::f16;
  if (descr == "|i1" || descr == "<i1" || descr == "i1") return NpyDType::i8;
  if (descr == "<i4") return NpyDType::i32;
  if (descr == "<i8") return NpyDType::i64;
  if (!descr.empty() && descr[0] == '>') bad_file(path, "descr '" + descr + "' is big-endian; save it little-endian");
  bad_file(path, "dtype '" + descr + "' is not supported (float32, float64, float16, int8, int32, int64)");
}

Shape parse_shape(const std::filesystem::path& path, const std::string& text) {
  Shape shape;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const auto first = item.find_first_not_of(" \t");
    if (first == std::string::npos) continue;  // the trailing comma of a 1-tuple
    try {
      shape.push_back(std::stoll(item.substr(first)));
    } catch (const std::exception&) {
      bad_file(path, "shape entry '" + item + "' is not an integer");
    }
  }
  return shape;
}

}  // namespace

NpyArray read_npy(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) bad_file(path, "cannot be opened");
  char magic[8] = {};
  file.read(magic, 8);
  if (!file || std::memcmp(magic, "\x93NUMPY", 6) != 0) bad_file(path, "is not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  uint32_t header_len = 0;
  if (major == 1) {
    unsigned char len[2] = {};  // zeros if the file ends here (then "header is truncated")
    file.read(reinterpret_cast<char*>(len), 2);
    header_len = len[0] | (len[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char len[4] = {};
    file.read(reinterpret_cast<char*>(len), 4);
    header_len = len[0] | (len[1] << 8) | (len[2] << 16) | (static_cast<uint32_t>(len[3]) << 24);
  } else {
    bad_file(path, "format version " + std::to_string(major) + " is not supported");
  }
  std::string header(header_len, '\0');
  file.read(header.data(), header_len);
  if (!file) bad_file(path, "header is truncated");

  std::smatch match;
  if (!std::regex_search(header, match, std::regex(R"('descr'\s*:\s*'([^']*)')"))) bad_file(path, "header has no descr");
  NpyArray array;
  array.dtype = parse_descr(path, match[1]);
  if (!std::regex_search(header, match, std::regex(R"('fortran_order'\s*:\s*(True|False))")))
    bad_file(path, "header has no fortran_order");
  if (match[1] == "True") bad_file(path, "is in Fortran order; save it with np.ascontiguousarray (C order)");
  if (!std::regex_search(header, match, std::regex(R"('shape'\s*:\s*\(([^)]*)\))"))) bad_file(path, "header has no shape");
  array.shape = parse_shape(path, match[1]);

  int64_t count = 0;
  try {
    count = element_count(array.shape);
  } catch (const std::invalid_argument& error) {
    bad_file(path, std::string("shape: ") + error.what());
  }
  // Check the body's size against the file before allocating: a corrupt shape must give a clear
  // error, not a huge allocation.
  const auto body_start = file.tellg();
  file.seekg(0, std::ios::end);
  const auto body_bytes = static_cast<uint64_t>(file.tellg() - body_start);
  file.seekg(body_start);
  if (static_cast<uint64_t>(count) > body_bytes / element_size(array.dtype)) {
    bad_file(path, "body is truncated: shape " + to_string(array.shape) + " needs " + std::to_string(count) +
                       " elements of " + std::to_string(element_size(array.dtype)) + " bytes, the file has " +
                       std::to_string(body_bytes) + " bytes");
  }
  const uint64_t expected_bytes = static_cast<uint64_t>(count) * element_size(array.dtype);
  array.bytes.resize(static_cast<size_t>(expected_bytes));
  file.read(reinterpret_cast<char*>(array.bytes.data()), static_cast<std::streamsize>(array.bytes.size()));
  if (file.gcount() != static_cast<std::streamsize>(array.bytes.size())) {
    bad_file(path, "body is truncated: expected " + std::to_string(array.bytes.size()) + " bytes for shape " +
                       to_string(array.shape));
  }
  return array;
}

void write_npy(const std::filesystem::path& path, const NpyArray& array) {
  const int64_t count = element_count(array.shape);
  require(array.bytes.size() == static_cast<size_t>(count) * element_size(array.dtype), "array.bytes.size()",
          array.bytes.size(), "must match shape " + to_string(array.shape));
  std::string shape_text = "(";
  for (size_t i = 0; i < array.shape.size(); ++i) shape_text += std::to_string(array.shape[i]) + (i + 1 < array.shape.size() || array.shape.size() == 1 ? "," : "");
  shape_text += ")";
  std::string header = "{'descr': '" + std::string(npy_descr(array.dtype)) +
                       "', 'fortran_order': False, 'shape': " + shape_text + ", }";
  // Pad so that magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  require(header.size() <= 0xFFFF, "shape", to_string(array.shape), "is too long for an .npy 1.0 header");

  std::ofstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("cannot write npy file '" + path.string() + "'");
  const unsigned char preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                      static_cast<unsigned char>(header.size() & 0xFF),
                                      static_cast<unsigned char>(header.size() >> 8)};
  file.write(reinterpret_cast<const char*>(preamble), 10);
  file.write(header.data(), static_cast<std::streamsize>(header.size()));
  file.write(reinterpret_cast<const char*>(array.bytes.data()), static_cast<std::streamsize>(array.bytes.size()));
  if (!file) throw std::runtime_error("failed writing npy file '" + path.string() + "'");
}

namespace {

template <class T>
NpyArray to_array(NpyDType dtype, const Shape& shape, const T* values, size_t count) {
  NpyArray array{dtype, shape, std::vector<std::byte>(count * sizeof(T))};
  std::memcpy(array.bytes.data(), values, array.bytes.size());
  return array;
}

template <class T>
T load(const std::byte* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

}  // namespace

Tensor<float> read_npy_float(const std::filesystem::path& path) {
  const NpyArray array = read_npy(path);
  Tensor<float> tensor(array.shape);
  const std::byte* bytes = array.bytes.data();
  for (int64_t i = 0; i < tensor.size(); ++i) {
    switch (array.dtype) {
      case NpyDType::f32: tensor[i] = load<float>(bytes + 4 * i); break;
      case NpyDType::f64: tensor[i] = static_cast<float>(load<double>(bytes + 8 * i)); break;
      case NpyDType::f16: tensor[i] = half_bits_to_float(load<uint16_t>(bytes + 2 * i)); break;
      case NpyDType::i8: tensor[i] = static_cast<float>(load<int8_t>(bytes + i)); break;
      case NpyDType::i32: tensor[i] = static_cast<float>(load<int32_t>(bytes + 4 * i)); break;
      case NpyDType::i64: tensor[i] = static_cast<float>(load<int64_t>(bytes + 8 * i)); break;
    }
  }
  return tensor;
}

Tensor<int64_t> read_npy_int64(const std::filesystem::path& path) {
  const NpyArray array = read_npy(path);
  Tensor<int64_t> tensor(array.shape);
  const std::byte* bytes = array.bytes.data();
  for (int64_t i = 0; i < tensor.size(); ++i) {
    switch (array.dtype) {
      case NpyDType::i8: tensor[i] = load<int8_t>(bytes + i); break;
      case NpyDType::i32: tensor[i] = load<int32_t>(bytes + 4 * i); break;
      case NpyDType::i64: tensor[i] = load<int64_t>(bytes + 8 * i); break;
      default:
        bad_file(path, "dtype '" + std::string(npy_descr(array.dtype)) +
                           "' is not an integer type (int8, int32, int64 expected)");
    }
  }
  return tensor;
}

void write_npy(const std::filesystem::path& path, const Tensor<float>& tensor) {
  write_npy(path, to_array(NpyDType::f32, tensor.shape(), tensor.data(), size_t(tensor.size())));
}
void write_npy(const std::filesystem::path& path, const Tensor<double>& tensor) {
  write_npy(path, to_array(NpyDType::f64, tensor.shape(), tensor.data(), size_t(tensor.size())));
}
void write_npy(const std::filesystem::path& path, const Tensor<int8_t>& tensor) {
  write_npy(path, to_array(NpyDType::i8, tensor.shape(), tensor.data(), size_t(tensor.size())));
}
void write_npy(const std::filesystem::path& path, const Tensor<int32_t>& tensor) {
  write_npy(path, to_array(NpyDType::i32, tensor.shape(), tensor.data(), size_t(tensor.size())));
}
void write_npy(const std::filesystem::path& path, const Tensor<int64_t>& tensor) {
  write_npy(path, to_array(NpyDType::i64, tensor.shape(), tensor.data(), size_t(tensor.size())));
}
void write_npy_f16(const std::filesystem::path& path, const Shape& shape, const std::vector<uint16_t>& values) {
  require(static_cast<int64_t>(values.size()) == element_count(shape), "values.size()", values.size(),
          "must match shape " + to_string(shape));
  write_npy(path, to_array(NpyDType::f16, shape, values.data(), values.size()));
}

}  // namespace inferlab
