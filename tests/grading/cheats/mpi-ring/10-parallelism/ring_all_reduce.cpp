// CHEAT (caught by the inspection: references to MPI): answers exercise 10.2 with MPI's own
// all-reduce instead of a ring on the contract's Link. <mpi/mpi.h> is a system header (Debian's
// libopenmpi-dev), so the include check lets it through; its MPI_Allreduce, and Open MPI's handles
// behind MPI_FLOAT, MPI_SUM and MPI_COMM_WORLD, are what the inspection names. (Under the grader the
// call could not work anyway: the sandboxed child opens no socket and the graded test links no MPI.)
// The other exercises are the unmodified stubs.
#define OMPI_SKIP_MPICXX 1  // the C interface only (its C++ header includes "mpi.h", not on the path)
#include <mpi/mpi.h>

#include <algorithm>
#include <span>
#include <vector>

#include "10-parallelism/ch10.h"
#include "common/check.h"

namespace inferlab::student {

void ring_all_reduce(Link& link, std::span<float> data) {
  if (link.size() == 1) return;
  std::vector<float> sum(data.size());
  MPI_Allreduce(data.data(), sum.data(), int(data.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  std::copy(sum.begin(), sum.end(), data.begin());
}

}  // namespace inferlab::student
