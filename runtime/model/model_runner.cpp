// The model runner's backend choice and the cpu runner (model_runner.h); the sim and cuda
// runners are device_runner.cu.
#include "runtime/model/model_runner.h"

#include <string>

#include "common/check.h"
#include "common/config.h"
#include "kernels/kv/kv_cache.h"
#include "runtime/model/device_runner.h"

namespace inferlab::model {

namespace {

// cpu: LlamaModel::forward (batch-invariant, bit-exact) over a host KV pool. The runner keeps
// only the pool's rows across steps; each step's KvCache is a view over them whose block tables
// and lengths the forward takes from the plan.
class CpuRunner final : public ModelRunner {
 public:
  CpuRunner(const LlamaModel& model, const KvCacheShape& shape, const KvPaging& paging)
      : ModelRunner(model, shape, paging), pool_(make_kv_storage(shape, KvFormat::fp32(), paging)) {}
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
                                               int64_t max_seq_len, const KvPaging& paging) {
  require_positive("block_size", paging.block_size);
  require_positive("num_blocks", paging.num_blocks);
  const KvCacheShape shape = model.kv_shape(rows, max_seq_len);  // checks rows and max_seq_len
  if (backend == Backend::cpu) return std::make_unique<CpuRunner>(model, shape, paging);
  require_available(backend);  // cuda: compiled with nvcc and a GPU present
  if (backend == Backend::sim) return sim::make_device_runner(model, shape, paging);
#if INFERLAB_WITH_CUDA
  return cuda::make_device_runner(model, shape, paging);
#else
  throw std::logic_error("make_model_runner: cuda reported available in a build without nvcc");
#endif
}

}  // namespace inferlab::model
