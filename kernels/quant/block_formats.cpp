#include "kernels/quant/block_formats.h"

#include <cctype>
#include <stdexcept>
#include <string>

namespace inferlab::quant {

namespace {

struct TypeFacts {
  GgmlType type;
  std::string_view name;
  int64_t values;
  int64_t bytes;
};

constexpr TypeFacts kTypes[] = {
    {GgmlType::f32, "F32", 1, 4},     {GgmlType::f16, "F16", 1, 2},
    {GgmlType::q4_0, "Q4_0", 32, 18}, {GgmlType::q4_1, "Q4_1", 32, 20},
    {GgmlType::q8_0, "Q8_0", 32, 34}, {GgmlType::q8_1, "Q8_1", 32, 36},
    {GgmlType::bf16, "BF16", 1, 2},
};

const TypeFacts* facts(GgmlType type) {
  for (const TypeFacts& f : kTypes)
    if (f.type == type) return &f;
  return nullptr;
}

const TypeFacts& checked(GgmlType type) {
  const TypeFacts* f = facts(type);
  if (!f)
    throw std::invalid_argument("ggml type " + std::to_string(static_cast<uint32_t>(type)) +
                                " is not one the lab reads (F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q8_1)");
  return *f;
}

}  // namespace

bool is_supported(GgmlType type) { return facts(type) != nullptr; }

std::string_view to_string(GgmlType type) {
  if (const TypeFacts* f = facts(type)) return f->name;
  static thread_local std::string other;
  other = "type " + std::to_string(static_cast<uint32_t>(type));
  return other;
}

std::optional<GgmlType> parse_ggml_type(std::string_view name) {
  for (const TypeFacts& f : kTypes) {
    if (f.name.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < name.size() && same; ++i)
      same = std::toupper(static_cast<unsigned char>(name[i])) == f.name[i];
    if (same) return f.type;
  }
  return std::nullopt;
}

int64_t block_values(GgmlType type) { return checked(type).values; }

int64_t block_bytes(GgmlType type) { return checked(type).bytes; }

int64_t row_bytes(GgmlType type, int64_t values) {
  const TypeFacts& f = checked(type);
  if (values < 0 || values % f.values != 0)
    throw std::invalid_argument("a row of " + std::to_string(values) + " values is not a whole number of " +
                                std::string(f.name) + " blocks (" + std::to_string(f.values) + " values each)");
  return values / f.values * f.bytes;
}

}  // namespace inferlab::quant
