// Chapter 06's memory arithmetic (analysis/kv_capacity.h) against hand arithmetic on
// small odd cases, the invariants of paging (waste < one block per sequence, block 1 wastes
// nothing, paging fits at least as many sequences as max-length slots), the sampler, and bad input.
#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/inference_cost.h"
#include "analysis/kv_capacity.h"
#include "analysis/model_shape.h"
#include "common/json.h"
#include "tests/support/seeded.h"

namespace inferlab::analysis {
namespace {

// {1, 17, 33} tokens, max_seq_len 64, 3 bytes per token (odd on purpose).
const std::vector<int64_t> kLengths = {1, 17, 33};
constexpr int64_t kMax = 64;
constexpr int64_t kBytes = 3;

TEST(KvCapacity, ContiguousReservationByHand) {
  const KvWaste w = contiguous_waste(kLengths, kMax, kBytes);
  EXPECT_TRUE(w.contiguous());
  EXPECT_EQ(w.sequences, 3);
  EXPECT_EQ(w.tokens_held, 51);        // 1 + 17 + 33
  EXPECT_EQ(w.tokens_reserved, 192);   // 3 · 64
  EXPECT_EQ(w.bytes_held(), 153);      // 51 · 3
  EXPECT_EQ(w.bytes_reserved(), 576);  // 192 · 3
  EXPECT_EQ(w.wasted_tokens(), 141);   // 63 + 47 + 31
  EXPECT_EQ(w.units_reserved(), 3);    // one slot each
  EXPECT_DOUBLE_EQ(w.share_held(), 51.0 / 192.0);
  EXPECT_DOUBLE_EQ(w.wasted_tokens_per_sequence(), 47.0);
}

TEST(KvCapacity, PagedReservationByHandForEveryBlockSize) {
  struct Case {
    int64_t block, blocks, wasted;
  };
  // ⌈1/B⌉ + ⌈17/B⌉ + ⌈33/B⌉ blocks; waste = Σ (blocks · B − length).
  const Case cases[] = {
      {1, 51, 0},     // one block per token: no waste
      {8, 9, 21},     // 1 + 3 + 5 blocks; 7 + 7 + 7
      {16, 6, 45},    // 1 + 2 + 3 blocks; 15 + 15 + 15
      {32, 4, 77},    // 1 + 1 + 2 blocks; 31 + 15 + 31
      {128, 3, 333},  // a block longer than max_seq_len: 127 + 111 + 95, more than the 64-token slots
  };
  for (const Case& c : cases) {
    const KvWaste w = paged_waste(kLengths, c.block, kMax, kBytes);
    EXPECT_FALSE(w.contiguous());
    EXPECT_EQ(w.units_reserved(), c.blocks) << "block " << c.block;
    EXPECT_EQ(w.tokens_reserved, c.blocks * c.block) << "block " << c.block;
    EXPECT_EQ(w.bytes_reserved(), c.blocks * c.block * kBytes) << "block " << c.block;
    EXPECT_EQ(w.bytes_held(), 153) << "block " << c.block;
    EXPECT_EQ(w.wasted_tokens(), c.wasted) << "block " << c.block;
  }
}

TEST(KvCapacity, SequencesThatFitByHand) {
  // 1000 bytes: 5 contiguous slots of 192 B; 20 blocks of 16 tokens (48 B) for 6 blocks per 3
  // sequences → 10; 333 one-token blocks for 51 per 3 → ⌊333 · 3 / 51⌋ = 19; 41 blocks of 8
  // (24 B) for 9 per 3 → 13; 10 blocks of 32 (96 B) for 4 per 3 → 7; 2 blocks of 128 for 3 per 3 → 2.
  const std::vector<KvWasteRow> rows = kv_waste_table(kLengths, kMax, kBytes, 1000);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].scheme(), "contiguous");
  EXPECT_EQ(rows[0].sequences_fit, 5);
  const int64_t blocks[] = {1, 8, 16, 32, 128};
  const int64_t fits[] = {19, 13, 10, 7, 2};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(rows[i + 1].scheme(), "paged");
    EXPECT_EQ(rows[i + 1].waste.block_size, blocks[i]);
    EXPECT_EQ(rows[i + 1].budget_bytes, 1000);
    EXPECT_EQ(rows[i + 1].sequences_fit, fits[i]) << "block " << blocks[i];
  }
  EXPECT_EQ(sequences_that_fit(contiguous_waste(kLengths, kMax, kBytes), 0), 0);
  EXPECT_EQ(sequences_that_fit(contiguous_waste(kLengths, kMax, kBytes), 191), 0);  // one byte short of a slot
  EXPECT_EQ(sequences_that_fit(contiguous_waste(kLengths, kMax, kBytes), 192), 1);
}

