// Tensor parallelism over MPI (runtime/parallel/tensor_parallel.h, tp_runner.h), run by mpiexec
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
#include "runtime/engine/serving_run.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_runner.h"
#include "runtime/parallel/mpi_communicator.h"
#include "runtime/parallel/tensor_parallel.h"
#include "runtime/parallel/tp_runner.h"

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

// Rank 0 releases the followers when the test's scope ends, even on a failed ASSERT.
struct Release {
  const LlamaModel& shard;
  ~Release() {
    if (shard.shard().rank == 0) parallel::end_tensor_parallel_steps(shard);
  }
};

// Requests that page, chunk and preempt: prompts of odd lengths, a pool too small for all.
std::vector<engine::Request> requests_for(int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<engine::Request> requests;
  for (const int64_t length : {37, 5, 61, 18, 90, 1}) {
    engine::Request r;
    for (int64_t i = 0; i < length; ++i) r.prompt.push_back(int32_t(rng.integer(0, vocab - 1)));
    r.sampling.max_new_tokens = 24;
    requests.push_back(r);
  }
  return requests;
}

engine::EngineConfig tight_engine() {
  engine::EngineConfig e;
  e.max_num_seqs = 4;
  e.block_size = 8;
  e.num_blocks = 20;  // 160 tokens for 4 sequences of up to 114: preemption
  e.max_num_batched_tokens = 48;
  e.chunk_size = 24;
  e.max_seq_len = 256;
  e.check_invariants = true;
  return e;
}

class TensorParallel : public ::testing::TestWithParam<WeightFormat> {};

// Every step of a whole-model engine run, replayed through the split model's leader runner and
// through a whole-model runner on fresh pools: the logits agree within fp32 rounding of the split
// sums (f32), or within the 8-bit activation rounding those sums can flip (Q4_1).
TEST_P(TensorParallel, EveryStepsLogitsEqualTheWholeModels) {
  parallel::Communicator& comm = world();
  const int p = comm.size();
  const LlamaWeights full = convert_weights(model::random_llama(config_for(p), 11), GetParam());
  const LlamaModel shard(parallel::shard_weights(full, comm.rank(), p), &comm);
  if (comm.rank() != 0) {
    parallel::follow_tensor_parallel_steps(shard);
    return;
  }
  const Release release{shard};
  const LlamaModel whole(full);
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
  auto split = model::make_model_runner(shard, Backend::cpu, e.max_num_seqs, e.max_seq_len, paging);
  auto alone = model::make_model_runner(whole, Backend::cpu, e.max_num_seqs, e.max_seq_len, paging);
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
  parallel::Communicator& comm = world();
  const int p = comm.size();
  const LlamaWeights full = convert_weights(model::random_llama(config_for(p), 23), GetParam());
  const LlamaModel shard(parallel::shard_weights(full, comm.rank(), p), &comm);
  if (comm.rank() != 0) {
    parallel::follow_tensor_parallel_steps(shard);
    return;
  }
  const Release release{shard};
  const LlamaModel whole(full);
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
