#pragma once
/// @file device_runner.h
/// The resident model runner of the sim and cuda backends (model_runner.h; device_runner.cu is
/// compiled twice: by g++ into namespace inferlab::sim for the SIMT emulator and, with nvcc, into
/// inferlab::cuda). Use engine::make_model_runner()
/// (runtime/engine/make_model_runner.h), which picks it by backend.

#include <memory>

#include "kernels/kv/kv_layout.h"
#include "runtime/model/llama_model.h"
#include "runtime/model/model_runner.h"

/// Declares the device runner's factory in namespace inferlab::NS.
#define INFERLAB_DECLARE_DEVICE_RUNNER(NS)                                                            \
  namespace inferlab::NS {                                                                            \
  /* Uploads the weights of `model` and allocates a poisoned fp32 KV pool of `shape` and `paging`    \
     on the device (sizes checked by engine::make_model_runner). */                                          \
  std::unique_ptr<model::ModelRunner> make_device_runner(const model::LlamaModel& model,              \
                                                         const KvCacheShape& shape, const KvPaging& paging); \
  }

/// @cond INTERNAL
INFERLAB_DECLARE_DEVICE_RUNNER(sim)
INFERLAB_DECLARE_DEVICE_RUNNER(cuda)
/// @endcond
