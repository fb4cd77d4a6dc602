// Chapter 06: the paged KV cache (kernels/kv/kv_cache.h with KvPaging) — block tables, slots
// (vLLM's slot mapping), the copy a copy-on-write needs, poisoning, and the slot-mapped write
// (cpu: KvCache::store_slots; cuda/write_slots on the device backends) for every element type
// and both layouts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "common/config.h"
#include "kernels/kv/cuda_append.h"
#include "kernels/kv/kv_cache.h"
#include "kernels/kv/kv_factories.h"
#include "tests/support/decode_check.h"
#include "tests/support/seeded.h"
#include "tests/support/test_backend.h"

namespace inferlab {
namespace {

using testing::kTestBackend;

// Every element of every cached token of every layer, as floats (dequantized).
std::vector<float> cached_values(const KvCache& cache) {
  std::vector<float> out;
  const KvCacheShape& s = cache.shape();
  for (int64_t layer = 0; layer < s.num_layers; ++layer)
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t g = 0; g < s.num_kv_heads; ++g)
        for (int64_t t = 0; t < cache.length(b); ++t)
          for (int64_t c = 0; c < s.head_dim; ++c) {
            out.push_back(cache.key(b, g, t, c, layer));
            out.push_back(cache.value(b, g, t, c, layer));
          }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const std::vector<KvFormat>& paged_formats() {
  static const std::vector<KvFormat> formats{KvFormat::fp32(), KvFormat::fp16(), KvFormat::int8(),
                                             KvFormat::int8(KeyScaling::per_token, ScaleDtype::fp16),
                                             KvFormat::fp8()};
  return formats;
}

TEST(PagedCache, ScatteredBlockOrderIsAPermutationWithNoBlockAfterItsPredecessor) {
  for (const int64_t count : {1, 2, 3, 4, 7, 64, 1000}) {
    const std::vector<int32_t> order = scattered_block_order(count, uint64_t(count) * 7919);
    ASSERT_EQ(int64_t(order.size()), count);
    EXPECT_EQ(std::set<int32_t>(order.begin(), order.end()).size(), size_t(count)) << "not a permutation";
    for (int32_t id : order) EXPECT_TRUE(id >= 0 && id < count);
    if (count >= 2) {
      for (size_t i = 0; i + 1 < order.size(); ++i)
        EXPECT_NE(order[i + 1], order[i] + 1) << "count " << count << ": block " << order[i + 1] << " follows "
                                              << order[i] << " at logical position " << i;
    }
  }
}

// to_paged keeps every stored value, bit for bit, for every element type; the rows really are
// scattered (the paged row of a token is not its contiguous row).
TEST(PagedCache, ToPagedKeepsEveryValueForEveryFormat) {
  testing::SeededRng rng;
  const std::vector<int64_t> lengths{29, 1, 0, 40};
  const Tensor<float> k = rng.normal_tensor({4, 3, 40, 24}), v = rng.normal_tensor({4, 3, 40, 24});
  for (const KvFormat& format : paged_formats())
    for (const int64_t block_size : {1, 2, 7, 16, 32, 128}) {
      const KvCache contiguous = make_kv_cache(k, v, lengths, format);
      const KvCache paged = to_paged(contiguous, block_size, rng.seed());
      ASSERT_TRUE(paged.paged());
      EXPECT_EQ(paged.lengths(), contiguous.lengths());
      EXPECT_EQ(paged.max_blocks_per_seq(), (40 + block_size - 1) / block_size);
      EXPECT_TRUE(same_bits(cached_values(paged), cached_values(contiguous))) << format.name() << ", block " << block_size;
      EXPECT_TRUE(std::isnan(paged.key(0, 1, 29, 0))) << "a row past the length must read as NaN";
      bool moved = false;  // with ≥ 2 blocks per sequence, some token must have left its contiguous row
      for (int64_t t = 0; t < 29; ++t) moved = moved || paged.row(0, 0, t) != contiguous.row(0, 0, t);
      if (block_size <= 16) {
        EXPECT_TRUE(moved) << "the copy is not scattered";
      }
    }
}

// A row past a sequence's length reads as NaN in its own blocks (poisoned), so a paged kernel
// that reads one key too many fails.
TEST(PagedCache, RowsPastTheLengthArePoisoned) {
  testing::SeededRng rng;
  for (const KvFormat& format : paged_formats()) {
    const Tensor<float> k = rng.normal_tensor({2, 2, 20, 16}), v = rng.normal_tensor({2, 2, 20, 16});
    const KvCache paged = to_paged(make_kv_cache(k, v, {13, 20}, format), 8, rng.seed());
    for (int64_t t = 13; t < 16; ++t) {  // the rest of the sequence's last block
      EXPECT_TRUE(std::isnan(paged.key(0, 1, t, 3))) << format.name() << ", token " << t;
      EXPECT_TRUE(std::isnan(paged.value(0, 0, t, 5))) << format.name() << ", token " << t;
    }
  }
}

// The row of (sequence, KV head, token) is slot_row(slot(sequence, token), KV head) in both
// layouts: one slot per token serves every KV head (vLLM's slot mapping).
TEST(PagedCache, SlotRowEqualsRowInBothLayouts) {
  const KvCache contiguous({3, 2, 21, 8}, KvFormat::fp32());
  const KvCache paged = to_paged(contiguous, 4, 17);
  for (const KvCache* cache : {&contiguous, &paged}) {
    const int64_t block_size = cache->paged() ? cache->paging().block_size : cache->shape().max_seq_len;
    std::set<int64_t> slots;
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t t = 0; t < 21; ++t) {
        const int64_t slot = cache->slot(b, t);
        EXPECT_TRUE(slots.insert(slot).second) << "slot " << slot << " given twice";
        EXPECT_LT(slot, cache->slots_per_layer());
        for (int64_t g = 0; g < 2; ++g) EXPECT_EQ(slot_row(slot, g, 2, block_size), cache->row(b, g, t));
      }
  }
}

TEST(PagedCache, BadPagingAndBlockTablesAreRejectedNamingTheArgument) {
  const KvCacheShape shape{2, 2, 10, 8};
  EXPECT_THROW(KvCache(shape, KvFormat::fp32(), KvPaging{0, 4}), std::invalid_argument);
  EXPECT_THROW(KvCache(shape, KvFormat::fp32(), KvPaging{4, 0}), std::invalid_argument);
  try {
    KvCache(shape, KvFormat::int8(KeyScaling::per_channel), KvPaging{4, 8});
    ADD_FAILURE() << "a paged cache with per-channel K scales was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("per-token"), std::string::npos) << error.what();
  }
  KvCache cache(shape, KvFormat::fp16(), KvPaging{4, 6});
  EXPECT_EQ(cache.max_blocks_per_seq(), 3);
  const std::vector<int32_t> too_many{0, 1, 2, 3}, out_of_range{0, 6}, good{5, 0};
  EXPECT_THROW(cache.set_block_table(0, too_many), std::invalid_argument);
  try {
    cache.set_block_table(0, out_of_range);
    ADD_FAILURE() << "block id 6 of a 6-block pool was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("blocks[1]"), std::string::npos) << error.what();
  }
  cache.set_block_table(0, good);
  testing::SeededRng rng;
  // Prefilling 9 tokens needs 3 blocks; sequence 0 has 2 mapped.
  try {
    cache.prefill(0, rng.normal_tensor({2, 9, 8}), rng.normal_tensor({2, 9, 8}));
    ADD_FAILURE() << "a prefill past the mapped blocks was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("logical block 2"), std::string::npos) << error.what();
  }
  cache.prefill(0, rng.normal_tensor({2, 8, 8}), rng.normal_tensor({2, 8, 8}));
  // The table cannot shrink below the cached tokens; appending needs a mapped slot.
  const std::vector<int32_t> one{5};
  EXPECT_THROW(cache.set_block_table(0, one), std::invalid_argument);
  EXPECT_THROW(cache.append(rng.normal_tensor({2, 2, 8}), rng.normal_tensor({2, 2, 8})), std::invalid_argument);
  EXPECT_EQ(cache.length(0), 8) << "a refused append changed a length";
  EXPECT_THROW(cache.copy_block(0, 6), std::invalid_argument);
  EXPECT_THROW(cache.poison_block(-1), std::invalid_argument);
  KvCache contiguous(shape, KvFormat::fp32());
  EXPECT_THROW(contiguous.copy_block(0, 1), std::logic_error);
  EXPECT_THROW((void)contiguous.paged_layout(), std::logic_error);
  EXPECT_THROW((void)cache.layout(), std::logic_error);
}

// copy_block copies every layer's rows and scales of a block (copy-on-write); poison_block
// poisons them.
TEST(PagedCache, CopyAndPoisonABlockInEveryLayer) {
  testing::SeededRng rng;
  for (const KvFormat& format : paged_formats()) {
    KvCache cache({2, 2, 8, 16, 3}, format, KvPaging{4, 5});
    const std::vector<int32_t> first{3, 1}, second{4};
    cache.set_block_table(0, first);
    for (int64_t layer = 0; layer < 3; ++layer)
      cache.prefill(0, rng.normal_tensor({2, 6, 16}), rng.normal_tensor({2, 6, 16}), layer);
    cache.copy_block(1, 4);  // sequence 0's partly filled second block → block 4 for sequence 1
    cache.set_block_table(1, second);
    cache.set_lengths({6, 2});
    int64_t differing = 0;
    std::string first_wrong;  // the first element of sequence 1 that is not its copy
    for (int64_t layer = 0; layer < 3; ++layer)
      for (int64_t g = 0; g < 2; ++g)
        for (int64_t t = 0; t < 2; ++t)
          for (int64_t c = 0; c < 16; ++c)
            for (const bool value : {false, true}) {
              const float want = value ? cache.value(0, g, 4 + t, c, layer) : cache.key(0, g, 4 + t, c, layer);
              const float got = value ? cache.value(1, g, t, c, layer) : cache.key(1, g, t, c, layer);
              if (std::memcmp(&want, &got, 4) == 0 || differing++ > 0) continue;
              first_wrong = std::string(value ? "V" : "K") + " (sequence 1, KV head " + std::to_string(g) + ", token " +
                            std::to_string(t) + ", channel " + std::to_string(c) + ", layer " + std::to_string(layer) +
                            ") = " + std::to_string(got) + ", sequence 0's token " + std::to_string(4 + t) + " holds " +
                            std::to_string(want);
            }
    EXPECT_EQ(differing, 0) << format.name() << ": " << differing << " elements of block 4 are not copies of "
                            << "block 1's; the first: " << first_wrong;
    cache.poison_block(4);
    for (int64_t layer = 0; layer < 3; ++layer) EXPECT_TRUE(std::isnan(cache.value(1, 1, 1, 7, layer))) << format.name();
    EXPECT_FALSE(std::isnan(cache.value(0, 1, 5, 7, 2))) << "poisoning block 4 touched block 1";
  }
}

// The slot-mapped write (vLLM's reshape_and_cache) on this backend writes exactly the bytes of
// the CPU one (cpu: KvCache::store_slots against the per-token prefill), both layouts, every
// format with a device write, slots in shuffled order with a padded (−1) token.
TEST(PagedCache, SlotWriteEqualsTheCpuWrite) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  testing::SeededRng rng;
  std::vector<KvFormat> formats{KvFormat::fp32(), KvFormat::fp16(), KvFormat::int8(),
                                KvFormat::int8(KeyScaling::per_token, ScaleDtype::fp16)};
  if (kTestBackend == Backend::cpu) formats.push_back(KvFormat::fp8());
  for (const KvFormat& format : formats)
    for (const int64_t block_size : {0, 1, 7, 16}) {
      KvCache cache({3, 2, 19, 24}, format);
      if (block_size > 0) cache = to_paged(cache, block_size, rng.seed());
      // A chunk of 5 tokens of sequence 2 (positions 3..7), 1 padded token, then token 0 of
      // sequence 0: 7 tokens in one write.
      std::vector<int64_t> slots;
      for (int64_t t = 3; t < 8; ++t) slots.push_back(cache.slot(2, t));
      slots.push_back(-1);
      slots.push_back(cache.slot(0, 0));
      const Tensor<float> k = rng.normal_tensor({7, 2, 24}), v = rng.normal_tensor({7, 2, 24});
      KvCache expected = cache, got = cache;
      expected.store_slots(k, v, slots, 0);
      if (kTestBackend == Backend::cpu) {
        // The oracle of the CPU write: the same tokens through prefill (its own write path).
        KvCache by_prefill = cache;
        Tensor<float> k2({2, 8, 24}), v2({2, 8, 24});
        for (int64_t g = 0; g < 2; ++g)
          for (int64_t t = 3; t < 8; ++t)
            for (int64_t c = 0; c < 24; ++c) {
              k2[(g * 8 + t) * 24 + c] = k[((t - 3) * 2 + g) * 24 + c];
              v2[(g * 8 + t) * 24 + c] = v[((t - 3) * 2 + g) * 24 + c];
            }
        by_prefill.prefill(2, k2, v2);
        expected.set_lengths({0, 0, 8});
        int64_t differing = 0;
        std::string first;  // the first element the slot write and the prefill disagree on
        for (int64_t g = 0; g < 2; ++g)
          for (int64_t t = 3; t < 8; ++t)
            for (int64_t c = 0; c < 24; ++c)
              for (const bool value : {false, true}) {
                const float want = value ? by_prefill.value(2, g, t, c) : by_prefill.key(2, g, t, c);
                const float got = value ? expected.value(2, g, t, c) : expected.key(2, g, t, c);
                if (got == want || differing++ > 0) continue;
                first = std::string(value ? "V" : "K") + " (sequence 2, KV head " + std::to_string(g) + ", token " +
                        std::to_string(t) + ", channel " + std::to_string(c) + ") = " + std::to_string(got) +
                        ", the prefill stores " + std::to_string(want);
              }
        EXPECT_EQ(differing, 0) << format.name() << ", block size " << block_size << ": " << differing
                                << " elements of the slot write differ from the prefill's; the first: " << first;
        continue;
      }
#if defined(INFERLAB_TEST_BACKEND_SIM)
      sim::kv_write_slots_cuda(got, k, v, slots);
#elif defined(INFERLAB_TEST_BACKEND_CUDA) && INFERLAB_WITH_CUDA
      cuda::kv_write_slots_cuda(got, k, v, slots);
#endif
      // Every stored element and scale (kv_cache_differences names the first few by sequence, KV
      // head, token and channel).
      EXPECT_EQ(testing::kv_cache_differences(got, expected), "")
          << format.name() << ", block size " << block_size << ": the device write vs the CPU write";
    }
}

TEST(PagedCache, BadSlotsAreRejectedBeforeAnythingIsWritten) {
  testing::SeededRng rng;
  KvCache cache = to_paged(KvCache({2, 1, 8, 4}, KvFormat::int8()), 4, rng.seed());
  const KvCache before = cache;
  const Tensor<float> k = rng.normal_tensor({2, 1, 4}), v = rng.normal_tensor({2, 1, 4});
  const std::vector<int64_t> out_of_range{0, cache.slots_per_layer()}, twice{3, 3}, short_list{1};
  EXPECT_THROW(cache.store_slots(k, v, out_of_range, 0), std::invalid_argument);
  EXPECT_THROW(cache.store_slots(k, v, twice, 0), std::invalid_argument);
  EXPECT_THROW(cache.store_slots(k, v, short_list, 0), std::invalid_argument);
  Tensor<float> bad = k;
  bad[5] = NAN;
  const std::vector<int64_t> fine{0, 1};
  EXPECT_THROW(cache.store_slots(bad, v, fine, 0), std::invalid_argument);
  EXPECT_TRUE(std::equal(cache.k_bytes().begin(), cache.k_bytes().end(), before.k_bytes().begin()));
}

}  // namespace
}  // namespace inferlab
