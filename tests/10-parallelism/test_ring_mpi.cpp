// Exercise 10.2 over real processes (not graded): the solution's ring all-reduce
// (solutions/10-parallelism/ring_all_reduce.cpp) on a Link that forwards to the lab's MPI
// communicator (runtime/parallel/mpi_communicator.h) — MPI_Send, which waits for its receiver on
// large messages (the rendezvous protocol the contract warns about), and MPI_Recv — under
// mpiexec, against Communicator::all_reduce_sum of the same data and a float64 sum that each
// rank works out alone (it regenerates every rank's data from its seed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "10-parallelism/ch10.h"
#include "common/rng.h"
#include "runtime/parallel/mpi_communicator.h"

namespace inferlab {
namespace {

parallel::Communicator& world() {
  static std::unique_ptr<parallel::Communicator> comm = parallel::make_mpi_communicator();
  return *comm;
}

// The contract's Link over the lab's communicator.
class CommunicatorLink final : public student::Link {
 public:
  explicit CommunicatorLink(parallel::Communicator& comm) : comm_(comm) {}
  int rank() const override { return comm_.rank(); }
  int size() const override { return comm_.size(); }
  void send(std::span<const float> data, int to) override { comm_.send(data, to); }
  void recv(std::span<float> data, int from) override { comm_.recv(data, from); }

 private:
  parallel::Communicator& comm_;
};

// Rank @p rank's data of @p n floats (the same on every rank that computes it).
std::vector<float> data_of(int rank, size_t n) {
  Rng rng(7919 * n + uint64_t(rank));
  std::vector<float> v(n);
  rng.fill_normal(v);
  return v;
}

TEST(RingOverMpi, TheSolutionsRingEqualsTheCommunicatorsAllReduce) {
  parallel::Communicator& comm = world();
  CommunicatorLink link(comm);
  const int p = comm.size(), r = comm.rank();
  for (const size_t n : {size_t(0), size_t(1), size_t(p - 1), size_t(7), size_t(1000), size_t(65537)}) {
    std::vector<float> ring = data_of(r, n), mpi = ring;
    student::ring_all_reduce(link, ring);
    comm.all_reduce_sum(mpi);
    std::vector<double> exact(n, 0.0), magnitude(n, 0.0);
    for (int q = 0; q < p; ++q) {
      const std::vector<float> theirs = data_of(q, n);
      for (size_t i = 0; i < n; ++i) exact[i] += theirs[i], magnitude[i] += std::fabs(theirs[i]);
    }
    // p − 1 fp32 additions in some order each: within (p − 1) · 2⁻²⁴ · Σ|x| of the float64 sum.
    for (size_t i = 0; i < n; ++i) {
      const double tolerance = double(p - 1) * 0x1p-24 * magnitude[i] + 1e-30;
      ASSERT_LE(std::fabs(ring[i] - exact[i]), tolerance) << "ring, element " << i << " of " << n << " on rank " << r;
      ASSERT_LE(std::fabs(mpi[i] - exact[i]), tolerance) << "MPI, element " << i << " of " << n << " on rank " << r;
    }
    // Every rank holds the same bits: the all-gather copied them.
    std::vector<float> all(n * size_t(p));
    comm.all_gather(ring, all);
    for (int q = 0; q < p; ++q)
      ASSERT_TRUE(n == 0 || std::memcmp(all.data() + size_t(q) * n, ring.data(), n * sizeof(float)) == 0)
          << "rank " << q << "'s ring result differs from rank " << r << "'s (n = " << n << ")";
  }
  comm.barrier();
}

}  // namespace
}  // namespace inferlab
