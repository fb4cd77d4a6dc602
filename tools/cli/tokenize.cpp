// `inferlab tokenize` (chapter 08): a GGUF model's tokenizer from the command line — text to ids,
// ids to text.
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "common/args.h"
#include "common/check.h"
#include "runtime/tokenizer/bpe_tokenizer.h"
#include "tools/cli/commands.h"
#include "runtime/model/model_files.h"
#include "tools/cli/model_tokenizer.h"
#include "tools/cli/token_ids.h"

namespace inferlab::cli {
namespace {

const char* kTokenizeUsage = R"(usage: inferlab tokenize --model M (--text TEXT | --decode IDS) [--no-special]

  --model M        a GGUF file with a byte-level BPE tokenizer (tokenizer.ggml.model gpt2, pre smollm),
                   or smollm2 (models/SmolLM2-135M-Instruct.Q4_1.gguf, installed by ./inferlab setup)
  --text TEXT      print TEXT's token ids, space-separated, on one line: BOS first only when the
                   vocabulary says add_bos (SmolLM2: no); special tokens such as <|im_start|> written
                   in TEXT are those tokens
  --no-special     with --text: special tokens written in TEXT are plain text
  --decode IDS     print the text of IDS (comma- or space-separated), then a newline; special tokens
                   print as their text
)";

}  // namespace

int tokenize(const std::vector<std::string>& argv) {
  const Args args(argv, {"no-special"});
  if (args.help()) {
    std::cout << kTokenizeUsage;
    return 0;
  }
  args.check_known({"model", "text", "decode", "no-special"});
  if (args.has("text") == args.has("decode")) throw std::invalid_argument("give exactly one of --text and --decode");
  const std::string path = model::resolve_model_path(args.required("model"));
  const tokenizer::BpeTokenizer tokenizer = model_tokenizer(path, "--model");
  if (args.has("decode")) {
    std::cout << tokenizer.decode(token_id_list("decode", *args.get("decode"))) << "\n";
    return 0;
  }
  const std::string text = *args.get("text");
  std::vector<int32_t> ids;
  if (tokenizer.vocabulary().add_bos) ids.push_back(tokenizer.vocabulary().bos_id);
  for (const int32_t id : tokenizer.encode(text, !args.has("no-special"))) ids.push_back(id);
  std::string line;
  for (const int32_t id : ids) {
    if (!line.empty()) line += ' ';
    line += std::to_string(id);
  }
  std::cout << line << "\n";
  return 0;
}

}  // namespace inferlab::cli
