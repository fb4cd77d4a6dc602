// Chapter 07: the model's typed weights and its fuller config (runtime/model), against a float64
// forward written here over the *stored* weights (each matrix widened exactly from its format):
//  - fp16 and bf16 models (load_model(spec, format): every matrix rounded once) give, at every
//    position, the float64 logits of their own rounded weights within the fp32 bound — and
//    visibly not those of the fp32 weights (the rounding is there and the check sees it); fp32 is
//    the generator's weights bit for bit; save_llama2c widens 16-bit weights exactly;
//  - a model with head_dim ≠ dim / n_heads (dim 48, 4 heads of 16: q_dim 64) and one with
//    half-split RoPE, θ = 1e5 and fp16 weights match the float64 forward and run through the
//    engine: batched tokens equal each request alone, and every greedy token is the float64
//    argmax or a near-tie of it;
//  - a half_split model whose wq/wk rows are permuted within each head (llama.cpp's converter, in
//    reverse) gives the adjacent model's logits within fp32 rounding; without the permutation it
//    does not;
//  - step_cost counts the stored bytes: an fp16 model's step reads the fp32 bytes minus half of
//    the matrix bytes the step reads; LlamaWeights::bytes() = config.weight_bytes(format);
//  - bad head_dim / rope / theta keys and configs throw std::invalid_argument naming them; the
//    device forward refuses half_split with std::logic_error naming it.
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/tolerance.h"
#include "kernels/kv/kv_cache.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/make_model_runner.h"
#include "runtime/model/llama_config.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_runner.h"
#include "runtime/model/llama_weights.h"
#include "tests/07-continuous-batching/engine_fixture.h"
#include "tests/support/seeded.h"

namespace inferlab {
namespace {

using model::LlamaConfig;
using model::LlamaModel;
using model::LlamaWeights;
using model::StepPlan;
using testing::expect_invalid;
using testing::logits_alone;
using testing::random_tokens;
using testing::SeededRng;



std::string seed_suffix(SeededRng& rng) {
  return ",seed=" + std::to_string(rng.integer(1, int64_t(1) << 40));
}

// ---- the float64 forward over the stored weights ----------------------------------------------------

/// The model's forward in double precision for one sequence, from the config's definitions:
/// RMSNorm, RoPE by the config's style and θ (pair i of a head at (2i, 2i+1) or (i, i + d/2),
/// angle pos · θ^(−2i/d)), causal GQA attention over n_heads heads of head_dim (q_dim wide),
/// SwiGLU, the final norm and the head. Each matrix is read as stored (Weight::to_f32(): exact).
class Float64Forward {
 public:
  explicit Float64Forward(const LlamaWeights& w) : w_(w), c_(w.config) {
    const auto widen = [](const Weight& m) {
      const Tensor<float> f = m.to_f32();
      return std::vector<double>(f.data(), f.data() + f.size());
    };
    embedding_ = widen(w.embedding);
    head_ = widen(w.output_head());
    for (const auto& l : w.layers) layers_.push_back({widen(l.wqkv), widen(l.wo), widen(l.w13), widen(l.w2)});
  }