TEST(KvCapacity, LlamaSevenBAtSixteenGibFitsSixteenMaxLengthSlots) {
  // The model's own per-token arithmetic: 2 · 32 layers · 32 KV heads · 128 · 2 B = 0.5 MiB.
  const int64_t per_token = kv_cache_size(find_model("llama-7b"), KvFormat::fp16, 1, 1).bytes_per_token;
  ASSERT_EQ(per_token, 524288);
  const int64_t budget = int64_t{16} << 30;
  const std::vector<int64_t> lengths = {500, 500, 500, 500};
  EXPECT_EQ(sequences_that_fit(contiguous_waste(lengths, 2048, per_token), budget), 16);  // 1 GiB each
  // 16 GiB / 0.5 MiB = 32,768 tokens = 2,048 blocks of 16; 500 tokens take 32 blocks → 64 sequences.
  EXPECT_EQ(sequences_that_fit(paged_waste(lengths, 16, 2048, per_token), budget), 64);
  // A budget past 2^63 / sequences does not overflow: 4 TiB of one-token blocks.
  EXPECT_EQ(sequences_that_fit(paged_waste(lengths, 1, 2048, 1), int64_t{1} << 42), (int64_t{1} << 42) / 500);
}

TEST(KvCapacity, PagingInvariantsOnRandomLengths) {
  testing::SeededRng rng;
  const int64_t max_seq_len = 2048;
  std::vector<int64_t> lengths(300);
  for (int64_t& length : lengths) length = rng.integer(1, max_seq_len);
  const int64_t held = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  const int64_t budget = int64_t{3} << 30;
  const int64_t per_token = 4096;
  const KvWaste contiguous = contiguous_waste(lengths, max_seq_len, per_token);
  const int64_t contiguous_fit = sequences_that_fit(contiguous, budget);
  for (int64_t block : {1, 2, 8, 16, 32, 128, 2048}) {  // block sizes that divide max_seq_len
    const KvWaste paged = paged_waste(lengths, block, max_seq_len, per_token);
    EXPECT_EQ(paged.tokens_held, held);
    EXPECT_LT(paged.wasted_tokens(), paged.sequences * block) << "block " << block;
    EXPECT_LT(paged.wasted_tokens_per_sequence(), static_cast<double>(block));
    EXPECT_LE(paged.tokens_reserved, contiguous.tokens_reserved) << "block " << block;
    EXPECT_GE(paged.share_held(), contiguous.share_held()) << "block " << block;
    EXPECT_GE(sequences_that_fit(paged, budget), contiguous_fit) << "block " << block;
    if (block == 1) {
      EXPECT_EQ(paged.wasted_tokens(), 0);
      EXPECT_DOUBLE_EQ(paged.share_held(), 1.0);
    }
  }
  // Per sequence: the waste is exactly the unfilled tail of the last block.
  for (int64_t length : lengths) {
    for (int64_t block : {1, 7, 16, 100}) {
      EXPECT_EQ(paged_waste({length}, block, max_seq_len, 1).wasted_tokens(), (block - length % block) % block)
          << "length " << length << ", block " << block;
    }
  }
}

