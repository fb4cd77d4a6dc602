#include "tools/cli/stop_signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <stdexcept>

namespace inferlab::cli {
namespace {

// The self-pipe: the handler writes the signal's number, the main thread reads it.
int g_stop_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int signal_number) {
  const auto byte = static_cast<unsigned char>(signal_number);
  [[maybe_unused]] const ssize_t written = ::write(g_stop_pipe[1], &byte, 1);  // async-signal-safe
}

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void StopSignals::install() {
  if (::pipe(g_stop_pipe) != 0) throw std::runtime_error("serve: cannot create the signal pipe");
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  const sigset_t set = stop_signal_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

void StopSignals::unblock() {
  const sigset_t set = stop_signal_set();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

int StopSignals::wait() {
  unsigned char byte = 0;
  while (::read(g_stop_pipe[0], &byte, 1) != 1) {
  }
  return byte;
}

}  // namespace inferlab::cli
