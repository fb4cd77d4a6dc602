#include "analysis/kv_capacity.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <stdexcept>

#include "analysis/units.h"
#include "common/ceil_div.h"
#include "common/check.h"
#include "common/json.h"
#include "common/rng.h"

namespace inferlab::analysis {

const std::vector<LengthDistribution>& builtin_length_distributions() {
  static const std::string fig11 =
      "vLLM paper (Kwon et al., SOSP 2023, arXiv:2309.06180), Fig. 11 legend: mean input and output tokens";
  static const std::vector<LengthDistribution> distributions = {
      {"sharegpt", "ShareGPT", 161.31, 337.99, fig11},
      {"alpaca", "Alpaca", 19.31, 58.45, fig11},
  };
  return distributions;
}

const LengthDistribution& find_length_distribution(const std::string& key) {
  std::string wanted = key;
  std::transform(wanted.begin(), wanted.end(), wanted.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string known;
  for (const LengthDistribution& d : builtin_length_distributions()) {
    if (d.key == wanted) return d;
    known += (known.empty() ? "" : ", ") + d.key;
  }
  throw std::invalid_argument("lengths = " + key + ": unknown (known: " + known + ")");
}

namespace {

// A uniform double in (0, 1] from the engine's raw 64-bit output: the top 53 bits, plus one.
double uniform_open_closed(std::mt19937_64& engine) {
  return static_cast<double>((engine() >> 11) + 1) * 0x1.0p-53;
}

// A geometric length on {1, 2, …} with mean @p mean (success probability p = 1 / mean), by
// inverting the CDF: P(K > k) = (1 − p)^k, so K = 1 + ⌊ln u / ln(1 − p)⌋ for u uniform in (0, 1].
int64_t geometric(std::mt19937_64& engine, double mean) {
  if (mean <= 1.0) return 1;
  const double u = uniform_open_closed(engine);
  const double k = std::floor(std::log(u) / std::log1p(-1.0 / mean));
  return 1 + static_cast<int64_t>(std::min(k, 1e15));
}

double mean_of(const std::vector<int64_t>& values) {
  double sum = 0;
  for (int64_t v : values) sum += static_cast<double>(v);
  return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

// The checks shared by both schemes; returns Σ lengths.
int64_t checked_tokens(const std::vector<int64_t>& lengths, int64_t max_seq_len, int64_t bytes_per_token) {
  require_positive("max_seq_len", max_seq_len);
  require_positive("bytes_per_token", bytes_per_token);
  require(!lengths.empty(), "lengths.size()", lengths.size(), "must be > 0 (no sequences)");
  int64_t tokens = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    require(lengths[i] >= 1 && lengths[i] <= max_seq_len, "lengths[" + std::to_string(i) + "]", lengths[i],
            "must be in [1, max_seq_len = " + std::to_string(max_seq_len) + "]");
    tokens += lengths[i];
  }
  return tokens;
}

int64_t blocks_for(int64_t tokens, int64_t block_size) {
  return ceil_div(tokens, block_size);
}

}  // namespace

std::vector<RequestLength> sample_requests(const LengthDistribution& distribution, int64_t count,
                                           int64_t max_seq_len, uint64_t seed) {
  require_positive("count", count);
  require(max_seq_len >= 2, "max_seq_len", max_seq_len, "must be >= 2 (one prompt and one output token)");
  require(distribution.mean_prompt >= 1.0, "mean_prompt", distribution.mean_prompt, "must be >= 1");
  require(distribution.mean_output >= 1.0, "mean_output", distribution.mean_output, "must be >= 1");
  Rng rng(seed);
  std::vector<RequestLength> requests(static_cast<size_t>(count));
  for (RequestLength& r : requests) {
    do {
      r.prompt = geometric(rng.engine(), distribution.mean_prompt);
    } while (r.prompt >= max_seq_len);  // a server rejects prompts with no room to generate
    r.output = std::min(geometric(rng.engine(), distribution.mean_output), max_seq_len - r.prompt);
  }
  return requests;
}

std::vector<int64_t> sequence_lengths(const std::vector<RequestLength>& requests) {
  std::vector<int64_t> lengths;
  lengths.reserve(requests.size());
  for (const RequestLength& r : requests) lengths.push_back(r.total());
  return lengths;
}

double KvWaste::share_held() const {
  return tokens_reserved > 0 ? static_cast<double>(tokens_held) / static_cast<double>(tokens_reserved) : 0.0;
}

double KvWaste::wasted_tokens_per_sequence() const {
  return sequences > 0 ? static_cast<double>(wasted_tokens()) / static_cast<double>(sequences) : 0.0;
}

KvWaste contiguous_waste(const std::vector<int64_t>& lengths, int64_t max_seq_len, int64_t bytes_per_token) {
  KvWaste w;
  w.tokens_held = checked_tokens(lengths, max_seq_len, bytes_per_token);
  w.sequences = static_cast<int64_t>(lengths.size());
  w.block_size = 0;
  w.max_seq_len = max_seq_len;
  w.bytes_per_token = bytes_per_token;
  w.tokens_reserved = w.sequences * max_seq_len;
  return w;
}

KvWaste paged_waste(const std::vector<int64_t>& lengths, int64_t block_size, int64_t max_seq_len,
                    int64_t bytes_per_token) {
  require_positive("block_size", block_size);
  KvWaste w;
  w.tokens_held = checked_tokens(lengths, max_seq_len, bytes_per_token);
  w.sequences = static_cast<int64_t>(lengths.size());
  w.block_size = block_size;
  w.max_seq_len = max_seq_len;
  w.bytes_per_token = bytes_per_token;
  for (int64_t length : lengths) w.tokens_reserved += blocks_for(length, block_size) * block_size;
  return w;
}

int64_t sequences_that_fit(const KvWaste& waste, int64_t budget_bytes) {
  require(budget_bytes >= 0, "budget_bytes", budget_bytes, "must be >= 0");
  require(waste.sequences > 0 && waste.tokens_reserved > 0 && waste.bytes_per_token > 0, "waste.sequences",
          waste.sequences, "must describe at least one sequence (build it with contiguous_waste or paged_waste)");
  const int64_t units = budget_bytes / (waste.unit_tokens() * waste.bytes_per_token);
  // ⌊units · n / R⌋ without forming units · n (which can pass 2^63): units = q · R + r with r < R,
  // so the result is q · n + ⌊r · n / R⌋, and r · n < R · n stays small.
  const int64_t reserved = waste.units_reserved();
  require(reserved <= INT64_MAX / waste.sequences, "waste.sequences", waste.sequences,
          "too many sequences and blocks for 64-bit arithmetic");
  return units / reserved * waste.sequences + units % reserved * waste.sequences / reserved;
}

double SharingBytes::saving() const {
  return blocks_without > 0 ? static_cast<double>(blocks_without - blocks_with) / static_cast<double>(blocks_without)
                            : 0.0;
}

SharingBytes prefix_sharing(int64_t prefix_tokens, const std::vector<int64_t>& continuation_tokens,
                            int64_t block_size, int64_t bytes_per_token) {
  require(prefix_tokens >= 0, "prefix_tokens", prefix_tokens, "must be >= 0");
  require_positive("block_size", block_size);
  require_positive("bytes_per_token", bytes_per_token);
  require(!continuation_tokens.empty(), "continuation_tokens.size()", continuation_tokens.size(),
          "must be > 0 (no sequences)");
  SharingBytes s;
  s.block_size = block_size;
  s.bytes_per_token = bytes_per_token;
  s.sequences = static_cast<int64_t>(continuation_tokens.size());
  const int64_t shared_blocks = prefix_tokens / block_size;  // full prefix blocks only
  s.blocks_with = shared_blocks;
  for (size_t i = 0; i < continuation_tokens.size(); ++i) {
    const int64_t c = continuation_tokens[i];
    require(c >= 1, "continuation_tokens[" + std::to_string(i) + "]", c, "must be >= 1");
    const int64_t own = blocks_for(prefix_tokens + c, block_size);
    s.blocks_without += own;
    s.blocks_with += own - shared_blocks;  // the partial prefix block, if any, is this sequence's copy
  }
  return s;
}

SharingBytes parallel_sampling_sharing(const std::vector<RequestLength>& requests, int64_t samples,
                                       int64_t block_size, int64_t bytes_per_token) {
  require_positive("samples", samples);
  require(!requests.empty(), "requests.size()", requests.size(), "must be > 0 (no requests)");
  SharingBytes total;
  total.block_size = block_size;
  total.bytes_per_token = bytes_per_token;
  for (const RequestLength& r : requests) {
    const SharingBytes one =
        prefix_sharing(r.prompt, std::vector<int64_t>(static_cast<size_t>(samples), r.output), block_size,
                       bytes_per_token);
    total.sequences += one.sequences;
    total.blocks_without += one.blocks_without;
    total.blocks_with += one.blocks_with;
  }
  return total;
}

SharingBytes system_prompt_sharing(int64_t system_prompt_tokens, const std::vector<int64_t>& request_lengths,
                                   int64_t block_size, int64_t bytes_per_token) {
  return prefix_sharing(system_prompt_tokens, request_lengths, block_size, bytes_per_token);
}

const std::vector<int64_t>& default_block_sizes() {
  static const std::vector<int64_t> sizes = {1, 8, 16, 32, 128};
  return sizes;
}

std::vector<KvWasteRow> kv_waste_table(const std::vector<int64_t>& lengths, int64_t max_seq_len,
                                       int64_t bytes_per_token, int64_t budget_bytes,
                                       const std::vector<int64_t>& block_sizes) {
  std::vector<KvWasteRow> rows;
  const auto add = [&](const KvWaste& waste) {
    rows.push_back({waste, budget_bytes, sequences_that_fit(waste, budget_bytes)});
  };
  add(contiguous_waste(lengths, max_seq_len, bytes_per_token));
  for (int64_t block : block_sizes) add(paged_waste(lengths, block, max_seq_len, bytes_per_token));
  return rows;
}

namespace {

// Figures in the JSON carry 12 significant digits (byte counts stay exact).
Json figure(double value) {
  return json_number(value, 12);
}

Json row_json(const KvWasteRow& row) {
  const KvWaste& w = row.waste;
  return {{"scheme", row.scheme()},
          {"block_size", w.block_size},
          {"max_seq_len", w.max_seq_len},
          {"sequences", w.sequences},
          {"bytes_per_token", w.bytes_per_token},
          {"tokens_held", w.tokens_held},
          {"tokens_reserved", w.tokens_reserved},
          {"bytes_held", w.bytes_held()},
          {"bytes_reserved", w.bytes_reserved()},
          {"share_held", figure(w.share_held())},
          {"wasted_tokens", w.wasted_tokens()},
          {"wasted_tokens_per_sequence", figure(w.wasted_tokens_per_sequence())},
          {"budget_bytes", row.budget_bytes},
          {"sequences_fit", row.sequences_fit}};
}

Json rows_json(const std::vector<KvWasteRow>& rows) {
  Json json = Json::array();
  for (const KvWasteRow& row : rows) json.push_back(row_json(row));
  return json;
}

// @p first (the case's own setting), then the shared fields of a sharing case.
Json sharing_json(Json first, const SharingBytes& s) {
  first["block_size"] = s.block_size;
  first["sequences"] = s.sequences;
  first["blocks_without"] = s.blocks_without;
  first["blocks_with"] = s.blocks_with;
  first["bytes_without"] = s.bytes_without();
  first["bytes_with"] = s.bytes_with();
  first["saving"] = figure(s.saving());
  return first;
}

std::string percent(double share) { return format_number(100.0 * share, 3) + "%"; }

}  // namespace

std::string to_json(const std::vector<KvWasteRow>& rows) {
  return format_json(rows_json(rows));
}

KvWasteReport kv_waste_report(const KvWasteSettings& settings) {
  require_positive("bytes_per_token", settings.bytes_per_token);
  require_positive("requests", settings.requests);
  require(settings.budget_bytes >= 0, "budget_bytes", settings.budget_bytes, "must be >= 0");
  require(settings.system_prompt_tokens >= 0, "system_prompt_tokens", settings.system_prompt_tokens, "must be >= 0");
  KvWasteReport report;
  report.settings = settings;
  report.distribution = find_length_distribution(settings.lengths);
  const std::vector<RequestLength> requests =
      sample_requests(report.distribution, settings.requests, settings.max_seq_len, settings.seed);
  const std::vector<int64_t> lengths = sequence_lengths(requests);
  std::vector<int64_t> prompts, outputs;
  for (const RequestLength& r : requests) {
    prompts.push_back(r.prompt);
    outputs.push_back(r.output);
  }
  report.mean_prompt = mean_of(prompts);
  report.mean_output = mean_of(outputs);
  report.mean_length = mean_of(lengths);
  report.rows = kv_waste_table(lengths, settings.max_seq_len, settings.bytes_per_token, settings.budget_bytes,
                               settings.block_sizes);
  report.parallel_sampling = parallel_sampling_sharing(requests, settings.parallel_samples,
                                                       settings.sharing_block_size, settings.bytes_per_token);
  report.system_prompt = system_prompt_sharing(settings.system_prompt_tokens, lengths, settings.sharing_block_size,
                                               settings.bytes_per_token);
  return report;
}

void print_kv_waste_report(std::ostream& out, const KvWasteReport& r) {
  const KvWasteSettings& s = r.settings;
  const LengthDistribution& d = r.distribution;
  const std::string budget = format_binary_bytes(static_cast<double>(s.budget_bytes));
  out << "KV waste and capacity" << (s.label.empty() ? "" : ": " + s.label) << ", "
      << format_binary_bytes(static_cast<double>(s.bytes_per_token)) << " per token, max_seq_len " << s.max_seq_len
      << ", KV budget " << budget << "\n";
  out << "Lengths: " << format_count(static_cast<double>(s.requests)) << " requests drawn from " << d.name
      << " (geometric lengths with the means of the vLLM paper's Fig. 11: prompt " << d.mean_prompt << ", output "
      << d.mean_output << " tokens; seed " << s.seed << ")\n"
      << "         drawn means: prompt " << format_number(r.mean_prompt) << ", output "
      << format_number(r.mean_output) << ", sequence " << format_number(r.mean_length)
      << " tokens (each sequence at its finished length: the best case for a contiguous slot)\n\n";

  out << "  " << std::left << std::setw(12) << "scheme" << std::setw(7) << "block" << std::setw(15)
      << "reserved/seq" << std::setw(15) << "holding/seq" << std::setw(12) << "share held" << std::setw(16)
      << "waste/seq (tok)" << std::setw(18) << ("fit in " + budget) << "vs contiguous\n";
  const int64_t contiguous_fit = r.rows.empty() ? 0 : r.rows.front().sequences_fit;
  for (const KvWasteRow& row : r.rows) {
    const KvWaste& w = row.waste;
    const double n = static_cast<double>(w.sequences);
    out << "  " << std::left << std::setw(12) << row.scheme() << std::setw(7)
        << (w.contiguous() ? std::to_string(w.max_seq_len) : std::to_string(w.block_size)) << std::setw(15)
        << format_binary_bytes(static_cast<double>(w.bytes_reserved()) / n) << std::setw(15)
        << format_binary_bytes(static_cast<double>(w.bytes_held()) / n) << std::setw(12) << percent(w.share_held())
        << std::setw(16) << format_number(w.wasted_tokens_per_sequence()) << std::setw(18)
        << format_count(static_cast<double>(row.sequences_fit));
    if (contiguous_fit > 0) {
      out << "x" << format_number(static_cast<double>(row.sequences_fit) / static_cast<double>(contiguous_fit), 3);
    } else {
      out << "-";
    }
    out << "\n";
  }
  out << "  (the vLLM paper, Fig. 2, measured 20.4% (Orca Max) to 38.2% (Orca Oracle) of KV memory holding tokens, "
         "96.3% for vLLM)\n\n";

  // Per request: the totals over the drawn requests divided by their number.
  const double requests = static_cast<double>(s.requests);
  const auto sharing = [&](const std::string& what, const SharingBytes& sh) {
    out << "  " << what << "\n    per request " << format_binary_bytes(static_cast<double>(sh.bytes_without()) / requests)
        << " without sharing, " << format_binary_bytes(static_cast<double>(sh.bytes_with()) / requests) << " with ("
        << format_number(static_cast<double>(sh.blocks_without) / requests) << " -> "
        << format_number(static_cast<double>(sh.blocks_with) / requests) << " blocks): saves " << percent(sh.saving())
        << "\n";
  };
  out << "Sharing (paged, block " << s.sharing_block_size << "; saving = blocks saved / blocks without sharing, "
      << "the paper's Sec. 6.3 measure)\n";
  sharing("parallel sampling, n = " + std::to_string(s.parallel_samples) + " outputs per prompt (" +
              format_count(static_cast<double>(s.requests)) +
              " prompts; full prompt blocks shared, the last partial one copied on write)",
          r.parallel_sampling);
  out << "    (the paper's Fig. 15, OPT-13B on Alpaca: 6.09%, 8.53%, 9.79% for n = 2, 4, 6; 16.2% - 30.5% on "
         "ShareGPT)\n";
  sharing("a " + std::to_string(s.system_prompt_tokens) + "-token system prompt ahead of each of the " +
              format_count(static_cast<double>(s.requests)) + " requests (its full blocks stored once)",
          r.system_prompt);
}

std::string to_json(const KvWasteReport& r) {
  const KvWasteSettings& s = r.settings;
  Json json;
  json["settings"] = {{"model", s.model},
                      {"kv", s.kv},
                      {"bytes_per_token", s.bytes_per_token},
                      {"max_seq_len", s.max_seq_len},
                      {"budget_bytes", s.budget_bytes},
                      {"lengths", r.distribution.key},
                      {"requests", s.requests},
                      {"seed", s.seed},
                      {"sharing_block_size", s.sharing_block_size},
                      {"parallel_samples", s.parallel_samples},
                      {"system_prompt_tokens", s.system_prompt_tokens}};
  json["distribution"] = {{"key", r.distribution.key},
                          {"mean_prompt", figure(r.distribution.mean_prompt)},
                          {"mean_output", figure(r.distribution.mean_output)},
                          {"source", "vLLM paper (Kwon et al., SOSP 2023, arXiv:2309.06180), Fig. 11 legend"},
                          {"shape", "geometric (our assumption)"}};
  json["drawn"] = {{"mean_prompt", figure(r.mean_prompt)},
                   {"mean_output", figure(r.mean_output)},
                   {"mean_length", figure(r.mean_length)}};
  json["rows"] = rows_json(r.rows);
  json["sharing"] = {
      {"parallel_sampling", sharing_json({{"samples", s.parallel_samples}}, r.parallel_sampling)},
      {"system_prompt", sharing_json({{"system_prompt_tokens", s.system_prompt_tokens}}, r.system_prompt)}};
  return format_json(json) + "\n";
}

KvCapacity kv_capacity(double budget_bytes, int64_t max_seq_len, int64_t bytes_per_token, int64_t block_size,
                       const std::string& lengths, int64_t requests) {
  KvCapacity c;
  c.known = true;
  c.budget_bytes = budget_bytes;
  const LengthDistribution& d = find_length_distribution(lengths);
  c.distribution = d.name;
  const std::vector<int64_t> drawn = sequence_lengths(sample_requests(d, requests, max_seq_len, KvWasteSettings{}.seed));
  c.mean_length = mean_of(drawn);
  require(std::isfinite(budget_bytes) && budget_bytes < 9e18, "budget_bytes", budget_bytes, "must be finite and < 9e18");
  const int64_t budget = budget_bytes > 0 ? static_cast<int64_t>(budget_bytes) : 0;
  const std::vector<KvWasteRow> rows = kv_waste_table(drawn, max_seq_len, bytes_per_token, budget, {block_size});
  c.contiguous = rows[0];
  c.paged = rows[1];
  return c;
}

}  // namespace inferlab::analysis
