// `inferlab generate` (chapters 07 and 08): text generation on a Llama model — one prompt, as
// token ids (run alone, or through the engine) or as text through the model's tokenizer
// (streamed through the engine as it is generated, optionally in the model's chat template), or
// a JSON-lines trace of requests replayed through the serving engine with per-request metrics
// written as JSON.
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/backend.h"
#include "common/check.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/metrics.h"
#include "runtime/engine/serving_run.h"
#include "runtime/engine/trace.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_files.h"
#include "runtime/parallel/rank_runner.h"
#include "runtime/tokenizer/bpe_tokenizer.h"
#include "tools/cli/command_line.h"
#include "tools/cli/commands.h"
#include "tools/cli/draft_model.h"
#include "tools/cli/engine_options.h"
#include "tools/cli/model_tokenizer.h"
#include "tools/cli/ranks.h"
#include "tools/cli/sampling_options.h"
#include "tools/cli/streamed_reply.h"
#include "tools/cli/text_stream.h"
#include "tools/cli/token_ids.h"

namespace inferlab::cli {
namespace {

// What `inferlab generate` reads from its command line: its own options, and the shared tables'.
struct GenerateOptions {
  std::string model;
  std::optional<std::string> prompt, system, prompt_ids, trace, out;
  bool chat = false, ids = false, engine = false;
  std::optional<WeightFormat> weights;
  SamplingOptions sampling;
  EngineOptions engine_options;
  RankSplit split;
};

// The option table of `inferlab generate`, bound to @p o.
void add_generate_options(CLI::App& app, GenerateOptions& o) {
  app.add_option("--model", o.model,
                 "smollm2 (models/SmolLM2-135M-Instruct.Q4_1.gguf, installed by ./inferlab setup), a GGUF file, "
                 "models/stories260K.bin (a llama2.c checkpoint) or random:<preset>[,key=value…] (presets tiny, "
                 "stories260K, bench; keys dim, hidden, layers, heads, kv_heads, vocab, seq_len, seed, tied)")
      ->type_name("M")
      ->required();
  app.add_option("--prompt", o.prompt,
                 "the prompt as text, tokenized with the model's tokenizer (a GGUF model's; special tokens such as "
                 "<|im_start|> written in TEXT are those tokens): prints the generated TEXT as it is generated "
                 "(through the engine), then a summary line on stderr — prompt tokens, tokens reused from the prefix "
                 "cache, generated tokens (finish reason), prefill and decode tokens/s. Stops at the model's "
                 "end-of-generation ids (SmolLM2: <|im_end|>, <|endoftext|>) unless --stop-ids says otherwise; the "
                 "stop token is not printed")
      ->type_name("TEXT");
  app.add_flag("--chat", o.chat,
               "with --prompt: TEXT is a user message, wrapped in the model's chat template (ChatML; SmolLM2's adds "
               "its default system message when --system is not given)");
  app.add_option("--system", o.system, "with --chat: the system message")->type_name("TEXT");
  app.add_option("--prompt-ids", o.prompt_ids,
                 "the prompt as comma- or space-separated token ids (1 = BOS for llama2.c models): prints the "
                 "generated ids (no stop ids unless --stop-ids)")
      ->type_name("IDS");
  app.add_flag("--ids", o.ids, "print only the generated ids (a stop id included), space-separated, on one line");
  app.add_option("--trace", o.trace,
                 "replay a JSON-lines request file through the serving engine (one object per line: arrival, "
                 "prompt_ids or prompt_len, max_new_tokens[, id, temperature, top_p, seed, stop_ids])")
      ->type_name("FILE");
  app.add_option("--out", o.out, "with --trace: write per-request metrics as JSON")
      ->type_name("FILE")
      ->default_str("stdout");
  app.add_flag("--engine", o.engine,
               "run --prompt-ids through the serving engine (--prompt and --trace always do; so do a backend other "
               "than cpu and a split model)");
  add_weights_option(app, o.weights);
  add_sampling_options(app, o.sampling);
  add_engine_options(app, o.engine_options);
  add_split_options(app, o.split);
}

// The prompt's ids: --prompt-ids, each checked against the vocabulary.
std::vector<int32_t> prompt_ids(const GenerateOptions& o, const model::LlamaModel& m) {
  std::vector<int32_t> ids = token_id_list("prompt-ids", *o.prompt_ids);
  for (const int32_t id : ids)
    require(id < m.config().vocab_size, "--prompt-ids", id,
            "is not a token id of this model (vocab " + std::to_string(m.config().vocab_size) + ")");
  return ids;
}

// The text the model is prompted with: --prompt as given, or wrapped in the chat template with --chat.
std::string prompt_text(const GenerateOptions& o, const tokenizer::BpeTokenizer& tokenizer) {
  const std::string prompt = *o.prompt;
  if (!o.chat) return prompt;
  std::vector<tokenizer::ChatMessage> messages;
  if (o.system) messages.push_back({"system", *o.system});
  messages.push_back({"user", prompt});
  return tokenizer.apply_chat_template(messages, /*add_generation_prompt=*/true);
}

// Which of --prompt, --prompt-ids and --trace the line asks for, and the options that go with them:
// checked before the model loads.
void check_prompt_options(const GenerateOptions& o) {
  if (o.prompt && o.prompt_ids)
    throw std::invalid_argument("--prompt and --prompt-ids: give one of them, not both (text or token ids)");
  if (o.trace && (o.prompt || o.prompt_ids))
    throw std::invalid_argument("--trace: the trace holds the prompts; give no --prompt or --prompt-ids with it");
  if (!o.trace && !o.prompt && !o.prompt_ids)
    throw std::invalid_argument("give --prompt TEXT, --prompt-ids IDS or --trace FILE");
  if (o.chat && !o.prompt) throw std::invalid_argument("--chat: only with --prompt TEXT");
  if (o.system && !o.chat) throw std::invalid_argument("--system: only with --chat");
}

// Replays the --trace file through the engine: progress on stderr every 1000 steps; the run's
// JSON on stdout, or in --out with a one-line summary on stdout.
int replay(const GenerateOptions& o, const model::LlamaModel& m) {
  const std::string path = *o.trace;
  std::ifstream in(path);
  require(bool(in), "--trace", path, "cannot be opened");
  const auto requests = engine::read_trace(in, m.config().vocab_size, o.sampling.params.seed);
  const engine::ServingRun run =
      engine::serve(path, m, engine_config(o.engine_options, m), requests, {.out = &std::cerr, .every_steps = 1000});
  if (!o.out) {
    engine::write_run_json(std::cout, run.config, run.stats, run.outputs);
    return 0;
  }
  std::ofstream out(*o.out);
  require(bool(out), "--out", *o.out, "cannot be written");
  engine::write_run_json(out, run.config, run.stats, run.outputs);
  const engine::ServingSummary& s = run.summary;
  std::cout << requests.size() << " requests, " << s.generated_tokens << " tokens in " << s.makespan << " s ("
            << s.tokens_per_second << " tokens/s, " << to_string(run.config.policy) << "); metrics in " << *o.out
            << "\n";
  return 0;
}

}  // namespace

int generate(const std::vector<std::string>& argv) {
  GenerateOptions o;
  const std::unique_ptr<CLI::App> app =
      command_app("generate", "--model M (--prompt TEXT | --prompt-ids IDS | --trace FILE)",
                  "Text generation on a Llama model (chapters 07–08): one prompt as token ids (run alone, "
                  "or through the engine) or as text through the model's tokenizer (streamed as it is "
                  "generated), or a JSON-lines trace of requests replayed through the serving engine.");
  add_generate_options(*app, o);
  if (!parse_command_line(*app, argv)) return 0;
  check_prompt_options(o);
  check_split(*app, o.split);
  const RankSplit& split = o.split;
  const std::string path = model::resolve_model_path(o.model);
  // The tokenizer before the weights: a model without one fails at once.
  const std::optional<tokenizer::BpeTokenizer> tokenizer =
      o.prompt ? std::optional(model_tokenizer(path, "--prompt")) : std::nullopt;
  // Without --weights the matrices keep the file's formats (a GGUF's Q4_1 / Q8_0, a checkpoint's fp32).
  if (split.ranks() > 1 && !started_by_mpirun()) {  // checked here, then the ranks start over this command line
    check_split_options(o.engine_options.config.backend, path, o.weights, split);
    exec_through_mpirun("generate", argv, split.ranks());
  }
  const RankModel rank_model = load_rank_model(path, o.weights, split);
  const model::LlamaModel& m = *rank_model.model;
  if (rank_model.follower()) {  // --tp / --pp: ranks 1 … N − 1 run rank 0's steps on their parts
    parallel::follow_leader_steps(m);
    return 0;
  }
  const FollowersRelease release(rank_model);
  if (o.trace) return replay(o, m);
  const std::unique_ptr<model::LlamaModel> draft = load_draft_model(o.engine_options, path);  // --speculative draft
  const engine::EngineConfig config = engine_config(o.engine_options, m, draft.get());

  engine::Request r;
  if (tokenizer) {
    r.prompt = tokenizer->encode_prompt(prompt_text(o, *tokenizer));
    std::string quoted = "'";  // appended apart: GCC 12's -Wrestrict false positive (bug 105329) on "'" + s
    quoted += *o.prompt;
    quoted += "'";
    require(!r.prompt.empty(), "--prompt", quoted, "gives no tokens");
    r.sampling = sampling_params(o.sampling, tokenizer->end_of_generation_ids());
  } else {
    r.prompt = prompt_ids(o, m);
    r.sampling = sampling_params(o.sampling, {});
  }
  if (tokenizer && !o.ids) {  // text, streamed as the engine's steps produce it
    engine::Engine engine(m, config);
    TextStream text(*tokenizer, std::cout, r.sampling.stop_ids);
    const StreamedReply reply = stream_reply(engine, std::move(r), text);
    std::cout << "\n" << std::flush;
    print_summary(reply);
    return 0;
  }
  // generate_alone() is the cpu reference; any other backend, a split model or speculative
  // decoding runs through the engine's runner.
  const bool through_engine =
      o.engine || split.ranks() > 1 || config.backend != Backend::cpu || config.speculative.enabled();
  const engine::RequestOutput out = through_engine ? engine::serve("prompt", m, config, std::span(&r, 1)).outputs.at(0)
                                                   : engine::generate_alone(m, r, config.kv_format);
  if (!o.ids)
    std::cout << "model: " << rank_model.description << "\n"
              << "generated " << out.tokens.size() << " tokens (" << to_string(out.reason) << "):\n";
  for (size_t i = 0; i < out.tokens.size(); ++i) std::cout << (i ? " " : "") << out.tokens[i];
  std::cout << "\n";
  return 0;
}

}  // namespace inferlab::cli
