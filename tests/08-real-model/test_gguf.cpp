// The GGUF reader (runtime/gguf/gguf.h): files built in memory by gguf_writer.h — versions 2 and
// 3, every value type and arrays of each, alignments 32 / 64 / 1 and bad ones, tensors of every
// supported type, every malformation with the byte offset and key or tensor its error names, every
// truncation of valid files, the getters' conversions and errors, open()'s mapping — and the real
// model (SmolLM2-135M-Instruct Q4_1) against PyPI's gguf.GGUFReader: every key and value, every
// tensor's name, type, ne, offset and the sha256 of its bytes, and the facts of real-model.md.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/gguf/gguf.h"
#include "tests/08-real-model/gguf_writer.h"

namespace inferlab {
namespace {

using gguf::GgufFile;
using gguf::TensorInfo;
using gguf::Value;
using gguf::ValueType;
using quant::GgmlType;
using test::BuiltGguf;
using test::GgufWriter;

constexpr const char* kName = "fixture.gguf";

GgufFile parse(const std::vector<uint8_t>& bytes) {
  return GgufFile::parse(bytes, kName);
}

// The message of the std::invalid_argument that @p f throws ("" and a failure when none).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

// The parse error of @p bytes, checked to name the file and the byte offset @p at.
std::string parse_error(const std::vector<uint8_t>& bytes, size_t at) {
  const std::string message = error_of([&] { parse(bytes); });
  EXPECT_NE(message.find(kName), std::string::npos) << message;
  EXPECT_NE(message.find("byte " + std::to_string(at) + ":"), std::string::npos)
      << "expected byte " << at << " in: " << message;
  return message;
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

std::vector<uint8_t> le64(uint64_t v) {
  std::vector<uint8_t> out;
  test::put_u64(out, v);
  return out;
}

template <class T>
T as(const Value& v) {
  return std::get<T>(v.data);
}

const std::vector<Value>& elements(const Value& v) {
  return std::get<std::vector<Value>>(v.data);
}

// --- valid files ----------------------------------------------------------------------------------

TEST(GgufRead, HeaderOnlyFileOfEachVersion) {
  for (uint32_t version : {2u, 3u}) {
    const GgufFile f = parse(GgufWriter(version).bytes());
    EXPECT_EQ(f.version(), version);
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_TRUE(f.metadata().empty());
    EXPECT_TRUE(f.tensors().empty());
    EXPECT_EQ(f.path(), kName);
  }
}

// One file with every value type, written as version 2 and 3: both read the same.
GgufWriter every_scalar(uint32_t version) {
  GgufWriter w(version);
  w.add_u8("u8", 255)
      .add_i8("i8", -128)
      .add_u16("u16", 65535)
      .add_i16("i16", -32768)
      .add_u32("u32", 4294967295u)
      .add_i32("i32", std::numeric_limits<int32_t>::min())
      .add_f32("f32", 1.5f)
      .add_bool("true", true)
      .add_bool("false", false)
      .add_string("string", "SmolLM2 \xc4\xa0 ok")
      .add_string("empty", "")
      .add_u64("u64", std::numeric_limits<uint64_t>::max())
      .add_i64("i64", std::numeric_limits<int64_t>::min())
      .add_f64("f64", -2.25e300);
  return w;
}

TEST(GgufRead, EveryScalarTypeInVersions2And3) {
  for (uint32_t version : {2u, 3u}) {
    const GgufFile f = parse(every_scalar(version).bytes());
    ASSERT_EQ(f.metadata().size(), 14u);
    EXPECT_EQ(f.metadata()[0].first, "u8");  // file order
    EXPECT_EQ(f.metadata()[13].first, "f64");
    const auto check_type = [&](const char* key, ValueType type) {
      ASSERT_NE(f.find(key), nullptr) << key;
      EXPECT_EQ(f.find(key)->type, type) << key;
    };
    check_type("u8", ValueType::u8);
    check_type("i8", ValueType::i8);
    check_type("u16", ValueType::u16);
    check_type("i16", ValueType::i16);
    check_type("u32", ValueType::u32);
    check_type("i32", ValueType::i32);
    check_type("f32", ValueType::f32);
    check_type("true", ValueType::boolean);
    check_type("string", ValueType::string);
    check_type("u64", ValueType::u64);
    check_type("i64", ValueType::i64);
    check_type("f64", ValueType::f64);
    EXPECT_EQ(as<uint64_t>(*f.find("u8")), 255u);
    EXPECT_EQ(as<int64_t>(*f.find("i8")), -128);
    EXPECT_EQ(as<uint64_t>(*f.find("u16")), 65535u);
    EXPECT_EQ(as<int64_t>(*f.find("i16")), -32768);
    EXPECT_EQ(as<uint64_t>(*f.find("u32")), 4294967295u);
    EXPECT_EQ(as<int64_t>(*f.find("i32")), std::numeric_limits<int32_t>::min());
    EXPECT_EQ(as<double>(*f.find("f32")), 1.5);
    EXPECT_TRUE(as<bool>(*f.find("true")));
    EXPECT_FALSE(as<bool>(*f.find("false")));
    EXPECT_EQ(as<std::string>(*f.find("string")), "SmolLM2 \xc4\xa0 ok");
    EXPECT_EQ(as<std::string>(*f.find("empty")), "");
    EXPECT_EQ(as<uint64_t>(*f.find("u64")), std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(as<int64_t>(*f.find("i64")), std::numeric_limits<int64_t>::min());
    EXPECT_EQ(as<double>(*f.find("f64")), -2.25e300);
    EXPECT_EQ(f.find("missing"), nullptr);
  }
}

TEST(GgufRead, ArraysOfEveryElementType) {
  GgufWriter w;
  w.add_array("u8", ValueType::u8, std::vector<int>{0, 7, 255})
      .add_array("i8", ValueType::i8, std::vector<int>{-1, 127})
      .add_array("u16", ValueType::u16, std::vector<int>{65535})
      .add_array("i16", ValueType::i16, std::vector<int>{-2, 3})
      .add_array("u32", ValueType::u32, std::vector<uint32_t>{1, 4294967295u})
      .add_array("i32", ValueType::i32, std::vector<int>{-5, 0, 5})
      .add_array("f32", ValueType::f32, std::vector<float>{0.25f, -1e-5f})
      .add_array("bool", ValueType::boolean, std::vector<int>{1, 0, 1})
      .add_string_array("string", {"a", "", "<|im_end|>"})
      .add_array("u64", ValueType::u64, std::vector<uint64_t>{std::numeric_limits<uint64_t>::max()})
      .add_array("i64", ValueType::i64, std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 9})
      .add_array("f64", ValueType::f64, std::vector<double>{1e300, -0.5})
      .add_array("empty", ValueType::i32, std::vector<int>{});
  const GgufFile f = parse(w.bytes());
  const auto array = [&](const char* key, ValueType element_type, size_t count) -> const std::vector<Value>& {
    const Value* v = f.find(key);
    EXPECT_NE(v, nullptr) << key;
    EXPECT_EQ(v->type, ValueType::array) << key;
    EXPECT_EQ(v->element_type, element_type) << key;
    EXPECT_EQ(elements(*v).size(), count) << key;
    for (const Value& e : elements(*v)) EXPECT_EQ(e.type, element_type) << key;
    return elements(*v);
  };
  EXPECT_EQ(as<uint64_t>(array("u8", ValueType::u8, 3)[2]), 255u);
  EXPECT_EQ(as<int64_t>(array("i8", ValueType::i8, 2)[0]), -1);
  EXPECT_EQ(as<uint64_t>(array("u16", ValueType::u16, 1)[0]), 65535u);
  EXPECT_EQ(as<int64_t>(array("i16", ValueType::i16, 2)[0]), -2);
  EXPECT_EQ(as<uint64_t>(array("u32", ValueType::u32, 2)[1]), 4294967295u);
  EXPECT_EQ(as<int64_t>(array("i32", ValueType::i32, 3)[0]), -5);
  EXPECT_EQ(as<double>(array("f32", ValueType::f32, 2)[1]), double(-1e-5f));
  EXPECT_EQ(as<bool>(array("bool", ValueType::boolean, 3)[2]), true);
  EXPECT_EQ(as<std::string>(array("string", ValueType::string, 3)[2]), "<|im_end|>");
  EXPECT_EQ(as<uint64_t>(array("u64", ValueType::u64, 1)[0]), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(as<int64_t>(array("i64", ValueType::i64, 2)[0]), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(as<double>(array("f64", ValueType::f64, 2)[0]), 1e300);
  array("empty", ValueType::i32, 0);

  EXPECT_EQ(f.get_string_array("string"), (std::vector<std::string>{"a", "", "<|im_end|>"}));
  EXPECT_EQ(f.get_int_array("i32"), (std::vector<int64_t>{-5, 0, 5}));
  EXPECT_EQ(f.get_int_array("u8"), (std::vector<int64_t>{0, 7, 255}));
  EXPECT_EQ(f.get_int_array("empty"), std::vector<int64_t>{});
  EXPECT_EQ(f.get_float_array("f64"), (std::vector<double>{1e300, -0.5}));
  EXPECT_EQ(f.get_float_array("f32"), (std::vector<double>{0.25, double(-1e-5f)}));
}

TEST(GgufRead, TypeNames) {
  EXPECT_EQ(gguf::to_string(ValueType::u8), "u8");
  EXPECT_EQ(gguf::to_string(ValueType::boolean), "bool");
  EXPECT_EQ(gguf::to_string(ValueType::array), "array");
  EXPECT_EQ(gguf::to_string(ValueType::f64), "f64");
  EXPECT_EQ(gguf::to_string(ValueType(13)), "unknown");
  EXPECT_TRUE(gguf::is_integer(ValueType::i64));
  EXPECT_FALSE(gguf::is_integer(ValueType::boolean));
  EXPECT_FALSE(gguf::is_integer(ValueType::f32));
}

// --- getters --------------------------------------------------------------------------------------

TEST(GgufGetters, IntegersOfAnyWidthConvertWhenTheyFit) {
  const GgufFile f = parse(every_scalar(3).bytes());
  EXPECT_EQ(f.get_uint("u8"), 255u);
  EXPECT_EQ(f.get_uint("u16"), 65535u);
  EXPECT_EQ(f.get_uint("u32"), 4294967295u);
  EXPECT_EQ(f.get_uint("u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.get_int("u32"), 4294967295);
  EXPECT_EQ(f.get_int("i8"), -128);
  EXPECT_EQ(f.get_int("i16"), -32768);
  EXPECT_EQ(f.get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.get_float("f32"), 1.5);
  EXPECT_EQ(f.get_float("f64"), -2.25e300);
  EXPECT_TRUE(f.get_bool("true"));
  EXPECT_FALSE(f.get_bool("false"));
  EXPECT_EQ(f.get_string("string"), "SmolLM2 \xc4\xa0 ok");

  GgufWriter w;
  w.add_i32("positive", 7).add_i64("big", std::numeric_limits<int64_t>::max());
  const GgufFile g = parse(w.bytes());
  EXPECT_EQ(g.get_uint("positive"), 7u);
  EXPECT_EQ(g.get_uint("big"), uint64_t(std::numeric_limits<int64_t>::max()));
}

TEST(GgufGetters, ErrorsNameTheFileTheKeyAndTheProblem) {
  GgufWriter w = every_scalar(3);
  w.add_array("u64s", ValueType::u64, std::vector<uint64_t>{1, std::numeric_limits<uint64_t>::max()})
      .add_array("i32s", ValueType::i32, std::vector<int>{1});
  const GgufFile f = parse(w.bytes());
  const auto check = [&](const std::function<void()>& get, const char* key, const char* what) {
    const std::string message = error_of(get);
    EXPECT_CONTAINS(message, kName);
    EXPECT_CONTAINS(message, std::string("'") + key + "'");
    EXPECT_CONTAINS(message, what);
  };
  check([&] { f.get_uint("nope"); }, "nope", "missing");
  check([&] { f.get_int("nope"); }, "nope", "missing");
  check([&] { f.get_string("nope"); }, "nope", "missing");
  check([&] { f.get_uint("string"); }, "string", "is string, not an integer");
  check([&] { f.get_uint("i8"); }, "i8", "-128");                   // negative: no unsigned value
  check([&] { f.get_int("u64"); }, "u64", "18446744073709551615");  // past INT64_MAX
  check([&] { f.get_int("f32"); }, "f32", "not an integer");
  check([&] { f.get_uint("true"); }, "true", "not an integer");  // a bool is no integer
  check([&] { f.get_float("u32"); }, "u32", "not f32 or f64");
  check([&] { f.get_bool("u8"); }, "u8", "not bool");
  check([&] { f.get_string("u8"); }, "u8", "not string");
  check([&] { f.get_string_array("string"); }, "string", "not an array of string");
  check([&] { f.get_string_array("i32s"); }, "i32s", "array of i32");
  check([&] { f.get_int_array("u64s"); }, "u64s", "element 1");
  check([&] { f.get_int_array("string"); }, "string", "not an array of integers");
  check([&] { f.get_float_array("i32s"); }, "i32s", "not an array of f32 or f64");
}

// --- alignment and tensors ------------------------------------------------------------------------

// Every supported type, with 1 to 4 dimensions.
GgufWriter every_tensor_type(uint32_t version = 3) {
  GgufWriter w(version);
  w.add_string("general.architecture", "llama")
      .add_tensor("f32", GgmlType::f32, {3})
      .add_tensor("f16", GgmlType::f16, {5, 2})
      .add_tensor("bf16", GgmlType::bf16, {2, 3, 2})
      .add_tensor("q4_0", GgmlType::q4_0, {64, 2, 1, 2})
      .add_tensor("q4_1", GgmlType::q4_1, {32, 3})
      .add_tensor("q8_0", GgmlType::q8_0, {96})
      .add_tensor("q8_1", GgmlType::q8_1, {32, 2});
  return w;
}

struct ExpectedTensor {
  const char* name;
  GgmlType type;
  std::vector<int64_t> ne;
  uint64_t bytes;
};

const std::vector<ExpectedTensor> kEveryType = {
    {"f32", GgmlType::f32, {3}, 12},           {"f16", GgmlType::f16, {5, 2}, 20},
    {"bf16", GgmlType::bf16, {2, 3, 2}, 24},   {"q4_0", GgmlType::q4_0, {64, 2, 1, 2}, 2 * 18 * 4},
    {"q4_1", GgmlType::q4_1, {32, 3}, 3 * 20}, {"q8_0", GgmlType::q8_0, {96}, 3 * 34},
    {"q8_1", GgmlType::q8_1, {32, 2}, 2 * 36},
};

void expect_every_type(const GgufFile& f, const BuiltGguf& built, uint64_t alignment) {
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset(), built.at("data"));
  EXPECT_EQ(f.data_offset() % alignment, 0u);
  ASSERT_EQ(f.tensors().size(), kEveryType.size());
  for (size_t i = 0; i < kEveryType.size(); ++i) {
    const ExpectedTensor& e = kEveryType[i];
    const TensorInfo& t = f.tensors()[i];
    EXPECT_EQ(t.name, e.name);
    EXPECT_EQ(t.type, e.type) << e.name;
    EXPECT_EQ(t.ne, e.ne) << e.name;
    EXPECT_EQ(t.bytes, e.bytes) << e.name;
    EXPECT_EQ(t.offset % alignment, 0u) << e.name;
    int64_t elements = 1;
    for (int64_t n : e.ne) elements *= n;
    EXPECT_EQ(t.elements(), elements) << e.name;
    EXPECT_EQ(&f.tensor(e.name), &t);
    EXPECT_EQ(f.find_tensor(e.name), &t);
    const std::span<const uint8_t> data = f.data(t);
    const size_t at = built.at(std::string("data:") + e.name);
    ASSERT_EQ(data.size(), e.bytes);
    EXPECT_EQ(f.data_offset() + t.offset, at) << e.name;
    EXPECT_TRUE(std::equal(data.begin(), data.end(), built.bytes.begin() + ptrdiff_t(at))) << e.name;
  }
}

TEST(GgufTensors, EverySupportedTypeAtTheDefaultAlignment) {
  for (uint32_t version : {2u, 3u}) {
    const BuiltGguf built = every_tensor_type(version).build();
    expect_every_type(parse(built.bytes), built, 32);
  }
}

TEST(GgufTensors, Alignments64And1) {
  for (uint32_t alignment : {64u, 1u, 4096u}) {
    GgufWriter w = every_tensor_type();
    w.set_alignment(alignment);
    const BuiltGguf built = w.build();
    expect_every_type(parse(built.bytes), built, alignment);
  }
}

TEST(GgufTensors, AnyOrderOfOffsetsAndGapsAreFine) {
  // Infos need not be in data order: b's bytes come first, a 32-byte gap, then a's.
  GgufWriter w;
  w.add_tensor_info("a", uint32_t(GgmlType::f32), {8}, 64).add_tensor_info("b", uint32_t(GgmlType::f32), {8}, 0);
  BuiltGguf built = w.build();
  const size_t data_start = (built.bytes.size() + 31) / 32 * 32;
  built.bytes.resize(data_start + 96, 0xab);
  const GgufFile f = parse(built.bytes);
  EXPECT_EQ(f.data_offset(), data_start);
  EXPECT_EQ(f.tensor("a").offset, 64u);
  EXPECT_EQ(f.data(f.tensor("a")).data(), f.data(f.tensor("b")).data() + 64);
}

TEST(GgufTensors, MissingTensorAndForeignInfo) {
  const GgufFile f = parse(every_tensor_type().bytes());
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  const std::string message = error_of([&] { f.tensor("output.weight"); });
  EXPECT_CONTAINS(message, kName);
  EXPECT_CONTAINS(message, "'output.weight'");
  TensorInfo foreign = f.tensor("q8_0");
  foreign.offset = 1 << 20;
  EXPECT_CONTAINS(error_of([&] { f.data(foreign); }), "not inside");
}

// --- malformed files: each error names the byte and the key or tensor -----------------------------

TEST(GgufErrors, BadMagic) {
  GgufWriter w;
  w.set_magic("GGML");
  EXPECT_CONTAINS(parse_error(w.bytes(), 0), "magic");
}

TEST(GgufErrors, UnsupportedVersions) {
  EXPECT_CONTAINS(parse_error(GgufWriter(1).bytes(), 4), "version 1");
  EXPECT_CONTAINS(parse_error(GgufWriter(4).bytes(), 4), "version 4");
  EXPECT_CONTAINS(parse_error(GgufWriter(0x03000000u).bytes(), 4), "big-endian");
}

TEST(GgufErrors, CountsLargerThanTheFileCanHold) {
  GgufWriter tensors;
  tensors.override_counts(uint64_t(1) << 60, std::nullopt);
  EXPECT_CONTAINS(parse_error(tensors.bytes(), 8), "tensor count 1152921504606846976");
  GgufWriter pairs;
  pairs.add_u8("a", 1).override_counts(std::nullopt, std::numeric_limits<uint64_t>::max());
  EXPECT_CONTAINS(parse_error(pairs.bytes(), 16), "metadata pair count 18446744073709551615");
  GgufWriter one_more;  // a count off by one: a truncation at the end of the file
  one_more.add_u8("a", 1).add_u8("b", 2).override_counts(std::nullopt, 3);
  const std::vector<uint8_t> bytes = one_more.bytes();
  // 12 more bytes pass the count's check (3 pairs of 13 bytes at least); the third pair, an empty
  // key of type u8, then finds no byte for its value.
  std::vector<uint8_t> padded = bytes;
  padded.resize(bytes.size() + 12, 0);
  EXPECT_CONTAINS(parse_error(padded, bytes.size() + 12), "truncated");
}

TEST(GgufErrors, StringLengthsPastTheEnd) {
  GgufWriter key;
  key.add_raw("", 0, {});  // placeholder pair, then patch its key length
  BuiltGguf built = key.build();
  const std::vector<uint8_t> huge = le64(uint64_t(1) << 60);
  std::copy(huge.begin(), huge.end(), built.bytes.begin() + ptrdiff_t(built.at("key:")));
  built.bytes.resize(built.bytes.size() + 32, 0);
  EXPECT_CONTAINS(parse_error(built.bytes, built.at("key:")), "string length 1152921504606846976");

  GgufWriter value;
  value.add_string("general.name", "x");
  built = value.build();
  std::copy(huge.begin(), huge.end(), built.bytes.begin() + ptrdiff_t(built.at("value:general.name")));
  const std::string message = parse_error(built.bytes, built.at("value:general.name"));
  EXPECT_CONTAINS(message, "'general.name'");
  EXPECT_CONTAINS(message, "string length 1152921504606846976");

  GgufWriter element;
  element.add_string_array("tokenizer.ggml.tokens", {"a", "b", "c"});
  built = element.build();
  const size_t third = built.at("value:tokenizer.ggml.tokens") + 12 + 9 + 9;
  std::copy(huge.begin(), huge.end(), built.bytes.begin() + ptrdiff_t(third));
  const std::string element_message = parse_error(built.bytes, third);
  EXPECT_CONTAINS(element_message, "'tokenizer.ggml.tokens', element 2");
}

TEST(GgufErrors, ArrayCountsPastTheEnd) {
  for (ValueType element_type : {ValueType::u8, ValueType::i64, ValueType::string}) {
    std::vector<uint8_t> value;
    test::put_u32(value, uint32_t(element_type));
    test::put_u64(value, uint64_t(1) << 60);
    GgufWriter raw;
    raw.add_raw("tokenizer.ggml.scores", uint32_t(ValueType::array), value);
    const BuiltGguf built = raw.build();
    const std::string message = parse_error(built.bytes, built.at("value:tokenizer.ggml.scores") + 4);
    EXPECT_CONTAINS(message, "'tokenizer.ggml.scores'");
    EXPECT_CONTAINS(message, "array count 1152921504606846976");
  }
}

TEST(GgufErrors, UnknownValueTypesNestedArraysAndBadBools) {
  GgufWriter unknown;
  unknown.add_u8("ok", 1).add_raw("weird", 13, {0});
  BuiltGguf built = unknown.build();
  std::string message = parse_error(built.bytes, built.at("type:weird"));
  EXPECT_CONTAINS(message, "'weird'");
  EXPECT_CONTAINS(message, "unknown value type 13");

  std::vector<uint8_t> value;
  test::put_u32(value, 99);
  test::put_u64(value, 0);
  GgufWriter unknown_element;
  unknown_element.add_raw("arr", uint32_t(ValueType::array), value);
  built = unknown_element.build();
  EXPECT_CONTAINS(parse_error(built.bytes, built.at("value:arr")), "unknown value type 99");

  value.clear();
  test::put_u32(value, uint32_t(ValueType::array));
  test::put_u64(value, 1);
  test::put_u32(value, uint32_t(ValueType::u8));
  test::put_u64(value, 0);
  GgufWriter nested;
  nested.add_raw("nested", uint32_t(ValueType::array), value);
  built = nested.build();
  message = parse_error(built.bytes, built.at("value:nested"));
  EXPECT_CONTAINS(message, "'nested'");
  EXPECT_CONTAINS(message, "nested arrays");

  GgufWriter bad_bool;
  bad_bool.add_raw("flag", uint32_t(ValueType::boolean), {2});
  built = bad_bool.build();
  message = parse_error(built.bytes, built.at("value:flag"));
  EXPECT_CONTAINS(message, "'flag'");
  EXPECT_CONTAINS(message, "neither 0 nor 1");

  GgufWriter bad_bool_element;
  bad_bool_element.add_array("flags", ValueType::boolean, std::vector<int>{0, 1, 7});
  built = bad_bool_element.build();
  message = parse_error(built.bytes, built.at("value:flags") + 12 + 2);
  EXPECT_CONTAINS(message, "'flags', element 2");
}

TEST(GgufErrors, DuplicateKey) {
  GgufWriter w;
  w.add_u32("llama.block_count", 30).add_string("general.name", "x").add_u32("llama.block_count", 31);
  const BuiltGguf built = w.build();
  // The second pair's start: the writer's marks keep the last of two equal keys.
  const std::string message = parse_error(built.bytes, built.at("key:llama.block_count"));
  EXPECT_CONTAINS(message, "duplicate key 'llama.block_count'");
  EXPECT_CONTAINS(message, "first at byte 24");
}

TEST(GgufErrors, BadAlignments) {
  for (uint32_t alignment : {0u, 3u, 48u, 0x80000001u}) {
    GgufWriter w;
    w.add_string("general.name", "x").set_alignment(alignment).add_tensor("t", GgmlType::f32, {4});
    const BuiltGguf built = w.build();
    const std::string message = parse_error(built.bytes, built.at("value:general.alignment"));
    EXPECT_CONTAINS(message, "'general.alignment'");
    EXPECT_CONTAINS(message, std::to_string(alignment) + " is not a nonzero power of two");
  }
  GgufWriter wrong_type;
  wrong_type.add_u64("general.alignment", 64);
  const BuiltGguf built = wrong_type.build();
  const std::string message = parse_error(built.bytes, built.at("value:general.alignment"));
  EXPECT_CONTAINS(message, "is u64; it must be u32");
}

// A file with tensor "t" described by the raw fields given, and 4 KiB of data after the infos.
BuiltGguf one_tensor(uint32_t type, std::vector<uint64_t> ne, uint64_t offset) {
  GgufWriter w;
  w.add_tensor_info("blk.0.attn_q.weight", type, ne, offset);
  BuiltGguf built = w.build();
  built.bytes.resize((built.bytes.size() + 31) / 32 * 32 + 4096, 0);
  return built;
}

std::string tensor_error(const BuiltGguf& built, const std::string& mark) {
  const std::string message = parse_error(built.bytes, built.at(mark + ":blk.0.attn_q.weight"));
  EXPECT_CONTAINS(message, "tensor 'blk.0.attn_q.weight'");
  return message;
}

TEST(GgufErrors, TensorInfoFields) {
  const auto f32 = uint32_t(GgmlType::f32);
  const auto q4_1 = uint32_t(GgmlType::q4_1);
  EXPECT_NO_THROW(parse(one_tensor(f32, {8, 4}, 0).bytes));  // the fixture itself is valid
  EXPECT_CONTAINS(tensor_error(one_tensor(f32, {}, 0), "n_dims"), "n_dims = 0");
  EXPECT_CONTAINS(tensor_error(one_tensor(f32, {1, 1, 1, 1, 1}, 0), "n_dims"), "n_dims = 5");
  EXPECT_CONTAINS(tensor_error(one_tensor(f32, {8, 0}, 0), "ne1"), "ne[1] = 0");
  EXPECT_CONTAINS(tensor_error(one_tensor(f32, {uint64_t(1) << 63}, 0), "ne0"), "does not fit int64");
  EXPECT_CONTAINS(tensor_error(one_tensor(6, {32}, 0), "ggml_type"), "ggml type 6");  // Q5_0: not read
  EXPECT_CONTAINS(tensor_error(one_tensor(1000, {32}, 0), "ggml_type"), "ggml type 1000");
  EXPECT_CONTAINS(tensor_error(one_tensor(q4_1, {48, 2}, 0), "ne0"), "ne[0] = 48 is not a multiple of Q4_1");
  EXPECT_CONTAINS(tensor_error(one_tensor(f32, {8}, 16), "offset"), "not a multiple of the alignment 32");
  EXPECT_CONTAINS(tensor_error(one_tensor(f32, {8, 129}, 0), "offset"), "run past the end");
  EXPECT_CONTAINS(tensor_error(one_tensor(f32, {8}, 4096), "offset"), "run past the end");
  // Overflows: the byte count (2^62 elements · 4 bytes) and offset + bytes.
  EXPECT_CONTAINS(tensor_error(one_tensor(f32, {uint64_t(1) << 31, uint64_t(1) << 31}, 0), "ne1"), "overflows");
  EXPECT_CONTAINS(tensor_error(one_tensor(f32, {uint64_t(1) << 32, uint64_t(1) << 32}, 0), "ne1"), "overflows");
  EXPECT_CONTAINS(tensor_error(one_tensor(f32, {8}, ~uint64_t{31}), "offset"), "overflows");
}

TEST(GgufErrors, OverlappingTensors) {
  GgufWriter w;
  w.add_tensor_info("a", uint32_t(GgmlType::f32), {16}, 0)
      .add_tensor_info("b", uint32_t(GgmlType::f32), {8}, 32)  // a is [0, 64): b starts inside it
      .add_tensor_info("c", uint32_t(GgmlType::f32), {8}, 128);
  BuiltGguf built = w.build();
  built.bytes.resize((built.bytes.size() + 31) / 32 * 32 + 4096, 0);
  const std::string message = parse_error(built.bytes, built.at("offset:b"));
  EXPECT_CONTAINS(message, "tensor 'b'");
  EXPECT_CONTAINS(message, "overlap those of tensor 'a'");

  GgufWriter same;
  same.add_tensor_info("x", uint32_t(GgmlType::f32), {8}, 0).add_tensor_info("y", uint32_t(GgmlType::f32), {8}, 0);
  built = same.build();
  built.bytes.resize(built.bytes.size() + 4096, 0);
  EXPECT_CONTAINS(parse_error(built.bytes, built.at("offset:y")), "overlap those of tensor 'x'");
}

TEST(GgufErrors, DuplicateTensorName) {
  GgufWriter w;
  w.add_tensor("blk.0.ffn_up.weight", GgmlType::f32, {8}).add_tensor("blk.0.ffn_up.weight", GgmlType::f32, {8});
  const BuiltGguf built = w.build();
  const std::string message = parse_error(built.bytes, built.at("tensor:blk.0.ffn_up.weight"));
  EXPECT_CONTAINS(message, "duplicate tensor name 'blk.0.ffn_up.weight'");
}

TEST(GgufErrors, UnprintableNamesAreEscaped) {
  GgufWriter w;
  w.add_u8(std::string("k\x01\xff", 3), 1).add_u8(std::string("k\x01\xff", 3), 2);
  const BuiltGguf built = w.build();
  EXPECT_CONTAINS(parse_error(built.bytes, built.at(std::string("key:k\x01\xff", 7))), "'k\\x01\\xff'");
}

// --- every truncation -----------------------------------------------------------------------------

TEST(GgufErrors, EveryTruncationOfValidFilesThrows) {
  GgufWriter arrays;
  arrays.add_string_array("s", {"ab", "", "c"})
      .add_array("i", ValueType::i16, std::vector<int>{1, -1})
      .add_array("f", ValueType::f64, std::vector<double>{0.5})
      .add_tensor("w", GgmlType::q4_1, {32, 2});
  GgufWriter aligned = every_tensor_type(2);
  aligned.set_alignment(64);
  GgufWriter byte_aligned = every_tensor_type(3);
  byte_aligned.set_alignment(1);
  size_t prefixes = 0;
  for (const GgufWriter* w : {&arrays, &aligned, &byte_aligned}) {
    const std::vector<uint8_t> whole = w->bytes();
    ASSERT_NO_THROW(parse(whole));
    for (size_t length = 0; length < whole.size(); ++length, ++prefixes) {
      const std::vector<uint8_t> prefix(whole.begin(), whole.begin() + ptrdiff_t(length));
      try {
        parse(prefix);
        ADD_FAILURE() << "a prefix of " << length << " of " << whole.size() << " bytes parsed";
      } catch (const std::invalid_argument& e) {
        EXPECT_CONTAINS(e.what(), "byte ");
      }
    }
  }
  // A metadata-only file ends at its last value: every shorter prefix is cut inside it.
  const std::vector<uint8_t> scalars = every_scalar(2).bytes();
  for (size_t length = 0; length < scalars.size(); ++length, ++prefixes)
    EXPECT_THROW(parse(std::vector<uint8_t>(scalars.begin(), scalars.begin() + ptrdiff_t(length))),
                 std::invalid_argument)
        << length;
  EXPECT_GT(prefixes, 1000u);
}

// --- open(): the mapping --------------------------------------------------------------------------

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("inferlab_gguf_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(GgufOpen, MapsTheFileAndKeepsTheMappingAlive) {
  const BuiltGguf built = every_tensor_type().build();
  const std::string path = temp_path("every_type.gguf");
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(built.bytes.data()), std::streamsize(built.bytes.size()));
  }
  std::shared_ptr<const void> storage;
  std::span<const uint8_t> q8;
  {
    const GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.path(), path);
    expect_every_type(f, built, 32);
    storage = f.storage();
    q8 = f.data(f.tensor("q8_0"));
  }
  std::filesystem::remove(path);  // the mapping outlives the name and the GgufFile
  const size_t at = built.at("data:q8_0");
  EXPECT_TRUE(std::equal(q8.begin(), q8.end(), built.bytes.begin() + ptrdiff_t(at)));
}

TEST(GgufOpen, ErrorsNameThePath) {
  const std::string missing = temp_path("missing.gguf");
  EXPECT_CONTAINS(error_of([&] { GgufFile::open(missing); }), missing);
  const std::string dir = temp_path("dir");
  std::filesystem::create_directories(dir);
  EXPECT_CONTAINS(error_of([&] { GgufFile::open(dir); }), "not a regular file");
  std::filesystem::remove(dir);
  const std::string empty = temp_path("empty.gguf");
  std::ofstream(empty).close();
  const std::string message = error_of([&] { GgufFile::open(empty); });
  EXPECT_CONTAINS(message, empty);
  EXPECT_CONTAINS(message, "byte 0");
  std::filesystem::remove(empty);
}

// --- the real model against PyPI's gguf.GGUFReader ------------------------------------------------

// SHA-256 (FIPS 180-4), for the tensor bytes Python hashes with hashlib.
class Sha256 {
 public:
  static std::string hex(std::span<const uint8_t> data) {
    Sha256 s;
    const size_t whole = data.size() / 64 * 64;
    for (size_t i = 0; i < whole; i += 64) s.block(data.data() + i);
    std::array<uint8_t, 128> tail{};
    const size_t rest = data.size() - whole;
    std::copy(data.begin() + ptrdiff_t(whole), data.end(), tail.begin());
    tail[rest] = 0x80;
    const size_t padded = rest + 9 <= 64 ? 64 : 128;
    const uint64_t bits = uint64_t(data.size()) * 8;
    for (int i = 0; i < 8; ++i) tail[padded - 1 - size_t(i)] = uint8_t(bits >> (8 * i));
    for (size_t i = 0; i < padded; i += 64) s.block(tail.data() + i);
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (uint32_t word : s.h_)
      for (int shift = 28; shift >= 0; shift -= 4) out += kHex[(word >> shift) & 15];
    return out;
  }

 private:
  void block(const uint8_t* p) {
    static constexpr uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 | uint32_t(p[4 * i + 2]) << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = std::rotr(w[i - 15], 7) ^ std::rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = std::rotr(w[i - 2], 17) ^ std::rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t t1 =
          h + (std::rotr(e, 6) ^ std::rotr(e, 11) ^ std::rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      const uint32_t t2 = (std::rotr(a, 2) ^ std::rotr(a, 13) ^ std::rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    const uint32_t add[8] = {a, b, c, d, e, f, g, h};
    for (int i = 0; i < 8; ++i) h_[i] += add[i];
  }

  uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
};

std::span<const uint8_t> text(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(GgufRealModel, Sha256KnownAnswers) {
  EXPECT_EQ(Sha256::hex(text("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256::hex(text("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256::hex(text("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  EXPECT_EQ(Sha256::hex(text(million)), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// The real model, or a failure that says how to install it.
GgufFile real_model() {
  const std::string path = INFERLAB_SMOLLM2_GGUF;
  if (!std::filesystem::exists(path))
    throw std::runtime_error("the model " + path + " is missing: run ./inferlab setup (it installs it)");
  return GgufFile::open(path);
}

#define OPEN_REAL_MODEL(file)            \
  std::optional<GgufFile> file##_holder; \
  try {                                  \
    file##_holder = real_model();        \
  } catch (const std::exception& e) {    \
    FAIL() << e.what();                  \
  }                                      \
  const GgufFile& file = *file##_holder

std::string hex_of(const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

// A scalar as gguf_dump.py encodes it: integers, bools, hex strings, IEEE bits of floats.
nlohmann::json encoded(const Value& v) {
  switch (v.type) {
    case ValueType::string:
      return hex_of(std::get<std::string>(v.data));
    case ValueType::boolean:
      return std::get<bool>(v.data);
    case ValueType::f32:
      return std::bit_cast<uint32_t>(float(std::get<double>(v.data)));
    case ValueType::f64:
      return std::bit_cast<uint64_t>(std::get<double>(v.data));
    default:
      break;
  }
  if (const auto* u = std::get_if<uint64_t>(&v.data)) return *u;
  return std::get<int64_t>(v.data);
}

// gguf_dump.py's JSON of the real model (a failure naming `./inferlab setup` when the venv or
// the script is missing).
nlohmann::json python_dump() {
  const std::string python = INFERLAB_VENV_PYTHON;
  const std::string script = std::string(INFERLAB_SOURCE_DIR) + "/tests/08-real-model/gguf_dump.py";
  if (!std::filesystem::exists(python))
    throw std::runtime_error("the Python venv " + python + " (PyPI gguf, numpy) is missing: run ./inferlab setup");
  const std::string out = temp_path("dump.json");
  const std::string command =
      "'" + python + "' '" + script + "' '" + std::string(INFERLAB_SMOLLM2_GGUF) + "' '" + out + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + command);
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = ::pclose(pipe);
  if (status != 0)
    throw std::runtime_error(command + " failed (status " + std::to_string(status) + "): " + output +
                             "\n(is the venv complete? run ./inferlab setup)");
  std::ifstream in(out);
  nlohmann::json dump = nlohmann::json::parse(in);
  std::filesystem::remove(out);
  return dump;
}

TEST(GgufRealModel, EveryKeyAndTensorMatchesPythonsGgufReader) {
  OPEN_REAL_MODEL(f);
  nlohmann::json dump;
  try {
    dump = python_dump();
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  EXPECT_EQ(f.version(), dump["version"].get<uint32_t>());
  EXPECT_EQ(f.alignment(), dump["alignment"].get<uint64_t>());
  EXPECT_EQ(f.data_offset(), dump["data_offset"].get<uint64_t>());

  const nlohmann::json& metadata = dump["metadata"];
  ASSERT_EQ(f.metadata().size(), metadata.size());
  size_t values = 0;
  for (size_t i = 0; i < metadata.size(); ++i) {
    const auto& [key, value] = f.metadata()[i];
    const nlohmann::json& expected = metadata[i];
    ASSERT_EQ(key, expected["key"].get<std::string>()) << "pair " << i;
    ASSERT_EQ(uint32_t(value.type), expected["type"].get<uint32_t>()) << key;
    if (value.type != ValueType::array) {
      EXPECT_EQ(encoded(value), expected["value"]) << key;
      ++values;
      continue;
    }
    EXPECT_EQ(uint32_t(value.element_type), expected["element_type"].get<uint32_t>()) << key;
    const std::vector<Value>& ours = elements(value);
    const nlohmann::json& theirs = expected["value"];
    ASSERT_EQ(ours.size(), theirs.size()) << key;
    for (size_t j = 0; j < ours.size(); ++j, ++values)
      ASSERT_EQ(encoded(ours[j]), theirs[j]) << key << " element " << j;
  }
  EXPECT_GT(values, 98000u);  // tokens and merges included

  const nlohmann::json& tensors = dump["tensors"];
  ASSERT_EQ(f.tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    const nlohmann::json& expected = tensors[i];
    ASSERT_EQ(t.name, expected["name"].get<std::string>()) << "tensor " << i;
    EXPECT_EQ(uint32_t(t.type), expected["type"].get<uint32_t>()) << t.name;
    EXPECT_EQ(t.ne, expected["ne"].get<std::vector<int64_t>>()) << t.name;
    EXPECT_EQ(t.offset, expected["offset"].get<uint64_t>()) << t.name;
    EXPECT_EQ(t.bytes, expected["bytes"].get<uint64_t>()) << t.name;
    EXPECT_EQ(Sha256::hex(f.data(t)), expected["sha256"].get<std::string>()) << t.name;
  }
  EXPECT_EQ(f.data(f.tensors().back()).data() + f.tensors().back().bytes,
            static_cast<const uint8_t*>(f.storage().get()) + dump["file_size"].get<uint64_t>())
      << "the last tensor ends the file";
}

TEST(GgufRealModel, TheFactsOfRealModelMd) {
  OPEN_REAL_MODEL(f);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("llama.block_count"), 30u);
  EXPECT_EQ(f.get_uint("llama.embedding_length"), 576u);
  EXPECT_EQ(f.get_uint("llama.feed_forward_length"), 1536u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count"), 9u);
  EXPECT_EQ(f.get_uint("llama.attention.head_count_kv"), 3u);
  EXPECT_EQ(f.get_uint("llama.rope.dimension_count"), 64u);  // head_dim = 576 / 9
  EXPECT_EQ(f.get_float("llama.rope.freq_base"), 100000.0);
  EXPECT_EQ(float(f.get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(f.get_uint("llama.vocab_size"), 49152u);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 49152u);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre"), "smollm");
  EXPECT_FALSE(f.get_bool("tokenizer.ggml.add_bos_token"));

  std::map<GgmlType, int> by_type;
  for (const TensorInfo& t : f.tensors()) ++by_type[t.type];
  EXPECT_EQ(by_type[GgmlType::q4_1], 210);  // 7 matrices × 30 layers
  EXPECT_EQ(by_type[GgmlType::f32], 61);    // 2 norms × 30 layers + output_norm
  EXPECT_EQ(by_type[GgmlType::q8_0], 1);    // token_embd
  EXPECT_EQ(f.tensors().size(), 272u);
  const TensorInfo& embedding = f.tensor("token_embd.weight");
  EXPECT_EQ(embedding.type, GgmlType::q8_0);
  EXPECT_EQ(embedding.ne, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);                                // tied: the logits use token_embd
  EXPECT_EQ(f.tensor("blk.29.attn_k.weight").ne, (std::vector<int64_t>{576, 192}));  // 3 KV heads × 64
  EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").ne, (std::vector<int64_t>{1536, 576}));
  EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").type, GgmlType::q4_1);
  EXPECT_EQ(f.tensor("output_norm.weight").type, GgmlType::f32);
}

}  // namespace
}  // namespace inferlab
