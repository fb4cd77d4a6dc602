// Rank 0 leads, the others follow (rank_runner.h). Every message is one broadcast_vector() from
// rank 0: its first byte says what follows — a pool ('S': rows, layers are the model's, max_seq_len,
// block size and count, the pipeline's micro-batches, the KV format's name), a plan ('P':
// encode_step_plan()) or the end ('E').
#include "runtime/parallel/rank_runner.h"

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/check.h"
#include "kernels/kv/kv_cache.h"
#include "runtime/collective/communicator.h"
#include "runtime/model/step_plan.h"

namespace inferlab::parallel {

using model::LlamaModel;
using model::StepPlan;

namespace {

enum Message : uint8_t { kPool = 'S', kPlan = 'P', kEnd = 'E' };

// A pool's geometry, as rank 0 sends it.
struct PoolMessage {
  int64_t rows = 0, max_seq_len = 0, block_size = 0, num_blocks = 0, micro_batches = 1;
  std::string kv_format;
};

std::vector<uint8_t> encode_pool(const KvCacheShape& shape, const KvPaging& paging, const KvFormat& format,
                                 int micro_batches) {
  const int64_t fields[5] = {shape.batch, shape.max_seq_len, paging.block_size, paging.num_blocks, micro_batches};
  const std::string name = format.name();
  std::vector<uint8_t> bytes(1 + sizeof fields + name.size());
  bytes[0] = kPool;
  std::memcpy(bytes.data() + 1, fields, sizeof fields);
  std::memcpy(bytes.data() + 1 + sizeof fields, name.data(), name.size());
  return bytes;
}

PoolMessage decode_pool(const std::vector<uint8_t>& bytes) {
  int64_t fields[5];
  require(bytes.size() > 1 + sizeof fields, "pool message", bytes.size(), "bytes: too short");
  std::memcpy(fields, bytes.data() + 1, sizeof fields);
  const char* name = reinterpret_cast<const char*>(bytes.data() + 1 + sizeof fields);
  return {fields[0], fields[1], fields[2], fields[3], fields[4], std::string(name, bytes.size() - 1 - sizeof fields)};
}

Communicator& communicator_of(const LlamaModel& model, bool leader) {
  const bool split = model.shard().split() || model.stage().split();
  require(split && model.communicator() != nullptr, "model", "the whole model",
          "must be a part of a model split over ranks (shard_weights(), stage_weights())");
  const int rank = model.communicator()->rank();
  require((rank == 0) == leader, "rank", rank,
          leader ? "must be 0: rank 0 leads the others" : "must not be 0: rank 0 leads the others");
  return *model.communicator();
}

// Rank 0's cpu runner: the plan to the others, then its own part (the cpu runner's forward).
class LeaderRunner final : public model::ModelRunner {
 public:
  LeaderRunner(const LlamaModel& model, const KvCacheShape& shape, const KvPaging& paging,
                       const KvFormat& kv_format)
      : ModelRunner(model, shape, paging, kv_format),
        comm_(communicator_of(model, true)),
        pool_(make_kv_storage(shape, kv_format, paging)) {
    std::vector<uint8_t> message = encode_pool(shape, paging, kv_format, model.stage().micro_batches);
    broadcast_vector(comm_, message, 0);
  }
  Backend backend() const override { return Backend::cpu; }

 private:
  Tensor<float> run_checked(const StepPlan& plan) override {
    std::vector<uint8_t> message = model::encode_step_plan(plan);
    message.insert(message.begin(), uint8_t(kPlan));
    broadcast_vector(comm_, message, 0);
    KvCache step(pool_, kv_shape(), paging());
    return model().forward_checked(plan, step);  // ModelRunner::run() has checked the plan
  }
  Communicator& comm_;
  KvStorage pool_;
};

}  // namespace

std::unique_ptr<model::ModelRunner> make_leader_runner(const LlamaModel& model, const KvCacheShape& shape,
                                                                const KvPaging& paging, const KvFormat& kv_format) {
  return std::make_unique<LeaderRunner>(model, shape, paging, kv_format);
}

void follow_leader_steps(const LlamaModel& model) {
  Communicator& comm = communicator_of(model, false);
  std::optional<KvStorage> pool;
  KvCacheShape shape{};
  KvPaging paging{};
  std::vector<uint8_t> message;
  for (;;) {
    broadcast_vector(comm, message, 0);
    require(!message.empty(), "message", "empty", "from rank 0: expected a pool, a plan or the end");
    if (message[0] == kEnd) return;
    if (message[0] == kPool) {
      const PoolMessage m = decode_pool(message);
      // Every stage must cut a step alike, or their sends and receives would not pair up.
      require(m.micro_batches == model.stage().micro_batches, "micro_batches", model.stage().micro_batches,
              "on rank " + std::to_string(comm.rank()) + ", but rank 0 cuts each step into " +
                  std::to_string(m.micro_batches) + ": every stage must be made with the same micro_batches");
      shape = model.kv_shape(m.rows, m.max_seq_len);
      paging = {m.block_size, m.num_blocks};
      pool.emplace(make_kv_storage(shape, parse_kv_format(m.kv_format), paging));
      continue;
    }
    require(message[0] == kPlan, "message kind", int(message[0]), "from rank 0: expected 'S', 'P' or 'E'");
    require(pool.has_value(), "plan", "before a pool", "rank 0 sends the pool's geometry first");
    const StepPlan plan = model::decode_step_plan(std::span(message).subspan(1));
    model.check(plan, shape, paging);
    KvCache step(*pool, shape, paging);
    model.forward_checked(plan, step);
  }
}

void end_leader_steps(const LlamaModel& model) {
  std::vector<uint8_t> message = {uint8_t(kEnd)};
  broadcast_vector(communicator_of(model, true), message, 0);
}

}  // namespace inferlab::parallel
