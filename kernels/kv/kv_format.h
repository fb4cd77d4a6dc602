#pragma once
/// @file kv_format.h
/// How a KV cache stores one element (chapters 03–04): fp32, fp16, INT8 with scales, FP8 E4M3
/// with scales — the element half of the cache's design (the layout half is kv_layout.h).
///
/// | format            | element bytes | scales                                             |
/// | ----------------- | ------------- | -------------------------------------------------- |
/// | fp32              | 4             | none                                               |
/// | fp16              | 2             | none (IEEE half bits, rounded to nearest even)     |
/// | int8              | 1             | V: one per row; K: one per row (per_token) or one  |
/// |                   |               | per channel of each (sequence, KV head)            |
/// |                   |               | (per_channel, KIVI); fp32 or fp16 (rounded up)     |
/// | fp8 (E4M3)        | 1             | K and V: one fp32 scale per row                    |
///
/// The quantization rules themselves (Δ = max|x|/127 for INT8, max|x|/448 for FP8) are in
/// quantize.h; the cache applies them on prefill and append.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/tolerance.h"

namespace inferlab {

/// The element type a KV cache stores.
enum class KvDtype {
  fp32,  ///< float
  fp16,  ///< IEEE half, stored as its 16 bits
  int8,  ///< symmetric INT8 codes with scales (chapter 04)
  fp8,   ///< FP8 E4M3 codes with one fp32 scale per row (chapter 04)
};

/// The granularity of K's INT8 scales (V always has one scale per row).
enum class KeyScaling {
  per_token,    ///< one scale per (token, KV head), like V
  per_channel,  ///< one scale per (channel, KV head, sequence), calibrated on the prompt
};

/// How INT8 scales are stored.
enum class ScaleDtype {
  fp32,  ///< 4 bytes per scale (the default)
  fp16,  ///< 2 bytes per scale, rounded up (quantize.h: scale_to_fp16_up)
};

/// "fp32", "fp16", "int8", "fp8".
std::string_view to_string(KvDtype dtype);
/// "per_token", "per_channel".
std::string_view to_string(KeyScaling scaling);
/// "fp32", "fp16".
std::string_view to_string(ScaleDtype dtype);

/// One element format: the dtype and, for INT8, how its scales are kept. Build one with the
/// named constructors (KvFormat::fp16(), KvFormat::int8(KeyScaling::per_channel), …).
struct KvFormat {
  KvDtype dtype = KvDtype::fp32;                  ///< the element type
  KeyScaling key_scaling = KeyScaling::per_token;  ///< K's scale granularity (int8; fp8 is per token)
  ScaleDtype scale_dtype = ScaleDtype::fp32;      ///< how scales are stored (int8; fp8 uses fp32)

  /// fp32.
  constexpr KvFormat() = default;
  /// @p type with @p scaling K scales stored as @p scales (the last two matter for int8 only).
  /// Implicit, so that a plain type names its format: KvCache(shape, KvDtype::fp16).
  constexpr KvFormat(KvDtype type, KeyScaling scaling = KeyScaling::per_token,  // NOLINT(google-explicit-constructor)
                     ScaleDtype scales = ScaleDtype::fp32)
      : dtype(type), key_scaling(scaling), scale_dtype(scales) {}

  /// float elements, no scales.
  static constexpr KvFormat fp32() { return {KvDtype::fp32}; }
  /// fp16 elements, no scales.
  static constexpr KvFormat fp16() { return {KvDtype::fp16}; }
  /// INT8 elements with scales of @p scaling granularity for K, stored as @p scales.
  static constexpr KvFormat int8(KeyScaling scaling = KeyScaling::per_token, ScaleDtype scales = ScaleDtype::fp32) {
    return {KvDtype::int8, scaling, scales};
  }
  /// FP8 E4M3 elements with one fp32 scale per row of K and of V.
  static constexpr KvFormat fp8() { return {KvDtype::fp8}; }
  /// The format of a plain (unquantized) cache of @p dtype (fp32 or fp16).
  static KvFormat plain(KvDtype dtype);

  /// True for int8 and fp8: values are stored as codes with scales.
  bool quantized() const { return dtype == KvDtype::int8 || dtype == KvDtype::fp8; }
  /// True when K's scales are one per channel (int8 per_channel).
  bool per_channel() const { return dtype == KvDtype::int8 && key_scaling == KeyScaling::per_channel; }
  /// Bytes per cached element: 4, 2, 1, 1.
  size_t element_bytes() const;
  /// Bytes per stored scale: 0 (no scales), 4, or 2 (int8 with fp16 scales).
  size_t scale_bytes() const;
  /// The arithmetic precision (and so the test tolerance) of attention over this cache.
  Precision precision() const;
  /// A short name: "fp32", "fp16", "int8", "int8-channel", "int8/fp16-scales",
  /// "int8-channel/fp16-scales", "fp8" (parse_kv_format() reads them back).
  std::string name() const;

  /// Same dtype, scaling and scale type.
  friend bool operator==(const KvFormat&, const KvFormat&) = default;
};

/// Parses a KvFormat::name() ("fp32", "fp16", "int8", "int8-channel", "fp8", optionally followed
/// by "/fp16-scales" for int8); throws std::invalid_argument naming @p text otherwise.
KvFormat parse_kv_format(std::string_view text);

/// Bytes per cached element of a plain @p dtype: 4 (fp32), 2 (fp16), 1 (int8, fp8).
size_t bytes_per_element(KvDtype dtype);
/// Bytes per stored scale of @p dtype: 4 or 2.
inline size_t bytes_per_scale(ScaleDtype dtype) {
  return dtype == ScaleDtype::fp32 ? 4 : 2;
}
/// The precision of attention over a cache of @p dtype: fp16 for fp16, fp32 otherwise (the
/// quantized formats dequantize to fp32; their error budget is chapter 04's, not a tolerance).
Precision precision_of(KvDtype dtype);

}  // namespace inferlab
