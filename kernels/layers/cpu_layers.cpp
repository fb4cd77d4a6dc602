// The Llama layers on the CPU (layers.h): the batch-invariant linear layer, RMSNorm, RoPE and
// SwiGLU. Each works row by row; the linear layer's structure:
//   rows in blocks of kRowBlock (x's block stays in cache while the weights stream past it)
//     outputs in tiles of kTileOut, one OpenMP work item each (the weight tile: kTileOut rows of w)
//       rows of the block in tiles of kTileRows
//         micro_tile(): kTileRows × kTileOut accumulators, one vector each, over the input
// Every output element gets its own accumulator, fed in input order and reduced the same way
// whatever the tile's size — the edge tiles run the same code with fewer rows or outputs — so no
// element's arithmetic depends on the batch.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/ceil_div.h"
#include "common/check.h"
#include "common/half.h"
#include "kernels/layers/layers.h"
#include "kernels/quant/packed_matmul.h"
#include "kernels/primitives/cpu_simd.h"
#include "kernels/primitives/cpu_simd_widen.h"

namespace inferlab {
namespace {

using simd::kLanes;
using simd::Vec;

// Register tile: kTileRows × kTileOut accumulators plus kTileOut weight vectors and one x vector
// must fit the register file, or the compiler spills accumulators to the stack every step: 4 × 4
// (+ 5) of AVX-512's 32 registers, 4 × 3 (+ 4) of AVX2's 16. On this lab's AVX2 CPU a 4 × 4 tile
// took 1.6× the time of 4 × 3 for a 64 × 768 by 768 × 4096 product (8.7 vs 5.5 ms, bench_ch07's
// linear_w13/cpu/64 medians).
constexpr int64_t kTileRows = 4;                    // rows of x per register tile
constexpr int64_t kTileOut = kLanes == 16 ? 4 : 3;  // outputs (rows of w) per register tile and per work item
constexpr int64_t kRowBlock = 64;                   // rows of x per block: 64 × 3072 floats = 768 KiB at most

// How the micro-tile reads a weight format: a vector of kLanes weights widened to fp32, and one
// weight for the scalar tail. The arithmetic after the load is the same for every format.
struct F32Weights {
  using Element = float;
  static simd::Vec load(const float* p) { return simd::load(p); }
  static float at(const float* p) { return *p; }
};
struct F16Weights {
  using Element = uint16_t;
  static simd::Vec load(const uint16_t* p) { return simd::load_f16(p); }
  static float at(const uint16_t* p) { return half_bits_to_float(*p); }
};
struct BF16Weights {
  using Element = uint16_t;
  static simd::Vec load(const uint16_t* p) { return simd::load_bf16(p); }
  static float at(const uint16_t* p) { return bfloat16_bits_to_float(*p); }
};

// y[r][o] = x_r · w_o for the R × O tile at rows @p x (stride in), weights @p w (stride in, read
// as Format says), output @p y (stride out_stride).
template <class Format, int R, int O>
void micro_tile(const float* x, const typename Format::Element* w, int64_t in, float* y, int64_t out_stride) {
  Vec acc[R][O];
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < O; ++o) acc[r][o] = simd::broadcast(0.0f);
  const int64_t whole = in / kLanes * kLanes;
  for (int64_t k = 0; k < whole; k += kLanes) {
    Vec wv[O];
    for (int o = 0; o < O; ++o) wv[o] = Format::load(w + o * in + k);
    for (int r = 0; r < R; ++r) {
      const Vec xv = simd::load(x + r * in + k);
      for (int o = 0; o < O; ++o) acc[r][o] = simd::fma(xv, wv[o], acc[r][o]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < O; ++o) {
      float sum = simd::reduce_add(acc[r][o]);
      for (int64_t k = whole; k < in; ++k) sum = std::fma(x[r * in + k], Format::at(w + o * in + k), sum);
      y[r * out_stride + o] = sum;
    }
}

// The tile of @p rows × @p outs (each ≤ its kTile) by the instance for its size.
template <class Format, int R = kTileRows>
void tile(int64_t rows, int64_t outs, const float* x, const typename Format::Element* w, int64_t in, float* y,
          int64_t out_stride) {
  if constexpr (R > 1) {
    if (rows < R) return tile<Format, R - 1>(rows, outs, x, w, in, y, out_stride);
  }
  switch (outs) {
    case 4:
      return micro_tile<Format, R, 4>(x, w, in, y, out_stride);
    case 3:
      return micro_tile<Format, R, 3>(x, w, in, y, out_stride);
    case 2:
      return micro_tile<Format, R, 2>(x, w, in, y, out_stride);
    default:
      return micro_tile<Format, R, 1>(x, w, in, y, out_stride);
  }
}

void check_linear(const Tensor<float>& x, const Shape& w, const Tensor<float>& y) {
  check_rank(x, 2, "x");
  require(w.size() == 2, "w.rank()", w.size(), "must be 2 ([out_features, in_features])");
  require(x.dim(1) == w[1], "x.shape[1]", x.dim(1),
          "must equal the weights' input size w.shape[1] = " + std::to_string(w[1]));
  check_shape(y, {x.dim(0), w[0]}, "y");
}

// y = x · wᵀ over weights @p w ([out, in], read as Format says): the loops of the file comment.
template <class Format>
void linear_rows(const Tensor<float>& x, const typename Format::Element* w, int64_t out, int64_t in, Tensor<float>& y) {
  const int64_t rows = x.dim(0);
  const int64_t tiles = ceil_div(out, kTileOut);
  // Threads only when there is work for them: waking them costs more than a tiny layer (a few
  // microseconds — most of a 32-wide model's step). Which thread computes a tile changes nothing.
  const bool parallel = rows * out * in >= (int64_t{1} << 18);
  for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
    const int64_t r_end = std::min(rows, r0 + kRowBlock);
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t o = t * kTileOut, outs = std::min(kTileOut, out - o);
      for (int64_t r = r0; r < r_end; r += kTileRows)
        tile<Format>(std::min(kTileRows, r_end - r), outs, x.data() + r * in, w + o * in, in, y.data() + r * out + o,
                     out);
    }
  }
}

}  // namespace