  /// Logits at every position of @p tokens: [position][vocab].
  std::vector<std::vector<double>> logits(const std::vector<int32_t>& tokens) const {
    const int64_t dim = c_.dim, d = c_.head_dim(), H = c_.n_heads, G = c_.n_kv_heads, q_dim = H * d, kv = G * d;
    const int64_t hidden = c_.hidden_dim, T = int64_t(tokens.size());
    std::vector<std::vector<double>> out;
    std::vector<std::vector<std::vector<double>>> keys(size_t(c_.n_layers)), values(size_t(c_.n_layers));
    for (int64_t pos = 0; pos < T; ++pos) {
      std::vector<double> x(embedding_.begin() + tokens[size_t(pos)] * dim,
                            embedding_.begin() + (tokens[size_t(pos)] + 1) * dim);
      for (int64_t l = 0; l < c_.n_layers; ++l) {
        const Layer& m = layers_[size_t(l)];
        const std::vector<double> qkv = times(m.wqkv, norm(x, w_.layers[size_t(l)].attention_norm));
        std::vector<double> q(qkv.begin(), qkv.begin() + q_dim), k(qkv.begin() + q_dim, qkv.begin() + q_dim + kv);
        rotate(q, H, pos);
        rotate(k, G, pos);
        keys[size_t(l)].push_back(k);
        values[size_t(l)].emplace_back(qkv.begin() + q_dim + kv, qkv.end());
        std::vector<double> att(size_t(q_dim), 0.0);
        for (int64_t h = 0; h < H; ++h) {
          const int64_t g = h / (H / G);
          std::vector<double> score(size_t(pos + 1));
          double top = -INFINITY, sum = 0.0;
          for (int64_t t = 0; t <= pos; ++t) {
            double s = 0.0;
            for (int64_t i = 0; i < d; ++i) s += q[size_t(h * d + i)] * keys[size_t(l)][size_t(t)][size_t(g * d + i)];
            score[size_t(t)] = s / std::sqrt(double(d));
            top = std::max(top, score[size_t(t)]);
          }
          for (double& s : score) sum += s = std::exp(s - top);
          for (int64_t t = 0; t <= pos; ++t)
            for (int64_t i = 0; i < d; ++i)
              att[size_t(h * d + i)] += score[size_t(t)] / sum * values[size_t(l)][size_t(t)][size_t(g * d + i)];
        }
        const std::vector<double> o = times(m.wo, att);
        for (int64_t i = 0; i < dim; ++i) x[size_t(i)] += o[size_t(i)];
        const std::vector<double> gate_up = times(m.w13, norm(x, w_.layers[size_t(l)].ffn_norm));
        std::vector<double> glu(static_cast<size_t>(hidden));
        for (int64_t j = 0; j < hidden; ++j) {
          const double a = gate_up[size_t(j)];
          glu[size_t(j)] = a / (1.0 + std::exp(-a)) * gate_up[size_t(hidden + j)];
        }
        const std::vector<double> down = times(m.w2, glu);
        for (int64_t i = 0; i < dim; ++i) x[size_t(i)] += down[size_t(i)];
      }
      out.push_back(times(head_, norm(x, w_.final_norm)));
    }
    return out;
  }

 private:
  struct Layer {
    std::vector<double> wqkv, wo, w13, w2;
  };

  std::vector<double> norm(const std::vector<double>& x, const std::vector<float>& gain) const {
    double mean_square = 0.0;
    for (const double v : x) mean_square += v * v / double(x.size());
    const double inv = 1.0 / std::sqrt(mean_square + double(c_.norm_eps));
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = double(gain[i]) * x[i] * inv;
    return y;
  }

  static std::vector<double> times(const std::vector<double>& w, const std::vector<double>& x) {
    const size_t in = x.size(), rows = w.size() / in;
    std::vector<double> y(rows, 0.0);
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < in; ++c) y[r] += w[r * in + c] * x[c];
    return y;
  }

  void rotate(std::vector<double>& v, int64_t heads, int64_t pos) const {
    const int64_t d = c_.head_dim(), half = d / 2;
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const int64_t first = h * d + (c_.rope_style == RopeStyle::adjacent ? 2 * i : i);
        const int64_t second = c_.rope_style == RopeStyle::adjacent ? first + 1 : first + half;
        const double angle = double(pos) * std::pow(c_.rope_theta, -2.0 * double(i) / double(d));
        const double a = v[size_t(first)], b = v[size_t(second)];
        v[size_t(first)] = a * std::cos(angle) - b * std::sin(angle);
        v[size_t(second)] = a * std::sin(angle) + b * std::cos(angle);
      }
  }

  const LlamaWeights& w_;
  const LlamaConfig& c_;
  std::vector<double> embedding_, head_;
  std::vector<Layer> layers_;
};


