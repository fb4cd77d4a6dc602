// The quantized linear layer on the CPU (quant_matmul.h). Structure:
//   the activations: each row quantized once (Q8_0 or Q8_1) into planar arrays — codes, the fp16
//     scale widened to fp32, and the term a weight block's offset multiplies (Σq for Q4_0, s for Q4_1)
//   outputs in chunks of kChunk, one OpenMP work item each
//     rows in tiles of up to kTileRows
//       each output of the chunk: tile() walks the weight row's blocks once, unpacking each block into
//       registers once for all the tile's rows, and for each row adds the block's exact integer sum
// Only the integer sum of a block depends on the kernel (scalar loops, AVX2 maddubs + madd, VNNI
// dpbusd); the float arithmetic after it is one scalar code for all of them, so they agree bit for bit.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "common/check.h"
#include "common/half.h"
#include "kernels/quant/block_quant.h"
#include "kernels/quant/quant_matmul.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define INFERLAB_QUANT_AVX2 1
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define INFERLAB_QUANT_VNNI 1
#endif
#endif

namespace inferlab::quant {
namespace {

constexpr int64_t kChunk = 32;  // outputs a work item
constexpr int kTileRows = 4;    // activation rows sharing one unpacked weight block
constexpr int kHalf = 16;       // bytes of a Q4 block's codes

// fp16 → fp32, exact in every path (F16C's conversion when the build has it).
inline float half_to_float(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
#if defined(__F16C__)
  return _cvtsh_ss(bits);
#else
  return half_bits_to_float(bits);
#endif
}

// One call's quantized activations, planar: row r's codes at q[r·in], its block b's scale at
// d[r·blocks + b] and the extra term at t[r·blocks + b] — Σq as a float (Q4_0: the −8 offset's
// term, −8·Σq, is added to the integer sum) or fp32(s) (Q4_1: m_w·s_x).
struct Activations {
  int64_t blocks = 0;
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> qsum;
  std::vector<float> s;
};

Activations quantize_activations(const Tensor<float>& x, GgmlType w_type) {
  const int64_t rows = x.dim(0), in = x.dim(1), blocks = in / kBlockValues;
  Activations a;
  a.blocks = blocks;
  a.q.resize(size_t(rows * in));
  a.d.resize(size_t(rows * blocks));
  a.qsum.resize(size_t(rows * blocks));
  if (w_type == GgmlType::q4_1) a.s.resize(size_t(rows * blocks));
  BlockQ8_0 b8{};
  BlockQ8_1 b81{};
  for (int64_t r = 0; r < rows; ++r) {
    const std::span<const float> row(x.data() + r * in, size_t(in));
    for (int64_t b = 0; b < blocks; ++b) {
      const int8_t* qs = nullptr;
      uint16_t d = 0;
      if (w_type == GgmlType::q4_1) {
        quantize_row_q8_1(row.subspan(size_t(b * kBlockValues), kBlockValues), std::span(&b81, 1));
        qs = b81.qs;
        d = b81.d;
        a.s[size_t(r * blocks + b)] = half_bits_to_float(b81.s);
      } else {
        quantize_row_q8_0(row.subspan(size_t(b * kBlockValues), kBlockValues), std::span(&b8, 1));
        qs = b8.qs;
        d = b8.d;
      }
      int32_t sum = 0;
      for (int j = 0; j < kBlockValues; ++j) sum += qs[j];
      std::memcpy(a.q.data() + r * in + b * kBlockValues, qs, kBlockValues);
      a.d[size_t(r * blocks + b)] = half_bits_to_float(d);
      a.qsum[size_t(r * blocks + b)] = sum;
    }
  }
  return a;
}

// ---- integer block sums, one struct per kernel: load() unpacks a weight block, dot() sums it
// against 32 activation codes. Q8_0's codes are signed; Q4_0's and Q4_1's are the raw nibbles 0…15
// (Q4_0's −8 is applied by the caller through Σq_x, exactly).

struct ScalarKernel {
  struct W {
    int8_t v[32];
  };
  template <GgmlType T>
  static W load(const uint8_t* block) {
    W w;
    if constexpr (T == GgmlType::q8_0) {
      std::memcpy(w.v, block + 2, 32);
    } else {
      const uint8_t* qs = block + (T == GgmlType::q4_1 ? 4 : 2);
      for (int j = 0; j < kHalf; ++j) {
        w.v[j] = int8_t(qs[j] & 15);
        w.v[j + kHalf] = int8_t(qs[j] >> 4);
      }
    }
    return w;
  }
  template <GgmlType T>
  static int32_t dot(const W& w, const int8_t* x) {
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += int32_t(w.v[j]) * int32_t(x[j]);
    return sum;
  }
};

#if INFERLAB_QUANT_AVX2
inline int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// A weight block in a register: Q8_0 as |w| (unsigned bytes; |−128| = 128 fits) with the sign kept
// in w itself, Q4 as the 32 nibbles in value order (low nibbles are values 0–15, high 16–31).
template <GgmlType T>
inline __m256i load_block(const uint8_t* block) {
  if constexpr (T == GgmlType::q8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 2));
  } else {
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + (T == GgmlType::q4_1 ? 4 : 2)));
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(qs, 4), qs);
    return _mm256_and_si256(both, _mm256_set1_epi8(15));
  }
}

