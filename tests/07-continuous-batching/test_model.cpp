// Chapter 07: the Llama model (runtime/model) against the independent float64 oracle
// (tests/support/llama_reference.h, its own reader and forward):
//  - stories260K's logits at every position of its 256-token greedy sequence and of a random
//    100-token one, computed as one chunk, within the fp32 bound below of the oracle's;
//  - greedy generation from BOS with engine::generate_alone equals the committed ids exactly;
//  - a random model with a separate classifier and GQA (4 query heads on 1 KV head) written by
//    save_llama2c is read by the oracle, whose logits the forward matches: the writer, the oracle's
//    reader and the forward agree; load_llama2c(save_llama2c(w)) is w bit for bit;
//  - a mixed batch on one paged cache (a prompt chunk after a prefix, a decode step, an idle row)
//    gives every token the logits, bit for bit, of its sequence run alone on a contiguous cache —
//    fp32, and INT8 (fp32 and fp16 scales) and FP8 caches against the sequence alone in the same
//    format;
//  - a quantized KV cache keeps the logits within a bound derived from the format's step of the
//    fp32-KV forward's (and changes them: the format is used);
//  - bad files, bad random specs, bad forward batches and a KV format the forward cannot write
//    chunk by chunk (INT8 per-channel K scales) throw std::invalid_argument naming them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "common/tolerance.h"
#include "kernels/kv/kv_cache.h"
#include "kernels/kv/kv_factories.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/make_model_runner.h"
#include "runtime/model/llama_config.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/llama_weights.h"
#include "tests/07-continuous-batching/engine_fixture.h"
#include "tests/07-continuous-batching/stories_data.h"
#include "tests/support/llama_reference.h"
#include "tests/support/seeded.h"

#ifndef INFERLAB_SOURCE_DIR
#error "test_model.cpp needs INFERLAB_SOURCE_DIR (the repository root) to find models/ and its data file"
#endif

