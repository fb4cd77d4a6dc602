#pragma once
/// @file model_files.h
/// The model names the lab accepts besides a path: `smollm2` is chapter 08's SmolLM2-135M-Instruct
/// (its Q4_1 GGUF), which `./inferlab setup` installs into models/ of the source tree. The
/// commands, the benchmark and the tour resolve names here, so a name means one file everywhere.

#include <string>

namespace inferlab::model {

/// models/SmolLM2-135M-Instruct.Q4_1.gguf under the source tree this binary was built from
/// (whether or not it is installed).
std::string smollm2_path();

/// The path of @p name: smollm2_path() for `smollm2`; any other name is a path and comes back
/// unchanged. Throws std::invalid_argument naming `./inferlab setup` when the name is `smollm2`
/// and the file is not installed.
std::string resolve_model_path(const std::string& name);

}  // namespace inferlab::model
