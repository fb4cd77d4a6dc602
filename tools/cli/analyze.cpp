// `inferlab analyze`: the analytic calculator (runtime/analysis). Parses flags, builds a
// Workload, prints the report, JSON, the catalog or the audit of the source article.
#include <iostream>
#include <optional>
#include <stdexcept>

#include "common/check.h"
#include "runtime/analysis/article_audit.h"
#include "runtime/analysis/inference_cost.h"
#include "runtime/analysis/report.h"
#include "tools/cli/args.h"
#include "tools/cli/commands.h"

namespace inferlab::cli {

namespace {

// The integer value of --name, or nullopt; "--batch abc" names the option and the value.
std::optional<int64_t> integer_option(const Args& args, const std::string& name) {
  const std::optional<std::string> text = args.get(name);
  if (!text) return std::nullopt;
  size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(*text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text->size()) {
    throw std::invalid_argument(name + " = " + *text + ": must be an integer");
  }
  return static_cast<int64_t>(value);
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
    model.hidden_size = *integer_option(args, "hidden");
    model.num_heads = *integer_option(args, "heads");
    model.num_kv_heads = model.num_heads;
    model.ffn_size = analysis::default_ffn_size(model.hidden_size);
    model.vocab_size = 32000;
  } else {
    model = analysis::find_model(key);
  }
  // Flags override a built-in's fields too: --model llama-7b --layers 50 is the article's example.
  const auto override_field = [&](const char* flag, int64_t& field) {
    if (const auto value = integer_option(args, flag)) field = *value;
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

}  // namespace

int analyze(const std::vector<std::string>& argv) {
  const Args args(argv, {"list", "json", "audit", "markdown"});
  args.check_known({"model", "device", "batch", "context", "prompt", "weights", "kv", "hidden", "layers", "heads",
                    "kv-heads", "ffn", "vocab", "roofline", "list", "json", "audit", "markdown"});
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
  analysis::Workload workload;
  workload.model = model_from(args);
  workload.device = analysis::find_device(args.get_or("device", "a100-40"), args.get_or("roofline", ""));
  workload.batch = integer_option(args, "batch").value_or(1);
  workload.context = integer_option(args, "context").value_or(2048);
  workload.prompt = integer_option(args, "prompt").value_or(0);
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
