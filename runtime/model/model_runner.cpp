// The cpu runner (model_runner.h); the sim and cuda runners are device_runner.cu, and the choice
// among them runtime/engine/make_model_runner.cpp.
#include "runtime/model/model_runner.h"

#include <string>

#include "common/check.h"
#include "common/config.h"
#include "kernels/kv/kv_cache.h"

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
    return model().forward_checked(plan, step);  // ModelRunner::run() has checked the plan
  }
  KvStorage pool_;
};

}  // namespace

Tensor<float> ModelRunner::run(const StepPlan& plan) {
  model_.check(plan, shape_, paging_);
  return run_checked(plan);
}

std::unique_ptr<ModelRunner> make_cpu_runner(const LlamaModel& model, const KvCacheShape& shape, const KvPaging& paging,
                                             const KvFormat& kv_format) {
  return std::make_unique<CpuRunner>(model, shape, paging, kv_format);
}

}  // namespace inferlab::model
