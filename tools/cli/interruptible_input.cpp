#include "tools/cli/interruptible_input.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

namespace inferlab::cli {
namespace {

volatile std::sig_atomic_t g_sigint = 0;
int g_wake[2] = {-1, -1};  // the self-pipe: the handler writes, InterruptibleLines polls

extern "C" void on_sigint(int) {
  g_sigint = 1;
  const int saved = errno;
  const char byte = 1;
  // Non-blocking: a full pipe already says "interrupted".
  [[maybe_unused]] const ssize_t n = ::write(g_wake[1], &byte, 1);
  errno = saved;
}

void drain_wake_pipe() {
  char bytes[64];
  while (::read(g_wake[0], bytes, sizeof bytes) > 0) {
  }
}

}  // namespace

void catch_sigint() {
  if (g_wake[0] >= 0) return;
  if (::pipe2(g_wake, O_NONBLOCK | O_CLOEXEC) != 0) throw std::system_error(errno, std::generic_category(), "pipe2");
  struct sigaction action = {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
}

volatile std::sig_atomic_t& sigint_flag() {
  return g_sigint;
}

InterruptibleLines::Result InterruptibleLines::next(std::string& line) {
  while (true) {
    if (g_sigint != 0) return Result::interrupted;
    if (const size_t newline = buffer_.find('\n'); newline != std::string::npos) {
      line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return Result::line;
    }
    if (eof_) {
      if (buffer_.empty()) return Result::end;
      line = std::exchange(buffer_, {});
      return Result::line;
    }
    // Wait for input or a SIGINT. The flag is checked above before each wait, and a signal that
    // comes after that check leaves a byte in the pipe: poll() returns at once.
    pollfd fds[2] = {{fd_, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
    const nfds_t count = g_wake[0] >= 0 ? 2 : 1;
    if (::poll(fds, count, -1) < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    if (count == 2 && fds[1].revents != 0) drain_wake_pipe();  // the flag says the rest
    if (fds[0].revents != 0) {
      char bytes[4096];
      const ssize_t n = ::read(fd_, bytes, sizeof bytes);
      if (n > 0) {
        buffer_.append(bytes, size_t(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        eof_ = true;  // the end, or an input that can no longer be read
      }
    }
  }
}

}  // namespace inferlab::cli
