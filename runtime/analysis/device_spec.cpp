#include "runtime/analysis/device_spec.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace inferlab::analysis {

const std::vector<DeviceSpec>& builtin_devices() {
  // NVIDIA data sheets (A100: "NVIDIA A100 Tensor Core GPU" datasheet; H100/H200: product pages;
  // RTX 4090: "NVIDIA Ada GPU Architecture" whitepaper, appendix table). Dense, no sparsity.
  static const std::string tensor16 = "dense FP16/BF16 tensor, fp32 accumulate";
  static const std::vector<DeviceSpec> devices = {
      {"A100 40GB SXM", "a100-40", 1555, 312e3, 0, 40, tensor16, "NVIDIA spec sheet", false},
      {"A100 80GB SXM", "a100-80", 2039, 312e3, 0, 80, tensor16, "NVIDIA spec sheet", false},
      {"H100 SXM", "h100", 3350, 989e3, 1979e3, 80, tensor16, "NVIDIA spec sheet", false},
      {"H200 SXM", "h200", 4800, 989e3, 1979e3, 141, tensor16, "NVIDIA spec sheet", false},
      {"RTX 4090", "rtx4090", 1008, 165.2e3, 330.3e3, 24, tensor16, "NVIDIA Ada whitepaper", false},
  };
  return devices;
}

DeviceSpec device_from_roofline(const Roofline& roofline, const std::string& source) {
  DeviceSpec device;
  device.name = "this machine (" + (roofline.cpu.empty() ? std::string("CPU") : roofline.cpu) + ")";
  device.key = "this";
  device.bandwidth_gbs = roofline.triad_gbs;
  device.peak_gflops = roofline.peak_gflops;
  device.peak_note = "measured fp32 FMA peak of the CPU (" + std::to_string(roofline.threads) + " threads, " +
                     roofline.simd + "), STREAM triad bandwidth";
  device.source = source;
  device.measured = true;
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