struct Avx2Kernel {
  using W = __m256i;
  template <GgmlType T>
  static W load(const uint8_t* block) {
    return load_block<T>(block);
  }
  template <GgmlType T>
  static int32_t dot(W w, const int8_t* xp) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp));
    __m256i pairs;
    if constexpr (T == GgmlType::q8_0) {
      // |w| · (x with w's sign): each pair ≤ 2·128·127 < 2^15, no saturation.
      pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
    } else {
      pairs = _mm256_maddubs_epi16(w, x);  // nibbles ≤ 15: each pair ≤ 2·15·128
    }
    return hsum_i32(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
};
#endif

#if INFERLAB_QUANT_VNNI
inline __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#endif
}

struct VnniKernel {
  using W = __m256i;
  template <GgmlType T>
  static W load(const uint8_t* block) {
    return load_block<T>(block);
  }
  template <GgmlType T>
  static int32_t dot(W w, const int8_t* xp) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xp));
    const __m256i zero = _mm256_setzero_si256();
    if constexpr (T == GgmlType::q8_0) {
      return hsum_i32(dpbusd(zero, _mm256_abs_epi8(w), _mm256_sign_epi8(x, w)));
    } else {
      return hsum_i32(dpbusd(zero, w, x));
    }
  }
};
#endif

// Outputs of one weight row @p wrow (@p blocks blocks of type T) for @p R activation rows from
// @p r0: y[r · out_stride] for r < R. The float arithmetic of quant_matmul.h's contract.
template <class K, GgmlType T, int R>
void tile(const uint8_t* wrow, const Activations& a, int64_t in, int64_t r0, float* y, int64_t out_stride) {
  constexpr int64_t kBytes = T == GgmlType::q8_0 ? 34 : T == GgmlType::q4_0 ? 18 : 20;
  const int64_t blocks = a.blocks;
  float acc[R];
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  const int8_t* xq = a.q.data() + r0 * in;
  const float* xd = a.d.data() + r0 * blocks;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = wrow + b * kBytes;
    const float dw = half_to_float(block);
    const typename K::W w = K::template load<T>(block);
    for (int r = 0; r < R; ++r) {
      int32_t sum = K::template dot<T>(w, xq + r * in + b * kBlockValues);
      if constexpr (T == GgmlType::q4_0) sum -= 8 * a.qsum[size_t((r0 + r) * blocks + b)];
      acc[r] = std::fma(dw * xd[r * blocks + b], float(sum), acc[r]);
      if constexpr (T == GgmlType::q4_1)
        acc[r] = std::fma(half_to_float(block + 2), a.s[size_t((r0 + r) * blocks + b)], acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r * out_stride] = acc[r];
}

template <class K, GgmlType T>
void run(const Activations& a, const BlockMatrix& w, Tensor<float>& y, int64_t rows) {
  const int64_t out = w.out, in = w.in, rb = row_bytes(T, in);
  const int64_t chunks = (out + kChunk - 1) / kChunk;
  // Threads only when there is work for them (waking them costs a few microseconds).
  const bool parallel = rows * out * in >= (int64_t{1} << 18);
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t o0 = c * kChunk, o1 = std::min(out, o0 + kChunk);
    for (int64_t r = 0; r < rows; r += kTileRows) {
      const int64_t R = std::min<int64_t>(kTileRows, rows - r);
      for (int64_t o = o0; o < o1; ++o) {
        const uint8_t* wrow = w.bytes.data() + o * rb;
        float* yp = y.data() + r * out + o;
        switch (R) {
          case 4:
            tile<K, T, 4>(wrow, a, in, r, yp, out);
            break;
          case 3:
            tile<K, T, 3>(wrow, a, in, r, yp, out);
            break;
          case 2:
            tile<K, T, 2>(wrow, a, in, r, yp, out);
            break;
          default:
            tile<K, T, 1>(wrow, a, in, r, yp, out);
            break;
        }
      }
    }
  }
}

