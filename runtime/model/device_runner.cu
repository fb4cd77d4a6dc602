// The resident model runner of the sim and cuda backends (model_runner.h, device_runner.h). The
// weights and the KV pool are uploaded once, in the constructor; a step is
//
//   up    the plan: token ids, positions, slots, each token's row and key count, the rows'
//         lengths and block tables, the logit tokens                      (a few bytes a token)
//   pool  block copies (device to device), fresh blocks poisoned (0xFF)
//   x   = embedding[token_ids]                                            gather_rows  [T, dim]
//   per layer:
//     xn  = rms_norm(x)                                                   [T, dim]
//     qkv = xn · wqkvᵀ                                                    linear       [T, q_dim + 2·kv_dim]
//     RoPE on qkv's q and k parts, in place, by position
//     K, V → the pool at each token's slot, read straight out of qkv      kv_write_slots_device
//     q   = qkv's first q_dim columns                                     copy_columns [T, q_dim]
//     att = attention through the block tables                           prefill_with_cache_device
//     x  += att · woᵀ;   x += w2 · swiglu(w13 · rms_norm(x))              linear, add
//   last = x[logits_indices]; logits = rms_norm(last) · headᵀ             [n, vocab]
//   down  the logits
//
// every kernel queued on the default stream over buffers that stay on the device; the only wait
// is the logits' download. Activation buffers grow to the largest step seen and are reused.
// linear is one of two products, by the Weight's format. Q8_0, Q4_0 and Q4_1 matrices stay on the
// device as their blocks (the GGUF bytes, 1.06 / 0.56 / 0.63 bytes a weight) and run chapter 08's
// quantized matmul (kernels/quant/cuda_quant_matmul.cuh: each activation row quantized on the
// device into a scratch buffer, then the __dp4a matmul) — the arithmetic of the cpu forward's
// linear_cpu, bit for bit for the same input rows. fp32 matrices, and 16-bit ones widened once at
// upload, run cublasSgemm. A block-format embedding is also kept as fp32 rows for the gather
// (the cpu decodes those rows too); a tied head uses its blocks.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/check.h"
#include "kernels/kv/cuda_append.cuh"
#include "kernels/kv/cuda_kv_cache.cuh"
#include "kernels/kv/kv_cache.h"
#include "kernels/layers/cuda_layers.cuh"
#include "kernels/paged/cuda_prefill_with_cache.cuh"
#include "kernels/primitives/cublas_handle.cuh"
#include "kernels/quant/cuda_quant_matmul.cuh"
#include "runtime/model/device_runner.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

using model::LlamaConfig;
using model::StepPlan;

// A matrix on the device: fp32 [out, in] for cuBLAS, and/or — Q8_0, Q4_0, Q4_1 — its blocks for the
// quantized matmul (whichever of the two its uses need: see upload_matrix()).
struct DeviceMatrix {
  DeviceBuffer<float> data;      // fp32 rows, or empty
  DeviceBuffer<uint8_t> blocks;  // block rows as the Weight holds them, or empty
  quant::GgmlType type = quant::GgmlType::f32;
  int64_t out = 0, in = 0;

  bool quantized() const { return blocks.size() > 0; }
  DeviceBlockMatrix block_matrix() const { return {type, out, in, blocks.data()}; }
};

// Uploads @p w for a matmul (@p matmul: its blocks when it has them, else fp32) and/or for a row
// gather (@p gather: fp32 rows — a block format decoded once, as Weight::to_f32 and the cpu's
// row_to_f32 decode it).
DeviceMatrix upload_matrix(const Weight& w, bool matmul = true, bool gather = false) {
  DeviceMatrix m;
  m.out = w.out_features();
  m.in = w.in_features();
  const bool blocks = is_block_format(w.format());
  if (blocks && matmul) {
    const quant::BlockMatrix b = w.block_matrix();
    m.type = b.type;
    m.blocks = DeviceBuffer<uint8_t>(b.bytes);
  }
  if (gather || !blocks)
    m.data = w.format() == WeightFormat::f32 ? DeviceBuffer<float>(w.f32()) : DeviceBuffer<float>(w.to_f32());
  return m;
}

struct DeviceLayer {
  DeviceBuffer<float> attention_norm, ffn_norm;
  DeviceMatrix wqkv, wo, w13, w2;
};

// A device buffer of at least @p count elements, reallocated only to grow.
template <class T>
T* room(DeviceBuffer<T>& buffer, size_t count) {
  if (buffer.size() < count) buffer = DeviceBuffer<T>(count);
  return buffer.data();
}

