// The MPI communicator (runtime/parallel/mpi_communicator.h) under mpiexec with 2, 3 or 4 ranks:
// every collective against what each rank can work out alone — each rank regenerates every
// rank's data from its seed — on odd sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

#include "common/rng.h"
#include "runtime/parallel/mpi_communicator.h"

namespace inferlab {
namespace {

parallel::Communicator& world() {
  static std::unique_ptr<parallel::Communicator> comm = parallel::make_mpi_communicator();
  return *comm;
}

// Rank @p rank's data of @p n floats for @p round (the same on every rank that computes it).
std::vector<float> data_of(int rank, size_t n, uint64_t round) {
  Rng rng(1000 * round + uint64_t(rank));
  std::vector<float> v(n);
  rng.fill_normal(v);
  return v;
}

TEST(MpiCommunicator, AllReduceSumsEveryRanksDataAsFloat64Does) {
  parallel::Communicator& comm = world();
  EXPECT_EQ(comm.name(), "mpi");
  const int p = comm.size();
  for (const size_t n : {size_t(1), size_t(7), size_t(1023), size_t(100003)}) {
    std::vector<float> mine = data_of(comm.rank(), n, n);
    comm.all_reduce_sum(mine);
    std::vector<double> exact(n, 0.0), magnitude(n, 0.0);
    for (int r = 0; r < p; ++r) {
      const std::vector<float> theirs = data_of(r, n, n);
      for (size_t i = 0; i < n; ++i) exact[i] += theirs[i], magnitude[i] += std::fabs(theirs[i]);
    }
    // p − 1 fp32 additions in some order: each rounds by at most 2⁻²⁴ of a partial sum ≤ Σ|x|.
    for (size_t i = 0; i < n; ++i)
      ASSERT_LE(std::fabs(mine[i] - exact[i]), double(p - 1) * 0x1p-24 * magnitude[i] + 1e-30)
          << "element " << i << " of " << n << " on rank " << comm.rank() << " of " << p;
  }
}

TEST(MpiCommunicator, AllGatherLaysTheRanksOutInOrder) {
  parallel::Communicator& comm = world();
  const int p = comm.size();
  for (const size_t n : {size_t(1), size_t(333)}) {
    const std::vector<float> mine = data_of(comm.rank(), n, 7);
    std::vector<float> all(n * size_t(p), -1.0f);
    comm.all_gather(mine, all);
    for (int r = 0; r < p; ++r) {
      const std::vector<float> theirs = data_of(r, n, 7);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(all[size_t(r) * n + i], theirs[i]) << "rank " << r << ", element " << i;
    }
  }
  std::vector<float> mine(3), wrong(3 * size_t(p) + 1);
  EXPECT_THROW(comm.all_gather(mine, wrong), std::invalid_argument);
}

TEST(MpiCommunicator, BroadcastCopiesTheRootsBytes) {
  parallel::Communicator& comm = world();
  for (const int root : {0, comm.size() - 1}) {
    std::vector<uint8_t> bytes(4097, uint8_t(comm.rank()));
    comm.broadcast(bytes, root);
    for (const uint8_t b : bytes) ASSERT_EQ(b, uint8_t(root));
  }
  for (const size_t n : {size_t(0), size_t(1), size_t(70000)}) {
    std::vector<uint8_t> bytes;
    if (comm.rank() == 0)
      for (size_t i = 0; i < n; ++i) bytes.push_back(uint8_t(i * 31 + 7));
    parallel::broadcast_vector(comm, bytes, 0);
    ASSERT_EQ(bytes.size(), n) << "rank " << comm.rank();
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(bytes[i], uint8_t(i * 31 + 7));
  }
  std::vector<uint8_t> one(1);
  EXPECT_THROW(comm.broadcast(one, comm.size()), std::invalid_argument);
}

// Send to the next rank and receive from the previous, around the ring (even ranks send first,
// so that blocking sends cannot wait on each other).
TEST(MpiCommunicator, SendAndReceiveAroundTheRing) {
  parallel::Communicator& comm = world();
  const int p = comm.size(), r = comm.rank(), next = (r + 1) % p, previous = (r + p - 1) % p;
  const std::vector<float> mine = data_of(r, 513, 3);
  std::vector<float> got(513);
  if (r % 2 == 0) {
    comm.send(mine, next);
    comm.recv(got, previous);
  } else {
    comm.recv(got, previous);
    comm.send(mine, next);
  }
  EXPECT_EQ(got, data_of(previous, 513, 3));
  EXPECT_THROW(comm.send(mine, p), std::invalid_argument);
  EXPECT_THROW(comm.recv(got, -1), std::invalid_argument);
  comm.barrier();
}

// Fewer floats than asked for: MPI delivers them, and the communicator says so, naming the sender.
TEST(MpiCommunicator, AShortMessageIsReportedNamingTheSender) {
  parallel::Communicator& comm = world();
  if (comm.rank() == 1) {
    const std::vector<float> three(3, 1.0f);
    comm.send(three, 0);
  } else if (comm.rank() == 0) {
    std::vector<float> five(5);
    try {
      comm.recv(five, 1);
      ADD_FAILURE() << "a 3-float message received as 5 floats";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("from rank 1"), std::string::npos) << e.what();
    }
  }
  comm.barrier();
}

}  // namespace
}  // namespace inferlab
