// Communicator over MPI_COMM_WORLD (mpi_communicator.h).
#include "runtime/parallel/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>

#include "common/check.h"

namespace inferlab::parallel {

namespace {

// MPI's error code as an exception naming the call.
void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(std::string(call) + " failed: " + std::string(text, size_t(length)));
}

// MPI is initialised once per process, by the first communicator, and finalised with the last.
std::mutex lifetime_mutex;
int live_communicators = 0;
bool initialised_here = false;  // this file called MPI_Init_thread, so it calls MPI_Finalize

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    std::lock_guard lock(lifetime_mutex);
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
      if (provided < MPI_THREAD_SERIALIZED) throw std::runtime_error("MPI_Init_thread: this MPI cannot be called from the engine's thread (MPI_THREAD_SERIALIZED)");
      initialised_here = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    ++live_communicators;
  }
  ~MpiCommunicator() override {
    std::lock_guard lock(lifetime_mutex);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (--live_communicators == 0 && initialised_here && !finalized) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  void all_reduce_sum(std::span<float> data) override {
    for (size_t at = 0; at < data.size(); at += kChunk)
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, data.data() + at, count(data.size() - at), MPI_FLOAT, MPI_SUM,
                              MPI_COMM_WORLD),
                "MPI_Allreduce");
  }
  void all_gather(std::span<const float> mine, std::span<float> all) override {
    require(all.size() == size_t(size_) * mine.size(), "all.size()", all.size(),
            "must be size() · mine.size() = " + std::to_string(size_t(size_) * mine.size()));
    require(mine.size() <= size_t(INT_MAX), "mine.size()", mine.size(), "must fit an MPI count (INT_MAX)");
    check_mpi(MPI_Allgather(mine.data(), int(mine.size()), MPI_FLOAT, all.data(), int(mine.size()), MPI_FLOAT,
                            MPI_COMM_WORLD),
              "MPI_Allgather");
  }
  void broadcast(std::span<uint8_t> data, int root) override {
    check_rank("root", root);
    for (size_t at = 0; at < data.size(); at += kChunk)
      check_mpi(MPI_Bcast(data.data() + at, count(data.size() - at), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
  }
  void send(std::span<const float> data, int to) override {
    check_rank("to", to);
    require(data.size() <= size_t(INT_MAX), "data.size()", data.size(), "must fit an MPI count (INT_MAX)");
    check_mpi(MPI_Send(data.data(), int(data.size()), MPI_FLOAT, to, kTag, MPI_COMM_WORLD), "MPI_Send");
  }
  void recv(std::span<float> data, int from) override {
    check_rank("from", from);
    require(data.size() <= size_t(INT_MAX), "data.size()", data.size(), "must fit an MPI count (INT_MAX)");
    MPI_Status status;
    check_mpi(MPI_Recv(data.data(), int(data.size()), MPI_FLOAT, from, kTag, MPI_COMM_WORLD, &status), "MPI_Recv");
    int received = 0;
    MPI_Get_count(&status, MPI_FLOAT, &received);
    require(size_t(received) == data.size(), "received floats", received,
            "must be the " + std::to_string(data.size()) + " asked for from rank " + std::to_string(from));
  }
  void barrier() override { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

 private:
  static constexpr size_t kChunk = size_t(1) << 30;  // elements a call: MPI counts are int
  static constexpr int kTag = 10;
  static int count(size_t left) { return int(std::min(left, kChunk)); }
  void check_rank(const char* name, int r) const {
    require(r >= 0 && r < size_, name, r, "must be a rank in [0, " + std::to_string(size_) + ")");
  }
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

void mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] true if it ever did
}

}  // namespace inferlab::parallel
