#pragma once
/// @file report.h
/// What `inferlab analyze` prints: a readable report of an Analysis, the same as JSON, and the
/// list of built-in models and devices.

#include <ostream>
#include <string>

#include "analysis/inference_cost.h"

namespace inferlab::analysis {

/// Writes the readable report of @p analysis: the model and device, the KV cache and how many
/// sequences fit in the memory left after the weights (contiguous slots vs 16-token blocks,
/// chapter 06; when the device's memory is known), the prefill and
/// the decode step (FLOPs, bytes split into weights and KV, AI against the ridge point, the bound
/// and the time and throughput floors), the KV-equals-weights crossover, what int8 weights
/// or an int8 KV cache would buy for the same workload, and the assumptions; warnings (fp8 on a
/// device without FP8 math, a roofline measured under load) come first.
void print_report(std::ostream& out, const Analysis& analysis);

/// The report as one JSON object (numbers in bytes, FLOPs, seconds and tokens/s; no units):
/// model, device, workload, weights, KV cache, prefill, decode, the KV = weights crossover (in
/// cached tokens and as a batch size), "fits" (the verdict, the largest batch and context; null
/// when the device's memory is unknown), "other_formats" (the decode floor with int8 / int4
/// weights and int8 KV), "warnings", "assumptions" and "kv_capacity" (null when the memory is
/// unknown).
std::string to_json(const Analysis& analysis);

/// Writes the built-in models (shape, parameters, KV per token) and devices (ceilings, ridge).
void print_catalog(std::ostream& out);

/// The built-in models and devices and the formats as one JSON object ("models", "devices",
/// "weight_formats", "kv_formats"): what `inferlab analyze --list --json` prints.
std::string catalog_json();

}  // namespace inferlab::analysis