// Uploads @p host into @p buffer (grown to fit) and returns the device pointer.
template <class T>
T* upload_into(DeviceBuffer<T>& buffer, const std::vector<T>& host) {
  T* device = room(buffer, host.size());
  if (!host.empty())
    check_cuda(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "plan upload");
  return device;
}

// A poisoned host pool of the runner's geometry: what the device pool starts as.
KvCache empty_pool(const KvCacheShape& shape, const KvPaging& paging) {
  return KvCache(shape, KvDtype::fp32, paging);
}

class DeviceRunner final : public model::ModelRunner {
 public:
  DeviceRunner(const model::LlamaModel& model, const KvCacheShape& shape, const KvPaging& paging)
      : ModelRunner(model, shape, paging), pool_(empty_pool(shape, paging)) {
    const model::LlamaWeights& w = model.weights();
    embedding_ = upload_matrix(w.embedding, /*matmul=*/w.config.shared_classifier, /*gather=*/true);
    if (!w.config.shared_classifier) head_ = upload_matrix(w.classifier);
    final_norm_ = DeviceBuffer<float>(w.final_norm);
    rope_ = DeviceBuffer<float>(model.rope_cos_sin());
    layers_.reserve(w.layers.size());
    for (const model::LlamaLayerWeights& l : w.layers) {
      DeviceLayer d;
      d.attention_norm = DeviceBuffer<float>(l.attention_norm);
      d.ffn_norm = DeviceBuffer<float>(l.ffn_norm);
      d.wqkv = upload_matrix(l.wqkv);
      d.wo = upload_matrix(l.wo);
      d.w13 = upload_matrix(l.w13);
      d.w2 = upload_matrix(l.w2);
      layers_.push_back(std::move(d));
    }
    check_cuda(cudaDeviceSynchronize(), "DeviceRunner: weight upload");
  }

  Backend backend() const override { return INFERLAB_BACKEND_IS_SIM ? Backend::sim : Backend::cuda; }

 private:
  Tensor<float> run_checked(const StepPlan& plan) override;
  void upload_plan(const StepPlan& plan);
  void linear(const float* x, int64_t rows, const DeviceMatrix& w, float* y) {
    if (!w.quantized()) return linear_device(cublas_.get(), x, rows, w.data.data(), w.out, w.in, y);
    // The activations' blocks in a scratch buffer that every quantized matmul of the step reuses
    // (one stream: each matmul has read it before the next quantizer writes it).
    uint8_t* scratch = room(quant_scratch_, size_t(quant_activation_bytes(w.type, rows, w.in)));
    quant_matmul_device(x, rows, w.block_matrix(), scratch, y);
  }
  const DeviceMatrix& head() const { return model().config().shared_classifier ? embedding_ : head_; }

  CublasHandle cublas_;
  DeviceMatrix embedding_, head_;
  DeviceBuffer<float> final_norm_, rope_;
  std::vector<DeviceLayer> layers_;
  DeviceKvCache pool_;
  // The plan on the device (grown, reused).
  DeviceBuffer<int32_t> token_ids_, token_row_, token_keys_, logits_rows_;
  DeviceBuffer<int64_t> positions_, slots_;
  ChunkTokens tokens_;
  // Activations (grown, reused).
  DeviceBuffer<float> x_, xn_, qkv_, q_, att_, proj_, gate_up_, hidden_, last_, logits_;
  DeviceBuffer<uint8_t> quant_scratch_;  // the quantized matmuls' activation blocks
};

