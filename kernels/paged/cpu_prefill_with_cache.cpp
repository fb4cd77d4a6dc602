// cpu/prefill_with_cache — chapter 06: a chunk of new tokens attends to the cached prefix and
// causally to itself (the contract: prefill_with_cache.h), fused, on either cache layout.
//
// Work item: (sequence b, KV head g, tile of kTileTokens consecutive query tokens of b's chunk).
// Its rows are tile tokens × GQA group query heads, gathered into one block of rows. Keys are
// taken in *pieces at fixed absolute positions*: piece j is keys kPieceKeys·j … kPieceKeys·(j+1)
// − 1, cut at the query's own position p for the last one. Two kinds:
//   1. pieces that end at or before the tile's first position, visible whole to every row of the
//      tile: all rows stream them together — chapter 03's two SIMD passes (attend_keys(),
//      cpu_decode_keys.h: K once for all rows, softmax numerators, V once; run by run, so a
//      paged cache is read block by block);
//   2. the rest, up to p, for each token's group rows alone: at most kPieceKeys + kTileTokens
//      keys per token.
// Every piece returns an unnormalised partial (acc, max, sum per row, as split-KV decode does);
// merge() folds it into the running one exactly (rescale by exp(m_old − m_new)), in piece order,
// and the row's output is acc / sum at the end. No P × n score matrix exists at any time.
//
// Batch invariance (chapter 07 relies on it): a query's result depends only on its position and
// the cache's values — never on how its sequence was cut into chunks, on the tile it shares, on
// the other sequences in the call, or on the layout. Its pieces are the same absolute pieces,
// merged in the same order, whatever chunk it arrives in (a decode step is a chunk of one);
// attend_keys() computes each row's scores, numerators and weighted sum on its own, key by key in
// order (runs and 4-key steps change no row's arithmetic: the padding of a partial step adds
// exact zeros). So a token computed during a prompt chunk, recomputed after a preemption, or
// decoded one at a time gets bit-identical attention output.
//
// Reads: each K and V row of the visible prefix once per tile — n / kTileTokens times per chunk
// of n tokens — instead of once per query token; the tile's rows share every load (AI grows
// with the tile, as prefill's does with L).
//
// Element types: fp32 and fp16 rows as they are (Unscaled); INT8 codes with fp32 or fp16 scales
// and FP8 E4M3 codes with fp32 scales (chapter 04) through chapter 04's QuantizedScales, which
// attend_keys() applies in both kinds of piece alike: each run's scores times their rows'
// per-token K scales (or the query times per-channel K scales, a contiguous INT8 cache's), each
// run's probabilities times their rows' V scales. A scale belongs to its row, so a quantized
// cache keeps the invariance above: a key's score and a value's weight are the same floats in
// whichever piece, tile or layout they are read. (That the *codes* are the same however a
// sequence was chunked is the writer's business: per-token INT8 and FP8 rows are quantized each
// on its own, so they are; per-channel K scales are calibrated on a whole prompt, so the model's
// chunked forward refuses them — llama_model.h.)
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "kernels/decode/cpu_decode_keys.h"
#include "kernels/paged/prefill_with_cache.h"
#include "kernels/primitives/cpu_simd.h"

