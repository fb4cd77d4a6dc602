// The model runner's backend choice (make_model_runner.h).
#include "runtime/engine/make_model_runner.h"

#include <stdexcept>
#include <string>

#include "common/check.h"
#include "common/config.h"
#include "runtime/model/device_runner.h"
#include "runtime/parallel/rank_runner.h"

namespace inferlab::engine {

std::unique_ptr<model::ModelRunner> make_model_runner(const model::LlamaModel& model, Backend backend, int64_t rows,
                                                      int64_t max_seq_len, const KvPaging& paging,
                                                      const KvFormat& kv_format) {
  require_positive("block_size", paging.block_size);
  require_positive("num_blocks", paging.num_blocks);
  const KvCacheShape shape = model.kv_shape(rows, max_seq_len);  // checks rows and max_seq_len
  model::check_kv_format(kv_format);
  if (model.shard().split() || model.stage().split()) {  // chapter 10: rank 0 of a split model leads
    require(backend == Backend::cpu, "backend", to_string(backend),
            "a model split over ranks runs on cpu (over MPI); its steps on the device are not in the lab");
    return parallel::make_leader_runner(model, shape, paging, kv_format);
  }
  if (backend == Backend::cpu) return model::make_cpu_runner(model, shape, paging, kv_format);
  require(kv_format == KvFormat::fp32(), "kv_format", kv_format.name(),
          "the " + std::string(to_string(backend)) +
              " model runner keeps an fp32 KV pool (its KV write and attention kernels are fp32 ones): run another "
              "KV format on the cpu backend");
  require_available(backend);  // cuda: compiled with nvcc and a GPU present
  if (backend == Backend::sim) return sim::make_device_runner(model, shape, paging);
#if INFERLAB_WITH_CUDA
  return cuda::make_device_runner(model, shape, paging);
#else
  throw std::logic_error("make_model_runner: cuda reported available in a build without nvcc");
#endif
}

}  // namespace inferlab::engine
