// The communicator over NCCL (nccl_communicator.h): each call is NCCL's on the rank's stream,
// then a wait that polls NCCL's asynchronous error (a dead peer aborts, never hangs).
#include "runtime/parallel/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/check.h"

namespace inferlab::parallel {
namespace {

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(call) + ": " + cudaGetErrorString(status));
}

void check_nccl(ncclResult_t status, const char* call) {
  if (status != ncclSuccess) throw std::runtime_error(std::string(call) + ": " + ncclGetErrorString(status));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, int device) : rank_(bootstrap.rank()), size_(bootstrap.size()) {
    int devices = 0;
    check_cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    if (devices == 0) throw std::runtime_error("make_nccl_communicator: this machine has no CUDA device");
    device_ = device >= 0 ? device : rank_ % devices;
    require(device_ < devices, "device", device_, "must be one of this machine's " + std::to_string(devices) + " GPUs");
    require(device >= 0 || size_ <= devices, "ranks", size_,
            "exceed this machine's " + std::to_string(devices) + " GPUs: NCCL runs one rank a GPU");
    check_cuda(cudaSetDevice(device_), "cudaSetDevice");
    ncclUniqueId id;
    if (rank_ == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    bootstrap.broadcast(std::span(reinterpret_cast<uint8_t*>(&id), sizeof id), 0);  // the id over MPI
    check_nccl(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
    try {
      check_cuda(cudaStreamCreate(&stream_), "cudaStreamCreate");
      check_cuda(cudaMalloc(&scratch_, sizeof(float)), "cudaMalloc");
    } catch (...) {  // the destructor will not run: release what was made
      release();
      throw;
    }
  }
  ~NcclCommunicator() override { release(); }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl"; }

  void all_reduce_sum(std::span<float> data) override {
    check_nccl(ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat, ncclSum, comm_, stream_),
               "ncclAllReduce");
    wait("ncclAllReduce");
  }
  void all_gather(std::span<const float> mine, std::span<float> all) override {
    require(all.size() == mine.size() * size_t(size_), "all.size()", all.size(),
            "must be size() · mine.size() = " + std::to_string(mine.size() * size_t(size_)));
    check_nccl(ncclAllGather(mine.data(), all.data(), mine.size(), ncclFloat, comm_, stream_), "ncclAllGather");
    wait("ncclAllGather");
  }
  void broadcast(std::span<uint8_t> data, int root) override {
    require(root >= 0 && root < size_, "root", root, "must be a rank in [0, " + std::to_string(size_) + ")");
    check_nccl(ncclBroadcast(data.data(), data.data(), data.size(), ncclUint8, root, comm_, stream_), "ncclBroadcast");
    wait("ncclBroadcast");
  }
  void send(std::span<const float> data, int to) override {
    require(to >= 0 && to < size_ && to != rank_, "to", to,
            "must be another rank in [0, " + std::to_string(size_) + ") (a send to oneself waits forever)");
    check_nccl(ncclSend(data.data(), data.size(), ncclFloat, to, comm_, stream_), "ncclSend");
    wait("ncclSend");
  }
  void recv(std::span<float> data, int from) override {
    require(from >= 0 && from < size_ && from != rank_, "from", from,
            "must be another rank in [0, " + std::to_string(size_) + ") (a receive from oneself waits forever)");
    check_nccl(ncclRecv(data.data(), data.size(), ncclFloat, from, comm_, stream_), "ncclRecv");
    wait("ncclRecv");
  }
  void barrier() override {  // NCCL has none: an all-reduce of one float every rank must join
    check_nccl(ncclAllReduce(scratch_, scratch_, 1, ncclFloat, ncclSum, comm_, stream_), "ncclAllReduce (barrier)");
    wait("barrier");
  }

 private:
  // Waits for the call on the stream, polling NCCL's asynchronous error: a peer that died or a
  // broken link aborts the communicator and throws, where a plain synchronize would wait forever.
  void wait(const char* call) {
    for (;;) {
      const cudaError_t status = cudaStreamQuery(stream_);
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady)
        throw std::runtime_error(std::string(call) + ": cudaStreamQuery: " + cudaGetErrorString(status));
      ncclResult_t async = ncclSuccess;
      check_nccl(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
      if (async != ncclSuccess) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        throw std::runtime_error(std::string(call) + ": " + ncclGetErrorString(async) + " (communicator aborted)");
      }
      std::this_thread::yield();
    }
  }
  void release() {
    if (scratch_) cudaFree(scratch_);
    if (stream_) cudaStreamDestroy(stream_);
    if (comm_) ncclCommDestroy(comm_);
    scratch_ = nullptr, stream_ = nullptr, comm_ = nullptr;
  }

  int rank_, size_, device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  float* scratch_ = nullptr;
};

}  // namespace

bool nccl_device_available() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device) {
  return std::make_unique<NcclCommunicator>(bootstrap, device);
}

}  // namespace inferlab::parallel
