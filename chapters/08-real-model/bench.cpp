// Chapter 08 benchmark: SmolLM2-135M-Instruct from its GGUF file on this CPU — what the weights'
// format does to a decode step, what batching does, and what quantization costs in quality.
//
// (a) Time (Google Benchmark; medians with --benchmark_repetitions):
//     decode/<weights>   one batch-1 decode step (every layer, the output head) with 512 tokens
//                        in the cache (fp32; decode/file,kv=fp16: the file's weights over an fp16
//                        cache, llama.cpp's default), for the weights as the file has them ("file": Q4_1 layers,
//                        Q8_0 tied head) and requantized on load to f32 (the file dequantized),
//                        f16, q8_0 and q4_1 (every matrix, the head too). The step reads every
//                        weight once, so bytes ≈ the weights' bytes + 512 tokens of K and V:
//                        counters bytes, weight_MB, kv_MB, GB/s, read_pct (of the measured read
//                        bandwidth), tokens/s, roof_tokens/s (read bandwidth / bytes: the
//                        ceiling) and best_tokens/s (the fastest call).
//     prefill/<weights>  one 512-token prompt (the first 512 tokens of the text below), logits
//                        for its last token: tokens/s, GFLOP/s, AI, peak_pct.
// (c) decode_batch/B     one decode step of B = 1 … 64 sequences of 512 cached tokens each on the
//                        file's weights (paged cache, blocks of 16): the weights are read once for
//                        all B rows, so tokens/s grows with B until the step leaves the memory
//                        roof — tokens/s, AI, GB/s, GFLOP/s; decode_batch,kv=fp16/32 and
//                        decode_batch,kv=int8/B: the same step at B = 32 over an fp16 cache
//                        and at every B over an INT8 (per-token) one, where the KV is most of
//                        the bytes.
// (e) On a GPU (registered when the cuda backend can run here; tools/gpu-check.sh runs them):
//     decode_cuda/B      the same decode step as (c) through the resident cuda model runner
//                        (runtime/model/model_runner.h: the file's Q4_1 / Q8_0 blocks on the
//                        device, chapter 08's __dp4a matmul), B = 1 … 64 sequences whose 512
//                        tokens were prefilled through the runner first; wall time per step,
//                        the logits' download included;
//     prefill_cuda       one 512-token prompt through the runner.
// (d) Quality (run once after the timings; --no-quality skips, --quality-only runs only it):
//     perplexity of chapters/08-real-model/data/alice-chapter-1.txt (Chapter I of Alice's
//     Adventures in Wonderland, public domain: data/README.md) — 2,729 tokens, one sequence, in
//     chunks of 512 through the paged cache, every token scored from the ones before it:
//     PPL = exp(−mean log p(token | before)). Weights as the file has them, the file dequantized
//     to f32 (what the quantized matmul gives up to the activations' rounding), the file
//     requantized to q8_0 and to q4_0; the KV cache in fp16, INT8 and FP8 under the file's weights
//     and under the f32 floor's (whose linear layers do not round the activations to 8 bits).
//
//   ./inferlab bench ch08 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//       --benchmark_out=docs/plots/ch08-bench.json --benchmark_out_format=json
//       --quality-out=docs/plots/ch08-quality.json            (what the lesson's tables come from)
//   ./inferlab bench ch08 --help                               this chapter's options and Google Benchmark's
//   ./inferlab bench ch08 --benchmark_filter=decode/file       one row
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "chapters/07-continuous-batching/serving_study.h"
#include "chapters/bench_counters.h"
#include "common/args.h"
#include "common/backend.h"
#include "common/json.h"
#include "kernels/layers/weight.h"
#include "runtime/engine/make_model_runner.h"
#include "runtime/gguf/gguf.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_files.h"
#include "runtime/model/model_runner.h"
#include "runtime/tokenizer/bpe_tokenizer.h"
#include "runtime/tokenizer/vocabulary.h"

