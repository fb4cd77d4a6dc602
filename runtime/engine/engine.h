#pragma once
/// @file engine.h
/// The serving engine of chapter 07 = scheduler + model runner + loop. Each request is one
/// Sequence (sequence.h) that the scheduler owns; each step the scheduler plans the tokens to
/// run (step_planner.h: running decodes first, then prompt chunks, under a token budget and a
/// sequence budget), secures their KV memory from chapter 06's pool (runtime/paged) while
/// planning — preempting when the pool cannot hold a decode's slot — and writes the step once
/// into a StepPlan (runtime/model/step_plan.h) that the model runner (model_runner.h: the
/// weights and the KV pool on the engine's backend — cpu, or resident on sim and cuda) applies
/// to its pool and runs; then it samples and reports the step's deltas. Two policies
/// share everything:
///  - **continuous** (iteration-level scheduling, Orca, with paging as vLLM): a request joins at
///    any step and leaves as soon as it is done; the batch is bounded by the memory actually
///    used; prompts can be chunked (Sarathi);
///  - **static** (the baseline): a batch is formed only when the previous one has finished
///    entirely, each request reserving max_seq_len tokens of blocks up front; its prompts run
///    whole in the first step.
///
/// Guarantees, tested in tests/07-continuous-batching: the pool running out preempts (recompute)
/// rather than failing; every request finishes or is aborted exactly once; the pool is entirely
/// free when the engine is empty; with greedy sampling each request's tokens equal those of the
/// request run alone on a contiguous cache of the same KV format (generate_alone()), under any
/// batch, chunking, block size, preemption or prefix-cache hit — the model's kernels are
/// batch-invariant, and a quantized KV format quantizes each token's rows on their own.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "common/backend.h"
#include "runtime/engine/drafter.h"
#include "runtime/engine/request.h"
#include "runtime/engine/sequence.h"
#include "runtime/engine/step_planner.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_runner.h"
#include "runtime/paged/block_manager.h"

