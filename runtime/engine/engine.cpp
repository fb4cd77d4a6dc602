// The serving engine (engine.h). One step:
//   1. arrivals whose time has come join the waiting queue;
//   2. plan: continuous — plan_step() (decodes, prompt chunks, admissions under the budgets);
//      static — admit a whole batch only when none is running, else decode it;
//   3. materialize the plan in order: a decode appends a slot (copy-on-write or a fresh block
//      when needed); when the pool is empty, preempt choose_victim()'s request (recompute: its
//      blocks are freed, it goes to the front of the waiting queue with all its tokens and
//      num_computed = 0) until the slot fits or the request itself was the victim; an admission
//      allocates its whole prompt's blocks (prefix-cache hits shared), or stops the admissions;
//   4. one forward over the flattened batch (rows in cache-row order), then sampling for every
//      sequence whose chunk reached its last token, and finishing.
#include "runtime/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include "common/check.h"
#include "runtime/engine/sampling.h"
#include "runtime/paged/paged_kv.h"

namespace inferlab::engine {

std::string_view to_string(BatchingPolicy policy) {
  return policy == BatchingPolicy::continuous ? "continuous" : "static";
}

void EngineConfig::validate() const {
  require_positive("max_num_seqs", max_num_seqs);
  require_positive("max_num_batched_tokens", max_num_batched_tokens);
  require_positive("chunk_size", chunk_size);
  require_positive("block_size", block_size);
  require_positive("num_blocks", num_blocks);
  require_positive("max_seq_len", max_seq_len);
  require(chunked_prefill || max_num_batched_tokens >= max_seq_len, "max_num_batched_tokens", max_num_batched_tokens,
          "must be ≥ max_seq_len = " + std::to_string(max_seq_len) +
              " without chunked prefill (a whole prompt must fit in one step)");
  require(headroom_blocks_per_seq >= 0, "headroom_blocks_per_seq", headroom_blocks_per_seq, "must be ≥ 0");
  require(simulated_fixed_seconds >= 0 && simulated_token_seconds >= 0, "simulated step seconds",
          simulated_fixed_seconds, "must be ≥ 0");
  if (policy == BatchingPolicy::static_batch)
    require((max_seq_len + block_size - 1) / block_size <= num_blocks, "num_blocks", num_blocks,
            "static batching reserves max_seq_len = " + std::to_string(max_seq_len) +
                " tokens per request: the pool must hold at least one");
}

namespace {

// Why a request whose generated tokens are @p tokens stops now (its newest token is a stop id, or
// it has max_new_tokens), or nullopt — the engine and generate_alone() stop by the same rule.
std::optional<FinishReason> finish_reason(const SamplingParams& sampling, const std::vector<int32_t>& tokens) {
  if (std::find(sampling.stop_ids.begin(), sampling.stop_ids.end(), tokens.back()) != sampling.stop_ids.end())
    return FinishReason::stop;
  if (int64_t(tokens.size()) >= sampling.max_new_tokens) return FinishReason::length;
  return std::nullopt;
}

EngineConfig validated(EngineConfig config, const model::LlamaModel& model) {
  config.validate();
  require(config.max_seq_len <= model.config().max_seq_len, "max_seq_len", config.max_seq_len,
          "exceeds the model's max_seq_len = " + std::to_string(model.config().max_seq_len));
  return config;
}

}  // namespace

Engine::Engine(const model::LlamaModel& model, EngineConfig config)
    : model_(model),
      config_(validated(config, model)),
      manager_(config_.num_blocks, config_.block_size, config_.prefix_caching),
      cache_(model.kv_shape(config_.max_num_seqs, config_.max_seq_len), KvDtype::fp32,
             KvPaging{config_.block_size, config_.num_blocks}),
      lengths_(size_t(config_.max_num_seqs), 0) {
  for (int64_t r = config_.max_num_seqs - 1; r >= 0; --r) free_rows_.push_back(r);
}

void Engine::add_request(Request request) {
  const int64_t id = request.id;
  require(!seen_.contains(id), "request id", id, "is already used by another request");
  require(!request.prompt.empty(), "request " + std::to_string(id) + " prompt.size()", 0, "must be ≥ 1");
  const int64_t vocab = model_.config().vocab_size;
  for (size_t i = 0; i < request.prompt.size(); ++i)  // the message is built only for a bad id
    if (request.prompt[i] < 0 || request.prompt[i] >= vocab)
      require(false, "request " + std::to_string(id) + " prompt[" + std::to_string(i) + "]", request.prompt[i],
              "must be a token id in [0, " + std::to_string(vocab) + ")");
  request.sampling.validate();
  const int64_t total = int64_t(request.prompt.size()) + request.sampling.max_new_tokens;
  require(total <= config_.max_seq_len, "request " + std::to_string(id) + " prompt + max_new_tokens", total,
          "exceeds max_seq_len = " + std::to_string(config_.max_seq_len));
  require(manager_.blocks_needed(total) <= config_.num_blocks, "request " + std::to_string(id) + " blocks needed",
          manager_.blocks_needed(total), "exceed the pool's " + std::to_string(config_.num_blocks) + " blocks");
  require(request.arrival >= 0.0, "request " + std::to_string(id) + " arrival", request.arrival, "must be ≥ 0");
  seen_.insert(id);
  Sequence s;
  s.tokens = request.prompt;
  s.rng_state = request.sampling.seed;
  s.output.id = id;
  s.output.prompt = request.prompt;
  s.output.metrics.arrival = request.arrival;
  s.request = std::move(request);
  pending_.emplace(s.request.arrival, id);
  sequences_.emplace(id, std::move(s));
}

void Engine::admit_arrivals() {
  while (!pending_.empty() && pending_.begin()->first <= now_) {
    waiting_.push_back(pending_.begin()->second);
    pending_.erase(pending_.begin());
  }
}

bool Engine::abort(int64_t id) {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) return false;
  for (auto p = pending_.begin(); p != pending_.end(); ++p)
    if (p->second == id) {
      pending_.erase(p);
      break;
    }
  std::erase(waiting_, id);
  finish(id, FinishReason::aborted);
  return true;
}

