#pragma once
/// @file interruptible_input.h
/// Ctrl-C and stdin for an interactive command (`inferlab chat`). SIGINT must do two things that a
/// plain handler cannot both do without a race: stop a reply that is being generated (the
/// handler's flag, read between the engine's steps: streamed_reply.h) and end a wait for the next
/// line (a flag checked just before a blocking read is missed when the signal comes between the
/// check and the read). So the handler also writes a byte to a pipe of its own, and the line
/// reader waits with poll() on stdin and that pipe together: a SIGINT at any moment wakes it.

#include <csignal>
#include <string>

namespace inferlab::cli {

/// Installs the SIGINT handler (once; later calls do nothing): it sets sigint_flag() and wakes an
/// InterruptibleLines waiting for input. Interrupted writes resume (SA_RESTART): no output is lost.
void catch_sigint();

/// The flag SIGINT sets. Whoever handles an interrupt clears it (stream_reply() does, when it
/// aborts a reply); InterruptibleLines::next() reports it and leaves it set.
volatile std::sig_atomic_t& sigint_flag();

/// The lines of a file descriptor (stdin), a Ctrl-C ending the wait for one.
class InterruptibleLines {
 public:
  /// What next() found.
  enum class Result {
    line,         ///< a line (without its newline; the last one may lack it)
    end,          ///< the end of the input (EOF, Ctrl-D on a terminal)
    interrupted,  ///< sigint_flag() is set: a SIGINT came, before or while waiting
  };

  /// Reads @p fd, which stays open (the caller's). Call catch_sigint() first for Ctrl-C to be seen.
  explicit InterruptibleLines(int fd) : fd_(fd) {}

  /// The next line into @p line, waiting for it; an interrupt comes first, even when a line is
  /// already buffered (Ctrl-C means stop). Throws std::system_error when poll() fails.
  Result next(std::string& line);

 private:
  int fd_;
  std::string buffer_;  // read but not yet returned
  bool eof_ = false;
};

}  // namespace inferlab::cli
