// `inferlab decode`: one decode step of a registered version on .npy data (chapter 03), so that
// external data (a real model's cache) can be checked against the lab's kernels. With --cache
// int8 | int8-channel | fp8 (chapter 04) the cache is quantized on load and an INT8 / FP8
// version runs.
#include <iostream>
#include <stdexcept>
#include <string_view>

#include "common/npy.h"
#include "kernels/decode/registry.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"

namespace inferlab::cli {

namespace {

// The entry of @p versions called @p name on @p backend; throws std::invalid_argument listing
// the known ones otherwise.
template <class Version>
const Version& find_version(const std::vector<Version>& versions, std::string_view name, Backend backend,
                            std::string_view cache) {
  std::string known;
  for (const Version& version : versions) {
    if (version.name == name && version.backend == backend) return version;
    known += (known.empty() ? "" : ", ") + version.name + " (" + std::string(to_string(version.backend)) + ")";
  }
  throw std::invalid_argument("version = " + std::string(name) + " on backend " + std::string(to_string(backend)) +
                              " with an " + std::string(cache) + " cache: is not registered; known: " + known);
}

// Runs the INT8 or FP8 version for --cache @p cache_kind on the fp32 data, writes the output and
// reports the quantization.
int decode_quantized(const Args& args, const std::string& cache_kind, const Tensor<float>& q, const Tensor<float>& k,
                     const Tensor<float>& v, const std::vector<int64_t>& lengths, Backend backend) {
  const bool fp8 = cache_kind == "fp8";
  Tensor<float> out;
  std::string name;
  int64_t saturated = 0;
  size_t bytes = 0;
  if (fp8) {
    const Fp8DecodeVersion& version =
        find_version(fp8_decode_versions(), args.get_or("version", "cuda/decode_fp8"), backend, "fp8");
    const Fp8KvCache cache = make_fp8_kv_cache(k, v, lengths);
    out = Tensor<float>(decode_shape(q, cache).query_shape());
    version.run(q, cache, out);
    name = version.name, saturated = cache.saturated_count(), bytes = cache.bytes();
  } else {
    const KeyScaling scaling = cache_kind == "int8" ? KeyScaling::per_token : KeyScaling::per_channel;
    const Int8DecodeVersion& version = find_version(
        int8_decode_versions(),
        args.get_or("version", backend == Backend::cpu ? "cpu/decode_int8_simd" : "cuda/decode_int8"), backend, "int8");
    const Int8KvCache cache = make_int8_kv_cache(k, v, lengths, scaling);
    out = Tensor<float>(decode_shape(q, cache).query_shape());
    version.run(q, cache, out);
    name = version.name, saturated = cache.saturated_count(), bytes = cache.bytes();
  }
  write_npy(args.required("out"), out);
  std::cout << name << " (" << to_string(backend) << ", " << cache_kind << " cache, quantized on load: "
            << bytes << " bytes vs " << 2 * k.size() * 4 << " as fp32; " << saturated
            << " values saturated): " << to_string(out.shape()) << " written to " << args.required("out") << "\n";
  return 0;
}

}  // namespace

int decode(const std::vector<std::string>& argv) {
  const Args args(argv, {});
  args.check_known({"q", "k-cache", "v-cache", "lengths", "out", "version", "backend", "cache"});
  const Tensor<float> q = read_npy_float(args.required("q"));
  const std::string k_path = args.required("k-cache"), v_path = args.required("v-cache");
  const Tensor<float> k = read_npy_float(k_path);
  const Tensor<float> v = read_npy_float(v_path);
  const Tensor<int64_t> lengths_tensor = read_npy_int64(args.required("lengths"));
  require(lengths_tensor.rank() == 1, "lengths.shape", to_string(lengths_tensor.shape()), "must be [batch]");
  const std::vector<int64_t> lengths(lengths_tensor.span().begin(), lengths_tensor.span().end());
  // The cache keeps the files' precision: float16 files give an fp16 cache, anything else fp32.
  const bool half = read_npy(k_path).dtype == NpyDType::f16 && read_npy(v_path).dtype == NpyDType::f16;
  const KvDtype dtype = half ? KvDtype::fp16 : KvDtype::fp32;

  const Backend backend = parse_backend(args.get_or("backend", "cpu"));
  require_available(backend);
  if (args.has("cache")) {
    const std::string kind = args.required("cache");
    require(kind == "int8" || kind == "int8-channel" || kind == "fp8", "--cache", kind,
            "must be int8 (per-token K scales), int8-channel (per-channel K scales) or fp8 (E4M3)");
    return decode_quantized(args, kind, q, k, v, lengths, backend);
  }
  const DecodeVersion& version = find_decode_version(args.get_or("version", "cpu/decode"), backend, dtype);
  const KvCache cache = make_kv_cache(k, v, lengths, dtype);
  const DecodeShape shape = decode_shape(q, cache);
  Tensor<float> out(shape.query_shape());
  version.run(q, cache, out);
  write_npy(args.required("out"), out);
  std::cout << version.name << " (" << to_string(backend) << ", " << to_string(dtype)
            << " cache): " << to_string(out.shape()) << " written to " << args.required("out") << "\n";
  return 0;
}

}  // namespace inferlab::cli