namespace inferlab::engine {

/// How requests are batched.
enum class BatchingPolicy {
  continuous,    ///< iteration-level: join and leave at every step
  static_batch,  ///< fixed batches, max-length reservation, wait for all
};

/// "continuous", "static".
std::string_view to_string(BatchingPolicy policy);

/// How the engine's clock advances.
enum class ClockMode {
  real,       ///< each step takes its measured wall time; idle gaps before an arrival are skipped
  simulated,  ///< each step takes EngineConfig::simulated_step(): deterministic, for tests
};

/// The engine's settings.
struct EngineConfig {
  BatchingPolicy policy = BatchingPolicy::continuous;  ///< how requests are batched
  int64_t max_num_seqs = 16;                           ///< sequences in the running batch (the rows of a step)
  int64_t max_num_batched_tokens = 256;                ///< token budget of one step
  int64_t chunk_size = 256;                            ///< most prompt tokens of one sequence per step
  bool chunked_prefill = true;                         ///< cut long prompts into chunks (continuous only)
  int64_t block_size = 16;                             ///< tokens per KV block
  int64_t num_blocks = 256;                            ///< blocks in the pool: the KV memory
  bool prefix_caching = true;                          ///< share computed full prompt blocks between requests
  /// Continuous admissions leave this many free blocks per running sequence (the new one
  /// included) after taking a prompt's blocks: room for the running requests to grow into their
  /// next block before anyone must be preempted. 0 admits while the prompt fits (and preempts
  /// as soon as decodes need blocks — thrashing when memory is tight).
  int64_t headroom_blocks_per_seq = 1;
  int64_t max_seq_len = 512;          ///< most tokens of one request (prompt + generated)
  ClockMode clock = ClockMode::real;  ///< how time advances
  /// Simulated clock: seconds per step = fixed + per_token · tokens in the step.
  double simulated_fixed_seconds = 1e-3;
  double simulated_token_seconds = 1e-4;  ///< see simulated_fixed_seconds
  bool record_steps = false;              ///< keep a StepRecord per step (for plots)
  /// After each step: the block manager's invariants over the live sequences' tables, and the
  /// step plan's agreement with the sequences it was written from (the forward checks that every
  /// plan is well formed in any mode: check_step_plan()).
  bool check_invariants = false;
  /// Keep each finished request's whole output for take_outputs() (the offline callers:
  /// engine::serve(), generate, chat). A server reads the deltas only — their finish carries the
  /// timings — and turns this off: nothing accumulates (AsyncEngine).
  bool keep_outputs = true;
  /// Where the model runs: cpu (the batch-invariant CPU forward), sim (the CUDA kernels on the
  /// emulator) or cuda (a GPU); on sim and cuda the weights and the KV pool stay on the device.
  Backend backend = Backend::cpu;
  /// How the KV pool stores K and V (kv_format.h; parse_kv_format() reads the names): fp32 (the
  /// default), or on the cpu backend fp16, INT8 with per-token K scales (KvFormat::int8(), fp32
  /// scales; "int8/fp16-scales") or FP8 E4M3 (KvFormat::fp8()) — a quarter of fp32's bytes per
  /// element plus a scale per row. Each token's rows are quantized on their own as they are
  /// written, so the guarantees above hold within a format: greedy tokens equal
  /// generate_alone(model, request, kv_format). Refused with std::invalid_argument naming
  /// "kv_format": INT8 per-channel K scales, by validate() (model::check_kv_format() says why),
  /// and any format but fp32 on sim and cuda, when the engine builds its model runner
  /// (make_model_runner(): their device pool is fp32).
  KvFormat kv_format = KvFormat::fp32();
  /// Speculative decoding (chapter 12, continuous batching only): each decoding sequence brings
  /// its newest token and up to num_speculative_tokens guesses (drafter.h) to a step, counted in
  /// the token budget before the prompt chunks; the target verifies them in that step
  /// (speculative.h: greedy tokens unchanged, sampled ones drawn from the target's distribution),
  /// and the K/V slots of rejected guesses are rolled back (BlockManager::truncate). Guesses
  /// never preempt anyone: they take slots only while the pool keeps a free block for every
  /// decode still to be secured in the step.
  SpeculativeConfig speculative;

  /// Throws std::invalid_argument naming a bad setting.
  void validate() const;
};

/// What one step did (kept when EngineConfig::record_steps).
struct StepRecord {
  double start = 0.0;          ///< when it began, on the engine's clock
  double seconds = 0.0;        ///< how long it took on that clock
  int64_t decode_tokens = 0;   ///< sequences that decoded one token
  int64_t prefill_tokens = 0;  ///< prompt (or recomputed) tokens
  int64_t preemptions = 0;     ///< requests preempted while planning it
  int64_t free_blocks = 0;     ///< after the step
  std::vector<int64_t> ids;    ///< the requests that ran, in batch order
};

/// Counters over the engine's life.
struct EngineStats {
  int64_t steps = 0;              ///< forward calls
  int64_t preemptions = 0;        ///< requests preempted (each recomputes its tokens)
  int64_t recomputed_tokens = 0;  ///< tokens computed again after a preemption
  int64_t prefix_hit_tokens = 0;  ///< prompt tokens served by the prefix cache
  int64_t prompt_tokens = 0;      ///< prompt tokens admitted (first admission of each request)
  int64_t generated_tokens = 0;   ///< tokens sampled
  int64_t computed_tokens = 0;    ///< tokens run through the model
  int64_t max_running = 0;        ///< largest running batch
  double busy_seconds = 0.0;      ///< clock time spent in steps
  /// Speculative decoding: verification steps of a sequence with at least one guess (vLLM's
  /// spec_decode_num_drafts).
  int64_t spec_drafts = 0;
  int64_t spec_draft_tokens = 0;     ///< guesses verified (spec_decode_num_draft_tokens)
  int64_t spec_accepted_tokens = 0;  ///< guesses accepted (spec_decode_num_accepted_tokens)
  /// [i]: guesses accepted at position i of their draft (…_num_accepted_tokens_per_pos).
  std::vector<int64_t> spec_accepted_per_position;
};

/// What Engine::step() did: whether the engine had anything to do, and the step's deltas.
struct StepOutput {
  bool more = false;  ///< false: the engine was empty (nothing pending, waiting or running)
  /// Per request that produced something — tokens, or its finish — in this step, in plan order;
  /// the aborts since the previous step come first.
  std::vector<RequestDelta> deltas;
  /// The value of `more`, so that `while (engine.step())` runs the engine dry.
  explicit operator bool() const { return more; }
};

/// The engine: a model, a paged KV cache over a block pool, the sequences and a scheduler.
class Engine {
 public:
  /// An engine serving @p model (kept by reference: it must outlive the engine) with @p config.
  /// Throws std::invalid_argument for a bad config (max_seq_len above the model's, …) or a
  /// backend not available here (cuda without a GPU).
  Engine(const model::LlamaModel& model, EngineConfig config);

