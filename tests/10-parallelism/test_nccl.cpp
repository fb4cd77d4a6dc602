// The NCCL communicator (runtime/parallel/nccl_communicator.h) on this machine's GPUs, one rank a
// GPU (ctest runs a world of one, and one of two under mpiexec -n 2, skipped on fewer GPUs): all-reduce
// of device buffers of odd sizes against a float64 sum of every rank's data, all-gather's rank
// order, broadcast, a send / receive around the ring, and a bad rank refused. Exits 77 (ctest's
// skip) on a machine without a GPU: CI has none, tools/gpu-check.sh runs it (ctest -L cuda).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <vector>

#include "common/rng.h"
#include "runtime/parallel/mpi_communicator.h"
#include "runtime/parallel/nccl_communicator.h"

namespace inferlab {
namespace {

parallel::Communicator& mpi() {
  static std::unique_ptr<parallel::Communicator> comm = parallel::make_mpi_communicator();
  return *comm;
}

parallel::Communicator& nccl() {
  static std::unique_ptr<parallel::Communicator> comm = parallel::make_nccl_communicator(mpi());
  return *comm;
}

// A device copy of a host vector, and back.
struct DeviceFloats {
  explicit DeviceFloats(const std::vector<float>& host) : n(host.size()) {
    if (cudaMalloc(&data, std::max<size_t>(1, n) * sizeof(float)) != cudaSuccess) throw std::runtime_error("cudaMalloc");
    cudaMemcpy(data, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  }
  ~DeviceFloats() { cudaFree(data); }
  std::vector<float> host() const {
    std::vector<float> out(n);
    cudaMemcpy(out.data(), data, n * sizeof(float), cudaMemcpyDeviceToHost);
    return out;
  }
  std::span<float> span() { return {data, n}; }
  float* data = nullptr;
  size_t n;
};

std::vector<float> rank_data(int rank, size_t n) {
  Rng rng(1000 + uint64_t(rank) * 7 + n);
  std::vector<float> v(n);
  rng.fill_normal(std::span(v));
  return v;
}

TEST(NcclCommunicator, AllReduceSumsEveryRanksDataAsFloat64Does) {
  parallel::Communicator& comm = nccl();
  EXPECT_EQ(comm.name(), "nccl");
  EXPECT_EQ(comm.size(), mpi().size());
  for (const size_t n : {size_t(1), size_t(7), size_t(1023), size_t(100003)}) {
    DeviceFloats d(rank_data(comm.rank(), n));
    comm.all_reduce_sum(d.span());
    const std::vector<float> got = d.host();
    for (size_t i = 0; i < n; ++i) {
      double want = 0.0, magnitude = 0.0;
      for (int r = 0; r < comm.size(); ++r) {
        const double x = rank_data(r, n)[i];
        want += x;
        magnitude += std::fabs(x);
      }
      ASSERT_NEAR(got[i], want, comm.size() * 0x1p-23 * magnitude + 1e-30) << "n " << n << ", element " << i;
    }
  }
}

TEST(NcclCommunicator, AllGatherBroadcastAndTheRing) {
  parallel::Communicator& comm = nccl();
  const int p = comm.size(), r = comm.rank();
  DeviceFloats mine(std::vector<float>(5, float(r + 1)));
  DeviceFloats all(std::vector<float>(size_t(5 * p), -1.0f));
  comm.all_gather(mine.span(), all.span());
  const std::vector<float> gathered = all.host();
  for (int q = 0; q < p; ++q)
    for (int i = 0; i < 5; ++i) EXPECT_EQ(gathered[size_t(q * 5 + i)], float(q + 1)) << "rank " << q << "'s block";

  std::vector<uint8_t> bytes(37, uint8_t(r == p - 1 ? 0xAB : 0));
  uint8_t* device_bytes = nullptr;
  ASSERT_EQ(cudaMalloc(&device_bytes, bytes.size()), cudaSuccess);
  cudaMemcpy(device_bytes, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
  comm.broadcast(std::span(device_bytes, bytes.size()), p - 1);
  cudaMemcpy(bytes.data(), device_bytes, bytes.size(), cudaMemcpyDeviceToHost);
  cudaFree(device_bytes);
  EXPECT_EQ(bytes, std::vector<uint8_t>(37, 0xAB));

  if (p > 1) {  // a ring needs two ranks: NCCL's send to oneself outside a group would wait forever
    DeviceFloats out(rank_data(r, 9)), in(std::vector<float>(9, 0.0f));
    if (r % 2 == 0) {
      comm.send(out.span(), (r + 1) % p);
      comm.recv(in.span(), (r + p - 1) % p);
    } else {
      comm.recv(in.span(), (r + p - 1) % p);
      comm.send(out.span(), (r + 1) % p);
    }
    EXPECT_EQ(in.host(), rank_data((r + p - 1) % p, 9));
  }
  EXPECT_THROW(comm.send(mine.span(), p), std::invalid_argument);
  EXPECT_THROW(comm.broadcast(std::span<uint8_t>(), -1), std::invalid_argument);
  comm.barrier();
}

}  // namespace
}  // namespace inferlab

int main(int argc, char** argv) {
  if (!inferlab::parallel::nccl_device_available()) {
    std::cout << "no CUDA device: the NCCL communicator's tests need a GPU (skipped; tools/gpu-check.sh runs them)\n";
    return 77;
  }
  int devices = 0;
  cudaGetDeviceCount(&devices);
  const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");  // set under mpiexec
  if (world != nullptr && std::atoi(world) > devices) {
    std::cout << "mpiexec started " << world << " ranks on " << devices << " GPU(s): NCCL runs one rank a GPU (skipped)\n";
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
