#pragma once
// Chapter 08 prediction questions (exercises/08-real-model/predictions.h), checked against values
// worked out here from the models' shapes, matrix by matrix (never by the lab's cost code, which a
// student could call, nor by a formula shared with the solution): the graded tests
// (test_predictions.cpp) pass the student's functions, tests/wrong/wrong_predictions.cpp passes
// the classic wrong answers and requires each to be rejected.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "08-real-model/predictions.h"
#include "tests/support/prediction_check.h"
#include "tests/support/seeded.h"

namespace inferlab::testing::ch08 {

using student::RealModelShape;
using student::WeightType;

inline const char* kLesson =
    "chapters/08-real-model/README.md (what a decode token reads) and the byte table of "
    "exercises/08-real-model/predictions.h";

/// SmolLM2-135M-Instruct, as its GGUF metadata says.
inline constexpr RealModelShape kSmolLM2{30, 576, 1536, 9, 3, 64, 49152};

/// SmolLM2, a Llama-3.2-1B-like and a Llama-2-7B-like shape (no GQA), then a fresh one.
inline std::vector<RealModelShape> models(SeededRng& rng) {
  std::vector<RealModelShape> m = {
      kSmolLM2, {16, 2048, 8192, 32, 8, 64, 128256}, {32, 4096, 11008, 32, 32, 128, 32000}};
  const int64_t kv = rng.integer(1, 8);
  m.push_back({rng.integer(1, 48), 32 * rng.integer(2, 160), 32 * rng.integer(2, 400), kv * rng.integer(1, 6), kv,
               16 * rng.integer(2, 10), rng.integer(1000, 160000)});
  return m;
}

inline std::string model_inputs(const RealModelShape& m) {
  return std::to_string(m.layers) + " layers, dim " + std::to_string(m.dim) + ", FFN " + std::to_string(m.hidden_dim) +
         ", " + std::to_string(m.heads) + "/" + std::to_string(m.kv_heads) + " heads of " + std::to_string(m.head_dim) +
         ", vocab " + std::to_string(m.vocab);
}

inline std::string type_name(WeightType t) {
  switch (t) {
    case WeightType::f32:
      return "f32";
    case WeightType::f16:
      return "f16";
    case WeightType::q8_0:
      return "q8_0";
    case WeightType::q4_1:
      return "q4_1";
  }
  return "?";
}

/// Bytes of a block of 32 weights: the format's layout (ggml-common.h), counted field by field.
inline double block_bytes(WeightType t) {
  constexpr double fp16 = 2, values = 32;
  switch (t) {
    case WeightType::f32:
      return 4 * values;
    case WeightType::f16:
      return fp16 * values;
    case WeightType::q8_0:
      return fp16 + values * 1;  // d, int8 codes
    case WeightType::q4_1:
      return fp16 + fp16 + values / 2;  // d, m, two 4-bit codes a byte
  }
  return 0;
}

/// What P8.1 is made of, for one model in one pair of formats.
struct Worked {
  double layer_weights;  // weights in the layers' matrices, all layers
  double head_weights;   // vocab · dim
  double matrices;       // bytes of the layers' matrices
  double head;           // bytes of the head
  double norms;          // bytes of the f32 norms
  double total() const { return matrices + head + norms; }
};

inline Worked worked(const RealModelShape& m, WeightType matrices, WeightType head) {
  // Each matrix [rows × columns], one by one.
  const std::array<std::pair<int64_t, int64_t>, 7> shapes = {{{m.heads * m.head_dim, m.dim},
                                                              {m.kv_heads * m.head_dim, m.dim},
                                                              {m.kv_heads * m.head_dim, m.dim},
                                                              {m.dim, m.heads * m.head_dim},
                                                              {m.hidden_dim, m.dim},
                                                              {m.hidden_dim, m.dim},
                                                              {m.dim, m.hidden_dim}}};
  double per_layer = 0;
  for (const auto& [rows, columns] : shapes) per_layer += double(rows) * double(columns);
  Worked w{};
  w.layer_weights = per_layer * double(m.layers);
  w.head_weights = double(m.vocab) * double(m.dim);
  w.matrices = w.layer_weights / 32 * block_bytes(matrices);
  w.head = w.head_weights / 32 * block_bytes(head);
  w.norms = 4.0 * double(m.dim) * double(m.layers * 2 + 1);
  return w;
}

/// The same count where the mistake @p bytes_a_weight replaces the format's table.
inline double with_bytes(const Worked& w, double matrices_per_weight, double head_per_weight) {
  return w.layer_weights * matrices_per_weight + w.head_weights * head_per_weight + w.norms;
}

/// The formats each question is asked in: every matrix in one format, SmolLM2 as shipped (Q4_1
/// matrices, Q8_0 head), Q4_1 everywhere, and a fresh pair.
inline std::vector<std::pair<WeightType, WeightType>> formats(SeededRng& rng) {
  const auto any = [&] { return WeightType(rng.integer(0, 3)); };
  return {{WeightType::f32, WeightType::f32},   {WeightType::f16, WeightType::f16},
          {WeightType::q8_0, WeightType::q8_0}, {WeightType::q4_1, WeightType::q8_0},
          {WeightType::q4_1, WeightType::q4_1}, {any(), any()}};
}

inline std::string formats_inputs(WeightType matrices, WeightType head) {
  return "matrices " + type_name(matrices) + ", head " + type_name(head);
}

inline std::string working(const Worked& w) {
  return "layers' matrices " + prediction_number(w.layer_weights) + " weights = " + prediction_number(w.matrices) +
         " B, head " + prediction_number(w.head_weights) + " weights = " + prediction_number(w.head) + " B, norms " +
         prediction_number(w.norms) + " B (f32)";
}

// The classic wrong answers of P8.1, for one model and pair of formats.
inline std::vector<KnownMistake> weight_mistakes(const RealModelShape& m, WeightType matrices, WeightType head,
                                                 const Worked& w) {
  const auto naive = [](WeightType t) {  // the codes alone: 8 or 4 bits, no scale, no minimum
    return t == WeightType::q8_0 ? 1.0 : t == WeightType::q4_1 ? 0.5 : block_bytes(t) / 32;
  };
  const auto q4_0 = [](WeightType t) { return t == WeightType::q4_1 ? 18.0 / 32 : block_bytes(t) / 32; };
  RealModelShape no_gqa = m;
  no_gqa.kv_heads = m.heads;
  const Worked without_gqa = worked(no_gqa, matrices, head);
  return {
      {"forgetting the output head (SmolLM2's is tied to token_embd, but still read)", w.matrices + w.norms},
      {"counting token_embd twice (as the embedding and as the head)", w.total() + w.head},
      {"the head in the matrices' format (SmolLM2 stores it Q8_0)",
       w.matrices + w.head_weights / 32 * block_bytes(matrices) + w.norms},
      {"the codes alone (8 or 4 bits a weight, no fp16 scale or minimum)", with_bytes(w, naive(matrices), naive(head))},
      {"Q4_0's 18-byte block for Q4_1 (forgetting the minimum)", with_bytes(w, q4_0(matrices), q4_0(head))},
      {"GQA ignored (wk and wv as large as wq)", without_gqa.total()},
      {"two FFN matrices instead of SwiGLU's three",
       w.total() - double(m.layers) * double(m.hidden_dim) * double(m.dim) / 32 * block_bytes(matrices)},
      {"bits instead of bytes", 8.0 * w.total()}};
}

using WeightQuestion = std::function<double(const RealModelShape&, WeightType matrices, WeightType head)>;

/// P8.1: the layers' matrices in their format + the head in its own + the f32 norms.
inline ::testing::AssertionResult check_weight_bytes_per_token(const WeightQuestion& predict) {
  SeededRng rng;
  std::vector<Prediction> predictions;
  for (const RealModelShape& m : models(rng))
    for (const auto& [matrices, head] : formats(rng)) {
      const Worked w = worked(m, matrices, head);
      predictions.push_back({model_inputs(m) + "; " + formats_inputs(matrices, head), w.total(), working(w),
                             predict(m, matrices, head), weight_mistakes(m, matrices, head, w)});
    }
  return predictions_match("P8.1 predict_weight_bytes_per_token (bytes)", predictions, 0.01, 0.0, kLesson,
                           seed_note(rng.seed()));
}

using CeilingQuestion =
    std::function<double(const RealModelShape&, WeightType matrices, WeightType head, double read_gbs)>;

/// P8.2: read bandwidth / P8.1.
inline ::testing::AssertionResult check_tokens_per_second_ceiling(const CeilingQuestion& predict) {
  SeededRng rng;
  // This machine's measured read roof (≈ 33.5 GB/s, build/roofline.json), the sister machine of
  // real-model.md (37.5), an H100's HBM (3350) and a fresh one.
  const std::vector<double> bandwidths = {33.5, 37.5, 3350.0, double(rng.uniform(5.0f, 8000.0f))};
  std::vector<Prediction> predictions;
  size_t i = 0;
  for (const RealModelShape& m : models(rng))
    for (const auto& [matrices, head] : formats(rng)) {
      const double gbs = bandwidths[i++ % bandwidths.size()];
      const Worked w = worked(m, matrices, head);
      const double expected = gbs * 1e9 / w.total();
      predictions.push_back(
          {model_inputs(m) + "; " + formats_inputs(matrices, head) + "; " + prediction_number(gbs) + " GB/s",
           expected,
           prediction_number(gbs) + "e9 B/s / " + prediction_number(w.total()) + " B a token",
           predict(m, matrices, head, gbs),
           {{"GiB/s for GB/s (2^30 bytes)", expected * 1.073741824},
            {"forgetting the output head", gbs * 1e9 / (w.matrices + w.norms)},
            {"bits instead of bytes", expected / 8.0},
            {"the parameter count instead of the bytes", gbs * 1e9 / (w.layer_weights + w.head_weights)}}});
    }
  return predictions_match("P8.2 predict_tokens_per_second_ceiling (tokens/s)", predictions, 0.01, 0.0, kLesson,
                           seed_note(rng.seed()));
}

using KvQuestion = std::function<double(const RealModelShape&, double kv_element_bytes)>;

/// P8.3: 2 · layers · kv_heads · head_dim · bytes.
inline ::testing::AssertionResult check_kv_bytes_per_token(const KvQuestion& predict) {
  SeededRng rng;
  std::vector<Prediction> predictions;
  for (const RealModelShape& m : models(rng))
    for (const double e : {4.0, 2.0, 1.0}) {
      double per_layer = 0;
      for (int kv = 0; kv < 2; ++kv) per_layer += double(m.kv_heads) * double(m.head_dim) * e;  // K, then V
      const double expected = per_layer * double(m.layers);
      predictions.push_back(
          {model_inputs(m) + "; " + prediction_number(e) + " B an element",
           expected,
           "(K + V) " + prediction_number(per_layer) + " B a layer × " + std::to_string(m.layers) + " layers",
           predict(m, e),
           {{"forgetting the ×2 for K and V", expected / 2.0},
            {"GQA ignored (query heads instead of KV heads)", expected * double(m.heads) / double(m.kv_heads)},
            {"one layer instead of all", expected / double(m.layers)},
            {"bits instead of bytes", 8.0 * expected}}});
    }
  return predictions_match("P8.3 predict_kv_bytes_per_token (bytes)", predictions, 0.01, 0.0,
                           "chapters/03-kv-cache-decode/README.md (the KV cache's size) and " + std::string(kLesson),
                           seed_note(rng.seed()));
}

using RatioQuestion = std::function<double(const RealModelShape&, WeightType matrices, WeightType head,
                                           double kv_element_bytes, int64_t context)>;

/// P8.4: P8.1 / (P8.3 · context).
inline ::testing::AssertionResult check_weight_to_kv_ratio(const RatioQuestion& predict) {
  SeededRng rng;
  std::vector<Prediction> predictions;
  for (const RealModelShape& m : models(rng))
    for (const auto& [matrices, head] : formats(rng)) {
      const double e = std::array<double, 3>{4.0, 2.0, 1.0}[size_t(rng.integer(0, 2))];
      for (const int64_t context : {int64_t{2048}, rng.integer(1, 65536)}) {
        const Worked w = worked(m, matrices, head);
        const double kv = 2.0 * double(m.layers) * double(m.kv_heads) * double(m.head_dim) * e * double(context);
        const double expected = w.total() / kv;
        predictions.push_back({model_inputs(m) + "; " + formats_inputs(matrices, head) + "; KV " +
                                   prediction_number(e) + " B an element; context " + std::to_string(context),
                               expected,
                               "weights " + prediction_number(w.total()) + " B / KV " + prediction_number(kv) + " B",
                               predict(m, matrices, head, e, context),
                               {{"forgetting the ×2 for K and V", 2.0 * expected},
                                {"the KV of one token instead of the whole context", expected * double(context)},
                                {"the inverse (KV over weights)", 1.0 / expected},
                                {"GQA ignored in the KV cache", expected * double(m.kv_heads) / double(m.heads)}}});
      }
    }
  return predictions_match("P8.4 predict_weight_to_kv_ratio (weight bytes / KV bytes)", predictions, 0.01, 0.0, kLesson,
                           seed_note(rng.seed()));
}

}  // namespace inferlab::testing::ch08