  /// Queues @p request and returns its id: 0, 1, 2, … in the order requests were added (never
  /// reused; request.id, a caller's label, is not read). It may run from its arrival time on.
  /// Throws std::invalid_argument (and queues nothing, using no id) for an empty prompt, a
  /// token outside the vocabulary, bad sampling parameters, or a request that can never fit:
  /// prompt + max_new_tokens above max_seq_len, or more blocks than the whole pool.
  int64_t add_request(Request request);

  /// Aborts request @p id wherever it is (arrival pending, waiting, running): its blocks are
  /// freed now and it leaves with FinishReason::aborted: its output is in outputs() now, and the
  /// next step()'s deltas report the abort (once). Returns false when no such request is in the
  /// engine (unknown, or already finished). Every choice of the request leaves, or only
  /// @p choice when given.
  bool abort(int64_t id, std::optional<int32_t> choice = std::nullopt);

  /// Runs one step: admits arrivals, plans with memory (preempting when needed), runs the model
  /// on the plan and samples. When nothing can run before the next arrival, moves the clock
  /// there instead. Returns the step's deltas; its `more` is false when the engine was empty
  /// (nothing pending, waiting or running).
  StepOutput step();

  /// Steps until every request has left. @p progress, if set, is called after each step.
  template <class Progress>
  void run(Progress&& progress) {
    while (step()) progress(*this);
  }
  /// Steps until every request has left.
  void run() {
    while (step()) {
    }
  }

  /// Requests that left (finished or aborted), in the order they left; moved out.
  std::vector<RequestOutput> take_outputs();
  /// Requests that left so far, read-only.
  const std::vector<RequestOutput>& outputs() const { return outputs_; }

  /// True when no request is pending, waiting or running.
  bool empty() const { return sequences_.empty(); }
  /// Requests running now.
  int64_t num_running() const { return int64_t(running_.size()); }
  /// Requests waiting (arrived, not running).
  int64_t num_waiting() const { return int64_t(waiting_.size()); }
  /// Tokens the requests in the engine may still generate: Σ (max_new_tokens − generated) over
  /// the pending, waiting and running ones — the queued work, an upper bound (a stop id ends one
  /// early).
  int64_t tokens_to_generate() const;
  /// The fewest tokens any running request may still generate (max_new_tokens − generated): the
  /// steps, at most, before a running request leaves and frees its place. 0 when none runs.
  int64_t fewest_tokens_to_generate() const;
  /// The clock, in seconds since the engine started.
  double now() const { return now_; }
  /// Counters.
  const EngineStats& stats() const { return stats_; }
  /// The per-step records (EngineConfig::record_steps).
  const std::vector<StepRecord>& steps() const { return records_; }
  /// The settings.
  const EngineConfig& config() const { return config_; }
  /// The block manager (refcounts, prefix cache, free blocks), read-only.
  const paged::BlockManager& blocks() const { return manager_; }
  /// The sequences in the engine (pending, waiting, running), by id, read-only.
  const std::map<int64_t, Sequence>& sequences() const { return sequences_; }
  /// The last step's plan (the model runner's input), read-only.
  const model::StepPlan& last_plan() const { return plan_; }
  /// The model runner (its backend, its KV pool's geometry), read-only.
  const model::ModelRunner& runner() const { return *runner_; }