void Engine::release(Sequence& s) {
  if (s.row < 0) return;
  manager_.free(s.request.id);
  lengths_[size_t(s.row)] = 0;
  cache_.detach_sequence(s.row);  // no poisoning: its full blocks may stay in the prefix cache
  free_rows_.push_back(s.row);
  s.row = -1;
  s.num_computed = 0;  // the KV is gone: a preempted request recomputes everything
  std::erase(running_, s.request.id);
}

void Engine::finish(int64_t id, FinishReason reason) {
  Sequence& s = sequence(id);
  release(s);
  s.output.reason = reason;
  s.output.metrics.finish = now_;
  outputs_.push_back(std::move(s.output));
  sequences_.erase(id);
}

void Engine::preempt(int64_t id) {
  Sequence& s = sequence(id);
  release(s);
  ++s.output.metrics.preemptions;
  ++stats_.preemptions;
  waiting_.push_front(id);
}

std::vector<RequestOutput> Engine::take_outputs() { return std::exchange(outputs_, {}); }

// Step 2: the plan, as (id, tokens) in the order to materialize it.
std::vector<Engine::Planned> Engine::plan() {
  std::vector<Planned> out;
  if (config_.policy == BatchingPolicy::static_batch) {
    if (!running_.empty()) {
      for (const int64_t id : running_) out.push_back({id, 1, true});
      return out;
    }
    // A new batch: as many waiting requests as fit with max_seq_len reserved for each.
    const int64_t reserve = manager_.blocks_needed(config_.max_seq_len);
    for (const int64_t id : waiting_) {
      if (int64_t(out.size()) >= config_.max_num_seqs || int64_t(out.size() + 1) * reserve > config_.num_blocks) break;
      out.push_back({id, int64_t(sequence(id).tokens.size()), false});
    }
    return out;
  }
  std::vector<SequenceDemand> running, waiting;
  for (const int64_t id : running_) {
    const Sequence& s = sequence(id);
    running.push_back({id, int64_t(s.tokens.size()) - s.num_computed});
  }
  // Admissions stop at max_num_seqs: the planner never looks further down the queue.
  for (const int64_t id : waiting_) {
    if (int64_t(running.size() + waiting.size()) >= config_.max_num_seqs) break;
    waiting.push_back({id, int64_t(sequence(id).tokens.size())});
  }
  const StepLimits limits{config_.max_num_batched_tokens, config_.max_num_seqs, config_.chunk_size,
                          config_.chunked_prefill};
  for (const ScheduledChunk& c : plan_step(running, waiting, limits)) {
    const Sequence& s = sequence(c.id);
    // A decode needs a slot for its newest token; a prompt's last token (remaining 1 too) has one.
    out.push_back({c.id, c.tokens, s.row >= 0 && manager_.num_tokens(c.id) < int64_t(s.tokens.size())});
  }
  return out;
}

