#include "common/backend.h"

#include "common/check.h"
#include "common/config.h"

namespace inferlab {

#if INFERLAB_WITH_CUDA
namespace cuda {
/// Defined in the nvcc-compiled part of the build: the number of usable GPUs (0 on error).
int device_count();
}  // namespace cuda
#endif

std::string_view to_string(Backend backend) {
  switch (backend) {
    case Backend::cpu: return "cpu";
    case Backend::sim: return "sim";
    case Backend::cuda: return "cuda";
  }
  return "?";
}

Backend parse_backend(std::string_view text) {
  if (text == "cpu") return Backend::cpu;
  if (text == "sim") return Backend::sim;
  if (text == "cuda") return Backend::cuda;
  require(false, "backend", text, "must be one of cpu, sim, cuda");
  return Backend::cpu;
}

std::string backend_unavailable_reason(Backend backend) {
  switch (backend) {
    case Backend::cpu: return "";
    case Backend::sim:
      return "";  // the emulator is part of every build
    case Backend::cuda:
#if INFERLAB_WITH_CUDA
      return cuda::device_count() > 0 ? "" : "no CUDA GPU is visible (cudaGetDeviceCount() = 0)";
#else
      return "this build has no CUDA backend (configured without nvcc: no GPU, INFERLAB_CUDA=OFF or no nvcc; "
             "-DINFERLAB_CUDA=ON compiles it)";
#endif
  }
  return "unknown backend";
}

bool backend_available(Backend backend) { return backend_unavailable_reason(backend).empty(); }

void require_available(Backend backend) {
  const std::string reason = backend_unavailable_reason(backend);
  require(reason.empty(), "backend", to_string(backend), reason);
}

}  // namespace inferlab
