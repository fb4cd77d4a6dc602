// `inferlab` — the lab's front door. See README.md, or run `inferlab help`.
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "tools/cli/commands.h"

namespace {

const char* kUsage = R"(usage: inferlab <command> [options]

  tour                      every chapter's demo on the default backend (cpu), ending in a table
  roofline                  measure this machine's fp32 FMA peak and memory bandwidth (saved as JSON)
  attention --q Q.npy --k K.npy --v V.npy --out O.npy [--causal] [--version NAME] [--backend cpu|sim|cuda]
                            prefill attention on .npy data (Q [heads, L, d]; K, V [kv_heads, L, d])
  decode --q Q.npy --k-cache K.npy --v-cache V.npy --lengths LENGTHS.npy --out O.npy [--version NAME]
         [--backend cpu|sim|cuda] [--cache int8|int8-channel|fp8] [--block-size N]
                            one decode step on .npy data (Q [batch, heads, d]; caches [batch, kv_heads,
                            max_seq_len, d], float16 files give an fp16 cache; lengths int [batch]);
                            --cache quantizes the cache on load (INT8 with per-token or per-channel K
                            scales, or FP8 E4M3) and runs an INT8 / FP8 version, printing the bytes and
                            the values saturated; --block-size N pages the cache (blocks of N tokens in
                            scattered order, read through the block table): the same output
  versions                  list the registered implementations
  analyze [--model llama-7b] [--device a100-40] [--batch 1] [--context 2048|32k] [--prompt N]
          [--weights fp32|fp16|bf16|fp8|int8|int4] [--kv fp32|fp16|bf16|fp8|int8] [--json]
                            KV-cache size, FLOPs, bytes, AI and time floors of prefill and decode,
                            what fits in memory and the decode floor with other formats
          custom shape: --hidden H --layers N --heads N [--kv-heads N] [--head-dim D] [--ffn F]
                        [--vocab V] [--tied-embeddings] (alone, or overriding --model's fields)
          custom device: --bandwidth GB/s --peak TFLOP/s [--memory GiB] (alone, or overriding
                        --device's); --device this [--roofline FILE]: this machine, measured
  analyze --list [--json]   the built-in models and devices
  analyze --audit [--markdown]   the source article's figures, audited (text or a Markdown table)
  analyze --kv-waste        chapter 06's KV-memory table (analyze --help)
  generate --model models/stories260K.bin --prompt-ids 1 [options]
                            generate token ids on a Llama model (llama2.c checkpoint or random:<preset>)
  generate --model smollm2 --prompt TEXT [--chat] [options]
                            generate text with a GGUF model's tokenizer, streamed, optionally in its chat
                            template; a summary line (tokens, tokens/s) on stderr
  generate --model M --trace FILE.jsonl [options]
                            replay a request trace through the serving engine (generate --help: the options)
  tokenize --model smollm2 (--text TEXT | --decode IDS) [--no-special]
                            a GGUF model's tokenizer: the ids of TEXT on one line, or the text of IDS
  chat --model smollm2 [options]
                            an interactive chat on stdin (a terminal or a pipe), replies streamed; one
                            engine whose prefix cache keeps the earlier turns; /reset, /quit, Ctrl-C
  serve --model smollm2 [options]
                            an OpenAI-compatible HTTP server: /v1/chat/completions, /v1/completions
                            (JSON or streamed events), /v1/models, /health, /metrics; SIGINT/SIGTERM stops it
  help [COMMAND]            this text, or COMMAND's own usage and options (as COMMAND --help; every command
                            has one)

The ./inferlab launcher at the top of the source tree also offers: test, grade, student, bench, docs.
)";

}  // namespace

int main(int argc, char** argv) {
  const std::map<std::string, std::function<int(const std::vector<std::string>&)>> commands = {
      {"tour", inferlab::cli::tour},
      {"roofline", inferlab::cli::roofline},
      {"attention", inferlab::cli::attention},
      {"decode", inferlab::cli::decode},
      {"versions", inferlab::cli::versions},
      {"analyze", inferlab::cli::analyze},
      {"generate", inferlab::cli::generate},
      {"tokenize", inferlab::cli::tokenize},
      {"chat", inferlab::cli::chat},
      {"serve", inferlab::cli::serve},
  };
  const std::string first = argc < 2 ? "" : argv[1];
  if (first == "help" && argc >= 3 && commands.count(argv[2])) {
    return commands.at(argv[2])({"--help"});  // `inferlab help analyze` = `inferlab analyze --help`
  }
  if (argc < 2 || first == "help" || first == "--help" || first == "-h") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const auto command = commands.find(argv[1]);
  if (command == commands.end()) {
    std::cerr << "inferlab: unknown command '" << argv[1] << "'\n\n" << kUsage;
    return 2;
  }
  try {
    return command->second(std::vector<std::string>(argv + 2, argv + argc));
  } catch (const std::invalid_argument& error) {
    std::cerr << "inferlab " << argv[1] << ": " << error.what() << "\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "inferlab " << argv[1] << ": error: " << error.what() << "\n";
    return 1;
  }
}
