// `inferlab analyze`: the analytic calculator (runtime/analysis). Parses flags, builds a
// Workload, prints the report, JSON, the catalog or the audit of the source article.
// `inferlab analyze --kv-waste [--model M] [--kv K] [--context MAX] [--kv-budget-gib 16]
// [--lengths sharegpt|alpaca] [--requests 10000] [--seed 6] [--system-prompt 341] [--json]`:
// chapter 06's memory table (runtime/analysis/kv_capacity.h) — reserved vs token-holding KV
// bytes, contiguous max-length slots vs paging at blocks 1, 8, 16, 32, 128, the sequences that
// fit in the budget, and what sharing saves. docs/plots/ch06-memory.json is
// `inferlab analyze --kv-waste --json`.
#include <iostream>
#include <optional>
#include <stdexcept>

#include "common/check.h"
#include "runtime/analysis/article_audit.h"
#include "runtime/analysis/inference_cost.h"
#include "runtime/analysis/kv_capacity.h"
#include "runtime/analysis/report.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"

namespace inferlab::cli {

namespace {

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
  const bool changed = model.hidden_size != before.hidden_size || model.num_layers != before.num_layers ||
                       model.num_heads != before.num_heads || model.num_kv_heads != before.num_kv_heads ||
                       model.ffn_size != before.ffn_size || model.vocab_size != before.vocab_size;
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
  settings.max_seq_len = args.integer("context").value_or(settings.max_seq_len);
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
  const Args args(argv, {"list", "json", "audit", "markdown", "kv-waste"});
  args.check_known({"model", "device", "batch", "context", "prompt", "weights", "kv", "hidden", "layers", "heads",
                    "kv-heads", "ffn", "vocab", "roofline", "list", "json", "audit", "markdown", "kv-waste",
                    "kv-budget-gib", "lengths", "requests", "seed", "system-prompt"});
  if (args.has("list")) {
    analysis::print_catalog(std::cout);
    return 0;
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
  workload.device = analysis::find_device(args.get_or("device", "a100-40"), args.get_or("roofline", ""));
  workload.batch = args.integer("batch").value_or(1);
  workload.context = args.integer("context").value_or(2048);
  workload.prompt = args.integer("prompt").value_or(0);
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
