// ggml's block formats: quantizers, dequantizers and the float64 oracle (block_quant.h).
#include "kernels/quant/block_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "common/check.h"
#include "common/half.h"
#include "kernels/primitives/cpu_simd.h"  // <immintrin.h>, with GCC 12's header warnings silenced

namespace inferlab::quant {
namespace {

constexpr int kHalf = int(kBlockValues / 2);

// Blocks of a row of x.size() values, after checking that the count is whole and @p blocks matches.
int64_t checked_blocks(size_t values, size_t blocks, std::string_view blocks_name) {
  require(values % kBlockValues == 0, "x.size()", values, "must be a multiple of 32 (the values of one block)");
  const int64_t count = int64_t(values) / kBlockValues;
  require(int64_t(blocks) == count, blocks_name, blocks,
          "must be x.size() / 32 = " + std::to_string(count) + " blocks");
  return count;
}

void check_decode(size_t blocks, size_t values) {
  require(int64_t(values) == int64_t(blocks) * kBlockValues, "y.size()", values,
          "must be 32 values a block = " + std::to_string(int64_t(blocks) * kBlockValues));
}

float max_abs(const float* x) {
#if defined(__AVX2__)
  // The same maximum as the loop below, 8 lanes at a time (a maximum does not depend on the order;
  // _mm256_max_ps returns its second operand when the first is NaN, so a NaN value is skipped as
  // std::max(amax, NaN) skips it). The loop's chain of 32 dependent maxima was most of the time
  // of quantizing an activation row (chapter 11 measured 1.6 ns a value).
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 m = _mm256_setzero_ps();
  for (int g = 0; g < 4; ++g) m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * g), magnitude), m);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
#else
  float amax = 0.0f;
  for (int j = 0; j < kBlockValues; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
#endif
}

}  // namespace

// Q8_0 and Q8_1 share the codes: round(x · (1/d)), d = max|x| / 127, rounding half away from zero
// (std::round). Returns d (fp32) and Σq. The AVX2 path is the same arithmetic on 8 values at a
// time — v − trunc(v) is exact, so "trunc, then one step away from zero when the fraction is ≥ ½"
// is round(v) bit for bit — because the activations of every quantized matmul come through here
// (the scalar loop was 6% of a decode step).

float quantize_block_q8(const float* x, int8_t* qs, int& sum) {
  const float d = max_abs(x) / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  sum = 0;
#if defined(__AVX2__)
  const __m256 scale = _mm256_set1_ps(id), half = _mm256_set1_ps(0.5f), sign = _mm256_set1_ps(-0.0f);
  __m256i codes[4];
  for (int g = 0; g < 4; ++g) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * g), scale);
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 away = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(v, t)), half, _CMP_GE_OQ);
    const __m256 one = _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f));  // ±1 with v's sign
    codes[g] = _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(away, one)));
  }
  const __m256i total = _mm256_add_epi32(_mm256_add_epi32(codes[0], codes[1]), _mm256_add_epi32(codes[2], codes[3]));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
  sum = _mm_cvtsi128_si32(s4);
  // int32 → int8 (|q| ≤ 127: the packs never saturate); packs work within 128-bit lanes, so the
  // final permute puts the four groups of 8 back in order.
  const __m256i w8 = _mm256_packs_epi16(_mm256_packs_epi32(codes[0], codes[1]), _mm256_packs_epi32(codes[2], codes[3]));
  const __m256i ordered = _mm256_permutevar8x32_epi32(w8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), ordered);
#else
  for (int j = 0; j < kBlockValues; ++j) {
    qs[j] = static_cast<int8_t>(std::round(x[j] * id));
    sum += qs[j];
  }
#endif
  return d;
}

