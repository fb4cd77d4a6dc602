// The pieces of a split model that need no ranks: Weight::take_rows / take_columns in every
// format, tensor_split()'s rule (GQA split or replicated, the vocabulary's ranges), the shards'
// shapes and bytes, the step plan on the wire, the world of one rank, and the model's refusals;
// for pipelines, the stages' layers and weights, the micro-batches (run in order through the
// whole model they give every step's logits bit for bit) and the bubble.
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/rng.h"
#include "runtime/engine/engine.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/step_plan.h"
#include "kernels/kv/kv_cache.h"
#include "runtime/collective/communicator.h"
#include "runtime/parallel/pipeline_parallel.h"
#include "runtime/parallel/tensor_parallel.h"
#include "tests/10-parallelism/split_fixture.h"

namespace inferlab {
namespace {

using model::LlamaConfig;
using model::LlamaWeights;
using parallel::TensorSplit;

void expect_invalid(const std::function<void()>& call, const std::string& name) {
  try {
    call();
    ADD_FAILURE() << "no std::invalid_argument naming " << name;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

Tensor<float> random_matrix(int64_t rows, int64_t cols, uint64_t seed) {
  Tensor<float> t({rows, cols});
  Rng rng(seed);
  rng.fill_normal(std::span(t.data(), size_t(t.size())));
  return t;
}

class TakeSlices : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(TakeSlices, RowsAndColumnsHoldTheWeightsTheyCover) {
  const Weight w = Weight::convert(random_matrix(13, 96, 3), GetParam());
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{2, 5}, {0, 1}, {9, 13}, {7, 7}};
  const Weight rows = w.take_rows(ranges);
  ASSERT_EQ(rows.shape(), (Shape{8, 96}));
  EXPECT_EQ(rows.format(), w.format());
  int64_t out = 0;
  for (const auto& [begin, end] : ranges)
    for (int64_t r = begin; r < end; ++r, ++out)
      for (int64_t c = 0; c < 96; ++c) ASSERT_EQ(rows.at(out, c), w.at(r, c)) << "row " << r << ", column " << c;
  const Weight cols = w.take_columns(32, 96);
  ASSERT_EQ(cols.shape(), (Shape{13, 64}));
  for (int64_t r = 0; r < 13; ++r)
    for (int64_t c = 0; c < 64; ++c) ASSERT_EQ(cols.at(r, c), w.at(r, c + 32)) << "row " << r << ", column " << c;
  EXPECT_EQ(cols.bytes(), 13 * weight_row_bytes(GetParam(), 64));
}

TEST_P(TakeSlices, BadRangesAreNamed) {
  const Weight w = Weight::convert(random_matrix(4, 64, 5), GetParam());
  const std::vector<std::pair<int64_t, int64_t>> past = {{3, 5}}, reversed = {{2, 1}};
  expect_invalid([&] { (void)w.take_rows(past); }, "row range");
  expect_invalid([&] { (void)w.take_rows(reversed); }, "row range");
  expect_invalid([&] { (void)w.take_columns(-1, 32); }, "begin");
  expect_invalid([&] { (void)w.take_columns(32, 65); }, "end");
  if (is_block_format(GetParam())) {
    expect_invalid([&] { (void)w.take_columns(16, 64); }, "begin");
    expect_invalid([&] { (void)w.take_columns(0, 48); }, "end");
  } else {
    EXPECT_EQ(w.take_columns(16, 48).shape(), (Shape{4, 32}));
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, TakeSlices,
                         ::testing::Values(WeightFormat::f32, WeightFormat::f16, WeightFormat::bf16, WeightFormat::q8_0,
                                           WeightFormat::q4_0, WeightFormat::q4_1),
                         [](const auto& info) { return std::string(to_string(info.param)); });

LlamaConfig smollm2_shape() {
  LlamaConfig c;
  c.dim = 576, c.hidden_dim = 1536, c.n_layers = 1, c.n_heads = 9, c.n_kv_heads = 3, c.vocab_size = 49152;
  c.max_seq_len = 64;
  return c;
}

TEST(TensorSplitRule, SmolLm2SplitsOverOneOrThreeRanks) {
  const LlamaConfig c = smollm2_shape();
  for (const int p : {1, 3}) {
    for (int r = 0; r < p; ++r) {
      const TensorSplit s = parallel::tensor_split(c, r, p);
      EXPECT_EQ(s.q_heads, 9 / p);
      EXPECT_EQ(s.kv_heads, 3 / p);
      EXPECT_EQ(s.kv_replicas, 1);
      EXPECT_EQ(s.hidden, 1536 / p);
      EXPECT_EQ(s.hidden_begin, r * 1536 / p);
    }
  }
  for (const int p : {2, 4, 6}) expect_invalid([&] { (void)parallel::tensor_split(c, 0, p); }, "tp = " + std::to_string(p));
  expect_invalid([&] { (void)parallel::tensor_split(c, 3, 3); }, "rank");
  expect_invalid([&] { (void)parallel::tensor_split(c, 0, 0); }, "tp");
}

// Every query head's KV head (h / (n_heads / n_kv_heads)) is one the rank holds, whether the KV
// heads are split (p ≤ n_kv_heads) or replicated (p > n_kv_heads); the vocabulary's ranges cover
// every id once.
TEST(TensorSplitRule, EachRanksQueryHeadsReadTheKvHeadsItHolds) {
  for (const auto& [heads, kv_heads, p] : std::vector<std::tuple<int64_t, int64_t, int>>{
           {8, 4, 2}, {8, 4, 4}, {8, 2, 4}, {8, 1, 8}, {12, 4, 2}, {9, 3, 3}, {16, 2, 8}}) {
    LlamaConfig c = smollm2_shape();
    c.n_heads = heads, c.n_kv_heads = kv_heads, c.head_dim_size = 64, c.hidden_dim = 64 * p, c.vocab_size = 1001;
    std::vector<int> owner(size_t(c.vocab_size), 0);
    for (int r = 0; r < p; ++r) {
      const TensorSplit s = parallel::tensor_split(c, r, p);
      EXPECT_EQ(s.kv_replicas, p > kv_heads ? p / kv_heads : 1);
      for (int64_t h = s.q_head_begin; h < s.q_head_begin + s.q_heads; ++h) {
        const int64_t kv = h / (heads / kv_heads);
        EXPECT_GE(kv, s.kv_head_begin) << heads << "/" << kv_heads << " heads, tp " << p << ", rank " << r;
        EXPECT_LT(kv, s.kv_head_begin + s.kv_heads) << heads << "/" << kv_heads << " heads, tp " << p << ", rank " << r;
      }
      for (int64_t v = s.vocab_begin; v < s.vocab_begin + s.vocab_rows; ++v) ++owner[size_t(v)];
      EXPECT_EQ(s.vocab_begin, r * s.vocab_stride);
    }
    for (int64_t v = 0; v < c.vocab_size; ++v) ASSERT_EQ(owner[size_t(v)], 1) << "token id " << v << ", tp " << p;
  }
}

TEST(TensorSplitRule, BlockFormatsAreCutBetweenBlocksOnly) {
  LlamaConfig c = smollm2_shape();
  c.dim = 64, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim_size = 16, c.hidden_dim = 128, c.vocab_size = 50;
  const LlamaWeights f32 = model::random_llama(c, 1);
  EXPECT_NO_THROW(parallel::check_tensor_split(f32, 2));  // any column cut is whole in f32
  const LlamaWeights q = convert_weights(f32, WeightFormat::q8_0);
  expect_invalid([&] { parallel::check_tensor_split(q, 4); }, "tp = 4");  // wo: 16 columns a rank
  EXPECT_NO_THROW(parallel::check_tensor_split(q, 2));                   // 32 columns a rank
}

// Rank r's matrices are the whole model's rows and columns tensor_split() names; together the
// shards hold every weight once, plus the copies of a replicated KV head.
TEST(TensorShards, HoldTheirRankSliceAndTogetherTheModel) {
  LlamaConfig c = smollm2_shape();
  c.dim = 64, c.n_heads = 8, c.n_kv_heads = 2, c.head_dim_size = 32, c.hidden_dim = 128, c.vocab_size = 77;
  c.n_layers = 2, c.shared_classifier = false;
  const LlamaWeights whole = model::random_llama(c, 7);
  const int64_t d = 32, q_dim = 256, kv_dim = 64, F = 128;
  for (const int p : {2, 4}) {
    int64_t parameters = 0;
    for (int r = 0; r < p; ++r) {
      const TensorSplit t = parallel::tensor_split(c, r, p);
      const LlamaWeights s = parallel::shard_weights(whole, r, p);
      EXPECT_EQ(s.shard.rank, r);
      EXPECT_EQ(s.shard.ranks, p);
      EXPECT_EQ(s.config.n_heads, 8 / p);
      EXPECT_EQ(s.config.n_kv_heads, t.kv_heads);
      EXPECT_EQ(s.config.hidden_dim, F / p);
      EXPECT_EQ(s.config.dim, 64);
      EXPECT_EQ(s.config.vocab_size, 77);
      const auto& wl = whole.layers[1];
      const auto& sl = s.layers[1];
      for (int64_t c0 = 0; c0 < 64; c0 += 7) {
        EXPECT_EQ(sl.wqkv.at(0, c0), wl.wqkv.at(t.q_head_begin * d, c0));                          // first Q row
        EXPECT_EQ(sl.wqkv.at(t.q_heads * d, c0), wl.wqkv.at(q_dim + t.kv_head_begin * d, c0));      // first K row
        EXPECT_EQ(sl.wqkv.at(t.q_heads * d + t.kv_heads * d, c0),
                  wl.wqkv.at(q_dim + kv_dim + t.kv_head_begin * d, c0));                           // first V row
        EXPECT_EQ(sl.w13.at(F / p, c0), wl.w13.at(F + t.hidden_begin, c0));                         // first up row
        EXPECT_EQ(s.embedding.at(0, c0), whole.embedding.at(t.vocab_begin, c0));
        EXPECT_EQ(s.classifier.at(t.vocab_rows - 1, c0), whole.classifier.at(t.vocab_begin + t.vocab_rows - 1, c0));
      }
      for (int64_t row = 0; row < 64; row += 9) {
        EXPECT_EQ(sl.wo.at(row, 5), wl.wo.at(row, t.q_head_begin * d + 5));
        EXPECT_EQ(sl.w2.at(row, 3), wl.w2.at(row, t.hidden_begin + 3));
      }
      for (const auto& l : s.layers)
        parameters += l.wqkv.out_features() * l.wqkv.in_features() + l.wo.out_features() * l.wo.in_features() +
                      l.w13.out_features() * l.w13.in_features() + l.w2.out_features() * l.w2.in_features();
      parameters += s.embedding.out_features() * 64 + s.classifier.out_features() * 64;
      expect_invalid([&] { model::LlamaModel refused(s); }, "comm");
      const auto one = parallel::make_single_communicator();
      expect_invalid([&] { model::LlamaModel refused(s, one.get()); }, "comm");
    }
    int64_t whole_parameters = 2 * 77 * 64;
    whole_parameters += int64_t(whole.layers.size()) * ((q_dim + 2 * kv_dim) * 64 + 64 * q_dim + 2 * F * 64 + 64 * F);
    const int64_t replicated = p > 2 ? int64_t(c.n_layers) * 2 * kv_dim * 64 * (p / 2 - 1) : 0;  // K and V copies
    EXPECT_EQ(parameters, whole_parameters + replicated) << "tp " << p;
  }
}

TEST(TensorShards, TheWholeModelIsNotSplitAgain) {
  LlamaConfig c = smollm2_shape();
  c.dim = 64, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim_size = 16, c.hidden_dim = 64, c.vocab_size = 50;
  const LlamaWeights s = parallel::shard_weights(model::random_llama(c, 2), 1, 2);
  expect_invalid([&] { (void)parallel::shard_weights(s, 0, 2); }, "weights");
}

// The plan on the wire: every field read back as written; bytes cut short or left over refused.
TEST(StepPlanWire, PlansRoundTripAndBadBytesAreNamed) {
  LlamaConfig c = smollm2_shape();
  c.dim = 32, c.n_heads = 4, c.n_kv_heads = 2, c.hidden_dim = 64, c.vocab_size = 60, c.max_seq_len = 128;
  const model::LlamaModel m(model::random_llama(c, 4));
  engine::EngineConfig e;
  e.block_size = 4, e.num_blocks = 12, e.max_num_seqs = 3, e.max_num_batched_tokens = 16, e.chunk_size = 8;
  e.max_seq_len = 128;
  engine::Engine engine(m, e);
  Rng rng(8);
  for (const int64_t length : {9, 3, 14}) {
    engine::Request r;
    for (int64_t i = 0; i < length; ++i) r.prompt.push_back(int32_t(rng.integer(0, 59)));
    r.sampling.max_new_tokens = 12;
    engine.add_request(r);
  }
  int steps = 0;
  bool copies = false;
  while (engine.step()) {
    const model::StepPlan& plan = engine.last_plan();
    const std::vector<uint8_t> bytes = model::encode_step_plan(plan);
    const model::StepPlan back = model::decode_step_plan(bytes);
    EXPECT_EQ(back.token_ids, plan.token_ids);
    EXPECT_EQ(back.positions, plan.positions);
    EXPECT_EQ(back.cu_seqlens_q, plan.cu_seqlens_q);
    EXPECT_EQ(back.context_lens, plan.context_lens);
    EXPECT_EQ(back.block_tables, plan.block_tables);
    EXPECT_EQ(back.slot_mapping, plan.slot_mapping);
    EXPECT_EQ(back.logits_indices, plan.logits_indices);
    EXPECT_EQ(back.block_copies, plan.block_copies);
    EXPECT_EQ(back.fresh_blocks, plan.fresh_blocks);
    copies = copies || !plan.fresh_blocks.empty();
    if (steps++ == 0) {
      for (const size_t cut : {size_t(0), size_t(7), bytes.size() / 2, bytes.size() - 1})
        expect_invalid([&] { (void)model::decode_step_plan(std::span(bytes.data(), cut)); }, "");
      std::vector<uint8_t> longer = bytes;
      longer.push_back(0);
      expect_invalid([&] { (void)model::decode_step_plan(longer); }, "plan bytes");
    }
  }
  EXPECT_GT(steps, 5);
  EXPECT_TRUE(copies);
  const model::StepPlan empty = model::decode_step_plan(model::encode_step_plan({}));
  EXPECT_EQ(empty.num_seqs(), 0);
}

TEST(SingleCommunicator, IsAWorldOfOneRank) {
  const auto comm = parallel::make_single_communicator();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->name(), "single");
  std::vector<float> data = {1.5f, -2.0f};
  comm->all_reduce_sum(data);
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f}));
  std::vector<float> all(2);
  comm->all_gather(data, all);
  EXPECT_EQ(all, data);
  std::vector<float> wrong(3);
  expect_invalid([&] { comm->all_gather(data, wrong); }, "all.size()");
  std::vector<uint8_t> bytes = {1, 2, 3};
  parallel::broadcast_vector(*comm, bytes, 0);
  EXPECT_EQ(bytes, (std::vector<uint8_t>{1, 2, 3}));
  expect_invalid([&] { comm->send(data, 0); }, "to");
  expect_invalid([&] { comm->recv(data, 0); }, "from");
  expect_invalid([&] { comm->broadcast(bytes, 1); }, "root");
  comm->barrier();
}

