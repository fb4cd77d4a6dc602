// The model runner's backend choice and the cpu runner (model_runner.h); the sim and cuda
// runners are device_runner.cu.
#include "runtime/model/model_runner.h"

#include <string>

#include "common/check.h"
#include "common/config.h"
#include "kernels/kv/kv_cache.h"
#include "runtime/model/device_runner.h"
#include "runtime/parallel/rank_runner.h"

namespace inferlab::model {

namespace {

// cpu: LlamaModel::forward (batch-invariant, bit-exact) over a host KV pool in the runner's
// format (fp32, fp16, INT8 per-token, FP8: the forward quantizes each row as it writes it). The runner keeps
// only the pool's rows across steps; each step's KvCache is a view over them whose block tables
// and lengths the forward takes from the plan.
class CpuRunner final : public ModelRunner {
 public:
  CpuRunner(const LlamaModel& model, const KvCacheShape& shape, const KvPaging& paging, const KvFormat& kv_format)
      : ModelRunner(model, shape, paging, kv_format), pool_(make_kv_storage(shape, kv_format, paging)) {}
  Backend backend() const override { return Backend::cpu; }

 private:
  Tensor<float> run_checked(const StepPlan& plan) override {
    KvCache step(pool_, kv_shape(), paging());
    return model().forward(plan, step);
  }
  KvStorage pool_;
};

}  // namespace

Tensor<float> ModelRunner::run(const StepPlan& plan) {
  model_.check(plan, shape_, paging_);
  return run_checked(plan);
}

std::unique_ptr<ModelRunner> make_model_runner(const LlamaModel& model, Backend backend, int64_t rows,
                                               int64_t max_seq_len, const KvPaging& paging, const KvFormat& kv_format) {
  require_positive("block_size", paging.block_size);
  require_positive("num_blocks", paging.num_blocks);
  const KvCacheShape shape = model.kv_shape(rows, max_seq_len);  // checks rows and max_seq_len
  check_kv_format(kv_format);
  if (model.shard().split() || model.stage().split()) {  // chapter 10: rank 0 of a split model leads
    require(backend == Backend::cpu, "backend", to_string(backend),
            "a model split over ranks runs on cpu (over MPI); its steps on the device are not in the lab");
    return parallel::make_leader_runner(model, shape, paging, kv_format);
  }
  if (backend == Backend::cpu) return std::make_unique<CpuRunner>(model, shape, paging, kv_format);
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

}  // namespace inferlab::model
