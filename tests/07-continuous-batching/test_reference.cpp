// The float64 Llama reference (tests/support/llama_reference.h), the oracle of chapter 07's
// engine, checked on its own: the reader rejects bad files; a tiny random model with a separate
// classifier, written here in the llama2.c format, gives the logits a hand computation of
// position 0 gives; and on stories260K greedy generation from BOS reproduces the committed ids
// (cross-checked once by an independent numpy implementation, data/check_reference.py) and the
// logits are causal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/07-continuous-batching/stories_data.h"
#include "tests/support/llama_reference.h"
#include "tests/support/seeded.h"

#ifndef INFERLAB_SOURCE_DIR
#error "test_reference.cpp needs INFERLAB_SOURCE_DIR (the repository root) to find models/ and its data file"
#endif

namespace inferlab::testing {
namespace {

using Header = std::array<int32_t, 7>;  // dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len

/// A scratch file named after the running test, removed when the test ends.
class TempFile {
 public:
  TempFile() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("inferlab_ch07_reference_" + std::to_string(::getpid()) + "_" + info->name() + ".bin");
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

void write_checkpoint(const std::string& path, const Header& header, const std::vector<float>& body) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), sizeof(int32_t) * header.size());
  out.write(reinterpret_cast<const char*>(body.data()), static_cast<std::streamsize>(sizeof(float) * body.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

void write_bytes(const std::string& path, size_t count) {
  std::ofstream out(path, std::ios::binary);
  out << std::string(count, '\0');
}

/// Expects LlamaReference(path) to throw std::invalid_argument whose message names the file and @p field.
void expect_rejected(const std::string& path, const std::string& field) {
  try {
    LlamaReference model(path);
    ADD_FAILURE() << "read " << path << " without complaint; expected a complaint about " << field;
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(field), std::string::npos) << message;
  }
}

// ---- a tiny model: dim 4, 1 layer, 2 heads sharing 1 KV head, hidden 6, vocab 5, seq_len 8 -----

constexpr int kDim = 4, kHidden = 6, kHeads = 2, kKvHeads = 1, kVocab = 5, kSeqLen = 8;
constexpr int kHead = kDim / kHeads, kKvDim = kKvHeads * kHead;

/// Random weights, kept by name so that the test can recompute position 0 itself.
struct TinyModel {
  std::vector<float> embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls;

  explicit TinyModel(Rng& rng) {
    auto normal = [&](int count) {
      std::vector<float> v(static_cast<size_t>(count));
      rng.fill_normal(v, 0.0f, 0.7f);
      return v;
    };
    auto gains = [&] {
      std::vector<float> v(kDim);
      for (auto& g : v) g = rng.uniform(0.5f, 1.5f);
      return v;
    };
    embedding = normal(kVocab * kDim);
    rms_att = gains();
    wq = normal(kDim * kDim);
    wk = normal(kKvDim * kDim);
    wv = normal(kKvDim * kDim);
    wo = normal(kDim * kDim);
    rms_ffn = gains();
    w1 = normal(kHidden * kDim);
    w2 = normal(kDim * kHidden);
    w3 = normal(kHidden * kDim);
    rms_final = gains();
    wcls = normal(kVocab * kDim);
  }

  /// The file after the header. The legacy RoPE tables are NaN: a reader that used them, or that
  /// lost its place, would produce NaN logits.
  std::vector<float> body(bool shared_classifier) const {
    std::vector<float> out;
    for (const auto* part : {&embedding, &rms_att, &wq, &wk, &wv, &wo, &rms_ffn, &w1, &w2, &w3, &rms_final}) {
      out.insert(out.end(), part->begin(), part->end());
    }
    out.insert(out.end(), kSeqLen * kHead, std::numeric_limits<float>::quiet_NaN());
    if (!shared_classifier) out.insert(out.end(), wcls.begin(), wcls.end());
    return out;
  }

  static Header header(bool shared_classifier) {
    return {kDim, kHidden, 1, kHeads, kKvHeads, shared_classifier ? kVocab : -kVocab, kSeqLen};
  }

  void write(const std::string& path, bool shared_classifier) const {
    write_checkpoint(path, header(shared_classifier), body(shared_classifier));
  }
};

std::vector<double> times(const std::vector<float>& w, const std::vector<double>& x) {
  std::vector<double> out(w.size() / x.size(), 0.0);
  for (size_t r = 0; r < out.size(); ++r) {
    for (size_t c = 0; c < x.size(); ++c) out[r] += static_cast<double>(w[r * x.size() + c]) * x[c];
  }
  return out;
}

std::vector<double> normalized(const std::vector<double>& x, const std::vector<float>& gain) {
  double mean_square = 0.0;
  for (double v : x) mean_square += v * v / static_cast<double>(x.size());
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = gain[i] * x[i] / std::sqrt(mean_square + 1e-5);
  return out;
}

/// The final normalized hidden state at position 0 for @p token, by hand: RoPE turns nothing at
/// position 0 and the softmax over one key is 1, so each head's attention output is v itself
/// (both query heads read the one KV head).
std::vector<double> hidden_at_position_zero(const TinyModel& m, int token) {
  std::vector<double> x(m.embedding.begin() + token * kDim, m.embedding.begin() + (token + 1) * kDim);
  const std::vector<double> v = times(m.wv, normalized(x, m.rms_att));
  const std::vector<double> heads = {v[0], v[1], v[0], v[1]};
  const std::vector<double> attention = times(m.wo, heads);
  for (int i = 0; i < kDim; ++i) x[i] += attention[i];
  const std::vector<double> xn = normalized(x, m.rms_ffn);
  std::vector<double> gate = times(m.w1, xn);
  const std::vector<double> up = times(m.w3, xn);
  for (int i = 0; i < kHidden; ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
  const std::vector<double> ffn = times(m.w2, gate);
  for (int i = 0; i < kDim; ++i) x[i] += ffn[i];
  return normalized(x, m.rms_final);
}

void expect_close(const std::vector<double>& actual, const std::vector<double>& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-12 * (1.0 + std::abs(expected[i]))) << what << ", index " << i;
  }
}

// ---- the reader -----------------------------------------------------------------------------------

TEST(LlamaReferenceReader, RejectsATruncatedFileNamingItAndTheSizes) {
  SeededRng rng;
  TempFile file;
  std::vector<float> body = TinyModel(rng).body(false);
  body.pop_back();
  write_checkpoint(file.path(), TinyModel::header(false), body);
  expect_rejected(file.path(), "truncated");
}

TEST(LlamaReferenceReader, RejectsAFileLongerThanItsHeaderImplies) {
  SeededRng rng;
  TempFile file;
  std::vector<float> body = TinyModel(rng).body(true);
  body.push_back(0.0f);
  write_checkpoint(file.path(), TinyModel::header(true), body);
  expect_rejected(file.path(), "too long");
}

TEST(LlamaReferenceReader, RejectsAFileShorterThanTheHeader) {
  TempFile file;
  write_bytes(file.path(), 27);
  expect_rejected(file.path(), "truncated");
}

TEST(LlamaReferenceReader, RejectsAMissingFile) {
  TempFile file;
  expect_rejected(file.path(), "cannot be opened");
}

TEST(LlamaReferenceReader, RejectsBadHeaderFieldsNamingThem) {
  SeededRng rng;
  const std::vector<float> body = TinyModel(rng).body(false);
  struct Bad {
    int field;
    int32_t value;
    std::string named;
  };
  const std::vector<Bad> cases = {{0, 0, "dim"},      {1, -6, "hidden_dim"}, {2, 0, "n_layers"},
                                  {3, 3, "n_heads"},  {3, 0, "n_heads"},     {4, 0, "n_kv_heads"},
                                  {4, 3, "n_kv_heads"}, {5, 0, "vocab_size"}, {6, -8, "seq_len"},
                                  {3, 4, "head size"}};  // dim 4 over 4 heads: head size 1, odd
  for (const Bad& bad : cases) {
    SCOPED_TRACE("header field " + std::to_string(bad.field) + " = " + std::to_string(bad.value));
    TempFile file;
    Header header = TinyModel::header(false);
    header[static_cast<size_t>(bad.field)] = bad.value;
    if (bad.field == 3 && bad.value == 4) header[4] = 1;
    write_checkpoint(file.path(), header, body);
    expect_rejected(file.path(), bad.named);
  }
}

TEST(LlamaReferenceReader, ReadsTheHeaderAndTheClassifierFlag) {
  SeededRng rng;
  const TinyModel model(rng);
  for (bool shared : {false, true}) {
    TempFile file;
    model.write(file.path(), shared);
    const LlamaReferenceConfig c = LlamaReference(file.path()).config();
    EXPECT_EQ(c.dim, kDim);
    EXPECT_EQ(c.hidden_dim, kHidden);
    EXPECT_EQ(c.n_layers, 1);
    EXPECT_EQ(c.n_heads, kHeads);
    EXPECT_EQ(c.n_kv_heads, kKvHeads);
    EXPECT_EQ(c.vocab_size, kVocab);
    EXPECT_EQ(c.seq_len, kSeqLen);
    EXPECT_EQ(c.shared_classifier, shared);
  }
}

// ---- the forward on the tiny model ---------------------------------------------------------------

TEST(LlamaReferenceTiny, PositionZeroEqualsAHandComputationWithASeparateClassifier) {
  SeededRng rng;
  const TinyModel model(rng);
  TempFile file;
  model.write(file.path(), /*shared_classifier=*/false);
  const LlamaReference reference(file.path());
  for (int token = 0; token < kVocab; ++token) {
    const std::vector<double> hidden = hidden_at_position_zero(model, token);
    expect_close(reference.logits({token})[0], times(model.wcls, hidden), "token " + std::to_string(token));
  }
}

TEST(LlamaReferenceTiny, PositionZeroEqualsAHandComputationWithTheSharedEmbedding) {
  SeededRng rng;
  const TinyModel model(rng);
  TempFile file;
  model.write(file.path(), /*shared_classifier=*/true);
  const LlamaReference reference(file.path());
  for (int token = 0; token < kVocab; ++token) {
    const std::vector<double> hidden = hidden_at_position_zero(model, token);
    expect_close(reference.logits({token})[0], times(model.embedding, hidden), "token " + std::to_string(token));
  }
}

TEST(LlamaReferenceTiny, GreedyStopsBeforeABosAndNeverGeneratesOne) {
  SeededRng rng;
  TinyModel model(rng);
  // Make token 1 the clear maximum at position 0 after token 0: its classifier row points along
  // the hidden state there.
  const std::vector<double> hidden = hidden_at_position_zero(model, 0);
  for (int i = 0; i < kDim; ++i) model.wcls[kDim + i] = static_cast<float>(100.0 * hidden[i]);
  TempFile file;
  model.write(file.path(), false);
  const LlamaReference reference(file.path());
  ASSERT_EQ(reference.logits({0})[0].size(), static_cast<size_t>(kVocab));
  EXPECT_TRUE(reference.greedy({0}, 5).empty());
  for (int32_t id : reference.greedy({2}, 5)) EXPECT_NE(id, 1);
}

TEST(LlamaReferenceTiny, GreedyBreaksTiesTowardsTheLowestId) {
  SeededRng rng;
  TinyModel model(rng);
  for (auto& g : model.rms_final) g = 0.0f;  // every logit is exactly 0
  TempFile file;
  model.write(file.path(), false);
  EXPECT_EQ(LlamaReference(file.path()).greedy({2}, 3), (std::vector<int32_t>{0, 0, 0}));
}

TEST(LlamaReferenceTiny, GreedyIsTheFirstMaximumOfTheLogitsAtEachStep) {
  SeededRng rng;
  const TinyModel model(rng);
  TempFile file;
  model.write(file.path(), false);
  const LlamaReference reference(file.path());
  const std::vector<int32_t> prompt = {3, 0};
  const std::vector<int32_t> ids = reference.greedy(prompt, kSeqLen - 1);
  std::vector<int32_t> fed = prompt;
  fed.insert(fed.end(), ids.begin(), ids.end());
  const auto logits = reference.logits(std::vector<int32_t>(fed.begin(), fed.end() - (ids.empty() ? 0 : 1)));
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto& row = logits[prompt.size() - 1 + i];
    const auto first_max = std::max_element(row.begin(), row.end()) - row.begin();
    EXPECT_EQ(ids[i], first_max) << "generated token " << i;
  }
}

