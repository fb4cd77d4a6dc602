#pragma once
// cuBLAS helpers shared by the CUDA versions (compiled for both sim and cuda; see simt/cublas.h):
// an error check that throws, and an owning handle.
#include <stdexcept>
#include <string>

#include "simt/cublas.h"
#include "simt/device_buffer.h"

namespace inferlab::INFERLAB_BACKEND_NS {

// Throws std::runtime_error("<what>: cuBLAS status <n>") unless @p status is CUBLAS_STATUS_SUCCESS.
inline void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(status)));
}

// A cuBLAS handle, destroyed with the object. Creating one costs milliseconds (it allocates a
// workspace and loads kernels): make one per program or per benchmark, not one per call.
class CublasHandle {
 public:
  CublasHandle() { check_cublas(cublasCreate(&handle_), "cublasCreate"); }
  ~CublasHandle() { cublasDestroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

}  // namespace inferlab::INFERLAB_BACKEND_NS
