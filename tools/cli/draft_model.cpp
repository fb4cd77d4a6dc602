#include "tools/cli/draft_model.h"

#include <filesystem>
#include <stdexcept>

#include "runtime/gguf/gguf.h"
#include "runtime/model/gguf_model.h"
#include "runtime/model/model_files.h"
#include "runtime/tokenizer/vocabulary.h"

namespace inferlab::cli {
namespace {

bool has_tokenizer(const std::string& model) {
  return model.rfind("random:", 0) != 0 && model::is_gguf_path(model);
}

[[noreturn]] void differ(const std::string& draft, const std::string& what) {
  throw std::invalid_argument("--draft-model " + draft + ": its tokenizer differs from the target's (" + what +
                              "): a draft's guesses are token ids the target must read as its own");
}

}  // namespace

void check_same_tokenizer(const std::string& target, const std::string& draft) {
  if (target == draft) return;
  const bool t = has_tokenizer(target), d = has_tokenizer(draft);
  if (t != d) differ(draft, std::string(t ? "the target has a GGUF tokenizer, the draft none"
                                          : "the draft has a GGUF tokenizer, the target none"));
  if (!t) return;  // token ids only: the engine compares the vocabulary sizes
  const tokenizer::Vocabulary a = tokenizer::vocabulary_from_gguf(gguf::GgufFile::open(target));
  const tokenizer::Vocabulary b = tokenizer::vocabulary_from_gguf(gguf::GgufFile::open(draft));
  if (a.size() != b.size())
    differ(draft, std::to_string(b.size()) + " tokens, the target " + std::to_string(a.size()));
  for (int32_t i = 0; i < a.size(); ++i)
    if (a.tokens[size_t(i)] != b.tokens[size_t(i)])
      differ(draft, "token " + std::to_string(i) + " is '" + b.tokens[size_t(i)] + "', the target's '" +
                        a.tokens[size_t(i)] + "'");
  if (a.pre != b.pre) differ(draft, "pre-tokenizer " + b.pre + ", the target's " + a.pre);
  if (a.bos_id != b.bos_id || a.eos_id != b.eos_id) differ(draft, "bos/eos ids");
  if (a.merges != b.merges) differ(draft, "merges");
}

std::unique_ptr<model::LlamaModel> load_draft_model(const EngineOptions& options, const std::string& target_path) {
  if (options.config.speculative.method != engine::SpeculativeMethod::draft) return nullptr;
  const std::string path = options.draft_model.empty() ? target_path : model::resolve_model_path(options.draft_model);
  check_same_tokenizer(target_path, path);
  return std::make_unique<model::LlamaModel>(model::load_model(path, options.draft_weights));
}

}  // namespace inferlab::cli
