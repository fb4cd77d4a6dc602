// `inferlab decode`: one decode step of a registered version on .npy data (chapter 03), so that
// external data (a real model's cache) can be checked against the lab's kernels. With --cache
// int8 | int8-channel | fp8 (chapter 04) the cache is quantized on load and an INT8 / FP8
// version runs. With --block-size N (chapter 06) the cache is paged: blocks of N tokens handed
// out in scattered order (to_paged), read through the block table by the same version — the
// output is the contiguous cache's.
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>

#include "common/npy.h"
#include "kernels/kv/kv_factories.h"
#include "kernels/registry.h"
#include "common/args.h"
#include "tools/cli/commands.h"

namespace inferlab::cli {

namespace {

const char* kDecodeUsage = R"(usage: inferlab decode --q Q.npy --k-cache K.npy --v-cache V.npy --lengths LENGTHS.npy --out O.npy
                       [--version NAME] [--backend cpu|sim|cuda] [--cache int8|int8-channel|fp8]
                       [--block-size N]

  One decode step (chapter 03) of a registered version on .npy data:
    Q [batch, heads, d]; K and V caches [batch, kv_heads, max_seq_len, d] (float16 files give an
    fp16 cache, anything else fp32); lengths int [batch] (tokens cached per sequence).
  Writes O [batch, heads, d] as fp32.
  --version NAME          an implementation (default: cpu/decode on cpu, cuda/decode on sim and
                          cuda; `inferlab versions` lists them)
  --backend B             cpu (default), sim (the CUDA emulator) or cuda
  --cache F               quantize the cache on load (chapter 04): int8 (per-token K scales),
                          int8-channel (per-channel K scales) or fp8 (E4M3), run an INT8 / FP8
                          version and print the bytes and the values saturated
  --block-size N          page the cache (chapter 06): blocks of N tokens in scattered order, read
                          through the block table; the output is the contiguous cache's
)";

// The cache as the user asked for it: contiguous, or (--block-size N) paged over scattered blocks.
KvCache laid_out(const Args& args, KvCache cache) {
  if (!args.has("block-size")) return cache;
  const int64_t block_size = *args.integer("block-size");
  require(block_size > 0, "--block-size", block_size, "must be a positive number of tokens per block");
  return to_paged(cache, block_size, /*seed=*/0);
}

// "fp16 cache" or "fp16 cache, paged: 12 blocks of 16 tokens".
std::string describe(const KvCache& cache, const std::string& format) {
  if (!cache.paged()) return format + " cache";
  return format + " cache, paged: " + std::to_string(cache.paging().num_blocks) + " blocks of " +
         std::to_string(cache.paging().block_size) + " tokens in scattered order";
}

// The version run without --version: the plain loops on cpu, the chapter's CUDA kernel on sim
// and cuda (the CPU has no FP8 version: cuda/decode_fp8 names what is missing).
const char* default_version(Backend backend, KvDtype dtype) {
  const bool cpu = backend == Backend::cpu;
  switch (dtype) {
    case KvDtype::int8:
      return cpu ? "cpu/decode_int8_simd" : "cuda/decode_int8";
    case KvDtype::fp8:
      return "cuda/decode_fp8";
    default:
      return cpu ? "cpu/decode" : "cuda/decode";
  }
}

// Runs the INT8 or FP8 version for the quantized @p format on the fp32 data, writes the output
// and reports the quantization.
int decode_quantized(const Args& args, const KvFormat& format, const Tensor<float>& q, const Tensor<float>& k,
                     const Tensor<float>& v, const std::vector<int64_t>& lengths, Backend backend) {
  const DecodeVersion& version =
      find_decode_version(args.get_or("version", default_version(backend, format.dtype)), backend, format.dtype);
  const KvCache cache = laid_out(args, make_kv_cache(k, v, lengths, format));
  Tensor<float> out(decode_shape(q, cache).query_shape());
  version.run(q, cache, out);
  write_npy(args.required("out"), out);
  std::cout << version.name << " (" << to_string(backend) << ", " << describe(cache, format.name())
            << ", quantized on load: " << cache.bytes() << " bytes vs " << 2 * k.size() * 4 << " as fp32; "
            << cache.saturated_count() << " values saturated): " << to_string(out.shape()) << " written to "
            << args.required("out") << "\n";
  return 0;
}

}  // namespace

int decode(const std::vector<std::string>& argv) {
  const Args args(argv, {});
  if (args.help()) {
    std::cout << kDecodeUsage;
    return 0;
  }
  args.check_known({"q", "k-cache", "v-cache", "lengths", "out", "version", "backend", "cache", "block-size"});
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
    return decode_quantized(args, parse_kv_format(kind), q, k, v, lengths, backend);
  }
  const DecodeVersion& version =
      find_decode_version(args.get_or("version", default_version(backend, dtype)), backend, dtype);
  const KvCache cache = laid_out(args, make_kv_cache(k, v, lengths, dtype));
  const DecodeShape shape = decode_shape(q, cache);
  Tensor<float> out(shape.query_shape());
  version.run(q, cache, out);
  write_npy(args.required("out"), out);
  std::cout << version.name << " (" << to_string(backend) << ", " << describe(cache, std::string(to_string(dtype)))
            << "): " << to_string(out.shape()) << " written to " << args.required("out") << "\n";
  return 0;
}

}  // namespace inferlab::cli