/// The same chunk through @p backend's model runner (model_runner.h): a paged pool of blocks of
/// 4, in reverse order, every block fresh.
Tensor<float> logits_on_runner(const LlamaModel& model, const std::vector<int32_t>& tokens, Backend backend) {
  const int64_t T = int64_t(tokens.size()), block = 4, blocks = (T + block - 1) / block;
  const auto runner = engine::make_model_runner(model, backend, 1, T, {block, blocks});
  std::vector<int32_t> table;
  for (int64_t b = blocks - 1; b >= 0; --b) table.push_back(int32_t(b));
  std::vector<int64_t> slots;
  for (int64_t t = 0; t < T; ++t) slots.push_back(int64_t(table[size_t(t / block)]) * block + t % block);
  StepPlan plan;
  plan.add_sequence(tokens, slots, T, table, false);
  plan.fresh_blocks = table;
  for (int64_t t = 0; t < T; ++t) plan.logits_indices.push_back(t);
  return runner->run(plan);
}

// The bound, per position: max |Δlogit| ≤ kLogitTolerance · max(1, max|logit|) — the fp32
// per-element bound of common/tolerance.h, as test_model.cpp uses it. Against the float64 forward
// over the *same stored* weights a 16-bit model is an fp32 computation like any other: its
// activations and sums are fp32, its weights exact; rounding the weights is the format's choice,
// not an error of the forward (tolerance.h's rule for 16-bit inputs). At these sizes (inner sizes
// ≤ 96, 2–3 layers) fp32 lands about 1e-6 of the scale from the float64 result, two orders inside.
constexpr double kLogitTolerance = tolerance_for(Precision::fp32).max_abs;

/// The largest max |Δ| / max(1, max|want|) over positions.
template <class Got>
double worst_ratio(const Got& got, const std::vector<std::vector<double>>& want) {
  double worst = 0.0;
  for (size_t p = 0; p < want.size(); ++p) {
    double error = 0.0, scale = 1.0;
    for (size_t v = 0; v < want[p].size(); ++v) {
      const double x = got(p, v);
      error = std::isfinite(x) ? std::max(error, std::abs(x - want[p][v])) : INFINITY;
      scale = std::max(scale, std::abs(want[p][v]));
    }
    worst = std::max(worst, error / scale);
  }
  return worst;
}

double worst_ratio(const Tensor<float>& got, const std::vector<std::vector<double>>& want) {
  const int64_t vocab = got.dim(1);
  return worst_ratio([&](size_t p, size_t v) { return double(got[int64_t(p) * vocab + int64_t(v)]); }, want);
}

double worst_ratio(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want) {
  return worst_ratio([&](size_t p, size_t v) { return got[p][v]; }, want);
}

void expect_same_bits(const Weight& a, const Weight& b, const std::string& what) {
  ASSERT_EQ(a.format(), b.format()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  if (a.empty()) return;
  if (a.format() == WeightFormat::f32)
    EXPECT_EQ(std::memcmp(a.f32().data(), b.f32().data(), 4 * size_t(a.f32().size())), 0) << what;
  else
    EXPECT_EQ(std::memcmp(a.bits16().data(), b.bits16().data(), 2 * size_t(a.bits16().size())), 0) << what;
}

void expect_same_weights(const LlamaWeights& a, const LlamaWeights& b) {
  expect_same_bits(a.embedding, b.embedding, "embedding");
  expect_same_bits(a.classifier, b.classifier, "classifier");
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const std::string at = "layer " + std::to_string(l) + " ";
    expect_same_bits(a.layers[l].wqkv, b.layers[l].wqkv, at + "wqkv");
    expect_same_bits(a.layers[l].wo, b.layers[l].wo, at + "wo");
    expect_same_bits(a.layers[l].w13, b.layers[l].w13, at + "w13");
    expect_same_bits(a.layers[l].w2, b.layers[l].w2, at + "w2");
    EXPECT_EQ(a.layers[l].attention_norm, b.layers[l].attention_norm) << at << "attention_norm";
    EXPECT_EQ(a.layers[l].ffn_norm, b.layers[l].ffn_norm) << at << "ffn_norm";
  }
  EXPECT_EQ(a.final_norm, b.final_norm);
}