TEST(KvCapacity, PrefixSharingByHand) {
  // Prefix 20 tokens, block 16, continuations {1, 12, 13}: without sharing ⌈21/16⌉ + ⌈32/16⌉ +
  // ⌈33/16⌉ = 2 + 2 + 3 = 7 blocks; with: the one full prefix block once, and each sequence its
  // own copy of the partial block plus its tail: 1 + 1 + 1 + 2 = 5.
  const SharingBytes s = prefix_sharing(20, {1, 12, 13}, 16, kBytes);
  EXPECT_EQ(s.sequences, 3);
  EXPECT_EQ(s.blocks_without, 7);
  EXPECT_EQ(s.blocks_with, 5);
  EXPECT_EQ(s.bytes_without(), 7 * 16 * 3);
  EXPECT_EQ(s.bytes_with(), 5 * 16 * 3);
  EXPECT_DOUBLE_EQ(s.saving(), 2.0 / 7.0);
  // Block 1: the prefix is stored exactly once.
  const SharingBytes tokens = prefix_sharing(20, {1, 12, 13}, 1, 1);
  EXPECT_EQ(tokens.blocks_without, 21 + 32 + 33);
  EXPECT_EQ(tokens.blocks_with, 20 + 1 + 12 + 13);
  // No prefix, or a prefix shorter than a block: nothing to share.
  EXPECT_EQ(prefix_sharing(0, {5, 40}, 16, 1).saving(), 0.0);
  EXPECT_EQ(prefix_sharing(15, {5, 40}, 16, 1).saving(), 0.0);
}

TEST(KvCapacity, ParallelSamplingAndSystemPromptByHand) {
  // n = 4. Prompt 33 + output 10: 4 · ⌈43/16⌉ = 12 blocks without; 2 shared + 4 · (3 − 2) = 6 with.
  // Prompt 5 + output 3: 4 · 1 without; no full prompt block, so 4 with. Total 16 → 10.
  const SharingBytes p = parallel_sampling_sharing({{33, 10}, {5, 3}}, 4, 16, kBytes);
  EXPECT_EQ(p.sequences, 8);
  EXPECT_EQ(p.blocks_without, 16);
  EXPECT_EQ(p.blocks_with, 10);
  EXPECT_EQ(p.bytes_with(), 10 * 16 * kBytes);
  // One sample shares nothing.
  EXPECT_EQ(parallel_sampling_sharing({{33, 10}}, 1, 16, 1).saving(), 0.0);
  // A 341-token system prompt (21 full blocks + 5 tokens) ahead of requests of 1 and 100 tokens:
  // ⌈342/16⌉ + ⌈441/16⌉ = 22 + 28 = 50 without; 21 + 1 + 7 = 29 with; saved (2 − 1) · 21.
  const SharingBytes sys = system_prompt_sharing(341, {1, 100}, 16, 1);
  EXPECT_EQ(sys.blocks_without, 50);
  EXPECT_EQ(sys.blocks_with, 29);
}

