#include "kernels/kv/kv_format.h"

#include "common/check.h"

namespace inferlab {

std::string_view to_string(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::fp32:
      return "fp32";
    case KvDtype::fp16:
      return "fp16";
    case KvDtype::int8:
      return "int8";
    case KvDtype::fp8:
      return "fp8";
  }
  return "?";
}

std::string_view to_string(KeyScaling scaling) {
  return scaling == KeyScaling::per_token ? "per_token" : "per_channel";
}

std::string_view to_string(ScaleDtype dtype) {
  return dtype == ScaleDtype::fp32 ? "fp32" : "fp16";
}

KvFormat KvFormat::plain(KvDtype dtype) {
  require(dtype == KvDtype::fp32 || dtype == KvDtype::fp16, "dtype", to_string(dtype),
          "a plain format is fp32 or fp16 (int8 and fp8 need scales: KvFormat::int8(), KvFormat::fp8())");
  return {dtype};
}

size_t bytes_per_element(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::fp32:
      return 4;
    case KvDtype::fp16:
      return 2;
    default:
      return 1;
  }
}

size_t KvFormat::element_bytes() const {
  return bytes_per_element(dtype);
}

size_t KvFormat::scale_bytes() const {
  switch (dtype) {
    case KvDtype::int8:
      return bytes_per_scale(scale_dtype);
    case KvDtype::fp8:
      return 4;
    default:
      return 0;
  }
}

Precision precision_of(KvDtype dtype) {
  return dtype == KvDtype::fp16 ? Precision::fp16 : Precision::fp32;
}

Precision KvFormat::precision() const {
  return precision_of(dtype);
}

std::string KvFormat::name() const {
  if (dtype != KvDtype::int8) return std::string(to_string(dtype));
  std::string name = key_scaling == KeyScaling::per_channel ? "int8-channel" : "int8";
  if (scale_dtype == ScaleDtype::fp16) name += "/fp16-scales";
  return name;
}

KvFormat parse_kv_format(std::string_view text) {
  std::string_view base = text;
  bool fp16_scales = false;
  if (const size_t slash = text.find('/'); slash != std::string_view::npos) {
    require(text.substr(slash) == "/fp16-scales", "cache format", text,
            "the only suffix is /fp16-scales (INT8 scales stored as fp16)");
    base = text.substr(0, slash);
    fp16_scales = true;
  }
  const ScaleDtype scales = fp16_scales ? ScaleDtype::fp16 : ScaleDtype::fp32;
  if (base == "int8") return KvFormat::int8(KeyScaling::per_token, scales);
  if (base == "int8-channel") return KvFormat::int8(KeyScaling::per_channel, scales);
  require(!fp16_scales, "cache format", text, "/fp16-scales applies to int8 and int8-channel only");
  if (base == "fp32") return KvFormat::fp32();
  if (base == "fp16") return KvFormat::fp16();
  if (base == "fp8") return KvFormat::fp8();
  require(false, "cache format", text, "must be fp32, fp16, int8, int8-channel or fp8 (int8 may add /fp16-scales)");
  return {};
}

}  // namespace inferlab
