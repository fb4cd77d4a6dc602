#pragma once
/// @file vocabulary.h
/// A byte-level BPE vocabulary as data, as a GGUF file stores it under `tokenizer.ggml.*`
/// (llama.cpp's keys): the tokens, each one's type, the merges in rank order, the BOS/EOS ids,
/// whether BOS is added, the chat template. BpeTokenizer (bpe_tokenizer.h) builds its indexes
/// from it.
///
/// Tokens of type normal are written in byte-level symbols (byte_level.h: "Ġthe" is " the");
/// control and user-defined tokens hold their text as is ("<|im_start|>").

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace inferlab::gguf {
class GgufFile;
}

namespace inferlab::tokenizer {

/// A token's type, numbered as in `tokenizer.ggml.token_type` (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  normal = 1,        ///< a BPE token, in byte-level symbols
  unknown = 2,       ///< the unknown token (unused by byte-level BPE: every byte has a token)
  control = 3,       ///< a special token such as <|im_start|>: text only where the caller allows it
  user_defined = 4,  ///< an added token: always cut out of the text as a whole
  unused = 5,        ///< a reserved slot
  byte = 6,          ///< a raw byte, written <0xAB>
};

/// A tokenizer vocabulary. Rank of a merge = its index in @ref merges (lower merges first).
struct Vocabulary {
  std::string model = "gpt2";                               ///< tokenizer.ggml.model: "gpt2" (byte-level BPE)
  std::string pre = "smollm";                               ///< tokenizer.ggml.pre: the pre-tokenizer's name
  std::vector<std::string> tokens;                          ///< id → text
  std::vector<TokenType> types;                             ///< id → type (same size as tokens)
  std::vector<std::pair<std::string, std::string>> merges;  ///< rank → (left, right), both tokens
  int32_t bos_id = -1;                                      ///< beginning of sequence, or −1
  int32_t eos_id = -1;                                      ///< end of sequence, or −1
  bool add_bos = false;                                     ///< whether encoding a prompt starts with bos_id
  std::string chat_template;                                ///< tokenizer.chat_template (Jinja source), or empty

  /// The number of tokens.
  int32_t size() const { return int32_t(tokens.size()); }
  /// Throws std::invalid_argument unless the vocabulary is consistent: model "gpt2", pre "smollm",
  /// one type per token (each 1–6), no duplicate token, every merge's left, right and their
  /// concatenation tokens, bos_id and eos_id −1 or in range, add_bos only with a BOS.
  void validate() const;
};

/// Reads the vocabulary of @p file (keys tokenizer.ggml.model, .pre, .tokens, .token_type,
/// .merges — each "left right" —, .bos_token_id, .eos_token_id, .add_bos_token, and
/// tokenizer.chat_template; the last four optional: −1, −1, false, empty) and validates it.
/// Throws std::invalid_argument naming the key and its value for a model other than "gpt2" or a
/// pre-tokenizer other than "smollm" (the only ones implemented), and for every other problem
/// that validate() or the file's typed getters find.
Vocabulary vocabulary_from_gguf(const gguf::GgufFile& file);

}  // namespace inferlab::tokenizer
