#pragma once
/// @file quant_device_check.h
/// The checks every device quantized matmul goes through — cuda/quant_matmul on sim and cuda
/// (test_quant_sim.cpp) and the wrong fixtures of tests/wrong/wrong_ch08_quant_gpu.cpp alike:
/// fresh random weights and activations, a poisoned output, then two independent verdicts:
///
/// 1. **bits**: every element equals quant_matmul_cpu() with QuantKernel::scalar — quant_matmul.h's
///    contract fixes one output's arithmetic (exact integer block sums, then the fma chain over
///    the blocks in order), so a kernel that keeps it gives these bits and no others;
/// 2. **the float64 oracle**: |y − exact| ≤ γ_n · Σ|t_k| for each element, where exact is
///    quant::block_dot_f64() (the same blocks, every product and sum in double), t_k are the
///    chain's n terms (d_w·d_x·Σ_b for each block, and m_w·s_x for Q4_1) and γ_n = n·u/(1 − n·u),
///    u = 2^−24: the bound on n correctly rounded fp32 additions of exact terms, whatever their
///    order. A kernel that sums in another order fails 1 and passes 2; one that drops or misreads a
///    term fails both.
///
/// And the activation quantizer on the device against quant::quantize_row(), byte for byte.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "common/half.h"
#include "common/rng.h"
#include "common/tensor.h"
#include "kernels/quant/block_quant.h"
#include "kernels/quant/quant_matmul.h"
#include "tests/support/seeded.h"

namespace inferlab::testing {

/// A device (or any) quantized matmul with quant_matmul_cpu()'s meaning: y = x · Wᵀ.
using QuantMatmulFn = std::function<void(const Tensor<float>& x, const quant::BlockMatrix& w, Tensor<float>& y)>;
/// A device activation quantizer: each row of x into @p type blocks, the rows one after another.
using QuantizeRowsFn = std::function<void(quant::GgmlType type, const Tensor<float>& x, std::span<uint8_t> blocks)>;

/// One shape of the matmul checks.
struct QuantCase {
  quant::GgmlType type = quant::GgmlType::q8_0;  ///< the weights' format
  int64_t rows = 1, out = 1, in = 32;
  bool raw_codes = false;  ///< weights of random code bytes and random fp16 scales instead of quantized normals

