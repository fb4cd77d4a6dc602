#include "kernels/paged/versions.h"

#include <string>

#include "common/check.h"
#include "kernels/paged/cuda_prefill_with_cache.h"

namespace inferlab {

namespace {

// @p run, refusing a cache of another element type than @p dtype.
PrefillWithCacheFn checked_for(KvDtype dtype, PrefillWithCacheFn run) {
  if (!run) return run;
  return [dtype, run = std::move(run)](const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths,
                                       const KvCache& cache, Tensor<float>& out) {
    require(cache.dtype() == dtype, "cache dtype", to_string(cache.dtype()),
            "this entry is registered for a " + std::string(to_string(dtype)) + " cache");
    run(q, chunk_lengths, cache, out);
  };
}

}  // namespace

std::vector<PrefillWithCacheVersion> prefill_with_cache_rows() {
  std::vector<PrefillWithCacheVersion> rows;
  // The cpu version reads every format (int8: the row runs the cache's own scale layout; a test
  // cache of KvDtype::int8 is per-token K with fp32 scales); the device one fp32 and fp16 only.
  for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16, KvDtype::int8, KvDtype::fp8})
    rows.push_back({"cpu/prefill_with_cache", Backend::cpu, dtype, 6, precision_of(dtype),
                    "fused: tiles of the chunk's queries stream the prefix together (attend_keys), causal tail per token",
                    checked_for(dtype, [](const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths,
                                                          const KvCache& cache, Tensor<float>& out) {
                      prefill_with_cache_cpu(q, chunk_lengths, cache, out);
                    })});
  std::vector<DeviceRow<PrefillWithCacheFn, KvDtype>> device;
  for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16}) {
    DeviceRow<PrefillWithCacheFn, KvDtype> row{"cuda/prefill_with_cache", dtype, 6, precision_of(dtype),
                                               "the decode kernel over the chunk's tokens: block per (head, token)",
                                               INFERLAB_SIM_AND_CUDA(prefill_with_cache_cuda)};
    row.sim = checked_for(dtype, row.sim);
    row.cuda = checked_for(dtype, row.cuda);
    device.push_back(row);
  }
  add_device_rows(rows, device);
  return rows;
}

}  // namespace inferlab
