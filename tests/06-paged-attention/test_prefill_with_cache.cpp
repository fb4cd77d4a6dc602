// Chapter 06: prefill with a cache (kernels/paged/prefill_with_cache.h) — a chunk of new tokens
// attends to the cached prefix and causally to itself. Every registered version on this
// backend (one per cache element type: on cpu fp32, fp16, INT8 and FP8), on a contiguous cache
// and on paged ones (block sizes 1, 7, 16, 128, scattered blocks), a ragged batch of chunks (an
// empty prefix, a chunk longer than the CPU's query tile, a prefix longer than its key piece, a
// sequence with no chunk, a decode-like chunk of 1), GQA, d 80 and 64, against the float64
// oracle. The oracle itself is checked against two independent ones: a chunk that is a whole
// prompt is chapter 02's causal prefill, chunks of one token are chapter 03's decode.
//
// The quantized caches (cpu/prefill_with_cache over chapter 04's formats) on their own: every
// INT8 scale layout (per-token and, on a contiguous cache, per-channel K; fp32 and fp16 scales)
// and FP8 E4M3, against the float64 oracle over the cache's dequantized values
// (KvCache::dequantized(): what exact attention over the stored codes and scales gives), on odd
// shapes (head_dim 24, 64, 96, 128; MHA, GQA 4 and 8; prefixes and chunks across the 16-token
// tile and the 64-key piece); and batch invariance: a query's output is the same bits whatever
// chunk it is computed in, whatever else is in the call, contiguous or paged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/compare.h"
#include "kernels/attention/attention.h"
#include "kernels/decode/decode.h"
#include "kernels/kv/kv_factories.h"
#include "kernels/registry.h"
#include "tests/support/seeded.h"
#include "tests/support/test_backend.h"

namespace inferlab {
namespace {

using testing::kTestBackend;

// A cache holding prefix[b] + chunk[b] tokens per sequence (random K and V), and the chunk's
// queries flattened in sequence order.
struct ChunkProblem {
  KvCache cache;
  std::vector<int64_t> chunk_lengths;
  Tensor<float> q;
  Tensor<float> k, v;  // [batch, kv_heads, max_len, d]: every token's K and V
};

ChunkProblem make_problem(testing::SeededRng& rng, const std::vector<int64_t>& prefix, const std::vector<int64_t>& chunk,
                          int64_t heads, int64_t kv_heads, int64_t d, KvFormat format, int64_t block_size) {
  const int64_t B = int64_t(prefix.size());
  std::vector<int64_t> lengths(prefix.size());
  int64_t max_len = 1, tokens = 0;
  for (size_t b = 0; b < prefix.size(); ++b) {
    lengths[b] = prefix[b] + chunk[b];
    max_len = std::max(max_len, lengths[b] + 2);
    tokens += chunk[b];
  }
  Tensor<float> k = rng.normal_tensor({B, kv_heads, max_len, d}), v = rng.normal_tensor({B, kv_heads, max_len, d});
  KvCache cache = make_kv_cache(k, v, lengths, format);
  if (block_size > 0) cache = to_paged(cache, block_size, rng.seed());
  return {std::move(cache), chunk, rng.normal_tensor({tokens, heads, d}), std::move(k), std::move(v)};
}

class PrefillWithCache : public ::testing::TestWithParam<const PrefillWithCacheVersion*> {};

TEST_P(PrefillWithCache, EqualsTheOracleOnEveryLayout) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  const PrefillWithCacheVersion& version = *GetParam();
  // {prefix, chunk} per sequence, and the heads. The batch of every backend: no prefix; chunk > 16
  // (the CPU tile); no chunk; a short chunk; a prefix longer than the CPU's 512-key piece; GQA 4.
  struct Batch {
    std::vector<int64_t> prefix, chunk;
    int64_t heads, kv_heads;
  };
  std::vector<Batch> batches{{{0, 37, 10, 600}, {5, 20, 0, 3}, 8, 2}};
  if (kTestBackend == Backend::sim) {
    // The emulator runs that batch with 4 heads over 1 KV head (the same GQA ratio; its cost grows
    // with the blocks, heads × tokens: 8 over 2 took twice as long), and a smaller one with a
    // decode-like chunk of 1 at 8 heads over 2.
    batches = {{{0, 37, 10, 600}, {5, 20, 0, 3}, 4, 1}, {{0, 23, 9, 31}, {5, 18, 0, 1}, 8, 2}};
  }
  for (const Batch& batch : batches)
    for (const int64_t block_size : {0, 1, 7, 16, 128})
      for (const int64_t d : {80, 64}) {
        testing::SeededRng rng;
        const ChunkProblem p =
            make_problem(rng, batch.prefix, batch.chunk, batch.heads, batch.kv_heads, d, version.input, block_size);
        Tensor<float> out(p.q.shape());
        out.poison();
        version.run(p.q, p.chunk_lengths, p.cache, out);
        const Comparison c = compare_to_oracle(out, prefill_with_cache_reference(p.q, p.chunk_lengths, p.cache),
                                               tolerance_for(version.precision));
        EXPECT_TRUE(c.ok) << "prefix " << batch.prefix.back() << ", " << batch.heads << " heads, block size "
                          << block_size << " (0 = contiguous), d = " << d << ":\n"
                          << c.report();
      }
}

TEST_P(PrefillWithCache, RejectsChunksTheCacheDoesNotHold) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  const PrefillWithCacheVersion& version = *GetParam();
  testing::SeededRng rng;
  const ChunkProblem p = make_problem(rng, {3, 2}, {2, 1}, 4, 2, 16, version.input, 0);
  Tensor<float> out(p.q.shape());
  try {
    version.run(p.q, {2, 4}, p.cache, out);  // sequence 1 holds 3 tokens: a chunk of 4 cannot be cached
    ADD_FAILURE() << "a chunk longer than the sequence was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("chunk_lengths[1]"), std::string::npos) << error.what();
  }
  EXPECT_THROW(version.run(p.q, {2, 0}, p.cache, out), std::invalid_argument);  // 3 query rows for 2 tokens
}