  /// "Q4_1 rows 3 out 33 in 544" (", raw codes").
  std::string name() const {
    std::ostringstream s;
    s << quant::to_string(type) << " rows " << rows << " out " << out << " in " << in << (raw_codes ? ", raw codes" : "");
    return s.str();
  }
};

/// A random [out, in] weight matrix of @p type: each row quantize_row() of normal values (stddev
/// 0.5), or — @p raw_codes — blocks whose code bytes are uniform random (every int8, every nibble,
/// −128 included) under fp16 scales and minima of random sign and magnitude 2^−12 … 2^−4.
inline std::vector<uint8_t> random_block_weights(quant::GgmlType type, int64_t out, int64_t in, Rng& rng,
                                                 bool raw_codes) {
  const int64_t rb = quant::row_bytes(type, in), bb = quant::block_bytes(type);
  std::vector<uint8_t> w(static_cast<size_t>(out * rb));
  if (!raw_codes) {
    std::vector<float> row(static_cast<size_t>(in));
    for (int64_t o = 0; o < out; ++o) {
      rng.fill_normal(row, 0.0f, 0.5f);
      quant::quantize_row(type, row, std::span(w.data() + o * rb, size_t(rb)));
    }
    return w;
  }
  auto scale = [&] {
    const float magnitude = std::ldexp(rng.uniform(1.0f, 2.0f), int(rng.integer(-12, -5)));
    return float_to_half_bits(rng.integer(0, 1) != 0 ? magnitude : -magnitude);
  };
  for (int64_t b = 0; b < out * in / 32; ++b) {
    uint8_t* block = w.data() + b * bb;
    for (int64_t i = 0; i < bb; ++i) block[i] = uint8_t(rng.integer(0, 255));
    const uint16_t d = scale();
    std::memcpy(block, &d, 2);
    if (type == quant::GgmlType::q4_1) {
      const uint16_t m = scale();
      std::memcpy(block + 2, &m, 2);
    }
  }
  return w;
}

/// The codes of a block of @p type at @p block as integers in value order (Q4_0 centred on 8,
/// Q4_1 0–15), its scale d and its minimum m (Q4_1) or s (Q8_1) — decoded here, not by the kernels'
/// code, from block_formats.h's table.
struct DecodedBlock {
  int codes[32] = {};
  double d = 0.0, extra = 0.0;
};

inline DecodedBlock decode_block(quant::GgmlType type, const uint8_t* block) {
  DecodedBlock out;
  uint16_t d = 0, extra = 0;
  std::memcpy(&d, block, 2);
  out.d = half_bits_to_float(d);
  switch (type) {
    case quant::GgmlType::q4_0:
      for (int j = 0; j < 16; ++j) {
        out.codes[j] = (block[2 + j] & 15) - 8;
        out.codes[j + 16] = (block[2 + j] >> 4) - 8;
      }
      break;
    case quant::GgmlType::q4_1:
      std::memcpy(&extra, block + 2, 2);
      for (int j = 0; j < 16; ++j) {
        out.codes[j] = block[4 + j] & 15;
        out.codes[j + 16] = block[4 + j] >> 4;
      }
      break;
    case quant::GgmlType::q8_1:
      std::memcpy(&extra, block + 2, 2);
      for (int j = 0; j < 32; ++j) out.codes[j] = int8_t(block[4 + j]);
      break;
    default:  // Q8_0
      for (int j = 0; j < 32; ++j) out.codes[j] = int8_t(block[2 + j]);
      break;
  }
  out.extra = half_bits_to_float(extra);
  return out;
}

/// Σ|t_k| and the number n of fma terms of one output's chain (see the file comment).
struct ChainTerms {
  double abs_sum = 0.0;
  int64_t count = 0;
};

inline ChainTerms chain_terms(quant::GgmlType w_type, const uint8_t* w_row, const uint8_t* x_row, int64_t in) {
  const quant::GgmlType x_type = quant::activation_type(w_type);
  const int64_t wb = quant::block_bytes(w_type), xb = quant::block_bytes(x_type);
  ChainTerms terms;
  for (int64_t b = 0; b < in / 32; ++b) {
    const DecodedBlock w = decode_block(w_type, w_row + b * wb), x = decode_block(x_type, x_row + b * xb);
    int64_t dot = 0;
    for (int j = 0; j < 32; ++j) dot += int64_t(w.codes[j]) * x.codes[j];
    terms.abs_sum += std::fabs(w.d * x.d * double(dot));
    ++terms.count;
    if (w_type == quant::GgmlType::q4_1) {
      terms.abs_sum += std::fabs(w.extra * x.extra);
      ++terms.count;
    }
  }
  return terms;
}

/// "(row 2, output 17)".
inline std::string quant_element(int64_t index, int64_t out) {
  return "(row " + std::to_string(index / out) + ", output " + std::to_string(index % out) + ")";
}

inline std::string float_with_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  std::ostringstream s;
  s.precision(9);
  s << value << " (0x" << std::hex << bits << ")";
  return s.str();
}

