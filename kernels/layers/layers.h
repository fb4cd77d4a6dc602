#pragma once
/// @file layers.h
/// The non-attention layers of a Llama-style decoder (chapter 07's model): the linear layer
/// (a GEMM against a weight matrix), RMSNorm, rotary position embedding (RoPE) and the SwiGLU
/// gate. Every function works on a *flattened token batch* — rows of activations, one per token,
/// whatever sequence each token belongs to (vLLM's layout) — and is **batch-invariant**: a row's
/// result depends only on that row and the weights, bit for bit, never on how many rows are in
/// the call or where the row sits. Chapter 07 relies on this: a request's tokens are the same
/// alone or batched with any others.
///
/// Why linear_cpu() is not OpenBLAS: a BLAS picks its micro-kernels and edge paths by the
/// matrix sizes, so a row's dot products are summed in a different order when the batch size
/// changes. Measured with this machine's OpenBLAS 0.3.21: a row of x·Wᵀ computed in a call of M
/// rows differs in some bits from the same row computed in a call of 80 rows for 229–236 of the
/// 240 (M, offset) pairs tried, for every shape of chapter 07's models. linear_openblas() stays
/// for comparison (chapter 07's benchmark times both).

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/cost.h"
#include "common/tensor.h"
#include "kernels/layers/weight.h"

namespace inferlab {

/// y = x · wᵀ: @p x is [rows, in], @p w is [out, in] (each output feature's weights contiguous,
/// llama2.c's layout), @p y is [rows, out], all row-major fp32. Every output element is one dot
/// product summed in a fixed order (vector lanes over the input in order, the same horizontal
/// reduction, then the scalar tail): batch-invariant. Register tiles of 4 rows × 4 outputs, OpenMP
/// over the outputs; within a block of rows each weight tile is loaded once for all its rows, so
/// a decode step of B tokens reads the weights once (AI grows with B). Throws
/// std::invalid_argument when a shape does not match.
void linear_cpu(const Tensor<float>& x, const Tensor<float>& w, Tensor<float>& y);

/// The same product over a typed weight (@p w: [out, in]; weight.h). fp32, fp16, bf16: 16-bit
/// weights are widened to fp32 in registers as they are loaded, then summed exactly as above
/// (same order, same reduction), bit-identical to the overload above for fp32. Q8_0, Q4_0, Q4_1:
/// chapter 11's packed_matmul_cpu() over the weight's repacked blocks (kernels/quant/packed_matmul.h)
/// — x quantized to 8 bits a row, integer block sums, bit-identical to chapter 08's
/// quant_matmul_cpu() — so the result carries the activations' rounding. Batch-invariant in every format.
/// Throws std::invalid_argument when a shape does not match.
void linear_cpu(const Tensor<float>& x, const Weight& w, Tensor<float>& y);

/// The same product through OpenBLAS's cblas_sgemm — faster for large batches, not
/// batch-invariant (see the file comment). For benchmarks.
void linear_openblas(const Tensor<float>& x, const Tensor<float>& w, Tensor<float>& y);

/// FLOPs and bytes of linear_cpu() on @p rows rows: 2·rows·out·in FLOPs; the weights read once
/// (@p bytes_per_weight each), x read and y written once (fp32).
Cost linear_cost(int64_t rows, int64_t out, int64_t in, int64_t bytes_per_weight = 4);

/// linear_cost() for the weight @p w: its real bytes, exact in every format (weight.h's bytes()).
Cost linear_cost(int64_t rows, const Weight& w);

/// RMSNorm of each row of @p x ([rows, dim]): y = x / √(mean(x²) + @p eps) ⊙ @p weight ([dim]).
/// y may alias x. Throws std::invalid_argument when a shape does not match.
void rms_norm_cpu(const Tensor<float>& x, std::span<const float> weight, float eps, Tensor<float>& y);

/// Which elements of a head RoPE rotates together. Both rotate pair i by position · θ^(−2i/d);
/// they differ in where pair i's two elements sit (a model's q/k weights are laid out for one).
/// The two are the same rotation up to a permutation of each head's elements: half_split on a
/// head v equals adjacent on u with u[2i] = v[i], u[2i+1] = v[i + d/2] — which is how llama.cpp's
/// converter turns a Hugging Face model into a GGUF one (it permutes the rows of wq and wk).
enum class RopeStyle {
  adjacent,    ///< (x[2i], x[2i+1]): llama2.c's run.c, and llama.cpp's "normal" RoPE for GGUF llama models
  half_split,  ///< (x[i], x[i + d/2]): Hugging Face's rotate_half (llama.cpp's "neox" RoPE)
};

/// "adjacent", "half_split".
std::string_view to_string(RopeStyle style);

/// The style named @p name ("adjacent", "half_split"). Throws std::invalid_argument naming
/// @p name and the known styles.
RopeStyle parse_rope_style(std::string_view name);

/// Rotary position embedding, in place: in each head of @p head_dim elements, pair i — the
/// elements (2i, 2i+1) for RopeStyle::adjacent (llama2.c), (i, i + head_dim/2) for
/// RopeStyle::half_split (Hugging Face) — is rotated by the angle position · θ^(−2i/head_dim):
/// (a, b) → (a·cos − b·sin, a·sin + b·cos). @p x is [rows, heads · head_dim] (only its first
/// @p heads · head_dim columns when the row is longer), @p positions one per row; @p cos_sin is
/// the table [max_position][head_dim / 2][2] of (cos, sin) that rope_table() makes. Both styles
/// do the same arithmetic on each pair, so half_split on a head is bit for bit adjacent on the
/// permuted head (RopeStyle). Throws std::invalid_argument naming a position outside the table,
/// a count of positions that is not @p rows, or a style that is not one of the enum's.
void rope_cpu(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim,
              std::span<const int64_t> positions, std::span<const float> cos_sin,
              RopeStyle style = RopeStyle::adjacent);

/// The (cos, sin) table for rope_cpu(): [max_position][head_dim / 2][2], computed in double
/// precision and rounded once. One table serves both styles: pair i's angle does not depend on
/// where its two elements sit. Throws std::invalid_argument when head_dim is odd or a size ≤ 0.
std::vector<float> rope_table(int64_t max_position, int64_t head_dim, double theta);

/// SwiGLU's gate: out[r][j] = silu(gate_up[r][j]) · gate_up[r][hidden + j], silu(a) = a / (1 +
/// e^−a), for @p gate_up = [rows, 2·hidden] (w1's and w3's outputs side by side); @p out is
/// [rows, hidden].
void swiglu_cpu(const Tensor<float>& gate_up, Tensor<float>& out);

}  // namespace inferlab