// Odd sizes: dim 40 (not a multiple of the SIMD lanes), 5 heads of 8 on one KV head, hidden 72,
// vocab 97.
const std::string kOddModel = "random:tiny,dim=40,hidden=72,layers=3,heads=5,kv_heads=1,vocab=97";

// ---- typed weights ----------------------------------------------------------------------------------

TEST(TypedModel, SixteenBitModelsEqualTheFloat64ForwardOverTheirStoredWeights) {
  SeededRng rng;
  for (const bool tied : {false, true}) {
    const std::string spec = kOddModel + ",tied=" + std::to_string(int(tied)) + seed_suffix(rng);
    const LlamaWeights f32 = model::load_model(spec);
    const std::vector<int32_t> tokens = random_tokens(rng, 29, f32.config.vocab_size);
    const std::vector<std::vector<double>> f32_oracle = Float64Forward(f32).logits(tokens);
    for (const WeightFormat format : {WeightFormat::f16, WeightFormat::bf16}) {
      SCOPED_TRACE(spec + ", " + std::string(to_string(format)));
      const LlamaWeights typed = model::load_model(spec, format);
      for (const Weight* m : {&typed.embedding, &typed.layers[1].wqkv, &typed.layers[2].w2, &typed.output_head()})
        EXPECT_EQ(m->format(), format);
      EXPECT_EQ(typed.layers[0].attention_norm, f32.layers[0].attention_norm) << "the norms stay fp32";
      const std::vector<std::vector<double>> oracle = Float64Forward(typed).logits(tokens);
      const double ratio = worst_ratio(logits_alone(LlamaModel(typed), tokens), oracle);
      EXPECT_LE(ratio, kLogitTolerance) << "the forward over " << to_string(format) << " weights";
      // The check sees the rounding: the fp32 weights' logits would fail the same bound (measured:
      // fp16 moves them 7e-4 … 1.4e-3 of the scale, bf16 6e-3 … 1e-2, against the bound's 1e-4).
      const double rounding = worst_ratio(oracle, f32_oracle);
      EXPECT_GT(rounding, kLogitTolerance) << "the " << to_string(format) << " logits are the fp32 ones";
      std::printf("%s, %s: worst |Δlogit| vs float64 %.3g of the scale; the rounding of the weights moves them %.3g\n",
                  spec.c_str(), std::string(to_string(format)).c_str(), ratio, rounding);
    }
    EXPECT_LE(worst_ratio(logits_alone(LlamaModel(f32), tokens), f32_oracle), kLogitTolerance) << spec << ", f32";
  }
}

TEST(TypedModel, Fp32IsTheGeneratorsWeightsBitForBitAndConversionRoundsOnce) {
  SeededRng rng;
  const std::string spec = kOddModel + seed_suffix(rng);
  const model::RandomModelSpec r = model::parse_random_spec(spec);
  const LlamaWeights generated = model::random_llama(r.config, r.seed);
  expect_same_weights(model::load_model(spec), generated);
  expect_same_weights(model::load_model(spec, WeightFormat::f32), generated);
  expect_same_weights(model::convert_weights(model::load_model(spec), WeightFormat::f32), generated);
  const LlamaWeights f16 = model::load_model(spec, WeightFormat::f16);
  expect_same_weights(f16, model::convert_weights(generated, WeightFormat::f16));
  expect_same_bits(f16.layers[1].w13, Weight::convert(generated.layers[1].w13.f32(), WeightFormat::f16), "w13");
  // f16 → f32 is exact and back is the identity; f16 → bf16 rounds the widened values once.
  expect_same_weights(model::convert_weights(model::convert_weights(f16, WeightFormat::f32), WeightFormat::f16), f16);
  expect_same_bits(model::convert_weights(f16, WeightFormat::bf16).layers[0].wo,
                   Weight::convert(f16.layers[0].wo.to_f32(), WeightFormat::bf16), "wo via bf16");
}

