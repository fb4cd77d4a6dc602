#include "runtime/tokenizer/detokenizer.h"

#include "runtime/tokenizer/utf8.h"

namespace inferlab::tokenizer {

std::string IncrementalDetokenizer::push(int32_t id) {
  pending_ += tokenizer_->token_bytes(id);  // throws before changing anything
  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const Utf8Char c = decode_utf8(pending_, pos);
    if (c.status == Utf8Status::truncated) break;  // the next token may complete it
    if (c.status == Utf8Status::ok) {
      out.append(pending_, pos, c.length);
    } else {
      append_utf8(out, 0xFFFD);
    }
    pos += c.length;
  }
  pending_.erase(0, pos);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out = to_valid_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace inferlab::tokenizer