 private:
  // One entry of a step, decided with its memory: the tokens [num_computed, + tokens) of id.
  struct Scheduled {
    int64_t id = 0, tokens = 0;
    bool decode = false;                   // its newest (sampled) token got a slot in this step
    std::vector<paged::BlockCopy> copies;  // the block operations its allocation asked for
    std::vector<int32_t> fresh;
    Draft draft;                           // its guesses, each with a slot after its newest token
  };

  void admit_arrivals();
  std::vector<Scheduled> schedule(int64_t& preemptions);
  std::map<int64_t, Draft> propose_drafts();
  std::vector<ScheduledChunk> choose_chunks(int64_t guesses) const;
  std::vector<Scheduled> secure_memory(const std::vector<ScheduledChunk>& chunks, std::map<int64_t, Draft>& drafts,
                                       int64_t& preemptions);
  void append_guesses(Sequence& s, Draft draft, int64_t decodes_after, Scheduled& entry);
  void verify(Sequence& s, const Scheduled& entry, std::span<const float> rows, int64_t vocab, RequestDelta& delta);
  void write_plan(const std::vector<Scheduled>& scheduled);
  void preempt(int64_t id);
  void release(Sequence& s);
  RequestDelta finish(int64_t id, FinishReason reason);
  int64_t fork_choice(Sequence& parent, int32_t choice);
  int64_t running_seats() const;
  void run_plan(const std::vector<Scheduled>& scheduled, int64_t preemptions,
                std::chrono::steady_clock::time_point started, std::vector<RequestDelta>& deltas);
  void check_state() const;
  Sequence& sequence(int64_t id) { return sequences_.at(id); }
  const Sequence& sequence(int64_t id) const { return sequences_.at(id); }

  const model::LlamaModel& model_;
  EngineConfig config_;
  paged::BlockManager manager_;
  std::unique_ptr<model::ModelRunner> runner_;  // the weights and the KV pool, on config_.backend
  std::unique_ptr<Drafter> drafter_;            // speculative decoding's guesser (none: nullptr)
  std::map<int64_t, Sequence> sequences_;   // every request in the engine: its one state
  std::multimap<double, int64_t> pending_;  // not yet arrived: arrival → id
  std::deque<int64_t> waiting_;             // arrived, not running (preempted ones in front)
  std::vector<int64_t> running_;            // admission order
  int64_t next_id_ = 0;                     // the next add_request()'s id
  int64_t next_choice_id_ = int64_t(1) << 48;  // the next forked choice's id (apart: add_request's stay 0, 1, 2, …)
  model::StepPlan plan_;                    // the last step's plan
  std::vector<RequestDelta> aborted_;       // aborts not yet reported by a step
  std::vector<RequestOutput> outputs_;
  std::vector<StepRecord> records_;
  EngineStats stats_;
  double now_ = 0.0;
};

/// Runs @p request alone: a contiguous KV cache of one sequence in @p kv_format (fp32 by
/// default; an engine with EngineConfig::kv_format is compared with the same format), the whole
/// prompt in one forward, then one decode step per token, sampled as the engine samples (same
/// seed, same stream) — the reference every batched run must reproduce. Metrics carry only the
/// token count. Throws std::invalid_argument for an empty prompt, bad sampling parameters or a
/// format the forward refuses (model::check_kv_format(), naming "kv_format").
RequestOutput generate_alone(const model::LlamaModel& model, const Request& request,
                             const KvFormat& kv_format = KvFormat::fp32());

}  // namespace inferlab::engine