/// Runs @p run on fresh data of @p c (y poisoned with NaN first) and applies both verdicts of the
/// file comment; the failure message names the case, the first failing element of each verdict
/// with its values, how many elements fail, and the seed.
inline ::testing::AssertionResult quant_matmul_matches_cpu(const QuantMatmulFn& run, const QuantCase& c, Rng& rng) {
  using quant::GgmlType;
  const Tensor<float> x = rng.normal_tensor({c.rows, c.in}, 0.1f, 2.0f);
  const std::vector<uint8_t> w = random_block_weights(c.type, c.out, c.in, rng, c.raw_codes);
  const quant::BlockMatrix m{c.type, c.out, c.in, w};
  Tensor<float> y({c.rows, c.out}), ref({c.rows, c.out});
  y.poison();
  ref.poison();
  try {
    run(x, m, y);
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << c.name() << ": threw " << error.what() << "\n  " << seed_note(rng.seed());
  }
  quant::quant_matmul_cpu(x, m, ref, quant::QuantKernel::scalar);

  // The activations as the contract quantizes them (host quantizer), for the oracle and the bound.
  const GgmlType xt = quant::activation_type(c.type);
  const int64_t xrb = quant::row_bytes(xt, c.in), wrb = quant::row_bytes(c.type, c.in);
  std::vector<uint8_t> xq(static_cast<size_t>(c.rows * xrb));
  for (int64_t r = 0; r < c.rows; ++r)
    quant::quantize_row(xt, std::span(x.data() + r * c.in, size_t(c.in)), std::span(xq.data() + r * xrb, size_t(xrb)));

  int64_t nan = 0, differ = 0, outside = 0, first_nan = -1, first_differ = -1, worst = -1;
  double worst_ratio = 0.0, worst_exact = 0.0, worst_bound = 0.0;
  for (int64_t i = 0; i < y.size(); ++i) {
    const int64_t r = i / c.out, o = i % c.out;
    if (std::isnan(y[i]) && !std::isnan(ref[i])) {
      if (nan++ == 0) first_nan = i;
    }
    if (std::memcmp(&y[i], &ref[i], 4) != 0 && differ++ == 0) first_differ = i;
    const std::span<const uint8_t> wr(w.data() + o * wrb, size_t(wrb)), xr(xq.data() + r * xrb, size_t(xrb));
    const double exact = quant::block_dot_f64(c.type, wr, xt, xr, c.in);
    const ChainTerms terms = chain_terms(c.type, wr.data(), xr.data(), c.in);
    const double u = std::ldexp(1.0, -24), n = double(terms.count);
    const double bound = n * u / (1.0 - n * u) * terms.abs_sum + 1e-12 * terms.abs_sum + 1e-30;
    const double error = std::fabs(double(y[i]) - exact);
    if (!(error <= bound)) {  // NaN fails
      ++outside;
      const double ratio = std::isnan(error) ? std::numeric_limits<double>::infinity() : error / bound;
      if (worst < 0 || ratio > worst_ratio) {
        worst = i;
        worst_ratio = ratio;
        worst_exact = exact;
        worst_bound = bound;
      }
    }
  }
  if (differ == 0 && outside == 0) return ::testing::AssertionSuccess();
  ::testing::AssertionResult failure = ::testing::AssertionFailure();
  failure << c.name() << ":";
  if (nan > 0)
    failure << "\n  " << nan << " of " << y.size() << " outputs are NaN (never written?), first at "
            << quant_element(first_nan, c.out);
  if (differ > 0)
    failure << "\n  bits differ from quant_matmul_cpu (scalar) at " << differ << " of " << y.size()
            << " outputs, first at " << quant_element(first_differ, c.out) << ": got "
            << float_with_bits(y[first_differ]) << ", cpu " << float_with_bits(ref[first_differ])
            << " — the per-output chain of quant_matmul.h (integer block sums, fma over the blocks in order) "
               "is not kept";
  if (outside > 0)
    failure << "\n  DOES NOT MATCH the float64 oracle at " << outside << " of " << y.size()
            << " outputs; worst at " << quant_element(worst, c.out) << ": got " << float_with_bits(y[worst])
            << ", block_dot_f64 " << worst_exact << ", |error| = " << std::fabs(double(y[worst]) - worst_exact)
            << " > bound γ_n·Σ|t| = " << worst_bound << " (" << worst_ratio << "×) — a term dropped or misread";
  failure << "\n  " << seed_note(rng.seed());
  return failure;
}