void linear_cpu(const Tensor<float>& x, const Weight& w, Tensor<float>& y) {
  check_linear(x, w.shape(), y);
  const int64_t out = w.out_features(), in = w.in_features();
  switch (w.format()) {
    case WeightFormat::f32:
      return linear_rows<F32Weights>(x, w.f32().data(), out, in, y);
    case WeightFormat::f16:
      return linear_rows<F16Weights>(x, w.bits16().data(), out, in, y);
    case WeightFormat::bf16:
      return linear_rows<BF16Weights>(x, w.bits16().data(), out, in, y);
    case WeightFormat::q8_0:
    case WeightFormat::q4_0:
    case WeightFormat::q4_1:
      if (const quant::QuantGemmChoice gemm = quant::quant_gemm_choice(); !gemm.chapter08)
        return quant::packed_matmul_cpu(x, w.packed(), y, gemm.kernel);
      return quant::quant_matmul_cpu(x, w.block_matrix(), y);
  }
}

void linear_cpu(const Tensor<float>& x, const Tensor<float>& w, Tensor<float>& y) {
  check_rank(w, 2, "w");
  check_linear(x, w.shape(), y);
  linear_rows<F32Weights>(x, w.data(), w.dim(0), w.dim(1), y);
}

void linear_openblas(const Tensor<float>& x, const Tensor<float>& w, Tensor<float>& y) {
  check_rank(w, 2, "w");
  check_linear(x, w.shape(), y);
  const int64_t rows = x.dim(0), out = w.dim(0), in = w.dim(1);
  if (rows == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(out), int(in), 1.0f, x.data(), int(in), w.data(),
              int(in), 0.0f, y.data(), int(out));
}

Cost linear_cost(int64_t rows, int64_t out, int64_t in, int64_t bytes_per_weight) {
  return {2.0 * double(rows) * double(out) * double(in),
          double(bytes_per_weight) * double(out) * double(in) +
              4.0 * (double(rows) * double(in) + double(rows) * double(out))};
}

Cost linear_cost(int64_t rows, const Weight& w) {
  Cost cost = linear_cost(rows, w.out_features(), w.in_features(), 0);
  cost.bytes += double(w.bytes());  // exact in every format (block formats' bytes a weight are fractional)
  return cost;
}

