#include "tools/cli/model_tokenizer.h"

#include <filesystem>
#include <stdexcept>

#include "runtime/gguf/gguf.h"
#include "runtime/model/gguf_model.h"
#include "runtime/tokenizer/vocabulary.h"

namespace inferlab::cli {

tokenizer::BpeTokenizer model_tokenizer(const std::string& model, const std::string& option) {
  const bool random = model.rfind("random:", 0) == 0;
  if (random || (std::filesystem::is_regular_file(model) && !model::is_gguf_path(model)))
    throw std::invalid_argument(option + ": the model " + model + " has no tokenizer (" +
                                (random ? "random weights take" : "a llama2.c checkpoint, not GGUF, takes") +
                                " token ids only): text needs a GGUF model such as smollm2 (token ids: generate "
                                "--prompt-ids)");
  return tokenizer::BpeTokenizer(tokenizer::vocabulary_from_gguf(gguf::GgufFile::open(model)));
}

}  // namespace inferlab::cli
