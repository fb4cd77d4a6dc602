// Chapter 08: SmolLM2-135M-Instruct from its GGUF file (runtime/model/gguf_model.h) against an
// independent float64 forward (reference_forward.py: PyPI gguf's reader and dequantizer, NumPy).
//
//  - The shape comes from the metadata, the weights in the file's own formats (Q4_1 matrices, a
//    Q8_0 embedding that is also the tied output head), their bytes those of the file.
//  - Dequantized to fp32 (--weights f32), the model computes the reference's function: every
//    logit of every position within fp32 rounding of the float64 one.
//  - As shipped (Q4_1 × Q8_1 activations, as llama.cpp computes), the logits differ from the
//    reference by the activations' 8-bit quantization only: a bounded relative error, and the
//    same top-1 token wherever the reference's top-2 margin is clear.
//  - Through the engine (paged cache, chunked prefill, two requests at once), greedy tokens equal
//    each request run alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "runtime/engine/engine.h"
#include "runtime/gguf/gguf.h"
#include "runtime/model/gguf_model.h"
#include "runtime/model/llama_model.h"
#include "tests/07-continuous-batching/engine_fixture.h"
#include "tests/08-real-model/model_fixture.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

using model::LlamaModel;
using testing::logits_alone;
using testing::reference_logits;
using testing::smollm2_path;

// A ChatML conversation ("What is the capital of France?" with SmolLM2's default system message)
// and the reference's greedy answer "The capital of France is Paris.": real text, 44 positions.
const std::vector<int32_t> kConversation = {
    1,    9690, 198,  2683, 359,  253,   5356, 5646, 11173, 3365, 3511, 308, 34519, 28,   7018,
    411,  407,  19712, 8182, 2,   198,   1,    4093, 198,   1780, 314,  260, 3575,  282,  4649,
    47,   2,    198,  1,    520,  9531,  198,  504,  3575,  282,  4649, 314, 7042,  30};

// As shipped vs the float64 reference: the bound on each position's relative RMS logit error, and
// the top-2 margin above which the top-1 tokens must agree. Each matmul's input is rounded to 8
// bits per block of 32 (a relative error up to 1/254 of the block's largest value), 211 matmuls
// deep; measured on this conversation the worst position is 0.13 (most are 0.03–0.10), so 0.2
// leaves room for other seeds' noise tokens while a wrong block term (a Q4_1 minimum dropped, a
// nibble order swapped) moves every position by whole units (tests/wrong/ proves the kernel
// check; the dequantized test above proves the wiring to 3e-6).
constexpr double kShippedRmsBound = 0.2;
constexpr double kClearMargin = 0.5;

// Per position: the largest |got − want| over the vocabulary, relative to the row's largest |want|;
// and whether the argmax agrees, with the reference's top-2 margin.
struct RowError {
  double max_rel = 0, rms_rel = 0, margin = 0;
  bool same_top1 = true;
};

RowError compare_row(const float* got, const double* want, int64_t vocab) {
  double scale = 0, sq = 0, ref_sq = 0, max_err = 0;
  int64_t top_got = 0, top_want = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    scale = std::max(scale, std::abs(want[v]));
    const double e = double(got[v]) - want[v];
    max_err = std::max(max_err, std::abs(e));
    sq += e * e;
    ref_sq += want[v] * want[v];
    if (got[v] > got[top_got]) top_got = v;
    if (want[v] > want[top_want]) top_want = v;
  }
  double second = -INFINITY;
  for (int64_t v = 0; v < vocab; ++v)
    if (v != top_want) second = std::max(second, want[v]);
  return {max_err / scale, std::sqrt(sq / ref_sq), want[top_want] - second, top_got == top_want};
}

TEST(SmolLM2FromGguf, ShapeFromTheMetadataAndWeightsInTheFilesFormats) {
  const std::string path = smollm2_path();
  ASSERT_FALSE(::testing::Test::HasFailure());
  const gguf::GgufFile file = gguf::GgufFile::open(path);
  const model::LlamaConfig c = model::gguf_llama_config(file);
  EXPECT_EQ(c.dim, int64_t(file.get_uint("llama.embedding_length")));
  EXPECT_EQ(c.hidden_dim, int64_t(file.get_uint("llama.feed_forward_length")));
  EXPECT_EQ(c.n_layers, int64_t(file.get_uint("llama.block_count")));
  EXPECT_EQ(c.n_heads, int64_t(file.get_uint("llama.attention.head_count")));
  EXPECT_EQ(c.n_kv_heads, int64_t(file.get_uint("llama.attention.head_count_kv")));
  EXPECT_EQ(c.head_dim(), int64_t(file.get_uint("llama.rope.dimension_count")));
  EXPECT_EQ(c.max_seq_len, int64_t(file.get_uint("llama.context_length")));
  EXPECT_EQ(c.rope_theta, file.get_float("llama.rope.freq_base"));
  EXPECT_EQ(c.norm_eps, float(file.get_float("llama.attention.layer_norm_rms_epsilon")));
  EXPECT_EQ(c.rope_style, RopeStyle::adjacent) << "GGUF llama files rotate adjacent pairs";
  EXPECT_TRUE(c.shared_classifier) << "no output.weight: the head is token_embd";
  EXPECT_EQ(c.vocab_size, file.tensor("token_embd.weight").ne[1]);
  // real-model.md's shape, read from the file above: 30 × (576, 1536), 9 / 3 heads of 64, 49152.
  EXPECT_EQ(c.describe().find("dim 576"), 0u) << c.describe();

  const model::LlamaWeights w = model::load_gguf_weights(file);
  EXPECT_EQ(w.embedding.format(), WeightFormat::q8_0);
  for (const model::LlamaLayerWeights& l : w.layers)
    for (const Weight* m : {&l.wqkv, &l.wo, &l.w13, &l.w2}) EXPECT_EQ(m->format(), WeightFormat::q4_1);
  // Every byte of the file's tensors is a weight byte once (the tied head is the embedding).
  int64_t tensor_bytes = 0;
  for (const gguf::TensorInfo& t : file.tensors()) tensor_bytes += int64_t(t.bytes);
  EXPECT_EQ(w.bytes(), tensor_bytes);
}

