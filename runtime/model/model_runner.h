#pragma once
/// @file model_runner.h
/// The model runner: the part of the engine (engine = scheduler + model runner + loop) that owns
/// the model's weights and the KV pool *on one backend* and runs one StepPlan per call.
///
///     scheduler ──StepPlan──▶ ModelRunner::run() ──logits──▶ sampler
///                              │ cpu:      LlamaModel::forward on a host KvCache
///                              │ sim/cuda: weights and KV pool resident on the device;
///                              │           up: the plan's arrays; down: the logits rows
///
/// On sim and cuda the weights are uploaded once (fp32 and 16-bit matrices as fp32 for cuBLAS's
/// cublasSgemm; Q8_0 / Q4_0 / Q4_1 matrices as their blocks, for chapter 08's quantized matmul,
/// kernels/quant/cuda_quant_matmul.cuh) and the KV pool is allocated once on the device; a step
/// uploads only the plan —
/// token ids, positions, slots, each token's row and length, the rows' lengths and block tables —
/// and downloads only the logits of plan.logits_indices. Everything in between (embedding,
/// RMSNorm, GEMMs, RoPE, the KV write, attention over the paged pool, SwiGLU, the residual adds,
/// the output head) runs on device buffers (device_runner.cu). The emulator counts every byte
/// that crosses (simt::transfer_counts()); the tests hold a step to its plan and logits.
///
/// The device forward sums in other orders than the cpu's (cuBLAS picks its GEMM by the sizes,
/// the attention kernel reads keys in another order): its logits equal the cpu's to fp32
/// rounding, not bit for bit, and it is not batch-invariant. (The quantized matmul is the one
/// exception: bit-identical to linear_cpu's for the same input rows.)

#include <cstdint>
#include <memory>

#include "common/backend.h"
#include "common/tensor.h"
#include "kernels/kv/kv_format.h"
#include "kernels/kv/kv_layout.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/step_plan.h"

namespace inferlab::model {

/// Runs step plans through one model on one backend (see the file comment). Not copyable; one
/// host thread at a time.
class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  ModelRunner(const ModelRunner&) = delete;             ///< one owner of the device memory
  ModelRunner& operator=(const ModelRunner&) = delete;  ///< one owner of the device memory

  /// The backend the forward runs on.
  virtual Backend backend() const = 0;
  /// The model (kept by reference: it must outlive the runner).
  const LlamaModel& model() const { return model_; }
  /// The KV pool's geometry: rows (sequences a step may hold), layers, KV heads, head_dim and
  /// max_seq_len (the block table's reach).
  const KvCacheShape& kv_shape() const { return shape_; }
  /// The pool's block size and block count.
  const KvPaging& paging() const { return paging_; }
  /// The KV pool's element format (kv_format.h): fp32 unless make_model_runner() was asked for
  /// another.
  const KvFormat& kv_format() const { return kv_format_; }

  /// Runs @p plan (LlamaModel::forward's contract: block copies, fresh blocks poisoned, each
  /// token's K/V written at its slot, attention through the block tables) and returns the logits
  /// of plan.logits_indices as [logits_indices.size(), vocab_size]. Throws
  /// std::invalid_argument naming the bad field of a plan that is not well formed for this pool
  /// or model (check_step_plan(), a token id or a context past the model), before running
  /// anything.
  Tensor<float> run(const StepPlan& plan);

 protected:
  /// Keeps @p model, @p shape, @p paging and @p kv_format (validated by engine::make_model_runner()).
  ModelRunner(const LlamaModel& model, const KvCacheShape& shape, const KvPaging& paging,
              const KvFormat& kv_format = KvFormat::fp32())
      : model_(model), shape_(shape), paging_(paging), kv_format_(kv_format) {}
  /// The backend's step, for a plan already checked.
  virtual Tensor<float> run_checked(const StepPlan& plan) = 0;

 private:
  const LlamaModel& model_;
  KvCacheShape shape_;
  KvPaging paging_;
  KvFormat kv_format_;
};

/// The cpu runner of @p model: LlamaModel::forward (batch-invariant, bit-exact) over a host KV
/// pool of @p shape and @p paging in @p kv_format, sizes and format already checked. Make a runner
/// with engine::make_model_runner() (runtime/engine/make_model_runner.h), which checks them and
/// picks this one, a device runner (device_runner.h) or a split model's leader
/// (runtime/parallel/rank_runner.h).
std::unique_ptr<ModelRunner> make_cpu_runner(const LlamaModel& model, const KvCacheShape& shape, const KvPaging& paging,
                                             const KvFormat& kv_format);

}  // namespace inferlab::model
