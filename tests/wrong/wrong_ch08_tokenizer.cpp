// Chapter-08 tokenizer fixtures: wrong encoders built on the real tokenizer's parts, through the
// check of tests/08-real-model/tokenizer_check.h (Hugging Face tokenizers on the same GGUF) that
// BpeTokenizer passes. Each must be rejected on the hand-written texts:
//   - ties merged rightmost: when the lowest-ranked pair occurs more than once in a piece, the
//     last occurrence merges first ("   " → "Ġ" "ĠĠ" instead of "ĠĠ" "Ġ");
//   - the digit split missing: only the GPT-2 pattern, so " 2024" is one piece (` ?\p{N}+`).
//     SmolLM2's merges never join two digits or a space and an ASCII digit, so ASCII numbers come
//     out the same; the space before a multi-byte number does merge with its first byte (" ١" →
//     "ĠÙ" "¡" against "Ġ" "Ù" "¡"; " ½" → "ĠÂ" "½" against "Ġ" "Â½"): the text with Arabic
//     digits and fractions tells them apart.
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

#include "runtime/gguf/gguf.h"
#include "runtime/tokenizer/bpe_tokenizer.h"
#include "runtime/tokenizer/pretokenizer.h"
#include "tests/08-real-model/tokenizer_check.h"

namespace inferlab {
namespace {

using tokenizer::BpeTokenizer;

const BpeTokenizer& smollm2() {
  static const BpeTokenizer tokenizer(tokenizer::vocabulary_from_gguf(gguf::GgufFile::open(INFERLAB_SMOLLM2_GGUF)));
  return tokenizer;
}

// Special tokens cut out as the real encoder does; each stretch between them through @p stretch.
std::vector<int32_t> with_specials(std::string_view text, bool parse_special,
                                   void (*stretch)(std::string_view, std::vector<int32_t>&)) {
  const tokenizer::Vocabulary& v = smollm2().vocabulary();
  static const std::vector<int32_t> controls = [&] {  // SmolLM2's: none a prefix of another
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < v.size(); ++id)
      if (v.types[size_t(id)] == tokenizer::TokenType::control) ids.push_back(id);
    return ids;
  }();
  std::vector<int32_t> out;
  size_t start = 0;
  for (size_t pos = 0; parse_special && pos < text.size(); ++pos) {
    for (const int32_t id : controls) {
      const std::string_view s = v.tokens[size_t(id)];
      if (text.substr(pos, s.size()) != s) continue;
      stretch(text.substr(start, pos - start), out);
      out.push_back(id);
      pos += s.size() - 1;
      start = pos + 1;
      break;
    }
  }
  stretch(text.substr(start), out);
  return out;
}

// BPE with ties to the rightmost: the simple O(n²) loop, scanning for the lowest rank with <=.
void rightmost_ties(std::string_view text, std::vector<int32_t>& out) {
  const BpeTokenizer& t = smollm2();
  for (const std::string_view piece : tokenizer::pretokenize_smollm(text)) {
    std::vector<int32_t> symbols;
    for (const char byte : piece)
      if (t.byte_token(uint8_t(byte)) >= 0) symbols.push_back(t.byte_token(uint8_t(byte)));
    while (symbols.size() > 1) {
      size_t best = symbols.size();
      int32_t best_rank = INT32_MAX, result = -1;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        const auto merge = t.find_merge(symbols[i], symbols[i + 1]);
        if (merge && merge->rank <= best_rank) best = i, best_rank = merge->rank, result = merge->result;  // WRONG: <=
      }
      if (best == symbols.size()) break;
      symbols[best] = result;
      symbols.erase(symbols.begin() + long(best) + 1);
    }
    out.insert(out.end(), symbols.begin(), symbols.end());
  }
}

// The GPT-2 pattern alone: no pass that isolates each digit.
void no_digit_split(std::string_view text, std::vector<int32_t>& out) {
  std::vector<std::string_view> pieces;
  tokenizer::split_gpt2(text, pieces);  // WRONG: pretokenize_smollm's first pass skipped
  for (const std::string_view piece : pieces) smollm2().encode_piece(piece, out);
}

TEST(WrongCh08Tokenizer, TheOracleCheckRejectsEachWrongEncoder) {
  const std::string problem = testing::setup_problem(/*need_venv=*/true);
  if (!problem.empty()) GTEST_FAIL() << problem;
  const auto cases = testing::hand_written_cases();
  const auto expected = testing::oracle_ids(cases);
  // The check passes the real encoder and this file's special-token cutting around it.
  EXPECT_TRUE(testing::encodes_like_oracle(
      [](std::string_view text, bool parse_special) {
        return with_specials(text, parse_special, [](std::string_view s, std::vector<int32_t>& out) {
          for (const std::string_view piece : tokenizer::pretokenize_smollm(s)) smollm2().encode_piece(piece, out);
        });
      },
      cases, expected));
  const auto ties = testing::encodes_like_oracle(
      [](std::string_view text, bool parse_special) { return with_specials(text, parse_special, rightmost_ties); },
      cases, expected);
  EXPECT_FALSE(ties) << "ties merged rightmost passed the check";
  EXPECT_NE(std::string(ties.message()).find("encode differently"), std::string::npos) << ties.message();
  const auto digits = testing::encodes_like_oracle(
      [](std::string_view text, bool parse_special) { return with_specials(text, parse_special, no_digit_split); },
      cases, expected);
  EXPECT_FALSE(digits) << "the missing digit split passed the check";
  EXPECT_NE(std::string(digits.message()).find("encode differently"), std::string::npos) << digits.message();
}

}  // namespace
}  // namespace inferlab