bool Engine::step() {
  const auto started = std::chrono::steady_clock::now();
  admit_arrivals();
  if (running_.empty() && waiting_.empty()) {
    if (pending_.empty()) return !sequences_.empty();
    now_ = std::max(now_, pending_.begin()->first);  // idle until the next arrival
    admit_arrivals();
  }

  std::vector<Planned> planned = plan();
  std::vector<Planned> batch;      // materialized, in plan order
  std::vector<int64_t> slots_of;   // decode slot per batch entry (−1: a chunk)
  int64_t preemptions = 0;
  bool admitting = true;
  std::set<int64_t> preempted;  // in this step: they wait for a later one
  for (const Planned& p : planned) {
    if (preempted.contains(p.id)) continue;
    Sequence& s = sequence(p.id);
    if (s.row >= 0 && p.decode) {
      // A decode: a slot for its last token, preempting the newest requests while the pool is full.
      while (!manager_.can_append(p.id)) {
        std::vector<VictimCandidate> candidates;
        for (const int64_t id : running_) {
          const Sequence& r = sequence(id);
          candidates.push_back({id, r.request.arrival, r.num_computed});
        }
        const int64_t victim = candidates[size_t(choose_victim(candidates))].id;
        for (size_t i = 0; i < batch.size(); ++i)
          if (batch[i].id == victim) {
            batch.erase(batch.begin() + int64_t(i));
            slots_of.erase(slots_of.begin() + int64_t(i));
            break;
          }
        preempt(victim);
        preempted.insert(victim);
        ++preemptions;
        if (victim == p.id) break;
      }
      if (s.row < 0) continue;  // it was the victim
      const paged::SlotAllocation a = manager_.append_slot(p.id, s.tokens.back());
      paged::apply_slot(cache_, s.row, manager_, p.id, a);
      batch.push_back(p);
      slots_of.push_back(a.slot);
    } else if (s.row >= 0) {
      batch.push_back(p);  // the next chunk of a prompt whose blocks are allocated
      slots_of.push_back(-1);
    } else if (admitting) {
      if (free_rows_.empty()) {
        admitting = false;
        continue;
      }
      // Headroom (continuous): after this prompt's blocks, one free block per running sequence.
      const int64_t headroom =
          config_.policy == BatchingPolicy::continuous && !running_.empty()
              ? config_.headroom_blocks_per_seq * (int64_t(running_.size()) + 1)
              : 0;
      if (manager_.num_free_blocks() - manager_.blocks_to_allocate(s.tokens) < headroom) {
        admitting = false;
        continue;
      }
      const paged::PromptAllocation a = manager_.allocate_prompt(p.id, s.tokens);
      if (a.status != paged::BlockStatus::ok) {
        admitting = false;  // first come, first served: no later request overtakes this one
        continue;
      }
      s.row = free_rows_.back();
      free_rows_.pop_back();
      paged::apply_prompt(cache_, s.row, manager_, p.id, a);
      s.num_computed = a.cached_tokens;
      stats_.prefix_hit_tokens += a.cached_tokens;
      if (!s.admitted_once) {
        s.admitted_once = true;
        s.output.metrics.cached_prompt_tokens = a.cached_tokens;
        stats_.prompt_tokens += int64_t(s.request.prompt.size());
      }
      std::erase(waiting_, p.id);
      running_.push_back(p.id);
      batch.push_back({p.id, std::min(p.tokens, int64_t(s.tokens.size()) - s.num_computed), false});
      slots_of.push_back(-1);
    }
  }
  if (batch.empty()) {
    if (running_.empty() && !waiting_.empty() && preemptions == 0)
      throw std::logic_error("Engine::step: nothing could run although the pool is free (request " +
                             std::to_string(waiting_.front()) + ")");
    return true;
  }
  run_batch(batch, slots_of, preemptions, started);
  return true;
}

