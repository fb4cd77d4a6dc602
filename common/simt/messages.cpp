// How the emulator's messages name things: source lines, dimensions, synchronisation points,
// thread ranges, and kernels (their symbols, found even with internal linkage).

#include <cxxabi.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "simt/detail/messages.h"

namespace simt::detail {
namespace {

// The symbol at exactly @p address from the ELF symbol table of the file that holds it: finds
// kernels with internal linkage (static, anonymous namespace), which dladdr cannot see.
std::string elf_symbol(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  if (info.dli_sname != nullptr && info.dli_saddr == address) return info.dli_sname;
  const char* path = info.dli_fname[0] != '\0' ? info.dli_fname : "/proc/self/exe";
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  std::string found;
  if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) > sizeof(Elf64_Ehdr)) {
    void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (map != MAP_FAILED) {
      const auto* bytes = static_cast<const unsigned char*>(map);
      const auto* header = static_cast<const Elf64_Ehdr*>(map);
      const size_t size = static_cast<size_t>(st.st_size);
      if (std::memcmp(header->e_ident, ELFMAG, SELFMAG) == 0 && header->e_ident[EI_CLASS] == ELFCLASS64 &&
          header->e_shoff + size_t{header->e_shnum} * sizeof(Elf64_Shdr) <= size) {
        const auto* sections = reinterpret_cast<const Elf64_Shdr*>(bytes + header->e_shoff);
        const uintptr_t bias = header->e_type == ET_DYN ? reinterpret_cast<uintptr_t>(info.dli_fbase) : 0;
        const uintptr_t wanted = reinterpret_cast<uintptr_t>(address) - bias;
        for (unsigned i = 0; i < header->e_shnum && found.empty(); ++i) {
          const Elf64_Shdr& table = sections[i];
          if (table.sh_type != SHT_SYMTAB || table.sh_link >= header->e_shnum) continue;
          const Elf64_Shdr& names = sections[table.sh_link];
          if (table.sh_offset + table.sh_size > size || names.sh_offset + names.sh_size > size) continue;
          const auto* symbols = reinterpret_cast<const Elf64_Sym*>(bytes + table.sh_offset);
          for (size_t j = 0; j < table.sh_size / sizeof(Elf64_Sym); ++j) {
            if (ELF64_ST_TYPE(symbols[j].st_info) != STT_FUNC || symbols[j].st_value != wanted) continue;
            if (symbols[j].st_name < names.sh_size)
              found = reinterpret_cast<const char*>(bytes + names.sh_offset + symbols[j].st_name);
            break;
          }
        }
      }
      munmap(map, size);
    }
  }
  close(fd);
  return found;
}

}  // namespace

std::string where(const std::source_location& site) {
  std::string file = site.file_name();
  if (const auto slash = file.find_last_of('/'); slash != std::string::npos) file = file.substr(slash + 1);
  return file + ":" + std::to_string(site.line());
}

std::string dims(uint3 d) {
  std::string text(1, '(');  // (built by appending: g++ 12 warns falsely on "(" + std::string)
  text.append(std::to_string(d.x)).append(1, ',').append(std::to_string(d.y)).append(1, ',');
  text.append(std::to_string(d.z)).append(1, ')');
  return text;
}

const char* op_name(Op op) {
  switch (op) {
    case Op::barrier:
      return "__syncthreads()";
    case Op::syncwarp:
      return "__syncwarp";
    case Op::shfl_idx:
      return "__shfl_sync";
    case Op::shfl_up:
      return "__shfl_up_sync";
    case Op::shfl_down:
      return "__shfl_down_sync";
    case Op::shfl_xor:
      return "__shfl_xor_sync";
    case Op::ballot:
      return "__ballot_sync";
    case Op::any:
      return "__any_sync";
    case Op::all:
      return "__all_sync";
    case Op::reduce_add:
      return "__reduce_add_sync";
    case Op::reduce_min_signed:
    case Op::reduce_min_unsigned:
      return "__reduce_min_sync";
    case Op::reduce_max_signed:
    case Op::reduce_max_unsigned:
      return "__reduce_max_sync";
    case Op::reduce_and:
      return "__reduce_and_sync";
    case Op::reduce_or:
      return "__reduce_or_sync";
    case Op::reduce_xor:
      return "__reduce_xor_sync";
    case Op::match_any:
      return "__match_any_sync";
  }
  return "?";
}

// "0-15, 17, 20-31": compact list of linear thread ids.
std::string id_ranges(const std::vector<unsigned>& ids) {
  std::ostringstream out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (i != 0) out << ", ";
    out << ids[i];
    if (j > i) out << "-" << ids[j];
    i = j + 1;
  }
  return out.str();
}

std::string kernel_name(const void* kernel, const std::source_location& site) {
  static std::mutex mutex;
  static std::map<const void*, std::string> cache;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(kernel); it != cache.end()) return it->second;
  std::string name = kernel != nullptr ? elf_symbol(kernel) : "";
  if (!name.empty()) {
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status),
                                                     std::free);
    if (status == 0 && demangled) name = demangled.get();
  } else {
    name = "<kernel launched at " + where(site) + ">";
  }
  cache.emplace(kernel, name);
  return name;
}

}  // namespace simt::detail
