#include "tests/support/isolation.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string_view>
#include <typeinfo>

#include <cxxabi.h>

#include <dirent.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/check.h"
#include "common/rng.h"
#include "simt/simt.h"

namespace inferlab::testing {
namespace {

bool g_grading = false;
bool g_no_isolation = false;
// The last launch an isolated child reported, and this process's launch count when it did.
simt::LaunchRecord g_child_launch;
uint64_t g_child_launch_at = 0;
bool g_child_launched = false;

// ---- the wire: what the child sends back ------------------------------------------------------
//
//   header  { magic, kind, launches, device_bytes_peak, payload bytes, launch text bytes }
//   payload the result bytes (kind ok) or the exception's message (the other kinds)
//   launch  the child's last launch: "kernel\nfile:line\ngrid x y z\nblock x y z\nshared"

constexpr uint64_t kMagic = 0x494e464c41424953ull;  // "INFLABIS"
enum class Kind : uint64_t { ok = 1, not_implemented = 2, exception = 3, harness_assertion = 4 };

struct Header {
  uint64_t magic = kMagic;
  Kind kind = Kind::ok;
  uint64_t launches = 0;
  uint64_t device_bytes_peak = 0;
  uint64_t payload = 0;
  uint64_t launch_text = 0;
};

std::string encode_launch(const simt::LaunchRecord& r) {
  return r.kernel + '\n' + r.launched_at + '\n' + std::to_string(r.grid.x) + ' ' + std::to_string(r.grid.y) + ' ' +
         std::to_string(r.grid.z) + '\n' + std::to_string(r.block.x) + ' ' + std::to_string(r.block.y) + ' ' +
         std::to_string(r.block.z) + '\n' + std::to_string(r.shared_bytes);
}

simt::LaunchRecord decode_launch(const std::string& text) {
  simt::LaunchRecord r;
  std::istringstream in(text);
  std::getline(in, r.kernel);
  std::getline(in, r.launched_at);
  in >> r.grid.x >> r.grid.y >> r.grid.z >> r.block.x >> r.block.y >> r.block.z >> r.shared_bytes;
  return r;
}

bool write_all(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::vector<std::byte> read_all(int fd) {
  std::vector<std::byte> out;
  std::byte chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.insert(out.end(), chunk, chunk + n);
  }
  return out;
}

// ---- the sandbox ------------------------------------------------------------------------------

// Closes every descriptor except stdin/stdout/stderr and @p keep (the result pipe).
void close_other_descriptors(int keep) {
  std::vector<int> open_fds;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (const dirent* entry = ::readdir(dir)) {
      const int fd = std::atoi(entry->d_name);
      if (entry->d_name[0] >= '0' && entry->d_name[0] <= '9' && fd > 2 && fd != keep) open_fds.push_back(fd);
    }
    ::closedir(dir);
  }
  for (int fd : open_fds) ::close(fd);
}

#if defined(__x86_64__)
constexpr bool kSandboxed = true;
#define INFERLAB_ALLOW(name) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_##name, 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

// A seccomp filter: the system calls that computing needs (memory, threads, time, signals to
// itself, writes to stdout/stderr/the pipe) are allowed; every other call fails with EPERM —
// open/openat (so no file can be written: not the test report, not /proc/<parent>), execve,
// fork, kill, ptrace, socket, …
void install_filter(int pipe_fd) {
  constexpr uint32_t kClone = SYS_clone;
  struct sock_filter filter[] = {
      // Only x86-64 system calls (a 32-bit int 0x80 call would have other numbers).
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      // write / writev: only to stdout, stderr and the result pipe.
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_write, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_writev, 1, 0),
      BPF_STMT(BPF_JMP | BPF_JA, 6),  // to the clone check
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 1, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 2, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(pipe_fd), 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      // clone: threads only (CLONE_THREAD set); clone3 reports "not supported" so that the C
      // library falls back to clone, whose flags the filter can read.
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kClone, 0, 4),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      INFERLAB_ALLOW(read),
      INFERLAB_ALLOW(close),
      INFERLAB_ALLOW(fstat),
      INFERLAB_ALLOW(newfstatat),
      INFERLAB_ALLOW(lseek),
      INFERLAB_ALLOW(mmap),
      INFERLAB_ALLOW(munmap),
      INFERLAB_ALLOW(mremap),
      INFERLAB_ALLOW(mprotect),
      INFERLAB_ALLOW(madvise),
      INFERLAB_ALLOW(brk),
      INFERLAB_ALLOW(futex),
      INFERLAB_ALLOW(set_robust_list),
      INFERLAB_ALLOW(rseq),
      INFERLAB_ALLOW(sched_yield),
      INFERLAB_ALLOW(sched_getaffinity),
      INFERLAB_ALLOW(getpid),
      INFERLAB_ALLOW(gettid),
      INFERLAB_ALLOW(getrandom),
      INFERLAB_ALLOW(clock_gettime),
      INFERLAB_ALLOW(clock_getres),
      INFERLAB_ALLOW(gettimeofday),
      INFERLAB_ALLOW(nanosleep),
      INFERLAB_ALLOW(clock_nanosleep),
      INFERLAB_ALLOW(getrusage),
      INFERLAB_ALLOW(prlimit64),
      INFERLAB_ALLOW(rt_sigaction),
      INFERLAB_ALLOW(rt_sigprocmask),
      INFERLAB_ALLOW(rt_sigreturn),
      INFERLAB_ALLOW(sigaltstack),
      INFERLAB_ALLOW(tgkill),  // abort() signals its own thread
      INFERLAB_ALLOW(exit),
      INFERLAB_ALLOW(exit_group),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
  };
  const sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    // A graded run needs the sandbox; a student's own run goes on without it (the call still runs
    // in its own process), saying so.
    std::fprintf(stderr, "inferlab isolation: cannot install the seccomp sandbox (errno %d)%s\n", errno,
                 g_grading ? "; a graded run needs it" : "; running the call unsandboxed");
    if (g_grading) ::_exit(121);
  }
}
#undef INFERLAB_ALLOW
#else
constexpr bool kSandboxed = false;
void install_filter(int) {}
#endif

