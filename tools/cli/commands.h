#pragma once
/// @file commands.h
/// The subcommands of the `inferlab` executable. Each returns the process exit code.

#include <string>
#include <vector>

namespace inferlab::cli {

/// `inferlab tour [--quick]`: every chapter's demo on the default backend.
int tour(const std::vector<std::string>& args);
/// `inferlab roofline [--seconds S] [--working-set-mib M] [--threads N] [--out FILE]`: measure and save.
int roofline(const std::vector<std::string>& args);
/// `inferlab attention --q q.npy --k k.npy --v v.npy [--causal] [--version NAME] [--backend B] --out o.npy`.
int attention(const std::vector<std::string>& args);
/// `inferlab decode --q q.npy --k-cache k.npy --v-cache v.npy --lengths lengths.npy [--version NAME]
/// [--backend B] [--cache int8|int8-channel|fp8] --out o.npy`: one decode step (chapter 03) on .npy
/// data; --cache quantizes the cache on load and runs an INT8 / FP8 version (chapter 04).
int decode(const std::vector<std::string>& args);
/// `inferlab versions`: every registered version and where it runs.
int versions(const std::vector<std::string>& args);
/// `inferlab analyze [--model M] [--device D] [--batch B] [--context L] [--prompt P] [--weights W] [--kv K]
/// [--json] | --list | --audit [--markdown]`: the analytic calculator (analysis/).
int analyze(const std::vector<std::string>& args);
/// `inferlab generate --model M (--prompt TEXT | --prompt-ids IDS | --trace FILE) [options]`: generation
/// on a Llama model (chapters 07–08) — one prompt as token ids, or as text (the generated text
/// streamed), or a JSON-lines trace through the serving engine. Its options: generate.cpp's table
/// with the shared ones (engine_options.h, sampling_options.h, ranks.h); `--help` lists them.
int generate(const std::vector<std::string>& args);
/// `inferlab tokenize --model M (--text TEXT | --decode IDS) [--no-special]`: a GGUF model's
/// byte-level BPE tokenizer (chapter 08, runtime/tokenizer) — text to ids, ids to text.
int tokenize(const std::vector<std::string>& args);
/// `inferlab chat --model M [options]`: an interactive chat
/// (chapter 08) on stdin / stdout — a terminal or a pipe — through one serving engine whose
/// prefix cache keeps the conversation's earlier turns; Ctrl-C stops a reply.
int chat(const std::vector<std::string>& args);
/// `inferlab serve --model M [options]`: an OpenAI-compatible HTTP server
/// (chapter 09) over the serving engine on its own thread (openai_server.h); stops on SIGINT or
/// SIGTERM, exit code 0.
int serve(const std::vector<std::string>& args);

}  // namespace inferlab::cli