// ---- pipeline parallelism: stages, micro-batches, the bubble ----

LlamaConfig small_pipeline_shape(bool tied) {
  LlamaConfig c = smollm2_shape();
  c.dim = 64, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim_size = 16, c.hidden_dim = 96, c.vocab_size = 83;
  c.n_layers = 7, c.max_seq_len = 256, c.shared_classifier = tied;
  return c;
}

TEST(PipelineSplit, LayersAreCutEvenlyTheFirstStagesTakingTheRest) {
  const LlamaConfig c = small_pipeline_shape(true);
  const std::vector<std::pair<int64_t, int64_t>> want3 = {{0, 3}, {3, 2}, {5, 2}};
  for (int s = 0; s < 3; ++s) {
    const parallel::PipelineSplit p = parallel::pipeline_split(c, s, 3);
    EXPECT_EQ(p.layer_begin, want3[size_t(s)].first) << "stage " << s;
    EXPECT_EQ(p.layers, want3[size_t(s)].second) << "stage " << s;
  }
  for (const int stages : {1, 2, 4, 7}) {
    int64_t next = 0;
    for (int s = 0; s < stages; ++s) {
      const parallel::PipelineSplit p = parallel::pipeline_split(c, s, stages);
      EXPECT_EQ(p.layer_begin, next) << stages << " stages, stage " << s;
      EXPECT_GE(p.layers, 1);
      next += p.layers;
    }
    EXPECT_EQ(next, c.n_layers) << stages << " stages";
  }
  expect_invalid([&] { (void)parallel::pipeline_split(c, 0, 8); }, "pp");
  expect_invalid([&] { (void)parallel::pipeline_split(c, 0, 0); }, "pp");
  expect_invalid([&] { (void)parallel::pipeline_split(c, 3, 3); }, "stage");
}

