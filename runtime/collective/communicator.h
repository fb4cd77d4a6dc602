#pragma once
/// @file communicator.h
/// The collectives a model split over ranks needs (chapter 10), behind one interface with two
/// implementations from existing libraries — MPI between processes on CPUs
/// (runtime/parallel/mpi_communicator.h) and NCCL between GPUs (runtime/parallel/nccl_communicator.h)
/// — and a world of one for a model that is not split (make_single_communicator()). No transport is
/// written here: every call is the library's.
///
/// The interface sits below runtime/model/ in the runtime's folder order (kernels/README.md), in a
/// folder of its own: LlamaModel's forward calls the collectives of a split model through it, and
/// chapter 10's runtime/parallel/ (the MPI and NCCL communicators, the shards and stages, the rank
/// runners) builds on the model.
///
/// Every rank of a world calls the same collectives in the same order with the same sizes (MPI's
/// and NCCL's rule); a rank that breaks it deadlocks or corrupts the others, so the sizes are
/// checked where a call can see them. All buffers are host memory for MPI and device memory for
/// NCCL (the caller's job: the interface carries spans only).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace inferlab::parallel {

/// A group of ranks that can reduce, gather, broadcast and exchange buffers (see the file
/// comment). One host thread at a time per communicator.
class Communicator {
 public:
  virtual ~Communicator() = default;

  /// This rank: 0 … size() − 1.
  virtual int rank() const = 0;
  /// The number of ranks.
  virtual int size() const = 0;
  /// "mpi", "nccl" or "single".
  virtual std::string name() const = 0;

  /// Sums @p data element-wise over all ranks, in place: every rank ends with the same sum. A
  /// ring moves 2(p − 1)/p · data.size_bytes() per rank.
  virtual void all_reduce_sum(std::span<float> data) = 0;
  /// Gathers each rank's @p mine (the same size on every rank) into @p all, rank 0's first:
  /// all.size() == size() · mine.size().
  virtual void all_gather(std::span<const float> mine, std::span<float> all) = 0;
  /// Copies @p root's @p data to every rank (the same size everywhere).
  virtual void broadcast(std::span<uint8_t> data, int root) = 0;
  /// Sends @p data to rank @p to (blocking until the buffer may be reused).
  virtual void send(std::span<const float> data, int to) = 0;
  /// Receives exactly data.size() floats from rank @p from.
  virtual void recv(std::span<float> data, int from) = 0;
  /// Waits until every rank has called it.
  virtual void barrier() = 0;
};

/// A world of one rank (rank 0, size 1): every collective is a copy or nothing. What a model
/// that is not split runs with.
std::unique_ptr<Communicator> make_single_communicator();

/// Broadcasts a byte vector of any length from @p root: its size first, then its bytes (the
/// other ranks' @p bytes are resized). What rank 0 uses to send each step's plan. Host memory: for
/// communicators over host buffers (MPI's, the world of one), not NCCL's.
void broadcast_vector(Communicator& comm, std::vector<uint8_t>& bytes, int root);

}  // namespace inferlab::parallel
