// `inferlab generate` (chapters 07 and 08): text generation on a Llama model — one prompt, as
// token ids (run alone, or through the engine) or as text through the model's tokenizer
// (streamed through the engine as it is generated, optionally in the model's chat template), or
// a JSON-lines trace of requests replayed through the serving engine with per-request metrics
// written as JSON.
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/args.h"
#include "common/backend.h"
#include "common/check.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/metrics.h"
#include "runtime/engine/serving_run.h"
#include "runtime/engine/trace.h"
#include "runtime/model/llama_model.h"
#include "runtime/tokenizer/bpe_tokenizer.h"
#include "tools/cli/commands.h"
#include "tools/cli/engine_options.h"
#include "runtime/model/model_files.h"
#include "tools/cli/model_tokenizer.h"
#include "tools/cli/ranks.h"
#include "runtime/parallel/rank_runner.h"
#include "tools/cli/sampling_options.h"
#include "tools/cli/streamed_reply.h"
#include "tools/cli/text_stream.h"
#include "tools/cli/token_ids.h"

namespace inferlab::cli {
namespace {

const char* kGenerateUsage =
    R"(usage: inferlab generate --model M (--prompt TEXT | --prompt-ids IDS | --trace FILE) [options]

  --model M               smollm2 (models/SmolLM2-135M-Instruct.Q4_1.gguf, installed by ./inferlab setup), a
                          GGUF file, models/stories260K.bin (a llama2.c checkpoint) or
                          random:<preset>[,key=value…] (presets tiny, stories260K, bench; keys dim, hidden,
                          layers, heads, kv_heads, vocab, seq_len, seed, tied)
  --prompt TEXT           the prompt as text, tokenized with the model's tokenizer (a GGUF model's; special
                          tokens such as <|im_start|> written in TEXT are those tokens): prints the generated
                          TEXT as it is generated (through the engine), then a summary line on stderr —
                          prompt tokens, tokens reused from the prefix cache, generated tokens (finish
                          reason), prefill and decode tokens/s. Stops at the model's end-of-generation ids
                          (SmolLM2: <|im_end|>, <|endoftext|>) unless --stop-ids says otherwise; the stop
                          token is not printed
  --chat                  with --prompt: TEXT is a user message, wrapped in the model's chat template
                          (ChatML; SmolLM2's adds its default system message when --system is not given)
  --system TEXT           with --chat: the system message
  --prompt-ids IDS        the prompt as comma- or space-separated token ids (1 = BOS for llama2.c models);
                          prints the generated ids (no stop ids unless --stop-ids)
  --max-new-tokens N      tokens to generate (default 16)
  --greedy                the first maximum each step (the default; --temperature 0 is the same)
  --temperature T, --top-p P, --seed S   sample instead (nucleus sampling with the request's own seed)
  --stop-ids IDS          stop after generating one of these
  --ids                   print only the generated ids (a stop id included), space-separated, on one line
  --trace FILE            replay a JSON-lines request file (one object per line: arrival, prompt_ids or
                          prompt_len, max_new_tokens[, id, temperature, top_p, seed, stop_ids])
  --out FILE              with --trace: write per-request metrics as JSON (default: stdout)
  engine options (for --trace and --prompt, or to run --prompt-ids through the engine with --engine):
  --policy continuous|static   --block-size N (16)   --num-blocks N (256)   --max-seqs N (16)
  --budget N (max tokens per step, 256)   --chunk N (256)   --no-chunking   --no-prefix-caching
  --max-seq-len N (the model's)   --simulated-clock
  --backend cpu|sim|cuda  where the model runs (default cpu); sim and cuda keep the weights and the KV
                          pool on the device (a single prompt then runs through the engine)
  --kv-dtype fp32|fp16|int8|int8/fp16-scales|fp8   the KV cache's format (default fp32; cpu only:
                          INT8 with per-token scales, FP8 E4M3 with one scale a row — chapter 04)
  --weights f32|f16|bf16|q8_0|q4_0|q4_1   convert every matrix to this format on load (default: the
                          file's own formats — fp32 for a llama2.c checkpoint, Q4_1/Q8_0 for SmolLM2's GGUF)
  --tp N                  split the model over N ranks (tensor parallelism, chapter 10: each rank holds its
                          heads, hidden columns and vocabulary rows; two all-reduces a layer): starts the
                          ranks through mpirun (Open MPI), ⌊cores / N⌋ threads each; cpu only, through the
                          engine. N must divide the query heads and the hidden width, and divide the KV
                          heads or be a multiple of them (SmolLM2-135M: 1 or 3). The same greedy ids as
                          --tp 1 where the top-2 margin exceeds fp32 rounding
  --pp N                  split the model's layers into N pipeline stages, one a rank (chapter 10: each
                          stage sends its activations to the next; the last sends the logits to rank 0):
                          started through mpirun like --tp; N ≤ the layers. The same logits as --pp 1, bit
                          for bit
  --micro-batches M       with --pp: cut each step's tokens into M micro-batches that follow one another
                          through the stages (default 4; the idle fraction is (N − 1) / (M + N − 1))
)";

// The prompt's ids: --prompt-ids, each checked against the vocabulary.
std::vector<int32_t> prompt_ids(const Args& args, const model::LlamaModel& m) {
  std::vector<int32_t> ids = token_id_list("prompt-ids", args.required("prompt-ids"));
  for (const int32_t id : ids)
    require(id < m.config().vocab_size, "--prompt-ids", id,
            "is not a token id of this model (vocab " + std::to_string(m.config().vocab_size) + ")");
  return ids;
}

// The text the model is prompted with: --prompt as given, or wrapped in the chat template with --chat.
std::string prompt_text(const Args& args, const tokenizer::BpeTokenizer& tokenizer) {
  const std::string prompt = args.required("prompt");
  if (!args.has("chat")) return prompt;
  std::vector<tokenizer::ChatMessage> messages;
  if (args.has("system")) messages.push_back({"system", args.required("system")});
  messages.push_back({"user", prompt});
  return tokenizer.apply_chat_template(messages, /*add_generation_prompt=*/true);
}

// Which of --prompt, --prompt-ids and --trace the line asks for, and the options that go with them:
// checked before the model loads.
void check_prompt_options(const Args& args) {
  if (args.has("prompt") && args.has("prompt-ids"))
    throw std::invalid_argument("--prompt and --prompt-ids: give one of them, not both (text or token ids)");
  if (args.has("trace") && (args.has("prompt") || args.has("prompt-ids")))
    throw std::invalid_argument("--trace: the trace holds the prompts; give no --prompt or --prompt-ids with it");
  if (!args.has("trace") && !args.has("prompt") && !args.has("prompt-ids"))
    throw std::invalid_argument("give --prompt TEXT, --prompt-ids IDS or --trace FILE");
  if (args.has("chat") && !args.has("prompt")) throw std::invalid_argument("--chat: only with --prompt TEXT");
  if (args.has("system") && !args.has("chat")) throw std::invalid_argument("--system: only with --chat");
}

// Replays the --trace file through the engine: progress on stderr every 1000 steps; the run's
// JSON on stdout, or in --out with a one-line summary on stdout.
int replay(const Args& args, const model::LlamaModel& m) {
  const std::string path = args.required("trace");
  std::ifstream in(path);
  require(bool(in), "--trace", path, "cannot be opened");
  const auto requests = engine::read_trace(in, m.config().vocab_size, uint64_t(args.integer("seed").value_or(0)));
  const engine::ServingRun run =
      engine::serve(path, m, engine_config(args, m), requests, {.out = &std::cerr, .every_steps = 1000});
  if (!args.has("out")) {
    engine::write_run_json(std::cout, run.config, run.stats, run.outputs);
    return 0;
  }
  std::ofstream out(args.required("out"));
  require(bool(out), "--out", args.required("out"), "cannot be written");
  engine::write_run_json(out, run.config, run.stats, run.outputs);
  const engine::ServingSummary& s = run.summary;
  std::cout << requests.size() << " requests, " << s.generated_tokens << " tokens in " << s.makespan << " s ("
            << s.tokens_per_second << " tokens/s, " << to_string(run.config.policy) << "); metrics in "
            << args.required("out") << "\n";
  return 0;
}

}  // namespace