template <class K>
void run_type(const Activations& a, const BlockMatrix& w, Tensor<float>& y, int64_t rows) {
  switch (w.type) {
    case GgmlType::q8_0:
      return run<K, GgmlType::q8_0>(a, w, y, rows);
    case GgmlType::q4_0:
      return run<K, GgmlType::q4_0>(a, w, y, rows);
    default:
      return run<K, GgmlType::q4_1>(a, w, y, rows);
  }
}

}  // namespace

std::string_view to_string(QuantKernel kernel) {
  switch (kernel) {
    case QuantKernel::scalar:
      return "scalar";
    case QuantKernel::avx2:
      return "avx2";
    case QuantKernel::vnni:
      return "vnni";
  }
  return "?";
}

bool is_available(QuantKernel kernel) {
  switch (kernel) {
    case QuantKernel::scalar:
      return true;
    case QuantKernel::avx2:
#if INFERLAB_QUANT_AVX2
      return true;
#else
      return false;
#endif
    case QuantKernel::vnni:
#if INFERLAB_QUANT_VNNI
      return true;
#else
      return false;
#endif
  }
  return false;
}

QuantKernel best_quant_kernel() {
  if (is_available(QuantKernel::vnni)) return QuantKernel::vnni;
  if (is_available(QuantKernel::avx2)) return QuantKernel::avx2;
  return QuantKernel::scalar;
}

std::vector<QuantKernel> available_quant_kernels() {
  std::vector<QuantKernel> kernels;
  for (const QuantKernel k : {QuantKernel::scalar, QuantKernel::avx2, QuantKernel::vnni})
    if (is_available(k)) kernels.push_back(k);
  return kernels;
}

void quant_matmul_cpu(const Tensor<float>& x, const BlockMatrix& w, Tensor<float>& y, QuantKernel kernel) {
  require(w.type == GgmlType::q8_0 || w.type == GgmlType::q4_0 || w.type == GgmlType::q4_1, "w.type", to_string(w.type),
          "must be Q8_0, Q4_0 or Q4_1");
  require(w.in > 0 && w.in % kBlockValues == 0, "w.in", w.in, "must be a positive multiple of 32");
  require(w.out >= 0, "w.out", w.out, "must be >= 0");
  const int64_t want = w.out * row_bytes(w.type, w.in);
  require(int64_t(w.bytes.size()) == want, "w.bytes.size()", w.bytes.size(),
          "must be out · row_bytes(type, in) = " + std::to_string(want));
  check_rank(x, 2, "x");
  require(x.dim(1) == w.in, "x.shape[1]", x.dim(1), "must equal w.in = " + std::to_string(w.in));
  check_shape(y, {x.dim(0), w.out}, "y");
  require(is_available(kernel), "kernel", to_string(kernel), "is not available in this build");
  const int64_t rows = x.dim(0);
  if (rows == 0 || w.out == 0) return;
  const Activations a = quantize_activations(x, w.type);
  switch (kernel) {
#if INFERLAB_QUANT_VNNI
    case QuantKernel::vnni:
      return run_type<VnniKernel>(a, w, y, rows);
#endif
#if INFERLAB_QUANT_AVX2
    case QuantKernel::avx2:
      return run_type<Avx2Kernel>(a, w, y, rows);
#endif
    default:
      return run_type<ScalarKernel>(a, w, y, rows);
  }
}

Cost quant_matmul_cost(int64_t rows, GgmlType type, int64_t out, int64_t in) {
  return {2.0 * double(rows) * double(out) * double(in),
          double(out) * double(row_bytes(type, in)) + 4.0 * (double(rows) * double(in) + double(rows) * double(out))};
}

}  // namespace inferlab::quant