TEST(TypedModel, SaveWidensSixteenBitWeightsExactlyAndRefusesWhatLlama2cCannotSay) {
  SeededRng rng;
  const std::string spec = kOddModel + seed_suffix(rng);
  const LlamaWeights bf16 = model::load_model(spec, WeightFormat::bf16);
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("inferlab_ch07_typed_" + std::to_string(::getpid()) + ".bin");
  model::save_llama2c(bf16, path.string());
  const LlamaWeights read = model::load_llama2c(path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(read.layers[2].w2.format(), WeightFormat::f32);
  expect_same_weights(model::convert_weights(read, WeightFormat::bf16), bf16);

  const auto refused = [&](const std::string& keys, const std::string& field) {
    SCOPED_TRACE(keys);
    const LlamaWeights w = model::load_model(kOddModel + "," + keys);
    expect_invalid([&] { model::save_llama2c(w, path.string()); }, {field});
    EXPECT_FALSE(std::filesystem::exists(path)) << "a refused model was written";
  };
  refused("head_dim=10", "head_dim");
  refused("rope=half_split", "rope_style");
  refused("theta=500000", "rope_theta");
}

// ---- the config: head_dim, RoPE style and θ ---------------------------------------------------------

TEST(TypedModel, HeadDimAndRopeStyleModelsMatchTheFloat64ForwardAndRunThroughTheEngine) {
  SeededRng rng;
  struct Case {
    std::string keys;
    WeightFormat format;
    int64_t q_dim;
  };
  for (const Case& k : {Case{"dim=48,heads=4,kv_heads=2,head_dim=16,hidden=80,layers=2", WeightFormat::f32, 64},
                        Case{"dim=40,heads=6,kv_heads=3,head_dim=10,hidden=56,layers=2,rope=half_split,theta=1e5",
                             WeightFormat::f16, 60}}) {
    const std::string spec = "random:tiny," + k.keys + seed_suffix(rng);
    SCOPED_TRACE(spec + ", " + std::string(to_string(k.format)));
    const LlamaModel model(model::load_model(spec, k.format));
    const LlamaConfig& c = model.config();
    ASSERT_EQ(c.q_dim(), k.q_dim);
    ASSERT_NE(c.q_dim(), c.dim);
    EXPECT_EQ(model.weights().layers[0].wqkv.shape(), (Shape{c.q_dim() + 2 * c.kv_dim(), c.dim}));
    EXPECT_EQ(model.weights().layers[0].wo.shape(), (Shape{c.dim, c.q_dim()}));
    EXPECT_NE(c.describe().find("q_dim " + std::to_string(k.q_dim)), std::string::npos) << c.describe();
    int64_t elements = int64_t(model.weights().final_norm.size());
    for (const Weight* m : {&model.weights().embedding, &model.weights().classifier})
      elements += m->out_features() * m->in_features();
    for (const auto& l : model.weights().layers) {
      elements += int64_t(l.attention_norm.size() + l.ffn_norm.size());
      for (const Weight* m : {&l.wqkv, &l.wo, &l.w13, &l.w2}) elements += m->out_features() * m->in_features();
    }
    EXPECT_EQ(c.parameters(), elements);

    const Float64Forward oracle(model.weights());
    const std::vector<int32_t> tokens = random_tokens(rng, 37, c.vocab_size);
    EXPECT_LE(worst_ratio(logits_alone(model, tokens), oracle.logits(tokens)), kLogitTolerance);

    // Through the engine: a batch of requests on a paged pool, chunked prefill; each equals the
    // request alone, and each greedy token is the float64 argmax or within the bound of it.
    std::vector<engine::Request> requests;
    for (int64_t i = 0; i < 6; ++i) requests.push_back(testing::random_request(rng, i, c.vocab_size, 1, 20, 10));
    engine::EngineConfig config;
    config.block_size = 4;
    config.num_blocks = 64;
    config.max_num_batched_tokens = 24;
    config.chunk_size = 7;
    config.max_seq_len = 64;
    config.clock = engine::ClockMode::simulated;
    const auto served = testing::serve(model, config, requests);
    testing::expect_same_tokens(model, served, testing::alone(model, requests), spec);
    for (const auto& [id, output] : served) {
      std::vector<int32_t> fed = output.prompt;
      fed.insert(fed.end(), output.tokens.begin(), output.tokens.end() - 1);
      const std::vector<std::vector<double>> want = oracle.logits(fed);
      for (size_t i = 0; i < output.tokens.size(); ++i) {
        const std::vector<double>& row = want[output.prompt.size() - 1 + i];
        const double best = *std::max_element(row.begin(), row.end());
        double scale = 1.0;
        for (const double v : row) scale = std::max(scale, std::abs(v));
        EXPECT_LE(best - row[size_t(output.tokens[i])], 2 * kLogitTolerance * scale)
            << "request " << id << ", generated token " << i << ": " << output.tokens[i]
            << " is not the float64 argmax (nor a near-tie of it)";
      }
    }
  }
}

/// @p w with each head's rows of wq and wk permuted so that half-split RoPE on them computes what
/// adjacent RoPE computes on @p w: new row i of a head is old row 2i, new row i + d/2 old row 2i+1.
/// The inverse of llama.cpp's converter permutation (Hugging Face → GGUF).
LlamaWeights permuted_for_half_split(LlamaWeights w) {
  const LlamaConfig& c = w.config;
  const int64_t d = c.head_dim(), half = d / 2, dim = c.dim;
  for (auto& layer : w.layers) {
    const Tensor<float> old = layer.wqkv.to_f32();
    Tensor<float> permuted = old;
    for (const auto& [first_row, heads] : {std::pair{int64_t(0), c.n_heads}, std::pair{c.q_dim(), c.n_kv_heads}})
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const int64_t base = first_row + h * d;
          std::copy_n(old.data() + (base + 2 * i) * dim, dim, permuted.data() + (base + i) * dim);
          std::copy_n(old.data() + (base + 2 * i + 1) * dim, dim, permuted.data() + (base + i + half) * dim);
        }
    layer.wqkv = Weight(std::move(permuted));
  }
  w.config.rope_style = RopeStyle::half_split;
  return w;
}