namespace {

using namespace inferlab;

constexpr int64_t kContext = 512;  // cached tokens of a decode step; the prompt of a prefill
constexpr int64_t kMaxBatch = 64;
constexpr int64_t kPplChunk = 512;  // tokens per forward while scoring the text

std::string g_model_path;  // --model (default: smollm2)

std::string text_path() {
  return std::string(INFERLAB_SOURCE_DIR) + "/chapters/08-real-model/data/alice-chapter-1.txt";
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text's token ids (no BOS: SmolLM2's vocabulary does not add one).
const std::vector<int32_t>& text_ids() {
  static const std::vector<int32_t> ids = [] {
    const tokenizer::BpeTokenizer tok(tokenizer::vocabulary_from_gguf(gguf::GgufFile::open(g_model_path)));
    return tok.encode_prompt(read_text(text_path()));
  }();
  return ids;
}

// "file" or a format name → the model, loaded once.
const model::LlamaModel& model_for(const std::string& weights) {
  static std::map<std::string, std::unique_ptr<model::LlamaModel>> models;
  auto& slot = models[weights];
  if (!slot) {
    std::optional<WeightFormat> format;
    if (weights != "file") format = parse_weight_format(weights);
    slot = std::make_unique<model::LlamaModel>(model::load_model(g_model_path, format));
  }
  return *slot;
}

// peak_pct is of the ceiling of the arithmetic the step's linear layers do (nearly all its FLOPs):
// the int8 dot-product ceiling for block-quantized weights (their GEMM multiplies int8 codes), the
// fp32 FMA peak for f32 and f16 (widened to fp32). Until chapter 11 this was the fp32 peak for
// every format, which made an int8 kernel at 13% of its roof read as 30–34%.
void set_step_counters(benchmark::State& state, const Cost& cost, double weight_bytes, const bench::CallTiming& t,
                       int64_t tokens, bool int8_arithmetic) {
  const Roofline& roof = bench::measured_roofline();
  const double ceiling = int8_arithmetic ? roof.int8_ceiling() : roof.peak_gflops;
  const double gbs = cost.bytes / t.mean_seconds / 1e9;
  state.counters["bytes"] = cost.bytes;
  state.counters["weight_MB"] = weight_bytes / 1e6;
  state.counters["kv_MB"] = (cost.bytes - weight_bytes) / 1e6;
  state.counters["AI"] = cost.arithmetic_intensity();
  state.counters["GFLOP/s"] = cost.flops / t.mean_seconds / 1e9;
  state.counters["peak_pct"] = 100.0 * cost.flops / t.mean_seconds / 1e9 / ceiling;
  state.counters["GB/s"] = gbs;
  state.counters["read_pct"] = 100.0 * gbs / roof.read_gbs;
  state.counters["tokens/s"] = double(tokens) / t.mean_seconds;
  state.counters["best_tokens/s"] = double(tokens) / t.best_seconds;
  // The memory roof's tokens/s: every byte of the step read once at the measured read bandwidth.
  state.counters["roof_tokens/s"] = double(tokens) * roof.read_gbs * 1e9 / cost.bytes;
}

// Whether "file" or a format name multiplies int8 codes (the file's Q4_1 / Q8_0, q8_0, q4_x).
bool block_weights(const std::string& weights) {
  return weights == "file" || is_block_format(parse_weight_format(weights));
}

// The step's bytes without the KV: the weights the step reads (the whole head, one embedding row
// per token, the norms) — step_cost() of the same plan on an empty context would count the same.
double weight_bytes_of(const model::LlamaModel& m, const model::StepPlan& plan) {
  const Cost all = m.step_cost(plan);
  const auto& c = m.config();
  double kv = 0.0;
  for (int64_t i = 0; i < plan.num_seqs(); ++i)
    kv += 2.0 * 4.0 * double(plan.context_lens[size_t(i)]) * double(c.kv_dim()) * double(c.n_layers);
  return all.bytes - kv;
}

// The KV bytes a step reads: K and V of every cached token at @p kv's bytes per element (the
// scales of INT8 / FP8 ignored: ≤ 3%).
double kv_bytes_of(const model::LlamaModel& m, const model::StepPlan& plan, KvDtype kv) {
  const auto& c = m.config();
  double tokens = 0.0;
  for (int64_t i = 0; i < plan.num_seqs(); ++i) tokens += double(plan.context_lens[size_t(i)]);
  return 2.0 * double(KvFormat(kv).element_bytes()) * tokens * double(c.kv_dim()) * double(c.n_layers);
}

void BM_decode(benchmark::State& state, const std::string& weights, KvDtype kv) {
  const model::LlamaModel& m = model_for(weights);
  KvCache cache = serving::random_decode_cache(m, 1, kContext, 21, KvFormat(kv));
  const model::StepPlan plan = serving::decode_batch(m, cache, 1, kContext);
  const bench::CallTiming t = bench::time_calls(state, [&] { benchmark::DoNotOptimize(m.forward(plan, cache)); });
  Cost cost = m.step_cost(plan);  // step_cost() counts fp32 K and V; this cache's own bytes instead
  const double weights_read = weight_bytes_of(m, plan);
  cost.bytes = weights_read + kv_bytes_of(m, plan, kv);
  set_step_counters(state, cost, weights_read, t, 1, block_weights(weights));
}

void BM_prefill(benchmark::State& state, const std::string& weights) {
  const model::LlamaModel& m = model_for(weights);
  KvCache cache = serving::random_decode_cache(m, 1, kContext, 22);
  const std::vector<int32_t>& ids = text_ids();
  if (int64_t(ids.size()) < kContext) throw std::runtime_error("the text has fewer than 512 tokens");
  const int64_t block = cache.paging().block_size, per_seq = cache.paging().num_blocks;
  std::vector<int32_t> table;
  for (int64_t i = 0; i < per_seq; ++i) table.push_back(int32_t(i));
  std::vector<int64_t> slots;
  for (int64_t t = 0; t < kContext; ++t) slots.push_back(int64_t{table[size_t(t / block)]} * block + t % block);
  model::StepPlan plan;
  plan.add_sequence(std::span(ids.data(), size_t(kContext)), slots, kContext, table, true);
  const bench::CallTiming t = bench::time_calls(state, [&] { benchmark::DoNotOptimize(m.forward(plan, cache)); });
  set_step_counters(state, m.step_cost(plan), weight_bytes_of(m, plan), t, kContext, block_weights(weights));
}

void BM_decode_batch(benchmark::State& state, KvDtype kv) {
  static std::map<KvDtype, std::unique_ptr<KvCache>> caches;  // kMaxBatch rows each, built once
  const model::LlamaModel& m = model_for("file");
  auto& cache = caches[kv];
  if (!cache)
    cache = std::make_unique<KvCache>(serving::random_decode_cache(m, kMaxBatch, kContext, 23, KvFormat(kv)));
  const int64_t B = state.range(0);
  const model::StepPlan plan = serving::decode_batch(m, *cache, B, kContext);
  const bench::CallTiming t = bench::time_calls(state, [&] { benchmark::DoNotOptimize(m.forward(plan, *cache)); });
  state.counters["B"] = double(B);
  Cost cost = m.step_cost(plan);  // step_cost() counts fp32 K and V; this cache's own bytes instead
  const double weights_read = weight_bytes_of(m, plan);
  cost.bytes = weights_read + kv_bytes_of(m, plan, kv);
  set_step_counters(state, cost, weights_read, t, B, true);
}

// ---- (e): the resident runner on a GPU ----

// The runner and its pool: kMaxBatch rows of kContext + 1 tokens, blocks of 16, row b's blocks
// b · per_seq … b · per_seq + per_seq − 1.
struct DeviceSetup {
  static constexpr int64_t kBlock = 16, kPerSeq = kContext / kBlock + 1;
  std::unique_ptr<model::ModelRunner> runner;
  DeviceSetup()
      : runner(engine::make_model_runner(model_for("file"), Backend::cuda, kMaxBatch, kPerSeq * kBlock,
                                         KvPaging{kBlock, kMaxBatch * kPerSeq})) {}
  static std::vector<int32_t> table(int64_t b) {
    std::vector<int32_t> t;
    for (int64_t i = 0; i < kPerSeq; ++i) t.push_back(int32_t(b * kPerSeq + i));
    return t;
  }
  // Sequence b's first @p n tokens of the text (a prompt) or its token at kContext (a decode).
  static void add(model::StepPlan& plan, int64_t b, int64_t first, int64_t n) {
    const std::vector<int32_t> t = table(b);
    std::vector<int64_t> slots;
    for (int64_t p = first; p < first + n; ++p) slots.push_back(int64_t{t[size_t(p / kBlock)]} * kBlock + p % kBlock);
    plan.add_sequence(std::span(text_ids().data() + first, size_t(n)), slots, first + n, t, true);
  }
};

DeviceSetup& device_setup() {
  static DeviceSetup setup = [] {
    DeviceSetup s;
    for (int64_t b = 0; b < kMaxBatch; ++b) {  // every row's 512 tokens in the pool, once
      model::StepPlan prompt;
      DeviceSetup::add(prompt, b, 0, kContext);
      s.runner->run(prompt);
    }
    return s;
  }();
  return setup;
}

void BM_decode_cuda(benchmark::State& state) {
  DeviceSetup& s = device_setup();
  const model::LlamaModel& m = model_for("file");
  const int64_t B = state.range(0);
  model::StepPlan plan;
  for (int64_t b = 0; b < B; ++b) DeviceSetup::add(plan, b, kContext, 1);
  const bench::CallTiming t = bench::time_calls(state, [&] { benchmark::DoNotOptimize(s.runner->run(plan)); });
  state.counters["B"] = double(B);
  set_step_counters(state, m.step_cost(plan), weight_bytes_of(m, plan), t, B, true);
}

void BM_prefill_cuda(benchmark::State& state) {
  DeviceSetup& s = device_setup();
  const model::LlamaModel& m = model_for("file");
  model::StepPlan plan;
  DeviceSetup::add(plan, 0, 0, kContext);
  const bench::CallTiming t = bench::time_calls(state, [&] { benchmark::DoNotOptimize(s.runner->run(plan)); });
  set_step_counters(state, m.step_cost(plan), weight_bytes_of(m, plan), t, kContext, true);
}

const std::vector<std::string> kWeights = {"file", "f32", "f16", "q8_0", "q4_1"};

void register_benchmarks() {
  for (const std::string& w : kWeights)
    benchmark::RegisterBenchmark(("decode/" + w).c_str(), BM_decode, w, KvDtype::fp32)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  // The file's weights over an fp16 cache: llama.cpp's default KV type, for the peer comparison.
  benchmark::RegisterBenchmark("decode/file,kv=fp16", BM_decode, std::string("file"), KvDtype::fp16)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  for (const std::string& w : kWeights)
    benchmark::RegisterBenchmark(("prefill/" + w).c_str(), BM_prefill, w)->UseManualTime()->Unit(benchmark::kMillisecond);
  auto* batch = benchmark::RegisterBenchmark("decode_batch", BM_decode_batch, KvDtype::fp32)
                    ->UseManualTime()
                    ->Unit(benchmark::kMillisecond);
  for (int64_t B = 1; B <= kMaxBatch; B *= 2) batch->Arg(B);
  // Over smaller caches: where the KV bytes are most of the step, KV quantization pays — fp16 at
  // B = 32, INT8 at every B (chapter 11 places the whole sweep on the roofline with the int8 ridge).
  benchmark::RegisterBenchmark("decode_batch,kv=fp16", BM_decode_batch, KvDtype::fp16)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->Arg(32);
  auto* int8_batch = benchmark::RegisterBenchmark("decode_batch,kv=int8", BM_decode_batch, KvDtype::int8)
                         ->UseManualTime()
                         ->Unit(benchmark::kMillisecond);
  for (int64_t B = 1; B <= kMaxBatch; B *= 2) int8_batch->Arg(B);
  if (const std::string why = backend_unavailable_reason(Backend::cuda); why.empty()) {
    auto* gpu = benchmark::RegisterBenchmark("decode_cuda", BM_decode_cuda)->UseManualTime()->Unit(benchmark::kMillisecond);
    for (int64_t B = 1; B <= kMaxBatch; B *= 2) gpu->Arg(B);
    benchmark::RegisterBenchmark("prefill_cuda", BM_prefill_cuda)->UseManualTime()->Unit(benchmark::kMillisecond);
  } else {
    std::cerr << "bench_ch08: decode_cuda and prefill_cuda skipped: " << why << "\n";
  }
  bench::add_roofline_context("2 FLOPs per weight per token + 4·d per (query head, visible key)",
                              "weights as stored, read once per step + K and V of every cached token (fp32)");
  benchmark::AddCustomContext("model", g_model_path);
  const char* spin = std::getenv("GOMP_SPINCOUNT");  // the launcher sets 1000 (./inferlab's comment)
  benchmark::AddCustomContext("GOMP_SPINCOUNT", spin ? spin : "unset (libgomp's default)");
  benchmark::AddCustomContext("decode_context_tokens", std::to_string(kContext));
  benchmark::AddCustomContext("prefill_prompt", "the first 512 tokens of " + text_path());
}

// ---- (d): quality ----

struct QualityRun {
  std::string name;     // what the lesson's table calls it
  std::string weights;  // "file" or a format
  KvDtype kv = KvDtype::fp32;
};

// log p(ids[t] | ids[< t]) summed over t = 1 … n − 1, in float64, through the paged cache in chunks.
double total_log_prob(const model::LlamaModel& m, KvFormat kv, const std::vector<int32_t>& ids) {
  constexpr int64_t kBlock = 16;
  const int64_t n = int64_t(ids.size()), blocks = (n + kBlock - 1) / kBlock;
  KvCache cache(m.kv_shape(1, blocks * kBlock), kv, KvPaging{kBlock, blocks});
  std::vector<int32_t> table;
  for (int64_t i = 0; i < blocks; ++i) table.push_back(int32_t(i));
  double sum = 0.0;
  for (int64_t start = 0; start < n; start += kPplChunk) {
    const int64_t len = std::min(kPplChunk, n - start);
    std::vector<int64_t> slots;
    for (int64_t t = start; t < start + len; ++t) slots.push_back(t);  // block i holds tokens 16i … 16i + 15
    model::StepPlan plan;
    plan.add_sequence(std::span(ids.data() + start, size_t(len)), slots, start + len, table, false);
    for (int64_t j = 0; j < len; ++j) plan.logits_indices.push_back(j);
    const Tensor<float> logits = m.forward(plan, cache);
    const int64_t vocab = logits.dim(1);
    for (int64_t j = 0; j < len; ++j) {
      const int64_t next = start + j + 1;  // the token these logits predict
      if (next >= n) break;
      const float* row = logits.data() + j * vocab;
      const double mx = double(*std::max_element(row, row + vocab));
      double z = 0.0;
      for (int64_t v = 0; v < vocab; ++v) z += std::exp(double(row[v]) - mx);
      sum += double(row[ids[size_t(next)]]) - mx - std::log(z);
    }
  }
  return sum;
}

int quality_study(const std::string& out_path) {
  const std::vector<int32_t>& ids = text_ids();
  const int64_t scored = int64_t(ids.size()) - 1;
  std::cout << "\n(d) perplexity of " << text_path() << "\n    " << ids.size()
            << " tokens, one sequence, chunks of " << kPplChunk << ", " << scored << " tokens scored\n";
  const std::vector<QualityRun> runs = {
      {"file weights (Q4_1 + Q8_0 head), fp32 KV", "file", KvDtype::fp32},
      {"file dequantized to f32 (the floor)", "f32", KvDtype::fp32},
      {"file requantized to q8_0", "q8_0", KvDtype::fp32},
      {"file requantized to q4_0", "q4_0", KvDtype::fp32},
      {"file weights, fp16 KV", "file", KvDtype::fp16},
      {"file weights, INT8 KV (per token)", "file", KvDtype::int8},
      {"file weights, FP8 E4M3 KV", "file", KvDtype::fp8},
      // The KV formats again on the floor's weights, whose linear layers do not round the
      // activations: the KV cache's own effect, without the 8-bit activations' noise.
      {"f32 weights, fp16 KV", "f32", KvDtype::fp16},
      {"f32 weights, INT8 KV (per token)", "f32", KvDtype::int8},
      {"f32 weights, FP8 E4M3 KV", "f32", KvDtype::fp8},
  };
  std::vector<double> ppl;
  std::cout << "  " << std::left << std::setw(44) << "weights, KV cache" << std::right << std::setw(10) << "PPL"
            << std::setw(14) << "vs floor" << std::setw(14) << "vs file" << std::setw(10) << "seconds\n";
  for (const QualityRun& r : runs) {
    const auto t0 = std::chrono::steady_clock::now();
    const double lp = total_log_prob(model_for(r.weights), KvFormat(r.kv), ids);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ppl.push_back(std::exp(-lp / double(scored)));
    const auto pct = [](double a, double b) { return 100.0 * (a / b - 1.0); };
    std::cout << "  " << std::left << std::setw(44) << r.name << std::right << std::fixed << std::setprecision(4)
              << std::setw(10) << ppl.back() << std::setprecision(2) << std::setw(13)
              << (ppl.size() > 1 ? pct(ppl.back(), ppl[1]) : 0.0) << "%" << std::setw(13)
              << pct(ppl.back(), ppl[0]) << "%" << std::setprecision(1) << std::setw(9) << seconds << std::endl;
    if (ppl.size() == 2)  // the floor is known now: the file's row against it
      std::cout << "    (file vs floor: " << std::setprecision(2) << pct(ppl[0], ppl[1]) << "%)" << std::endl;
  }
  if (!out_path.empty()) {
    Json json = {{"machine", bench::measured_roofline().cpu},
                 {"model", g_model_path},
                 {"text", "chapters/08-real-model/data/alice-chapter-1.txt"},
                 {"tokens", int64_t(ids.size())},
                 {"scored_tokens", scored},
                 {"chunk_tokens", kPplChunk},
                 {"runs", Json::array()}};
    for (size_t i = 0; i < runs.size(); ++i)
      json["runs"].push_back({{"name", runs[i].name},
                              {"weights", runs[i].weights},
                              {"kv", std::string(to_string(runs[i].kv))},
                              {"ppl", json_number(ppl[i], 6)}});
    std::ofstream out(out_path);
    out << format_json(json) << "\n";
    if (!out) throw std::runtime_error("cannot write '" + out_path + "'");
    std::cout << "\nwrote " << out_path << "\n";
  }
  return 0;
}

const char* kUsage = R"(Chapter 08's own options (before or after Google Benchmark's):
  --model M               the GGUF file (default: smollm2, installed by ./inferlab setup)
  --quality-out FILE      write the perplexity study (d) as JSON (what the lesson's table comes from)
  --no-quality            only the timings (a), (c)
  --quality-only          only the perplexity study (d)
)";

}  // namespace

int main(int argc, char** argv) {
  auto [benchmark_args, own] = bench::split_benchmark_args(argc, argv);  // Google Benchmark's flags, ours
  const Args args(own, {"no-quality", "quality-only"});
  if (args.help()) {
    std::cout << kUsage << "\nGoogle Benchmark's options:\n";
    static char help[] = "--help";
    char* help_args[] = {argv[0], help};
    return bench::run_benchmarks(2, help_args, register_benchmarks);
  }
  try {
    args.check_known({"model", "quality-out", "no-quality", "quality-only"});
    g_model_path = model::resolve_model_path(args.get_or("model", "smollm2"));
  } catch (const std::invalid_argument& e) {
    std::cerr << "bench_ch08: " << e.what() << "\n" << kUsage;
    return 1;
  }
  if (!args.has("quality-only")) {
    const int status = bench::run_benchmarks(int(benchmark_args.size()), benchmark_args.data(), register_benchmarks);
    if (status != 0) return status;
  }
  return args.has("no-quality") ? 0 : quality_study(args.get_or("quality-out", ""));
}
