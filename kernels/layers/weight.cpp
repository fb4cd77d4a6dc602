// Weight storage and format conversions (weight.h).
#include "kernels/layers/weight.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/half.h"
#include "kernels/quant/block_quant.h"

namespace inferlab {

std::string_view to_string(WeightFormat format) {
  switch (format) {
    case WeightFormat::f32:
      return "f32";
    case WeightFormat::f16:
      return "f16";
    case WeightFormat::bf16:
      return "bf16";
    case WeightFormat::q8_0:
      return "q8_0";
    case WeightFormat::q4_0:
      return "q4_0";
    case WeightFormat::q4_1:
      return "q4_1";
  }
  return "?";
}

WeightFormat parse_weight_format(std::string_view name) {
  for (const WeightFormat f : {WeightFormat::f32, WeightFormat::f16, WeightFormat::bf16, WeightFormat::q8_0,
                               WeightFormat::q4_0, WeightFormat::q4_1})
    if (name == to_string(f)) return f;
  require(false, "weight format", std::string(name), "is not one of f32, f16, bf16, q8_0, q4_0, q4_1");
  return WeightFormat::f32;
}

bool is_block_format(WeightFormat format) {
  return format == WeightFormat::q8_0 || format == WeightFormat::q4_0 || format == WeightFormat::q4_1;
}

quant::GgmlType ggml_type(WeightFormat format) {
  switch (format) {
    case WeightFormat::f32:
      return quant::GgmlType::f32;
    case WeightFormat::f16:
      return quant::GgmlType::f16;
    case WeightFormat::bf16:
      return quant::GgmlType::bf16;
    case WeightFormat::q8_0:
      return quant::GgmlType::q8_0;
    case WeightFormat::q4_0:
      return quant::GgmlType::q4_0;
    case WeightFormat::q4_1:
      return quant::GgmlType::q4_1;
  }
  require(false, "weight format", int(format), "is not one of the enum's");
  return quant::GgmlType::f32;
}

int64_t bytes_per_weight(WeightFormat format) {
  require(!is_block_format(format), "weight format", to_string(format),
          "has no whole number of bytes a weight: use weight_row_bytes() or Weight::bytes()");
  return format == WeightFormat::f32 ? 4 : 2;
}

int64_t weight_row_bytes(WeightFormat format, int64_t in) {
  require(in >= 0, "in", in, "must be >= 0");
  return quant::row_bytes(ggml_type(format), in);
}

Weight::Weight(Tensor<float> w) {
  check_rank(w, 2, "weight");
  out_ = w.dim(0);
  in_ = w.dim(1);
  f32_ = std::move(w);
}

Weight Weight::convert(const Tensor<float>& w, WeightFormat format) {
  check_rank(w, 2, "weight");
  if (format == WeightFormat::f32) return Weight(w);
  Weight out;
  out.format_ = format;
  out.out_ = w.dim(0);
  out.in_ = w.dim(1);
  if (is_block_format(format)) {
    const int64_t rb = weight_row_bytes(format, out.in_);  // throws when in is not a multiple of 32
    auto storage = std::make_shared<std::vector<uint8_t>>(size_t(out.out_ * rb));
    for (int64_t r = 0; r < out.out_; ++r)
      quant::quantize_row(ggml_type(format), std::span(w.data() + r * out.in_, size_t(out.in_)),
                          std::span(storage->data() + r * rb, size_t(rb)));
    out.blocks_ = std::span<const uint8_t>(storage->data(), storage->size());
    out.keep_ = std::move(storage);
    out.packed_ = std::make_shared<const quant::PackedMatrix>(out.block_matrix());
    return out;
  }
  out.bits16_ = Tensor<uint16_t>(w.shape());
  const auto to_bits = format == WeightFormat::f16 ? float_to_half_bits : float_to_bfloat16_bits;
  for (int64_t i = 0; i < w.size(); ++i) out.bits16_.data()[i] = to_bits(w.data()[i]);
  return out;
}

Weight Weight::view(WeightFormat format, int64_t out, int64_t in, std::span<const uint8_t> bytes,
                    std::shared_ptr<const void> keep_alive) {
  require(out >= 0, "out", out, "must be >= 0");
  const int64_t rb = weight_row_bytes(format, in);  // checks in
  const int64_t want = out * rb;
  require(int64_t(bytes.size()) == want, "bytes.size()", bytes.size(),
          "must be out · row bytes = " + std::to_string(out) + " · " + std::to_string(rb) + " = " +
              std::to_string(want) + " for a [" + std::to_string(out) + ", " + std::to_string(in) + "] " +
              std::string(to_string(format)) + " weight");
  Weight w;
  w.format_ = format;
  w.out_ = out;
  w.in_ = in;
  if (is_block_format(format)) {
    w.blocks_ = bytes;
    w.keep_ = std::move(keep_alive);
    w.packed_ = std::make_shared<const quant::PackedMatrix>(w.block_matrix());
  } else if (format == WeightFormat::f32) {
    w.f32_ = Tensor<float>({out, in});
    if (want > 0) std::memcpy(w.f32_.data(), bytes.data(), size_t(want));
  } else {
    w.bits16_ = Tensor<uint16_t>({out, in});
    if (want > 0) std::memcpy(w.bits16_.data(), bytes.data(), size_t(want));
  }
  return w;
}

std::span<const uint8_t> Weight::stored_bytes() const {
  if (is_block_format(format_)) return blocks_;
  const size_t n = size_t(bytes());
  if (format_ == WeightFormat::f32) return {reinterpret_cast<const uint8_t*>(f32_.data()), n};
  return {reinterpret_cast<const uint8_t*>(bits16_.data()), n};
}

namespace {

// A weight of @p format over @p bytes that it owns (Weight::view keeps them alive).
Weight owning_view(WeightFormat format, int64_t out, int64_t in, std::vector<uint8_t> bytes) {
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  return Weight::view(format, out, in, *owned, owned);
}

}  // namespace

Weight Weight::take_rows(std::span<const std::pair<int64_t, int64_t>> row_ranges) const {
  const int64_t rb = row_bytes();
  int64_t out = 0;
  for (const auto& [begin, end] : row_ranges) {
    require(begin >= 0 && begin <= end && end <= out_, "row range",
            "[" + std::to_string(begin) + ", " + std::to_string(end) + ")",
            "must lie in [0, out_features = " + std::to_string(out_) + ")");
    out += end - begin;
  }
  std::vector<uint8_t> bytes(size_t(out * rb));
  const std::span<const uint8_t> from = stored_bytes();
  size_t at = 0;
  for (const auto& [begin, end] : row_ranges) {
    std::memcpy(bytes.data() + at, from.data() + begin * rb, size_t((end - begin) * rb));
    at += size_t((end - begin) * rb);
  }
  return owning_view(format_, out, in_, std::move(bytes));
}

Weight Weight::take_columns(int64_t begin, int64_t end) const {
  require(begin >= 0 && begin <= in_, "begin", begin, "must lie in [0, in_features = " + std::to_string(in_) + "]");
  require(end >= begin && end <= in_, "end", end,
          "must lie in [begin = " + std::to_string(begin) + ", in_features = " + std::to_string(in_) + "]");
  const int64_t block = quant::block_values(ggml_type(format_));  // 32 for a block format, else 1
  require(begin % block == 0, "begin", begin, "must be a multiple of 32: a " + std::string(to_string(format_)) + " block is cut whole");
  require(end % block == 0, "end", end, "must be a multiple of 32: a " + std::string(to_string(format_)) + " block is cut whole");
  const int64_t rb = row_bytes(), skip = weight_row_bytes(format_, begin);
  const int64_t width = weight_row_bytes(format_, end) - skip;
  std::vector<uint8_t> bytes(size_t(out_ * width));
  const std::span<const uint8_t> from = stored_bytes();
  for (int64_t r = 0; r < out_; ++r)
    std::memcpy(bytes.data() + r * width, from.data() + r * rb + skip, size_t(width));
  return owning_view(format_, out_, end - begin, std::move(bytes));
}

const quant::PackedMatrix& Weight::packed() const {
  if (!is_block_format(format_))
    throw std::logic_error("Weight::packed(): the weight is stored as " + std::string(to_string(format_)) +
                           ", not a block format");
  return *packed_;
}

const Tensor<float>& Weight::f32() const {
  if (format_ != WeightFormat::f32)
    throw std::logic_error("Weight::f32(): the weight is stored as " + std::string(to_string(format_)));
  return f32_;
}

const Tensor<uint16_t>& Weight::bits16() const {
  if (format_ != WeightFormat::f16 && format_ != WeightFormat::bf16)
    throw std::logic_error("Weight::bits16(): the weight is stored as " + std::string(to_string(format_)));
  return bits16_;
}

std::span<const uint8_t> Weight::block_bytes() const {
  if (!is_block_format(format_))
    throw std::logic_error("Weight::block_bytes(): the weight is stored as " + std::string(to_string(format_)) +
                           ", not a block format");
  return blocks_;
}

quant::BlockMatrix Weight::block_matrix() const {
  return {ggml_type(format_), out_, in_, block_bytes()};
}

float Weight::at(int64_t row, int64_t col) const {
  const int64_t i = row * in_ + col;
  switch (format_) {
    case WeightFormat::f32:
      return f32_.data()[i];
    case WeightFormat::f16:
      return half_bits_to_float(bits16_.data()[i]);
    case WeightFormat::bf16:
      return bfloat16_bits_to_float(bits16_.data()[i]);
    case WeightFormat::q8_0:
    case WeightFormat::q4_0:
    case WeightFormat::q4_1: {
      // Decode the one block that holds the weight.
      const quant::GgmlType type = ggml_type(format_);
      const int64_t bb = quant::block_bytes(type);
      const int64_t offset = row * row_bytes() + col / quant::kBlockValues * bb;
      float block[quant::kBlockValues];
      quant::dequantize_row(type, blocks_.subspan(size_t(offset), size_t(bb)), block);
      return block[col % quant::kBlockValues];
    }
  }
  return 0.0f;
}

Tensor<float> Weight::to_f32() const {
  if (format_ == WeightFormat::f32) return f32_;
  Tensor<float> out({out_, in_});
  for (int64_t r = 0; r < out_; ++r) row_to_f32(r, std::span(out.data() + r * in_, size_t(in_)));
  return out;
}

void Weight::row_to_f32(int64_t row, std::span<float> out) const {
  if (row < 0 || row >= out_)  // checked per call: the message is built only for a bad row
    require(false, "row", row, "must be in [0, out_features = " + std::to_string(out_) + ")");
  if (int64_t(out.size()) != in_)
    require(false, "out.size()", out.size(), "must equal in_features = " + std::to_string(in_));
  const int64_t first = row * in_;
  switch (format_) {
    case WeightFormat::f32:
      std::copy_n(f32_.data() + first, in_, out.data());
      return;
    case WeightFormat::f16:
      for (int64_t c = 0; c < in_; ++c) out[size_t(c)] = half_bits_to_float(bits16_.data()[first + c]);
      return;
    case WeightFormat::bf16:
      for (int64_t c = 0; c < in_; ++c) out[size_t(c)] = bfloat16_bits_to_float(bits16_.data()[first + c]);
      return;
    case WeightFormat::q8_0:
    case WeightFormat::q4_0:
    case WeightFormat::q4_1: {
      const int64_t rb = row_bytes();
      quant::dequantize_row(ggml_type(format_), blocks_.subspan(size_t(row * rb), size_t(rb)), out);
      return;
    }
  }
}

}  // namespace inferlab