void Engine::run_batch(const std::vector<Planned>& batch, const std::vector<int64_t>& slots_of, int64_t preemptions,
                       std::chrono::steady_clock::time_point started) {
  // The flattened batch, rows in increasing cache-row order (prefill_with_cache's contract).
  std::vector<size_t> order(batch.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return sequence(batch[a].id).row < sequence(batch[b].id).row; });
  model::ForwardBatch fb;
  fb.chunk_lengths.assign(size_t(config_.max_num_seqs), 0);
  std::vector<int64_t> sampled;  // batch entries that sample, in logits order
  StepRecord record;
  record.start = now_;
  for (const size_t i : order) {
    const Planned& p = batch[i];
    Sequence& s = sequence(p.id);
    const int64_t first = s.num_computed;
    for (int64_t t = first; t < first + p.tokens; ++t) {
      fb.tokens.push_back(s.tokens[size_t(t)]);
      fb.slots.push_back(slots_of[i] >= 0 ? slots_of[i] : cache_.slot(s.row, t));
    }
    fb.chunk_lengths[size_t(s.row)] = p.tokens;
    lengths_[size_t(s.row)] = first + p.tokens;
    if (first + p.tokens == int64_t(s.tokens.size())) {
      fb.logit_tokens.push_back(int64_t(fb.tokens.size()) - 1);
      sampled.push_back(int64_t(i));
    }
    (p.decode ? record.decode_tokens : record.prefill_tokens) += p.tokens;
    record.ids.push_back(p.id);
    if (s.output.metrics.first_scheduled < 0) s.output.metrics.first_scheduled = now_;
  }
  fb.lengths = lengths_;
  const Tensor<float> logits = model_.forward(fb, cache_);

  // Bookkeeping: computed tokens, the prefix cache, sampling.
  for (const size_t i : order) {
    const Planned& p = batch[i];
    Sequence& s = sequence(p.id);
    const int64_t first = s.num_computed;
    stats_.recomputed_tokens += std::max<int64_t>(0, std::min(s.high_water, first + p.tokens) - first);
    s.num_computed += p.tokens;
    s.high_water = std::max(s.high_water, s.num_computed);
    s.output.metrics.computed_tokens += p.tokens;
    stats_.computed_tokens += p.tokens;
    if (config_.prefix_caching) manager_.mark_computed(p.id, s.num_computed);
  }
  const double seconds =
      config_.clock == ClockMode::real
          ? std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()
          : config_.simulated_fixed_seconds + config_.simulated_token_seconds * double(fb.tokens.size());
  now_ += seconds;
  std::vector<std::pair<int64_t, FinishReason>> finished;
  for (size_t k = 0; k < sampled.size(); ++k) {
    const int64_t id = batch[size_t(sampled[k])].id;
    Sequence& s = sequence(id);
    const std::span<const float> row(logits.data() + int64_t(k) * logits.dim(1), size_t(logits.dim(1)));
    const int32_t token = choose_token(row, s.request.sampling, s.rng_state);
    s.tokens.push_back(token);
    s.output.tokens.push_back(token);
    s.output.metrics.token_times.push_back(now_);
    if (s.output.metrics.first_token < 0) s.output.metrics.first_token = now_;
    ++stats_.generated_tokens;
    if (const auto reason = finish_reason(s.request.sampling, s.output.tokens)) finished.push_back({id, *reason});
  }
  for (const auto& [id, reason] : finished) finish(id, reason);

  ++stats_.steps;
  stats_.busy_seconds += seconds;
  stats_.max_running = std::max(stats_.max_running, int64_t(running_.size() + finished.size()));
  if (config_.record_steps) {
    record.seconds = seconds;
    record.preemptions = preemptions;
    record.free_blocks = manager_.num_free_blocks();
    records_.push_back(std::move(record));
  }
  if (config_.check_invariants) manager_.check_invariants();
}

RequestOutput generate_alone(const model::LlamaModel& model, const Request& request) {
  request.sampling.validate();
  require(!request.prompt.empty(), "prompt.size()", 0, "must be ≥ 1");
  const int64_t total = int64_t(request.prompt.size()) + request.sampling.max_new_tokens;
  KvCache cache(model.kv_shape(1, total), KvDtype::fp32);
  RequestOutput out;
  out.id = request.id;
  out.prompt = request.prompt;
  uint64_t rng_state = request.sampling.seed;
  std::vector<int32_t> chunk = request.prompt;
  int64_t length = 0;
  while (true) {
    model::ForwardBatch fb;
    fb.tokens = chunk;
    fb.chunk_lengths = {int64_t(chunk.size())};
    fb.lengths = {length + int64_t(chunk.size())};
    for (int64_t t = length; t < fb.lengths[0]; ++t) fb.slots.push_back(cache.slot(0, t));
    fb.logit_tokens = {int64_t(chunk.size()) - 1};
    const Tensor<float> logits = model.forward(fb, cache);
    out.metrics.computed_tokens += int64_t(chunk.size());
    length = fb.lengths[0];
    const int32_t token = choose_token(logits.span(), request.sampling, rng_state);
    out.tokens.push_back(token);
    if (const auto reason = finish_reason(request.sampling, out.tokens)) {
      out.reason = *reason;
      break;
    }
    chunk = {token};
  }
  return out;
}

}  // namespace inferlab::engine