TEST(TypedModel, HalfSplitOnPermutedQkRowsGivesTheAdjacentModelsLogits) {
  SeededRng rng;
  for (const std::string& keys :
       {std::string(kOddModel), std::string("random:tiny,dim=48,heads=4,kv_heads=2,head_dim=16")}) {
    const std::string spec = keys + ",theta=1e5" + seed_suffix(rng);
    SCOPED_TRACE(spec);
    const LlamaWeights adjacent = model::load_model(spec);
    const std::vector<int32_t> tokens = random_tokens(rng, 41, adjacent.config.vocab_size);
    const Tensor<float> want = logits_alone(LlamaModel(adjacent), tokens);
    std::vector<std::vector<double>> want64;
    for (int64_t p = 0; p < want.dim(0); ++p)
      want64.emplace_back(want.data() + p * want.dim(1), want.data() + (p + 1) * want.dim(1));
    // Only the dot products q·k are summed in another order: fp32 rounding, far inside the bound.
    const double permuted = worst_ratio(logits_alone(LlamaModel(permuted_for_half_split(adjacent)), tokens), want64);
    EXPECT_LE(permuted, kLogitTolerance) << "half_split over the permuted rows";
    LlamaWeights unpermuted = adjacent;
    unpermuted.config.rope_style = RopeStyle::half_split;
    const double wrong = worst_ratio(logits_alone(LlamaModel(unpermuted), tokens), want64);
    EXPECT_GT(wrong, 100 * kLogitTolerance) << "half_split over the unpermuted rows should not match";
    std::printf("%s: permuted half_split vs adjacent %.3g of the scale; unpermuted %.3g\n", spec.c_str(), permuted,
                wrong);
  }
}

// ---- costs ------------------------------------------------------------------------------------------