/// Activation rows that exercise the quantizer's corners, @p in values each (a multiple of 32):
/// normal values of varied spread, then in row 0 (when it has the blocks) an all-zero block (d = 0:
/// codes 0, 1/d taken as 0), a block of exact ties (amax 127 → d = 1, values k + 0.5: round half away
/// from zero, not to even), a block whose fp16 d underflows to a subnormal and one whose Q8_1 s
/// overflows fp16 (Σq·d > 65504 → Inf in both).
inline Tensor<float> quantizer_inputs(int64_t rows, int64_t in, Rng& rng) {
  Tensor<float> x({rows, in});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < in / 32; ++b) {
      const float spread = std::ldexp(1.0f, int(rng.integer(-6, 6)));
      for (int j = 0; j < 32; ++j) x[r * in + b * 32 + j] = rng.normal(0.0f, spread);
    }
  const int64_t blocks = in / 32;
  float* row0 = x.data();
  if (blocks > 0)
    for (int j = 0; j < 32; ++j) row0[j] = 0.0f;
  if (blocks > 1)
    for (int j = 0; j < 32; ++j) row0[32 + j] = j == 31 ? 127.0f : float(j) - 15.5f;
  if (blocks > 2)
    for (int j = 0; j < 32; ++j) row0[64 + j] = rng.normal(0.0f, 1e-6f);
  if (blocks > 3)
    for (int j = 0; j < 32; ++j) row0[96 + j] = 3.0e4f + float(j);
  return x;
}

/// Runs @p run on quantizer_inputs() of @p rows × @p in (the output bytes poisoned with 0xFF first)
/// and compares every byte with quant::quantize_row(@p type, row); the failure message names the
/// first differing row, block and field (d, s or code j) with both values, and the seed.
inline ::testing::AssertionResult quantize_rows_matches_cpu(const QuantizeRowsFn& run, quant::GgmlType type,
                                                            int64_t rows, int64_t in, Rng& rng) {
  const Tensor<float> x = quantizer_inputs(rows, in, rng);
  const int64_t rb = quant::row_bytes(type, in), bb = quant::block_bytes(type);
  std::vector<uint8_t> got(static_cast<size_t>(rows * rb), 0xFF), want(got.size());
  for (int64_t r = 0; r < rows; ++r)
    quant::quantize_row(type, std::span(x.data() + r * in, size_t(in)), std::span(want.data() + r * rb, size_t(rb)));
  const std::string what = std::string(quant::to_string(type)) + " rows " + std::to_string(rows) + " in " +
                           std::to_string(in);
  try {
    run(type, x, got);
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << what << ": threw " << error.what() << "\n  " << seed_note(rng.seed());
  }
  int64_t differ = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && differ++ == 0) first = int64_t(i);
  if (differ == 0) return ::testing::AssertionSuccess();
  const int64_t row = first / rb, block = first % rb / bb, at = first % bb;
  const int64_t header = type == quant::GgmlType::q8_1 ? 4 : 2;
  const uint8_t* g = got.data() + row * rb + block * bb;
  const uint8_t* e = want.data() + row * rb + block * bb;
  std::ostringstream field;
  if (at < 2) {
    uint16_t a, b;
    std::memcpy(&a, g, 2);
    std::memcpy(&b, e, 2);
    field << "d: got " << half_bits_to_float(a) << ", cpu " << half_bits_to_float(b);
  } else if (at < header) {
    uint16_t a, b;
    std::memcpy(&a, g + 2, 2);
    std::memcpy(&b, e + 2, 2);
    field << "s: got " << half_bits_to_float(a) << ", cpu " << half_bits_to_float(b);
  } else {
    field << "code " << at - header << ": got " << int(int8_t(g[at])) << ", cpu " << int(int8_t(e[at]))
          << " (value " << x[row * in + block * 32 + (at - header)] << ")";
  }
  return ::testing::AssertionFailure() << what << ": " << differ << " of " << got.size()
                                       << " bytes differ from quantize_row(); first in row " << row << ", block "
                                       << block << ", " << field.str() << "\n  " << seed_note(rng.seed());
}

}  // namespace inferlab::testing
