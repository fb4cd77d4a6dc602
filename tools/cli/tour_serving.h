#pragma once
/// @file tour_serving.h
/// Chapter 09's part of `inferlab tour` (it lives with the server in tools/cli, the layer above
/// the chapters, because it runs the server itself).

#include <ostream>

#include "chapters/tour.h"

namespace inferlab::cli {

/// Chapter 09: `inferlab serve`'s routes and engine in this process on a free loopback port;
/// one chat request through HTTP (its answer and usage); then the load generator
/// (tools/bench_serve.py, with build/venv's Python: skipped with a message when ./inferlab setup
/// has not installed it) sends a handful of streamed requests of ShareGPT-like lengths, cut
/// short, and prints vllm bench serve's table; then the server's own view, from its Prometheus
/// metrics: requests by finish reason, tokens, preemptions and the mean of each latency
/// histogram. Skipped with a message when SmolLM2 is not installed. A few seconds.
void tour_chapter09(std::ostream& out, const TourOptions& options);

}  // namespace inferlab::cli
