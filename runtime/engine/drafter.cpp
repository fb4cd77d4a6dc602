#include "runtime/engine/drafter.h"

#include <stdexcept>
#include <string>

#include "common/check.h"
#include "runtime/engine/make_model_runner.h"
#include "runtime/engine/sampling.h"
#include "runtime/engine/speculative.h"

namespace inferlab::engine {

std::string_view to_string(SpeculativeMethod method) {
  switch (method) {
    case SpeculativeMethod::none: return "none";
    case SpeculativeMethod::ngram: return "ngram";
    case SpeculativeMethod::draft: return "draft";
  }
  return "?";
}

SpeculativeMethod parse_speculative_method(std::string_view name) {
  for (const SpeculativeMethod m : {SpeculativeMethod::none, SpeculativeMethod::ngram, SpeculativeMethod::draft})
    if (name == to_string(m)) return m;
  throw std::invalid_argument("speculative method '" + std::string(name) + "': unknown (known: none, ngram, draft)");
}

void SpeculativeConfig::validate() const {
  if (!enabled()) return;
  require_positive("num_speculative_tokens", num_speculative_tokens);
  require(ngram_min >= 1, "ngram_min", ngram_min, "must be ≥ 1");
  require(ngram_max >= ngram_min, "ngram_max", ngram_max, "must be ≥ ngram_min = " + std::to_string(ngram_min));
  require(method != SpeculativeMethod::draft || draft_model != nullptr, "draft_model", "none",
          "is needed by the speculative method draft");
}

namespace {

// Prompt lookup: stateless, deterministic guesses.
class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(const SpeculativeConfig& config) : config_(config) {}

  std::vector<Draft> propose(std::span<const DraftRequest> requests) override {
    std::vector<Draft> out(requests.size());
    for (size_t r = 0; r < requests.size(); ++r) {
      out[r].tokens = propose_ngram(requests[r].tokens, requests[r].num_tokens, config_.ngram_max, config_.ngram_min);
      out[r].q.resize(out[r].tokens.size());  // empty rows: deterministic guesses
    }
    return out;
  }
  void rollback(int64_t, int64_t) override {}
  void forget(int64_t) override {}

 private:
  SpeculativeConfig config_;
};

// A draft model with a paged K/V pool of its own (see drafter.h).
class ModelDrafter final : public Drafter {
 public:
  ModelDrafter(const model::LlamaModel& draft, Backend backend, int64_t rows, int64_t max_seq_len,
               const KvPaging& paging)
      : manager_(paging.num_blocks, paging.block_size, /*prefix_caching=*/false),
        runner_(make_model_runner(draft, backend, rows, max_seq_len, paging)) {}

  std::vector<Draft> propose(std::span<const DraftRequest> requests) override {
    std::vector<Draft> out(requests.size());
    std::vector<std::vector<int32_t>> known(requests.size());  // tokens, then the guesses so far
    std::vector<bool> dropped(requests.size(), false);
    for (size_t r = 0; r < requests.size(); ++r) {
      known[r].assign(requests[r].tokens.begin(), requests[r].tokens.end());
      paged::BlockTable& table = tables_[requests[r].id];
      const int64_t behind = int64_t(known[r].size()) - 1;  // its K/V may cover every token but the last
      if (table.num_tokens > behind) manager_.truncate(table, behind);
    }
    std::vector<int64_t> slots;
    while (true) {  // one run of the draft model per guess, all the sequences still guessing batched
      model::StepPlan plan;
      std::vector<size_t> members;
      for (size_t r = 0; r < requests.size(); ++r) {
        if (dropped[r] || int64_t(out[r].tokens.size()) >= requests[r].num_tokens) continue;
        paged::BlockTable& table = tables_[requests[r].id];
        const int64_t first = table.num_tokens, context = int64_t(known[r].size());
        slots.clear();
        std::vector<int32_t> fresh;
        for (int64_t t = first; t < context && !dropped[r]; ++t) {
          if (!manager_.can_append(table)) {
            dropped[r] = true;  // the draft pool is full: this sequence guesses nothing more now
            break;
          }
          const paged::SlotAllocation a =
              manager_.append_slot(table, std::span<const int32_t>(known[r]).first(size_t(t + 1)));
          slots.push_back(a.slot);
          if (a.new_block) fresh.push_back(*a.new_block);
        }
        if (dropped[r]) {
          forget(requests[r].id);
          out[r].tokens.clear();
          out[r].q.clear();
          continue;
        }
        plan.add_sequence(std::span<const int32_t>(known[r]).subspan(size_t(first)), slots, context, table.blocks,
                          true);
        plan.fresh_blocks.insert(plan.fresh_blocks.end(), fresh.begin(), fresh.end());
        members.push_back(r);
      }
      if (members.empty()) break;
      const Tensor<float> logits = runner_->run(plan);
      const int64_t vocab = logits.dim(1);
      for (size_t k = 0; k < members.size(); ++k) {
        const size_t r = members[k];
        const std::span<const float> row(logits.data() + int64_t(k) * vocab, size_t(vocab));
        const SamplingParams& sampling = *requests[r].sampling;
        if (sampling.greedy()) {
          out[r].tokens.push_back(greedy_token(row));
          out[r].q.emplace_back();
        } else {
          std::vector<double> q = sampling_distribution(row, sampling);
          out[r].tokens.push_back(sample_distribution(q, next_uniform(*requests[r].rng_state)));
          out[r].q.push_back(std::move(q));
        }
        known[r].push_back(out[r].tokens.back());
      }
    }
    return out;
  }

  void rollback(int64_t id, int64_t num_tokens) override {
    const auto it = tables_.find(id);
    if (it != tables_.end() && it->second.num_tokens > num_tokens) manager_.truncate(it->second, num_tokens);
  }

  void forget(int64_t id) override {
    const auto it = tables_.find(id);
    if (it == tables_.end()) return;
    manager_.free(it->second);
    tables_.erase(it);
  }

 private:
  paged::BlockManager manager_;
  std::unique_ptr<model::ModelRunner> runner_;
  std::map<int64_t, paged::BlockTable> tables_;  // per sequence: the draft's blocks; num_tokens = tokens with K/V
};

}  // namespace

std::unique_ptr<Drafter> make_drafter(const SpeculativeConfig& config, const model::LlamaModel& target,
                                      Backend backend, int64_t max_num_seqs, int64_t max_seq_len,
                                      const KvPaging& paging) {
  config.validate();
  switch (config.method) {
    case SpeculativeMethod::none: return nullptr;
    case SpeculativeMethod::ngram: return std::make_unique<NgramDrafter>(config);
    case SpeculativeMethod::draft: {
      const int64_t draft_vocab = config.draft_model->config().vocab_size, vocab = target.config().vocab_size;
      require(draft_vocab == vocab, "draft_model vocab_size", draft_vocab,
              "must be the target's vocab_size = " + std::to_string(vocab) + " (draft and target share a tokenizer)");
      return std::make_unique<ModelDrafter>(*config.draft_model, backend, max_num_seqs, max_seq_len, paging);
    }
  }
  return nullptr;
}

}  // namespace inferlab::engine
