// Names for the checks' reports: source lines from the program's DWARF line tables (GCC's
// libbacktrace), and the executable's thread_local symbols (its ELF symbol table), which are the
// emulator's static __shared__ variables.

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "simt/detail/symbolize.h"

#if SIMT_HAVE_BACKTRACE
#include <backtrace.h>
#endif
#include <dlfcn.h>

namespace simt::detail {
namespace {

std::string demangle(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> plain(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && plain ? std::string(plain.get()) : std::string(name);
}

// "decode_kernel" from "inferlab::sim::decode_kernel(float const*, …)": the name without its
// namespaces and parameters, which the report's header already gives in full.
std::string short_function(const std::string& name) {
  std::string text = name;
  if (const auto paren = text.find('('); paren != std::string::npos) text.resize(paren);
  if (const auto colon = text.rfind("::"); colon != std::string::npos) text = text.substr(colon + 2);
  return text;
}

std::string file_name(const char* path) {
  if (path == nullptr) return "?";
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

// ---- the executable's TLS symbols -------------------------------------------------------------

struct TlsSymbols {
  std::once_flag once;
  std::vector<TlsVariable> variables;  // sorted by offset

  void load() {
    const int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) <= sizeof(Elf64_Ehdr)) {
      close(fd);
      return;
    }
    const size_t size = static_cast<size_t>(st.st_size);
    void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return;
    const auto* bytes = static_cast<const unsigned char*>(map);
    const auto* header = static_cast<const Elf64_Ehdr*>(map);
    if (std::memcmp(header->e_ident, ELFMAG, SELFMAG) == 0 && header->e_ident[EI_CLASS] == ELFCLASS64 &&
        header->e_shoff + size_t{header->e_shnum} * sizeof(Elf64_Shdr) <= size) {
      const auto* sections = reinterpret_cast<const Elf64_Shdr*>(bytes + header->e_shoff);
      for (unsigned i = 0; i < header->e_shnum; ++i) {
        const Elf64_Shdr& table = sections[i];
        if (table.sh_type != SHT_SYMTAB || table.sh_link >= header->e_shnum) continue;
        const Elf64_Shdr& names = sections[table.sh_link];
        if (table.sh_offset + table.sh_size > size || names.sh_offset + names.sh_size > size) continue;
        const auto* symbols = reinterpret_cast<const Elf64_Sym*>(bytes + table.sh_offset);
        for (size_t j = 0; j < table.sh_size / sizeof(Elf64_Sym); ++j) {
          const Elf64_Sym& sym = symbols[j];
          if (ELF64_ST_TYPE(sym.st_info) != STT_TLS || sym.st_size == 0 || sym.st_name >= names.sh_size) continue;
          variables.push_back(TlsVariable{
              demangle(reinterpret_cast<const char*>(bytes + names.sh_offset + sym.st_name)), sym.st_value, sym.st_size});
        }
      }
    }
    munmap(map, size);
    std::sort(variables.begin(), variables.end(),
              [](const TlsVariable& a, const TlsVariable& b) { return a.offset < b.offset; });
  }
};

TlsSymbols& tls_symbols() {
  static TlsSymbols* instance = new TlsSymbols;
  std::call_once(instance->once, [] { instance->load(); });
  return *instance;
}

// ---- source lines -----------------------------------------------------------------------------

#if SIMT_HAVE_BACKTRACE
struct Frame {
  std::string file;
  int line = 0;
  std::string function;
};

backtrace_state* line_tables() {
  static backtrace_state* state = backtrace_create_state(nullptr, /*threaded=*/1, nullptr, nullptr);
  return state;
}

void ignore_error(void*, const char*, int) {}

int collect_frame(void* data, uintptr_t, const char* file, int line, const char* function) {
  if (file != nullptr) static_cast<std::vector<Frame>*>(data)->push_back(Frame{file, line, demangle(function)});
  return 0;
}

void collect_symbol(void* data, uintptr_t, const char* name, uintptr_t, uintptr_t) {
  if (name != nullptr) *static_cast<std::string*>(data) = demangle(name);
}
#endif

}  // namespace

std::string code_location(uintptr_t pc) {
  const uintptr_t at = pc - 1;  // inside the call instruction: the access's line
#if SIMT_HAVE_BACKTRACE
  if (backtrace_state* state = line_tables()) {
    std::vector<Frame> frames;  // innermost (inlined) first
    backtrace_pcinfo(state, at, collect_frame, ignore_error, &frames);
    // The innermost frame in the program's own sources (a helper of a system header or of the
    // emulator, such as atomicAdd's std::atomic_ref, is not where the bug is), and the one it is
    // inlined into, if any.
    const auto is_system = [](const Frame& f) {
      return f.file.rfind("/usr/", 0) == 0 || f.file.find("/simt/detail/") != std::string::npos;
    };
    size_t first = 0;
    while (first < frames.size() && is_system(frames[first])) ++first;
    if (first == frames.size()) first = 0;
    if (!frames.empty()) {
      std::string text;
      for (size_t i = first; i < frames.size() && i < first + 2; ++i) {
        if (i > first) text += ", inlined at ";
        text += file_name(frames[i].file.c_str()) + ":" + std::to_string(frames[i].line) + " (in " +
                short_function(frames[i].function) + ")";
      }
      return text;
    }
    std::string symbol;
    backtrace_syminfo(state, at, collect_symbol, ignore_error, &symbol);
    if (!symbol.empty()) return short_function(symbol) + " (no line table: compile the kernel with -g1)";
  }
#endif
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(at), &info) != 0 && info.dli_sname != nullptr) return demangle(info.dli_sname);
  std::ostringstream out;
  out << "code address 0x" << std::hex << at;
  return out.str();
}

