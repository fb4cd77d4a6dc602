#pragma once
/// @file request.h
/// A request to the serving engine (chapter 07) and what comes back: the generated tokens, why
/// generation stopped, and the timings that serving metrics are made of (TTFT, TPOT, end-to-end
/// latency — as `vllm bench serve` defines them).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inferlab::engine {

/// How the next token is chosen.
struct SamplingParams {
  int64_t max_new_tokens = 16;    ///< generate at most this many tokens (≥ 1)
  float temperature = 0.0f;       ///< 0: greedy (the first maximum, as llama2.c); > 0: sample softmax(logits / T)
  float top_p = 1.0f;             ///< nucleus: sample among the most likely tokens whose probabilities sum to ≥ top_p
  uint64_t seed = 0;              ///< the request's own random stream (sampling only)
  std::vector<int32_t> stop_ids;  ///< generation stops after emitting one of these (it is kept in the output)
  /// −1: none; k ≥ 0: each delta carries each new token's log-probability and the k most likely
  /// tokens' (at most kMaxLogprobs), under the model's distribution (softmax of the raw logits,
  /// before temperature and top-p — vLLM's default "raw" logprobs).
  int32_t logprobs = -1;
  /// Choices (parallel sampling, the API's `n`): the prompt is prefilled once, then n sequences
  /// sample from its last logits and go on sharing its blocks (BlockManager::fork; the first
  /// write to the shared partial block copies it). Choice i > 0 draws from its own stream,
  /// seeded choice_seed(seed, i). Continuous batching only; n ≤ max_num_seqs.
  int32_t n = 1;

  /// True for temperature 0.
  bool greedy() const { return temperature == 0.0f; }
  /// Throws std::invalid_argument naming a bad field (max_new_tokens < 1, temperature < 0 or
  /// not finite, top_p outside (0, 1], logprobs outside [−1, kMaxLogprobs], n < 1).
  void validate() const;
  /// The most alternatives a token's logprobs may list (OpenAI's top_logprobs limit).
  static constexpr int32_t kMaxLogprobs = 20;
};

/// The seed of choice @p choice of a request seeded @p seed: the seed itself for choice 0, else
/// a splitmix64 step away (each choice its own stream, reproducible from the request's seed).
uint64_t choice_seed(uint64_t seed, int32_t choice);

/// A token and its log-probability.
struct TokenLogprob {
  int32_t id = 0;        ///< the token
  float logprob = 0.0f;  ///< log p(token), natural log
};

/// One generated token's log-probability and the most likely tokens at its position.
struct SampledLogprobs {
  float logprob = 0.0f;           ///< log p of the token chosen
  std::vector<TokenLogprob> top;  ///< the k most likely, by decreasing p (ties: smaller id first)
};

/// One request: a prompt and how to continue it.
struct Request {
  /// A label of the caller's (a trace numbers its requests); the engine does not read it:
  /// Engine::add_request() assigns the request's id and returns it.
  int64_t id = 0;
  std::vector<int32_t> prompt;  ///< token ids, at least one
  SamplingParams sampling;      ///< how to generate
  double arrival = 0.0;         ///< seconds on the engine's clock when it may first be scheduled
  /// "" or a tenant's salt (vLLM's `cache_salt`): its blocks are shared through the prefix cache
  /// only with requests of the same salt (paged::prefix_root()).
  std::string cache_salt;
};

/// Why a request left the engine.
enum class FinishReason {
  length,   ///< max_new_tokens generated
  stop,     ///< a stop id was generated
  aborted,  ///< Engine::abort()
};

/// "length", "stop", "aborted".
std::string_view to_string(FinishReason reason);

/// The timings of one request, in seconds on the engine's clock.
struct RequestMetrics {
  double arrival = 0.0;              ///< when it arrived
  double first_scheduled = -1.0;     ///< when a step first computed any of its tokens (−1: never)
  double first_token = -1.0;         ///< when its first token was generated (−1: none)
  double finish = -1.0;              ///< when it finished or was aborted
  std::vector<double> token_times;   ///< when each generated token came out
  int64_t preemptions = 0;           ///< times its blocks were taken back (recomputed after)
  int64_t cached_prompt_tokens = 0;  ///< prompt tokens served by the prefix cache at first admission
  int64_t computed_tokens = 0;       ///< tokens the model ran for it, recomputation included

  /// Time to first token: first_token − arrival (−1 without a token).
  double ttft() const { return first_token < 0 ? -1.0 : first_token - arrival; }
  /// Time per output token after the first: (finish − first_token) / (tokens − 1); −1 with
  /// fewer than 2 tokens.
  double tpot() const;
  /// End-to-end latency: finish − arrival.
  double latency() const { return finish - arrival; }
};

/// What one step produced for one request (Engine::step()), so a server can stream: its new
/// tokens and, when it left in this step (or was aborted since the last one), why. The deltas of
/// a request, concatenated, are its RequestOutput::tokens; exactly one of them has a finish.
struct RequestDelta {
  int64_t id = 0;                      ///< the request (Engine::add_request()'s id)
  int32_t index = 0;                   ///< the choice (0 … SamplingParams::n − 1): each has its own finish
  std::vector<int32_t> new_tokens;     ///< tokens generated in this step (none when aborted)
  std::vector<SampledLogprobs> logprobs;  ///< one per new token when SamplingParams::logprobs ≥ 0, else empty
  std::optional<FinishReason> finish;  ///< set once: the step in which it left
  RequestMetrics metrics;              ///< with the finish: the choice's timings (queue time, tokens, …); else empty
};

/// A request that left the engine.
struct RequestOutput {
  int64_t id = 0;                              ///< the request's id (Engine::add_request()'s)
  int32_t index = 0;                           ///< the choice (one output per choice)
  std::vector<int32_t> prompt;                 ///< its prompt
  std::vector<int32_t> tokens;                 ///< the generated tokens (not the prompt)
  FinishReason reason = FinishReason::length;  ///< why it stopped
  RequestMetrics metrics;                      ///< its timings
};

}  // namespace inferlab::engine
