#include "runtime/tokenizer/vocabulary.h"

#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "runtime/gguf/gguf.h"

namespace inferlab::tokenizer {
namespace {

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument(message);
}

void require_kind(const std::string& key, const std::string& value, const std::string& expected,
                  const std::string& what) {
  if (value != expected) {
    fail(key + " = \"" + value + "\": only \"" + expected + "\" (" + what + ") is implemented");
  }
}

}  // namespace

void Vocabulary::validate() const {
  require_kind("tokenizer.ggml.model", model, "gpt2", "byte-level BPE");
  require_kind("tokenizer.ggml.pre", pre, "smollm", "digits alone, then the GPT-2 pattern");
  if (tokens.empty()) fail("tokenizer.ggml.tokens: empty");
  if (types.size() != tokens.size()) {
    fail("tokenizer.ggml.token_type: " + std::to_string(types.size()) + " types for " + std::to_string(tokens.size()) +
         " tokens");
  }
  std::unordered_map<std::string_view, int32_t> ids;
  ids.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    const auto type = int32_t(types[id]);
    if (type < 1 || type > 6) {
      fail("tokenizer.ggml.token_type[" + std::to_string(id) + "] = " + std::to_string(type) + ": must be 1–6");
    }
    if (!ids.emplace(tokens[id], int32_t(id)).second) {
      fail("tokenizer.ggml.tokens[" + std::to_string(id) + "] = \"" + tokens[id] + "\": also token " +
           std::to_string(ids.at(tokens[id])));
    }
  }
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    for (const std::string& part : {left, right, left + right}) {
      if (!ids.count(part)) {
        fail("tokenizer.ggml.merges[" + std::to_string(rank) + "] = \"" + left + " " + right + "\": \"" + part +
             "\" is not a token");
      }
    }
  }
  for (const auto& [key, id] :
       {std::pair{"tokenizer.ggml.bos_token_id", bos_id}, {"tokenizer.ggml.eos_token_id", eos_id}}) {
    if (id < -1 || id >= size()) {
      fail(std::string(key) + " = " + std::to_string(id) + ": out of range (" + std::to_string(size()) + " tokens)");
    }
  }
  if (add_bos && bos_id < 0) fail("tokenizer.ggml.add_bos_token = true without a tokenizer.ggml.bos_token_id");
}

Vocabulary vocabulary_from_gguf(const gguf::GgufFile& file) {
  Vocabulary v;
  v.model = file.get_string("tokenizer.ggml.model");
  require_kind("tokenizer.ggml.model", v.model, "gpt2", "byte-level BPE");
  v.pre = file.get_string("tokenizer.ggml.pre");
  require_kind("tokenizer.ggml.pre", v.pre, "smollm", "digits alone, then the GPT-2 pattern");
  v.tokens = file.get_string_array("tokenizer.ggml.tokens");
  for (const int64_t type : file.get_int_array("tokenizer.ggml.token_type")) {
    if (type < 1 || type > 6) {
      fail(file.path() + ": tokenizer.ggml.token_type holds " + std::to_string(type) + ": must be 1–6");
    }
    v.types.push_back(TokenType(type));
  }
  const std::vector<std::string> merges = file.get_string_array("tokenizer.ggml.merges");
  v.merges.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& merge = merges[rank];
    const size_t space = merge.find(' ');
    // Byte-level tokens never hold a space (it is Ġ), so a merge has exactly one.
    if (space == std::string::npos || space == 0 || space + 1 == merge.size() ||
        merge.find(' ', space + 1) != std::string::npos) {
      fail(file.path() + ": tokenizer.ggml.merges[" + std::to_string(rank) + "] = \"" + merge +
           "\": must be \"left right\"");
    }
    v.merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
  }
  const auto optional_id = [&](std::string_view key) {
    if (file.find(key) == nullptr) return int32_t(-1);
    const uint64_t id = file.get_uint(key);
    if (id >= v.tokens.size()) {
      fail(file.path() + ": " + std::string(key) + " = " + std::to_string(id) + ": out of range (" +
           std::to_string(v.tokens.size()) + " tokens)");
    }
    return int32_t(id);
  };
  v.bos_id = optional_id("tokenizer.ggml.bos_token_id");
  v.eos_id = optional_id("tokenizer.ggml.eos_token_id");
  if (file.find("tokenizer.ggml.add_bos_token") != nullptr) v.add_bos = file.get_bool("tokenizer.ggml.add_bos_token");
  if (file.find("tokenizer.chat_template") != nullptr) v.chat_template = file.get_string("tokenizer.chat_template");
  try {
    v.validate();
  } catch (const std::invalid_argument& error) {
    fail(file.path() + ": " + error.what());
  }
  return v;
}

}  // namespace inferlab::tokenizer