TEST(PipelineStages, HoldTheirLayersAndTheEndsTheirEnds) {
  for (const bool tied : {true, false}) {
    const LlamaWeights whole = model::random_llama(small_pipeline_shape(tied), 4);
    int64_t bytes = 0;
    for (int s = 0; s < 3; ++s) {
      const LlamaWeights w = parallel::stage_weights(whole, s, 3, 2);
      const parallel::PipelineSplit split = parallel::pipeline_split(whole.config, s, 3);
      EXPECT_EQ(w.stage.stage, s);
      EXPECT_EQ(w.stage.stages, 3);
      EXPECT_EQ(w.stage.micro_batches, 2);
      EXPECT_EQ(w.stage.layer_begin, split.layer_begin);
      EXPECT_EQ(w.config.n_layers, split.layers);
      ASSERT_EQ(int64_t(w.layers.size()), split.layers);
      for (int64_t l = 0; l < split.layers; ++l)
        for (int64_t col = 0; col < 64; col += 5) {
          const auto& mine = w.layers[size_t(l)];
          const auto& theirs = whole.layers[size_t(split.layer_begin + l)];
          EXPECT_EQ(mine.wqkv.at(3, col), theirs.wqkv.at(3, col)) << "stage " << s << ", layer " << l;
          EXPECT_EQ(mine.w2.at(col, 7), theirs.w2.at(col, 7)) << "stage " << s << ", layer " << l;
        }
      EXPECT_EQ(!w.embedding.empty(), s == 0 || (s == 2 && tied)) << "stage " << s << (tied ? ", tied" : "");
      EXPECT_EQ(!w.final_norm.empty(), s == 2) << "stage " << s;
      EXPECT_EQ(!w.classifier.empty(), s == 2 && !tied) << "stage " << s;
      bytes += w.bytes();
      expect_invalid([&] { model::LlamaModel refused(w); }, "comm");
    }
    // The stages together hold the model, and a tied embedding twice (on both ends).
    EXPECT_EQ(bytes, whole.bytes() + (tied ? whole.embedding.bytes() : 0)) << (tied ? "tied" : "untied");
  }
  const LlamaWeights whole = model::random_llama(small_pipeline_shape(true), 4);
  expect_invalid([&] { (void)parallel::stage_weights(whole, 0, 2, 0); }, "micro_batches");
  expect_invalid([&] { (void)parallel::stage_weights(parallel::stage_weights(whole, 0, 2), 0, 2); }, "weights");
  LlamaWeights middle = parallel::stage_weights(whole, 1, 3);
  middle.embedding = whole.embedding;  // a middle stage neither embeds nor computes logits
  expect_invalid([&] { middle.validate(); }, "embedding");
}

