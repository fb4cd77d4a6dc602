#pragma once
// Token ids on the command line (`generate --prompt-ids`, `--stop-ids`, `tokenize --decode`).
#include <cstdint>
#include <string>
#include <vector>

namespace inferlab::cli {

/// The ids in @p text, comma- or space-separated. Throws std::invalid_argument naming the option
/// `--<name>` and the first item that is not an id in [0, INT32_MAX] (whether an id is in a
/// model's vocabulary is the caller's check).
std::vector<int32_t> token_id_list(const std::string& name, const std::string& text);

}  // namespace inferlab::cli
