#pragma once
// SIGINT and SIGTERM for a server (`inferlab serve`): caught, not fatal, and waited for by the main
// thread alone.
//
// A handler, installed before any thread of ours starts, writes the signal's number to a pipe that
// the main thread reads. Dispositions are the process's, so whichever thread the kernel picks runs
// it — some already exist and cannot be masked: libopenblas starts its pool when it is loaded,
// before main(), and a signal that reached one of those with the default action killed the process
// (ServeStop.SigintExitsZero, 1 run in 4). The threads started after install() (OpenMP's workers,
// the engine's, the HTTP server's) inherit a mask that blocks the two, so a signal goes to the main
// thread or to a pool thread, both harmless. A client gone mid-write must not kill the server
// either: SIGPIPE is ignored and the write fails instead.

namespace inferlab::cli {

/// The process's stop signals, caught through a self-pipe.
class StopSignals {
 public:
  /// Installs the handler, blocks SIGINT and SIGTERM in this thread (and so in the threads it
  /// starts from now on) and ignores SIGPIPE. Once per process; std::runtime_error when the pipe
  /// cannot be made.
  static void install();
  /// Unblocks the two in the calling thread (the main thread: it takes them from here on).
  static void unblock();
  /// Waits for SIGINT or SIGTERM (one that came early waits in the pipe) and returns which.
  static int wait();
};

}  // namespace inferlab::cli
