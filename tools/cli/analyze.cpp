// `inferlab analyze`: the analytic calculator (analysis/). Parses flags, builds a
// Workload, prints the report, JSON, the catalog or the audit of the source article.
// `inferlab analyze --kv-waste [--model M] [--kv K] [--context MAX] [--kv-budget-gib 16]
// [--lengths sharegpt|alpaca] [--requests 10000] [--seed 6] [--system-prompt 341] [--json]`:
// chapter 06's memory table (analysis/kv_capacity.h) — reserved vs token-holding KV
// bytes, contiguous max-length slots vs paging at blocks 1, 8, 16, 32, 128, the sequences that
// fit in the budget, and what sharing saves. docs/plots/ch06-memory.json is
// `inferlab analyze --kv-waste --json`.
#include <iostream>
#include <optional>
#include <stdexcept>

#include "analysis/article_audit.h"
#include "analysis/inference_cost.h"
#include "analysis/kv_capacity.h"
#include "analysis/report.h"
#include "analysis/units.h"
#include "common/args.h"
#include "common/check.h"
#include "tools/cli/commands.h"

namespace inferlab::cli {

namespace {

const char* kAnalyzeUsage =
    R"usage(usage: inferlab analyze [options]               the report (text, or JSON with --json)
       inferlab analyze --list [--json]          the built-in models, devices and formats
       inferlab analyze --audit [--markdown]     the source article's figures, audited
       inferlab analyze --kv-waste [options]     chapter 06's KV-memory table

The analytic calculator: KV-cache size, FLOPs, bytes, arithmetic intensity, bound and time floors
of a prefill and of one decode step, what fits in the device's memory, the KV = weights crossover
and the decode floor with other formats; --json prints all of it (assumptions and warnings too).

Workload
  --model M               llama-7b (default), llama-2-13b, llama-3-8b, smollm2-135m, or custom
  --device D              a100-40 (default), a100-80, h100, h200, rtx4090, or this (this machine,
                          from the roofline `inferlab roofline` saved; warns when it was measured
                          under load; decode uses its read bandwidth)
  --roofline FILE         with --device this: the roofline file (default build/roofline.json)
  --batch B               sequences decoded together (default 1)
  --context L             tokens cached per sequence for decode (default 2048); k = 1024 tokens:
                          32k = 32768
  --prompt P              prompt tokens per sequence for prefill (default: the context); 4k works
  --weights W             fp32, fp16 (default), bf16, fp8, int8, int4 (fp8 on a device without
                          FP8 math is dequantized: the 16-bit peak, with a warning)
  --kv K                  fp32, fp16 (default), bf16, fp8, int8
  --json                  print the report as JSON
Custom shape (alone: a custom model; with --model: overrides its fields, "(modified)")
  --hidden H --layers N --heads N   required for a custom model
  --kv-heads N            KV heads (default: --heads, i.e. MHA; fewer for GQA)
  --head-dim D            head dimension (default H / heads)
  --ffn F                 MLP width (default 8H/3 rounded up to 256)
  --vocab V               vocabulary (default 32000)
  --tied-embeddings       the LM head is the embedding table (held once)
Custom device (alone: a custom device; with --device: overrides its ceilings)
  --bandwidth GBS         memory bandwidth, GB/s (10^9 B/s)
  --peak TFLOPS           compute peak, TFLOP/s (16-bit math; a CPU's fp32)
  --memory GIB            device memory, GiB (2^30 B)
Other modes
  --list                  the built-in models and devices (--json: as JSON)
  --audit                 the article's figures recomputed (--markdown: as a Markdown table)
  --kv-waste              chapter 06's table: reserved vs held KV bytes, contiguous vs paged;
                          with --model, --kv, --context (max length), --kv-budget-gib 16,
                          --lengths sharegpt|alpaca, --requests 10000, --seed 6,
                          --system-prompt 341, --json
  -h, --help              this text

Examples
  inferlab analyze --model llama-3-8b --device h100 --batch 16 --context 32k
  inferlab analyze --model smollm2-135m --device this --weights fp32 --kv fp32
  inferlab analyze --hidden 2048 --layers 16 --heads 32 --kv-heads 8 --head-dim 64 --tied-embeddings \
                   --bandwidth 400 --peak 50 --memory 16
)usage";

// A token count flag (--context, --prompt): an integer or with k = 1024.
std::optional<int64_t> tokens(const Args& args, const char* name) {
  if (const auto text = args.get(name)) return analysis::parse_token_count(name, *text);
  return std::nullopt;
}

// The device: a built-in or this machine (--device), or a custom one (--bandwidth, --peak,
// --memory), whose ceilings also override a built-in's.
analysis::DeviceSpec device_from(const Args& args) {
  const bool ceilings = args.has("bandwidth") || args.has("peak") || args.has("memory");
  if (!args.has("device") && (args.has("bandwidth") || args.has("peak"))) {
    for (const char* flag : {"bandwidth", "peak"}) {
      if (!args.has(flag)) {
        throw std::invalid_argument(
            std::string("option --") + flag +
            ": is required for a custom device (--bandwidth GB/s --peak TFLOP/s [--memory GiB])");
      }
    }
    return analysis::custom_device(*args.real("bandwidth"), *args.real("peak"), args.real("memory").value_or(0.0));
  }
  analysis::DeviceSpec device = analysis::find_device(args.get_or("device", "a100-40"), args.get_or("roofline", ""));
  if (ceilings) {
    // The given ceilings replace the device's: validated as a custom device's are.
    const analysis::DeviceSpec given = analysis::custom_device(
        args.real("bandwidth").value_or(device.bandwidth_gbs), args.real("peak").value_or(device.peak_gflops / 1e3),
        args.real("memory").value_or(device.memory_gb * 1e9 / (1024.0 * 1024.0 * 1024.0)));
    if (args.has("bandwidth")) {
      device.bandwidth_gbs = given.bandwidth_gbs;
      device.read_gbs = 0;  // the given bandwidth is the one decode streams at too
    }
    if (args.has("peak")) device.peak_gflops = given.peak_gflops;
    if (args.has("memory")) device.memory_gb = given.memory_gb;
    device.name += " (modified)";
    device.key += "+custom";
    device.source += "; --bandwidth/--peak/--memory given";
  }
  return device;
}

analysis::ModelShape model_from(const Args& args) {
  const bool shape_flags = args.has("hidden") || args.has("layers") || args.has("heads");
  const std::string key = args.get_or("model", shape_flags ? "custom" : "llama-7b");
  analysis::ModelShape model;
  if (key == "custom") {
    // A custom shape: H, layers and heads are required; the rest default as llama's do.
    for (const char* flag : {"hidden", "layers", "heads"}) {
      if (!args.has(flag)) {
        throw std::invalid_argument(std::string("option --") + flag + ": is required for a custom model");
      }
    }
    model.hidden_size = *args.integer("hidden");
    model.num_heads = *args.integer("heads");
    require(model.num_heads > 0, "heads", model.num_heads, "must be > 0");
    model.num_kv_heads = model.num_heads;
    model.ffn_size = analysis::default_ffn_size(model.hidden_size);
    model.vocab_size = 32000;
  } else {
    model = analysis::find_model(key);
  }
  // Flags override a built-in's fields too: --model llama-7b --layers 50 is the article's example.
  const auto override_field = [&](const char* flag, int64_t& field) {
    if (const auto value = args.integer(flag)) field = *value;
  };
  const analysis::ModelShape before = model;
  override_field("hidden", model.hidden_size);
  override_field("layers", model.num_layers);
  override_field("heads", model.num_heads);
  override_field("kv-heads", model.num_kv_heads);
  override_field("ffn", model.ffn_size);
  override_field("vocab", model.vocab_size);
  if (const auto value = args.integer("head-dim")) {
    require(*value > 0, "head-dim", *value, "must be > 0");
    model.head_dim_size = *value;
  }
  if (args.has("tied-embeddings")) model.tied_embeddings = true;
  const bool changed = model.hidden_size != before.hidden_size || model.num_layers != before.num_layers ||
                       model.num_heads != before.num_heads || model.num_kv_heads != before.num_kv_heads ||
                       model.ffn_size != before.ffn_size || model.vocab_size != before.vocab_size ||
                       model.head_dim() != before.head_dim() || model.tied_embeddings != before.tied_embeddings;
  if (changed && model.key != "custom") {
    model.name += " (modified)";
    model.key += "+custom";
  } else if (model.key == "custom") {
    model.name = "custom model";
  }
  model.validate();
  return model;
}

// `--kv-waste`: chapter 06's waste and capacity table for the model's KV bytes per token.
int kv_waste(const Args& args, const analysis::ModelShape& model) {
  const analysis::KvFormat format = analysis::parse_kv_format(args.get_or("kv", "fp16"));
  analysis::KvWasteSettings settings = analysis::kv_waste_settings(model, format);
  settings.max_seq_len = tokens(args, "context").value_or(settings.max_seq_len);
  const int64_t budget_gib = args.integer("kv-budget-gib").value_or(16);
  require(budget_gib > 0 && budget_gib < (int64_t{1} << 32), "kv-budget-gib", budget_gib, "must be in [1, 2^32)");
  settings.budget_bytes = budget_gib << 30;
  settings.lengths = args.get_or("lengths", settings.lengths);
  settings.requests = args.integer("requests").value_or(settings.requests);
  const int64_t seed = args.integer("seed").value_or(static_cast<int64_t>(settings.seed));
  require(seed >= 0, "seed", seed, "must be >= 0");
  settings.seed = static_cast<uint64_t>(seed);
  settings.system_prompt_tokens = args.integer("system-prompt").value_or(settings.system_prompt_tokens);
  const analysis::KvWasteReport report = analysis::kv_waste_report(settings);
  if (args.has("json")) {
    std::cout << analysis::to_json(report);
  } else {
    analysis::print_kv_waste_report(std::cout, report);
  }
  return 0;
}

}  // namespace

int analyze(const std::vector<std::string>& argv) {
  const Args args(argv, {"list", "json", "audit", "markdown", "kv-waste", "tied-embeddings"});
  if (args.help()) {
    std::cout << kAnalyzeUsage;
    return 0;
  }
  args.check_known({"model",           "device",    "batch",    "context",       "prompt",   "weights",  "kv",
                    "hidden",          "layers",    "heads",    "kv-heads",      "head-dim", "ffn",      "vocab",
                    "tied-embeddings", "bandwidth", "peak",     "memory",        "roofline", "list",     "json",
                    "audit",           "markdown",  "kv-waste", "kv-budget-gib", "lengths",  "requests", "seed",
                    "system-prompt"});
  if (args.has("list")) {
    if (args.has("json")) {
      std::cout << analysis::catalog_json();
    } else {
      analysis::print_catalog(std::cout);
    }
    return 0;
  }
  if (args.has("markdown") && !args.has("audit")) {
    throw std::invalid_argument("option --markdown: only with --audit");
  }
  if (args.has("audit")) {
    const auto rows = analysis::article_audit();
    if (args.has("markdown")) {
      analysis::print_audit_markdown(std::cout, rows);
    } else {
      analysis::print_audit(std::cout, rows);
    }
    return 0;
  }
  if (args.has("kv-waste")) return kv_waste(args, model_from(args));
  for (const char* flag : {"kv-budget-gib", "lengths", "requests", "seed", "system-prompt"}) {
    if (args.has(flag)) throw std::invalid_argument(std::string("option --") + flag + ": only with --kv-waste");
  }
  analysis::Workload workload;
  workload.model = model_from(args);
  workload.device = device_from(args);
  workload.batch = args.integer("batch").value_or(1);
  workload.context = tokens(args, "context").value_or(2048);
  workload.prompt = tokens(args, "prompt").value_or(0);
  require(!args.has("prompt") || workload.prompt > 0, "prompt", workload.prompt, "must be > 0");
  workload.weights = analysis::parse_weight_format(args.get_or("weights", "fp16"));
  workload.kv = analysis::parse_kv_format(args.get_or("kv", "fp16"));
  const analysis::Analysis result = analysis::analyze(workload);
  if (args.has("json")) {
    std::cout << analysis::to_json(result);
  } else {
    analysis::print_report(std::cout, result);
  }
  return 0;
}

}  // namespace inferlab::cli