namespace inferlab {
namespace {

using model::LlamaModel;
using model::LlamaWeights;
using model::StepPlan;
using testing::committed_greedy_ids;
using testing::LlamaReference;
using testing::expect_invalid;
using testing::logits_alone;
using testing::random_tokens;
using testing::SeededRng;
using testing::stories_path;

/// A scratch file named after the running test, removed when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::string& tag = "") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("inferlab_ch07_model_" + std::to_string(::getpid()) + "_" + info->name() + tag + ".bin");
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}




// The bound on the forward's logits against the float64 oracle, per position: |Δ| ≤
// kLogitTolerance · max(1, max|logit| at that position) — tolerance_for(fp32).max_abs, the
// project's fp32 per-element bound, relative to the logits' scale. Why fp32 arithmetic fits it:
// each layer's GEMMs (inner sizes 64 and 172 here) carry a relative error of about √in · u ≈ 1e-6
// (u = 2⁻²⁴, errors of random sign), the residual stream adds the layers' errors, and RMSNorm and
// softmax are well conditioned at these activations; a handful of layers gives ~1e-5 of the
// logits' scale at worst, an order below the bound. Measured on stories260K (logits of size ~10):
// max |Δ| ≈ 6e-5, the worst position at ≈ 6e-6 of its scale — 16× inside the bound (the two
// stories260K tests print theirs; a failure names the worst position).
constexpr double kLogitTolerance = tolerance_for(Precision::fp32).max_abs;

/// What logits_match() measured.
struct LogitsError {
  double max_abs = 0.0;         ///< max |Δ| over every position
  double worst_ratio = 0.0;     ///< max over positions of max |Δ| / max(1, max|logit|)
  int64_t worst_position = -1;  ///< where that is
};

/// Success when every position's logits are within the bound above of the oracle's; the
/// failure names the worst position, its error and scale, and how many positions fail.

::testing::AssertionResult logits_match(const Tensor<float>& got, const std::vector<std::vector<double>>& want,
                                        LogitsError* measured = nullptr) {
  const int64_t positions = got.dim(0), vocab = got.dim(1);
  if (int64_t(want.size()) != positions) return ::testing::AssertionFailure() << "position counts differ";
  double worst_ratio = -1.0, worst_error = 0.0, worst_scale = 0.0, max_abs = 0.0;
  int64_t worst_position = -1, failing = 0;
  for (int64_t p = 0; p < positions; ++p) {
    double error = 0.0, scale = 1.0;
    bool finite = true;
    for (int64_t v = 0; v < vocab; ++v) {
      const float x = got[p * vocab + v];
      finite = finite && std::isfinite(x);
      error = std::max(error, std::abs(double(x) - want[size_t(p)][size_t(v)]));
      scale = std::max(scale, std::abs(want[size_t(p)][size_t(v)]));
    }
    const double ratio = finite ? error / scale : INFINITY;
    max_abs = std::max(max_abs, error);
    if (ratio > kLogitTolerance) ++failing;
    if (ratio > worst_ratio) worst_ratio = ratio, worst_error = error, worst_scale = scale, worst_position = p;
  }
  if (measured) *measured = {max_abs, worst_ratio, worst_position};
  ::testing::Test::RecordProperty("max_abs_logit_error", std::to_string(max_abs));
  if (failing == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << failing << " of " << positions << " positions exceed |Δ| ≤ "
                                       << kLogitTolerance << " · max(1, max|logit|); worst: position " << worst_position
                                       << ", max |Δ| = " << worst_error << " (scale " << worst_scale << ", ratio "
                                       << worst_ratio << ")";
}

/// The largest and second largest of @p row, and the index of the largest.
struct TopTwo {
  int64_t index = -1;
  double first = -INFINITY, second = -INFINITY;
};
template <class Row>
TopTwo top_two(const Row& row) {
  TopTwo t;
  for (size_t i = 0; i < row.size(); ++i) {
    const double x = row[i];
    if (x > t.first) {
      t.second = t.first, t.first = x, t.index = int64_t(i);
    } else if (x > t.second) {
      t.second = x;
    }
  }
  return t;
}

// ---- stories260K -------------------------------------------------------------------------------------

TEST(ModelStories260K, LogitsOfTheGreedySequenceEqualTheOracleAtEveryPosition) {
  const std::vector<int32_t> ids = committed_greedy_ids();
  ASSERT_EQ(ids.size(), 256u);
  std::vector<int32_t> tokens = {1};  // BOS, then the ids greedy fed back: 256 positions
  tokens.insert(tokens.end(), ids.begin(), ids.end() - 1);
  const LlamaModel model(model::load_llama2c(stories_path()));
  const Tensor<float> logits = logits_alone(model, tokens);
  LogitsError e;
  EXPECT_TRUE(logits_match(logits, LlamaReference(stories_path()).logits(tokens), &e));
  std::printf(
      "stories260K greedy sequence, 256 positions: max |Δlogit| vs float64 = %.3g; worst position %lld at "
      "%.3g of its logits' scale\n",
      e.max_abs, static_cast<long long>(e.worst_position), e.worst_ratio);
}

TEST(ModelStories260K, LogitsOfARandomSequenceEqualTheOracleAtEveryPosition) {
  SeededRng rng;
  const std::vector<int32_t> tokens = random_tokens(rng, 100, 512);
  const LlamaModel model(model::load_llama2c(stories_path()));
  LogitsError e;
  EXPECT_TRUE(logits_match(logits_alone(model, tokens), LlamaReference(stories_path()).logits(tokens), &e));
  std::printf(
      "stories260K random sequence, 100 positions: max |Δlogit| vs float64 = %.3g; worst position %lld at "
      "%.3g of its logits' scale\n",
      e.max_abs, static_cast<long long>(e.worst_position), e.worst_ratio);
}

TEST(ModelStories260K, GreedyFromBosEqualsTheCommittedIds) {
  const std::vector<int32_t> expected = committed_greedy_ids();
  ASSERT_EQ(expected.size(), 256u);
  const LlamaModel model(model::load_llama2c(stories_path()));
  engine::Request request;
  request.prompt = {1};
  request.sampling.max_new_tokens = 256;
  request.sampling.temperature = 0.0f;
  const std::vector<int32_t> got = engine::generate_alone(model, request).tokens;
  const auto diff = std::mismatch(got.begin(), got.end(), expected.begin(), expected.end());
  if (diff.first == got.end() && diff.second == expected.end()) return;
  const size_t i = size_t(diff.first - got.begin());
  std::ostringstream why;
  why << "generate_alone's ids differ from the committed ones (" << got.size() << " vs " << expected.size()
      << " ids) at generated token " << i;
  if (i < got.size() && i < expected.size()) {
    std::vector<int32_t> fed = {1};
    fed.insert(fed.end(), expected.begin(), expected.begin() + std::ptrdiff_t(i));
    const TopTwo ref = top_two(LlamaReference(stories_path()).logits(fed).back());
    why << ": got " << got[i] << ", committed " << expected[i] << "; the float64 reference's top-2 margin there is "
        << ref.first - ref.second << " (its argmax " << ref.index
        << ") — a margin near the fp32 error means a near-tie, anything larger a real difference";
  }
  ADD_FAILURE() << why.str();
}

// ---- a random model with a separate classifier and GQA, through the llama2.c format -------------------

std::string random_spec(uint64_t seed, bool tied) {
  return "random:tiny,layers=3,heads=4,kv_heads=1,tied=" + std::to_string(tied ? 1 : 0) +
         ",seed=" + std::to_string(seed);
}

TEST(ModelRandom, SavedFileReadByTheOracleGivesTheForwardsLogits) {
  SeededRng rng;
  const uint64_t seed = uint64_t(rng.integer(1, int64_t(1) << 40));
  const model::RandomModelSpec spec = model::parse_random_spec(random_spec(seed, false));
  ASSERT_EQ(spec.seed, seed);
  ASSERT_EQ(spec.config.n_layers, 3);
  ASSERT_EQ(spec.config.n_heads, 4);
  ASSERT_EQ(spec.config.n_kv_heads, 1);
  ASSERT_FALSE(spec.config.shared_classifier);
  const LlamaWeights weights = model::random_llama(spec.config, spec.seed);
  TempFile file;
  model::save_llama2c(weights, file.path());
  const LlamaReference reference(file.path());
  EXPECT_FALSE(reference.config().shared_classifier);
  EXPECT_EQ(reference.config().n_kv_heads, 1);
  const LlamaModel model(weights);
  const std::vector<int32_t> tokens = random_tokens(rng, 40, spec.config.vocab_size);
  EXPECT_TRUE(logits_match(logits_alone(model, tokens), reference.logits(tokens))) << random_spec(seed, false);
}

bool same_floats(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

void expect_same_weights(const LlamaWeights& a, const LlamaWeights& b) {
  const model::LlamaConfig &x = a.config, &y = b.config;
  EXPECT_EQ(x.dim, y.dim);
  EXPECT_EQ(x.hidden_dim, y.hidden_dim);
  EXPECT_EQ(x.n_layers, y.n_layers);
  EXPECT_EQ(x.n_heads, y.n_heads);
  EXPECT_EQ(x.n_kv_heads, y.n_kv_heads);
  EXPECT_EQ(x.vocab_size, y.vocab_size);
  EXPECT_EQ(x.max_seq_len, y.max_seq_len);
  EXPECT_EQ(x.shared_classifier, y.shared_classifier);
  const auto same = [](const Weight& p, const Weight& q) {
    if (p.shape() != q.shape() || p.format() != q.format()) return false;
    if (p.empty()) return true;
    if (p.format() == WeightFormat::f32) return same_floats(p.f32().data(), q.f32().data(), size_t(p.f32().size()));
    return std::memcmp(p.bits16().data(), q.bits16().data(), 2 * size_t(p.bits16().size())) == 0;
  };
  const auto same_vec = [](const std::vector<float>& p, const std::vector<float>& q) {
    return p.size() == q.size() && same_floats(p.data(), q.data(), p.size());
  };
  EXPECT_TRUE(same(a.embedding, b.embedding)) << "embedding";
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    EXPECT_TRUE(same_vec(a.layers[l].attention_norm, b.layers[l].attention_norm)) << "layer " << l << " attention_norm";
    EXPECT_TRUE(same(a.layers[l].wqkv, b.layers[l].wqkv)) << "layer " << l << " wqkv";
    EXPECT_TRUE(same(a.layers[l].wo, b.layers[l].wo)) << "layer " << l << " wo";
    EXPECT_TRUE(same_vec(a.layers[l].ffn_norm, b.layers[l].ffn_norm)) << "layer " << l << " ffn_norm";
    EXPECT_TRUE(same(a.layers[l].w13, b.layers[l].w13)) << "layer " << l << " w13";
    EXPECT_TRUE(same(a.layers[l].w2, b.layers[l].w2)) << "layer " << l << " w2";
  }
  EXPECT_TRUE(same_vec(a.final_norm, b.final_norm)) << "final_norm";
  EXPECT_TRUE(same(a.classifier, b.classifier)) << "classifier";
}

TEST(ModelRandom, SaveThenLoadRoundTripsEveryWeightBitForBit) {
  SeededRng rng;
  for (const bool tied : {false, true}) {
    const uint64_t seed = uint64_t(rng.integer(1, int64_t(1) << 40));
    SCOPED_TRACE(random_spec(seed, tied));
    const LlamaWeights weights = model::load_model(random_spec(seed, tied));
    expect_same_weights(weights, model::load_model(random_spec(seed, tied)));  // a function of the seed
    TempFile file(tied ? "_tied" : "_separate");
    model::save_llama2c(weights, file.path());
    expect_same_weights(model::load_llama2c(file.path()), weights);
  }
}

TEST(ModelStories260K, SaveThenLoadRewritesTheFileItRead) {
  // The writer emits llama2.c's layout byte for byte except the legacy RoPE tables (unused by
  // every reader, written as zeros): load → save → load keeps every weight.
  const LlamaWeights weights = model::load_llama2c(stories_path());
  TempFile file;
  model::save_llama2c(weights, file.path());
  EXPECT_EQ(std::filesystem::file_size(file.path()), std::filesystem::file_size(stories_path()));
  expect_same_weights(model::load_llama2c(file.path()), weights);
}

// ---- a mixed batch on a paged cache equals each sequence alone ----------------------------------------

// Three sequences in one paged cache (blocks of 4, scattered): call 1 brings row 0's first 5
// prompt tokens, row 1's whole prompt (9) and row 2's (6); call 2 row 0's next 7 prompt tokens
// and row 1's decode token, row 2 idle; call 3 row 0's and row 2's decode tokens, row 1 idle.
// Every logit row must be the bits of the same position with the sequence alone, one chunk, on a
// contiguous cache.
void expect_mixed_batch_equals_alone(const LlamaModel& model, SeededRng& rng,
                                     const KvFormat& kv_format = KvFormat::fp32()) {
  const int64_t vocab = model.config().vocab_size, max_len = 32, block = 4, per_row = max_len / block;
  std::vector<std::vector<int32_t>> seqs = {random_tokens(rng, 13, vocab), random_tokens(rng, 10, vocab),
                                            random_tokens(rng, 7, vocab)};
  const int64_t num_blocks = 3 * per_row + 5;
  KvCache cache(model.kv_shape(3, max_len), kv_format, KvPaging{block, num_blocks});
  const std::vector<int32_t> order = scattered_block_order(num_blocks, rng.seed());
  std::vector<std::vector<int32_t>> tables;  // sequence r's blocks, scattered; the plan maps them
  for (int64_t r = 0; r < 3; ++r)
    tables.emplace_back(order.begin() + r * per_row, order.begin() + (r + 1) * per_row);

  std::vector<Tensor<float>> alone;
  for (const auto& s : seqs) alone.push_back(logits_alone(model, s, kv_format));

  // Per call: the chunk of each row as [first, end) positions of its sequence.
  struct Chunk {
    int64_t first, end;
  };
  const std::vector<std::vector<Chunk>> calls = {
      {{0, 5}, {0, 9}, {0, 6}},
      {{5, 12}, {9, 10}, {6, 6}},
      {{12, 13}, {10, 10}, {6, 7}},
  };
  for (size_t call = 0; call < calls.size(); ++call) {
    StepPlan batch;  // sequence r is row r (a query of 0: it sits out this call, its context kept)
    for (int64_t r = 0; r < 3; ++r) {
      const Chunk c = calls[call][size_t(r)];
      std::vector<int64_t> slots;
      for (int64_t p = c.first; p < c.end; ++p) {
        batch.logits_indices.push_back(int64_t(batch.token_ids.size() + slots.size()));
        slots.push_back(int64_t{tables[size_t(r)][size_t(p / block)]} * block + p % block);
      }
      const std::vector<int32_t>& seq = seqs[size_t(r)];
      batch.add_sequence(std::span(seq).subspan(size_t(c.first), size_t(c.end - c.first)), slots, c.end,
                         tables[size_t(r)], false);
    }
    const Tensor<float> logits = model.forward(batch, cache);
    int64_t row = 0;
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t p = calls[call][size_t(r)].first; p < calls[call][size_t(r)].end; ++p, ++row)
        EXPECT_TRUE(same_floats(logits.data() + row * vocab, alone[size_t(r)].data() + p * vocab, size_t(vocab)))
            << "call " << call + 1 << ", cache row " << r << ", position " << p
            << ": the logits differ from the sequence run alone";
  }
}

TEST(ModelMixedBatch, EveryTokenGetsTheLogitsOfItsSequenceAlone) {
  SeededRng rng;
  {
    SCOPED_TRACE("stories260K");
    expect_mixed_batch_equals_alone(LlamaModel(model::load_llama2c(stories_path())), rng);
  }
  const uint64_t seed = uint64_t(rng.integer(1, int64_t(1) << 40));
  SCOPED_TRACE(random_spec(seed, false));
  expect_mixed_batch_equals_alone(LlamaModel(model::load_model(random_spec(seed, false))), rng);
}

// ---- quantized KV caches -----------------------------------------------------------------------------

// The same mixed batch on a paged INT8 or FP8 cache: every token's logits are the bits of its
// sequence alone on a contiguous cache of the same format (each row is quantized on its own as
// it is written, and the attention over codes and scales is batch-invariant).
TEST(ModelQuantizedKv, MixedBatchOnAPagedCacheEqualsEachSequenceAloneInTheSameFormat) {
  SeededRng rng;
  const LlamaModel stories(model::load_llama2c(stories_path()));
  for (const KvFormat& format :
       {KvFormat::int8(), KvFormat::int8(KeyScaling::per_token, ScaleDtype::fp16), KvFormat::fp8()}) {
    SCOPED_TRACE("stories260K, " + format.name());
    expect_mixed_batch_equals_alone(stories, rng, format);
  }
}

// The cpu model runner (make_model_runner's kv_format: the engine's pool) keeps its pool in the
// format it was given: a chunk through it — a paged pool of blocks of 4 in reverse order — gives
// the bits of the same chunk alone on a contiguous cache of that format, and not the fp32-KV
// forward's.
TEST(ModelQuantizedKv, TheCpuRunnersPoolIsInItsFormat) {
  SeededRng rng;
  const LlamaModel model(model::load_llama2c(stories_path()));
  const std::vector<int32_t> tokens = random_tokens(rng, 37, model.config().vocab_size);
  const int64_t T = int64_t(tokens.size()), block = 4, blocks = (T + block - 1) / block;
  std::vector<int32_t> table;
  for (int64_t b = blocks - 1; b >= 0; --b) table.push_back(int32_t(b));
  std::vector<int64_t> slots;
  for (int64_t t = 0; t < T; ++t) slots.push_back(int64_t(table[size_t(t / block)]) * block + t % block);
  StepPlan plan;
  plan.add_sequence(tokens, slots, T, table, false);
  plan.fresh_blocks = table;
  for (int64_t t = 0; t < T; ++t) plan.logits_indices.push_back(t);
  const Tensor<float> fp32_kv = logits_alone(model, tokens);
  for (const KvFormat& format :
       {KvFormat::int8(), KvFormat::int8(KeyScaling::per_token, ScaleDtype::fp16), KvFormat::fp8()}) {
    const auto runner = engine::make_model_runner(model, Backend::cpu, 1, T, {block, blocks}, format);
    EXPECT_EQ(runner->kv_format(), format);
    const Tensor<float> got = runner->run(plan);
    EXPECT_TRUE(same_floats(got.data(), logits_alone(model, tokens, format).data(), size_t(got.size())))
        << format.name() << ": the runner's logits are not those of a " << format.name() << " cache";
    EXPECT_FALSE(same_floats(got.data(), fp32_kv.data(), size_t(got.size())))
        << format.name() << ": the runner's logits are the fp32-KV forward's";
  }
}

// How far a quantized KV cache may move the logits from the fp32-KV forward's. The measure is
// the project's: the relative Frobenius error ‖logits − logits_fp32-KV‖ / ‖logits_fp32-KV‖ over
// every position. The bound is derived from the format's step, with the model's sensitivity to
// KV errors measured, not assumed:
//  - ε(format) = ‖x̂ − x‖ / ‖x‖ over every K and V row the fp32-KV forward caches for the
//    tokens (all layers), each row stored in the format and read back (KvCache::prefill, key(),
//    value()): the format's own round-trip error on this model's rows — INT8 per-token about
//    (max|row| / rms(row)) / (127·√12), FP8 E4M3 a relative ~2⁻³/√12 per element, fp16 2⁻¹¹/√12;
//  - a KV error this small acts linearly: the logits move by g·ε, where the gain g is the model's
//    (attention's softmax sharpness, the layers' conditioning). g is measured with fp16 KV, whose
//    rounding is the same kind of per-element perturbation at a known size:
//    g = err(fp16 KV) / ε(fp16);
//  - so g·ε(format) / kKvLinearMargin ≤ err(format) ≤ kKvLinearMargin · g·ε(format): the margin
//    3 covers that ε is measured on the fp32 forward's rows (a quantized forward's later layers
//    see slightly different ones) and the spread of the gain between formats (measured over 20
//    seeds: err / (g·ε) between 0.65 and 1.46 on both models below). The lower side holds the
//    forward to the format it was given: rows cached as fp16 instead would err ~20× less than
//    INT8 (ε(fp16) ≈ 2e-4 against ε(INT8) ≈ 4e-3 on these models), as fp32 not at all.
// Measured errors (20 seeds): stories260K (head_dim 8, trained) INT8 ≈ 2–3.4 %, FP8 E4M3
// ≈ 11–18 % — 3 mantissa bits against INT8's 127 steps, on rows of 8 — with fp16 ≈ 0.15 %; the
// random GQA model INT8 ≈ 0.3–0.45 %, FP8 ≈ 1.2–1.9 %. A forward that dropped the K or V
// scales or read codes as values errs by far more.
constexpr double kKvLinearMargin = 3.0;

double relative_frobenius(const Tensor<float>& got, const Tensor<float>& want) {
  double error = 0.0, norm = 0.0;
  for (int64_t i = 0; i < want.size(); ++i) {
    const double delta = double(got[i]) - double(want[i]);
    error += std::isfinite(delta) ? delta * delta : INFINITY;
    norm += double(want[i]) * double(want[i]);
  }
  return std::sqrt(error / norm);
}

// ε(format) above: the K and V rows the fp32-KV forward caches for @p tokens, stored in
// @p format and read back.
double kv_round_trip_error(const LlamaModel& model, const std::vector<int32_t>& tokens, const KvFormat& format) {
  const int64_t T = int64_t(tokens.size());
  KvCache fp32(model.kv_shape(1, T), KvDtype::fp32);
  std::vector<int64_t> slots;
  for (int64_t t = 0; t < T; ++t) slots.push_back(fp32.slot(0, t));
  StepPlan plan;
  plan.add_sequence(tokens, slots, T, {}, true);
  model.forward(plan, fp32);
  KvCache stored(model.kv_shape(1, T), format);
  double error = 0.0, norm = 0.0;
  for (int64_t layer = 0; layer < model.config().n_layers; ++layer) {
    const Tensor<float> k = fp32.keys(0, layer), v = fp32.values(0, layer);
    stored.prefill(0, k, v, layer);
    const Tensor<float> k_back = stored.keys(0, layer), v_back = stored.values(0, layer);
    for (int64_t i = 0; i < k.size(); ++i) {
      const double dk = double(k_back[i]) - double(k[i]), dv = double(v_back[i]) - double(v[i]);
      error += dk * dk + dv * dv;
      norm += double(k[i]) * double(k[i]) + double(v[i]) * double(v[i]);
    }
  }
  return std::sqrt(error / norm);
}

TEST(ModelQuantizedKv, LogitsStayWithinTheBoundDerivedFromTheFormatsStep) {
  SeededRng rng;
  const uint64_t seed = uint64_t(rng.integer(1, int64_t(1) << 40));
  struct Case {
    std::string name;
    LlamaModel model;
  };
  std::vector<Case> cases;
  cases.push_back({"stories260K", LlamaModel(model::load_llama2c(stories_path()))});
  cases.push_back({random_spec(seed, false), LlamaModel(model::load_model(random_spec(seed, false)))});
  for (const Case& c : cases) {
    const std::vector<int32_t> tokens = random_tokens(rng, 100, c.model.config().vocab_size);
    const Tensor<float> fp32_kv = logits_alone(c.model, tokens);
    const double fp16_error = relative_frobenius(logits_alone(c.model, tokens, KvFormat::fp16()), fp32_kv);
    ASSERT_GT(fp16_error, 0.0) << c.name << ": fp16 KV gave the fp32-KV logits' bits — was it used at all?";
    const double gain = fp16_error / kv_round_trip_error(c.model, tokens, KvFormat::fp16());
    for (const KvFormat& format :
         {KvFormat::int8(), KvFormat::int8(KeyScaling::per_token, ScaleDtype::fp16), KvFormat::fp8()}) {
      const double error = relative_frobenius(logits_alone(c.model, tokens, format), fp32_kv);
      const double step = kv_round_trip_error(c.model, tokens, format);
      std::printf("%s, %s KV: logits' relative error vs the fp32-KV forward %.3g; bound %.3g (its KV round trip "
                  "%.3g × the model's gain %.3g, measured with fp16 KV, × %.0f)\n",
                  c.name.c_str(), format.name().c_str(), error, kKvLinearMargin * gain * step, step, gain,
                  kKvLinearMargin);
      EXPECT_GE(error, gain * step / kKvLinearMargin)
          << c.name << ", " << format.name() << ": the logits moved less than the format's step predicts — were the "
          << "rows stored in it?";
      EXPECT_LE(error, kKvLinearMargin * gain * step) << c.name << ", " << format.name();
    }
  }
}

// ---- errors ----------------------------------------------------------------------------------------------

TEST(ModelErrors, ForwardRefusesPerChannelKeyScalesNamingTheFormat) {
  const LlamaModel model(model::load_model("random:tiny,seed=7"));
  for (const KvFormat format :
       {KvFormat::int8(KeyScaling::per_channel), KvFormat::int8(KeyScaling::per_channel, ScaleDtype::fp16)}) {
    KvCache cache(model.kv_shape(1, 8), format);  // contiguous: KvCache itself refuses it paged
    StepPlan plan;
    plan.add_sequence(std::vector<int32_t>{3, 5}, std::vector<int64_t>{cache.slot(0, 0), cache.slot(0, 1)}, 2, {},
                      true);
    expect_invalid([&] { model.forward(plan, cache); }, {"kv_format", format.name(), "per-channel"});
    EXPECT_EQ(cache.length(0), 0) << "a refused cache was changed";
    expect_invalid([&] { model::check_kv_format(format); }, {"kv_format", format.name()});
  }
  for (const KvFormat format : {KvFormat::fp32(), KvFormat::fp16(), KvFormat::int8(),
                                KvFormat::int8(KeyScaling::per_token, ScaleDtype::fp16), KvFormat::fp8()})
    EXPECT_NO_THROW(model::check_kv_format(format)) << format.name();
}

TEST(ModelErrors, LoadRejectsAMissingTruncatedOrBadFileNamingIt) {
  {
    TempFile missing("_missing");
    expect_invalid([&] { model::load_llama2c(missing.path()); }, {missing.path(), "cannot be opened"});
  }
  const std::vector<char> bytes = file_bytes(stories_path());
  ASSERT_GT(bytes.size(), 28u);
  {
    TempFile file("_truncated");
    write_bytes(file.path(), std::vector<char>(bytes.begin(), bytes.end() - 4));
    expect_invalid([&] { model::load_llama2c(file.path()); }, {file.path()});
  }
  {
    TempFile file("_header_only");
    write_bytes(file.path(), std::vector<char>(bytes.begin(), bytes.begin() + 27));
    expect_invalid([&] { model::load_llama2c(file.path()); }, {file.path(), "header"});
  }
  struct BadField {
    int index;
    int32_t value;
    const char* named;
  };
  for (const BadField& bad : {BadField{3, 3, "n_heads"}, BadField{4, 3, "n_kv_heads"}, BadField{0, 0, "dim"},
                              BadField{2, -1, "n_layers"}, BadField{6, 0, "max_seq_len"}}) {
    TempFile file("_bad_header");
    std::vector<char> copy = bytes;
    std::memcpy(copy.data() + 4 * bad.index, &bad.value, 4);
    write_bytes(file.path(), copy);
    SCOPED_TRACE(std::string("header field ") + bad.named);
    expect_invalid([&] { model::load_llama2c(file.path()); }, {file.path(), bad.named});
  }
}

TEST(ModelErrors, RandomSpecRejectsUnknownKeysPresetsAndBadValuesNamingThem) {
  expect_invalid([] { model::parse_random_spec("random:tiny,colour=3"); }, {"colour"});
  expect_invalid([] { model::parse_random_spec("random:huge"); }, {"huge"});
  expect_invalid([] { model::parse_random_spec("random:tiny,dim=abc"); }, {"dim", "abc"});
  expect_invalid([] { model::parse_random_spec("random:tiny,layers=2x"); }, {"layers", "2x"});
  expect_invalid([] { model::parse_random_spec("random:tiny,tied=2"); }, {"tied"});
  expect_invalid([] { model::parse_random_spec("random:tiny,heads=3"); }, {"n_heads"});
  expect_invalid([] { model::parse_random_spec("random:tiny,layers=0"); }, {"n_layers"});
  expect_invalid([] { model::parse_random_spec("random:tiny,bench"); }, {"bench"});
  expect_invalid([] { model::parse_random_spec("tiny"); }, {"random:"});
  EXPECT_NO_THROW(model::parse_random_spec("random:stories260K"));
  EXPECT_NO_THROW(model::parse_random_spec("random:dim=16,heads=2,kv_heads=1"));
}

TEST(ModelErrors, ForwardRejectsABadBatchNamingTheFieldAndChangesNothing) {
  const LlamaModel model(model::load_model("random:tiny,seed=7"));
  const int64_t vocab = model.config().vocab_size;
  KvCache cache(model.kv_shape(2, 16), KvDtype::fp32);
  StepPlan good;
  good.add_sequence(std::vector<int32_t>{3, 5}, std::vector<int64_t>{cache.slot(0, 0), cache.slot(0, 1)}, 2, {}, true);
  good.add_sequence(std::vector<int32_t>{7}, std::vector<int64_t>{cache.slot(1, 0)}, 1, {}, true);
  const auto rejected = [&](const std::function<void(StepPlan&)>& spoil, const std::string& field) {
    SCOPED_TRACE(field);
    StepPlan b = good;
    spoil(b);
    const std::vector<int32_t> lengths_before = cache.lengths();
    expect_invalid([&] { model.forward(b, cache); }, {field});
    EXPECT_EQ(cache.lengths(), lengths_before) << "a rejected plan changed the cache's lengths";
  };
  rejected([](StepPlan& b) { b.context_lens = {2}; }, "context_lens.size()");
  rejected(
      [](StepPlan& b) {
        b.cu_seqlens_q = {0, 2, 3, 3};
        b.context_lens.push_back(0);
        b.context_lens.push_back(0);
      },
      "num_seqs() = 3");
  rejected([](StepPlan& b) { b.token_ids.push_back(1); }, "positions.size()");
  rejected([](StepPlan& b) { b.slot_mapping.pop_back(); }, "slot_mapping.size()");
  rejected([](StepPlan& b) { b.cu_seqlens_q = {1, 2, 3}; }, "cu_seqlens_q[0]");
  rejected([](StepPlan& b) { b.cu_seqlens_q = {0, 2, 2}; }, "cu_seqlens_q[2]");
  rejected(
      [](StepPlan& b) {
        b.cu_seqlens_q = {0, 3, 3};
        b.context_lens = {3, 1};
      },
      "positions[2]");
  rejected([](StepPlan& b) { b.context_lens = {1, 1}; }, "context_lens[0]");
  rejected([](StepPlan& b) { b.positions[1] = 0; }, "positions[1]");
  rejected([](StepPlan& b) { b.slot_mapping[1] = b.slot_mapping[0]; }, "slot_mapping[1]");
  rejected([](StepPlan& b) { b.block_tables = {{0}, {1}}; }, "block_tables.size()");
  rejected([](StepPlan& b) { b.block_copies.push_back({0, 1}); }, "block_copies.size()");
  rejected([&](StepPlan& b) { b.token_ids[1] = int32_t(vocab); }, "token_ids[1]");
  rejected([](StepPlan& b) { b.token_ids[0] = -1; }, "token_ids[0]");
  rejected([](StepPlan& b) { b.logits_indices = {3}; }, "logits_indices[0]");
  rejected(
      [&](StepPlan& b) {
        b.context_lens[0] = 17;
        b.positions = {15, 16, 0};
      },
      "context_lens[0]");
  {
    // A paged cache: tables must cover their contexts, name pool blocks, and no slot may be
    // written twice in a step (two tables sharing a block at the same position).
    KvCache paged(model.kv_shape(2, 16), KvDtype::fp32, KvPaging{4, 6});
    const auto paged_rejected = [&](const StepPlan& b, const std::string& field) {
      SCOPED_TRACE(field);
      expect_invalid([&] { model.forward(b, paged); }, {field});
    };
    StepPlan twice;
    twice.add_sequence(std::vector<int32_t>{3}, std::vector<int64_t>{8}, 1, {2}, true);
    twice.add_sequence(std::vector<int32_t>{5}, std::vector<int64_t>{8}, 1, {2}, true);
    paged_rejected(twice, "is written twice in one step");
    StepPlan short_table;
    short_table.add_sequence(std::vector<int32_t>{3}, std::vector<int64_t>{1}, 5, {0}, true);
    paged_rejected(short_table, "block_tables[0].size() = 1");
    StepPlan outside;
    outside.add_sequence(std::vector<int32_t>{3}, std::vector<int64_t>{24}, 1, {6}, true);
    paged_rejected(outside, "block_tables[0][0] = 6");
    StepPlan wrong_slot;
    wrong_slot.add_sequence(std::vector<int32_t>{3, 4}, std::vector<int64_t>{8, 10}, 2, {2}, true);
    paged_rejected(wrong_slot, "slot_mapping[1] = 10");
    StepPlan fine;
    fine.add_sequence(std::vector<int32_t>{3, 4}, std::vector<int64_t>{8, 9}, 2, {2}, true);
    fine.fresh_blocks = {2};
    EXPECT_NO_THROW(model.forward(fine, paged));
  }
  {
    KvCache other(KvCacheShape{2, model.config().n_kv_heads, 16, model.config().head_dim(), 1}, KvDtype::fp32);
    expect_invalid([&] { model.forward(good, other); }, {"cache shape"});
  }
  EXPECT_NO_THROW(model.forward(good, cache));
}

}  // namespace
}  // namespace inferlab
