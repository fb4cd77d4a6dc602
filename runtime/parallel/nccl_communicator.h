#pragma once
/// @file nccl_communicator.h
/// The communicator over NCCL between GPUs (chapter 10; NCCL ships with the CUDA toolkit): one
/// rank a GPU, each collective the NCCL call of its name on the rank's own CUDA stream, waited
/// for before it returns (the forward's next kernel reads the result). Every buffer is **device
/// memory** of the rank's GPU (cudaMalloc'd): NCCL reads and writes it from the GPU.
///
///     rank 0: ncclGetUniqueId ──broadcast over MPI──▶ every rank: ncclCommInitRank(p, id, rank)
///
/// NCCL has no launcher of its own: the ranks are mpirun's, and the unique id that makes them one
/// NCCL communicator is broadcast over the MPI communicator they already share (@p bootstrap).
/// Its own library (inferlab::parallel_nccl), built when CMake finds nccl.h and libnccl next to
/// the CUDA toolkit; the tests skip (exit 77) on a machine without a GPU.
///
/// NCCL's errors and CUDA's become std::runtime_error naming the call and the library's message;
/// a collective that NCCL reports broken while it waits (a peer gone) aborts the communicator and
/// throws instead of waiting forever. A send to or a receive from one's own rank is refused.

#include <memory>

#include "runtime/collective/communicator.h"

namespace inferlab::parallel {

/// True when this machine has a CUDA device NCCL can use (cudaGetDeviceCount > 0).
bool nccl_device_available();

/// A communicator of @p bootstrap's ranks over NCCL, rank r on GPU @p device (default: r modulo
/// the GPUs of this machine): rank 0 makes the unique id, @p bootstrap broadcasts it, every rank
/// joins (a collective: every rank of @p bootstrap calls it). Throws std::runtime_error when there
/// is no GPU, or NCCL or CUDA fails.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device = -1);

}  // namespace inferlab::parallel