// "std::invalid_argument", not "St16invalid_argument".
std::string type_name(const std::type_info& type) {
  int status = 0;
  char* readable = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && readable != nullptr ? readable : type.name();
  std::free(readable);
  return name;
}

// The child: sandbox, run, send, _exit. Never returns.
[[noreturn]] void child_main(int pipe_fd, const std::function<std::vector<std::byte>()>& call) {
  // Die with the parent (a test killed by its timeout must not leave the student's loop running),
  // and give up after five minutes of CPU time whatever happens.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  const rlimit cpu{300, 300};
  ::setrlimit(RLIMIT_CPU, &cpu);
  close_other_descriptors(pipe_fd);
  // One thread: the parent's OpenMP and emulator worker threads do not exist in a fork.
  omp_set_num_threads(1);
  simt::set_workers(1);
  const bool failed_before = ::testing::Test::HasFailure();
  const uint64_t launches_before = simt::launch_count();
  const size_t bytes_before = simt::device_bytes_in_use();
  simt::reset_device_bytes_peak();
  install_filter(pipe_fd);

  Header header;
  std::vector<std::byte> payload;
  std::string message;
  try {
    payload = call();
  } catch (const NotImplemented& e) {
    header.kind = Kind::not_implemented;
    message = e.what();
  } catch (const std::exception& e) {
    header.kind = Kind::exception;
    message = type_name(typeid(e)) + '\n' + e.what();
  } catch (...) {
    header.kind = Kind::exception;
    message = "?\na non-standard exception";
  }
  if (header.kind == Kind::ok && ::testing::Test::HasFailure() && !failed_before) {
    header.kind = Kind::harness_assertion;
    message = "a test assertion ran inside the isolated call (it belongs in the parent, after the call)";
  }
  if (header.kind != Kind::ok) payload.assign(reinterpret_cast<const std::byte*>(message.data()),
                                              reinterpret_cast<const std::byte*>(message.data() + message.size()));
  header.launches = simt::launch_count() - launches_before;
  const size_t peak = simt::device_bytes_peak();
  header.device_bytes_peak = peak > bytes_before ? peak - bytes_before : 0;
  header.payload = payload.size();
  const std::string launch = header.launches > 0 ? encode_launch(simt::last_launch()) : std::string();
  header.launch_text = launch.size();
  std::fflush(nullptr);
  std::cout.flush();
  std::cerr.flush();
  const bool sent = write_all(pipe_fd, &header, sizeof header) && write_all(pipe_fd, payload.data(), payload.size()) &&
                    write_all(pipe_fd, launch.data(), launch.size());
  ::_exit(sent ? 0 : 122);
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    std::string text = "was killed by SIG" + std::string(name != nullptr ? name : std::to_string(sig).c_str());
    if (sig == SIGXCPU) text += " (over five minutes of CPU time)";
    if (sig == SIGSYS) text += " (a forbidden system call)";
    return text;
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "stopped (status " + std::to_string(status) + ")";
}

// Runs @p call in-process (isolation switched off to debug): same results, no sandbox.
IsolatedRun run_in_process(const std::function<std::vector<std::byte>()>& call, std::vector<std::byte>& result) {
  IsolatedRun run;
  const uint64_t launches_before = simt::launch_count();
  const size_t bytes_before = simt::device_bytes_in_use();
  simt::reset_device_bytes_peak();
  result = call();
  run.launches = simt::launch_count() - launches_before;
  const size_t peak = simt::device_bytes_peak();
  run.device_bytes_peak = peak > bytes_before ? peak - bytes_before : 0;
  return run;
}

}  // namespace