TEST(LlamaReferenceTiny, RejectsBadTokensAndLengthsNamingThem) {
  SeededRng rng;
  TempFile file;
  TinyModel(rng).write(file.path(), false);
  const LlamaReference reference(file.path());
  EXPECT_THROW(reference.logits({}), std::invalid_argument);
  EXPECT_THROW(reference.logits({0, kVocab}), std::invalid_argument);
  EXPECT_THROW(reference.logits({-1}), std::invalid_argument);
  EXPECT_THROW(reference.logits(std::vector<int32_t>(kSeqLen + 1, 0)), std::invalid_argument);
  EXPECT_THROW(reference.greedy({}, 3), std::invalid_argument);
  EXPECT_THROW(reference.greedy({0}, -1), std::invalid_argument);
  EXPECT_THROW(reference.greedy({0, 0}, kSeqLen), std::invalid_argument);  // needs kSeqLen + 1 positions
  EXPECT_NO_THROW(reference.greedy({0, 0}, kSeqLen - 1));
  EXPECT_TRUE(reference.greedy({0}, 0).empty());
}

// ---- stories260K -----------------------------------------------------------------------------------


TEST(LlamaReferenceStories260K, ReadsTheDocumentedHeader) {
  const LlamaReferenceConfig c = LlamaReference(stories_path()).config();
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.seq_len, 512);
  EXPECT_TRUE(c.shared_classifier);
}

