#pragma once
/// @file bpe_tokenizer.h
/// Byte-level BPE (GPT-2's scheme, SmolLM2's vocabulary): text → token ids and back.
///
/// encode(text, parse_special):
///   1. special tokens: where parse_special, the control and user-defined tokens (<|im_start|>,
///      …) are cut out of the text first, leftmost match first and, among matches starting there,
///      the longest. Each cut is one id and a boundary no other token crosses. Without
///      parse_special their text is plain text (SmolLM2 has only control ones);
///   2. the `smollm` pre-tokenizer (pretokenizer.h) cuts each stretch between them into pieces;
///   3. each piece's bytes become their byte-level symbols (byte_level.h), one token each; a
///      byte whose symbol is not in the vocabulary is dropped (SmolLM2's lacks 21 of the 256:
///      byte_token()), as Hugging Face's BPE without an unknown token and llama.cpp do — so
///      decode(encode(text)) is the text less those bytes;
///   4. BPE: the adjacent pair whose merge has the lowest rank merges into one token, again and
///      again, until no adjacent pair has a merge; ties (the same pair at several places) go to
///      the leftmost;
///   5. the ids of what is left, piece after piece.
///
/// Cost of step 4 for a piece of n bytes: O(n log n) — a min-heap of (rank, position) over the
/// candidate pairs and a linked list of symbols; each merge removes a symbol and pushes at most
/// two new pairs, and a heap entry whose pair has changed since is skipped when it comes up
/// (the simple loop that rescans the piece for its lowest rank after every merge is O(n²): fine
/// for words, slow for a 10,000-space run or a long line of CJK, which are one piece). Each pair
/// lookup is one hash probe of (left id, right id); ~49k merges for SmolLM2.
///
/// decode(ids): each token's bytes concatenated — normal tokens' symbols back to bytes, control
/// and user-defined tokens' text as is, byte tokens <0xAB> to their byte. A piece of text can end
/// inside a UTF-8 character (a multi-byte character may be split across tokens): decode returns
/// bytes; IncrementalDetokenizer (detokenizer.h) streams whole characters.
///
/// Every id taken (decode, token_bytes, the detokenizer) is checked: std::invalid_argument
/// naming the id when it is outside 0 … size() − 1.

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/vocabulary.h"

namespace inferlab::tokenizer {

/// One merge: the pair (left, right) becomes @ref result; lower ranks merge first.
struct Merge {
  int32_t rank = 0;    ///< the index in Vocabulary::merges
  int32_t result = 0;  ///< the id of left + right
};

/// A byte-level BPE tokenizer over one vocabulary (immutable: share it between threads).
class BpeTokenizer {
 public:
  /// Validates @p vocabulary (Vocabulary::validate; std::invalid_argument when it is
  /// inconsistent) and builds the lookups.
  explicit BpeTokenizer(Vocabulary vocabulary);

  /// The ids of @p text (bytes; broken UTF-8 is kept byte for byte, pretokenizer.h, but for the
  /// bytes without a token, step 3). No BOS is added here: see encode_prompt(). @p parse_special:
  /// whether control and user-defined tokens written in the text ("<|im_end|>") are those tokens,
  /// or plain text.
  std::vector<int32_t> encode(std::string_view text, bool parse_special) const;
  /// encode(text, true) after bos_id when the vocabulary says add_bos.
  std::vector<int32_t> encode_prompt(std::string_view text) const;
  /// Appends the BPE ids of one pre-token @p piece (its bytes; no special-token or pre-tokenizer
  /// split) to @p out: steps 3–5 above.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  /// The bytes of @p ids concatenated. Throws std::invalid_argument naming an id out of range.
  std::string decode(std::span<const int32_t> ids) const;
  /// The bytes token @p id stands for. Throws std::invalid_argument naming an id out of range.
  const std::string& token_bytes(int32_t id) const;

  /// The merge of the adjacent tokens (@p left, @p right), or nullopt.
  std::optional<Merge> find_merge(int32_t left, int32_t right) const;
  /// The id of the token for one byte (its byte-level symbol), or −1 when the vocabulary has
  /// none: encode drops such a byte (SmolLM2 lacks 21 — the controls 0x04, 0x06, 0x13, 0x14,
  /// 0x16, 0x1D and the lead bytes C0, C1, F1, F2, F5–FF — so "a\x04b" encodes as "a", "b").
  int32_t byte_token(uint8_t byte) const { return byte_token_[byte]; }
  /// The id of the token whose text (as stored: symbols for normal tokens) is @p text, or nullopt.
  std::optional<int32_t> find_token(std::string_view text) const;
  /// The ids that end a generation: eos_id and the control tokens <|im_end|>, <|endoftext|>
  /// and <|eot_id|> that the vocabulary has, without repeats, increasing.
  std::vector<int32_t> end_of_generation_ids() const;

  /// The vocabulary's chat template (chat_template.h) applied to @p messages: the text to encode
  /// with parse_special. Throws std::invalid_argument when the vocabulary has no template or one
  /// that ChatTemplate does not recognize.
  std::string apply_chat_template(std::span<const ChatMessage> messages, bool add_generation_prompt) const;
  /// The conversation rendered by the chat template and encoded (after bos_id when add_bos)
  /// with only the template's own markers as control tokens: the messages' text is encoded with
  /// parse_special off, so a control token's spelling typed in a message stays text. For text
  /// without such spellings it equals encode_prompt(apply_chat_template(…)). Throws as
  /// apply_chat_template().
  std::vector<int32_t> encode_chat(std::span<const ChatMessage> messages, bool add_generation_prompt) const;

  /// The vocabulary.
  const Vocabulary& vocabulary() const { return vocabulary_; }
  /// The number of tokens.
  int32_t size() const { return vocabulary_.size(); }

 private:
  void check_id(int32_t id) const;
  // Cuts special tokens out of text; encodes the stretches between them.
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;

  Vocabulary vocabulary_;
  std::unordered_map<std::string, int32_t> ids_;  // token text → id
  std::unordered_map<uint64_t, Merge> merges_;    // (left << 32 | right) → merge
  std::array<int32_t, 256> byte_token_{};         // byte → id of its symbol
  std::vector<std::string> bytes_;                // id → bytes
  // Special (control and user-defined) tokens by first byte, longest first.
  std::array<std::vector<int32_t>, 256> specials_;
};

}  // namespace inferlab::tokenizer
