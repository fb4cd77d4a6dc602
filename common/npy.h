#pragma once
/// @file npy.h
/// NumPy .npy files (format 1.0–3.0, C order, little-endian) for feeding real data in and out:
/// float32, float64, float16, int8, int32 and int64 arrays.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

#include "common/tensor.h"

namespace inferlab {

/// The element types .npy I/O supports.
enum class NpyDType {
  f32,  ///< '<f4'
  f64,  ///< '<f8'
  f16,  ///< '<f2'
  i8,   ///< '|i1'
  i32,  ///< '<i4'
  i64,  ///< '<i8'
};

/// Bytes per element of @p dtype.
size_t element_size(NpyDType dtype);
/// NumPy's descr string ('<f4', …) of @p dtype.
std::string_view npy_descr(NpyDType dtype);

/// A raw .npy array: its type, shape and little-endian element bytes in C order.
struct NpyArray {
  NpyDType dtype = NpyDType::f32;  ///< element type
  Shape shape;                     ///< extents, outermost first
  std::vector<std::byte> bytes;    ///< element_count(shape) · element_size(dtype) bytes
};

/// Reads @p path. Throws std::invalid_argument naming the file and the problem for a missing
/// file, a bad header, Fortran order, big-endian or unsupported dtypes, or a truncated body.
NpyArray read_npy(const std::filesystem::path& path);
/// Writes @p array to @p path (format 1.0); throws std::invalid_argument when the byte count
/// does not match the shape, std::runtime_error when the file cannot be written.
void write_npy(const std::filesystem::path& path, const NpyArray& array);

/// Reads @p path and converts any supported dtype to float32.
Tensor<float> read_npy_float(const std::filesystem::path& path);
/// Reads @p path as integers: int8, int32 and int64 arrays are converted to int64; a floating
/// point array is refused (std::invalid_argument naming the file) rather than truncated.
Tensor<int64_t> read_npy_int64(const std::filesystem::path& path);
/// Writes @p tensor as float32.
void write_npy(const std::filesystem::path& path, const Tensor<float>& tensor);
/// Writes @p tensor as float64.
void write_npy(const std::filesystem::path& path, const Tensor<double>& tensor);
/// Writes @p tensor as int8.
void write_npy(const std::filesystem::path& path, const Tensor<int8_t>& tensor);
/// Writes @p tensor as int32.
void write_npy(const std::filesystem::path& path, const Tensor<int32_t>& tensor);
/// Writes @p tensor as int64.
void write_npy(const std::filesystem::path& path, const Tensor<int64_t>& tensor);
/// Writes @p values (fp16 bits) as float16 with @p shape.
void write_npy_f16(const std::filesystem::path& path, const Shape& shape, const std::vector<uint16_t>& values);

}  // namespace inferlab
