"""Building a student tree: the build folder, the chapters, one target at a time, and what a failed build log says."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

from .contain import run_contained
from .model import CHAPTER_DIR, ROOT, Chapter, GradeError


def resolve_student(arg: str) -> tuple[str, Path, str]:
    """(cmake value of INFERLAB_STUDENT, the folder, a name for the build/out folders)."""
    if arg in ("exercises", "solutions"):
        return arg, ROOT / arg, arg
    path = Path(arg).expanduser().resolve()
    for keyword in ("exercises", "solutions"):
        if path == (ROOT / keyword).resolve():
            return keyword, path, keyword
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", path.name) or "student"
    return str(path), path, f"{base}-{digest}"


def discover_chapters() -> list[Chapter]:
    chapters = []
    for d in sorted((ROOT / "exercises").iterdir()):
        m = CHAPTER_DIR.match(d.name)
        if d.is_dir() and m:
            chapters.append(Chapter(m.group(1), m.group(2)))
    return chapters


def declares_graded_test(title: str, test: str) -> bool:
    """Whether tests/<title>/ declares the graded program @p test (in its CMakeLists.txt or a .cmake
    file it includes, as chapters 08–10's student.cmake), so that a chapter without it is
    missing student sources rather than graded tests."""
    folder = ROOT / "tests" / title
    files = [folder / "CMakeLists.txt", *sorted(folder.glob("*.cmake"))] if folder.is_dir() else []
    return any(f.is_file() and test in f.read_text(errors="replace") for f in files)


def ninja_targets(build: Path) -> set[str]:
    r = subprocess.run(["ninja", "-C", str(build), "-t", "targets", "all"], capture_output=True, text=True)
    if r.returncode != 0:
        raise GradeError(f"cannot list the build's targets: {r.stderr.strip()}")
    return {line.split(":", 1)[0] for line in r.stdout.splitlines() if ":" in line}


def find_binary(build: Path, name: str) -> Path | None:
    for dirpath, dirnames, filenames in os.walk(build):
        dirnames[:] = [d for d in dirnames if d != "CMakeFiles"]
        if name in filenames:
            p = Path(dirpath) / name
            if os.access(p, os.X_OK):
                return p
    return None


def lab_libraries(build: Path, test: str) -> list[str]:
    """The lab's static libraries the graded program @p test links (paths in @p build; the student
    libraries left out): what the inspection forbids student code to refer to is what they define,
    so they must be built before it — a fresh build folder holds none of them yet."""
    def inputs(target: str) -> list[str]:  # what `ninja -t query` lists under "input:", "|" and "||" dropped
        r = subprocess.run(["ninja", "-C", str(build), "-t", "query", target], capture_output=True, text=True)
        found, in_inputs = [], False
        for line in r.stdout.splitlines() if r.returncode == 0 else []:
            if line.startswith("  input:"):
                in_inputs = True
            elif line.startswith("  outputs:"):
                break
            elif in_inputs and line.strip():
                found.append(line.strip().lstrip("|").strip())
        return found
    libs: list[str] = []
    for program in inputs(test):  # the phony target's executable
        for entry in inputs(program):
            if entry.endswith(".a") and not entry.startswith("/") and "student" not in entry.rsplit("/", 1)[-1] \
                    and entry not in libs:
                libs.append(entry)
    return libs


def build_target(build: Path, target: str | list[str], jobs: int, timeout_s: float,
                 log_path: Path) -> tuple[bool, str]:
    targets = [target] if isinstance(target, str) else list(target)
    cmd = ["cmake", "--build", str(build), "--target", *targets, "--parallel", str(jobs), "--", "-k", "0"]
    r = run_contained(cmd, timeout_s, max_output=4 * 1024 * 1024)
    with log_path.open("a") as f:
        f.write(f"$ {' '.join(cmd)}\n{r.output}\n")
    if r.timed_out:
        return False, r.output + f"\nerror: the build took longer than {timeout_s:g} s and was stopped\n"
    return r.returncode == 0, r.output


def first_errors(log: str, max_lines: int = 15) -> str:
    """The first compiler/linker errors of a Ninja build log (what a student should read)."""
    lines = log.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("FAILED:")), None)
    if start is not None:
        lines = lines[start + 2:]  # the FAILED: line, then the command Ninja ran
    progress = re.compile(r"^\[\d+/\d+\] ")
    lines = [l for l in lines if not l.startswith(("ninja: ", "FAILED:")) and not progress.match(l)]
    pattern = re.compile(r"error|undefined reference|multiple definition|ld returned", re.I)
    first = next((i for i, l in enumerate(lines) if pattern.search(l)), None)
    if first is None:
        return "\n".join(lines[:max_lines]).strip()
    # Keep up to two lines of context before the first error ("In function ...").
    begin = max(0, first - 2)
    return "\n".join(lines[begin:begin + max_lines]).rstrip()


def failed_outputs(log: str) -> list[str]:
    """The outputs Ninja names on its FAILED: lines."""
    out = []
    for line in log.splitlines():
        if line.startswith("FAILED:"):
            out.extend(line[len("FAILED:"):].split())
    return out


def blames_student(outputs: list[str], number: str) -> bool:
    """Whether every failed Ninja output is the student's library or its graded test's link."""
    if not outputs:
        return True
    for o in outputs:
        base = o.rsplit("/", 1)[-1]
        if f"student_ch{number}" in o or base == f"test_ch{number}_student":
            continue
        return False
    return True