TEST(LlamaReferenceStories260K, GreedyFromBosEqualsTheCommittedIds) {
  const std::vector<int32_t> expected =
      committed_greedy_ids();
  ASSERT_EQ(expected.size(), 256u);
  EXPECT_EQ(LlamaReference(stories_path()).greedy({1}, 256), expected);
}

TEST(LlamaReferenceStories260K, LogitsAtAPositionDoNotDependOnLaterTokens) {
  SeededRng rng;
  const LlamaReference reference(stories_path());
  std::vector<int32_t> tokens(48);
  for (auto& t : tokens) t = static_cast<int32_t>(rng.integer(0, 511));
  const auto full = reference.logits(tokens);
  for (size_t prefix : {1u, 2u, 17u, 47u}) {
    const auto part = reference.logits(std::vector<int32_t>(tokens.begin(), tokens.begin() + prefix));
    ASSERT_EQ(part.size(), prefix);
    for (size_t p = 0; p < prefix; ++p) EXPECT_EQ(part[p], full[p]) << "position " << p << " of a prefix of " << prefix;
  }
  // And changing a later token changes nothing before it.
  std::vector<int32_t> changed = tokens;
  changed[30] = (changed[30] + 1) % 512;
  const auto other = reference.logits(changed);
  for (size_t p = 0; p < 30; ++p) EXPECT_EQ(other[p], full[p]) << "position " << p;
  EXPECT_NE(other[30], full[30]);
}

}  // namespace
}  // namespace inferlab::testing
