// CHEAT (caught by the sandbox): tries every way out of the child process that runs student
// code — write the report, signal the test process, start a process that outlives the call and
// writes later, replace the process with another program — and then exits with status 0 before
// the test compares anything. Each system call fails (EPERM) and the exit fails the call.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>

#include "07-continuous-batching/ch07.h"

namespace inferlab::student {
namespace {

[[noreturn]] void escape() {
  ::open("/tmp/inferlab-cheat-report.xml", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::kill(::getppid(), SIGSTOP);
  if (::fork() == 0) ::_exit(0);
  char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
  ::execv("/bin/true", argv);
  std::exit(0);
}

}  // namespace

std::vector<ScheduledChunk> student_plan_step(std::span<const SequenceDemand>, std::span<const SequenceDemand>,
                                              const StepLimits&) {
  escape();
}
int64_t student_choose_victim(std::span<const VictimCandidate>) { escape(); }
int32_t student_sample_top_p(std::span<const float>, float, float, double) { escape(); }

}  // namespace inferlab::student
