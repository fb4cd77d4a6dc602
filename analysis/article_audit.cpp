#include "analysis/article_audit.h"

#include <cctype>
#include <iomanip>
#include <string_view>

#include "analysis/inference_cost.h"
#include "analysis/units.h"
#include "common/cost.h"

namespace inferlab::analysis {

std::string to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::right:
      return "right";
    case Verdict::partly:
      return "partly";
    case Verdict::wrong:
      return "wrong";
  }
  return "?";
}

namespace {

// The article's running example: LLaMA-7B (H = 4096, fp16) decoding on an A100 40GB (its §4.3).
Analysis llama7b(int64_t batch, int64_t context, WeightFormat weights = WeightFormat::fp16,
                 KvFormat kv = KvFormat::fp16, const std::string& device = "a100-40") {
  Workload w;
  w.model = find_model("llama-7b");
  w.device = find_device(device);
  w.batch = batch;
  w.context = context;
  w.weights = weights;
  w.kv = kv;
  return analyze(w);
}

std::string tokens_per_s(double value) {
  return format_number(value) + " token/s";
}
std::string ratio(double value) {
  return format_number(value, 3).insert(0, 1, 'x');
}

}  // namespace

std::vector<AuditRow> article_audit() {
  std::vector<AuditRow> rows;
  const Analysis base = llama7b(1, 2048);
  const KvCacheSize& kv = base.kv;
  const double bandwidth = base.workload.device.bandwidth_gbs * 1e9;

  rows.push_back({"§2.2", "KV per token per layer, as a formula", "2H parameters = 4H bytes (fp16)",
                  std::to_string(kv.bytes_per_token_per_layer) + " B = 4H for H = 4096", Verdict::right,
                  "K and V: 2 vectors of H elements of 2 bytes."});
  rows.push_back({"§2.2", "KV per token per layer, H = 4096, fp16", "32 KB",
                  format_binary_bytes(static_cast<double>(kv.bytes_per_token_per_layer)) + " = 2 (K, V) x 4096 x 2 B",
                  Verdict::wrong, "The article's own 4H bytes give 16 KiB; 32 KB counts every byte twice."});
  rows.push_back({"§2.2", "KV of one layer at 2048 tokens", "64 MB",
                  format_binary_bytes(static_cast<double>(kv.bytes_per_layer)) + " (all 32 layers of LLaMA-7B: " +
                      format_binary_bytes(static_cast<double>(kv.bytes_per_sequence)) + ")",
                  Verdict::wrong, "16 KiB x 2048; the 64 MB inherits the factor 2 of the 32 KB."});
  {
    const double share = base.decode.kv_read_bytes / base.decode.bytes();
    rows.push_back({"§2.2", "KV share of memory traffic", "may exceed 60%",
                    format_number(100.0 * share, 3) +
                        "% of a decode step's bytes at batch 1, L = 2048; above 60% once "
                        "batch x context > " +
                        format_count(1.5 * base.kv_equals_weights_tokens) + " tokens",
                    Verdict::partly,
                    "A step reads every weight once and the KV of every cached token, so the share depends on batch x "
                    "context; at batch 1 the weights dominate."});
  }
  {
    const Cost article = prefill_attention_cost({1, 1, 2048, 4096}, TrafficModel::article, 2.0);
    const double L = 2048, H = 4096;
    rows.push_back({"§3.3", "prefill AI with the article's counts (L = 2048, H = 4096)", "2L / (1 + 4H/L)",
                    "2H / (1 + 4H/L) = " + format_number(article.arithmetic_intensity()) +
                        " FLOP/byte (the article's formula gives " + format_number(2 * L / (1 + 4 * H / L)) + ")",
                    Verdict::wrong, "4L^2 H / 2(L^2 + 4LH) = 2LH / (L + 4H): an algebra slip."});
  }
  {
    const Cost unfused = prefill_attention_cost({1, 1, 32768, 128}, TrafficModel::article, 2.0);
    const Cost fused = prefill_attention_cost({1, 1, 32768, 128}, TrafficModel::fused, 2.0);
    rows.push_back({"§3.3", "prefill AI when L >> H", "AI ~ L/2",
                    "saturates at 2H: " + format_number(unfused.arithmetic_intensity()) +
                        " FLOP/byte at L = 32768, head dim 128 (2H = 256); L/2 = " +
                        format_number(fused.arithmetic_intensity()) + " is the fused kernel's AI",
                    Verdict::wrong,
                    "AI ~ L/2 holds when L << 4H. With the L x L scores in memory their traffic grows as fast as the "
                    "FLOPs; only a fused (FlashAttention) kernel, moving Q, K, V, O alone, has AI = L/2 at every L."});
  }
  {
    const Cost decode = decode_attention_cost({1, 1, 2048, 4096}, 2.0);
    rows.push_back({"§4.2", "decode AI", "~ 1 (memory-bound)",
                    format_number(decode.arithmetic_intensity()) + " FLOP/byte for the attention (L = 2048, fp16); " +
                        format_number(base.decode.arithmetic_intensity()) +
                        " for a whole LLaMA-7B decode step at batch 1 (ridge of an A100: " +
                        format_number(base.decode.ridge_point()) + ")",
                    Verdict::right, "Each 2-byte K or V element read is used by one multiply-add (2 FLOPs)."});
  }
  rows.push_back({"§4.3", "KV per token per layer, H = 4096", "4H bytes = 16 KB",
                  format_binary_bytes(static_cast<double>(kv.bytes_per_token_per_layer)), Verdict::right,
                  "2 x 4096 x 2 B (and it contradicts §2.2's 32 KB)."});
  ModelShape fifty = find_model("llama-7b");
  fifty.name = "LLaMA-7B with 50 layers";
  fifty.num_layers = 50;
  const KvCacheSize kv50 = kv_cache_size(fifty, KvFormat::fp16, 1, 2048);
  rows.push_back({"§4.3", "KV bytes of one decode step, 50 layers", "800 KB",
                  format_binary_bytes(static_cast<double>(kv50.bytes_per_token)) +
                      " per cached token; at L = 2048 a "
                      "step reads " +
                      format_binary_bytes(static_cast<double>(kv50.bytes_per_sequence)) + " of KV per sequence",
                  Verdict::wrong,
                  "800 KiB is one token's K and V over 50 layers; a step reads those of all L cached "
                  "tokens."});
  rows.push_back(
      {"§4.3", "bandwidth-bound decode rate on an A100 (1555 GB/s)", "~ 2000 token/s",
       tokens_per_s(bandwidth / static_cast<double>(kv50.bytes_per_sequence)) +
           " from the KV of 2048 tokens x 50 layers alone; LLaMA-7B, batch 1, with its " +
           format_si(base.weights.streamed, "B") + " of weights: " + tokens_per_s(base.decode.tokens_per_second()),
       Verdict::wrong,
       "1555 GB/s / 800 KiB would be " + format_number(bandwidth / static_cast<double>(kv50.bytes_per_token) / 1e6, 3) +
           " million token/s (the 2000 divides by ~800 MB); a step must read every cached token's KV and, at batch 1, "
           "every "
           "weight - and the weights dominate."});
  {
    const Analysis int4 = llama7b(1, 2048, WeightFormat::int4, KvFormat::int8);
    rows.push_back({"§4.3", "decode rate in practice", "100-300 token/s",
                    "floor " + tokens_per_s(base.decode.tokens_per_second()) +
                        " for fp16 LLaMA-7B at batch 1, L = 2048; int4 weights + int8 KV: " +
                        tokens_per_s(int4.decode.tokens_per_second()),
                    Verdict::partly,
                    "No fp16 7B sequence decodes faster than its floor on an A100; the top of the range needs "
                    "quantized weights, or counts the tokens of a batch."});
  }
  {
    const Analysis kv8 = llama7b(1, 2048, WeightFormat::fp16, KvFormat::int8);
    const Analysis big16 = llama7b(16, 4096, WeightFormat::fp16, KvFormat::fp16, "a100-80");
    const Analysis big8 = llama7b(16, 4096, WeightFormat::fp16, KvFormat::int8, "a100-80");
    const double limit =
        static_cast<double>(kv.bytes_per_token_per_layer) / static_cast<double>(kv8.kv.bytes_per_token_per_layer);
    rows.push_back({"§5.2", "int8 KV cache speed-up", "1.8-2.3x",
                    ratio(kv8.decode.tokens_per_second() / base.decode.tokens_per_second()) +
                        " at batch 1, L = 2048; " +
                        ratio(big8.decode.tokens_per_second() / big16.decode.tokens_per_second()) +
                        " at batch 16, L = 4096 (A100 80GB); at most " + ratio(limit) + " when KV is all the bytes",
                    Verdict::wrong,
                    "Halving the KV bytes (plus fp16 scales: 8320 B vs 16384 B per token per layer) speeds up only "
                    "the KV share of a step; it can never exceed 2x."});
  }
  {
    const Analysis w8 = llama7b(1, 2048, WeightFormat::int8, KvFormat::fp16);
    const Analysis kv8 = llama7b(1, 2048, WeightFormat::fp16, KvFormat::int8);
    const Analysis short_context = llama7b(1, 1);
    const double fp16_floor = base.decode.tokens_per_second();
    rows.push_back({"§5.3", "LLaMA-7B FP16 decode (measured)", "102 token/s",
                    "floor " + tokens_per_s(fp16_floor) + " (A100 40GB, batch 1, L = 2048; " +
                        tokens_per_s(short_context.decode.tokens_per_second()) + " at L = 1): 102 is " +
                        format_number(100.0 * 102.0 / fp16_floor, 2) + "% of it",
                    Verdict::right, "Plausible for a good kernel: 13.2 GB of weights per token at 1555 GB/s."});
    rows.push_back({"§5.3", "LLaMA-7B INT8 decode (measured)", "187 token/s (x" + format_number(187.0 / 102.0, 3) + ")",
                    "int8 weights: floor " + tokens_per_s(w8.decode.tokens_per_second()) + " (" +
                        ratio(w8.decode.tokens_per_second() / fp16_floor) +
                        "); int8 KV alone: " + tokens_per_s(kv8.decode.tokens_per_second()) + " (" +
                        ratio(kv8.decode.tokens_per_second() / fp16_floor) + ")",
                    Verdict::partly,
                    "The numbers match weight quantization, not the KV-cache quantization the article recommends: at "
                    "batch 1 the weights are " +
                        format_number(100.0 * base.decode.weight_bytes / base.decode.bytes(), 3) +
                        "% of a step's bytes. int8 KV pays off only when batch x context passes " +
                        format_count(base.kv_equals_weights_tokens) + " tokens."});
  }
  return rows;
}