int generate(const std::vector<std::string>& argv) {
  const Args args(argv, {"greedy", "ids", "no-chunking", "no-prefix-caching", "simulated-clock", "engine", "chat"});
  if (args.help()) {
    std::cout << kGenerateUsage;
    return 0;
  }
  std::set<std::string> known = {"model", "prompt", "chat", "system", "prompt-ids", "ids", "trace", "out", "engine",
                                 "weights"};
  known.merge(sampling_option_names());
  known.merge(engine_option_names());
  known.insert({"tp", "pp", "micro-batches"});
  args.check_known(known);
  check_prompt_options(args);
  const RankSplit split = rank_split(args);
  const std::string path = model::resolve_model_path(args.required("model"));
  // The tokenizer before the weights: a model without one fails at once.
  const std::optional<tokenizer::BpeTokenizer> tokenizer =
      args.has("prompt") ? std::optional(model_tokenizer(path, "--prompt")) : std::nullopt;
  // Without --weights the matrices keep the file's formats (a GGUF's Q4_1 / Q8_0, a checkpoint's fp32).
  std::optional<WeightFormat> format;
  if (args.has("weights")) format = parse_weight_format(args.required("weights"));
  if (split.ranks() > 1 && !started_by_mpirun()) {  // checked here, then the ranks start over this command line
    check_split_options(args, path, format, split);
    exec_through_mpirun("generate", argv, split.ranks());
  }
  const RankModel rank_model = load_rank_model(path, format, split);
  const model::LlamaModel& m = *rank_model.model;
  if (rank_model.follower()) {  // --tp / --pp: ranks 1 … N − 1 run rank 0's steps on their parts
    parallel::follow_leader_steps(m);
    return 0;
  }
  const FollowersRelease release(rank_model);
  if (args.has("trace")) return replay(args, m);

  engine::Request r;
  if (tokenizer) {
    r.prompt = tokenizer->encode_prompt(prompt_text(args, *tokenizer));
    std::string quoted = "'";  // appended apart: GCC 12's -Wrestrict false positive (bug 105329) on "'" + s
    quoted += args.required("prompt");
    quoted += "'";
    require(!r.prompt.empty(), "--prompt", quoted, "gives no tokens");
    r.sampling = sampling_options(args, 16, tokenizer->end_of_generation_ids());
  } else {
    r.prompt = prompt_ids(args, m);
    r.sampling = sampling_options(args, 16, {});
  }
  if (tokenizer && !args.has("ids")) {  // text, streamed as the engine's steps produce it
    engine::Engine engine(m, engine_config(args, m));
    TextStream text(*tokenizer, std::cout, r.sampling.stop_ids);
    const StreamedReply reply = stream_reply(engine, std::move(r), text);
    std::cout << "\n" << std::flush;
    print_summary(reply);
    return 0;
  }
  // generate_alone() is the cpu reference; any other backend, or a split model, runs through the
  // engine's runner.
  const bool through_engine =
      args.has("engine") || split.ranks() > 1 || parse_backend(args.get_or("backend", "cpu")) != Backend::cpu;
  const engine::RequestOutput out = through_engine
                                        ? engine::serve("prompt", m, engine_config(args, m), std::span(&r, 1)).outputs.at(0)
                                        : engine::generate_alone(m, r, engine_config(args, m).kv_format);
  if (!args.has("ids")) std::cout << "model: " << rank_model.description << "\n" << "generated " << out.tokens.size()
                                  << " tokens (" << to_string(out.reason) << "):\n";
  for (size_t i = 0; i < out.tokens.size(); ++i) std::cout << (i ? " " : "") << out.tokens[i];
  std::cout << "\n";
  return 0;
}

}  // namespace inferlab::cli
