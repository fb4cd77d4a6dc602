#pragma once
/// @file mpi_communicator.h
/// The communicator over MPI (Open MPI from Debian: openmpi-bin, libopenmpi-dev) between the
/// processes mpirun starts (chapter 10): each collective is the MPI call of its name over
/// MPI_COMM_WORLD, on host buffers.
/// Its own library (inferlab::parallel_mpi): only what runs ranks links MPI.
///
/// MPI is initialised by the first make_mpi_communicator() (MPI_THREAD_SERIALIZED: one thread at a
/// time calls MPI — the engine's, which need not be the main thread; the OpenMP workers never do)
/// and finalised when the last communicator it
/// made is destroyed. MPI's errors are returned, not fatal: each becomes std::runtime_error naming
/// the call and MPI's message. A rank that dies is mpirun's to report: it kills the other ranks
/// and exits non-zero (never a hang).

#include <memory>

#include "runtime/collective/communicator.h"

namespace inferlab::parallel {

/// A communicator over all of mpirun's ranks (MPI_COMM_WORLD), initialising MPI if needed. Throws
/// std::runtime_error when MPI cannot start.
std::unique_ptr<Communicator> make_mpi_communicator();

/// Ends every rank of the job at once with exit code @p code (MPI_Abort): what a rank does when
/// it cannot go on and the others would wait for it forever.
[[noreturn]] void mpi_abort(int code);

}  // namespace inferlab::parallel
