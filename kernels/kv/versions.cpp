#include "kernels/kv/versions.h"

#include "kernels/kv/cuda_append.h"

namespace inferlab {

std::vector<KvAppendVersion> append_rows() {
  const KvAppendFn cpu = [](KvCache& cache, const Tensor<float>& k_new, const Tensor<float>& v_new) {
    cache.append(k_new, v_new);
  };
  std::vector<KvAppendVersion> rows;
  for (const KvDtype dtype : {KvDtype::fp32, KvDtype::fp16, KvDtype::int8, KvDtype::fp8})
    rows.push_back({"cpu/append", Backend::cpu, dtype, KvFormat(dtype).quantized() ? 4 : 3, precision_of(dtype),
                    "host loop: the new token's K and V (rounded or quantized) into slot lengths[b]", cpu});
  add_device_rows<KvAppendFn, KvDtype>(
      rows, {
                {"cuda/append", KvDtype::fp32, 3, Precision::fp32, "block per (KV head, sequence), coalesced row copy",
                 INFERLAB_SIM_AND_CUDA(kv_append_cuda)},
                {"cuda/append", KvDtype::fp16, 3, Precision::fp16, "block per (KV head, sequence), coalesced row copy",
                 INFERLAB_SIM_AND_CUDA(kv_append_cuda)},
                {"cuda/append_int8", KvDtype::int8, 4, Precision::fp32,
                 "block per (KV head, sequence): block max, quantize, saturate", INFERLAB_SIM_AND_CUDA(int8_append_cuda)},
            });
  return rows;
}

}  // namespace inferlab