IsolatedRun run_isolated_raw(const std::function<std::vector<std::byte>()>& call, std::vector<std::byte>& result) {
  result.clear();
  if (!isolation_enabled()) return run_in_process(call, result);
  // The emulator's reports name source lines from the program's line tables: load them here,
  // once, since the sandboxed child may not open the executable.
  simt::prepare_reports();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("isolation: pipe() failed");
  std::fflush(nullptr);
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error("isolation: fork() failed");
  }
  if (pid == 0) {
    ::close(fds[0]);
    child_main(fds[1], call);
  }
  ::close(fds[1]);
  const std::vector<std::byte> bytes = read_all(fds[0]);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const bool exited_cleanly = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  Header header;
  const bool has_header = bytes.size() >= sizeof header;
  if (has_header) std::memcpy(&header, bytes.data(), sizeof header);
  if (!exited_cleanly || !has_header || header.magic != kMagic ||
      bytes.size() != sizeof header + header.payload + header.launch_text) {
    std::string why = "the student code " + describe_status(status);
    if (exited_cleanly) why = "the student code ended the process before returning (exit() called?)";
    throw StudentCodeFailed(why + " — run in a sandboxed child process; see its output above");
  }
  const std::byte* payload = bytes.data() + sizeof header;
  const std::string text(reinterpret_cast<const char*>(payload), header.payload);
  if (header.launch_text > 0) {
    g_child_launch = decode_launch(std::string(reinterpret_cast<const char*>(payload + header.payload), header.launch_text));
    g_child_launch_at = simt::launch_count();
    g_child_launched = true;
  }
  switch (header.kind) {
    case Kind::ok:
      result.assign(payload, payload + header.payload);
      return {header.launches, header.device_bytes_peak};
    case Kind::not_implemented: {
      constexpr std::string_view prefix = "not implemented yet: ";
      throw NotImplemented(text.starts_with(prefix) ? text.substr(prefix.size()) : text);
    }
    case Kind::exception: {
      const size_t newline = text.find('\n');
      const std::string type = text.substr(0, newline);
      const std::string what = newline == std::string::npos ? "" : text.substr(newline + 1);
      throw std::runtime_error("the student code threw " + type + ": " + what);
    }
    case Kind::harness_assertion:
      throw std::logic_error("isolation: " + text);
  }
  throw StudentCodeFailed("isolation: the child sent an unknown result kind");
}

IsolatedRun run_isolated(const std::function<void()>& call, std::vector<OutputBytes> outputs) {
  std::vector<std::byte> bytes;
  const IsolatedRun run = run_isolated_raw([&] {
    call();
    std::vector<std::byte> all;
    for (const OutputBytes range : outputs) all.insert(all.end(), range.begin(), range.end());
    return all;
  }, bytes);
  size_t total = 0;
  for (const OutputBytes range : outputs) total += range.size();
  if (bytes.size() != total) throw StudentCodeFailed("isolation: the outputs came back with the wrong size");
  size_t offset = 0;
  for (const OutputBytes range : outputs) {
    if (!range.empty()) std::memcpy(range.data(), bytes.data() + offset, range.size());
    offset += range.size();
  }
  return run;
}

simt::LaunchRecord last_launch() {
  if (g_child_launched && simt::launch_count() == g_child_launch_at) return g_child_launch;
  return simt::last_launch();
}

bool isolation_enabled() { return !g_no_isolation; }

bool grading_run() { return g_grading; }

void parse_inferlab_options(int& argc, char** argv) {
  int kept = 1;
  bool seed_given = false;
  uint64_t seed = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--inferlab_seed=")) {
      const std::string value(arg.substr(std::string_view("--inferlab_seed=").size()));
      try {
        size_t used = 0;
        seed = std::stoull(value, &used);
        require(used == value.size() && !value.empty() && value[0] != '-', "--inferlab_seed", value,
                "must be an unsigned integer");
      } catch (const std::logic_error&) {
        require(false, "--inferlab_seed", value, "must be an unsigned integer");
      }
      seed_given = true;
    } else if (arg == "--inferlab_grading") {
      g_grading = true;
    } else if (arg == "--inferlab_no_isolation") {
      g_no_isolation = true;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  argv[argc] = nullptr;
  require(!g_grading || kSandboxed, "--inferlab_grading", "given",
          "needs the seccomp sandbox, which this build has only on x86-64 Linux");
  require(!(g_grading && g_no_isolation), "--inferlab_no_isolation", "given",
          "is refused in a graded run (--inferlab_grading)");
  if (g_grading && !seed_given)
    require(false, "--inferlab_seed", "missing", "must be given in a graded run (the grader picks the seed)");
  if (seed_given) Rng::fix_fresh_seed(seed);
}

}  // namespace inferlab::testing