namespace {

template <class Block>
void from_bytes(std::span<const uint8_t> bytes, int64_t b, Block& block) {
  std::memcpy(&block, bytes.data() + b * int64_t(sizeof(Block)), sizeof(Block));
}

template <class Block>
std::vector<Block> blocks_of(std::span<const uint8_t> bytes, int64_t count) {
  std::vector<Block> blocks(static_cast<size_t>(count));
  if (count > 0) std::memcpy(blocks.data(), bytes.data(), size_t(count) * sizeof(Block));
  return blocks;
}

// Checks a byte row of @p type holding @p values values; returns its block count.
int64_t check_bytes(GgmlType type, size_t bytes, int64_t values, std::string_view values_name) {
  require(is_block_format(type), "type", to_string(type), "must be a block format (Q4_0, Q4_1, Q8_0, Q8_1)");
  require(values >= 0 && values % kBlockValues == 0, values_name, values,
          "must be a multiple of 32 (the values of one block)");
  const int64_t want = row_bytes(type, values);
  require(int64_t(bytes) == want, "bytes.size()", bytes,
          "must be " + std::to_string(want) + " for " + std::to_string(values) + " values of " +
              std::string(to_string(type)));
  return values / kBlockValues;
}

}  // namespace

bool is_block_format(GgmlType type) {
  return type == GgmlType::q4_0 || type == GgmlType::q4_1 || type == GgmlType::q8_0 || type == GgmlType::q8_1;
}

GgmlType activation_type(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::q8_0:
    case GgmlType::q4_0:
      return GgmlType::q8_0;
    case GgmlType::q4_1:
      return GgmlType::q8_1;
    default:
      require(false, "weight type", to_string(weight_type), "has no quantized matmul (Q8_0, Q4_0, Q4_1 do)");
      return GgmlType::q8_0;
  }
}

void quantize_row_q4_0(std::span<const float> x, std::span<BlockQ4_0> y) {
  const int64_t blocks = checked_blocks(x.size(), y.size(), "y.size()");
  for (int64_t b = 0; b < blocks; ++b) {
    const float* v = x.data() + b * kBlockValues;
    // The value of largest magnitude, with its sign: it codes to 0 exactly ((0 − 8)·d = max).
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kBlockValues; ++j)
      if (amax < std::fabs(v[j])) {
        amax = std::fabs(v[j]);
        max = v[j];
      }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_0& out = y[size_t(b)];
    out.d = float_to_half_bits(d);
    for (int j = 0; j < kHalf; ++j) {
      // x·(1/d) + 8.5 ≥ 0.5, so the truncation is a floor: round half up of x/d + 8; the value on the
      // far side of max, x/d up to +8, is clamped to 15.
      const int lo = std::min(15, int(v[j] * id + 8.5f));
      const int hi = std::min(15, int(v[j + kHalf] * id + 8.5f));
      out.qs[j] = uint8_t(lo | (hi << 4));
    }
  }
}

void quantize_row_q4_1(std::span<const float> x, std::span<BlockQ4_1> y) {
  const int64_t blocks = checked_blocks(x.size(), y.size(), "y.size()");
  for (int64_t b = 0; b < blocks; ++b) {
    const float* v = x.data() + b * kBlockValues;
    float min = v[0], max = v[0];
    for (int j = 1; j < kBlockValues; ++j) {
      min = std::min(min, v[j]);
      max = std::max(max, v[j]);
    }
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_1& out = y[size_t(b)];
    out.d = float_to_half_bits(d);
    out.m = float_to_half_bits(min);
    for (int j = 0; j < kHalf; ++j) {
      const int lo = std::min(15, int((v[j] - min) * id + 0.5f));
      const int hi = std::min(15, int((v[j + kHalf] - min) * id + 0.5f));
      out.qs[j] = uint8_t(lo | (hi << 4));
    }
  }
}

void quantize_row_q8_0(std::span<const float> x, std::span<BlockQ8_0> y) {
  const int64_t blocks = checked_blocks(x.size(), y.size(), "y.size()");
  for (int64_t b = 0; b < blocks; ++b) {
    int sum = 0;
    y[size_t(b)].d = float_to_half_bits(quantize_block_q8(x.data() + b * kBlockValues, y[size_t(b)].qs, sum));
  }
}

void quantize_row_q8_1(std::span<const float> x, std::span<BlockQ8_1> y) {
  const int64_t blocks = checked_blocks(x.size(), y.size(), "y.size()");
  for (int64_t b = 0; b < blocks; ++b) {
    int sum = 0;
    const float d = quantize_block_q8(x.data() + b * kBlockValues, y[size_t(b)].qs, sum);
    y[size_t(b)].d = float_to_half_bits(d);
    y[size_t(b)].s = float_to_half_bits(float(sum) * d);  // the fp32 d, as ggml: not fp16(d)·Σq
  }
}

