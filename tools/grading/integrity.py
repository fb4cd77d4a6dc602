"""What a student library may contain and use: the checks that run after it builds, before any test.

The graded tests run student code only in a sandboxed child process (tests/support/isolation.h),
so the verdict is the trusted parent's. What the parent executes must therefore be the lab's code
alone, and what the child may call must not answer the exercise for it:

  exports      every symbol the library defines globally is in a student namespace
               (inferlab::student, inferlab::sim::student, inferlab::cuda::student), or is a
               weak copy of a template/inline function of a header the student may include —
               never a definition of a lab, C library or GoogleTest name (overriding
               compare_to_oracle, attention_reference, write, _exit …);
  startup      no code that runs without being called: no .init_array/.ctors/.preinit_array
               (global objects with constructors, __attribute__((constructor)), <iostream>'s
               static initialiser), no .fini_array/.dtors, no .init/.fini fragments, no GNU
               indirect functions (their resolvers run when the program loads);
  references   no reference — strong, weak or through a header's inline code — to anything
               the reference kernels, the runtime, the chapters, the test support or GoogleTest
               define, nor to the parts of common/ that answer an exercise (the oracle
               comparison, the FLOP/byte counts), nor to MPI (chapter 10's ring all-reduce is
               written on the contract's Link, not on MPI_Allreduce);
  includes     every header a student object includes is the student's own, a contract header
               (exercises/NN-slug/*.h, *.cuh), one of OFFERED_COMMON_HEADERS or a system header.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .model import ROOT

# What common/ deliberately offers student code (paths relative to the repository root).
# Everything under common/simt/ (the emulator a kernel exercise compiles against) is offered too.
OFFERED_COMMON_HEADERS = (
    "common/check.h",       # require(), NotImplemented: argument checks with clear messages
    "common/tensor.h",      # Tensor<T>, Shape: the lab's array type
    "common/huge_pages.h",  # the storage under Tensor
    "common/half.h",        # fp16/bf16 conversions
    "common/cost.h",        # the Cost struct that exercise 1.3 returns (its functions are not offered)
)
OFFERED_COMMON_DIRS = ("common/simt/",)
# The objects of libinferlab_common.a whose functions student code may call: the offered headers'
# out-of-line parts. The rest of common/ (the oracle comparison, the FLOP/byte counts, the
# roofline, the RNG, .npy files, backend selection) is the lab's side of the grading.
OFFERED_COMMON_OBJECTS = ("tensor.cpp.o", "half.cpp.o", "huge_pages.cpp.o")
# Libraries under the build folder whose definitions student code must not reference.
TRUSTED_DIRS = ("kernels", "runtime", "chapters", "tests", "tools", "common")

# Libraries outside the build folder that answer an exercise: MPI's collectives (chapter 10), by
# their C names — MPI_* and its profiling twins PMPI_*, Open MPI's handles ompi_* (MPI_FLOAT, MPI_SUM,
# MPI_COMM_WORLD are macros over ompi_mpi_float, …) and its components mca_*.
FORBIDDEN_EXTERNAL = re.compile(r"^(MPI_|PMPI_|ompi_|mca_|MPIX_)")

STUDENT_NAMESPACES = ("inferlab::student::", "inferlab::sim::student::", "inferlab::cuda::student::")
# Weak copies of templates and inline functions in these namespaces come from the C++ library
# or the emulator's headers.
LIBRARY_NAMESPACES = ("std::", "__gnu_cxx::", "__cxxabiv1::", "simt::", "__gnu_debug::")
STARTUP_SECTIONS = re.compile(r"^\.(init_array|fini_array|preinit_array|ctors|dtors|init|fini)(\.|$)")
WEAK_KINDS = set("WVuvw")
STRONG_KINDS = set("TDBRGSC")


@dataclass
class Findings:
    """What the checks found in one student library (empty lists: clean)."""
    exports: list[str] = field(default_factory=list)
    startup: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    includes: list[str] = field(default_factory=list)

    def clean(self) -> bool:
        return not (self.exports or self.startup or self.references or self.includes)

    def explain(self, limit: int = 12) -> str:
        parts = []
        for title, items in (
                ("defines names outside the student namespaces (only inferlab::student / inferlab::sim::student "
                 "may be defined)", self.exports),
                ("has code that runs without being called (global objects with constructors, "
                 "__attribute__((constructor)/(destructor)), <iostream>, ifunc): not allowed in exercise files",
                 self.startup),
                ("refers to code it is graded against (reference kernels, runtime, tests, the oracle, the cost "
                 "counts, GoogleTest, MPI)", self.references),
                ("includes headers that are not offered (your folder, the contract headers, system headers and "
                 + ", ".join(OFFERED_COMMON_HEADERS) + ", common/simt/ only)", self.includes)):
            if items:
                parts.append(f"the student library {title}:\n  " + "\n  ".join(items[:limit])
                             + (f"\n  ... and {len(items) - limit} more" if len(items) > limit else ""))
        return "\n".join(parts)


# ---- symbols ------------------------------------------------------------------------------------


def nm_symbols(lib: Path, *flags: str) -> list[tuple[str, str, str]]:
    """(member object, kind letter, mangled name) for each symbol nm lists."""
    r = subprocess.run(["nm", "-A", *flags, str(lib)], capture_output=True, text=True)
    out = []
    for line in r.stdout.splitlines():
        # "lib.a:member.o:0000000000000000 T name" or "lib.a:member.o:                 U name"
        head, _, rest = line.rpartition(":")
        parts = rest.split()
        if len(parts) >= 2:
            member = head.rsplit(":", 1)[-1]
            out.append((member, parts[-2], parts[-1]))
    return out


def demangle(names: list[str]) -> list[str]:
    if not names or not shutil.which("c++filt"):
        return list(names)
    r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    lines = r.stdout.splitlines()
    return lines if r.returncode == 0 and len(lines) == len(names) else list(names)


def offered_identifiers() -> set[str]:
    """Every identifier spelled in the offered headers: a weak definition outside the student
    namespaces must be a copy of something these declare (Tensor<float>::dim, require<int>, …)."""
    words: set[str] = set()
    files = [ROOT / h for h in OFFERED_COMMON_HEADERS]
    for d in OFFERED_COMMON_DIRS:
        files += sorted((ROOT / d).rglob("*.h"))
    for f in files:
        if f.is_file():
            words |= set(re.findall(r"[A-Za-z_]\w*", f.read_text(errors="replace")))
    return words


def _qualified_name(demangled: str) -> str:
    """'void inferlab::require<int>(bool, …)' → 'inferlab::require'; templates and arguments dropped."""
    s = demangled
    for prefix in ("typeinfo name for ", "typeinfo for ", "vtable for ", "guard variable for ",
                   "VTT for ", "construction vtable for "):
        if s.startswith(prefix):
            s = s[len(prefix):]
    # Drop template arguments and parameter lists (nested brackets), then a leading return type.
    out, depth = [], 0
    for ch in s:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    tokens = "".join(out).split()
    # Qualifiers after the parameter list, and the declarator of a type name: "typeinfo for
    # inferlab::student::BlockQ8_0 const*" (a kernel argument of a student struct's pointer type,
    # which the emulator's launch records) names inferlab::student::BlockQ8_0.
    while len(tokens) > 1 and (tokens[-1] in ("volatile", "&&", "noexcept") or re.fullmatch(r"(const|[*&])+", tokens[-1])):
        tokens.pop()
    return tokens[-1] if tokens else ""


def export_problem(kind: str, demangled: str, offered: set[str]) -> str | None:
    """Why a global definition of the student library is not allowed (None: allowed)."""
    name = _qualified_name(demangled)
    if kind == "i":
        return f"{demangled} (an indirect function: its resolver runs when the program loads)"
    if any(name.startswith(ns) or demangled.startswith(ns) for ns in STUDENT_NAMESPACES) or \
            any(f" {ns}" in f" {name}" for ns in STUDENT_NAMESPACES):
        return None
    if kind in STRONG_KINDS:
        return f"{demangled} (defined outside the student namespaces)"
    if kind in WEAK_KINDS:
        if demangled.startswith("DW.ref.") or any(name.startswith(ns) for ns in LIBRARY_NAMESPACES):
            return None
        parts = [p for p in name.split("::") if p]
        if parts and all(p in offered or p.startswith("~") and p[1:] in offered or p.startswith("operator")
                         for p in parts):
            return None
        return f"{demangled} (a weak definition of a name no offered header declares)"
    return None


def check_symbols(student_lib: Path, build: Path) -> tuple[list[str], list[str]]:
    """(export problems, forbidden references) of @p student_lib against the trusted libraries."""
    defined = nm_symbols(student_lib, "--defined-only", "-g")
    undefined = nm_symbols(student_lib, "--undefined-only")
    own = {name for _, _, name in defined}
    offered = offered_identifiers()
    names = [name for _, _, name in defined]
    exports = []
    for (member, kind, _), pretty in zip(defined, demangle(names)):
        why = export_problem(kind, pretty, offered)
        if why:
            exports.append(f"{why} [{member}]")

    allowed: set[str] = set()
    forbidden: set[str] = set()
    for sub in TRUSTED_DIRS:
        for lib in sorted((build / sub).rglob("*.a")) if (build / sub).is_dir() else []:
            if "student" in lib.name:
                continue
            is_simt = "simt" in lib.name
            for member, kind, name in nm_symbols(lib, "--defined-only", "-g"):
                if is_simt or (lib.name == "libinferlab_common.a" and member in OFFERED_COMMON_OBJECTS):
                    allowed.add(name)
                else:
                    forbidden.add(name)
    wanted = {name for _, _, name in undefined} - own
    forbidden |= {name for name in wanted if FORBIDDEN_EXTERNAL.match(name)}
    hits = sorted((wanted & forbidden) - allowed)
    gtest = sorted(s for s in wanted - allowed if s.startswith("_ZN7testing") or s.startswith("_ZNK7testing"))
    references = demangle(hits + [g for g in gtest if g not in hits])
    return sorted(set(exports)), references


# The one start-up function the lab itself puts in student objects: the sim build's checks compile
# kernels with -fsanitize=thread's instrumentation, which adds to every object a constructor of
# priority 99 (section .init_array.00099) that only jumps to __tsan_init, which the emulator
# defines as an empty function (common/simt/checks.cpp).
INSTRUMENTATION_CTOR_SECTION = ".init_array.00099"
INSTRUMENTATION_CTOR_CODE = re.compile(
    r"^(endbr64|nop\w*( .*)?|push +%rbp|mov +%rsp,%rbp|pop +%rbp|(sub|add) +\$0x[0-9a-f]+,%rsp|ret\w*|"
    r"(call|jmp) +[0-9a-f]+ <[^>]*>)$")


def instrumentation_ctor_members(student_lib: Path) -> set[str]:
    """Members of @p student_lib whose .text.startup holds only the instrumentation's constructor:
    functions named _sub_I_00099_0… made of a jump or call to __tsan_init and frame bookkeeping."""
    r = subprocess.run(["objdump", "-dr", "--no-show-raw-insn", "-j", ".text.startup", str(student_lib)],
                       capture_output=True, text=True)
    good: dict[str, bool] = {}
    member, function, calls = "?", "", 0
    for raw in r.stdout.splitlines():
        line = raw.strip()
        m_member = re.match(r"^(\S+):\s+file format", line)
        if m_member:
            member = m_member.group(1)
            good.setdefault(member, True)
            continue
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:$", line)
        if m:
            function = m.group(1)
            if not re.match(r"^_sub_I_00099_0", function):
                good[member] = False
            continue
        m = re.match(r"^[0-9a-f]+: R_X86_64_\w+\s+(\S+)$", line)
        if m:
            if not re.match(r"^__tsan_init(-0x[0-9a-f]+)?$", m.group(1)):
                good[member] = False
            continue
        m = re.match(r"^[0-9a-f]+:\s+(.*)$", line)
        if m and not INSTRUMENTATION_CTOR_CODE.match(re.sub(r"\s+", " ", m.group(1).strip())):
            good[member] = False
    return {name for name, ok in good.items() if ok}


def check_startup(student_lib: Path) -> list[str]:
    """Sections of @p student_lib whose code runs without being called (the instrumentation's own
    constructor excepted: see INSTRUMENTATION_CTOR_SECTION)."""
    r = subprocess.run(["readelf", "-SW", str(student_lib)], capture_output=True, text=True)
    found, member, ctor_members = [], "?", None
    for line in r.stdout.splitlines():
        m = re.match(r"^File: .*\((.*)\)$", line.strip())
        if m:
            member = m.group(1)
            continue
        m = re.match(r"^\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+\S+\s+\S+\s+([0-9a-f]+)", line)
        if m and STARTUP_SECTIONS.match(m.group(1)) and int(m.group(2), 16) > 0:
            if m.group(1) == INSTRUMENTATION_CTOR_SECTION and int(m.group(2), 16) == 8:
                if ctor_members is None:
                    ctor_members = instrumentation_ctor_members(student_lib)
                if member in ctor_members:
                    continue
            found.append(f"{m.group(1)} in {member}")
    return sorted(set(found))


# ---- includes -----------------------------------------------------------------------------------


def include_problem(header: Path, student_dir: Path, build: Path) -> str | None:
    """Why @p header may not be included by student code (None: it may)."""
    try:
        path = header.resolve()
    except OSError:
        return None
    if path.is_relative_to(student_dir.resolve()) or path.is_relative_to((build / "generated").resolve()):
        return None
    if path.is_relative_to((ROOT / "exercises").resolve()):
        if path.suffix not in (".h", ".cuh", ".hpp"):
            return f"{header} (only the contract headers of exercises/ may be included)"
        return None
    if path.is_relative_to(build.resolve()):
        # The wrappers inferlab_add_kernels() generates around each .cu (they include only it).
        return None
    root = ROOT.resolve()
    if not path.is_relative_to(root):
        return None  # a system or third-party header
    rel = path.relative_to(root).as_posix()
    if rel in OFFERED_COMMON_HEADERS or any(rel.startswith(d) for d in OFFERED_COMMON_DIRS):
        return None
    return rel


def check_includes(build: Path, objects: list[Path], student_dir: Path) -> list[str]:
    """Headers the student objects include that are not offered."""
    found: set[str] = set()
    for obj in objects:
        rel = obj.relative_to(build).as_posix()
        r = subprocess.run(["ninja", "-C", str(build), "-t", "deps", rel], capture_output=True, text=True)
        for line in r.stdout.splitlines()[1:]:
            dep = line.strip()
            if not dep:
                continue
            # Ninja names a dependency relative to the build folder when the compile line did (ccache's
            # CCACHE_BASEDIR rewrites absolute paths under the sources to relative ones).
            header = Path(dep) if Path(dep).is_absolute() else build / dep
            why = include_problem(header, student_dir, build)
            if why:
                found.add(f"{why} (from {obj.name.split('.')[0]})")
    return sorted(found)


def student_objects(build: Path, lib: Path) -> list[Path]:
    """The object files the build links into @p lib now (never stale objects of an earlier tree)."""
    rel = lib.relative_to(build).as_posix()
    r = subprocess.run(["ninja", "-C", str(build), "-t", "query", rel], capture_output=True, text=True)
    objs, in_inputs = [], False
    for line in r.stdout.splitlines():
        if line.startswith("  input:"):
            in_inputs = True
            continue
        if line.startswith("  outputs:"):
            break
        entry = line.strip()
        if in_inputs and entry.endswith(".o") and not entry.startswith("||"):
            objs.append(build / entry)
    return objs


def student_library(build: Path, target: str) -> Path | None:
    """The archive the build produces for @p target (student_chNN or student_chNN_sim)."""
    r = subprocess.run(["ninja", "-C", str(build), "-t", "query", target], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        entry = line.strip()
        if entry.endswith(".a") and not entry.startswith("||"):
            return build / entry
    return None


def inspect(build: Path, target: str, student_dir: Path) -> Findings:
    """Every check on the student library @p target (student_chNN or student_chNN_sim)."""
    findings = Findings()
    lib = student_library(build, target)
    if lib is None or not shutil.which("nm"):
        findings.exports.append("cannot inspect the student library (not found, or nm missing: apt-get install binutils)")
        return findings
    findings.exports, findings.references = check_symbols(lib, build)
    findings.startup = check_startup(lib)
    findings.includes = check_includes(build, student_objects(build, lib), student_dir)
    return findings
