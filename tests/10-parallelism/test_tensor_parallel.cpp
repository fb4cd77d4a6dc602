// Tensor parallelism over MPI (runtime/parallel/tensor_parallel.h, rank_runner.h), run by mpiexec
// with 2, 3 or 4 ranks: every rank builds the same seeded model and keeps its shard; rank 0 runs
// the engine and compares with the whole model, the other ranks follow its steps.
//
// Random models whose heads fit the world: 2 ranks split 4 KV heads, 3 ranks split 3, 4 ranks
// replicate 2 (each KV head on two ranks); head_dim 32 and a hidden slice of 96 a rank keep
// every column slice whole Q4_1 blocks; a vocabulary of 101 leaves the last rank fewer rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "common/rng.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/make_model_runner.h"
#include "runtime/engine/serving_run.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_runner.h"
#include "runtime/parallel/mpi_communicator.h"
#include "runtime/parallel/tensor_parallel.h"
#include "runtime/parallel/rank_runner.h"
#include "tests/10-parallelism/split_fixture.h"

namespace inferlab {
namespace {

using model::LlamaConfig;
using model::LlamaModel;
using model::LlamaWeights;

parallel::Communicator& world() {
  static std::unique_ptr<parallel::Communicator> comm = parallel::make_mpi_communicator();
  return *comm;
}

LlamaConfig config_for(int ranks) {
  LlamaConfig c;
  c.dim = 96;
  c.head_dim_size = 32;
  c.n_heads = ranks == 3 ? 9 : 8;
  c.n_kv_heads = ranks == 2 ? 4 : ranks == 3 ? 3 : 2;
  c.hidden_dim = 96 * ranks;
  c.n_layers = 3;
  c.vocab_size = 101;
  c.max_seq_len = 256;
  c.shared_classifier = false;
  return c;
}

// The shard of a seeded model in the test's format (SplitModelTest: rank 0 tests).
class TensorParallel : public SplitModelTest<WeightFormat> {
 protected:
  bool lead(uint64_t seed) {
    parallel::Communicator& comm = world();
    LlamaWeights whole = convert_weights(model::random_llama(config_for(comm.size()), seed), GetParam());
    LlamaWeights shard = parallel::shard_weights(whole, comm.rank(), comm.size());
    return SplitModelTest::lead(std::move(whole), std::move(shard), comm);
  }
};

// Every step of a whole-model engine run, replayed through the split model's leader runner and
// through a whole-model runner on fresh pools: the logits agree within fp32 rounding of the split
// sums (f32), or within the 8-bit activation rounding those sums can flip (Q4_1).
TEST_P(TensorParallel, EveryStepsLogitsEqualTheWholeModels) {
  if (!lead(11)) return;
  const int p = world().size();
  const LlamaModel& shard = *part_;
  const LlamaModel whole(full_);
  EXPECT_EQ(shard.config().n_heads * p, whole.config().n_heads);
  EXPECT_LT(shard.weights().bytes(), whole.weights().bytes());

  // The plans of a whole-model engine run (paged, chunked, with preemptions).
  engine::Engine recorder(whole, tight_engine());
  for (engine::Request& r : requests_for(whole.config().vocab_size, 5)) recorder.add_request(r);
  std::vector<model::StepPlan> plans;
  while (recorder.step()) plans.push_back(recorder.last_plan());
  ASSERT_GT(recorder.stats().preemptions, 0) << "the pool is meant to be too small for every request";

  const engine::EngineConfig e = tight_engine();
  const KvPaging paging{e.block_size, e.num_blocks};
  auto split = engine::make_model_runner(shard, Backend::cpu, e.max_num_seqs, e.max_seq_len, paging);
  auto alone = engine::make_model_runner(whole, Backend::cpu, e.max_num_seqs, e.max_seq_len, paging);
  const double tolerance = GetParam() == WeightFormat::f32 ? 2e-5 : 2e-2;
  double worst = 0.0;
  for (size_t s = 0; s < plans.size(); ++s) {
    const Tensor<float> got = split->run(plans[s]), want = alone->run(plans[s]);
    ASSERT_EQ(got.shape(), want.shape()) << "step " << s;
    for (int64_t row = 0; row < want.shape()[0]; ++row) {
      double scale = 0.0, error = 0.0;
      for (int64_t v = 0; v < want.shape()[1]; ++v) {
        const int64_t i = row * want.shape()[1] + v;
        scale = std::max(scale, double(std::fabs(want[i])));
        error = std::max(error, double(std::fabs(got[i] - want[i])));
      }
      worst = std::max(worst, error / scale);
      ASSERT_LE(error, tolerance * scale) << "step " << s << ", logits row " << row << " on " << p << " ranks";
    }
  }
  std::cout << "[ tp=" << p << " " << to_string(GetParam()) << " ] " << plans.size()
            << " steps, worst logit error / max |logit| = " << worst << "\n";
}

// The engine over the split model (paging, chunked prefill, preemption) generates the whole
// model's greedy tokens.
TEST_P(TensorParallel, EngineGreedyTokensEqualTheWholeModels) {
  if (!lead(23)) return;
  const int p = world().size();
  const LlamaModel& shard = *part_;
  const LlamaModel whole(full_);
  const auto requests = requests_for(whole.config().vocab_size, 9);
  const engine::ServingRun split = engine::serve("tp", shard, tight_engine(), requests);
  const engine::ServingRun alone = engine::serve("tp1", whole, tight_engine(), requests);
  EXPECT_GT(split.stats.preemptions, 0);
  ASSERT_EQ(split.outputs.size(), alone.outputs.size());
  for (size_t i = 0; i < alone.outputs.size(); ++i)
    EXPECT_EQ(split.outputs[i].tokens, alone.outputs[i].tokens) << "request " << i << " on " << p << " ranks";
}

INSTANTIATE_TEST_SUITE_P(Formats, TensorParallel, ::testing::Values(WeightFormat::f32, WeightFormat::q4_1),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace inferlab
