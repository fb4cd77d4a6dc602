#include "analysis/device_spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "analysis/units.h"
#include "common/check.h"

namespace inferlab::analysis {

const std::vector<DeviceSpec>& builtin_devices() {
  // NVIDIA data sheets (A100: "NVIDIA A100 Tensor Core GPU" datasheet; H100/H200: product pages;
  // RTX 4090: "NVIDIA Ada GPU Architecture" whitepaper, appendix table). Dense, no sparsity.
  static const std::string tensor16 = "dense FP16/BF16 tensor, fp32 accumulate";
  static const std::vector<DeviceSpec> devices = {
      {"A100 40GB SXM", "a100-40", 1555, 312e3, 0, 40, tensor16, "NVIDIA spec sheet", false, 19.5e3, 0, ""},
      {"A100 80GB SXM", "a100-80", 2039, 312e3, 0, 80, tensor16, "NVIDIA spec sheet", false, 19.5e3, 0, ""},
      {"H100 SXM", "h100", 3350, 989e3, 1979e3, 80, tensor16, "NVIDIA spec sheet", false, 67e3, 0, ""},
      {"H200 SXM", "h200", 4800, 989e3, 1979e3, 141, tensor16, "NVIDIA spec sheet", false, 67e3, 0, ""},
      {"RTX 4090", "rtx4090", 1008, 165.2e3, 330.3e3, 24, tensor16, "NVIDIA Ada whitepaper", false, 82.6e3, 0, ""},
  };
  return devices;
}

DeviceSpec device_from_roofline(const Roofline& roofline, const std::string& source) {
  DeviceSpec device;
  device.name = "this machine (" + (roofline.cpu.empty() ? std::string("CPU") : roofline.cpu) + ")";
  device.key = "this";
  device.bandwidth_gbs = roofline.triad_gbs;
  device.peak_gflops = roofline.peak_gflops;
  device.read_gbs = roofline.read_gbs > 0 ? roofline.read_gbs : roofline.triad_gbs;
  device.fp32_gflops = roofline.peak_gflops;
  std::ostringstream note;
  note << "measured fp32 FMA peak of the CPU (" << roofline.threads << " threads, " << roofline.simd
       << "); STREAM triad bandwidth for prefill and the ridge point, read bandwidth " << format_number(device.read_gbs)
       << " GB/s for decode";
  if (roofline.runs > 1) note << "; medians of " << roofline.runs << " runs";
  device.peak_note = note.str();
  device.source = source + (roofline.measured_at.empty() ? "" : ", measured " + roofline.measured_at);
  device.measured = true;
  if (roofline.measured_busy()) {
    std::ostringstream caveat;
    caveat << "the roofline in " << source << " was measured under load (load average "
           << format_number(roofline.load_average, 3) << " > " << roofline.threads
           << " threads): its ceilings may read low; rerun `inferlab roofline` on an idle machine";
    device.caveat = caveat.str();
  }
  return device;
}

DeviceSpec custom_device(double bandwidth_gbs, double peak_tflops, double memory_gib) {
  require(std::isfinite(bandwidth_gbs) && bandwidth_gbs > 0, "bandwidth", bandwidth_gbs, "must be > 0 (GB/s)");
  require(std::isfinite(peak_tflops) && peak_tflops > 0, "peak", peak_tflops, "must be > 0 (TFLOP/s)");
  require(std::isfinite(memory_gib) && memory_gib >= 0, "memory", memory_gib, "must be >= 0 (GiB; 0: unknown)");
  DeviceSpec device;
  device.name = "custom device";
  device.key = "custom";
  device.bandwidth_gbs = bandwidth_gbs;
  device.peak_gflops = peak_tflops * 1e3;
  device.memory_gb = memory_gib * (1024.0 * 1024.0 * 1024.0) / 1e9;
  device.peak_note = "given peak (16-bit math, or fp32 for a CPU)";
  device.source = "--bandwidth, --peak, --memory";
  return device;
}

DeviceSpec find_device(const std::string& key, const std::string& roofline_path) {
  std::string wanted = key;
  std::transform(wanted.begin(), wanted.end(), wanted.begin(), [](unsigned char c) { return std::tolower(c); });
  if (wanted == "4090" || wanted == "rtx-4090") wanted = "rtx4090";
  if (wanted == "this" || wanted == "this-machine" || wanted == "cpu") {
    const std::filesystem::path path =
        roofline_path.empty() ? default_roofline_path() : std::filesystem::path(roofline_path);
    const std::optional<Roofline> roofline = load_roofline(path);
    if (!roofline || roofline->peak_gflops <= 0 || roofline->triad_gbs <= 0) {
      throw std::invalid_argument("device = " + key + ": no measured roofline in " + path.string() +
                                  " (run `inferlab roofline` first)");
    }
    return device_from_roofline(*roofline, path.string());
  }
  std::string known;
  for (const DeviceSpec& device : builtin_devices()) {
    if (device.key == wanted) return device;
    known += device.key + ", ";
  }
  throw std::invalid_argument("device = " + key + ": unknown (known: " + known + "this)");
}

}  // namespace inferlab::analysis
