#include "runtime/engine/trace.h"

#include <stdexcept>
#include <string>

#include "runtime/engine/metrics.h"
#include "runtime/engine/sampling.h"

namespace inferlab::engine {
namespace {

[[noreturn]] void fail(int64_t line, const std::string& what) {
  throw std::invalid_argument("trace line " + std::to_string(line) + ": " + what);
}

// The token ids of @p key's array (@p values), each a whole number in [0, vocab).
std::vector<int32_t> ids(const Json& values, int64_t line, const char* key, int64_t vocab) {
  if (!values.is_array()) fail(line, std::string(key) + " must be an array (of token ids), not " + values.dump());
  std::vector<int32_t> out;
  for (const Json& value : values) {
    const double v = value.is_number() ? value.get<double>() : -1.0;
    if (!value.is_number() || v != double(int64_t(v)) || v < 0 || v >= double(vocab))
      fail(line,
           std::string(key) + " holds " + value.dump() + ", not a token id in [0, " + std::to_string(vocab) + ")");
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
    const Json fields = parse_json(text, "trace line " + std::to_string(line));
    if (!fields.is_object()) fail(line, "must be a JSON object ({\"key\": value, …}), not " + fields.dump());
    const auto scalar = [&](const char* key, double fallback) {
      const auto it = fields.find(key);
      if (it == fields.end()) return fallback;
      if (!it->is_number()) fail(line, std::string(key) + " must be a number, not " + it->dump());
      return it->get<double>();
    };
    for (const auto& [key, value] : fields.items())
      if (key != "id" && key != "arrival" && key != "prompt_ids" && key != "prompt_len" && key != "max_new_tokens" &&
          key != "temperature" && key != "top_p" && key != "seed" && key != "stop_ids")
        fail(line, "unknown key " + Json(key).dump() +
                       " (known: id, arrival, prompt_ids, prompt_len, max_new_tokens, temperature, top_p, seed, "
                       "stop_ids)");
    Request r;
    r.id = int64_t(scalar("id", double(out.size())));
    r.arrival = scalar("arrival", 0.0);
    r.sampling.max_new_tokens = int64_t(scalar("max_new_tokens", 16));
    r.sampling.temperature = float(scalar("temperature", 0.0));
    r.sampling.top_p = float(scalar("top_p", 1.0));
    r.sampling.seed = uint64_t(scalar("seed", 0.0));
    if (fields.contains("stop_ids")) r.sampling.stop_ids = ids(fields["stop_ids"], line, "stop_ids", vocab_size);
    if (fields.contains("prompt_ids")) {
      r.prompt = ids(fields["prompt_ids"], line, "prompt_ids", vocab_size);
    } else if (fields.contains("prompt_len")) {
      const auto n = int64_t(scalar("prompt_len", 0));
      for (int64_t i = 0; i < n; ++i) r.prompt.push_back(int32_t(next_uniform(state) * double(vocab_size)));
    }
    if (r.prompt.empty()) fail(line, "needs prompt_ids or prompt_len ≥ 1");
    out.push_back(std::move(r));
  }
  return out;
}

Json config_json(const EngineConfig& c) {
  return {{"policy", std::string(to_string(c.policy))},
          {"max_num_seqs", c.max_num_seqs},
          {"max_num_batched_tokens", c.max_num_batched_tokens},
          {"chunk_size", c.chunk_size},
          {"chunked_prefill", c.chunked_prefill},
          {"block_size", c.block_size},
          {"num_blocks", c.num_blocks},
          {"prefix_caching", c.prefix_caching},
          {"max_seq_len", c.max_seq_len},
          {"kv_format", c.kv_format.name()},
          {"backend", std::string(to_string(c.backend))},
          {"clock", c.clock == ClockMode::real ? "real (measured step times, idle gaps skipped)" : "simulated"}};
}

Json run_json(const EngineConfig& c, const EngineStats& s, std::span<const RequestOutput> outputs) {
  const auto figure = [](double value) { return json_number(value, 9); };
  Json json;
  json["config"] = config_json(c);
  json["summary"] = to_json(summarize(outputs));
  json["stats"] = {{"steps", s.steps},
                   {"preemptions", s.preemptions},
                   {"recomputed_tokens", s.recomputed_tokens},
                   {"prefix_hit_tokens", s.prefix_hit_tokens},
                   {"computed_tokens", s.computed_tokens},
                   {"generated_tokens", s.generated_tokens},
                   {"max_running", s.max_running},
                   {"busy_s", figure(s.busy_seconds)}};
  Json requests = Json::array();
  for (const RequestOutput& o : outputs) {
    const RequestMetrics& m = o.metrics;
    requests.push_back({{"id", o.id},
                        {"arrival", figure(m.arrival)},
                        {"first_token", figure(m.first_token)},
                        {"finish", figure(m.finish)},
                        {"ttft", figure(m.ttft())},
                        {"tpot", figure(m.tpot())},
                        {"latency", figure(m.latency())},
                        {"prompt_tokens", o.prompt.size()},
                        {"output_tokens", o.tokens.size()},
                        {"preemptions", m.preemptions},
                        {"cached_prompt_tokens", m.cached_prompt_tokens},
                        {"reason", std::string(to_string(o.reason))},
                        {"tokens", o.tokens}});
  }
  json["requests"] = std::move(requests);
  return json;
}

void write_run_json(std::ostream& out, const EngineConfig& config, const EngineStats& stats,
                    std::span<const RequestOutput> outputs) {
  out << format_json(run_json(config, stats, outputs)) << "\n";
}

}  // namespace inferlab::engine
