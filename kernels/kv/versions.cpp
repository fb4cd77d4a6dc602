#include "kernels/kv/versions.h"

#include "common/config.h"
#include "kernels/kv/cuda_append.h"

namespace inferlab {

std::vector<KvAppendVersion> append_rows() {
  const KvAppendFn cpu = [](KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
    cache.append(k_new, v_new);
  };
  std::vector<KvAppendVersion> rows;
  for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16, KvDtype::int8, KvDtype::fp8})
    rows.push_back({"cpu/append", Backend::cpu, dtype, dtype == KvDtype::fp32 || dtype == KvDtype::fp16 ? 3 : 4,
                    precision_of(dtype), "host loop: the new token's K and V (rounded or quantized) into slot lengths[b]",
                    cpu});
  const auto add_device = [&rows](Backend backend, const KvAppendFn& plain, const KvAppendFn& int8) {
    for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16})
      rows.push_back({"cuda/append", backend, dtype, 3, precision_of(dtype),
                      "block per (KV head, sequence), coalesced row copy", plain});
    rows.push_back({"cuda/append_int8", backend, KvDtype::int8, 4, Precision::fp32,
                    "block per (KV head, sequence): block max, quantize, saturate", int8});
  };
  add_device(Backend::sim, sim::kv_append_cuda, sim::int8_append_cuda);
#if INFERLAB_WITH_CUDA
  add_device(Backend::cuda, cuda::kv_append_cuda, cuda::int8_append_cuda);
#endif
  return rows;
}

}  // namespace inferlab