void dequantize_row_q4_0(std::span<const BlockQ4_0> x, std::span<float> y) {
  check_decode(x.size(), y.size());
  for (size_t b = 0; b < x.size(); ++b) {
    const float d = half_bits_to_float(x[b].d);
    float* out = y.data() + b * kBlockValues;
    for (int j = 0; j < kHalf; ++j) {
      out[j] = float((x[b].qs[j] & 15) - 8) * d;
      out[j + kHalf] = float((x[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_row_q4_1(std::span<const BlockQ4_1> x, std::span<float> y) {
  check_decode(x.size(), y.size());
  for (size_t b = 0; b < x.size(); ++b) {
    const float d = half_bits_to_float(x[b].d), m = half_bits_to_float(x[b].m);
    float* out = y.data() + b * kBlockValues;
    for (int j = 0; j < kHalf; ++j) {
      // q·d is exact in fp32 (4 bits × 11), so the fma rounds once, as q·d + m does.
      out[j] = std::fma(float(x[b].qs[j] & 15), d, m);
      out[j + kHalf] = std::fma(float(x[b].qs[j] >> 4), d, m);
    }
  }
}

void dequantize_row_q8_0(std::span<const BlockQ8_0> x, std::span<float> y) {
  check_decode(x.size(), y.size());
  for (size_t b = 0; b < x.size(); ++b) {
    const float d = half_bits_to_float(x[b].d);
    for (int j = 0; j < kBlockValues; ++j) y[b * kBlockValues + j] = float(x[b].qs[j]) * d;
  }
}

void dequantize_row_q8_1(std::span<const BlockQ8_1> x, std::span<float> y) {
  check_decode(x.size(), y.size());
  for (size_t b = 0; b < x.size(); ++b) {
    const float d = half_bits_to_float(x[b].d);
    for (int j = 0; j < kBlockValues; ++j) y[b * kBlockValues + j] = float(x[b].qs[j]) * d;
  }
}

void quantize_row(GgmlType type, std::span<const float> x, std::span<uint8_t> bytes) {
  const int64_t blocks = check_bytes(type, bytes.size(), int64_t(x.size()), "x.size()");
  // One block at a time through a local struct: the bytes may sit at any alignment.
  auto each = [&](auto quantize, auto block) {
    for (int64_t b = 0; b < blocks; ++b) {
      quantize(x.subspan(size_t(b * kBlockValues), kBlockValues), std::span(&block, 1));
      std::memcpy(bytes.data() + b * int64_t(sizeof(block)), &block, sizeof(block));
    }
  };
  switch (type) {
    case GgmlType::q4_0:
      return each(quantize_row_q4_0, BlockQ4_0{});
    case GgmlType::q4_1:
      return each(quantize_row_q4_1, BlockQ4_1{});
    case GgmlType::q8_0:
      return each(quantize_row_q8_0, BlockQ8_0{});
    default:
      return each(quantize_row_q8_1, BlockQ8_1{});
  }
}

void dequantize_row(GgmlType type, std::span<const uint8_t> bytes, std::span<float> y) {
  const int64_t blocks = check_bytes(type, bytes.size(), int64_t(y.size()), "y.size()");
  auto each = [&](auto dequantize, auto block) {
    for (int64_t b = 0; b < blocks; ++b) {
      from_bytes(bytes, b, block);
      dequantize(std::span(&block, 1), y.subspan(size_t(b * kBlockValues), kBlockValues));
    }
  };
  switch (type) {
    case GgmlType::q4_0:
      return each(dequantize_row_q4_0, BlockQ4_0{});
    case GgmlType::q4_1:
      return each(dequantize_row_q4_1, BlockQ4_1{});
    case GgmlType::q8_0:
      return each(dequantize_row_q8_0, BlockQ8_0{});
    default:
      return each(dequantize_row_q8_1, BlockQ8_1{});
  }
}

std::vector<double> dequantize_row_f64(GgmlType type, std::span<const uint8_t> bytes, int64_t values) {
  const int64_t blocks = check_bytes(type, bytes.size(), values, "values");
  std::vector<double> y(static_cast<size_t>(values));
  for (int64_t b = 0; b < blocks; ++b) {
    double* out = y.data() + b * kBlockValues;
    switch (type) {
      case GgmlType::q4_0: {
        BlockQ4_0 block;
        from_bytes(bytes, b, block);
        const double d = half_bits_to_float(block.d);
        for (int j = 0; j < kHalf; ++j) {
          out[j] = double((block.qs[j] & 15) - 8) * d;
          out[j + kHalf] = double((block.qs[j] >> 4) - 8) * d;
        }
        break;
      }
      case GgmlType::q4_1: {
        BlockQ4_1 block;
        from_bytes(bytes, b, block);
        const double d = half_bits_to_float(block.d), m = half_bits_to_float(block.m);
        for (int j = 0; j < kHalf; ++j) {
          out[j] = double(block.qs[j] & 15) * d + m;
          out[j + kHalf] = double(block.qs[j] >> 4) * d + m;
        }
        break;
      }
      case GgmlType::q8_0: {
        BlockQ8_0 block;
        from_bytes(bytes, b, block);
        const double d = half_bits_to_float(block.d);
        for (int j = 0; j < kBlockValues; ++j) out[j] = double(block.qs[j]) * d;
        break;
      }
      default: {
        BlockQ8_1 block;
        from_bytes(bytes, b, block);
        const double d = half_bits_to_float(block.d);
        for (int j = 0; j < kBlockValues; ++j) out[j] = double(block.qs[j]) * d;
        break;
      }
    }
  }
  return y;
}

double dot_f64(std::span<const double> a, std::span<const double> b) {
  require(b.size() == a.size(), "b.size()", b.size(), "must equal a.size() = " + std::to_string(a.size()));
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

double block_dot_f64(GgmlType w_type, std::span<const uint8_t> w_bytes, GgmlType x_type,
                     std::span<const uint8_t> x_bytes, int64_t values) {
  require(x_type == activation_type(w_type), "x type", to_string(x_type),
          "must be " + std::string(to_string(activation_type(w_type))) + " for " + std::string(to_string(w_type)) +
              " weights");
  const int64_t blocks = check_bytes(w_type, w_bytes.size(), values, "values");
  check_bytes(x_type, x_bytes.size(), values, "values");
  // The codes as integers (Q4_0 already centred), the scales widened: exact in double.
  const std::vector<BlockQ8_0> x8 =
      x_type == GgmlType::q8_0 ? blocks_of<BlockQ8_0>(x_bytes, blocks) : std::vector<BlockQ8_0>{};
  const std::vector<BlockQ8_1> x81 =
      x_type == GgmlType::q8_1 ? blocks_of<BlockQ8_1>(x_bytes, blocks) : std::vector<BlockQ8_1>{};
  double sum = 0.0;
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* xq = x_type == GgmlType::q8_0 ? x8[size_t(b)].qs : x81[size_t(b)].qs;
    const double dx = half_bits_to_float(x_type == GgmlType::q8_0 ? x8[size_t(b)].d : x81[size_t(b)].d);
    int64_t dot = 0;
    double dw = 0.0, extra = 0.0;
    switch (w_type) {
      case GgmlType::q8_0: {
        BlockQ8_0 w;
        from_bytes(w_bytes, b, w);
        dw = half_bits_to_float(w.d);
        for (int j = 0; j < kBlockValues; ++j) dot += int64_t(w.qs[j]) * xq[j];
        break;
      }
      case GgmlType::q4_0: {
        BlockQ4_0 w;
        from_bytes(w_bytes, b, w);
        dw = half_bits_to_float(w.d);
        for (int j = 0; j < kHalf; ++j)
          dot += int64_t((w.qs[j] & 15) - 8) * xq[j] + int64_t((w.qs[j] >> 4) - 8) * xq[j + kHalf];
        break;
      }
      default: {
        BlockQ4_1 w;
        from_bytes(w_bytes, b, w);
        dw = half_bits_to_float(w.d);
        for (int j = 0; j < kHalf; ++j) dot += int64_t(w.qs[j] & 15) * xq[j] + int64_t(w.qs[j] >> 4) * xq[j + kHalf];
        extra = double(half_bits_to_float(w.m)) * double(half_bits_to_float(x81[size_t(b)].s));
        break;
      }
    }
    sum += dw * dx * double(dot) + extra;
  }
  return sum;
}

}  // namespace inferlab::quant