namespace inferlab {
namespace {

using namespace decode_keys;

constexpr int64_t kTileTokens = 16;  // query tokens per work item
constexpr int64_t kPieceKeys = 64;   // keys per piece, at absolute positions (a multiple of kTileTokens)

// The running softmax state of @p rows query rows: unnormalised output, max, sum.
struct Partial {
  Partial(int64_t rows, int64_t d_pad)
      : acc(rows * d_pad), max(size_t(rows)), sum(size_t(rows)) {}
  void reset(int64_t rows, int64_t d_pad) {
    std::fill(acc.data(), acc.data() + rows * d_pad, 0.0f);
    std::fill(max.begin(), max.begin() + rows, -std::numeric_limits<float>::infinity());
    std::fill(sum.begin(), sum.begin() + rows, 0.0f);
  }
  simd::AlignedFloats acc;
  std::vector<float> max, sum;
};

// Folds rows [0, rows) of @p piece into rows [first, first + rows) of @p total: the max becomes
// the larger one, and each side is rescaled by exp(its max − the new max).
void merge(Partial& total, int64_t first, const Partial& piece, int64_t rows, int64_t d_pad) {
  for (int64_t r = 0; r < rows; ++r) {
    const size_t t = size_t(first + r);
    if (piece.sum[size_t(r)] == 0.0f) continue;
    const float m = std::max(total.max[t], piece.max[size_t(r)]);
    const float a = total.sum[t] == 0.0f ? 0.0f : std::exp(total.max[t] - m);
    const float b = std::exp(piece.max[size_t(r)] - m);
    float* acc = total.acc.data() + int64_t(t) * d_pad;
    const float* add = piece.acc.data() + r * d_pad;
    for (int64_t c = 0; c < d_pad; ++c) acc[c] = acc[c] * a + add[c] * b;
    total.sum[t] = total.sum[t] * a + piece.sum[size_t(r)] * b;
    total.max[t] = m;
  }
}

struct Item {
  int64_t sequence, kv_head, first_token;  // first_token: index in q of the tile's first query
  int64_t tokens;                          // query tokens in the tile
};

// The work items @p items over the layer @p rows; @p scales_of(b, g) gives the Scales policy of
// (sequence b, KV head g) that attend_keys() folds into every piece (Unscaled, QuantizedScales).
template <class T, class S, class Layout, class ScalesOf>
void prefill_tiles(const Tensor<float>& q, const ChunkShape& s, const KvRows<T, S, Layout>& rows,
                   const ScalesOf& scales_of, const std::vector<Item>& items, Tensor<float>& out) {
  const int64_t d = s.head_dim, group = s.group_size(), d_pad = simd::round_up(d, kLanes);
  const int64_t max_rows = kTileTokens * group;
  // Threads only when there is work for them: a small model's decode step is a few thousand
  // multiply-adds, less than waking a thread costs. Which thread runs an item changes nothing.
  int64_t work = 0;  // query rows × keys they see, roughly
  for (const Item& item : items)
    work += item.tokens * group * (s.token_position[size_t(item.first_token)] + item.tokens) * d;

#pragma omp parallel if (work >= (int64_t{1} << 18))
  {
    GroupScratch shared_scratch(max_rows, d_pad, kPieceKeys), token_scratch(group, d_pad, kPieceKeys);
    std::vector<float> q_tile(size_t(max_rows * d));
    Partial total(max_rows, d_pad), piece(max_rows, d_pad);

#pragma omp for schedule(dynamic, 1)
    for (size_t w = 0; w < items.size(); ++w) {
      const Item& item = items[w];
      const int64_t b = item.sequence, g = item.kv_head, h0 = g * group, n_rows = item.tokens * group;
      const auto scales = scales_of(b, g);  // the same for both kinds of piece
      // The tile's query rows, token by token, the group's heads of each token together.
      for (int64_t t = 0; t < item.tokens; ++t)
        std::copy_n(q.data() + ((item.first_token + t) * s.num_heads + h0) * d, group * d, q_tile.data() + t * group * d);
      total.reset(n_rows, d_pad);

      // 1. Whole pieces every row of the tile sees (they end at or before the first token's
      //    position + 1), streamed once for all rows.
      const int64_t first = s.token_position[size_t(item.first_token)];
      const int64_t shared_end = (first + 1) / kPieceKeys * kPieceKeys;
      for (int64_t begin = 0; begin < shared_end; begin += kPieceKeys) {
        attend_keys(q_tile.data(), n_rows, rows, b, g, begin, begin + kPieceKeys, shared_scratch, piece.acc.data(),
                    piece.max.data(), piece.sum.data(), scales);
        merge(total, 0, piece, n_rows, d_pad);
      }
      // 2. The rest up to each token's own position p, in the same absolute pieces, per token.
      for (int64_t t = 0; t < item.tokens; ++t) {
        const int64_t p = s.token_position[size_t(item.first_token + t)];
        for (int64_t begin = shared_end; begin <= p; begin += kPieceKeys) {
          attend_keys(q_tile.data() + t * group * d, group, rows, b, g, begin, std::min(p + 1, begin + kPieceKeys),
                      token_scratch, piece.acc.data(), piece.max.data(), piece.sum.data(), scales);
          merge(total, t * group, piece, group, d_pad);
        }
      }
      for (int64_t r = 0; r < n_rows; ++r) {
        const int64_t token = item.first_token + r / group, h = h0 + r % group;
        float* o = out.data() + (token * s.num_heads + h) * d;
        const float* acc = total.acc.data() + r * d_pad;
        const float inv_sum = 1.0f / total.sum[size_t(r)];
        for (int64_t c = 0; c < d; ++c) o[c] = acc[c] * inv_sum;
      }
    }
  }
}

// The kernel over rows of T with scales of S (float for the unscaled formats, which have none):
// the checks, the work items, then prefill_tiles() on the cache's own layout.
template <class T, class S = float>
void prefill_with_cache(const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths, const KvCache& cache,
                        int64_t layer, Tensor<float>& out) {
  const ChunkShape s = chunk_shape(q, chunk_lengths, cache);
  check_shape(out, q.shape(), "out");
  std::vector<Item> items;
  int64_t first_token = 0;
  for (int64_t b = 0; b < cache.shape().batch; ++b) {
    const int64_t n = chunk_lengths[size_t(b)];
    for (int64_t t0 = 0; t0 < n; t0 += kTileTokens)
      for (int64_t g = 0; g < s.num_kv_heads; ++g)
        items.push_back({b, g, first_token + t0, std::min(kTileTokens, n - t0)});
    first_token += n;
  }
  cache.with_rows<T, S>(layer, [&](const auto& rows) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, uint16_t>) {
      prefill_tiles(q, s, rows, [](int64_t, int64_t) { return Unscaled{}; }, items, out);
    } else {
      prefill_tiles(q, s, rows, [&](int64_t b, int64_t g) { return quantized_scales(rows, b, g); }, items, out);
    }
  });
}

}  // namespace

void prefill_with_cache_cpu(const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths, const KvCache& cache,
                            Tensor<float>& out) {
  prefill_with_cache_cpu(q, chunk_lengths, cache, 0, out);
}

void prefill_with_cache_cpu(const Tensor<float>& q, const std::vector<int64_t>& chunk_lengths, const KvCache& cache,
                            int64_t layer, Tensor<float>& out) {
  switch (cache.dtype()) {
    case KvDtype::fp32:
      return prefill_with_cache<float>(q, chunk_lengths, cache, layer, out);
    case KvDtype::fp16:
      return prefill_with_cache<uint16_t>(q, chunk_lengths, cache, layer, out);
    case KvDtype::int8:
      if (cache.format().scale_dtype == ScaleDtype::fp16)
        return prefill_with_cache<int8_t, uint16_t>(q, chunk_lengths, cache, layer, out);
      return prefill_with_cache<int8_t, float>(q, chunk_lengths, cache, layer, out);
    case KvDtype::fp8:
      return prefill_with_cache<uint8_t, float>(q, chunk_lengths, cache, layer, out);
  }
  throw std::logic_error("prefill_with_cache_cpu: unknown KV dtype");
}

}  // namespace inferlab
