// A rank that dies mid-job (the killed-rank test, CMakeLists.txt): every rank meets at a barrier,
// then the last rank kills itself with SIGKILL while the others wait for it in an all-reduce.
// mpirun must end the job — kill the waiting ranks and exit non-zero, naming the dead rank — and
// never hang. (Exit code 0 here would mean the all-reduce returned without the dead rank.)
#include <csignal>
#include <vector>

#include "runtime/parallel/mpi_communicator.h"

int main() {
  auto comm = inferlab::parallel::make_mpi_communicator();
  comm->barrier();
  if (comm->rank() == comm->size() - 1) std::raise(SIGKILL);
  std::vector<float> data(1024, 1.0f);
  comm->all_reduce_sum(data);
  return 0;
}
