// Pipeline parallelism over MPI (runtime/parallel/pipeline_parallel.h, rank_runner.h), run by
// mpiexec with 2, 3 or 4 ranks: every rank builds the same seeded model and keeps its stage of
// layers; rank 0 runs the engine and compares with the whole model, the others follow its steps.
//
// A 7-layer model: 2 stages hold 4 + 3 layers, 3 hold 3 + 2 + 2, 4 hold 2 + 2 + 2 + 1. The
// micro-batches run through the same batch-invariant forward as the whole step, so the logits
// must equal the whole model's bit for bit — no tolerance.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/engine/engine.h"
#include "runtime/engine/make_model_runner.h"
#include "runtime/engine/serving_run.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_runner.h"
#include "runtime/parallel/mpi_communicator.h"
#include "runtime/parallel/pipeline_parallel.h"
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

// A case: the weights' format, the micro-batches a step is cut into, a tied or separate head.
struct PipelineCase {
  WeightFormat format;
  int micro_batches;
  bool tied;
};

std::string case_name(const ::testing::TestParamInfo<PipelineCase>& info) {
  return std::string(to_string(info.param.format)) + "_m" + std::to_string(info.param.micro_batches) +
         (info.param.tied ? "_tied" : "_untied");
}

LlamaConfig pipeline_config(bool tied) {
  LlamaConfig c;
  c.dim = 64;
  c.head_dim_size = 32;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.hidden_dim = 160;
  c.n_layers = 7;
  c.vocab_size = 101;
  c.max_seq_len = 256;
  c.shared_classifier = tied;
  return c;
}

// The stage of a seeded model of the case (SplitModelTest: rank 0 tests).
class PipelineParallel : public SplitModelTest<PipelineCase> {
 protected:
  bool lead(uint64_t seed) {
    parallel::Communicator& comm = world();
    LlamaWeights whole = convert_weights(model::random_llama(pipeline_config(GetParam().tied), seed), GetParam().format);
    LlamaWeights stage = parallel::stage_weights(whole, comm.rank(), comm.size(), GetParam().micro_batches);
    return SplitModelTest::lead(std::move(whole), std::move(stage), comm);
  }
};

// Every step of a whole-model engine run, replayed through the pipeline's leader runner and
// through a whole-model runner on fresh pools: the same logits, bit for bit.
TEST_P(PipelineParallel, EveryStepsLogitsEqualTheWholeModelsBitForBit) {
  if (!lead(13)) return;
  const int p = world().size();
  const LlamaModel& stage = *part_;
  const LlamaModel whole(full_);
  EXPECT_EQ(stage.config().n_layers, parallel::pipeline_split(whole.config(), 0, p).layers);
  EXPECT_LT(stage.weights().bytes(), whole.weights().bytes());

  engine::Engine recorder(whole, tight_engine());
  for (engine::Request& r : requests_for(whole.config().vocab_size, 7)) recorder.add_request(r);
  std::vector<model::StepPlan> plans;
  while (recorder.step()) plans.push_back(recorder.last_plan());
  ASSERT_GT(recorder.stats().preemptions, 0) << "the pool is meant to be too small for every request";

  const engine::EngineConfig e = tight_engine();
  const KvPaging paging{e.block_size, e.num_blocks};
  auto pipeline = engine::make_model_runner(stage, Backend::cpu, e.max_num_seqs, e.max_seq_len, paging);
  auto alone = engine::make_model_runner(whole, Backend::cpu, e.max_num_seqs, e.max_seq_len, paging);
  for (size_t s = 0; s < plans.size(); ++s) {
    const Tensor<float> got = pipeline->run(plans[s]), want = alone->run(plans[s]);
    ASSERT_EQ(got.shape(), want.shape()) << "step " << s;
    for (int64_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "step " << s << ", logit " << i << " over " << p << " stages";
  }
  std::cout << "[ pp=" << p << " m=" << GetParam().micro_batches << " ] " << plans.size()
            << " steps, logits equal bit for bit\n";
}

// The engine over the pipeline (paging, chunked prefill, preemption) generates the whole model's
// greedy tokens.
TEST_P(PipelineParallel, EngineGreedyTokensEqualTheWholeModels) {
  if (!lead(29)) return;
  const int p = world().size();
  const LlamaModel whole(full_);
  const auto requests = requests_for(whole.config().vocab_size, 3);
  const engine::ServingRun pipeline = engine::serve("pp", *part_, tight_engine(), requests);
  const engine::ServingRun alone = engine::serve("pp1", whole, tight_engine(), requests);
  EXPECT_GT(pipeline.stats.preemptions, 0);
  ASSERT_EQ(pipeline.outputs.size(), alone.outputs.size());
  for (size_t i = 0; i < alone.outputs.size(); ++i)
    EXPECT_EQ(pipeline.outputs[i].tokens, alone.outputs[i].tokens) << "request " << i << " over " << p << " stages";
}

INSTANTIATE_TEST_SUITE_P(Cases, PipelineParallel,
                         ::testing::Values(PipelineCase{WeightFormat::f32, 4, true},
                                           PipelineCase{WeightFormat::q4_1, 1, false},
                                           PipelineCase{WeightFormat::q4_1, 3, true},
                                           PipelineCase{WeightFormat::q4_1, 3, false}),
                         case_name);

}  // namespace
}  // namespace inferlab