std::vector<const PrefillWithCacheVersion*> versions_here() {
  std::vector<const PrefillWithCacheVersion*> here;
  for (const PrefillWithCacheVersion& v : prefill_with_cache_versions())
    if (v.backend == kTestBackend) here.push_back(&v);
  return here;
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PrefillWithCache);  // a cuda build without nvcc

INSTANTIATE_TEST_SUITE_P(EveryVersion, PrefillWithCache, ::testing::ValuesIn(versions_here()),
                         [](const ::testing::TestParamInfo<const PrefillWithCacheVersion*>& info) {
                           std::string name = info.param->name + "_" + std::string(to_string(info.param->input));
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

#if !defined(INFERLAB_TEST_BACKEND_SIM) && !defined(INFERLAB_TEST_BACKEND_CUDA)
// The oracle against chapter 02's: a chunk that is the whole prompt is a causal prefill.
TEST(PrefillWithCacheOracle, AWholePromptChunkIsTheCausalPrefill) {
  testing::SeededRng rng;
  const int64_t L = 29, H = 4, G = 2, d = 24;
  const ChunkProblem p = make_problem(rng, {0}, {L}, H, G, d, KvDtype::fp32, 7);
  const Tensor<double> got = prefill_with_cache_reference(p.q, p.chunk_lengths, p.cache);
  // attention_reference's layout: q [H, L, d], k and v [G, L, d].
  Tensor<float> q({H, L, d}), k({G, L, d}), v({G, L, d});
  for (int64_t t = 0; t < L; ++t)
    for (int64_t c = 0; c < d; ++c) {
      for (int64_t h = 0; h < H; ++h) q[(h * L + t) * d + c] = p.q[(t * H + h) * d + c];
      for (int64_t g = 0; g < G; ++g) {
        k[(g * L + t) * d + c] = p.k[(g * (L + 2) + t) * d + c];
        v[(g * L + t) * d + c] = p.v[(g * (L + 2) + t) * d + c];
      }
    }
  const Tensor<double> want = attention_reference(q, k, v, true);
  double worst = 0.0;
  for (int64_t t = 0; t < L; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t c = 0; c < d; ++c)
        worst = std::max(worst, std::abs(got[(t * H + h) * d + c] - want[(h * L + t) * d + c]));
  EXPECT_LT(worst, 1e-12);
}

// And against chapter 03's: chunks of one token are a decode step.
TEST(PrefillWithCacheOracle, ChunksOfOneTokenAreADecodeStep) {
  testing::SeededRng rng;
  const ChunkProblem p = make_problem(rng, {4, 0, 17}, {1, 1, 1}, 6, 3, 16, KvDtype::fp16, 4);
  const Tensor<double> got = prefill_with_cache_reference(p.q, p.chunk_lengths, p.cache);
  const Tensor<double> want = decode_reference(p.q, p.cache);
  double worst = 0.0;
  for (int64_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  EXPECT_LT(worst, 1e-12);
}

// ---- quantized caches (cpu/prefill_with_cache over chapter 04's formats) ----

// Every INT8 scale layout and FP8; per-channel K scales only on a contiguous cache (KvCache
// refuses them paged).
const std::vector<KvFormat>& quantized_formats() {
  static const std::vector<KvFormat> formats{KvFormat::int8(), KvFormat::int8(KeyScaling::per_token, ScaleDtype::fp16),
                                             KvFormat::fp8(), KvFormat::int8(KeyScaling::per_channel),
                                             KvFormat::int8(KeyScaling::per_channel, ScaleDtype::fp16)};
  return formats;
}

TEST(PrefillWithCacheQuantized, EqualsTheOracleOverTheDequantizedCache) {
  // {prefix, chunk} per sequence, heads, KV heads, head_dim. Rows of 96 and 128 (and MHA's 64,
  // read in place by a lone query row) are whole vectors; 24 is not (rows widened into a tile).
  struct Batch {
    std::vector<int64_t> prefix, chunk;
    int64_t heads, kv_heads, d;
  };
  const std::vector<Batch> batches{
      {{0, 31, 257, 1, 64}, {33, 1, 17, 0, 127}, 8, 2, 96},  // GQA 4; pieces and tiles crossed
      {{5, 130, 0}, {16, 3, 1}, 4, 4, 64},                   // MHA
      {{63, 2}, {65, 31}, 8, 1, 128},                        // GQA 8
      {{40, 0, 9}, {7, 19, 1}, 6, 3, 24},                    // GQA 2, rows not whole vectors
  };
  for (const KvFormat& format : quantized_formats())
    for (const Batch& batch : batches) {
      testing::SeededRng rng;
      const ChunkProblem p =
          make_problem(rng, batch.prefix, batch.chunk, batch.heads, batch.kv_heads, batch.d, format, 0);
      // The oracle over the stored codes × scales (an fp32 contiguous cache), once for every layout
      // of the same bytes.
      const Tensor<double> oracle = prefill_with_cache_reference(p.q, p.chunk_lengths, p.cache.dequantized());
      for (const int64_t block_size : {0, 1, 7, 16}) {
        if (block_size > 0 && format.per_channel()) continue;
        const KvCache cache =
            block_size == 0 ? p.cache : to_paged(p.cache, block_size, rng.seed() + uint64_t(block_size));
        Tensor<float> out(p.q.shape());
        out.poison();
        prefill_with_cache_cpu(p.q, p.chunk_lengths, cache, out);
        const Comparison c = compare_to_oracle(out, oracle, tolerance_for(format.precision()));
        EXPECT_TRUE(c.ok) << format.name() << ", " << batch.heads << "/" << batch.kv_heads << " heads, d = " << batch.d
                          << ", block size " << block_size << " (0 = contiguous):\n"
                          << c.report();
      }
    }
}

// The outputs of the query tokens at the last chunk_lengths[b] positions of each sequence (its
// chunk), computed in one call: q_all holds every position's queries, [batch, max_len, heads, d].
Tensor<float> run_chunks(const KvCache& cache, const Tensor<float>& q_all, const std::vector<int64_t>& chunk_lengths) {
  const int64_t max_len = q_all.dim(1), H = q_all.dim(2), d = q_all.dim(3), row = H * d;
  int64_t tokens = 0;
  for (const int64_t n : chunk_lengths) tokens += n;
  Tensor<float> q({tokens, H, d}), out({tokens, H, d});
  int64_t t = 0;
  for (size_t b = 0; b < chunk_lengths.size(); ++b)
    for (int64_t pos = cache.length(int64_t(b)) - chunk_lengths[b]; pos < cache.length(int64_t(b)); ++pos, ++t)
      std::copy_n(q_all.data() + (int64_t(b) * max_len + pos) * row, row, q.data() + t * row);
  out.poison();
  prefill_with_cache_cpu(q, chunk_lengths, cache, out);
  return out;
}

// How many query tokens of @p got (the chunks @p chunk_lengths of @p cache's sequences, as
// run_chunks() lays them out) differ in any bit from the same positions of @p whole (every
// position of every sequence in one call).
int64_t differing_tokens(const KvCache& cache, const std::vector<int64_t>& chunk_lengths, const Tensor<float>& got,
                         const Tensor<float>& whole, int64_t row) {
  int64_t differing = 0, t = 0, first_of_sequence = 0;
  for (size_t b = 0; b < chunk_lengths.size(); ++b) {
    const int64_t L = cache.length(int64_t(b));
    for (int64_t pos = L - chunk_lengths[b]; pos < L; ++pos, ++t)
      if (std::memcmp(got.data() + t * row, whole.data() + (first_of_sequence + pos) * row,
                      size_t(row) * sizeof(float)) != 0)
        ++differing;
    first_of_sequence += L;
  }
  return differing;
}

TEST(PrefillWithCacheQuantized, AQuerysOutputIsTheSameBitsWhateverItsChunkBatchAndLayout) {
  struct Heads {
    int64_t heads, kv_heads, d;
  };
  for (const KvFormat& format : quantized_formats())
    for (const Heads shape : {Heads{8, 2, 80}, Heads{3, 3, 24}}) {
      testing::SeededRng rng;
      const std::vector<int64_t> lengths{150, 70, 9};
      const int64_t B = 3, max_len = 152, G = shape.kv_heads, H = shape.heads, d = shape.d;
      const KvCache cache = make_kv_cache(rng.normal_tensor({B, G, max_len, d}), rng.normal_tensor({B, G, max_len, d}),
                                          lengths, format);
      const Tensor<float> q_all = rng.normal_tensor({B, max_len, H, d});
      const std::string what = format.name() + ", " + std::to_string(H) + "/" + std::to_string(G) + " heads, d = " +
                               std::to_string(d);
      // Every position of every sequence in one call: the bits every other way must give.
      const Tensor<float> whole = run_chunks(cache, q_all, lengths);
      // 1. One sequence alone, its last c tokens as the chunk: tiles start elsewhere, pieces are
      //    cut by other tokens, and the other sequences are gone.
      for (int64_t b = 0; b < B; ++b)
        for (const int64_t c : {1, 2, 15, 16, 17, 63, 64, 65, 149}) {
          if (c > lengths[size_t(b)]) continue;
          std::vector<int64_t> chunks(size_t(B), 0);
          chunks[size_t(b)] = c;
          EXPECT_EQ(differing_tokens(cache, chunks, run_chunks(cache, q_all, chunks), whole, H * d), 0)
              << what << ": sequence " << b << "'s last " << c << " tokens as a chunk alone vs every token at once";
        }
      // 2. Random chunks of every sequence together, contiguous and paged (the same bytes through
      //    scattered blocks of 1, 7 and 16 tokens; per-channel K scales have no paged cache).
      std::vector<int64_t> chunks;
      for (const int64_t L : lengths) chunks.push_back(rng.integer(0, L));
      for (const int64_t block_size : {0, 1, 7, 16}) {
        if (block_size > 0 && format.per_channel()) continue;
        const KvCache layout = block_size == 0 ? cache : to_paged(cache, block_size, rng.seed() + uint64_t(block_size));
        EXPECT_EQ(differing_tokens(layout, lengths, run_chunks(layout, q_all, lengths), whole, H * d), 0)
            << what << ", block size " << block_size << ": every token at once vs the contiguous cache";
        EXPECT_EQ(differing_tokens(layout, chunks, run_chunks(layout, q_all, chunks), whole, H * d), 0)
            << what << ", block size " << block_size << ": chunks " << chunks[0] << ", " << chunks[1] << ", "
            << chunks[2] << " vs every token at once on the contiguous cache";
      }
    }
}

TEST(PrefillWithCacheCost, CountsTheVisibleKeys) {
  const KvCache cache = make_kv_cache(Tensor<float>({2, 1, 10, 8}, 1.0f), Tensor<float>({2, 1, 10, 8}, 1.0f), {7, 4},
                                      KvDtype::fp32);
  // Sequence 0: prefix 4, chunk 3 → 3·4 + 3·4/2 = 18 visible keys; sequence 1: no chunk.
  const Cost cost = prefill_with_cache_cost({3, 0}, cache, 2);
  EXPECT_DOUBLE_EQ(cost.flops, 4.0 * 8 * 2 * 18);
  EXPECT_DOUBLE_EQ(cost.bytes, 2.0 * 1 * 7 * 8 * 4 + 2.0 * 3 * 2 * 8 * 4);
}
#endif

}  // namespace
}  // namespace inferlab