void print_audit(std::ostream& out, const std::vector<AuditRow>& rows) {
  out << "Audit of the figures of the article " << kArticleTitle << " (\"" << kArticleTitleEnglish << "\"),\n"
      << "recomputed by `inferlab analyze` (KiB/MiB/GiB binary, GB = 10^9 B); its errata: " << kArticleErrataPage
      << "\n";
  for (const AuditRow& r : rows) {
    std::string verdict = to_string(r.verdict);
    for (char& c : verdict) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    out << "\n"
        << r.section << "  " << r.claim << "  [" << verdict << "]\n"
        << "      article says: " << r.article << "\n"
        << "      correct:      " << r.correct << "\n"
        << "      why:          " << r.why << "\n";
  }
}

namespace {

// A table cell: '|' would end the cell, '<' and '>' could open an HTML tag (GitHub, Doxygen).
std::string markdown_cell(const std::string& text) {
  std::string cell;
  for (char c : text) {
    const std::string_view replacement = c == '|' ? "\\|" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : "";
    if (replacement.empty()) {
      cell.push_back(c);
    } else {
      for (char r : replacement) cell.push_back(r);
    }
  }
  return cell;
}

}  // namespace

void print_audit_markdown(std::ostream& out, const std::vector<AuditRow>& rows) {
  out << "| § | figure | article says | correct value | verdict | why |\n"
      << "| --- | --- | --- | --- | --- | --- |\n";
  for (const AuditRow& r : rows) {
    out << "| " << r.section << " | " << markdown_cell(r.claim) << " | " << markdown_cell(r.article) << " | "
        << markdown_cell(r.correct) << " | **" << to_string(r.verdict) << "** | " << markdown_cell(r.why) << " |\n";
  }
}

}  // namespace inferlab::analysis
