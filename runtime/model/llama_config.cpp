#include "runtime/model/llama_config.h"

#include <charconv>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "common/check.h"

namespace inferlab::model {

int64_t LlamaConfig::parameters() const {
  // wq [q_dim, dim], wk and wv [kv_dim, dim], wo [dim, q_dim], w1 and w3 [hidden, dim], w2 [dim, hidden]
  const int64_t per_layer = 2 * q_dim() * dim + 2 * kv_dim() * dim + 3 * hidden_dim * dim;
  return vocab_size * dim * (shared_classifier ? 1 : 2) + n_layers * per_layer + norm_parameters();
}

int64_t LlamaConfig::weight_bytes(WeightFormat format) const {
  // Exact per matrix (block formats' bytes a weight are fractional): rows · bytes of a row.
  auto m = [&](int64_t out, int64_t in) { return out * weight_row_bytes(format, in); };
  const int64_t per_layer =
      m(q_dim(), dim) + 2 * m(kv_dim(), dim) + m(dim, q_dim()) + 2 * m(hidden_dim, dim) + m(dim, hidden_dim);
  return m(vocab_size, dim) * (shared_classifier ? 1 : 2) + n_layers * per_layer + 4 * norm_parameters();
}

void LlamaConfig::validate() const {
  require_positive("dim", dim);
  require_positive("hidden_dim", hidden_dim);
  require_positive("n_layers", n_layers);
  require_positive("n_heads", n_heads);
  require_positive("n_kv_heads", n_kv_heads);
  require_positive("vocab_size", vocab_size);
  require_positive("max_seq_len", max_seq_len);
  require(head_dim_size >= 0, "head_dim", head_dim_size, "must be > 0, or 0 for dim / n_heads");
  if (head_dim_size == 0)
    require(dim % n_heads == 0, "n_heads", n_heads, "must divide dim = " + std::to_string(dim) + " (or set head_dim)");
  require(n_heads % n_kv_heads == 0, "n_kv_heads", n_kv_heads, "must divide n_heads = " + std::to_string(n_heads));
  require(head_dim() % 2 == 0, head_dim_size > 0 ? "head_dim" : "head_dim (dim / n_heads)", head_dim(),
          "must be even (RoPE rotates pairs)");
  require(rope_style == RopeStyle::adjacent || rope_style == RopeStyle::half_split, "rope_style", int(rope_style),
          "must be adjacent or half_split");
  require(std::isfinite(rope_theta) && rope_theta > 0.0, "rope_theta", rope_theta, "must be finite and > 0");
  require(std::isfinite(norm_eps) && norm_eps > 0.0f, "norm_eps", norm_eps, "must be finite and > 0");
}

std::string LlamaConfig::describe() const {
  std::ostringstream s;
  s << "dim " << dim << ", hidden " << hidden_dim << ", " << n_layers << " layers, " << n_heads << " heads / "
    << n_kv_heads << " KV heads (head_dim " << head_dim();
  if (q_dim() != dim) s << ", q_dim " << q_dim();
  s << "), vocab " << vocab_size << ", " << max_seq_len << " positions, " << (shared_classifier ? "tied" : "separate")
    << " output head";
  if (rope_style != RopeStyle::adjacent || rope_theta != 10000.0)
    s << ", RoPE " << to_string(rope_style) << " θ " << rope_theta;
  return s.str();
}

namespace {

LlamaConfig preset(std::string_view name) {
  LlamaConfig c;
  if (name == "tiny") {
    c.dim = 32, c.hidden_dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.vocab_size = 64;
    c.max_seq_len = 256;
    c.shared_classifier = false;  // tied, a random model this small mostly repeats its input token
  } else if (name == "stories260K") {
    c.dim = 64, c.hidden_dim = 172, c.n_layers = 5, c.n_heads = 8, c.n_kv_heads = 4, c.vocab_size = 512;
    c.max_seq_len = 512;
  } else if (name == "bench") {
    c.dim = 768, c.hidden_dim = 2048, c.n_layers = 12, c.n_heads = 12, c.n_kv_heads = 4, c.vocab_size = 32000;
    c.max_seq_len = 2048;
  } else {
    throw std::invalid_argument("random model preset = " + std::string(name) +
                                ": unknown (known: tiny, stories260K, bench)");
  }
  return c;
}

int64_t parse_int(std::string_view key, std::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size())
    throw std::invalid_argument("random model " + std::string(key) + " = " + std::string(text) + ": not an integer");
  return value;
}

double parse_double(std::string_view key, std::string_view text) {
  double value = 0.0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size())
    throw std::invalid_argument("random model " + std::string(key) + " = " + std::string(text) + ": not a number");
  return value;
}

}  // namespace

RandomModelSpec parse_random_spec(std::string_view spec) {
  constexpr std::string_view kPrefix = "random:";
  if (spec.substr(0, kPrefix.size()) != kPrefix)
    throw std::invalid_argument("model = " + std::string(spec) +
                                ": a random model is named random:<preset>[,key=value…]");
  spec.remove_prefix(kPrefix.size());
  RandomModelSpec out{preset("tiny"), 1};
  bool first = true;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      if (!first) throw std::invalid_argument("random model option = " + std::string(item) + ": expected key=value");
      out.config = preset(item);
      first = false;
      continue;
    }
    first = false;
    const std::string_view key = item.substr(0, eq), text = item.substr(eq + 1);
    LlamaConfig& c = out.config;
    if (key == "rope") {
      try {
        c.rope_style = parse_rope_style(text);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("random model rope = " + std::string(text) + ": " + e.what());
      }
      continue;
    }
    if (key == "theta") {
      c.rope_theta = parse_double(key, text);
      require(std::isfinite(c.rope_theta) && c.rope_theta > 0.0, "random model theta", c.rope_theta,
              "must be finite and > 0");
      continue;
    }
    const int64_t value = parse_int(key, text);
    if (key == "dim")
      c.dim = value;
    else if (key == "hidden")
      c.hidden_dim = value;
    else if (key == "layers")
      c.n_layers = value;
    else if (key == "heads")
      c.n_heads = value;
    else if (key == "kv_heads")
      c.n_kv_heads = value;
    else if (key == "vocab")
      c.vocab_size = value;
    else if (key == "seq_len")
      c.max_seq_len = value;
    else if (key == "head_dim") {
      require(value >= 0 && value % 2 == 0, "random model head_dim", value, "must be even, or 0 for dim / heads");
      c.head_dim_size = value;
    } else if (key == "seed")
      out.seed = uint64_t(value);
    else if (key == "tied") {
      require(value == 0 || value == 1, "random model tied", value, "must be 0 or 1");
      c.shared_classifier = value == 1;
    } else {
      throw std::invalid_argument(
          "random model key = " + std::string(key) +
          ": unknown (known: dim, hidden, layers, heads, kv_heads, vocab, seq_len, seed, tied, head_dim, rope, theta)");
    }
  }
  out.config.validate();
  return out;
}

}  // namespace inferlab::model
