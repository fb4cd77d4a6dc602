#include "analysis/inference_cost.h"

#include <cmath>
#include <stdexcept>

#include "analysis/units.h"
#include "common/check.h"
#include "common/cost.h"

namespace inferlab::analysis {

std::string_view to_string(WeightFormat format) {
  switch (format) {
    case WeightFormat::fp32:
      return "fp32";
    case WeightFormat::fp16:
      return "fp16";
    case WeightFormat::bf16:
      return "bf16";
    case WeightFormat::fp8:
      return "fp8";
    case WeightFormat::int8:
      return "int8";
    case WeightFormat::int4:
      return "int4";
  }
  return "?";
}

std::string_view to_string(KvFormat format) {
  switch (format) {
    case KvFormat::fp32:
      return "fp32";
    case KvFormat::fp16:
      return "fp16";
    case KvFormat::bf16:
      return "bf16";
    case KvFormat::fp8:
      return "fp8";
    case KvFormat::int8:
      return "int8";
  }
  return "?";
}

WeightFormat parse_weight_format(const std::string& name) {
  for (WeightFormat f : {WeightFormat::fp32, WeightFormat::fp16, WeightFormat::bf16, WeightFormat::fp8,
                         WeightFormat::int8, WeightFormat::int4}) {
    if (name == to_string(f)) return f;
  }
  throw std::invalid_argument("weights = " + name + ": unknown format (known: fp32, fp16, bf16, fp8, int8, int4)");
}

KvFormat parse_kv_format(const std::string& name) {
  for (KvFormat f : {KvFormat::fp32, KvFormat::fp16, KvFormat::bf16, KvFormat::fp8, KvFormat::int8}) {
    if (name == to_string(f)) return f;
  }
  throw std::invalid_argument("kv = " + name + ": unknown format (known: fp32, fp16, bf16, fp8, int8)");
}

double bytes_per_weight(WeightFormat format) {
  switch (format) {
    case WeightFormat::fp32:
      return 4.0;
    case WeightFormat::fp16:
    case WeightFormat::bf16:
      return 2.0;
    case WeightFormat::fp8:
    case WeightFormat::int8:
      return 1.0;
    case WeightFormat::int4:
      return 0.5 + 2.0 / 128.0;  // 4 bits + an fp16 scale per 128 weights
  }
  return 2.0;
}

namespace {

int64_t kv_element_bytes(KvFormat format) {
  if (format == KvFormat::fp32) return 4;
  return format == KvFormat::fp16 || format == KvFormat::bf16 ? 2 : 1;
}

}  // namespace

KvWasteSettings kv_waste_settings(const ModelShape& model, KvFormat format) {
  KvWasteSettings settings;
  settings.label = model.name + ", " + std::string(to_string(format)) + " KV";
  settings.model = model.key;
  settings.kv = std::string(to_string(format));
  settings.bytes_per_token = kv_cache_size(model, format, 1, 1).bytes_per_token;
  return settings;
}

KvCacheSize kv_cache_size(const ModelShape& model, KvFormat format, int64_t batch, int64_t context) {
  KvCacheSize size;
  size.data_bytes_per_token_per_layer = 2 * model.kv_dim() * kv_element_bytes(format);  // K and V
  size.scale_bytes_per_token_per_layer = format == KvFormat::int8 ? 2 * model.num_kv_heads * 2 : 0;
  size.bytes_per_token_per_layer = size.data_bytes_per_token_per_layer + size.scale_bytes_per_token_per_layer;
  size.bytes_per_token = size.bytes_per_token_per_layer * model.num_layers;
  size.bytes_per_layer = size.bytes_per_token_per_layer * context;
  size.bytes_per_sequence = size.bytes_per_token * context;
  size.total_bytes = size.bytes_per_sequence * batch;
  return size;
}

WeightBytes weight_bytes(const ModelShape& model, WeightFormat format) {
  WeightBytes bytes;
  bytes.quantized = static_cast<double>(model.block_matmul_params()) * bytes_per_weight(format);
  const double unquantized = format == WeightFormat::fp32 ? 4.0 : 2.0;  // LM head, norms, embedding
  bytes.kept_16bit = unquantized * static_cast<double>(model.lm_head_params() + model.norm_params());
  bytes.streamed = bytes.quantized + bytes.kept_16bit;
  // A tied head is the embedding table: already counted in the streamed bytes.
  bytes.held =
      bytes.streamed + (model.tied_embeddings ? 0.0 : unquantized * static_cast<double>(model.embedding_params()));
  return bytes;
}

void Workload::validate() const {
  model.validate();
  require_positive("batch", batch);
  require_positive("context", context);
  require(prompt >= 0, "prompt", prompt, "must be >= 0 (0: the context length)");
  require(device.bandwidth_gbs > 0, "device.bandwidth_gbs", device.bandwidth_gbs, "must be > 0");
  require(device.peak_gflops > 0, "device.peak_gflops", device.peak_gflops, "must be > 0");
}

double compute_peak_gflops(const DeviceSpec& device, WeightFormat format) {
  if (format == WeightFormat::fp8 && device.fp8_gflops > 0) return device.fp8_gflops;
  if (format == WeightFormat::fp32 && !device.measured && device.fp32_gflops > 0) return device.fp32_gflops;
  return device.peak_gflops;
}

Analysis analyze(const Workload& workload) {
  workload.validate();
  const ModelShape& m = workload.model;
  const double batch = static_cast<double>(workload.batch);
  const double layers = static_cast<double>(m.num_layers);
  const int64_t prompt = workload.prompt_tokens();
  // 16-bit Q, K, V, O inside the attention kernels (fp32 when the whole model is fp32).
  const double activation_bytes = workload.weights == WeightFormat::fp32 ? 4.0 : 2.0;

  Analysis a;
  a.workload = workload;
  a.kv = kv_cache_size(m, workload.kv, workload.batch, workload.context);
  a.weights = weight_bytes(m, workload.weights);
  const double kv_per_token = static_cast<double>(a.kv.bytes_per_token);
  const double peak = compute_peak_gflops(workload.device, workload.weights);

  // Prefill: every weight read once; each prompt token's K and V written; a fused causal kernel.
  StageCost& p = a.prefill;
  p.peak_gflops = peak;
  p.bandwidth_gbs = workload.device.bandwidth_gbs;
  p.tokens = batch * static_cast<double>(prompt);
  p.linear_flops = 2.0 * static_cast<double>(m.block_matmul_params()) * p.tokens +
                   2.0 * static_cast<double>(m.lm_head_params()) * batch;  // logits of the last position
  const AttentionDims prefill_dims{m.num_heads, m.num_kv_heads, prompt, m.head_dim()};
  const Cost prefill_attention =
      prefill_attention_cost(prefill_dims, TrafficModel::fused, activation_bytes, FlopConvention::causal_useful);
  p.attention_flops = prefill_attention.flops * layers * batch;
  p.attention_bytes = prefill_attention.bytes * layers * batch;
  p.weight_bytes = a.weights.streamed;
  p.kv_write_bytes = kv_per_token * p.tokens;

  // One decode step: weights once for the whole batch; every cached token's K and V read.
  StageCost& d = a.decode;
  d.peak_gflops = peak;
  d.bandwidth_gbs = workload.device.decode_bandwidth_gbs();  // a CPU's read bandwidth, not triad
  d.tokens = batch;
  d.linear_flops = 2.0 * static_cast<double>(m.block_matmul_params() + m.lm_head_params()) * batch;
  const AttentionDims decode_dims{m.num_heads, m.num_kv_heads, workload.context + 1, m.head_dim()};
  d.attention_flops = decode_attention_cost(decode_dims, activation_bytes).flops * layers * batch;
  d.weight_bytes = a.weights.streamed;
  d.kv_read_bytes = kv_per_token * static_cast<double>(workload.context) * batch;
  d.kv_write_bytes = kv_per_token * batch;

  a.kv_equals_weights_tokens = a.weights.streamed / kv_per_token;
  a.kv_equals_weights_batch = a.kv_equals_weights_tokens / static_cast<double>(workload.context);
  a.memory_bytes = a.weights.held + static_cast<double>(a.kv.total_bytes);
  const DeviceSpec& dev = workload.device;
  if (dev.memory_gb > 0) {
    const double memory = dev.memory_gb * 1e9, budget = memory - a.weights.held;
    a.memory_known = true;
    a.fits = a.memory_bytes <= memory;
    const auto most = [&](double per_unit) {
      return budget <= 0 ? int64_t{0} : static_cast<int64_t>(std::floor(budget / per_unit));
    };
    a.max_batch_fits = most(kv_per_token * static_cast<double>(workload.context));
    a.max_context_fits = most(kv_per_token * batch);
    if (budget <= 0) {
      a.warnings.push_back("the weights alone (" + format_si(a.weights.held, "B") + ") do not fit in " +
                           format_number(dev.memory_gb, 3) + " GB of device memory");
    }
  }
  if (workload.weights == WeightFormat::fp8 && dev.fp8_gflops <= 0) {
    a.warnings.push_back(dev.name +
                         " has no FP8 math: fp8 weights are stored in 1 byte and dequantized to 16-bit, so "
                         "the compute roof is the " +
                         (dev.measured ? std::string("fp32 ") : std::string("16-bit ")) + "peak, " +
                         format_si(dev.peak_gflops * 1e9, "FLOP/s"));
  }
  if (workload.weights == WeightFormat::fp32 && !dev.measured && dev.fp32_gflops <= 0) {
    a.warnings.push_back(dev.name + ": no fp32 peak known; fp32 weights are given the device's peak, " +
                         format_si(dev.peak_gflops * 1e9, "FLOP/s"));
  }
  if (!dev.caveat.empty()) a.warnings.push_back(dev.caveat);
  a.assumptions = {
      "a forward pass streams every weight once (blocks, norms, LM head); an untied embedding table is a lookup",
      std::string("quantized weights (int8, int4, fp8) apply to the blocks' linear layers; embedding, LM head and "
                  "norms stay ") +
          (workload.weights == WeightFormat::fp32 ? "fp32" : "16-bit"),
      "prefill: a fused causal attention kernel (skipping masked tiles), logits of the last position only",
      "decode step: weights once for the whole batch, every cached token's K and V read, the new ones written",
      "left out: activations between layers, elementwise FLOPs (norms, RoPE, SwiGLU), sampling, the runtime's memory",
      "floors: max(FLOPs / peak, bytes / bandwidth), perfect overlap at peak ceilings; good kernels reach 60-90%",
      std::string("memory: weights held + KV cache; decimal GB (10^9 B), KV sizes in KiB/MiB/GiB") +
          (dev.read_gbs > 0 ? "; decode streams at the measured read bandwidth, prefill at triad" : ""),
  };
  if (workload.device.memory_gb > 0 && workload.context >= 2) {
    a.capacity = kv_capacity(workload.device.memory_gb * 1e9 - a.weights.held, workload.context, a.kv.bytes_per_token,
                             kAnalysisCapacityBlockSize, "sharegpt", kAnalysisCapacityRequests);
  }
  return a;
}

}  // namespace inferlab::analysis
