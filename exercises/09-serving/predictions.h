#pragma once
/// @file 09-serving/predictions.h
/// Chapter 09 — predict, then measure. Each function is a question about a server under load:
/// work the number out from the lesson (chapters/09-serving/README.md; chapters 07 and 08 for a
/// decode step's bytes), write it as a formula in `predictions.cpp`, then run the measurement
/// named in its comment and compare. The graded tests (tests/09-serving/test_predictions.cpp)
/// ask each question over several scenarios — this machine's SmolLM2 server, a GPU-sized one,
/// odd ones, fresh random ones — and accept an answer within 1%. Units: seconds, requests/s,
/// tokens/s, bytes, GB/s = 1e9 bytes/s.
///
/// The four questions chain: P9.1 gives a decode step's time at a batch (the TPOT every stream of
/// the batch sees), P9.2 the request rate at which that batch saturates the server, P9.3 the time
/// to the first token of a request that arrives behind a queue, P9.4 how many requests a rate
/// keeps in flight (Little's law) — which is what `--max-num-seqs` and `--max-waiting` must hold.

#include <cstdint>

namespace inferlab::student {

/// Prediction P9.1 — TPOT (time per output token, seconds) of every stream in a decode batch of
/// @p batch sequences, each with @p context cached tokens, on a machine that reads
/// @p bandwidth_gbs GB/s, at the memory roof: one step reads the weights once for the whole
/// batch (@p weight_bytes, chapter 08's P8.1) and every sequence's KV cache (@p kv_bytes_per_token
/// a token, chapter 08's P8.3), and produces one token per sequence.
/// Worked example: SmolLM2 as shipped (96.6 MB of weights, fp32 KV: 46,080 bytes a token), batch
/// 8 at context 512 on this machine's 33.5 GB/s: (96.6e6 + 8 · 512 · 46,080) / 33.5e9 = 8.52 ms.
/// Then measure: `tools/bench_serve.py --concurrency 8` against `./inferlab serve` reports the
/// TPOT of 8 streams at once (`./inferlab roofline` prints this machine's read bandwidth).
double predict_tpot_seconds(double weight_bytes, double kv_bytes_per_token, int64_t batch, int64_t context,
                            double bandwidth_gbs);

/// Prediction P9.2 — the request rate (requests/s) at which a decode-bound server saturates: it
/// runs at most @p max_batch requests at once, each step takes @p step_seconds (the TPOT at that
/// batch) and every request needs @p output_tokens decode steps (prefill left out). Above this
/// rate the waiting queue grows without bound — the admission control of exercise 9.3 refuses
/// what it cannot hold.
/// Worked example: 8 sequences, 8.52 ms a step, 128 tokens a reply: 8 / (128 · 0.00852) = 7.34
/// requests/s.
/// Then measure: `tools/bench_serve.py` at rising request rates: the throughput stops growing
/// and the TTFT climbs near this rate.
double predict_saturation_rate(double step_seconds, int64_t max_batch, int64_t output_tokens);

/// Prediction P9.3 — TTFT (seconds) of a request that arrives with @p requests_ahead requests
/// waiting before it, at a server that finishes @p completion_rate requests/s (P9.2's rate when
/// full): it waits for them to leave, then its prompt of @p prompt_tokens is prefilled at
/// @p prefill_tokens_per_second, and the first token comes out of the prefill's last logits.
/// Worked example: 4 ahead, 7.34 requests/s, a 300-token prompt at 400 prefill tokens/s: 4 / 7.34
/// + 300 / 400 = 1.30 s.
/// Then measure: `vllm:time_to_first_token_seconds` and `vllm:request_queue_time_seconds` in
/// `GET /metrics` under load.
double predict_ttft_seconds(int64_t requests_ahead, double completion_rate, int64_t prompt_tokens,
                            double prefill_tokens_per_second);

/// Prediction P9.4 — Little's law: the requests in flight (L = λ · W) at an arrival rate of
/// @p arrival_rate requests/s when each request takes W = TTFT + (n − 1) · TPOT seconds for a
/// reply of n = @p output_tokens tokens (the first comes at TTFT, each later one a TPOT after the
/// one before).
/// Worked example: 5 requests/s, TTFT 0.2 s, TPOT 8.52 ms, 128 tokens: W = 0.2 + 127 · 0.00852 =
/// 1.28 s, L = 6.41 requests in flight.
/// Then measure: `vllm:num_requests_running` + `vllm:num_requests_waiting` in `GET /metrics`
/// while `tools/bench_serve.py` sends at that rate.
double predict_requests_in_flight(double arrival_rate, double ttft_seconds, double tpot_seconds, int64_t output_tokens);

}  // namespace inferlab::student