TEST(TypedModel, StepCostCountsTheStoredBytes) {
  SeededRng rng;
  const std::string spec =
      "random:tiny,dim=48,heads=4,kv_heads=2,head_dim=16,hidden=80,layers=3,vocab=77" + seed_suffix(rng);
  const LlamaModel f32(model::load_model(spec)), f16(model::load_model(spec, WeightFormat::f16));
  const LlamaModel bf16(model::load_model(spec, WeightFormat::bf16));
  const LlamaConfig& c = f32.config();
  // Matrix weights of one layer, counted from the config's definitions.
  const double per_layer =
      double(c.q_dim() * c.dim + 2 * c.kv_dim() * c.dim + c.dim * c.q_dim() + 3 * c.hidden_dim * c.dim);
  const double head = double(c.vocab_size * c.dim), norms = double(c.norm_parameters());
  for (const auto* m : {&f32, &f16, &bf16}) {
    const WeightFormat format = m->weights().layers[0].w2.format();
    EXPECT_EQ(m->weights().bytes(), c.weight_bytes(format)) << to_string(format);
    EXPECT_EQ(double(m->weights().bytes()),
              double(bytes_per_weight(format)) * (c.n_layers * per_layer + 2 * head) + 4 * norms)
        << to_string(format) << " (separate head: embedding and classifier)";
  }

  // A step: one prompt chunk of 5 after 3 cached tokens (one logit), two decode tokens; then the
  // same without any logit token.
  KvCache cache(f32.kv_shape(3, 16), KvDtype::fp32);
  StepPlan plan;
  const auto add = [&](int64_t row, int64_t first, int64_t count, bool logits) {
    std::vector<int64_t> slots;
    for (int64_t p = first; p < first + count; ++p) slots.push_back(cache.slot(row, p));
    plan.add_sequence(random_tokens(rng, count, c.vocab_size), slots, first + count, {}, logits);
  };
  add(0, 3, 5, true);
  add(1, 9, 1, true);
  add(2, 0, 1, true);
  StepPlan no_logits = plan;
  no_logits.logits_indices.clear();
  const double T = 7, logit_tokens = 3;
  for (const StepPlan* p : {&plan, &no_logits}) {
    const bool logits = !p->logits_indices.empty();
    SCOPED_TRACE(logits ? "with logit tokens" : "without logit tokens");
    const Cost a = f32.step_cost(*p), b = f16.step_cost(*p), h = bf16.step_cost(*p);
    // The matrix bytes the step reads in fp32: every layer's, one embedding row per token, the
    // head when a token wants logits.
    const double matrix_bytes = 4 * (c.n_layers * per_layer + T * c.dim + (logits ? head : 0.0));
    const double kv_bytes = 2.0 * 4.0 * double(c.kv_dim() * c.n_layers) * (8 + 10 + 1);
    EXPECT_EQ(a.bytes, matrix_bytes + 4 * (2 * c.n_layers * c.dim + (logits ? c.dim : 0)) + kv_bytes);
    EXPECT_EQ(a.bytes - b.bytes, matrix_bytes / 2) << "fp16 reads half of each matrix byte";
    EXPECT_EQ(b.bytes, h.bytes) << "bf16 and fp16 take the same bytes";
    EXPECT_EQ(a.flops, b.flops) << "the format changes the bytes, not the FLOPs";
    EXPECT_GE(a.flops, 2 * T * c.n_layers * per_layer + (logits ? 2 * logit_tokens * head : 0.0));
  }
}

// ---- errors -----------------------------------------------------------------------------------------