void rms_norm_cpu(const Tensor<float>& x, std::span<const float> weight, float eps, Tensor<float>& y) {
  check_rank(x, 2, "x");
  const int64_t rows = x.dim(0), dim = x.dim(1);
  require(int64_t(weight.size()) == dim, "weight.size()", weight.size(),
          "must equal x.shape[1] = " + std::to_string(dim));
  check_shape(y, x.shape(), "y");
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x.data() + r * dim;
    float* o = y.data() + r * dim;
    float sum = 0.0f;
    for (int64_t c = 0; c < dim; ++c) sum += in[c] * in[c];
    const float inv = 1.0f / std::sqrt(sum / float(dim) + eps);
    for (int64_t c = 0; c < dim; ++c) o[c] = weight[size_t(c)] * (inv * in[c]);
  }
}

std::vector<float> rope_table(int64_t max_position, int64_t head_dim, double theta) {
  require_positive("max_position", max_position);
  require(head_dim > 0 && head_dim % 2 == 0, "head_dim", head_dim, "must be even and > 0 (RoPE rotates pairs)");
  require(theta > 0.0, "theta", theta, "must be > 0");
  const int64_t half = head_dim / 2;
  std::vector<float> table(size_t(max_position * half * 2));
  for (int64_t p = 0; p < max_position; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(p) * std::pow(theta, -double(2 * i) / double(head_dim));
      table[size_t((p * half + i) * 2)] = float(std::cos(angle));
      table[size_t((p * half + i) * 2 + 1)] = float(std::sin(angle));
    }
  return table;
}

std::string_view to_string(RopeStyle style) {
  switch (style) {
    case RopeStyle::adjacent:
      return "adjacent";
    case RopeStyle::half_split:
      return "half_split";
  }
  return "?";
}

RopeStyle parse_rope_style(std::string_view name) {
  for (const RopeStyle style : {RopeStyle::adjacent, RopeStyle::half_split})
    if (name == to_string(style)) return style;
  require(false, "RoPE style", std::string(name), "is not one of adjacent, half_split");
  return RopeStyle::adjacent;
}

void rope_cpu(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim,
              std::span<const int64_t> positions, std::span<const float> cos_sin, RopeStyle style) {
  require(int64_t(positions.size()) == rows, "positions.size()", positions.size(),
          "must equal rows = " + std::to_string(rows));
  require(style == RopeStyle::adjacent || style == RopeStyle::half_split, "RoPE style", int(style),
          "is not adjacent or half_split");
  const int64_t half = head_dim / 2;
  // Where pair i's second element sits, relative to its first: the next element (adjacent, pairs
  // start at 2i) or half a head on (half_split, pairs start at i). The rotation is the same code.
  const int64_t first_step = style == RopeStyle::adjacent ? 2 : 1;
  const int64_t second_offset = style == RopeStyle::adjacent ? 1 : half;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t p = positions[size_t(r)];
    if (p < 0 || (p + 1) * half * 2 > int64_t(cos_sin.size()))  // the message is built only for a bad row
      require(false, "positions[" + std::to_string(r) + "]", p, "is outside the RoPE table");
    const float* cs = cos_sin.data() + p * half * 2;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + r * row_stride + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        float& first = v[i * first_step];
        float& second = v[i * first_step + second_offset];
        const float c = cs[2 * i], s = cs[2 * i + 1], a = first, b = second;
        first = a * c - b * s;
        second = a * s + b * c;
      }
    }
  }
}

void swiglu_cpu(const Tensor<float>& gate_up, Tensor<float>& out) {
  check_rank(gate_up, 2, "gate_up");
  require(gate_up.dim(1) % 2 == 0, "gate_up.shape[1]", gate_up.dim(1), "must be 2·hidden (w1's and w3's outputs)");
  const int64_t rows = gate_up.dim(0), hidden = gate_up.dim(1) / 2;
  check_shape(out, {rows, hidden}, "out");
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up.data() + r * 2 * hidden;
    for (int64_t j = 0; j < hidden; ++j) {
      const float a = g[j];
      out[r * hidden + j] = a / (1.0f + std::exp(-a)) * g[hidden + j];
    }
  }
}

}  // namespace inferlab
