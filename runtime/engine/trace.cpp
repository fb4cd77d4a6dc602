#include "runtime/engine/trace.h"

#include <cctype>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <variant>

#include "runtime/engine/metrics.h"
#include "runtime/engine/sampling.h"

namespace inferlab::engine {
namespace {

using Value = std::variant<double, std::vector<double>>;

// A reader for the flat objects a trace line holds: string keys, number or number-array values.
class LineParser {
 public:
  LineParser(const std::string& text, int64_t line) : text_(text), line_(line) {}

  std::map<std::string, Value> object() {
    std::map<std::string, Value> out;
    expect('{');
    skip_space();
    if (peek() == '}') return ++pos_, out;
    while (true) {
      const std::string key = string();
      expect(':');
      skip_space();
      out[key] = peek() == '[' ? Value(array()) : Value(number());
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect('}');
      break;
    }
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the object");
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("trace line " + std::to_string(line_) + ", column " + std::to_string(pos_ + 1) +
                                ": " + what);
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string() {
    expect('"');
    const size_t end = text_.find('"', pos_);
    if (end == std::string::npos) fail("unterminated string");
    std::string s = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  double number() {
    const char* begin = text_.c_str() + pos_;
    char* end = nullptr;
    const double v = std::strtod(begin, &end);
    if (end == begin) fail("expected a number");
    pos_ += size_t(end - begin);
    return v;
  }
  std::vector<double> array() {
    std::vector<double> out;
    expect('[');
    skip_space();
    if (peek() == ']') return ++pos_, out;
    while (true) {
      skip_space();
      out.push_back(number());
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      expect(']');
      return out;
    }
  }
  const std::string& text_;
  int64_t line_;
  size_t pos_ = 0;
};

std::vector<int32_t> ids(const std::vector<double>& values, int64_t line, const char* key, int64_t vocab) {
  std::vector<int32_t> out;
  for (const double v : values) {
    if (v != double(int64_t(v)) || v < 0 || v >= double(vocab))
      throw std::invalid_argument("trace line " + std::to_string(line) + ": " + key + " holds " + std::to_string(v) +
                                  ", not a token id in [0, " + std::to_string(vocab) + ")");
    out.push_back(int32_t(v));
  }
  return out;
}

}  // namespace

std::vector<Request> read_trace(std::istream& in, int64_t vocab_size, uint64_t seed) {
  std::vector<Request> out;
  std::string text;
  uint64_t state = seed;
  for (int64_t line = 1; std::getline(in, text); ++line) {
    const size_t first = text.find_first_not_of(" \t\r");
    if (first == std::string::npos || text[first] == '#') continue;
    const auto fields = LineParser(text, line).object();
    const auto scalar = [&](const char* key, double fallback) {
      const auto it = fields.find(key);
      if (it == fields.end()) return fallback;
      if (!std::holds_alternative<double>(it->second))
        throw std::invalid_argument("trace line " + std::to_string(line) + ": " + key + " must be a number");
      return std::get<double>(it->second);
    };
    const auto list = [&](const char* key) -> const std::vector<double>* {
      const auto it = fields.find(key);
      if (it == fields.end()) return nullptr;
      if (!std::holds_alternative<std::vector<double>>(it->second))
        throw std::invalid_argument("trace line " + std::to_string(line) + ": " + key + " must be an array");
      return &std::get<std::vector<double>>(it->second);
    };
    for (const auto& [key, value] : fields)
      if (key != "id" && key != "arrival" && key != "prompt_ids" && key != "prompt_len" && key != "max_new_tokens" &&
          key != "temperature" && key != "top_p" && key != "seed" && key != "stop_ids")
        throw std::invalid_argument("trace line " + std::to_string(line) + ": unknown key \"" + key +
                                    "\" (known: id, arrival, prompt_ids, prompt_len, max_new_tokens, "
                                    "temperature, top_p, seed, stop_ids)");
    Request r;
    r.id = int64_t(scalar("id", double(out.size())));
    r.arrival = scalar("arrival", 0.0);
    r.sampling.max_new_tokens = int64_t(scalar("max_new_tokens", 16));
    r.sampling.temperature = float(scalar("temperature", 0.0));
    r.sampling.top_p = float(scalar("top_p", 1.0));
    r.sampling.seed = uint64_t(scalar("seed", 0.0));
    if (const auto* stops = list("stop_ids")) r.sampling.stop_ids = ids(*stops, line, "stop_ids", vocab_size);
    if (const auto* prompt = list("prompt_ids")) {
      r.prompt = ids(*prompt, line, "prompt_ids", vocab_size);
    } else if (fields.contains("prompt_len")) {
      const auto n = int64_t(scalar("prompt_len", 0));
      for (int64_t i = 0; i < n; ++i) r.prompt.push_back(int32_t(next_uniform(state) * double(vocab_size)));
    }
    if (r.prompt.empty())
      throw std::invalid_argument("trace line " + std::to_string(line) + ": needs prompt_ids or prompt_len ≥ 1");
    out.push_back(std::move(r));
  }
  return out;
}

void write_run_json(std::ostream& out, const EngineConfig& c, const EngineStats& s,
                    std::span<const RequestOutput> outputs) {
  out.precision(9);
  out << "{\n  \"config\": {\"policy\": \"" << to_string(c.policy) << "\", \"max_num_seqs\": " << c.max_num_seqs
      << ", \"max_num_batched_tokens\": " << c.max_num_batched_tokens << ", \"chunk_size\": " << c.chunk_size
      << ", \"chunked_prefill\": " << (c.chunked_prefill ? "true" : "false") << ", \"block_size\": " << c.block_size
      << ", \"num_blocks\": " << c.num_blocks << ", \"prefix_caching\": " << (c.prefix_caching ? "true" : "false")
      << ", \"max_seq_len\": " << c.max_seq_len << ", \"clock\": \""
      << (c.clock == ClockMode::real ? "real (measured step times, idle gaps skipped)" : "simulated") << "\"},\n";
  out << "  \"summary\": " << to_json(summarize(outputs)) << ",\n";
  out << "  \"stats\": {\"steps\": " << s.steps << ", \"preemptions\": " << s.preemptions
      << ", \"recomputed_tokens\": " << s.recomputed_tokens << ", \"prefix_hit_tokens\": " << s.prefix_hit_tokens
      << ", \"computed_tokens\": " << s.computed_tokens << ", \"generated_tokens\": " << s.generated_tokens
      << ", \"max_running\": " << s.max_running << ", \"busy_s\": " << s.busy_seconds << "},\n";
  out << "  \"requests\": [";
  for (size_t i = 0; i < outputs.size(); ++i) {
    const RequestOutput& o = outputs[i];
    const RequestMetrics& m = o.metrics;
    out << (i ? ",\n    " : "\n    ") << "{\"id\": " << o.id << ", \"arrival\": " << m.arrival
        << ", \"first_token\": " << m.first_token << ", \"finish\": " << m.finish << ", \"ttft\": " << m.ttft()
        << ", \"tpot\": " << m.tpot() << ", \"latency\": " << m.latency() << ", \"prompt_tokens\": " << o.prompt.size()
        << ", \"output_tokens\": " << o.tokens.size() << ", \"preemptions\": " << m.preemptions
        << ", \"cached_prompt_tokens\": " << m.cached_prompt_tokens << ", \"reason\": \"" << to_string(o.reason)
        << "\", \"tokens\": [";
    for (size_t t = 0; t < o.tokens.size(); ++t) out << (t ? ", " : "") << o.tokens[t];
    out << "]}";
  }
  out << "\n  ]\n}\n";
}

}  // namespace inferlab::engine
