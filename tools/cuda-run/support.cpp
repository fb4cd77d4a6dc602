// cuda-run's support object, linked into every program it builds (tools/cuda-run/cuda_run.py).
//
// The program is linked with -Wl,--wrap=main, so that __wrap_main() below runs first, after every
// static initialiser: when INFERLAB_CUDA_RUN_STATUS names a file, it
// - records at exit the emulator's state (launches, the last error message, device bytes still
//   allocated) — an atexit handler registered here runs before the emulator's statics go away;
// - records a crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) with its frames as module+offset,
//   which cuda_run.py turns into file:line with addr2line — but only for signals that nobody else
//   handles yet (a sanitizer's or the emulator's own handler is left in place);
// - records the message of an uncaught exception.
// The file is written with write(2) only, one `key=value` per line.

#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "simt/simt.h"

namespace {

int status_fd = -1;

void put(const char* text) {
  if (status_fd < 0) return;
  size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t written = write(status_fd, text, left);
    if (written <= 0) return;
    text += written;
    left -= static_cast<size_t>(written);
  }
}

// Formats without allocating (async-signal-safe).
void put_number(uint64_t value, unsigned base) {
  char digits[32];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value % base];
    value /= base;
  } while (value != 0 && n < 30);
  char text[36];
  int k = 0;
  if (base == 16) {
    text[k++] = '0';
    text[k++] = 'x';
  }
  while (n > 0) text[k++] = digits[--n];
  text[k] = '\0';
  put(text);
}

// One line of text: newlines become spaces (the file has one entry per line).
void put_line(const char* key, const std::string& value) {
  std::string line = value;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  put(key);
  put("=");
  put(line.c_str());
  put("\n");
}

void record_exit() {
  put("launches=");
  put_number(simt::launch_count(), 10);
  put("\ndevice_bytes_in_use=");
  put_number(simt::device_bytes_in_use(), 10);
  put("\n");
  const std::string message = simt::last_error_message();
  if (!message.empty()) put_line("error", message.substr(0, message.find('\n')));
  put("exited=1\n");
}

void put_frame(const char* key, void* address) {
  Dl_info info{};
  put(key);
  put("=");
  if (dladdr(address, &info) != 0 && info.dli_fname != nullptr) {
    put(info.dli_fname);
    put("|");
    put_number(reinterpret_cast<uintptr_t>(address), 16);
    put("|");
    put_number(reinterpret_cast<uintptr_t>(info.dli_fbase), 16);
  } else {
    put("?|");
    put_number(reinterpret_cast<uintptr_t>(address), 16);
    put("|0x0");
  }
  put("\n");
}

void on_crash(int signal_number, siginfo_t* info, void* context) {
  put("crash=");
  put_number(static_cast<uint64_t>(signal_number), 10);
  put("\n");
  if (info != nullptr && (signal_number == SIGSEGV || signal_number == SIGBUS)) {
    put("fault_address=");
    put_number(reinterpret_cast<uintptr_t>(info->si_addr), 16);
    put("\n");
  }
  void* pc = nullptr;
#if defined(__x86_64__)
  if (context != nullptr) pc = reinterpret_cast<void*>(static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  if (context != nullptr) pc = reinterpret_cast<void*>(static_cast<ucontext_t*>(context)->uc_mcontext.pc);
#endif
  if (pc != nullptr && signal_number != SIGABRT) put_frame("pc", pc);
  void* frames[64];
  const int count = backtrace(frames, 64);
  for (int i = 0; i < count; ++i) put_frame("frame", frames[i]);
  // Die of the same signal (SA_RESETHAND restored the default action).
  raise(signal_number);
}

void on_terminate() {
  try {
    if (const std::exception_ptr current = std::current_exception()) std::rethrow_exception(current);
    put("exception=std::terminate called without an exception\n");
  } catch (const std::exception& e) {
    put_line("exception", std::string("uncaught exception: ") + e.what());
  } catch (...) {
    put("exception=uncaught exception of a non-std type\n");
  }
  std::abort();
}

void install_crash_handlers() {
  void* warm[2];
  backtrace(warm, 2);  // loads the unwinder now: not inside a signal handler
  for (const int signal_number : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    struct sigaction current {};
    if (sigaction(signal_number, nullptr, &current) != 0) continue;
    const bool has_handler =
        (current.sa_flags & SA_SIGINFO) != 0 ? current.sa_sigaction != nullptr : current.sa_handler != SIG_DFL;
    if (has_handler) continue;  // someone else's (a sanitizer's, the emulator's): leave it
    struct sigaction action {};
    action.sa_sigaction = on_crash;
    action.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(signal_number, &action, nullptr);
  }
}

}  // namespace

extern "C" int __real_main(int argc, char** argv, char** envp);

/// The program's entry point under -Wl,--wrap=main: sets up the status file, then runs main().
extern "C" int __wrap_main(int argc, char** argv, char** envp) {
  if (const char* path = std::getenv("INFERLAB_CUDA_RUN_STATUS"); path != nullptr && *path != '\0') {
    status_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    unsetenv("INFERLAB_CUDA_RUN_STATUS");  // not for the program's own child processes
    if (status_fd >= 0) {
      put("started=1\n");
      std::atexit(record_exit);
      std::set_terminate(on_terminate);
      install_crash_handlers();
    }
  }
  return __real_main(argc, argv, envp);
}