TEST(TypedModel, HeadDimRopeAndThetaKeysAreParsedAndBadOnesNamed) {
  const model::RandomModelSpec r = model::parse_random_spec("random:tiny,head_dim=12,rope=half_split,theta=1e5");
  EXPECT_EQ(r.config.head_dim(), 12);
  EXPECT_EQ(r.config.q_dim(), 48);
  EXPECT_EQ(r.config.kv_dim(), 24);
  EXPECT_EQ(r.config.rope_style, RopeStyle::half_split);
  EXPECT_EQ(r.config.rope_theta, 1e5);
  EXPECT_NE(r.config.describe().find("half_split"), std::string::npos) << r.config.describe();
  const model::RandomModelSpec plain = model::parse_random_spec("random:tiny");
  EXPECT_EQ(plain.config.head_dim(), 8);
  EXPECT_EQ(plain.config.q_dim(), plain.config.dim);
  EXPECT_EQ(plain.config.rope_style, RopeStyle::adjacent);
  EXPECT_EQ(plain.config.rope_theta, 10000.0);
  EXPECT_EQ(plain.config.describe().find("q_dim"), std::string::npos) << "q_dim = dim is not repeated";
  EXPECT_EQ(plain.config.describe().find("RoPE"), std::string::npos) << "llama2.c's RoPE is the default";
  // head_dim 0 means dim / heads; with it set, heads need not divide dim.
  EXPECT_EQ(model::parse_random_spec("random:tiny,head_dim=0").config.head_dim(), 8);
  EXPECT_NO_THROW(model::parse_random_spec("random:tiny,heads=3,kv_heads=1,head_dim=10"));

  expect_invalid([] { model::parse_random_spec("random:tiny,head_dim=7"); }, {"head_dim", "7"});
  expect_invalid([] { model::parse_random_spec("random:tiny,head_dim=-2"); }, {"head_dim", "-2"});
  expect_invalid([] { model::parse_random_spec("random:tiny,head_dim=16x"); }, {"head_dim", "16x"});
  expect_invalid([] { model::parse_random_spec("random:tiny,rope=neox"); }, {"rope", "neox"});
  expect_invalid([] { model::parse_random_spec("random:tiny,rope="); }, {"rope"});
  expect_invalid([] { model::parse_random_spec("random:tiny,theta=abc"); }, {"theta", "abc"});
  expect_invalid([] { model::parse_random_spec("random:tiny,theta=0"); }, {"theta"});
  expect_invalid([] { model::parse_random_spec("random:tiny,theta=-1e4"); }, {"theta"});
  expect_invalid([] { model::parse_random_spec("random:tiny,theta=inf"); }, {"theta"});
  expect_invalid([] { model::parse_random_spec("random:tiny,theta="); }, {"theta"});
  expect_invalid([] { model::parse_random_spec("random:tiny,heads=3"); }, {"n_heads"});

  const auto invalid_config = [](const std::function<void(LlamaConfig&)>& spoil, const std::string& field) {
    SCOPED_TRACE(field);
    LlamaConfig c = model::parse_random_spec("random:tiny").config;
    spoil(c);
    expect_invalid([&] { c.validate(); }, {field});
  };
  invalid_config([](LlamaConfig& c) { c.head_dim_size = 6 + 1; }, "head_dim");
  invalid_config([](LlamaConfig& c) { c.head_dim_size = -4; }, "head_dim");
  invalid_config([](LlamaConfig& c) { c.rope_style = RopeStyle(3); }, "rope_style");
  invalid_config([](LlamaConfig& c) { c.rope_theta = NAN; }, "rope_theta");
  invalid_config([](LlamaConfig& c) { c.norm_eps = 0.0f; }, "norm_eps");

  // Weights that do not fit their config are named when the model is built.
  LlamaWeights w = model::load_model("random:tiny");
  w.config.head_dim_size = 4;
  expect_invalid([&] { LlamaModel m(w); }, {"layers[0].wqkv.shape"});
}

// The sim backend's resident runner (weights widened to fp32 once, at upload; RoPE in either
// style on the device) against the float64 forward over the stored weights: a half_split model
// with q_dim ≠ dim, and an fp16 one.
TEST(TypedModel, TheSimRunnerRunsHalfSplitAndSixteenBitModels) {
  SeededRng rng;
  const std::string spec = "random:tiny,layers=2" + seed_suffix(rng);
  const std::vector<int32_t> tokens = random_tokens(rng, 11, 64);
  const LlamaModel half_split(model::load_model(spec + ",rope=half_split,head_dim=16,theta=1e5"));
  EXPECT_LE(worst_ratio(logits_on_runner(half_split, tokens, Backend::sim), Float64Forward(half_split.weights()).logits(tokens)),
            kLogitTolerance);
  const LlamaModel f16(model::load_model(spec, WeightFormat::f16));
  EXPECT_LE(worst_ratio(logits_on_runner(f16, tokens, Backend::sim), Float64Forward(f16.weights()).logits(tokens)),
            kLogitTolerance);
}

}  // namespace
}  // namespace inferlab
