#include "kernels/decode/registry.h"

#include <stdexcept>

#include "kernels/decode/cuda_decode.h"
#include "kernels/fused/cuda_decode_split.h"
#include "kernels/fused/split_kv.h"

namespace inferlab {

namespace {

// Registers @p run for a cache of @p dtype only: a cache of the other dtype is refused (the
// versions themselves handle both; the registry keeps one entry per (name, backend, dtype) so
// that tests and benchmarks see every combination and tolerances follow the dtype).
DecodeFn for_dtype(KvDtype dtype, void (*run)(const Tensor<float>&, const KvCache&, Tensor<float>&)) {
  return [dtype, run](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    require(cache.dtype() == dtype, "cache dtype", to_string(cache.dtype()),
            "this entry is registered for a " + std::string(to_string(dtype)) + " cache");
    run(q, cache, out);
  };
}

}  // namespace

const std::vector<DecodeVersion>& decode_versions() {
  static const std::vector<DecodeVersion> versions = {
      {"cpu/decode", Backend::cpu, KvDtype::fp32, 3, "three loops per (sequence, head), fp32 cache",
       for_dtype(KvDtype::fp32, decode_cpu_naive)},
      {"cpu/decode", Backend::cpu, KvDtype::fp16, 3, "three loops per (sequence, head), fp16 cache",
       for_dtype(KvDtype::fp16, decode_cpu_naive)},
      {"cpu/decode_simd", Backend::cpu, KvDtype::fp32, 3, "SIMD + OpenMP, GQA group together: cache read once, fp32",
       for_dtype(KvDtype::fp32, decode_cpu_simd)},
      {"cpu/decode_simd", Backend::cpu, KvDtype::fp16, 3, "SIMD + OpenMP, GQA group together, fp16 cache (F16C)",
       for_dtype(KvDtype::fp16, decode_cpu_simd)},
      // Chapter 03 CUDA kernels: each on the emulator (sim) and, when built with nvcc, on a GPU.
#define INFERLAB_CUDA_DECODE_VERSIONS(NS, BACKEND)                                                            \
  {"cuda/decode", BACKEND, KvDtype::fp32, 3, "block per (head, sequence), warp dot products, float4 loads",    \
   for_dtype(KvDtype::fp32, NS::decode_cuda)},                                                                \
  {"cuda/decode", BACKEND, KvDtype::fp16, 3, "block per (head, sequence), warp dot products, fp16 cache",      \
   for_dtype(KvDtype::fp16, NS::decode_cuda)},
      INFERLAB_CUDA_DECODE_VERSIONS(sim, Backend::sim)
#if defined(INFERLAB_WITH_CUDA)
      INFERLAB_CUDA_DECODE_VERSIONS(cuda, Backend::cuda)
#endif
#undef INFERLAB_CUDA_DECODE_VERSIONS
      // Chapter 05: split-KV decode (kernels/fused/), S chosen by choose_num_splits() (split_kv.h).
      {"cpu/decode_split", Backend::cpu, KvDtype::fp32, 5, "split-KV: OpenMP over (sequence, KV head, split) + reduce",
       for_dtype(KvDtype::fp32, decode_cpu_split)},
      {"cpu/decode_split", Backend::cpu, KvDtype::fp16, 5, "split-KV over an fp16 cache (F16C) + reduce",
       for_dtype(KvDtype::fp16, decode_cpu_split)},
#define INFERLAB_CUDA_SPLIT_VERSIONS(NS, BACKEND)                                                               \
  {"cuda/decode_split", BACKEND, KvDtype::fp32, 5, "block per (head, sequence, split), then a reduce kernel",    \
   for_dtype(KvDtype::fp32, NS::decode_split_cuda)},                                                            \
  {"cuda/decode_split", BACKEND, KvDtype::fp16, 5, "block per (head, sequence, split), fp16 cache, reduce",      \
   for_dtype(KvDtype::fp16, NS::decode_split_cuda)},
      INFERLAB_CUDA_SPLIT_VERSIONS(sim, Backend::sim)
#if defined(INFERLAB_WITH_CUDA)
      INFERLAB_CUDA_SPLIT_VERSIONS(cuda, Backend::cuda)
#endif
#undef INFERLAB_CUDA_SPLIT_VERSIONS
  };
  return versions;
}

const DecodeVersion& find_decode_version(std::string_view name, Backend backend, KvDtype cache_dtype) {
  std::string known;
  for (const DecodeVersion& version : decode_versions()) {
    if (version.name == name && version.backend == backend && version.cache_dtype == cache_dtype) return version;
    known += (known.empty() ? "" : ", ") + version.name + " (" + std::string(to_string(version.backend)) + ", " +
             std::string(to_string(version.cache_dtype)) + ")";
  }
  throw std::invalid_argument("version = " + std::string(name) + " on backend " + std::string(to_string(backend)) +
                              " with a " + std::string(to_string(cache_dtype)) + " cache: is not registered; known: " +
                              known);
}

const std::vector<KvAppendVersion>& kv_append_versions() {
  static const std::vector<KvAppendVersion> versions = {
      {"cpu/append", Backend::cpu, 3, "host loop: K and V of the new token into slot lengths[b]",
       [](KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) { cache.append(k_new, v_new); }},
      {"cuda/append", Backend::sim, 3, "block per (KV head, sequence), coalesced row copy", sim::kv_append_cuda},
#if defined(INFERLAB_WITH_CUDA)
      {"cuda/append", Backend::cuda, 3, "block per (KV head, sequence), coalesced row copy", cuda::kv_append_cuda},
#endif
  };
  return versions;
}

const KvAppendVersion& kv_append_version_for(Backend backend) {
  for (const KvAppendVersion& version : kv_append_versions())
    if (version.backend == backend) return version;
  throw std::invalid_argument("backend = " + std::string(to_string(backend)) + ": no append version is registered");
}

const std::vector<Int8DecodeVersion>& int8_decode_versions() {
  static const std::vector<Int8DecodeVersion> versions = {
      {"cpu/decode_int8_simd", Backend::cpu, 4, "cpu/decode_simd over int8 rows (widened in the loop), scales folded out",
       decode_int8_cpu_simd},
      {"cuda/decode_int8", Backend::sim, 4, "block per (head, sequence), char4 loads, fp32 FMA", sim::decode_int8_cuda},
#if defined(INFERLAB_WITH_CUDA)
      {"cuda/decode_int8", Backend::cuda, 4, "block per (head, sequence), char4 loads, fp32 FMA",
       cuda::decode_int8_cuda},
#endif
  };
  return versions;
}

const std::vector<Int8AppendVersion>& int8_append_versions() {
  static const std::vector<Int8AppendVersion> versions = {
      {"cpu/append_int8", Backend::cpu, 4, "host loop: quantize the new token's K and V into slot lengths[b]",
       [](Int8KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) { cache.append(k_new, v_new); }},
      {"cuda/append_int8", Backend::sim, 4, "block per (KV head, sequence): block max, quantize, saturate",
       sim::int8_append_cuda},
#if defined(INFERLAB_WITH_CUDA)
      {"cuda/append_int8", Backend::cuda, 4, "block per (KV head, sequence): block max, quantize, saturate",
       cuda::int8_append_cuda},
#endif
  };
  return versions;
}

const Int8AppendVersion& int8_append_version_for(Backend backend) {
  for (const Int8AppendVersion& version : int8_append_versions())
    if (version.backend == backend) return version;
  throw std::invalid_argument("backend = " + std::string(to_string(backend)) +
                              ": no INT8 append version is registered");
}

const std::vector<Fp8DecodeVersion>& fp8_decode_versions() {
  static const std::vector<Fp8DecodeVersion> versions = {
      {"cuda/decode_fp8", Backend::sim, 4, "block per (head, sequence), 4 E4M3 codes per load, software conversion",
       sim::decode_fp8_cuda},
#if defined(INFERLAB_WITH_CUDA)
      {"cuda/decode_fp8", Backend::cuda, 4, "block per (head, sequence), 4 E4M3 codes per load, cvt.e4m3x2 (sm_89+)",
       cuda::decode_fp8_cuda},
#endif
  };
  return versions;
}

}  // namespace inferlab
