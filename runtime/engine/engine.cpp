// The serving engine (engine.h): scheduler + model runner + loop. One step:
//   1. arrivals whose time has come join the waiting queue;
//   2. schedule, memory included: continuous — plan_step() (decodes, prompt chunks, admissions
//      under the budgets) over the sequences as the step starts; static — admit a whole batch
//      only when none is running, else decode it. The chunks are then walked once, in order,
//      each securing its memory before anything is written: a decode's newest token gets a slot
//      (copy-on-write or a fresh block when needed); while the pool cannot hold it,
//      choose_victim()'s request is preempted (recompute: its blocks are freed, it goes to the
//      front of the waiting queue with all its tokens and num_computed = 0; a victim's chunk is
//      not run, and its tokens of the budget are not handed to others — the decisions are those
//      of the plan made at the start of the step); an admission takes its whole prompt's blocks
//      (prefix-cache hits shared) or stops the admissions;
//   3. the StepPlan is written once from what survived (model/step_plan.h): packed tokens,
//      cu_seqlens_q, context lengths, block tables, slots, logits indices, block copies, fresh
//      blocks;
//   4. the model runner (model/model_runner.h: on the engine's backend, weights and KV pool
//      resident there) applies the plan to its pool and runs it; then
//      sampling for every sequence whose chunk reached its last token, the step's deltas, and
//      finishing.
#include "runtime/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include "common/ceil_div.h"
#include "common/check.h"
#include "runtime/engine/make_model_runner.h"
#include "runtime/engine/sampling.h"
#include "runtime/engine/speculative.h"

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
    require(ceil_div(max_seq_len, block_size) <= num_blocks, "num_blocks", num_blocks,
            "static batching reserves max_seq_len = " + std::to_string(max_seq_len) +
                " tokens per request: the pool must hold at least one");
  speculative.validate();
  require(!speculative.enabled() || policy == BatchingPolicy::continuous, "speculative method",
          to_string(speculative.method), "needs continuous batching");
  model::check_kv_format(kv_format);  // INT8 per-channel: refused (the backend's own limits: make_model_runner)
}

