#include "analysis/report.h"

#include <iomanip>
#include <sstream>
#include <tuple>
#include <vector>

#include "analysis/units.h"
#include "common/json.h"

namespace inferlab::analysis {

namespace {

// One row of the side-by-side prefill / decode table.
void row(std::ostream& out, const std::string& label, const std::string& prefill, const std::string& decode) {
  out << "  " << std::left << std::setw(24) << label << std::setw(30) << prefill << decode << "\n";
}

std::string percent(double part, double whole) {
  return whole > 0 ? " (" + format_number(100.0 * part / whole, 3) + "%)" : "";
}

// Tokens per second: grouped digits when large, 4 significant digits when small.
std::string rate(double tokens_per_second) {
  return (tokens_per_second >= 10000 ? format_count(tokens_per_second) : format_number(tokens_per_second)) +
         " tokens/s";
}

std::string bound(const StageCost& stage) {
  return stage.memory_bound() ? "memory-bound" : "compute-bound";
}

// One row of "decode floor with other formats".
struct FormatFloor {
  std::string label;
  WeightFormat weights;
  KvFormat kv;
  double tokens_per_second;
};

// The decode floor of the same workload with other formats: as given, int8 weights, int8 KV,
// both, int4 weights + int8 KV.
std::vector<FormatFloor> other_formats(const Workload& workload) {
  const std::vector<std::tuple<std::string, WeightFormat, KvFormat>> choices = {
      {"as given", workload.weights, workload.kv},
      {"int8 weights", WeightFormat::int8, workload.kv},
      {"int8 KV", workload.weights, KvFormat::int8},
      {"int8 weights + int8 KV", WeightFormat::int8, KvFormat::int8},
      {"int4 weights + int8 KV", WeightFormat::int4, KvFormat::int8},
  };
  std::vector<FormatFloor> rows;
  for (const auto& [label, weights, kv] : choices) {
    Workload w = workload;
    w.weights = weights;
    w.kv = kv;
    rows.push_back({label, weights, kv, analyze(w).decode.tokens_per_second()});
  }
  return rows;
}

// A parameter count: "6.738 B" from a billion up, "134.5 M" below.
std::string parameters(int64_t count) {
  const double n = static_cast<double>(count);
  return n >= 1e9 ? format_number(n / 1e9) + " B" : format_number(n / 1e6) + " M";
}

int64_t kv_element_size(KvFormat kv) {
  return kv == KvFormat::fp32 ? 4 : kv == KvFormat::fp16 || kv == KvFormat::bf16 ? 2 : 1;
}

// Figures in the JSON carry 12 significant digits (byte and FLOP counts stay exact).
// A model's shape as JSON (analyze --json's "model", the catalogue's rows).
Json model_json(const ModelShape& m) {
  return {{"key", m.key},
          {"name", m.name},
          {"hidden_size", m.hidden_size},
          {"num_layers", m.num_layers},
          {"num_heads", m.num_heads},
          {"num_kv_heads", m.num_kv_heads},
          {"head_dim", m.head_dim()},
          {"ffn_size", m.ffn_size},
          {"vocab_size", m.vocab_size},
          {"tied_embeddings", m.tied_embeddings},
          {"params", m.total_params()}};
}

Json figure(double value) {
  return json_number(value, 12);
}

Json stage_json(const StageCost& s) {
  return {{"flops", figure(s.flops())},
          {"linear_flops", figure(s.linear_flops)},
          {"attention_flops", figure(s.attention_flops)},
          {"bytes", figure(s.bytes())},
          {"weight_bytes", figure(s.weight_bytes)},
          {"kv_read_bytes", figure(s.kv_read_bytes)},
          {"kv_write_bytes", figure(s.kv_write_bytes)},
          {"attention_bytes", figure(s.attention_bytes)},
          {"arithmetic_intensity", figure(s.arithmetic_intensity())},
          {"ridge_point", figure(s.ridge_point())},
          {"bound", s.memory_bound() ? "memory" : "compute"},
          {"peak_gflops", figure(s.peak_gflops)},
          {"bandwidth_gbs", figure(s.bandwidth_gbs)},
          {"compute_seconds", figure(s.compute_seconds())},
          {"memory_seconds", figure(s.memory_seconds())},
          {"seconds", figure(s.seconds())},
          {"tokens", figure(s.tokens)},
          {"tokens_per_second", figure(s.tokens_per_second())}};
}

// The capacity lines under the KV cache: contiguous slots vs paged blocks in the memory left.
void print_capacity(std::ostream& out, const KvCapacity& c) {
  if (!c.known) return;
  if (c.budget_bytes <= 0) {
    out << "  capacity: the weights leave no device memory for the KV cache\n";
    return;
  }
  out << "  capacity: " << format_si(c.budget_bytes, "B") << " left after the weights holds " << c.distribution
      << "-like sequences (mean " << format_number(c.mean_length, 3) << " tokens, at most "
      << c.contiguous.waste.max_seq_len << "; chapter 06):\n";
  const auto line = [&](const std::string& label, const KvWasteRow& row, const std::string& note) {
    out << "    " << std::left << std::setw(30) << label << std::setw(18)
        << (format_count(static_cast<double>(row.sequences_fit)) + " sequences")
        << format_number(100.0 * row.waste.share_held(), 3) << "% of reserved KV holds tokens" << note << "\n";
  };
  line("contiguous " + std::to_string(c.contiguous.waste.max_seq_len) + "-token slots", c.contiguous, "");
  std::ostringstream times;
  if (c.contiguous.sequences_fit > 0) {
    times << " (x"
          << format_number(static_cast<double>(c.paged.sequences_fit) / static_cast<double>(c.contiguous.sequences_fit),
                           3)
          << ")";
  }
  line("paged, " + std::to_string(c.paged.waste.block_size) + "-token blocks", c.paged, times.str());
}

Json capacity_row_json(const KvWasteRow& row) {
  return {{"sequences_fit", row.sequences_fit},
          {"share_held", figure(row.waste.share_held())},
          {"max_seq_len", row.waste.max_seq_len},
          {"block_size", row.waste.block_size}};
}

}  // namespace

void print_report(std::ostream& out, const Analysis& a) {
  const Workload& w = a.workload;
  const ModelShape& m = w.model;
  const DeviceSpec& dev = w.device;
  const int64_t prompt = w.prompt_tokens();
  out << m.name << " on " << dev.name << ": batch " << w.batch << ", context " << w.context << " (decode), prompt "
      << prompt << " (prefill), weights " << to_string(w.weights) << ", KV " << to_string(w.kv) << "\n";
  for (const std::string& warning : a.warnings) out << "WARNING: " << warning << "\n";
  out << "\n";

  out << "Model   " << m.name << ": " << m.describe() << "\n"
      << "        " << parameters(m.total_params()) << " parameters ("
      << format_count(static_cast<double>(m.total_params())) << "); weights " << format_si(a.weights.held, "B")
      << " held, " << format_si(a.weights.streamed, "B") << " read per forward pass\n"
      << "        (";
  const double unquantized = w.weights == WeightFormat::fp32 ? 4.0 : 2.0;
  if (m.tied_embeddings) {
    out << "tied embeddings: the embedding table, "
        << format_si(unquantized * static_cast<double>(m.embedding_params()), "B")
        << ", is the LM head: held once, streamed as the head";
  } else {
    out << "the embedding table, " << format_si(unquantized * static_cast<double>(m.embedding_params()), "B")
        << ", is a lookup: held, not streamed";
  }
  if (w.weights != WeightFormat::fp16 && w.weights != WeightFormat::bf16 && w.weights != WeightFormat::fp32) {
    out << "; " << to_string(w.weights) << " applies to the blocks' linear layers, "
        << format_si(a.weights.kept_16bit, "B") << " of LM head and norms stay 16-bit";
  }
  out << ")\n";
  out << "Device  " << dev.name << ": " << format_number(dev.bandwidth_gbs) << " GB/s, "
      << format_si(dev.peak_gflops * 1e9, "FLOP/s") << " " << dev.peak_note;
  if (dev.fp8_gflops > 0) out << ", FP8 " << format_si(dev.fp8_gflops * 1e9, "FLOP/s");
  if (dev.fp32_gflops > 0 && !dev.measured) out << ", fp32 " << format_si(dev.fp32_gflops * 1e9, "FLOP/s");
  out << "\n        ridge point " << format_number(dev.ridge_point()) << " FLOP/byte";
  if (dev.memory_gb > 0) out << "; " << format_number(dev.memory_gb, 3) << " GB memory";
  out << " (" << dev.source << ")\n";
  if (dev.measured) {
    out << "        this machine is a CPU: its peak is fp32 FMA; 16-bit and quantized formats still count "
           "their own bytes;\n        decode streams at the read bandwidth, "
        << format_number(dev.decode_bandwidth_gbs()) << " GB/s (a decode step reads, it hardly writes)\n";
  }
  if (a.decode.peak_gflops != dev.peak_gflops) {
    out << "        compute roof used for " << to_string(w.weights)
        << " weights: " << format_si(a.decode.peak_gflops * 1e9, "FLOP/s") << "\n";
  }

  out << "\nKV cache (" << to_string(w.kv) << ")\n";
  std::ostringstream per_token;
  per_token << "2 (K, V) x " << m.num_kv_heads << " KV heads x " << m.head_dim() << " x " << kv_element_size(w.kv)
            << " B";
  if (a.kv.scale_bytes_per_token_per_layer > 0) {
    per_token << " + " << a.kv.scale_bytes_per_token_per_layer << " B of fp16 scales (per token per KV head, K and V)";
  }
  const auto kv_row = [&out](const std::string& label, double bytes, const std::string& note) {
    out << "  " << std::left << std::setw(30) << label;
    if (note.empty()) {
      out << format_binary_bytes(bytes) << "\n";
    } else {
      out << std::setw(12) << format_binary_bytes(bytes) << note << "\n";
    }
  };
  kv_row("per token per layer", static_cast<double>(a.kv.bytes_per_token_per_layer), per_token.str());
  kv_row("per token, " + std::to_string(m.num_layers) + " layers", static_cast<double>(a.kv.bytes_per_token), "");
  kv_row("one layer, " + std::to_string(w.context) + " tokens", static_cast<double>(a.kv.bytes_per_layer), "");
  kv_row("one sequence, " + std::to_string(w.context) + " tokens", static_cast<double>(a.kv.bytes_per_sequence), "");
  kv_row("batch " + std::to_string(w.batch) + " x " + std::to_string(w.context) + " tokens",
         static_cast<double>(a.kv.total_bytes), "= " + format_si(static_cast<double>(a.kv.total_bytes), "B"));
  out << "  memory: " << format_si(a.weights.held, "B") << " weights + "
      << format_si(static_cast<double>(a.kv.total_bytes), "B") << " KV = " << format_si(a.memory_bytes, "B");
  if (a.memory_known) {
    out << (a.fits ? " (fits in " : " (does NOT fit in ") << format_number(dev.memory_gb, 3) << " GB)\n";
    out << "  largest that fits beside the weights: batch " << format_count(static_cast<double>(a.max_batch_fits))
        << " at context " << w.context << "; context " << format_count(static_cast<double>(a.max_context_fits))
        << " tokens at batch " << w.batch << " (activations left out)";
  }
  out << "\n";
  print_capacity(out, a.capacity);
  out << "\n";

  const StageCost& p = a.prefill;
  const StageCost& d = a.decode;
  row(out, "", "Prefill", "Decode step");
  row(out, "", std::to_string(w.batch) + " x " + std::to_string(prompt) + " prompt tokens",
      std::to_string(w.batch) + " x 1 token, " + std::to_string(w.context) + " cached");
  row(out, "FLOPs", format_si(p.flops(), "FLOP"), format_si(d.flops(), "FLOP"));
  row(out, "  linear (weights)", format_si(p.linear_flops, "FLOP"), format_si(d.linear_flops, "FLOP"));
  row(out, "  attention", format_si(p.attention_flops, "FLOP") + " (causal)", format_si(d.attention_flops, "FLOP"));
  row(out, "bytes", format_si(p.bytes(), "B"), format_si(d.bytes(), "B"));
  row(out, "  weights", format_si(p.weight_bytes, "B") + percent(p.weight_bytes, p.bytes()),
      format_si(d.weight_bytes, "B") + percent(d.weight_bytes, d.bytes()));
  row(out, "  KV read", "-", format_si(d.kv_read_bytes, "B") + percent(d.kv_read_bytes, d.bytes()));
  row(out, "  KV written", format_si(p.kv_write_bytes, "B"), format_si(d.kv_write_bytes, "B"));
  row(out, "  attention Q,K,V,O", format_si(p.attention_bytes, "B") + " (fused)", "-");
  row(out, "AI (FLOP/byte)", format_number(p.arithmetic_intensity()), format_number(d.arithmetic_intensity()));
  row(out, "ridge point", format_number(p.ridge_point()), format_number(d.ridge_point()));
  row(out, "bound", bound(p), bound(d));
  row(out, "FLOPs / peak", format_seconds(p.compute_seconds()), format_seconds(d.compute_seconds()));
  row(out, "bytes / bandwidth", format_seconds(p.memory_seconds()), format_seconds(d.memory_seconds()));
  row(out, "time floor", format_seconds(p.seconds()), format_seconds(d.seconds()));
  row(out, "throughput ceiling", rate(p.tokens_per_second()), rate(d.tokens_per_second()));
  if (w.batch > 1) {
    const double batch = static_cast<double>(w.batch);
    row(out, "  per sequence", rate(p.tokens_per_second() / batch), rate(d.tokens_per_second() / batch));
  }

  const double cached = static_cast<double>(w.batch * w.context);
  out << "\nDecode reads as many KV bytes as weight bytes at batch x context = "
      << format_count(a.kv_equals_weights_tokens) << " cached tokens, i.e. at batch "
      << format_number(a.kv_equals_weights_batch, 3) << " at context " << w.context << " (here " << format_count(cached)
      << ": the " << (cached < a.kv_equals_weights_tokens ? "weights" : "KV cache") << " dominate"
      << (cached < a.kv_equals_weights_tokens ? "" : "s") << ").\n";
  const double base = d.tokens_per_second();
  out << "Decode floor with other formats (same batch and context):\n";
  for (const FormatFloor& f : other_formats(w)) {
    out << "  " << std::left << std::setw(30) << f.label << std::setw(20) << rate(f.tokens_per_second) << "x"
        << format_number(f.tokens_per_second / base, 3) << "\n";
  }
  out << "Assumptions:\n";
  for (const std::string& assumption : a.assumptions) out << "  - " << assumption << "\n";
}

std::string to_json(const Analysis& a) {
  const Workload& w = a.workload;
  const ModelShape& m = w.model;
  const DeviceSpec& dev = w.device;
  Json json;
  json["model"] = model_json(m);
  json["model"]["streamed_params"] = m.streamed_params();
  json["device"] = {{"name", dev.name},
                    {"key", dev.key},
                    {"bandwidth_gbs", figure(dev.bandwidth_gbs)},
                    {"peak_gflops", figure(dev.peak_gflops)},
                    {"fp8_gflops", figure(dev.fp8_gflops)},
                    {"memory_gb", figure(dev.memory_gb)},
                    {"ridge_point", figure(dev.ridge_point())},
                    {"peak_note", dev.peak_note},
                    {"source", dev.source},
                    {"measured", dev.measured},
                    {"fp32_gflops", figure(dev.fp32_gflops)},
                    {"decode_bandwidth_gbs", figure(dev.decode_bandwidth_gbs())}};
  json["workload"] = {{"batch", w.batch},
                      {"context", w.context},
                      {"prompt", w.prompt_tokens()},
                      {"weights", std::string(to_string(w.weights))},
                      {"kv", std::string(to_string(w.kv))}};
  json["weights"] = {{"held_bytes", figure(a.weights.held)},
                     {"streamed_bytes", figure(a.weights.streamed)},
                     {"quantized_bytes", figure(a.weights.quantized)},
                     {"kept_16bit_bytes", figure(a.weights.kept_16bit)}};
  json["kv_cache"] = {{"bytes_per_token_per_layer", a.kv.bytes_per_token_per_layer},
                      {"scale_bytes_per_token_per_layer", a.kv.scale_bytes_per_token_per_layer},
                      {"bytes_per_token", a.kv.bytes_per_token},
                      {"bytes_per_layer", a.kv.bytes_per_layer},
                      {"bytes_per_sequence", a.kv.bytes_per_sequence},
                      {"total_bytes", a.kv.total_bytes}};
  json["prefill"] = stage_json(a.prefill);
  json["decode"] = stage_json(a.decode);
  json["kv_equals_weights_tokens"] = figure(a.kv_equals_weights_tokens);
  json["kv_equals_weights_batch"] = figure(a.kv_equals_weights_batch);
  json["memory_bytes"] = figure(a.memory_bytes);
  json["fits"] = nullptr;
  if (a.memory_known)
    json["fits"] = {{"memory_bytes", figure(dev.memory_gb * 1e9)},
                    {"fits", a.fits},
                    {"max_batch", a.max_batch_fits},
                    {"max_context", a.max_context_fits}};
  json["other_formats"] = Json::array();
  const double base = a.decode.tokens_per_second();
  for (const FormatFloor& f : other_formats(w))
    json["other_formats"].push_back({{"label", f.label},
                                     {"weights", std::string(to_string(f.weights))},
                                     {"kv", std::string(to_string(f.kv))},
                                     {"decode_tokens_per_second", figure(f.tokens_per_second)},
                                     {"speedup", figure(f.tokens_per_second / base)}});
  json["warnings"] = a.warnings;
  json["assumptions"] = a.assumptions;
  json["kv_capacity"] = nullptr;
  if (a.capacity.known)
    json["kv_capacity"] = {{"budget_bytes", figure(a.capacity.budget_bytes)},
                           {"lengths", a.capacity.distribution},
                           {"mean_length", figure(a.capacity.mean_length)},
                           {"contiguous", capacity_row_json(a.capacity.contiguous)},
                           {"paged", capacity_row_json(a.capacity.paged)}};
  return format_json(json) + "\n";
}

void print_catalog(std::ostream& out) {
  out << "Models (--model; or a custom shape: --hidden --layers --heads [--kv-heads] [--head-dim] [--ffn] [--vocab] "
         "[--tied-embeddings])\n";
  out << "  " << std::left << std::setw(13) << "key" << std::setw(14) << "parameters" << std::setw(16)
      << "KV/token/layer"
      << "shape\n";
  for (const ModelShape& m : builtin_models()) {
    const KvCacheSize kv = kv_cache_size(m, KvFormat::fp16, 1, 1);
    out << "  " << std::left << std::setw(13) << m.key << std::setw(14) << parameters(m.total_params()) << std::setw(16)
        << format_binary_bytes(static_cast<double>(kv.bytes_per_token_per_layer)) << m.describe() << "\n";
  }
  out << "\nDevices (--device; dense peaks, no sparsity)\n";
  out << "  " << std::left << std::setw(10) << "key" << std::setw(16) << "name" << std::setw(12) << "GB/s"
      << std::setw(16) << "16-bit FLOP/s" << std::setw(16) << "FP8 FLOP/s" << std::setw(8) << "ridge"
      << "memory\n";
  for (const DeviceSpec& dev : builtin_devices()) {
    out << "  " << std::left << std::setw(10) << dev.key << std::setw(16) << dev.name << std::setw(12)
        << format_number(dev.bandwidth_gbs) << std::setw(16) << format_si(dev.peak_gflops * 1e9, "FLOP/s")
        << std::setw(16) << (dev.fp8_gflops > 0 ? format_si(dev.fp8_gflops * 1e9, "FLOP/s") : "-") << std::setw(8)
        << format_number(dev.ridge_point(), 3) << format_number(dev.memory_gb, 3) << " GB\n";
  }
  out << "  " << std::left << std::setw(10) << "this"
      << "this machine: fp32 FMA peak, triad and read bandwidth of the CPU, from `inferlab roofline`\n";
  out << "  or a custom device: --bandwidth GB/s --peak TFLOP/s [--memory GiB] (alone, or overriding --device's)\n";
  out << "16-bit peaks are FP16/BF16 tensor math with fp32 accumulation (RTX 4090: 330.3 with fp16 accumulate).\n"
         "\nFormats: --weights fp32|fp16|bf16|fp8|int8|int4   --kv fp32|fp16|bf16|fp8|int8\n";
}

std::string catalog_json() {
  Json models = Json::array();
  for (const ModelShape& m : builtin_models()) {
    Json model = model_json(m);
    model["kv_bytes_per_token_per_layer_fp16"] = kv_cache_size(m, KvFormat::fp16, 1, 1).bytes_per_token_per_layer;
    models.push_back(std::move(model));
  }
  Json devices = Json::array();
  for (const DeviceSpec& d : builtin_devices())
    devices.push_back({{"key", d.key},
                       {"name", d.name},
                       {"bandwidth_gbs", figure(d.bandwidth_gbs)},
                       {"peak_gflops", figure(d.peak_gflops)},
                       {"fp8_gflops", figure(d.fp8_gflops)},
                       {"fp32_gflops", figure(d.fp32_gflops)},
                       {"memory_gb", figure(d.memory_gb)},
                       {"ridge_point", figure(d.ridge_point())},
                       {"peak_note", d.peak_note},
                       {"source", d.source}});
  devices.push_back({{"key", "this"}, {"name", "this machine"}, {"source", "inferlab roofline"}});
  const Json json = {{"models", models},
                     {"devices", devices},
                     {"weight_formats", {"fp32", "fp16", "bf16", "fp8", "int8", "int4"}},
                     {"kv_formats", {"fp32", "fp16", "bf16", "fp8", "int8"}}};
  return format_json(json) + "\n";
}

}  // namespace inferlab::analysis
