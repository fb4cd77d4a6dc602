#pragma once
/// @file block_formats.h
/// ggml's tensor types as a GGUF file names them (ggml `src/ggml-common.h`), with the facts a
/// reader needs before it touches the data: how many values a block holds and how many bytes it
/// takes. The block formats store 32 values with a per-block fp16 scale (and, for Q4_1, a
/// minimum); a row of n values is n / 32 blocks, so n must be a multiple of 32:
///
/// | type | bytes a block | layout                            | value j (0–15) and j + 16                |
/// | ---- | ------------- | --------------------------------- | ---------------------------------------- |
/// | Q4_0 | 18            | fp16 d, u8 qs[16]                 | ((qs[j] & 15) − 8)·d, ((qs[j] >> 4) − 8)·d |
/// | Q4_1 | 20            | fp16 d, fp16 m, u8 qs[16]         | (qs[j] & 15)·d + m, (qs[j] >> 4)·d + m      |
/// | Q8_0 | 34            | fp16 d, i8 qs[32]                 | qs[j]·d (j 0–31)                          |
/// | Q8_1 | 36            | fp16 d, fp16 s = d·Σqs, i8 qs[32] | qs[j]·d (j 0–31)                          |
///
/// Bytes per weight: Q4_0 0.5625, Q4_1 0.625, Q8_0 1.0625 — the figure that sets a batch-1
/// decode step's floor (weight.h). The quantizers and kernels over these blocks live beside this
/// file (block_quant.h, quant_matmul.h).

#include <cstdint>
#include <optional>
#include <string_view>

namespace inferlab::quant {

/// A ggml tensor type, numbered as in GGUF files (only the ones the lab reads have names here;
/// any other number is carried as it is and rejected by is_supported()).
enum class GgmlType : uint32_t {
  f32 = 0,   ///< IEEE fp32
  f16 = 1,   ///< IEEE fp16
  q4_0 = 2,  ///< 32 values: fp16 scale, 4-bit codes centred on 8
  q4_1 = 3,  ///< 32 values: fp16 scale and fp16 minimum, 4-bit codes
  q8_0 = 8,  ///< 32 values: fp16 scale, int8 codes
  q8_1 = 9,  ///< 32 values: fp16 scale and fp16 scale·Σcodes, int8 codes (activations)
  bf16 = 30, ///< bfloat16
};

/// True for the types above: the ones the lab can size, read and compute with.
bool is_supported(GgmlType type);

/// "F32", "F16", "Q4_0", "Q4_1", "Q8_0", "Q8_1", "BF16" (ggml's names), or "type N" for another
/// number.
std::string_view to_string(GgmlType type);

/// The type named @p name, ggml's spelling in either case ("q4_1", "Q8_0", "f32"); nullopt for
/// another name.
std::optional<GgmlType> parse_ggml_type(std::string_view name);

/// Values in one block: 32 for the block formats, 1 for f32, f16 and bf16. Throws
/// std::invalid_argument naming the type when it is not supported.
int64_t block_values(GgmlType type);

/// Bytes of one block (18, 20, 34, 36; 4 for f32, 2 for f16 and bf16). Throws
/// std::invalid_argument naming the type when it is not supported.
int64_t block_bytes(GgmlType type);

/// Bytes of a row of @p values values: values / block_values · block_bytes. Throws
/// std::invalid_argument when the type is not supported or @p values is negative or not a
/// multiple of block_values(type), naming both.
int64_t row_bytes(GgmlType type, int64_t values);

}  // namespace inferlab::quant
