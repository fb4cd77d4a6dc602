// Host code touching device memory (detail/device_memory.h): outside launches and the runtime's
// own calls every live allocation is inaccessible, so a host dereference of a device pointer
// faults, as it crashes on a GPU. The SIGSEGV handler below opens an allocation at the first
// access of a launch or runtime call that holds the heap open; any other fault on a live
// allocation is host code's, and it reports it — the host line (the first frame in the program's own sources, so a memcpy names its caller)
// and where the memory was allocated — then aborts. Any other fault goes to the handler that was
// installed before (AddressSanitizer's, or the default crash).

#include <signal.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

#include "simt/detail/device_memory.h"
#include "simt/detail/engine.h"
#include "simt/detail/symbolize.h"

namespace simt::detail {
namespace {

struct sigaction previous_action {};

void write_stderr(const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

std::string hex(uintptr_t value) {
  std::ostringstream out;
  out << "0x" << std::hex << value;
  return out.str();
}

// The faulting instruction, and whether it wrote (-1: unknown), from the signal's context.
uintptr_t fault_pc(void* context, int& wrote) {
  const auto* uc = static_cast<const ucontext_t*>(context);
  wrote = -1;
#if defined(__x86_64__)
  wrote = (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0 ? 1 : 0;  // the page fault's error code: bit 1 = write
  return static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.pc);
#else
  (void)uc;
  return 0;
#endif
}

// The faulting frame and its callers, as return addresses (the faulting pc + 1), innermost first.
struct FaultStack {
  uintptr_t fault = 0;
  bool found = false;
  size_t count = 0;
  uintptr_t pcs[32] = {};
};

_Unwind_Reason_Code collect_frame(_Unwind_Context* context, void* data) {
  auto* s = static_cast<FaultStack*>(data);
  int before_instruction = 0;
  const uintptr_t ip = _Unwind_GetIPInfo(context, &before_instruction);
  if (!s->found) {  // the handler's own frames and the signal trampoline come first
    if (ip != s->fault) return _URC_NO_REASON;
    s->found = true;
  }
  if (s->count == sizeof(s->pcs) / sizeof(s->pcs[0])) return _URC_END_OF_STACK;
  s->pcs[s->count++] = before_instruction != 0 ? ip + 1 : ip;
  return _URC_NO_REASON;
}

// "vector_sum.cu:47 (in vector_sum)": the host line of the access.
std::string host_line(uintptr_t pc) {
  FaultStack stack;
  stack.fault = pc;
  if (pc != 0) _Unwind_Backtrace(collect_frame, &stack);
  if (stack.count == 0 && pc != 0) stack.pcs[stack.count++] = pc + 1;
  std::string line = own_code_location(stack.pcs, stack.count);
  if (line.empty() && pc != 0) line = code_location(pc + 1);
  return line.empty() ? "an unknown host line" : line;
}

void pass_on(int sig, siginfo_t* info, void* context) {
  if ((previous_action.sa_flags & SA_SIGINFO) != 0 && previous_action.sa_sigaction != nullptr) {
    previous_action.sa_sigaction(sig, info, context);
    return;
  }
  if ((previous_action.sa_flags & SA_SIGINFO) == 0 && previous_action.sa_handler != SIG_DFL &&
      previous_action.sa_handler != SIG_IGN) {
    previous_action.sa_handler(sig);
    return;
  }
  // The default action: the instruction runs again and the process dies of the signal.
  signal(sig, SIG_DFL);
}

[[noreturn]] void report_host_access(uintptr_t address, void* context, bool live) {
  int wrote = -1;
  const uintptr_t pc = fault_pc(context, wrote);
  const char* verb = wrote == 1 ? "wrote" : wrote == 0 ? "read" : "touched";
  const char* noun = wrote == 1 ? "the write" : wrote == 0 ? "the read" : "the access";
  CallSite site{};
  std::string allocated;
  if (live && allocation_site(address, site)) allocated = own_code_location(site.data(), site.size());
  const std::string where = describe_device_address(address, 1, nullptr);
  std::string text = "simt: memcheck: host code " + std::string(verb) + " device memory";
  if (live)
    text += " allocated at " +
            (allocated.empty() ? std::string("an unknown line (no cudaMalloc caller found)") : allocated);
  text += "\n  " + std::string(noun) + " is at " + host_line(pc) + ": address " + hex(address) + " is " +
          (where.empty() ? "in the device heap, in no allocation" : where) +
          "\n  the CPU cannot dereference a device pointer (on a GPU the program crashes here): copy the data to "
          "the host with cudaMemcpy, or do the work in a kernel\n";
  write_stderr(text);
  std::abort();
}

void on_fault(int sig, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  if (!in_device_heap(address)) return pass_on(sig, info, context);
  const Worker* w = this_worker;
  const bool kernel = w != nullptr && w->current != nullptr && w->launch != nullptr;
  if (device_memory_open.load(std::memory_order_acquire)) {
    // A launch or a runtime call holds the heap open: this is its first access to the allocation,
    // now accessible; the access runs again. A fault on one found open already is a race with the
    // thread that opened it, unless it keeps coming back (then it is something else).
    thread_local unsigned repeats = 0;
    const Opened opened = open_on_fault(address);
    if (opened == Opened::now) {
      repeats = 0;
      return;
    }
    if (opened == Opened::already && ++repeats < 100) return;
  }
  CallSite site{};
  const bool live = allocation_site(address, site);
  if (!kernel) report_host_access(address, context, live);
  // A kernel's thread, in code the checks do not see (a sanitizer preset, a library): out of
  // bounds of its allocation, into a guard page or freed memory. Say where, then crash as before.
  const std::string where = describe_device_address(address, 1, nullptr);
  write_stderr("simt: a fault on device memory at " + hex(address) + ", " +
               (where.empty() ? std::string("in no allocation") : where) + ", in " + w->launch->header(blockIdx) +
               ", thread " + dims(w->current->thread) + "\n");
  pass_on(sig, info, context);
}

}  // namespace

void install_host_access_report() {
  struct sigaction action {};
  action.sa_sigaction = on_fault;
  sigemptyset(&action.sa_mask);
  // On the alternate signal stack when the thread has one (a fault on an overflowed stack still
  // gets its report) — except under AddressSanitizer, whose alternate stack is not a stack it
  // tracks: the report's symbolization there (libbacktrace's first use) was flagged as a
  // stack-buffer-overflow. A host access faults on an ordinary stack, which serves as well.
#if defined(__SANITIZE_ADDRESS__)
  action.sa_flags = SA_SIGINFO;
#else
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
#endif
  sigaction(SIGSEGV, &action, &previous_action);
#if defined(__SANITIZE_ADDRESS__)
  // Read the line tables now, not in the first report: libbacktrace maps its memory then, and
  // under AddressSanitizer a mapping that lands where a joined thread's stack was still carries
  // that stack's poison (its first memset there was reported as a stack-buffer-overflow).
  const uintptr_t here = reinterpret_cast<uintptr_t>(&install_host_access_report) + 1;
  (void)own_code_location(&here, 1);
#endif
}

}  // namespace simt::detail

namespace simt {
bool host_access_checked() {
  return detail::device_memory_guarded();
}
}  // namespace simt
