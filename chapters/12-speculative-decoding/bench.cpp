// Chapter 12 benchmark: speculative decoding on SmolLM2-135M-Instruct (its Q4_1 GGUF) on this CPU.
//
// (a) The arithmetic first: T(n), the target's forward of n = 1 … 16 query tokens of one sequence
//     after 256 cached tokens (the prompt of chapters/12-speculative-decoding/data/prompts.json's
//     first entry, repeated), logits for every query token as verification needs them — the
//     medians of --repetitions calls, for the file's own weights (Q4_1 matrices, a Q8_0 head) and
//     for the file dequantized to f32 (the draft method's target). A decode step reads every
//     weight once whatever n is, so T(n) / T(1) stays near 1 while the step is memory-bound.
// (b) The engine on the prompts of data/prompts.json (input-grounded: quote or summarise a passage
//     of Alice, fix a code snippet; free chat), greedy, --max-new tokens, each prompt in the chat
//     template: plain decoding against speculative decoding with
//       ngram   prompt lookup (γ = --gamma, n-grams of 3 … 1) on the file's weights;
//       draft   the file's own Q4_1 weights drafting for the f32 target (γ = --gamma).
//     Batch 1 runs the prompts one at a time (--repetitions times, plain and speculative
//     alternating; the median of each is quoted), batches 4 and 16 run that many grounded
//     requests at once (prompts cycled, --batch-max-new tokens each, once). Throughput counts the
//     decode steps only (the steps that ran no prompt token): tokens they emitted / their wall
//     time. Every run checks that speculation left the greedy tokens unchanged.
//     From the counters: α (guesses accepted / guesses), the mean accepted length (tokens per
//     verification step), the share f of decode rows that had guesses and their mean count γ̄;
//     the predicted speed-up at batch 1 from those and T(n):
//         T(1) · [f·(ā + 1) + (1 − f)] / [f·(γ̄·T_draft + T(γ̄ + 1)) + (1 − f)·T(1)]
//     with ā the mean accepted guesses per verification, T_draft = 0 for prompt lookup and the
//     Q4_1 model's T(1) for the draft, T interpolated between whole n.
//     Before the runs, the n-gram's shortest length: α and the mean accepted length for
//     --prompt-lookup-min 1 and 2 (counts only).
//
//   ./inferlab bench ch12 --out docs/plots/ch12-speculative.json   (what the lesson's tables come from)
//   ./inferlab bench ch12 --quick                                    a smaller run (fewer tokens, one repetition)
//   ./inferlab bench ch12 --step-times-only                          (a) only
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/roofline.h"
#include "kernels/kv/kv_cache.h"
#include "runtime/engine/engine.h"
#include "runtime/gguf/gguf.h"
#include "runtime/model/llama_weights.h"
#include "runtime/model/model_files.h"
#include "runtime/tokenizer/bpe_tokenizer.h"
#include "runtime/tokenizer/vocabulary.h"