// fp32 forward of the dequantized weights vs the float64 forward of the same weights: only the
// arithmetic's precision differs. Measured on this file: the largest error is below 1e-4 of the
// row's largest logit (fp32's 6e-8 rounding, summed over 30 layers' dot products of 576–1536
// terms); 1e-3 leaves a factor 10 and still catches any wrong wiring (a RoPE pair, a GQA head
// map, ε, the tied head), each of which moves logits by whole units.
TEST(SmolLM2FromGguf, DequantizedWeightsComputeTheFloat64ReferenceFunction) {
  const std::string path = smollm2_path();
  ASSERT_FALSE(::testing::Test::HasFailure());
  testing::SeededRng rng;
  std::vector<int32_t> ids = kConversation;
  const std::vector<int32_t> noise = testing::random_tokens(rng, 9, 49152);
  ids.insert(ids.end(), noise.begin(), noise.end());  // odd length, tokens no text would give
  const Tensor<double> want = reference_logits(path, ids);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const LlamaModel m(model::load_model(path, WeightFormat::f32));
  const int64_t vocab = m.config().vocab_size;
  const Tensor<float> got = logits_alone(m, ids);
  ASSERT_EQ(want.shape(), got.shape());
  double worst = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    const RowError e = compare_row(got.data() + t * vocab, want.data() + t * vocab, vocab);
    worst = std::max(worst, e.max_rel);
    EXPECT_LE(e.max_rel, 1e-3) << "position " << t << " (token " << ids[t] << ")";
    if (e.margin > 1e-2) {
      EXPECT_TRUE(e.same_top1) << "position " << t << ", margin " << e.margin;
    }
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
  std::printf("dequantized fp32 vs float64: largest error %.3g of the row's largest logit\n", worst);
}

TEST(SmolLM2FromGguf, AsShippedTheLogitsDifferByTheActivationQuantizationOnly) {
  const std::string path = smollm2_path();
  ASSERT_FALSE(::testing::Test::HasFailure());
  const Tensor<double> want = reference_logits(path, kConversation);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const LlamaModel m(model::load_model(path));
  const int64_t vocab = m.config().vocab_size;
  const Tensor<float> got = logits_alone(m, kConversation);
  double worst_rms = 0;
  int clear = 0;
  for (size_t t = 0; t < kConversation.size(); ++t) {
    const RowError e = compare_row(got.data() + t * vocab, want.data() + t * vocab, vocab);
    worst_rms = std::max(worst_rms, e.rms_rel);
    EXPECT_LE(e.rms_rel, kShippedRmsBound) << "position " << t;
    if (e.margin > kClearMargin) {
      ++clear;
      EXPECT_TRUE(e.same_top1) << "position " << t << ": the reference's top-2 margin " << e.margin << " is clear";
    }
  }
  EXPECT_GE(clear, int(kConversation.size()) / 2) << "too few clear positions for the top-1 check to mean much";
  std::printf("as shipped vs float64: largest relative RMS error %.3g; %d of %zu positions with a clear margin\n",
              worst_rms, clear, kConversation.size());
}

TEST(SmolLM2FromGguf, EngineGreedyTokensEqualEachRequestAlone) {
  const std::string path = smollm2_path();
  ASSERT_FALSE(::testing::Test::HasFailure());
  const LlamaModel m(model::load_model(path));
  testing::SeededRng rng;
  std::vector<engine::Request> requests(3);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].id = int64_t(i);
    requests[i].prompt = std::vector<int32_t>(kConversation.begin(), kConversation.begin() + 37);
    const std::vector<int32_t> tail = testing::random_tokens(rng, int64_t(3 + 5 * i), 49152);
    requests[i].prompt.insert(requests[i].prompt.end(), tail.begin(), tail.end());
    requests[i].sampling.max_new_tokens = 12;
  }
  engine::EngineConfig config;
  config.block_size = 16;
  config.num_blocks = 24;
  config.max_num_seqs = 3;
  config.chunk_size = 19;  // prompts cut into chunks that end mid-block
  config.max_num_batched_tokens = 40;
  config.max_seq_len = 128;
  testing::expect_same_tokens(m, testing::serve(m, config, requests), testing::alone(m, requests),
                              "SmolLM2 through the engine");
}

}  // namespace
}  // namespace inferlab