TEST(KvCapacity, SamplerIsSeededBoundedAndHasTheCitedMeans) {
  const LengthDistribution& sharegpt = find_length_distribution("ShareGPT");
  EXPECT_EQ(sharegpt.mean_prompt, 161.31);
  EXPECT_EQ(sharegpt.mean_output, 337.99);
  EXPECT_EQ(find_length_distribution("alpaca").mean_prompt, 19.31);
  EXPECT_EQ(find_length_distribution("alpaca").mean_output, 58.45);

  const auto a = sample_requests(sharegpt, 500, 2048, 42);
  const auto b = sample_requests(sharegpt, 500, 2048, 42);
  const auto c = sample_requests(sharegpt, 500, 2048, 43);
  ASSERT_EQ(a.size(), 500u);
  EXPECT_EQ(sequence_lengths(a), sequence_lengths(b));
  EXPECT_NE(sequence_lengths(a), sequence_lengths(c));
  for (const RequestLength& r : a) {
    EXPECT_GE(r.prompt, 1);
    EXPECT_GE(r.output, 1);
    EXPECT_LE(r.total(), 2048);
  }
  // Without a binding maximum the draws have the cited means: 20,000 geometric draws have a
  // standard error of about mean / 141, so 4% is over 5 standard errors.
  for (const LengthDistribution& d : builtin_length_distributions()) {
    const auto many = sample_requests(d, 20000, int64_t{1} << 40, 7);
    double prompt = 0, output = 0;
    for (const RequestLength& r : many) {
      prompt += static_cast<double>(r.prompt);
      output += static_cast<double>(r.output);
    }
    EXPECT_NEAR(prompt / 20000, d.mean_prompt, 0.04 * d.mean_prompt) << d.name;
    EXPECT_NEAR(output / 20000, d.mean_output, 0.04 * d.mean_output) << d.name;
  }
  // A tight maximum: prompts are redrawn below it and outputs cut at it.
  for (const RequestLength& r : sample_requests(sharegpt, 200, 8, 1)) {
    EXPECT_LT(r.prompt, 8);
    EXPECT_GE(r.output, 1);
    EXPECT_LE(r.total(), 8);
  }
}

TEST(KvCapacity, ReportForTheDocumentedDistribution) {
  KvWasteSettings settings;
  settings.bytes_per_token = 524288;  // LLaMA-7B, fp16
  settings.requests = 2000;
  const KvWasteReport report = kv_waste_report(settings);
  ASSERT_EQ(report.rows.size(), 1 + default_block_sizes().size());
  EXPECT_EQ(report.rows[0].sequences_fit, 16);
  // ShareGPT-like sequences average ≈ 500 of 2048 tokens: a contiguous slot holds ≈ 1/4 tokens.
  EXPECT_GT(report.rows[0].waste.share_held(), 0.20);
  EXPECT_LT(report.rows[0].waste.share_held(), 0.30);
  EXPECT_NEAR(report.rows[0].waste.share_held(), report.mean_length / 2048.0, 1e-12);
  for (size_t i = 1; i < report.rows.size(); ++i) {
    EXPECT_GE(report.rows[i].sequences_fit, 3 * report.rows[0].sequences_fit) << report.rows[i].waste.block_size;
  }
  // Parallel sampling shares the prompts' full blocks; the system prompt shares its 21 full blocks.
  EXPECT_GT(report.parallel_sampling.saving(), 0.1);
  EXPECT_LT(report.parallel_sampling.saving(), 0.75);  // at most (n − 1) / n
  EXPECT_EQ(report.system_prompt.blocks_without - report.system_prompt.blocks_with, (settings.requests - 1) * 21);
  const std::string json = to_json(report);
  EXPECT_EQ(json.front(), '{');
  EXPECT_NE(json.find("\"rows\": ["), std::string::npos) << json;
  EXPECT_NE(json.find("\"scheme\": \"paged\", \"block_size\": 16"), std::string::npos) << json;
  const Json parsed = Json::parse(json);
  EXPECT_EQ(parsed.begin().key(), "settings");
  EXPECT_EQ(parsed["settings"].dump().rfind(R"({"model":"","kv":"","bytes_per_token":524288,)", 0), 0u) << json;
  EXPECT_EQ(parsed["rows"].size(), report.rows.size());
  EXPECT_EQ(parsed["rows"][0]["sequences_fit"], 16);
  EXPECT_EQ(to_json(report.rows).front(), '[');

  const KvCapacity none = kv_capacity(-1e9, 2048, 524288);
  EXPECT_TRUE(none.known);
  EXPECT_EQ(none.contiguous.sequences_fit, 0);
  EXPECT_EQ(none.paged.sequences_fit, 0);
  const KvCapacity sixteen = kv_capacity(16.0 * (1 << 30), 2048, 524288);
  EXPECT_EQ(sixteen.contiguous.sequences_fit, 16);
  EXPECT_EQ(sixteen.paged.waste.block_size, 16);
  EXPECT_GT(sixteen.paged.sequences_fit, 3 * 16);
}