TEST(PipelineBubble, IsTheIdleShareOfGPipesSchedule) {
  EXPECT_DOUBLE_EQ(parallel::pipeline_bubble(1, 1), 0.0);
  EXPECT_DOUBLE_EQ(parallel::pipeline_bubble(2, 1), 0.5);
  EXPECT_DOUBLE_EQ(parallel::pipeline_bubble(2, 4), 0.2);
  EXPECT_DOUBLE_EQ(parallel::pipeline_bubble(4, 4), 3.0 / 7.0);
  expect_invalid([] { (void)parallel::pipeline_bubble(0, 4); }, "stages");
  expect_invalid([] { (void)parallel::pipeline_bubble(2, 0); }, "micro_batches");
}

// The plans of an engine run that pages, chunks and preempts.
std::vector<model::StepPlan> engine_plans(const model::LlamaModel& m, const engine::EngineConfig& e) {
  engine::Engine recorder(m, e);
  for (engine::Request& r : requests_for(m.config().vocab_size, 31)) recorder.add_request(r);
  std::vector<model::StepPlan> plans;
  while (recorder.step()) plans.push_back(recorder.last_plan());
  EXPECT_GT(recorder.stats().preemptions, 0) << "the pool is meant to be too small for every request";
  return plans;
}

// Every step of an engine run, cut into 1 … 5 micro-batches, each a well-formed plan, the tokens
// and logits rows all covered once, and the micro-batches run in order through the whole model
// on their own pool give the step's logits bit for bit — what makes a pipeline's logits exact.
TEST(MicroBatches, RunInOrderTheyGiveEveryStepsLogitsBitForBit) {
  const model::LlamaModel m(model::random_llama(small_pipeline_shape(true), 8));
  const engine::EngineConfig e = tight_engine();
  const std::vector<model::StepPlan> plans = engine_plans(m, e);
  const KvPaging paging{e.block_size, e.num_blocks};
  const KvCacheShape shape = m.kv_shape(e.max_num_seqs, e.max_seq_len);
  for (const int micro : {2, 3, 5}) {
    KvStorage whole_pool = make_kv_storage(shape, KvFormat::fp32(), paging);
    KvStorage cut_pool = make_kv_storage(shape, KvFormat::fp32(), paging);
    KvCache whole(whole_pool, shape, paging), cut(cut_pool, shape, paging);
    int cut_steps = 0;
    for (size_t s = 0; s < plans.size(); ++s) {
      const model::StepPlan& plan = plans[s];
      const Tensor<float> want = m.forward(plan, whole);
      const std::vector<model::MicroBatch> batches = model::split_micro_batches(plan, micro);
      EXPECT_EQ(int64_t(batches.size()), std::min<int64_t>(micro, int64_t(plan.token_ids.size())));
      cut_steps += batches.size() > 1;
      Tensor<float> got({int64_t(plan.logits_indices.size()), m.config().vocab_size}, -1e30f);
      std::vector<int32_t> tokens;
      std::vector<int> rows_seen(plan.logits_indices.size(), 0);
      for (size_t b = 0; b < batches.size(); ++b) {
        const model::MicroBatch& mb = batches[b];
        ASSERT_NO_THROW(model::check_step_plan(mb.plan, cut)) << "step " << s << ", micro-batch " << b;
        EXPECT_EQ(mb.plan.block_copies.empty() && mb.plan.fresh_blocks.empty() ? 0 : int(b), 0)
            << "the block operations go with the first micro-batch";
        tokens.insert(tokens.end(), mb.plan.token_ids.begin(), mb.plan.token_ids.end());
        const Tensor<float> rows = m.forward(mb.plan, cut);
        ASSERT_EQ(rows.shape()[0], int64_t(mb.logits_rows.size()));
        for (size_t r = 0; r < mb.logits_rows.size(); ++r) {
          ++rows_seen[size_t(mb.logits_rows[r])];
          std::copy_n(rows.data() + int64_t(r) * rows.shape()[1], rows.shape()[1],
                      got.data() + mb.logits_rows[r] * rows.shape()[1]);
        }
      }
      EXPECT_EQ(tokens, plan.token_ids) << "step " << s;
      EXPECT_EQ(rows_seen, std::vector<int>(plan.logits_indices.size(), 1)) << "step " << s;
      ASSERT_EQ(got.shape(), want.shape());
      for (int64_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << "step " << s << ", " << micro << " micro-batches, logit " << i;
    }
    EXPECT_GT(cut_steps, int(plans.size()) / 2) << "most steps are meant to be cut";
  }
  expect_invalid([&] { (void)model::split_micro_batches(plans.at(0), 0); }, "micro_batches");
}

// A plan the engine does not make: logits wanted out of token order, one token twice, a token
// that is not its sequence's last, and a block copy — the micro-batches still give the step's
// logits row for row, and the copy happens before any of them writes.
TEST(MicroBatches, LogitsOutOfOrderAndABlockCopyAreKept) {
  const model::LlamaModel m(model::random_llama(small_pipeline_shape(false), 9));
  const KvPaging paging{4, 16};
  const KvCacheShape shape = m.kv_shape(3, 64);
  // Two sequences already cached (steps of their own), then one step of both and a third.
  model::StepPlan first;
  const std::vector<int32_t> a = {5, 9, 17, 2, 33, 41}, b = {7, 7, 60};
  first.add_sequence(a, std::vector<int64_t>{0, 1, 2, 3, 4, 5}, 6, {0, 1}, true);
  first.add_sequence(b, std::vector<int64_t>{8, 9, 10}, 3, {2}, true);
  model::StepPlan step;
  const std::vector<int32_t> a2 = {11, 12, 13}, b2 = {14}, c = {3, 4, 5, 6, 7, 8, 9};
  step.add_sequence(a2, std::vector<int64_t>{6, 7, 12}, 9, {0, 1, 3}, false);
  step.add_sequence(b2, std::vector<int64_t>{23}, 4, {5}, false);  // its block 2 copied into 5 first
  step.add_sequence(c, std::vector<int64_t>{24, 25, 26, 27, 28, 29, 30}, 7, {6, 7}, false);
  step.block_copies = {{2, 5}};
  step.fresh_blocks = {3, 6, 7};
  step.logits_indices = {10, 3, 1, 10, 0};  // c's last, b's, a's middle, c's last again, a's first
  for (const int micro : {2, 3, 4}) {
    KvStorage whole_pool = make_kv_storage(shape, KvFormat::fp32(), paging);
    KvStorage cut_pool = make_kv_storage(shape, KvFormat::fp32(), paging);
    KvCache whole(whole_pool, shape, paging), cut(cut_pool, shape, paging);
    (void)m.forward(first, whole);
    (void)m.forward(first, cut);
    const Tensor<float> want = m.forward(step, whole);
    Tensor<float> got(want.shape(), -1e30f);
    const int64_t vocab = want.shape()[1];
    for (const model::MicroBatch& mb : model::split_micro_batches(step, micro)) {
      const Tensor<float> rows = m.forward(mb.plan, cut);
      for (size_t r = 0; r < mb.logits_rows.size(); ++r)
        std::copy_n(rows.data() + int64_t(r) * vocab, vocab, got.data() + mb.logits_rows[r] * vocab);
    }
    for (int64_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << micro << " micro-batches, logit " << i;
  }
}

}  // namespace
}  // namespace inferlab
