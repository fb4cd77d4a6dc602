#pragma once
/// @file model_tokenizer.h
/// The tokenizer that comes with a model file, for the commands that take text
/// (`inferlab tokenize`, `generate --prompt`, `chat`). Only a GGUF file carries one (its
/// tokenizer.ggml.* keys, runtime/tokenizer/vocabulary.h); a llama2.c checkpoint
/// (models/stories260K.bin) and random:<preset> weights have none, so they take token ids only.

#include <string>

#include "runtime/tokenizer/bpe_tokenizer.h"

namespace inferlab::cli {

/// The byte-level BPE tokenizer of the model @p model (a path, as model::resolve_model_path() gives, or
/// random:…). Throws std::invalid_argument naming @p option (the command-line option that needs
/// text, e.g. "--prompt") and the model when the model is random:… or an existing file that is
/// not GGUF; a missing or malformed GGUF file, or one whose vocabulary this tokenizer does not
/// implement, is reported as the GGUF reader and vocabulary_from_gguf() report it.
tokenizer::BpeTokenizer model_tokenizer(const std::string& model, const std::string& option);

}  // namespace inferlab::cli