// The message of the std::invalid_argument that @p call throws, or "" when it does not throw.
template <class F>
std::string error_of(F call) {
  try {
    call();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(KvCapacity, BadInputNamesTheArgument) {
  const std::pair<std::string, std::string> cases[] = {
      {error_of([] { contiguous_waste({}, 64, 3); }), "lengths.size() = 0"},
      {error_of([] {
         contiguous_waste({1, 0}, 64, 3);
       }),
       "lengths[1] = 0: must be in [1, max_seq_len = 64]"},
      {error_of([] { paged_waste({65}, 16, 64, 3); }), "lengths[0] = 65"},
      {error_of([] { contiguous_waste({1}, 0, 3); }), "max_seq_len = 0: must be > 0"},
      {error_of([] { paged_waste({1}, 16, 64, 0); }), "bytes_per_token = 0: must be > 0"},
      {error_of([] { paged_waste({1}, 0, 64, 3); }), "block_size = 0: must be > 0"},
      {error_of([] { sequences_that_fit(contiguous_waste({1}, 64, 3), -1); }), "budget_bytes = -1"},
      {error_of([] { sequences_that_fit(KvWaste{}, 10); }), "waste.sequences = 0"},
      {error_of([] { prefix_sharing(-1, {1}, 16, 1); }), "prefix_tokens = -1"},
      {error_of([] {
         prefix_sharing(4, {1, 0}, 16, 1);
       }),
       "continuation_tokens[1] = 0"},
      {error_of([] { prefix_sharing(4, {}, 16, 1); }), "continuation_tokens.size() = 0"},
      {error_of([] { prefix_sharing(4, {1}, 0, 1); }), "block_size = 0"},
      {error_of([] {
         parallel_sampling_sharing({{4, 4}}, 0, 16, 1);
       }),
       "samples = 0"},
      {error_of([] { parallel_sampling_sharing({}, 4, 16, 1); }), "requests.size() = 0"},
      {error_of([] { find_length_distribution("lmsys"); }), "lengths = lmsys: unknown (known: sharegpt, alpaca)"},
      {error_of([] { sample_requests(find_length_distribution("alpaca"), 0, 64, 1); }), "count = 0"},
      {error_of([] { sample_requests(find_length_distribution("alpaca"), 5, 1, 1); }), "max_seq_len = 1"},
      {error_of([] {
         sample_requests({"x", "x", 0.5, 10, ""}, 5, 64, 1);
       }),
       "mean_prompt = 0.5"},
      {error_of([] { kv_waste_report(KvWasteSettings{}); }), "bytes_per_token = 0"},
      {error_of([] {
         KvWasteSettings s;
         s.bytes_per_token = 1;
         s.lengths = "nope";
         kv_waste_report(s);
       }),
       "lengths = nope"},
  };
  for (const auto& [message, expected] : cases) {
    EXPECT_NE(message.find(expected), std::string::npos) << "expected \"" << expected << "\", got \"" << message << "\"";
  }
}

// The settings' strings are escaped in the JSON: quotes, backslashes and control characters
// come back as they went in (they were once written as is, and had to be refused).
TEST(KvCapacity, SettingsStringsRoundTripThroughTheJson) {
  KvWasteSettings s;
  s.bytes_per_token = 1024;
  s.requests = 50;
  s.model = "my \"model\" \\ v2\n";
  s.kv = "fp16\t\x01";
  const Json parsed = Json::parse(to_json(kv_waste_report(s)));
  EXPECT_EQ(parsed["settings"]["model"], s.model);
  EXPECT_EQ(parsed["settings"]["kv"], s.kv);
}

}  // namespace
}  // namespace inferlab::analysis
