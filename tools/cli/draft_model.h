#pragma once
/// @file draft_model.h
/// The draft model of `--speculative draft` (chapter 12), for `inferlab generate` and `serve`:
/// by default the target's own file with its own block formats (SmolLM2's Q4_1 matrices), drafting
/// for a target loaded with --weights (e.g. f32: the same numbers widened, read at 4 bytes a
/// weight). A draft must share the target's tokenizer — its guesses are token ids the target
/// verifies — so a draft file whose vocabulary differs is refused, naming what differs.
#include <memory>
#include <string>

#include "runtime/model/llama_model.h"
#include "tools/cli/engine_options.h"

namespace inferlab::cli {

/// Throws std::invalid_argument naming "--draft-model" and the first difference when the models
/// at @p target and @p draft (paths, or random:…) do not share a tokenizer: one has a tokenizer
/// and the other none, or their GGUF vocabularies differ (size, a token's text, the pre-tokenizer,
/// bos/eos, the merges). Models without a tokenizer (random:…, llama2.c checkpoints) are checked
/// by the engine: equal vocabulary sizes.
void check_same_tokenizer(const std::string& target, const std::string& draft);

/// The draft model @p options ask for (--speculative draft), or nullptr: --draft-model (the
/// target's file @p target_path when not given) loaded with --draft-weights (the file's own
/// formats when not given), after check_same_tokenizer().
std::unique_ptr<model::LlamaModel> load_draft_model(const EngineOptions& options, const std::string& target_path);

}  // namespace inferlab::cli
