#include "tools/cli/text_stream.h"

#include <algorithm>
#include <utility>

namespace inferlab::cli {

TextStream::TextStream(const tokenizer::BpeTokenizer& tokenizer, std::ostream& out, std::vector<int32_t> hidden)
    : detokenizer_(tokenizer), out_(&out), hidden_(std::move(hidden)) {}

void TextStream::push(std::span<const int32_t> tokens) {
  std::string piece;
  for (const int32_t id : tokens)
    if (std::find(hidden_.begin(), hidden_.end(), id) == hidden_.end()) piece += detokenizer_.push(id);
  if (piece.empty()) return;
  text_ += piece;
  *out_ << piece << std::flush;  // a reader sees each token as soon as its characters are whole
}

void TextStream::finish() {
  const std::string rest = detokenizer_.flush();
  text_ += rest;
  *out_ << rest << std::flush;
}

}  // namespace inferlab::cli
