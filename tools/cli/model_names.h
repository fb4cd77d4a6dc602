#pragma once
/// @file model_names.h
/// The model names the `inferlab` commands accept besides a path: `smollm2` is chapter 08's
/// SmolLM2-135M-Instruct (Q4_1 GGUF), installed by `./inferlab setup` into models/ of the source
/// tree.

#include <string>

namespace inferlab::cli {

/// The path of @p name: models/SmolLM2-135M-Instruct.Q4_1.gguf of the source tree for
/// `smollm2`; any other name is a path and comes back unchanged. Throws std::invalid_argument
/// naming `./inferlab setup` when the name is `smollm2` and the file is not installed.
std::string resolve_model_path(const std::string& name);

}  // namespace inferlab::cli