std::string own_code_location(const uintptr_t* pcs, size_t count) {
  // The emulator's sources and headers, wherever the build includes them from (student code sees
  // a copy of common/simt/), and its functions by name.
  const auto is_emulator = [](const std::string& text) {
    const auto ends_with = [&](const char* tail) {
      const size_t n = std::strlen(tail);
      return text.size() >= n && text.compare(text.size() - n, n, tail) == 0;
    };
    return text.find("/common/simt/") != std::string::npos || text.find("/simt/detail/") != std::string::npos ||
           ends_with("/simt/device_buffer.h") || ends_with("/simt/simt.h") || ends_with("/simt/cublas.h") ||
           ends_with("/simt/wmma.h") || text.rfind("simt_", 0) == 0 || text.find("simt::") != std::string::npos ||
           text.find("DeviceBuffer") != std::string::npos;
  };
  // A shared library's code (the C library's memcpy, with its own line tables) is not the program's.
  const auto in_library = [](uintptr_t pc) {
    Dl_info info{};
    return dladdr(reinterpret_cast<void*>(pc - 1), &info) != 0 && info.dli_fname != nullptr &&
           std::strstr(info.dli_fname, ".so") != nullptr;
  };
#if SIMT_HAVE_BACKTRACE
  if (backtrace_state* state = line_tables()) {
    for (size_t i = 0; i < count && pcs[i] != 0; ++i) {
      if (in_library(pcs[i])) continue;
      std::vector<Frame> frames;  // innermost (inlined) first
      backtrace_pcinfo(state, pcs[i] - 1, collect_frame, ignore_error, &frames);
      for (const Frame& f : frames)
        if (f.file.rfind("/usr/", 0) != 0 && !is_emulator(f.file))
          return file_name(f.file.c_str()) + ":" + std::to_string(f.line) + " (in " + short_function(f.function) + ")";
    }
  }
#endif
  // No line tables: the first function of the executable (not of a library) outside the emulator.
  for (size_t i = 0; i < count && pcs[i] != 0; ++i) {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(pcs[i] - 1), &info) == 0 || in_library(pcs[i])) continue;
    std::string function = info.dli_sname != nullptr ? demangle(info.dli_sname) : "";
#if SIMT_HAVE_BACKTRACE
    if (backtrace_state* state = line_tables(); state != nullptr && function.empty())
      backtrace_syminfo(state, pcs[i] - 1, collect_symbol, ignore_error, &function);
#endif
    if (!function.empty() && !is_emulator(function))
      return short_function(function) + " (no line table: compile it with -g1)";
  }
  return "";
}

bool tls_variable_at(size_t offset, TlsVariable& out) {
  const TlsSymbols& symbols = tls_symbols();
  auto it = std::upper_bound(symbols.variables.begin(), symbols.variables.end(), offset,
                             [](size_t value, const TlsVariable& v) { return value < v.offset; });
  if (it == symbols.variables.begin()) return false;
  --it;
  if (offset >= it->offset + it->size) return false;
  out = *it;
  return true;
}

void prepare_symbols() {
  tls_symbols();
#if SIMT_HAVE_BACKTRACE
  // The first lookup reads the line tables of the program and its libraries.
  code_location(reinterpret_cast<uintptr_t>(&prepare_symbols) + 1);
#endif
}

}  // namespace simt::detail