namespace {

using namespace inferlab;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// (a) T(n) for n = 1 … max_n: seconds per forward of n query tokens after `context` cached ones.
std::vector<double> step_times(const model::LlamaModel& m, const std::vector<int32_t>& context, int max_n, int reps) {
  const auto len = int64_t(context.size());
  KvCache cache(m.kv_shape(1, len + max_n), KvFormat::fp32());
  std::vector<int64_t> slots;
  for (int64_t t = 0; t < len; ++t) slots.push_back(cache.slot(0, t));
  model::StepPlan prefill;
  prefill.add_sequence(context, slots, len, {}, true);
  m.forward(prefill, cache);
  std::vector<double> out;
  for (int n = 1; n <= max_n; ++n) {
    model::StepPlan plan;
    slots.clear();
    for (int64_t t = len; t < len + n; ++t) slots.push_back(cache.slot(0, t));
    plan.add_sequence(std::span(context).first(size_t(n)), slots, len + n, {}, false);
    for (int64_t j = 0; j < n; ++j) plan.logits_indices.push_back(j);
    std::vector<double> seconds;
    for (int r = 0; r < reps + 1; ++r) {  // the first call warms up
      const auto t0 = Clock::now();
      m.forward(plan, cache);
      if (r > 0) seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    out.push_back(median(seconds));
  }
  return out;
}

double interpolate(const std::vector<double>& t, double n) {  // T at a fractional n (1-based)
  const double x = std::clamp(n, 1.0, double(t.size()));
  const auto lo = size_t(std::floor(x)), hi = std::min(lo + 1, t.size());
  return t[lo - 1] + (x - double(lo)) * (t[hi - 1] - t[lo - 1]);
}

struct Run {
  std::vector<std::vector<int32_t>> tokens;  // per request, in the order added
  int64_t decode_tokens = 0, decode_rows = 0;
  double decode_seconds = 0.0;
  engine::EngineStats stats;
  double tokens_per_second() const { return decode_seconds > 0 ? double(decode_tokens) / decode_seconds : 0.0; }
};

// The requests through one engine, all added at once; counts the decode-only steps.
Run run_engine(const model::LlamaModel& target, engine::EngineConfig config,
               const std::vector<engine::Request>& requests) {
  config.record_steps = true;
  engine::Engine e(target, config);
  for (const engine::Request& r : requests) e.add_request(r);
  Run run;
  run.tokens.resize(requests.size());
  while (true) {
    const auto t0 = Clock::now();
    const engine::StepOutput out = e.step();
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!out) break;
    int64_t emitted = 0;
    for (const engine::RequestDelta& d : out.deltas) {
      run.tokens[size_t(d.id)].insert(run.tokens[size_t(d.id)].end(), d.new_tokens.begin(), d.new_tokens.end());
      emitted += int64_t(d.new_tokens.size());
    }
    if (!e.steps().empty() && e.steps().back().prefill_tokens == 0 && emitted > 0) {
      run.decode_tokens += emitted;
      run.decode_seconds += seconds;
      run.decode_rows += int64_t(e.steps().back().ids.size());
    }
  }
  run.stats = e.stats();
  return run;
}

Json run_json(const Run& plain, const Run& spec, const std::vector<double>& t_target, double t_draft,
              bool batch_one) {
  const engine::EngineStats& s = spec.stats;
  const double drafts = double(std::max<int64_t>(1, s.spec_drafts));
  const double alpha = s.spec_draft_tokens ? double(s.spec_accepted_tokens) / double(s.spec_draft_tokens) : 0.0;
  const double accepted = double(s.spec_accepted_tokens) / drafts, gamma = double(s.spec_draft_tokens) / drafts;
  const double f = spec.decode_rows ? std::min(1.0, double(s.spec_drafts) / double(spec.decode_rows)) : 0.0;
  Json j{{"plain_tokens_per_s", plain.tokens_per_second()},
         {"spec_tokens_per_s", spec.tokens_per_second()},
         {"speedup", plain.tokens_per_second() > 0 ? spec.tokens_per_second() / plain.tokens_per_second() : 0.0},
         {"alpha", alpha},
         {"mean_accepted_length", accepted + 1.0},
         {"guessing_share", f},
         {"mean_guesses", gamma},
         {"same_tokens", plain.tokens == spec.tokens},
         {"decode_tokens", spec.decode_tokens}};
  if (batch_one) {
    const double t1 = t_target[0];
    const double cost = f * (gamma * t_draft + interpolate(t_target, gamma + 1.0)) + (1.0 - f) * t1;
    j["predicted_speedup"] = t1 * (f * (accepted + 1.0) + (1.0 - f)) / cost;
  }
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path, model_name = "smollm2";
  int reps = 3, gamma = 4;
  int64_t max_new = 96, batch_max_new = 48;
  bool step_times_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--out") out_path = value();
    else if (a == "--model") model_name = value();
    else if (a == "--repetitions") reps = std::stoi(value());
    else if (a == "--gamma") gamma = std::stoi(value());
    else if (a == "--max-new") max_new = std::stoll(value());
    else if (a == "--batch-max-new") batch_max_new = std::stoll(value());
    else if (a == "--quick") reps = 1, max_new = 32, batch_max_new = 16;
    else if (a == "--step-times-only") step_times_only = true;
    else if (a == "--help" || a == "-h") {
      std::cout << "usage: bench_ch12 [--out FILE.json] [--model smollm2|PATH] [--repetitions N] [--gamma N]\n"
                   "                  [--max-new N] [--batch-max-new N] [--quick] [--step-times-only]\n"
                   "Speculative decoding on the real model: T(n), then plain vs prompt lookup (ngram) and vs a\n"
                   "Q4_1 draft for an f32 target, at batch 1, 4 and 16 (see bench.cpp's header).\n";
      return 0;
    } else {
      std::cerr << "bench_ch12: unknown option " << a << " (--help)\n";
      return 2;
    }
  }
  try {
    const std::string path = model::resolve_model_path(model_name);
    const tokenizer::BpeTokenizer tok(tokenizer::vocabulary_from_gguf(gguf::GgufFile::open(path)));
    const model::LlamaModel file_model(model::load_model(path));
    const model::LlamaModel f32_model(model::load_model(path, WeightFormat::f32));

    std::ifstream prompts_file(std::string(INFERLAB_SOURCE_DIR) + "/chapters/12-speculative-decoding/data/prompts.json");
    const Json prompts = Json::parse(prompts_file);
    struct Prompt {
      std::string kind, task;
      std::vector<int32_t> ids;
    };
    std::vector<Prompt> all;
    for (const Json& p : prompts.at("prompts")) {
      const std::vector<tokenizer::ChatMessage> messages = {{"user", p.at("user").get<std::string>()}};
      all.push_back({p.at("kind"), p.at("task"), tok.encode_chat(messages, true)});
    }

    // (a) T(n).
    std::vector<int32_t> context;
    while (context.size() < 256 + 16) context.insert(context.end(), all[0].ids.begin(), all[0].ids.end());
    context.resize(256 + 16);
    const std::vector<int32_t> cached(context.begin(), context.begin() + 256);
    std::cerr << "T(n): the file's weights, then f32\n";
    const std::vector<double> t_file = step_times(file_model, cached, 16, std::max(reps, 5));
    const std::vector<double> t_f32 = step_times(f32_model, cached, 16, std::max(reps, 5));
    if (step_times_only) {
      std::cout << Json{{"step_times_s", {{"file", t_file}, {"f32", t_f32}}}}.dump(1) << "\n";
      return 0;
    }

    const auto request = [&](const Prompt& p, int64_t tokens) {
      engine::Request r;
      r.prompt = p.ids;
      r.sampling.max_new_tokens = tokens;
      r.sampling.stop_ids = tok.end_of_generation_ids();
      return r;
    };
    const auto config = [&](engine::SpeculativeMethod method) {
      engine::EngineConfig c;
      c.max_seq_len = 1024;
      c.num_blocks = 1024;
      c.max_num_batched_tokens = 512;
      c.chunk_size = 512;
      c.max_num_seqs = 16;
      c.speculative.method = method;
      c.speculative.num_speculative_tokens = gamma;
      if (method == engine::SpeculativeMethod::draft) c.speculative.draft_model = &file_model;
      return c;
    };
    struct Method {
      engine::SpeculativeMethod method;
      const model::LlamaModel* target;
      const char* target_weights;
      const std::vector<double>* t_target;
      double t_draft;
    };
    const Method methods[] = {{engine::SpeculativeMethod::ngram, &file_model, "file (Q4_1)", &t_file, 0.0},
                              {engine::SpeculativeMethod::draft, &f32_model, "f32", &t_f32, t_file[0]}};

    // The n-gram's shortest length: α and the mean accepted length (counts only, no timing) for
    // --prompt-lookup-min 1 and 2, each prompt alone on the file's weights.
    Json ngram_min_sweep = Json::array();
    for (const int64_t ngram_min : {1, 2})
      for (const std::string kind : {"grounded", "chat"}) {
        engine::EngineConfig c = config(engine::SpeculativeMethod::ngram);
        c.speculative.ngram_min = ngram_min;
        engine::EngineStats sum;
        for (const Prompt& p : all) {
          if (p.kind != kind) continue;
          const Run r = run_engine(file_model, c, {request(p, max_new)});
          sum.spec_drafts += r.stats.spec_drafts;
          sum.spec_draft_tokens += r.stats.spec_draft_tokens;
          sum.spec_accepted_tokens += r.stats.spec_accepted_tokens;
        }
        ngram_min_sweep.push_back(
            {{"ngram_min", ngram_min},
             {"prompts", kind},
             {"draft_tokens", sum.spec_draft_tokens},
             {"accepted_tokens", sum.spec_accepted_tokens},
             {"alpha", double(sum.spec_accepted_tokens) / double(std::max<int64_t>(1, sum.spec_draft_tokens))},
             {"mean_accepted_length",
              1.0 + double(sum.spec_accepted_tokens) / double(std::max<int64_t>(1, sum.spec_drafts))}});
        std::cerr << ngram_min_sweep.back().dump() << "\n";
      }

    Json runs = Json::array();
    for (const Method& m : methods) {
      for (const std::string kind : {"grounded", "chat"}) {
        // Batch 1: each prompt alone, plain and speculative alternating, --repetitions times.
        std::vector<Run> plain_reps, spec_reps;
        for (int r = 0; r < reps; ++r) {
          Run plain, spec;
          for (const Prompt& p : all) {
            if (p.kind != kind) continue;
            std::cerr << to_string(m.method) << " " << kind << " batch 1, repetition " << r + 1 << ": " << p.task
                      << "\n";
            const Run a = run_engine(*m.target, config(engine::SpeculativeMethod::none), {request(p, max_new)});
            const Run b = run_engine(*m.target, config(m.method), {request(p, max_new)});
            for (Run* sum : {&plain, &spec}) {
              const Run& x = sum == &plain ? a : b;
              sum->tokens.insert(sum->tokens.end(), x.tokens.begin(), x.tokens.end());
              sum->decode_tokens += x.decode_tokens;
              sum->decode_seconds += x.decode_seconds;
              sum->decode_rows += x.decode_rows;
              sum->stats.spec_drafts += x.stats.spec_drafts;
              sum->stats.spec_draft_tokens += x.stats.spec_draft_tokens;
              sum->stats.spec_accepted_tokens += x.stats.spec_accepted_tokens;
            }
          }
          plain_reps.push_back(std::move(plain));
          spec_reps.push_back(std::move(spec));
        }
        // The repetition whose speed-up is the median of the repetitions'.
        std::vector<size_t> order(plain_reps.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
          return spec_reps[x].tokens_per_second() / plain_reps[x].tokens_per_second() <
                 spec_reps[y].tokens_per_second() / plain_reps[y].tokens_per_second();
        });
        const size_t mid = order[order.size() / 2];
        Json j = run_json(plain_reps[mid], spec_reps[mid], *m.t_target, m.t_draft, true);
        j["method"] = to_string(m.method);
        j["target_weights"] = m.target_weights;
        j["prompts"] = kind;
        j["batch"] = 1;
        j["repetitions"] = reps;
        runs.push_back(j);
        std::cerr << j.dump() << "\n";
      }
      // Batches 4 and 16: grounded requests at once, prompts cycled.
      std::vector<const Prompt*> grounded;
      for (const Prompt& p : all)
        if (p.kind == "grounded") grounded.push_back(&p);
      for (const int batch : {4, 16}) {
        std::vector<engine::Request> requests;
        for (int i = 0; i < batch; ++i) requests.push_back(request(*grounded[size_t(i) % grounded.size()], batch_max_new));
        std::cerr << to_string(m.method) << " grounded batch " << batch << "\n";
        const Run plain = run_engine(*m.target, config(engine::SpeculativeMethod::none), requests);
        const Run spec = run_engine(*m.target, config(m.method), requests);
        Json j = run_json(plain, spec, *m.t_target, m.t_draft, false);
        j["method"] = to_string(m.method);
        j["target_weights"] = m.target_weights;
        j["prompts"] = "grounded";
        j["batch"] = batch;
        j["repetitions"] = 1;
        runs.push_back(j);
        std::cerr << j.dump() << "\n";
      }
    }
    Json doc{{"about", "Speculative decoding on SmolLM2-135M-Instruct: chapters/12-speculative-decoding/bench.cpp"},
             {"cpu", cpu_model_name()},
             {"model", path.substr(path.rfind('/') + 1)},
             {"gamma", gamma},
             {"max_new_tokens", max_new},
             {"batch_max_new_tokens", batch_max_new},
             {"context_for_step_times", 256},
             {"step_times_s", {{"file", t_file}, {"f32", t_f32}}},
             {"ngram_min_sweep", ngram_min_sweep},
             {"runs", runs}};
    if (out_path.empty()) {
      std::cout << doc.dump(1) << "\n";
    } else {
      std::ofstream(out_path) << doc.dump(1) << "\n";
      std::cerr << "wrote " << out_path << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "bench_ch12: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