namespace {

// Why a request whose generated tokens are @p tokens stops now (its newest token is a stop id, or
// it has max_new_tokens), or nullopt — the engine and generate_alone() stop by the same rule.
std::optional<FinishReason> finish_reason(const SamplingParams& sampling, std::span<const int32_t> tokens) {
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

RequestOutput Sequence::output(FinishReason reason) const {
  RequestOutput out;
  out.id = request_id;
  out.index = choice;
  out.prompt.assign(prompt().begin(), prompt().end());
  out.tokens.assign(generated().begin(), generated().end());
  out.reason = reason;
  out.metrics = metrics;
  return out;
}

Engine::Engine(const model::LlamaModel& model, EngineConfig config)
    : model_(model),
      config_(validated(config, model)),
      manager_(config_.num_blocks, config_.block_size, config_.prefix_caching),
      runner_(make_model_runner(model, config_.backend, config_.max_num_seqs, config_.max_seq_len,
                                KvPaging{config_.block_size, config_.num_blocks}, config_.kv_format)),
      drafter_(make_drafter(config_.speculative, model, config_.backend, config_.max_num_seqs, config_.max_seq_len,
                            KvPaging{config_.block_size, config_.num_blocks})) {}

int64_t Engine::tokens_to_generate() const {
  int64_t tokens = 0;
  for (const auto& [id, s] : sequences_)
    if (s.status != SequenceStatus::finished) tokens += s.sampling.max_new_tokens - int64_t(s.generated().size());
  return tokens;
}

int64_t Engine::fewest_tokens_to_generate() const {
  int64_t fewest = 0;
  for (const auto& [id, s] : sequences_) {
    if (s.status != SequenceStatus::running) continue;
    const int64_t left = s.sampling.max_new_tokens - int64_t(s.generated().size());
    if (fewest == 0 || left < fewest) fewest = left;
  }
  return fewest;
}

int64_t Engine::add_request(Request request) {
  const int64_t id = next_id_;
  const std::string name = "request " + std::to_string(id);
  require(!request.prompt.empty(), name + " prompt.size()", 0, "must be ≥ 1");
  const int64_t vocab = model_.config().vocab_size;
  for (size_t i = 0; i < request.prompt.size(); ++i)  // the message is built only for a bad id
    if (request.prompt[i] < 0 || request.prompt[i] >= vocab)
      require(false, name + " prompt[" + std::to_string(i) + "]", request.prompt[i],
              "must be a token id in [0, " + std::to_string(vocab) + ")");
  request.sampling.validate();
  const int64_t total = int64_t(request.prompt.size()) + request.sampling.max_new_tokens;
  require(total <= config_.max_seq_len, name + " prompt + max_new_tokens", total,
          "exceeds max_seq_len = " + std::to_string(config_.max_seq_len));
  const int64_t n = request.sampling.n;
  require(n * manager_.blocks_needed(total) <= config_.num_blocks, name + " blocks needed",
          n * manager_.blocks_needed(total), "exceed the pool's " + std::to_string(config_.num_blocks) + " blocks");
  if (n > 1) {
    require(n <= config_.max_num_seqs, name + " n", n,
            "exceeds max_num_seqs = " + std::to_string(config_.max_num_seqs) + " (its choices run at once)");
    require(config_.policy == BatchingPolicy::continuous, name + " n", n,
            "needs continuous batching (a static batch does not grow when a request forks)");
  }
  require(request.arrival >= 0.0, name + " arrival", request.arrival, "must be ≥ 0");
  ++next_id_;
  Sequence s;
  s.id = id;
  s.request_id = id;
  s.prompt_len = int64_t(request.prompt.size());
  s.tokens = std::move(request.prompt);
  s.sampling = std::move(request.sampling);
  s.rng_state = s.sampling.seed;
  s.arrival = request.arrival;
  s.prefix_root = paged::prefix_root(request.cache_salt);
  s.metrics.arrival = request.arrival;
  pending_.emplace(s.arrival, id);
  sequences_.emplace(id, std::move(s));
  return id;
}

void Engine::admit_arrivals() {
  while (!pending_.empty() && pending_.begin()->first <= now_) {
    waiting_.push_back(pending_.begin()->second);
    pending_.erase(pending_.begin());
  }
}

bool Engine::abort(int64_t id, std::optional<int32_t> choice) {
  std::vector<int64_t> members;  // the request's sequences (its choices), or the one asked for
  for (const auto& [sid, s] : sequences_)
    if (s.request_id == id && (!choice || s.choice == *choice)) members.push_back(sid);
  if (members.empty()) return false;
  for (const int64_t sid : members) {
    for (auto p = pending_.begin(); p != pending_.end(); ++p)
      if (p->second == sid) {
        pending_.erase(p);
        break;
      }
    std::erase(waiting_, sid);
    aborted_.push_back(finish(sid, FinishReason::aborted));
  }
  return true;
}

int64_t Engine::fork_choice(Sequence& parent, int32_t choice) {
  Sequence c;
  c.id = next_choice_id_++;
  c.request_id = parent.request_id;
  c.choice = choice;
  c.tokens = parent.tokens;
  c.prompt_len = parent.prompt_len;
  c.num_computed = parent.num_computed;
  c.block_table = manager_.fork(parent.block_table);  // shares every block; copy-on-write later
  c.prefix_root = parent.prefix_root;
  c.status = SequenceStatus::running;
  c.sampling = parent.sampling;
  c.rng_state = choice_seed(parent.sampling.seed, choice);
  c.arrival = parent.arrival;
  c.metrics.arrival = parent.metrics.arrival;
  c.metrics.first_scheduled = parent.metrics.first_scheduled;
  c.metrics.cached_prompt_tokens = parent.metrics.cached_prompt_tokens;
  c.admitted_once = true;
  c.high_water = parent.num_computed;
  const int64_t id = c.id;
  running_.push_back(id);
  sequences_.emplace(id, std::move(c));
  return id;
}

int64_t Engine::running_seats() const {
  int64_t seats = 0;
  for (const int64_t id : running_) seats += sequences_.at(id).seats();
  return seats;
}

void Engine::release(Sequence& s) {
  if (s.status != SequenceStatus::running) return;
  manager_.free(s.block_table);  // no poisoning: its full blocks may stay in the prefix cache
  if (drafter_) drafter_->forget(s.id);
  s.num_computed = 0;            // the KV is gone: a preempted request recomputes everything
  s.status = SequenceStatus::waiting;
  std::erase(running_, s.id);
}

RequestDelta Engine::finish(int64_t id, FinishReason reason) {
  Sequence& s = sequence(id);
  release(s);
  s.status = SequenceStatus::finished;
  s.metrics.finish = now_;
  if (config_.keep_outputs) outputs_.push_back(s.output(reason));
  const RequestDelta delta{s.request_id, s.choice, {}, {}, reason, s.metrics};
  sequences_.erase(id);
  return delta;
}

void Engine::preempt(int64_t id) {
  Sequence& s = sequence(id);
  release(s);
  ++s.metrics.preemptions;
  ++stats_.preemptions;
  waiting_.push_front(id);
}

std::vector<RequestOutput> Engine::take_outputs() {
  return std::exchange(outputs_, {});
}

// Step 2: what runs, each entry with its memory secured, in plan order: the chunks chosen, then
// their memory.
std::vector<Engine::Scheduled> Engine::schedule(int64_t& preemptions) {
  std::map<int64_t, Draft> drafts = propose_drafts();
  int64_t guesses = 0;
  for (const auto& [id, d] : drafts) guesses += int64_t(d.tokens.size());
  return secure_memory(choose_chunks(guesses), drafts, preemptions);
}

// Step 2 with speculative decoding, first: the guesses of each decoding sequence, in running
// order, from the token budget left after one token per decode (so decodes and their guesses
// come before any prompt chunk), each at most num_speculative_tokens and never more than the
// request could still use (max_new_tokens − generated − 1: the verified step adds one more).
std::map<int64_t, Draft> Engine::propose_drafts() {
  std::map<int64_t, Draft> drafts;
  if (!drafter_) return drafts;
  const auto decoding = [&](const Sequence& s) { return int64_t(s.tokens.size()) - s.num_computed == 1; };
  int64_t left = config_.max_num_batched_tokens;
  for (const int64_t id : running_) left -= decoding(sequence(id)) ? 1 : 0;
  std::vector<DraftRequest> requests;
  for (const int64_t id : running_) {
    Sequence& s = sequence(id);
    if (!decoding(s)) continue;
    const int64_t wanted = std::min({config_.speculative.num_speculative_tokens,
                                     s.sampling.max_new_tokens - int64_t(s.generated().size()) - 1, left});
    if (wanted < 1) continue;
    requests.push_back({id, s.tokens, wanted, &s.sampling, &s.rng_state});
    left -= wanted;
  }
  if (requests.empty()) return drafts;
  std::vector<Draft> proposed = drafter_->propose(requests);
  for (size_t i = 0; i < requests.size(); ++i)
    if (!proposed[i].tokens.empty()) drafts.emplace(requests[i].id, std::move(proposed[i]));
  return drafts;
}

// Step 2a: the chunks, as (id, tokens) over the sequences as the step starts — a static batch's,
// or the continuous planner's (plan_step()) over the running and the admissible waiting.
std::vector<ScheduledChunk> Engine::choose_chunks(int64_t guesses) const {
  std::vector<ScheduledChunk> chunks;
  if (config_.policy == BatchingPolicy::static_batch) {
    if (!running_.empty()) {
      for (const int64_t id : running_) chunks.push_back({id, 1});
    } else {
      // A new batch: as many waiting requests as fit with max_seq_len reserved for each.
      const int64_t reserve = manager_.blocks_needed(config_.max_seq_len);
      for (const int64_t id : waiting_) {
        if (int64_t(chunks.size()) >= config_.max_num_seqs || int64_t(chunks.size() + 1) * reserve > config_.num_blocks)
          break;
        chunks.push_back({id, int64_t(sequence(id).tokens.size())});
      }
    }
  } else {
    std::vector<SequenceDemand> running, waiting;
    for (const int64_t id : running_) {
      const Sequence& s = sequence(id);
      running.push_back({id, int64_t(s.tokens.size()) - s.num_computed});
    }
    // Admissions stop at max_num_seqs places (a request of n choices takes n): the planner never
    // looks further down the queue.
    int64_t seats = running_seats();
    for (const int64_t id : waiting_) {
      if (seats + sequence(id).seats() > config_.max_num_seqs) break;
      seats += sequence(id).seats();
      waiting.push_back({id, int64_t(sequence(id).tokens.size())});
    }
    // The guesses were taken from the budget left after the decodes: what they leave is the planner's.
    const StepLimits limits{config_.max_num_batched_tokens - guesses, config_.max_num_seqs, config_.chunk_size,
                            config_.chunked_prefill};
    chunks = plan_step(running, waiting, limits);
  }
  return chunks;
}

// Step 2b: each chunk's KV memory — a decode's slot (preempting the newest requests while the pool
// is full: choose_victim()), a prompt's blocks at admission (first come, first served, with
// headroom) — in plan order.
std::vector<Engine::Scheduled> Engine::secure_memory(const std::vector<ScheduledChunk>& chunks,
                                                     std::map<int64_t, Draft>& drafts, int64_t& preemptions) {
  std::vector<Scheduled> out;
  std::set<int64_t> preempted;  // in this step
  bool admitting = true;
  int64_t decodes_left = 0;  // decodes not yet secured (guesses leave a free block for each)
  for (const ScheduledChunk& c : chunks) {
    const Sequence& s = sequence(c.id);
    decodes_left += s.status == SequenceStatus::running && s.block_table.num_tokens < int64_t(s.tokens.size());
  }
  for (const ScheduledChunk& c : chunks) {
    if (preempted.contains(c.id)) continue;  // it waits for a later step
    Sequence& s = sequence(c.id);
    if (s.status == SequenceStatus::running && s.block_table.num_tokens < int64_t(s.tokens.size())) {
      // A decode: a slot for its newest token, preempting the newest requests while the pool is full.
      while (!manager_.can_append(s.block_table)) {
        std::vector<VictimCandidate> candidates;
        for (const int64_t id : running_) {
          const Sequence& r = sequence(id);
          candidates.push_back({id, r.arrival, r.num_computed});
        }
        const int64_t victim = candidates[size_t(choose_victim(candidates))].id;
        preempt(victim);
        preempted.insert(victim);
        ++preemptions;
        if (victim == c.id) break;
      }
      --decodes_left;
      if (s.status != SequenceStatus::running) continue;  // it was the victim
      const paged::SlotAllocation a = manager_.append_slot(s.block_table, s.tokens);
      Scheduled entry{c.id, c.tokens, true, {}, {}, {}};
      if (a.copy) entry.copies.push_back(*a.copy);
      if (a.new_block && !a.copy) entry.fresh.push_back(*a.new_block);
      if (const auto d = drafts.find(c.id); d != drafts.end()) append_guesses(s, std::move(d->second), decodes_left, entry);
      out.push_back(std::move(entry));
    } else if (s.status == SequenceStatus::running) {
      out.push_back({c.id, c.tokens, false, {}, {}, {}});  // the next chunk of a prompt whose blocks are allocated
    } else if (admitting) {
      const int64_t seats = running_seats();
      if (seats + s.seats() > config_.max_num_seqs) {
        admitting = false;
        continue;
      }
      // Headroom (continuous): after this prompt's blocks, one free block per running sequence
      // (a request of n choices counts n: each copies the shared last block at its first write).
      const int64_t headroom = config_.policy == BatchingPolicy::continuous && (!running_.empty() || s.seats() > 1)
                                   ? config_.headroom_blocks_per_seq * (seats + s.seats())
                                   : 0;
      if (manager_.num_free_blocks() - manager_.blocks_to_allocate(s.tokens, s.prefix_root) < headroom) {
        admitting = false;
        continue;
      }
      const paged::PromptAllocation a = manager_.allocate(s.block_table, s.tokens, s.prefix_root);
      if (a.status != paged::BlockStatus::ok) {
        admitting = false;  // first come, first served: no later request overtakes this one
        continue;
      }
      s.status = SequenceStatus::running;
      s.num_computed = a.cached_tokens;
      stats_.prefix_hit_tokens += a.cached_tokens;
      if (!s.admitted_once) {
        s.admitted_once = true;
        s.metrics.cached_prompt_tokens = a.cached_tokens;
        stats_.prompt_tokens += s.prompt_len;
      }
      std::erase(waiting_, c.id);
      running_.push_back(c.id);
      out.push_back({c.id, std::min(c.tokens, int64_t(s.tokens.size()) - s.num_computed), false, {}, a.new_blocks, {}});
    }
  }
  return out;  // a victim chosen after its own entry was secured is no longer running: not written
}
// A slot after the decode's newest token for each of @p draft's guesses that the pool can hold
// while keeping a free block for each of the @p decodes_after decodes still to be secured (a
// guess never preempts anyone); the guesses that got one ride in @p entry.
void Engine::append_guesses(Sequence& s, Draft draft, int64_t decodes_after, Scheduled& entry) {
  std::vector<int32_t> known = s.tokens;
  size_t kept = 0;
  for (; kept < draft.tokens.size(); ++kept) {
    if (!manager_.can_append(s.block_table) || manager_.num_free_blocks() <= decodes_after) break;
    known.push_back(draft.tokens[kept]);
    const paged::SlotAllocation a = manager_.append_slot(s.block_table, known);
    if (a.copy) entry.copies.push_back(*a.copy);
    if (a.new_block && !a.copy) entry.fresh.push_back(*a.new_block);
  }
  draft.tokens.resize(kept);
  draft.q.resize(kept);
  entry.tokens += int64_t(kept);
  entry.draft = std::move(draft);
}

// Step 3: the plan, written once from the scheduled entries whose sequences still run.
void Engine::write_plan(const std::vector<Scheduled>& scheduled) {
  plan_ = model::StepPlan{};
  std::vector<int64_t> slots;
  for (const Scheduled& e : scheduled) {
    const Sequence& s = sequence(e.id);
    if (s.status != SequenceStatus::running) continue;  // preempted after its entry was secured
    const int64_t first = s.num_computed, context = first + e.tokens;
    slots.clear();
    for (int64_t t = first; t < context; ++t) slots.push_back(manager_.slot(s.block_table, t));
    if (e.draft.tokens.empty()) {
      plan_.add_sequence(std::span<const int32_t>(s.tokens).subspan(size_t(first), size_t(e.tokens)), slots, context,
                         s.block_table.blocks, context == int64_t(s.tokens.size()));
    } else {  // the newest token and the guesses, every one's logits wanted (verify())
      std::vector<int32_t> run(s.tokens.begin() + first, s.tokens.end());
      run.insert(run.end(), e.draft.tokens.begin(), e.draft.tokens.end());
      const auto from = int64_t(plan_.token_ids.size());
      plan_.add_sequence(run, slots, context, s.block_table.blocks, false);
      for (int64_t j = 0; j < e.tokens; ++j) plan_.logits_indices.push_back(from + j);
    }
    plan_.block_copies.insert(plan_.block_copies.end(), e.copies.begin(), e.copies.end());
    plan_.fresh_blocks.insert(plan_.fresh_blocks.end(), e.fresh.begin(), e.fresh.end());
  }
}

StepOutput Engine::step() {
  StepOutput out;
  out.deltas = std::exchange(aborted_, {});
  const auto started = std::chrono::steady_clock::now();
  admit_arrivals();
  if (running_.empty() && waiting_.empty()) {
    out.more = !sequences_.empty();
    if (pending_.empty()) return out;
    now_ = std::max(now_, pending_.begin()->first);  // idle until the next arrival
    admit_arrivals();
  }
  out.more = true;
  int64_t preemptions = 0;
  const std::vector<Scheduled> scheduled = schedule(preemptions);
  write_plan(scheduled);
  if (plan_.num_seqs() == 0) {
    if (running_.empty() && !waiting_.empty() && preemptions == 0)
      throw std::logic_error("Engine::step: nothing could run although the pool is free (request " +
                             std::to_string(waiting_.front()) + ")");
    return out;
  }
  run_plan(scheduled, preemptions, started, out.deltas);
  return out;
}

void Engine::run_plan(const std::vector<Scheduled>& scheduled, int64_t preemptions,
                      std::chrono::steady_clock::time_point started, std::vector<RequestDelta>& deltas) {
  StepRecord record;
  record.start = now_;
  std::vector<const Scheduled*> ran;  // the plan's sequences, in plan order
  for (const Scheduled& e : scheduled) {
    Sequence& s = sequence(e.id);
    if (s.status != SequenceStatus::running) continue;
    ran.push_back(&e);
    (e.decode ? record.decode_tokens : record.prefill_tokens) += e.tokens;
    record.ids.push_back(e.id);
    if (s.metrics.first_scheduled < 0) s.metrics.first_scheduled = now_;
  }
  const Tensor<float> logits = runner_->run(plan_);

  // Bookkeeping: computed tokens, the prefix cache; who samples, from which logits row.
  std::vector<std::pair<const Scheduled*, int64_t>> sampled;  // (entry, its first logits row)
  int64_t row = 0;
  for (size_t i = 0; i < ran.size(); ++i) {
    const Scheduled& e = *ran[i];
    Sequence& s = sequence(e.id);
    const int64_t first = s.num_computed, tokens = plan_.query_len(int64_t(i));
    if (config_.check_invariants &&
        (plan_.context_lens[i] != first + tokens || plan_.block_tables[i] != s.block_table.blocks))
      throw std::logic_error("Engine: the plan's sequence " + std::to_string(i) + " (request " + std::to_string(s.id) +
                             ") disagrees with the request's table or computed tokens");
    stats_.recomputed_tokens += std::max<int64_t>(0, std::min(s.high_water, first + tokens) - first);
    s.metrics.computed_tokens += tokens;
    stats_.computed_tokens += tokens;
    if (!e.draft.tokens.empty()) {  // verified below: what stays computed depends on what is accepted
      sampled.push_back({&e, row});
      row += tokens;
      continue;
    }
    s.num_computed += tokens;
    s.high_water = std::max(s.high_water, s.num_computed);
    if (config_.prefix_caching) manager_.mark_computed(s.block_table, s.num_computed);
    if (s.num_computed == int64_t(s.tokens.size())) sampled.push_back({&e, row++});
  }
  const double seconds =
      config_.clock == ClockMode::real
          ? std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()
          : config_.simulated_fixed_seconds + config_.simulated_token_seconds * double(plan_.token_ids.size());
  now_ += seconds;
  const int64_t vocab = logits.dim(1);
  std::vector<std::pair<int64_t, size_t>> finished;  // (sequence, its finish delta)
  for (const auto& [entry, first_row] : sampled) {
    Sequence& s = sequence(entry->id);
    const std::span<const float> rows(logits.data() + first_row * vocab,
                                      size_t((int64_t(entry->draft.tokens.size()) + 1) * vocab));
    if (!entry->draft.tokens.empty()) {
      RequestDelta delta{s.request_id, s.choice, {}, {}, std::nullopt, {}};
      verify(s, *entry, rows, vocab, delta);
      if (delta.finish) finished.push_back({s.id, deltas.size()});
      deltas.push_back(std::move(delta));
      continue;
    }
    // A request of n choices forks here, its prompt computed once: each choice samples its
    // first token from these logits with its own stream.
    std::vector<int64_t> members = {s.id};
    if (s.choice == 0 && s.sampling.n > 1 && s.generated().empty())
      for (int32_t i = 1; i < s.sampling.n; ++i) members.push_back(fork_choice(s, i));
    for (const int64_t member : members) {
      Sequence& m = sequence(member);
      const int32_t token = choose_token(rows, m.sampling, m.rng_state);
      m.tokens.push_back(token);
      m.metrics.token_times.push_back(now_);
      if (m.metrics.first_token < 0) m.metrics.first_token = now_;
      ++stats_.generated_tokens;
      RequestDelta delta{m.request_id, m.choice, {token}, {}, finish_reason(m.sampling, m.generated()), {}};
      if (m.sampling.logprobs >= 0) delta.logprobs.push_back(token_logprobs(rows, token, m.sampling.logprobs));
      if (delta.finish) finished.push_back({m.id, deltas.size()});
      deltas.push_back(std::move(delta));
    }
  }
  for (const auto& [id, k] : finished) deltas[k].metrics = finish(id, *deltas[k].finish).metrics;

  ++stats_.steps;
  stats_.busy_seconds += seconds;
  stats_.max_running = std::max(stats_.max_running, int64_t(running_.size() + finished.size()));
  if (config_.record_steps) {
    record.seconds = seconds;
    record.preemptions = preemptions;
    record.free_blocks = manager_.num_free_blocks();
    records_.push_back(std::move(record));
  }
  if (config_.check_invariants) check_state();
}

// Speculative decoding's verification of @p s's guesses (@p entry.draft) against the target's
// @p rows (one per query token: the newest token, then each guess): the accepted guesses and the
// target's next token join the sequence (cut at a stop id or max_new_tokens, as one token at a
// time would), the K/V of every token but the newest new one stays, and the slots past it are
// rolled back — the table truncated, the drafter told — before any full block is registered in
// the prefix cache.
void Engine::verify(Sequence& s, const Scheduled& entry, std::span<const float> rows, int64_t vocab,
                    RequestDelta& delta) {
  const std::vector<int32_t>& guesses = entry.draft.tokens;
  Verification v;
  if (s.sampling.greedy()) {
    v = verify_greedy(rows, vocab, guesses);
  } else {
    std::vector<std::vector<double>> p;
    for (size_t i = 0; i <= guesses.size(); ++i)
      p.push_back(sampling_distribution(rows.subspan(i * size_t(vocab), size_t(vocab)), s.sampling));
    v = verify_rejection(p, entry.draft.q, guesses, s.rng_state);
  }
  ++stats_.spec_drafts;
  stats_.spec_draft_tokens += int64_t(guesses.size());
  stats_.spec_accepted_tokens += v.accepted;
  if (stats_.spec_accepted_per_position.size() < guesses.size()) stats_.spec_accepted_per_position.resize(guesses.size());
  for (int64_t i = 0; i < v.accepted; ++i) ++stats_.spec_accepted_per_position[size_t(i)];
  for (size_t j = 0; j < v.tokens.size() && !delta.finish; ++j) {
    const int32_t token = v.tokens[j];
    s.tokens.push_back(token);
    s.metrics.token_times.push_back(now_);
    ++stats_.generated_tokens;
    delta.new_tokens.push_back(token);
    if (s.sampling.logprobs >= 0)
      delta.logprobs.push_back(token_logprobs(rows.subspan(j * size_t(vocab), size_t(vocab)), token, s.sampling.logprobs));
    delta.finish = finish_reason(s.sampling, s.generated());
  }
  // Every token but the newest has its K/V computed from the right tokens: the newest decode
  // token and the accepted guesses. The rejected guesses' slots go.
  s.num_computed = int64_t(s.tokens.size()) - 1;
  s.high_water = std::max(s.high_water, s.num_computed);
  manager_.truncate(s.block_table, s.num_computed);
  if (config_.prefix_caching) manager_.mark_computed(s.block_table, s.num_computed);
  drafter_->rollback(s.id, s.num_computed);
}

// The invariants of check_invariants mode: the plan agrees with the sequences it was written
// from (while they still hold the step's blocks), and the block manager's hold over the live
// tables.
void Engine::check_state() const {
  std::vector<paged::SequenceBlocks> live;
  for (const int64_t id : running_) {
    const Sequence& s = sequence(id);
    if (s.status != SequenceStatus::running)
      throw std::logic_error("Engine: request " + std::to_string(id) + " is in the running list but not running");
    live.push_back({id, &s.block_table, s.tokens});
  }
  for (const auto& [id, s] : sequences_)
    if (s.status != SequenceStatus::running && !s.block_table.empty())
      throw std::logic_error("Engine: request " + std::to_string(id) + " holds blocks but is not running");
  manager_.check_invariants(live);
}

RequestOutput generate_alone(const model::LlamaModel& model, const Request& request, const KvFormat& kv_format) {
  request.sampling.validate();
  require(!request.prompt.empty(), "prompt.size()", 0, "must be ≥ 1");
  model::check_kv_format(kv_format);
  const int64_t total = int64_t(request.prompt.size()) + request.sampling.max_new_tokens;
  KvCache cache(model.kv_shape(1, total), kv_format);
  RequestOutput out;
  out.id = request.id;
  out.prompt = request.prompt;
  uint64_t rng_state = request.sampling.seed;
  std::vector<int32_t> chunk = request.prompt;
  int64_t length = 0;
  std::vector<int64_t> slots;
  while (true) {
    model::StepPlan plan;
    slots.clear();
    for (int64_t t = length; t < length + int64_t(chunk.size()); ++t) slots.push_back(cache.slot(0, t));
    length += int64_t(chunk.size());
    plan.add_sequence(chunk, slots, length, {}, true);
    const Tensor<float> logits = model.forward(plan, cache);
    out.metrics.computed_tokens += int64_t(chunk.size());
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
