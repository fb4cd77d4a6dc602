#pragma once
/// @file device_spec.h
/// The two ceilings of a device that bound inference time — peak matrix FLOP/s and memory
/// bandwidth — for the GPUs the curriculum cites (NVIDIA spec-sheet values: dense, i.e. without
/// 2:4 sparsity), for this machine (measured by `inferlab roofline`: fp32 FMA peak, STREAM triad
/// and streaming-read bandwidth of the CPU) and for a device given by its ceilings (custom_device).
///
/// | device | memory | bandwidth | 16-bit peak (dense) | FP8 peak (dense) | fp32 (non-tensor) | ridge (16-bit) |
/// | --- | --- | --- | --- | --- | --- | --- |
/// | A100 40GB SXM | 40 GB HBM2 | 1555 GB/s | 312 TFLOP/s | – | 19.5 TFLOP/s | 201 FLOP/byte |
/// | A100 80GB SXM | 80 GB HBM2e | 2039 GB/s | 312 TFLOP/s | – | 19.5 TFLOP/s | 153 |
/// | H100 SXM | 80 GB HBM3 | 3350 GB/s | 989 TFLOP/s | 1979 TFLOP/s | 67 TFLOP/s | 295 |
/// | H200 SXM | 141 GB HBM3e | 4800 GB/s | 989 TFLOP/s | 1979 TFLOP/s | 67 TFLOP/s | 206 |
/// | RTX 4090 | 24 GB GDDR6X | 1008 GB/s | 165.2 TFLOP/s | 330.3 TFLOP/s | 82.6 TFLOP/s | 164 |
///
/// The RTX 4090's 16-bit figure is FP16/BF16 tensor math with **fp32 accumulation** (the Ada
/// whitepaper's "FP16 Tensor TFLOPS with FP32 Accumulate", what cuBLAS and FlashAttention use,
/// and the same convention as the data-centre figures); GeForce cards run fp16-accumulate tensor
/// math at twice that (330.3), and 82.6 TFLOP/s is their non-tensor fp32 / dense TF32 rate.

#include <string>
#include <vector>

#include "common/roofline.h"

namespace inferlab::analysis {

/// One device's ceilings.
struct DeviceSpec {
  std::string name;          ///< display name, e.g. "A100 40GB SXM"
  std::string key;           ///< the name `--device` accepts, e.g. "a100-40"
  double bandwidth_gbs = 0;  ///< main-memory bandwidth, GB/s (10^9 bytes/s)
  double peak_gflops = 0;    ///< dense matrix peak for 16-bit inputs (fp32 for a CPU), GFLOP/s
  double fp8_gflops = 0;     ///< dense FP8 tensor peak, GFLOP/s; 0 when the device has none
  double memory_gb = 0;      ///< device memory, GB (10^9 bytes); 0 when unknown
  std::string peak_note;     ///< what peak_gflops means, e.g. "dense FP16/BF16 tensor, fp32 accumulate"
  std::string source;        ///< where the numbers come from ("spec sheet", or the roofline file)
  bool measured = false;     ///< true for this machine (a measurement, fp32 and CPU), false for a spec sheet
  double fp32_gflops = 0;    ///< dense fp32 (non-tensor) peak, GFLOP/s, for fp32 weights; 0 when unknown
  double read_gbs = 0;       ///< streaming-read bandwidth, GB/s, when measured apart (this machine); 0: bandwidth_gbs
  std::string caveat;        ///< a warning about the figures (a roofline measured under load), or empty

  /// FLOP/byte where the compute and bandwidth roofs meet: peak / bandwidth (16-bit peak).
  double ridge_point() const { return bandwidth_gbs > 0 ? peak_gflops / bandwidth_gbs : 0.0; }
  /// The bandwidth a decode step streams at: read_gbs when measured (a decode step reads the
  /// weights and the KV cache and writes almost nothing), bandwidth_gbs otherwise.
  double decode_bandwidth_gbs() const { return read_gbs > 0 ? read_gbs : bandwidth_gbs; }
};

/// The GPUs of the curriculum's reference table: A100-40, A100-80, H100, H200, RTX 4090.
const std::vector<DeviceSpec>& builtin_devices();

/// The device called @p key (case-insensitive): a built-in, or "this" for this machine, whose
/// ceilings are read from the roofline file at @p roofline_path (default_roofline_path() when
/// empty). Throws std::invalid_argument naming "device" for an unknown key, or naming the file
/// when "this" is asked for and no roofline has been saved (run `inferlab roofline`).
DeviceSpec find_device(const std::string& key, const std::string& roofline_path = "");

/// This machine as a device from @p roofline: fp32 FMA peak, STREAM triad bandwidth (prefill, the
/// ridge point) and streaming-read bandwidth (decode). When the roofline was measured under load
/// (Roofline::measured_busy) the device's caveat says so.
DeviceSpec device_from_roofline(const Roofline& roofline, const std::string& source);

/// A device given by its ceilings: @p bandwidth_gbs GB/s, a 16-bit (or a CPU's fp32) peak of
/// @p peak_tflops TFLOP/s and @p memory_gib GiB of memory (0: unknown). Throws
/// std::invalid_argument naming "bandwidth", "peak" or "memory" for a value out of range.
DeviceSpec custom_device(double bandwidth_gbs, double peak_tflops, double memory_gib);

}  // namespace inferlab::analysis