void DeviceRunner::upload_plan(const StepPlan& plan) {
  const int64_t T = int64_t(plan.token_ids.size()), n = plan.num_seqs(), rows = kv_shape().batch;
  // Each token's cache row (its sequence's index in the plan) and key count (position + 1).
  std::vector<int32_t> token_row(static_cast<size_t>(T)), token_keys(static_cast<size_t>(T));
  int max_keys = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = plan.cu_seqlens_q[size_t(i)]; t < plan.cu_seqlens_q[size_t(i) + 1]; ++t) {
      token_row[size_t(t)] = int32_t(i);
      token_keys[size_t(t)] = int32_t(plan.positions[size_t(t)] + 1);
      max_keys = std::max(max_keys, token_keys[size_t(t)]);
    }
  // The rows' lengths and block tables, [rows] and [rows][max_blocks_per_seq] (−1 unmapped).
  std::vector<int32_t> lengths(size_t(rows), 0), table(size_t(rows * pool_.max_blocks_per_seq()), -1);
  for (int64_t i = 0; i < n; ++i) {
    lengths[size_t(i)] = int32_t(plan.context_lens[size_t(i)]);
    std::copy(plan.block_tables[size_t(i)].begin(), plan.block_tables[size_t(i)].end(),
              table.begin() + std::ptrdiff_t(i * pool_.max_blocks_per_seq()));
  }
  std::vector<int32_t> logits_rows(plan.logits_indices.begin(), plan.logits_indices.end());

  upload_into(token_ids_, plan.token_ids);
  upload_into(positions_, plan.positions);
  upload_into(slots_, plan.slot_mapping);
  tokens_ = {upload_into(token_row_, token_row), upload_into(token_keys_, token_keys), T, max_keys};
  upload_into(logits_rows_, logits_rows);
  pool_.set_tables(lengths, table);
}

Tensor<float> DeviceRunner::run_checked(const StepPlan& plan) {
  const LlamaConfig& c = model().config();
  const int64_t T = int64_t(plan.token_ids.size()), n = int64_t(plan.logits_indices.size());
  const int64_t dim = c.dim, q_dim = c.q_dim(), kv = c.kv_dim(), d = c.head_dim();
  const int64_t qkv_width = q_dim + 2 * kv, hidden = c.hidden_dim;
  Tensor<float> logits({n, c.vocab_size});

  for (const paged::BlockCopy& copy : plan.block_copies) pool_.copy_block(copy.from, copy.to);
  for (const int32_t block : plan.fresh_blocks) pool_.poison_block(block);
  upload_plan(plan);
  if (T == 0) return logits;

  float* x = room(x_, size_t(T * dim));
  float* xn = room(xn_, size_t(T * dim));
  float* qkv = room(qkv_, size_t(T * qkv_width));
  float* q = room(q_, size_t(T * q_dim));
  float* att = room(att_, size_t(T * q_dim));
  float* proj = room(proj_, size_t(T * dim));
  float* gate_up = room(gate_up_, size_t(T * 2 * hidden));
  float* mlp = room(hidden_, size_t(T * hidden));

  gather_rows_device(embedding_.data.data(), dim, token_ids_.data(), T, x);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const DeviceLayer& w = layers_[l];
    rms_norm_device(x, w.attention_norm.data(), c.norm_eps, T, dim, xn);
    linear(xn, T, w.wqkv, qkv);
    rope_device(qkv, T, qkv_width, c.n_heads, d, positions_.data(), rope_.data(), c.rope_style);             // q
    rope_device(qkv + q_dim, T, qkv_width, c.n_kv_heads, d, positions_.data(), rope_.data(), c.rope_style);  // k
    kv_write_slots_device(pool_, qkv + q_dim, qkv + q_dim + kv, qkv_width, slots_.data(), T, int64_t(l));
    copy_columns_device(qkv, qkv_width, 0, T, q_dim, q);
    prefill_with_cache_device(q, tokens_, c.n_heads, pool_, int64_t(l), att);
    linear(att, T, w.wo, proj);
    add_device(x, proj, T * dim);

    rms_norm_device(x, w.ffn_norm.data(), c.norm_eps, T, dim, xn);
    linear(xn, T, w.w13, gate_up);
    swiglu_device(gate_up, T, hidden, mlp);
    linear(mlp, T, w.w2, proj);
    add_device(x, proj, T * dim);
  }

  if (n == 0) return logits;
  float* last = room(last_, size_t(2 * n * dim));  // the logit tokens' rows, then their norm
  float* device_logits = room(logits_, size_t(n * c.vocab_size));
  gather_rows_device(x, dim, logits_rows_.data(), n, last);
  rms_norm_device(last, final_norm_.data(), c.norm_eps, n, dim, last + n * dim);
  linear(last + n * dim, n, head(), device_logits);
  check_cuda(cudaGetLastError(), "DeviceRunner: step");
  check_cuda(cudaMemcpy(logits.data(), device_logits, size_t(logits.size()) * sizeof(float), cudaMemcpyDeviceToHost),
             "DeviceRunner: logits download");  // waits for the step (default stream)
  return logits;
}

}  // namespace

std::unique_ptr<model::ModelRunner> make_device_runner(const model::LlamaModel& model, const KvCacheShape& shape,
                                                       const KvPaging& paging) {
  return std::make_unique<DeviceRunner>(model, shape, paging);
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
