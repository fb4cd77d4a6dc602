#include "kernels/decode/versions.h"

#include "common/check.h"
#include "kernels/decode/cuda_decode.h"

namespace inferlab {

namespace {

// @p run, refusing a cache of another element type than @p dtype.
DecodeFn checked_for(KvDtype dtype, DecodeFn run) {
  return [dtype, run = std::move(run)](const Tensor<float>& q, const KvCache& cache, Tensor<float>& out) {
    require(cache.dtype() == dtype, "cache dtype", to_string(cache.dtype()),
            "this entry is registered for a " + std::string(to_string(dtype)) + " cache");
    run(q, cache, out);
  };
}

}  // namespace

DecodeVersion decode_row(std::string name, Backend backend, KvDtype dtype, int chapter, std::string summary,
                         DecodeFn run) {
  return {std::move(name), backend, dtype, chapter, precision_of(dtype), std::move(summary),
          checked_for(dtype, std::move(run))};
}

void add_decode_device_rows(std::vector<DecodeVersion>& versions, const std::vector<DeviceRow<DecodeFn, KvDtype>>& rows) {
  std::vector<DeviceRow<DecodeFn, KvDtype>> checked = rows;
  for (DeviceRow<DecodeFn, KvDtype>& row : checked) {
    row.precision = precision_of(row.input);
    row.sim = checked_for(row.input, row.sim);
    if (row.cuda) row.cuda = checked_for(row.input, row.cuda);
  }
  add_device_rows(versions, checked);
}

std::vector<DecodeVersion> plain_decode_rows() {
  std::vector<DecodeVersion> rows = {
      decode_row("cpu/decode", Backend::cpu, KvDtype::fp32, 3, "three loops per (sequence, head), fp32 cache",
                 decode_cpu_naive),
      decode_row("cpu/decode", Backend::cpu, KvDtype::fp16, 3, "three loops per (sequence, head), fp16 cache",
                 decode_cpu_naive),
      decode_row("cpu/decode_simd", Backend::cpu, KvDtype::fp32, 3,
                 "SIMD + OpenMP, GQA group together: cache read once, fp32", decode_cpu_simd),
      decode_row("cpu/decode_simd", Backend::cpu, KvDtype::fp16, 3,
                 "SIMD + OpenMP, GQA group together, fp16 cache (F16C)", decode_cpu_simd),
      decode_row("cpu/decode_int8_simd", Backend::cpu, KvDtype::int8, 4,
                 "cpu/decode_simd over int8 rows (widened in the loop), scales folded out", decode_int8_cpu_simd),
  };
  // The CUDA kernels: each on the emulator (sim) and, when built with nvcc, on a GPU.
  add_decode_device_rows(
      rows,
      {
          {"cuda/decode", KvDtype::fp32, 3, Precision::fp32, "block per (head, sequence), warp dot products, float4 loads",
           INFERLAB_SIM_AND_CUDA(decode_cuda)},
          {"cuda/decode", KvDtype::fp16, 3, Precision::fp16, "block per (head, sequence), warp dot products, fp16 cache",
           INFERLAB_SIM_AND_CUDA(decode_cuda)},
          {"cuda/decode_int8", KvDtype::int8, 4, Precision::fp32, "block per (head, sequence), char4 loads, fp32 FMA",
           INFERLAB_SIM_AND_CUDA(decode_int8_cuda)},
          {"cuda/decode_fp8", KvDtype::fp8, 4, Precision::fp32,
           "block per (head, sequence), 4 E4M3 codes per load, hardware (nvcc) or software (sim) conversion",
           INFERLAB_SIM_AND_CUDA(decode_fp8_cuda)},
      });
  return rows;
}

}  // namespace inferlab
