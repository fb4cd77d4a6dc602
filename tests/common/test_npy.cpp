#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/half.h"
#include "common/npy.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("inferlab_" + std::to_string(::getpid()) + "_" + name);
}

TEST(Npy, Float32RoundTrip) {
  testing::SeededRng rng;
  const Tensor<float> tensor = rng.normal_tensor({3, 1, 7});
  const auto path = temp_file("f32.npy");
  write_npy(path, tensor);
  const Tensor<float> back = read_npy_float(path);
  EXPECT_EQ(back.shape(), tensor.shape());
  for (int64_t i = 0; i < tensor.size(); ++i) ASSERT_EQ(back[i], tensor[i]);
  const NpyArray raw = read_npy(path);
  EXPECT_EQ(raw.dtype, NpyDType::f32);
  std::filesystem::remove(path);
}

TEST(Npy, Float64Float16Int8AndOneDimensional) {
  const auto path = temp_file("mixed.npy");
  write_npy(path, Tensor<double>({5}, std::vector<double>{1.5, -2, 3, 4, 0.25}));
  EXPECT_EQ(read_npy(path).shape, (Shape{5}));
  EXPECT_EQ(read_npy_float(path)[4], 0.25f);
  write_npy(path, Tensor<int8_t>({2, 2}, std::vector<int8_t>{-128, 127, 0, -1}));
  EXPECT_EQ(read_npy(path).dtype, NpyDType::i8);
  EXPECT_EQ(read_npy_float(path)[0], -128.0f);
  write_npy_f16(path, {2}, {float_to_half_bits(0.5f), float_to_half_bits(-3.0f)});
  EXPECT_EQ(read_npy(path).dtype, NpyDType::f16);
  EXPECT_EQ(read_npy_float(path)[1], -3.0f);
  std::filesystem::remove(path);
}

TEST(Npy, HeaderIsAlignedTo64Bytes) {
  const auto path = temp_file("aligned.npy");
  write_npy(path, Tensor<float>({2, 3}, 1.0f));
  EXPECT_EQ(std::filesystem::file_size(path), 128u + 24u);
  std::filesystem::remove(path);
}

TEST(Npy, ReadsWhatNumpyWrites) {
  // Bytes of np.save(f, np.array([[1, 2]], dtype='<f4')) (format 1.0, 118-byte header).
  const auto path = temp_file("numpy.npy");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header.push_back('\n');
  std::ofstream file(path, std::ios::binary);
  file.write("\x93NUMPY\x01\x00", 8);
  file.put(static_cast<char>(header.size())).put(0);
  file << header;
  const float body[2] = {1.0f, 2.0f};
  file.write(reinterpret_cast<const char*>(body), sizeof body);
  file.close();
  const Tensor<float> t = read_npy_float(path);
  EXPECT_EQ(t.shape(), (Shape{1, 2}));
  EXPECT_EQ(t[1], 2.0f);
  std::filesystem::remove(path);
}

TEST(Npy, BadFilesGetClearErrors) {
  const auto path = temp_file("bad.npy");
  auto expect_error = [&](const std::string& contents, const std::string& fragment) {
    std::ofstream(path, std::ios::binary) << contents;
    try {
      read_npy(path);
      ADD_FAILURE() << "no exception for " << fragment;
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
  };
  expect_error("hello", "bad magic");
  std::string fortran = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n";
  expect_error(std::string("\x93NUMPY\x01\x00", 8) + char(fortran.size()) + '\0' + fortran, "Fortran order");
  std::string big = "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n";
  expect_error(std::string("\x93NUMPY\x01\x00", 8) + char(big.size()) + '\0' + big, "big-endian");
  std::string truncated = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\n";
  expect_error(std::string("\x93NUMPY\x01\x00", 8) + char(truncated.size()) + '\0' + truncated + "abcd",
               "truncated");
  EXPECT_THROW(read_npy(temp_file("does_not_exist.npy")), std::invalid_argument);
  std::filesystem::remove(path);
}

TEST(Npy, Int32AndInt64RoundTripAndReadAsIntegers) {
  const auto path = temp_file("ints.npy");
  write_npy(path, Tensor<int32_t>({3}, std::vector<int32_t>{7, -2147483647 - 1, 65537}));
  EXPECT_EQ(read_npy(path).dtype, NpyDType::i32);
  EXPECT_EQ(npy_descr(NpyDType::i32), "<i4");
  EXPECT_EQ(read_npy_int64(path)[1], -2147483648LL);
  EXPECT_EQ(read_npy_float(path)[2], 65537.0f);
  write_npy(path, Tensor<int64_t>({2, 1}, std::vector<int64_t>{int64_t(1) << 40, -5}));
  EXPECT_EQ(read_npy(path).dtype, NpyDType::i64);
  EXPECT_EQ(read_npy_int64(path).shape(), (Shape{2, 1}));
  EXPECT_EQ(read_npy_int64(path)[0], int64_t(1) << 40);
  write_npy(path, Tensor<int8_t>({1}, std::vector<int8_t>{-3}));
  EXPECT_EQ(read_npy_int64(path)[0], -3);
  write_npy(path, Tensor<float>({1}, 2.5f));
  try {
    read_npy_int64(path);
    ADD_FAILURE() << "a float32 array was read as integers";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("is not an integer type"), std::string::npos) << error.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace inferlab
