#include "runtime/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <queue>
#include <stdexcept>

#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/pretokenizer.h"
#include "runtime/tokenizer/utf8.h"

namespace inferlab::tokenizer {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
}

// The bytes of one token: see the file comment of bpe_tokenizer.h.
std::string bytes_of(const std::string& text, TokenType type) {
  switch (type) {
    case TokenType::normal:
      return symbols_to_bytes(text);
    case TokenType::byte:  // <0xAB>
      if (text.size() == 6 && text.starts_with("<0x") && text.back() == '>') {
        return std::string(1, char(std::stoi(text.substr(3, 2), nullptr, 16)));
      }
      return symbols_to_bytes(text);
    default:  // control, user-defined, unknown, unused: their text
      return text;
  }
}

}  // namespace

BpeTokenizer::BpeTokenizer(Vocabulary vocabulary) : vocabulary_(std::move(vocabulary)) {
  vocabulary_.validate();
  const auto& tokens = vocabulary_.tokens;
  ids_.reserve(tokens.size());
  bytes_.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    ids_.emplace(tokens[id], int32_t(id));
    bytes_.push_back(bytes_of(tokens[id], vocabulary_.types[id]));
  }
  for (int byte = 0; byte < 256; ++byte) {
    std::string symbol;
    append_utf8(symbol, byte_to_symbol(uint8_t(byte)));
    const auto id = ids_.find(symbol);
    byte_token_[byte] = id == ids_.end() ? -1 : id->second;
  }
  merges_.reserve(vocabulary_.merges.size());
  for (size_t rank = 0; rank < vocabulary_.merges.size(); ++rank) {
    const auto& [left, right] = vocabulary_.merges[rank];
    // A pair listed twice keeps its first (lowest) rank, as llama.cpp does.
    merges_.emplace(pair_key(ids_.at(left), ids_.at(right)), Merge{int32_t(rank), ids_.at(left + right)});
  }
  for (size_t id = 0; id < tokens.size(); ++id) {
    const TokenType type = vocabulary_.types[id];
    if ((type != TokenType::control && type != TokenType::user_defined) || tokens[id].empty()) continue;
    specials_[uint8_t(tokens[id][0])].push_back(int32_t(id));
  }
  for (auto& list : specials_) {
    std::stable_sort(list.begin(), list.end(),
                     [&](int32_t a, int32_t b) { return tokens[size_t(a)].size() > tokens[size_t(b)].size(); });
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  if (!parse_special) {
    encode_text(text, out);
    return out;
  }
  size_t stretch = 0;  // start of the text not yet encoded
  for (size_t pos = 0; pos < text.size(); ++pos) {
    for (const int32_t id : specials_[uint8_t(text[pos])]) {
      const std::string& special = vocabulary_.tokens[id];
      if (text.compare(pos, special.size(), special) != 0) continue;
      encode_text(text.substr(stretch, pos - stretch), out);
      out.push_back(id);  // the longest that matches here: the list is longest first
      pos += special.size() - 1;
      stretch = pos + 1;
      break;
    }
  }
  encode_text(text.substr(stretch), out);
  return out;
}

std::vector<int32_t> BpeTokenizer::encode_prompt(std::string_view text) const {
  std::vector<int32_t> out;
  if (vocabulary_.add_bos) out.push_back(vocabulary_.bos_id);
  const std::vector<int32_t> ids = encode(text, true);
  out.insert(out.end(), ids.begin(), ids.end());
  return out;
}

void BpeTokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  for (const std::string_view piece : pretokenize_smollm(text)) encode_piece(piece, out);
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  // The symbols as a doubly linked list over their first positions; a merged-away symbol has
  // id −1. A heap entry (rank, left position) is a candidate merge of the symbol at that
  // position with the one after it.
  struct Symbol {
    int32_t id, prev, next;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (const char byte : piece) {
    // A byte without a token is dropped, its neighbours becoming adjacent (Hugging Face's BPE
    // without an unknown token; llama.cpp also drops it).
    if (byte_token_[uint8_t(byte)] < 0) continue;
    const auto i = int32_t(symbols.size());
    symbols.push_back({byte_token_[uint8_t(byte)], i - 1, i + 1});
  }
  const auto n = int32_t(symbols.size());
  if (n == 0) return;
  symbols.back().next = -1;
  if (n == 1) {
    out.push_back(symbols[0].id);
    return;
  }
  using Candidate = std::pair<int32_t, int32_t>;  // (rank, left position): lowest rank, then leftmost
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto push_pair = [&](int32_t left) {
    if (left < 0 || symbols[left].next < 0) return;
    const auto merge = merges_.find(pair_key(symbols[left].id, symbols[symbols[left].next].id));
    if (merge != merges_.end()) heap.emplace(merge->second.rank, left);
  };
  for (int32_t i = 0; i + 1 < n; ++i) push_pair(i);
  while (!heap.empty()) {
    const auto [rank, left] = heap.top();
    heap.pop();
    const int32_t right = symbols[left].id < 0 ? -1 : symbols[left].next;
    if (right < 0) continue;  // the left symbol was merged away, or is now the last
    const auto merge = merges_.find(pair_key(symbols[left].id, symbols[right].id));
    if (merge == merges_.end() || merge->second.rank != rank) continue;  // the pair changed since
    symbols[left].id = merge->second.result;
    symbols[left].next = symbols[right].next;
    if (symbols[right].next >= 0) symbols[symbols[right].next].prev = left;
    symbols[right].id = -1;
    push_pair(symbols[left].prev);
    push_pair(left);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

void BpeTokenizer::check_id(int32_t id) const {
  if (id < 0 || id >= size()) {
    throw std::invalid_argument("token id " + std::to_string(id) + ": out of range (the vocabulary has " +
                                std::to_string(size()) + " tokens, ids 0–" + std::to_string(size() - 1) + ")");
  }
}

const std::string& BpeTokenizer::token_bytes(int32_t id) const {
  check_id(id);
  return bytes_[size_t(id)];
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (const int32_t id : ids) out += token_bytes(id);
  return out;
}

std::optional<Merge> BpeTokenizer::find_merge(int32_t left, int32_t right) const {
  const auto merge = merges_.find(pair_key(left, right));
  if (merge == merges_.end()) return std::nullopt;
  return merge->second;
}

std::optional<int32_t> BpeTokenizer::find_token(std::string_view text) const {
  const auto id = ids_.find(std::string(text));
  if (id == ids_.end()) return std::nullopt;
  return id->second;
}

std::vector<int32_t> BpeTokenizer::end_of_generation_ids() const {
  std::vector<int32_t> ids;
  if (vocabulary_.eos_id >= 0) ids.push_back(vocabulary_.eos_id);
  for (const char* name : {"<|im_end|>", "<|endoftext|>", "<|eot_id|>"}) {
    const auto id = find_token(name);
    if (id && vocabulary_.types[size_t(*id)] == TokenType::control) ids.push_back(*id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::string BpeTokenizer::apply_chat_template(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  if (vocabulary_.chat_template.empty()) {
    throw std::invalid_argument("tokenizer.chat_template: the vocabulary has none");
  }
  return ChatTemplate(vocabulary_.chat_template).apply(messages, add_generation_prompt);
}

std::vector<int32_t> BpeTokenizer::encode_chat(std::span<const ChatMessage> messages, bool add_generation_prompt) const {
  if (vocabulary_.chat_template.empty()) throw std::invalid_argument("tokenizer.chat_template: the vocabulary has none");
  std::vector<int32_t> out;
  if (vocabulary_.add_bos) out.push_back(vocabulary_.bos_id);
  std::string text;  // the text since the last marker, encoded whole (as encode() does between specials)
  const auto flush = [&] {
    const std::vector<int32_t> ids = encode(text, false);
    out.insert(out.end(), ids.begin(), ids.end());
    text.clear();
  };
  for (const ChatPiece& piece : ChatTemplate(vocabulary_.chat_template).pieces(messages, add_generation_prompt)) {
    if (!piece.control) {
      text += piece.text;
      continue;
    }
    flush();
    const std::vector<int32_t> marker = encode(piece.text, true);
    if (marker.size() != 1)
      throw std::invalid_argument("tokenizer.chat_template: the marker " + piece.text +
                                  " is not one control token of this vocabulary");
    out.push_back(marker[0]);
  }
  flush();
  return out;
}

}  // namespace inferlab::tokenizer
