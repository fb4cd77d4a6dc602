#!/usr/bin/env python3
"""InferLab grader: builds a student tree, runs its graded tests in isolation, scores each chapter.

Standard library only. Run it through the launcher (`./inferlab grade ...`) or directly
(`python3 tools/grade.py ...`). See `--help` for what it does and what it contains.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import fcntl
import hashlib
import json
import os
import re
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOT_IMPLEMENTED = "not implemented yet"
CHAPTER_DIR = re.compile(r"^(\d\d)-([A-Za-z0-9._-]+)$")

# Outcomes of one graded test, in the order the report lists them.
PASSED, FAILED, NOT_IMPL, CRASHED, TIMEOUT, SKIPPED = (
    "passed", "failed", "not-implemented", "crashed", "timeout", "skipped")
OUTCOMES = (PASSED, NOT_IMPL, FAILED, CRASHED, TIMEOUT, SKIPPED)

# States of one chapter.
GRADED, NO_COMPILE, NO_LINK, FORBIDDEN, MISSING, NO_LIST, LAB_BROKEN, NO_TESTS = (
    "graded", "did-not-compile", "did-not-link", "forbidden-calls", "missing",
    "listing-failed", "lab-build-failed", "no-graded-tests")

EPILOG = """\
what it does
  1. configures its own build folder (Ninja, Release, CPU + sim backends, no CUDA, no docs)
     with -DINFERLAB_STUDENT=<the student tree>: build/grade-exercises, build/grade-solutions,
     or build/grade-student, shared by every student copy (so grading a class recompiles only
     each student's own files; concurrent runs wait for each other);
  2. for each chapter folder exercises/NN-slug/ builds the student's library student_chNN and
     then the chapter's graded test program test_chNN_student, SEPARATELY: a chapter that does
     not compile or link scores 0 (its first compiler errors are shown) and the others are
     still graded;
  3. lists each program's tests (--gtest_list_tests) and runs every test in its own process
     (--gtest_filter), --jobs at a time, each with a --timeout. A test is
       passed           it ran to the end and GoogleTest recorded a pass
       not-implemented  it failed with "not implemented yet: <exercise>" (a stub)
       failed           any other failure (wrong values, exception, exit before the test ended)
       crashed          killed by a signal (segfault, abort, ...)
       timeout          still running after --timeout seconds (its process group is killed)
       skipped          GTEST_SKIP (counts as not passed)
  4. prints a per-chapter table and writes, into --out:
       grade.json      everything: chapters, scores, each test's outcome, message, time
       junit.xml       JUnit XML, one <testsuite> per chapter (for CI / LMS import)
       logs/           build-chNN.log per chapter and chNN/<test>.log per test

score
  chapter score = tests passed / graded tests of the chapter (each TEST is one unit);
  a chapter that does not compile, does not link or calls the reference code scores 0.
  overall = the mean of the chapter scores (each chapter weighs the same).

containment
  each test runs in its own process group, with no core dumps, a --memory-limit address-space
  cap and its output capped (head and tail kept); when it times out, it and every process it
  started are killed as a group (SIGKILL).
  Student code links only inferlab::common, and the grader also rejects (scores 0, "calls the
  reference code") a student library that refers to any symbol defined by the reference
  kernels (kernels/), the chapters or the test support (tests/) — the oracle the student is
  graded against — or to GoogleTest itself. The contract headers always come from this repo's
  exercises/, so editing a copy of ch01.h changes nothing. Random test data is freshly seeded
  (a failure prints its seed); set INFERLAB_SEED=<n> to replay one.

exit status
  0  graded (whatever the score: a low grade is not an error)
  1  --expect-not-implemented / --expect-full-marks was not met
  2  the grader itself could not run (bad folder, configure failed, the lab's own code
     does not build, ...)

examples
  ./inferlab grade                              # a student grading their own exercises/
  ./inferlab grade --student ~/subs/alice --out ~/grades/alice
  ./inferlab grade --student solutions --expect-full-marks
  ./inferlab grade --student exercises --expect-not-implemented   # what .ci/run checks
"""


# ---------------------------------------------------------------------------------------------
# Data


@dataclass
class TestResult:
    name: str                 # Suite.Test
    outcome: str = FAILED
    message: str = ""
    duration_s: float = 0.0
    output: str = ""          # captured output (possibly truncated)
    returncode: int | None = None


@dataclass
class Chapter:
    number: str               # "01"
    slug: str                 # "naive-cpu-attention"
    status: str = GRADED
    notes: list[str] = field(default_factory=list)
    build_errors: str = ""
    build_s: float = 0.0
    tests: list[TestResult] = field(default_factory=list)
    binary: Path | None = None

    @property
    def key(self) -> str:
        return f"ch{self.number}"

    @property
    def title(self) -> str:
        return f"{self.number}-{self.slug}"

    @property
    def passed(self) -> int:
        return sum(t.outcome == PASSED for t in self.tests)

    @property
    def total(self) -> int:
        return len(self.tests)

    @property
    def counted(self) -> bool:
        """Whether the chapter counts towards the overall score."""
        return self.status != NO_TESTS

    @property
    def score(self) -> float:
        if self.status != GRADED or not self.tests:
            return 0.0
        return 100.0 * self.passed / self.total

    def counts(self) -> dict[str, int]:
        return {o: sum(t.outcome == o for t in self.tests) for o in OUTCOMES}


# ---------------------------------------------------------------------------------------------
# Pure logic (unit-tested by tools/test_grade.py)


def parse_gtest_list(text: str) -> list[str]:
    """Full test names (Suite.Test) from `--gtest_list_tests` output."""
    names: list[str] = []
    suite = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not raw[0].isspace():
            suite = line if line.endswith(".") else None
        elif suite is not None:
            names.append(suite + line.strip())
    return names


def parse_gtest_xml(text: str | None, test: str) -> str:
    """What GoogleTest's XML report says about `test`: passed|failed|skipped|missing|not-run."""
    if not text:
        return "missing"
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return "missing"
    suite, _, name = test.partition(".")
    for suite_el in root.iter("testsuite"):
        if suite_el.get("name") != suite:
            continue
        for case in suite_el.iter("testcase"):
            if case.get("name") != name:
                continue
            if case.get("status", "run") != "run":
                return "not-run"
            if case.find("failure") is not None or case.find("error") is not None:
                return "failed"
            if case.get("result") == "skipped" or case.find("skipped") is not None:
                return "skipped"
            return "passed"
    return "not-run"


def failure_message(output: str, limit: int = 300) -> str:
    """A one-line summary of a GoogleTest failure: the first failure block, squeezed."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if "C++ exception with description" in line or "unknown file: Failure" in line:
            for cand in lines[i:i + 3]:
                if "C++ exception" in cand:
                    return _squeeze(cand.strip(), limit)
        if line.rstrip().endswith(": Failure") or line.rstrip().endswith(": error:"):
            block = [l.strip() for l in lines[i + 1:i + 6] if l.strip()]
            block = [l for l in block if not l.startswith("[")]
            return _squeeze(" | ".join(block[:4]), limit)
    for line in lines:
        if "error" in line.lower() or "fail" in line.lower():
            if not line.startswith("["):
                return _squeeze(line.strip(), limit)
    return ""


def _squeeze(s: str, limit: int) -> str:
    s = re.sub(r"\s+", " ", s)
    return s if len(s) <= limit else s[:limit - 1] + "…"


def classify(returncode: int | None, timed_out: bool, output: str, xml_status: str,
             timeout_s: float = 0.0) -> tuple[str, str]:
    """(outcome, one-line message) of one test run in its own process."""
    if timed_out:
        return TIMEOUT, f"timed out after {timeout_s:g} s (process group killed)"
    if returncode is not None and returncode < 0:
        try:
            sig = signal.Signals(-returncode).name
        except ValueError:
            sig = f"signal {-returncode}"
        msg = f"killed by {sig}"
        if sig == "SIGXFSZ":
            msg += " (output limit)"
        return CRASHED, msg
    m = re.search(re.escape(NOT_IMPLEMENTED) + r"(: [A-Za-z0-9_:./<>-]+)?", output)
    if returncode == 0:
        if xml_status == "passed":
            return PASSED, ""
        if xml_status == "skipped":
            return SKIPPED, "skipped (GTEST_SKIP)"
        if xml_status == "failed":
            return FAILED, failure_message(output) or "failed"
        return FAILED, "the process exited before the test finished (exit() called from the code under test?)"
    if m:
        return NOT_IMPL, m.group(0).strip()
    msg = failure_message(output)
    if not msg:
        msg = f"exit status {returncode}"
    return FAILED, msg


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


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(s: str) -> str:
    return _XML_BAD.sub("?", s)


def overall_score(chapters: list[Chapter]) -> float:
    counted = [c for c in chapters if c.counted]
    return sum(c.score for c in counted) / len(counted) if counted else 0.0


def chapter_note(ch: Chapter) -> str:
    notes = {
        NO_COMPILE: "did not compile",
        NO_LINK: "did not link",
        FORBIDDEN: "calls the reference code",
        MISSING: "no student sources",
        NO_LIST: "tests could not be listed",
        LAB_BROKEN: "the lab's own code failed to build",
        NO_TESTS: "no graded tests yet (not counted)",
    }
    if ch.status in notes:
        parts = [notes[ch.status]]
    else:
        c = ch.counts()
        parts = []
        for outcome, word in ((NOT_IMPL, "not implemented"), (FAILED, "failed"), (CRASHED, "crashed"),
                              (TIMEOUT, "timed out"), (SKIPPED, "skipped")):
            if c[outcome]:
                parts.append(f"{c[outcome]} {word}")
    return ", ".join(parts + ch.notes)


def score_table(chapters: list[Chapter]) -> str:
    rows = [("chapter", "passed", "score", "notes")]
    for ch in chapters:
        total = str(ch.total) if ch.status == GRADED else "-"
        rows.append((ch.title, f"{ch.passed}/{total}", f"{ch.score:.0f}%" if ch.counted else "-",
                     chapter_note(ch)))
    rows.append(("overall", f"{sum(c.passed for c in chapters)}/{sum(c.total for c in chapters)}",
                 f"{overall_score(chapters):.0f}%", "mean of the chapter scores"))
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    fmt = lambda r: f"{r[0]:<{w[0]}}  {r[1]:>{w[1]}}  {r[2]:>{w[2]}}  {r[3]}".rstrip()
    lines = [fmt(rows[0]), "-" * (w[0] + w[1] + w[2] + 6 + max(len(r[3]) for r in rows))]
    lines += [fmt(r) for r in rows[1:-1]]
    lines += [lines[1], fmt(rows[-1])]
    return "\n".join(lines)


def grade_json(chapters: list[Chapter], meta: dict) -> dict:
    out = dict(meta)
    out["score_percent"] = round(overall_score(chapters), 2)
    out["passed"] = sum(c.passed for c in chapters)
    out["total"] = sum(c.total for c in chapters)
    out["chapters"] = []
    for ch in chapters:
        out["chapters"].append({
            "chapter": ch.key,
            "folder": ch.title,
            "status": ch.status,
            "counted": ch.counted,
            "passed": ch.passed,
            "total": ch.total,
            "score_percent": round(ch.score, 2),
            "counts": ch.counts(),
            "note": chapter_note(ch),
            "build_errors": ch.build_errors,
            "build_s": round(ch.build_s, 2),
            "tests": [{
                "name": t.name,
                "outcome": t.outcome,
                "message": t.message,
                "duration_s": round(t.duration_s, 3),
                **({"output_tail": t.output[-2000:]} if t.outcome != PASSED else {}),
            } for t in ch.tests],
        })
    return out


def junit_xml(chapters: list[Chapter], name: str = "inferlab-grade") -> bytes:
    """JUnit XML: one <testsuite> per chapter; a chapter that did not build is one errored case."""
    suites = ET.Element("testsuites", name=name)
    all_tests = all_fail = all_err = 0
    all_time = 0.0
    for ch in chapters:
        suite = ET.SubElement(suites, "testsuite", name=f"{ch.key}-{ch.slug}")
        tests = failures = errors = skipped = 0
        time_s = 0.0
        if ch.status not in (GRADED, NO_TESTS):
            case = ET.SubElement(suite, "testcase", classname=ch.key, name="build", time="0")
            el = ET.SubElement(case, "error", type=ch.status, message=chapter_note(ch))
            el.text = xml_text(ch.build_errors)
            tests, errors = 1, 1
        for t in ch.tests:
            suite_name, _, test_name = t.name.partition(".")
            case = ET.SubElement(suite, "testcase", classname=f"{ch.key}.{suite_name}", name=test_name,
                                 time=f"{t.duration_s:.3f}")
            tests += 1
            time_s += t.duration_s
            if t.outcome == PASSED:
                continue
            if t.outcome == SKIPPED:
                skipped += 1
                ET.SubElement(case, "skipped", message=xml_text(t.message))
                continue
            kind = "failure" if t.outcome in (FAILED, NOT_IMPL) else "error"
            if kind == "failure":
                failures += 1
            else:
                errors += 1
            el = ET.SubElement(case, kind, type=t.outcome, message=xml_text(t.message))
            el.text = xml_text(t.output[-4000:])
        suite.set("tests", str(tests))
        suite.set("failures", str(failures))
        suite.set("errors", str(errors))
        suite.set("skipped", str(skipped))
        suite.set("time", f"{time_s:.3f}")
        all_tests += tests
        all_fail += failures
        all_err += errors
        all_time += time_s
    suites.set("tests", str(all_tests))
    suites.set("failures", str(all_fail))
    suites.set("errors", str(all_err))
    suites.set("time", f"{all_time:.3f}")
    ET.indent(suites)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="utf-8") + b"\n"


def check_expectations(chapters: list[Chapter], expect_not_implemented: bool,
                       expect_full_marks: bool) -> list[str]:
    """Why the expectation is not met (empty: met)."""
    problems: list[str] = []
    counted = [c for c in chapters if c.counted]
    if (expect_not_implemented or expect_full_marks) and not counted:
        problems.append("no chapter has graded tests")
    for ch in counted:
        if ch.status != GRADED:
            problems.append(f"{ch.key}: {chapter_note(ch)}")
            continue
        if not ch.tests:
            problems.append(f"{ch.key}: no graded tests were found")
        for t in ch.tests:
            if expect_not_implemented and t.outcome != NOT_IMPL:
                problems.append(f"{ch.key} {t.name}: {t.outcome}, not '{NOT_IMPLEMENTED}'"
                                + (f" ({t.message})" if t.message else ""))
            if expect_full_marks and t.outcome != PASSED:
                problems.append(f"{ch.key} {t.name}: {t.outcome}" + (f" ({t.message})" if t.message else ""))
    return problems


# ---------------------------------------------------------------------------------------------
# Running things, contained


@dataclass
class RunResult:
    returncode: int | None
    timed_out: bool
    output: str
    duration_s: float


def run_contained(cmd: list[str], timeout_s: float, cwd: Path | None = None, env: dict | None = None,
                  max_output: int = 256 * 1024) -> RunResult:
    """Runs cmd in its own process group; kills the whole group on timeout (and any stragglers
    when it ends). Keeps the first and last max_output/2 bytes of its combined output."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            cwd=cwd, env=env, start_new_session=True)
    with _LIVE_LOCK:
        _LIVE.add(proc.pid)
    half = max_output // 2
    head = bytearray()
    tail = bytearray()
    dropped = 0
    timed_out = False
    deadline = start + timeout_s
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    fd = proc.stdout.fileno()
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            if not sel.select(timeout=min(left, 1.0)):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            if len(head) < half:
                take = half - len(head)
                head += chunk[:take]
                chunk = chunk[take:]
            if chunk:
                tail += chunk
                if len(tail) > half:
                    dropped += len(tail) - half
                    del tail[:len(tail) - half]
        if not timed_out:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        _kill_group(proc.pid)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        with _LIVE_LOCK:
            _LIVE.discard(proc.pid)
        sel.close()
        proc.stdout.close()
    text = head.decode("utf-8", "replace")
    if dropped:
        text += f"\n[... {dropped} bytes of output dropped by the grader ...]\n"
    text += tail.decode("utf-8", "replace")
    return RunResult(None if timed_out else proc.returncode, timed_out, text, time.monotonic() - start)


# Process groups still running, killed if the grader itself is interrupted (they run in their
# own sessions, so Ctrl-C does not reach them).
_LIVE: set[int] = set()
_LIVE_LOCK = threading.Lock()


def kill_all_live() -> None:
    with _LIVE_LOCK:
        for pgid in list(_LIVE):
            _kill_group(pgid)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_test(binary: Path, test: str, timeout_s: float, env: dict) -> TestResult:
    with tempfile.TemporaryDirectory(prefix="inferlab-grade-") as tmp:
        xml_path = Path(tmp) / "result.xml"
        # The full name is an exact filter: GoogleTest names are identifiers joined by '.' and '/',
        # so none of the filter's special characters (: * ? -) can appear in them.
        cmd = [str(binary), f"--gtest_filter={test}", f"--gtest_output=xml:{xml_path}", "--gtest_color=no"]
        r = run_contained(cmd, timeout_s, cwd=binary.parent, env=env)
        xml_text_ = xml_path.read_text(errors="replace") if xml_path.exists() else None
    status = parse_gtest_xml(xml_text_, test)
    outcome, message = classify(r.returncode, r.timed_out, r.output, status, timeout_s)
    return TestResult(test, outcome, message, r.duration_s, r.output, r.returncode)


# ---------------------------------------------------------------------------------------------
# Build


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


def build_target(build: Path, target: str, jobs: int, timeout_s: float, log_path: Path) -> tuple[bool, str]:
    cmd = ["cmake", "--build", str(build), "--target", target, "--parallel", str(jobs), "--", "-k", "0"]
    r = run_contained(cmd, timeout_s, max_output=4 * 1024 * 1024)
    with log_path.open("a") as f:
        f.write(f"$ {' '.join(cmd)}\n{r.output}\n")
    if r.timed_out:
        return False, r.output + f"\nerror: the build took longer than {timeout_s:g} s and was stopped\n"
    return r.returncode == 0, r.output


def defined_symbols(lib: Path) -> set[str]:
    r = subprocess.run(["nm", "--defined-only", "-g", str(lib)], capture_output=True, text=True)
    return {parts[-1] for parts in (l.split() for l in r.stdout.splitlines()) if len(parts) >= 3}


def undefined_symbols(lib: Path) -> set[str]:
    r = subprocess.run(["nm", "--undefined-only", "-g", str(lib)], capture_output=True, text=True)
    return {l.split()[-1] for l in r.stdout.splitlines() if l.strip().startswith("U ")}


def demangle(names: list[str]) -> list[str]:
    if not names or not shutil.which("c++filt"):
        return names
    r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    return r.stdout.splitlines() if r.returncode == 0 else names


def forbidden_references(build: Path, number: str) -> list[str]:
    """Symbols the student library refers to that only the reference code defines (cheats)."""
    if not shutil.which("nm"):
        return []
    # libstudent_chNN.a, or libstudent_chNN_sim.a for a chapter of .cu files (exercises/CMakeLists.txt).
    student_lib = next((lib for name in (f"libstudent_ch{number}.a", f"libstudent_ch{number}_sim.a")
                        for lib in build.rglob(name)), None)
    if student_lib is None:
        return []
    wanted = undefined_symbols(student_lib) - defined_symbols(student_lib)
    allowed: set[str] = set()
    for lib in (build / "common").rglob("*.a"):
        allowed |= defined_symbols(lib)
    forbidden: set[str] = set()
    for sub in ("kernels", "chapters", "tests", "runtime"):
        for lib in (build / sub).rglob("*.a") if (build / sub).is_dir() else []:
            forbidden |= defined_symbols(lib)
    hits = sorted((wanted & forbidden) - allowed)
    gtest = sorted(s for s in wanted - allowed if "7testing" in s and s.startswith("_ZN"))
    return demangle(hits + gtest)


# ---------------------------------------------------------------------------------------------
# Main


class GradeError(Exception):
    pass


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="inferlab grade",
        description="Grade a student tree: build each chapter's exercises, run the graded tests with a "
                    "per-test timeout and crash isolation, print a per-chapter score table and write "
                    "grade.json and junit.xml.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("student_pos", nargs="?", metavar="DIR", help="same as --student DIR")
    p.add_argument("--student", metavar="DIR",
                   help="the tree to grade: 'exercises' (default: this repo's exercises/, where a student "
                        "works), 'solutions' (the instructor's solutions) or a path to a student's copy of "
                        "exercises/")
    p.add_argument("--out", metavar="DIR",
                   help="where grade.json, junit.xml and logs/ go (default: grade/<name>/ at the repo root, "
                        "git-ignored; <name> is exercises, solutions, or the student folder's name plus a "
                        "hash of its absolute path)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                   help="per-test time limit (default: 30)")
    p.add_argument("--build-timeout", type=float, default=900.0, metavar="SECONDS",
                   help="time limit of each build step (default: 900)")
    p.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), metavar="N",
                   help="parallel compile jobs and tests run at once (default: the number of CPUs)")
    p.add_argument("--memory-limit", type=int, default=4096, metavar="MIB",
                   help="address-space cap of each test process, MiB (default: 4096; 0: none)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--expect-not-implemented", action="store_true",
                   help="exit 1 unless every chapter compiles and every graded test fails with "
                        "'not implemented yet' (no pass, crash or timeout): the check that the stubs are sound")
    g.add_argument("--expect-full-marks", action="store_true",
                   help="exit 1 unless every chapter scores 100%% (the check that the solutions are)")
    args = p.parse_args(argv)
    if args.student_pos and args.student and args.student_pos != args.student:
        p.error("give the student tree once (DIR or --student DIR)")
    args.student = args.student or args.student_pos or "exercises"
    if args.jobs < 1:
        p.error("--jobs must be at least 1")
    if args.timeout <= 0:
        p.error("--timeout must be positive")
    return args


def say(msg: str = "") -> None:
    print(msg, flush=True)


def grade(args: argparse.Namespace) -> int:
    started = time.monotonic()
    for tool, pkg in (("cmake", "cmake"), ("ninja", "ninja-build"), ("g++", "g++")):
        if not shutil.which(tool):
            raise GradeError(f"missing {tool}; install it with: sudo apt-get install -y {pkg}")
    value, student_dir, name = resolve_student(args.student)
    if not student_dir.is_dir():
        raise GradeError(f"student tree '{args.student}' is not a folder "
                         "(use exercises, solutions or a path to a copy of exercises/)")
    # exercises and solutions get their own build folders; every student copy shares one, so
    # grading a class recompiles only each student's files (a lock serialises concurrent runs).
    build = ROOT / "build" / f"grade-{name if name in ('exercises', 'solutions') else 'student'}"
    out = Path(args.out).expanduser().resolve() if args.out else ROOT / "grade" / name
    logs = out / "logs"
    if logs.exists():
        shutil.rmtree(logs)
    logs.mkdir(parents=True)
    for stale in ("grade.json", "junit.xml"):
        (out / stale).unlink(missing_ok=True)

    say(f"== inferlab grade: {student_dir}")
    say(f"   build folder {build.relative_to(ROOT) if build.is_relative_to(ROOT) else build}, "
        f"report in {out}")
    chapters = discover_chapters()
    if not chapters:
        raise GradeError(f"no chapter folders (NN-slug) in {ROOT / 'exercises'}")

    # Configure (every time: cheap, and it picks up the student tree's files).
    build.mkdir(parents=True, exist_ok=True)
    lock = (ROOT / "build" / f".{build.name}.lock").open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        say(f"   waiting for another grade run using {build} ...")
        fcntl.flock(lock, fcntl.LOCK_EX)
    t0 = time.monotonic()
    cmd = ["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
           f"-DINFERLAB_STUDENT={value}", "-DINFERLAB_CUDA=OFF", "-DINFERLAB_DOCS=OFF"]
    cache = build / "CMakeCache.txt"
    if cache.exists() and "CMAKE_GENERATOR:INTERNAL=Ninja" not in cache.read_text(errors="replace"):
        shutil.rmtree(build)
        build.mkdir(parents=True)
    r = run_contained(cmd, args.build_timeout, max_output=4 * 1024 * 1024)
    (logs / "configure.log").write_text(f"$ {' '.join(cmd)}\n{r.output}")
    if r.returncode != 0:
        tail = r.output[r.output.find("CMake Error"):] if "CMake Error" in r.output else r.output[-3000:]
        raise GradeError(f"configuring {build} failed:\n{tail.strip()}")
    say(f"== configured ({time.monotonic() - t0:.1f} s)")
    targets = ninja_targets(build)

    lab_broken = False
    for ch in chapters:
        lib, test = f"student_ch{ch.number}", f"test_ch{ch.number}_student"
        if lib not in targets and f"{lib}_sim" in targets:
            # A chapter of .cu files: student_chNN is an interface library over student_chNN_sim
            # (and _cuda, never configured here); Ninja has no target for an interface.
            lib = f"{lib}_sim"
        if test not in targets or lib not in targets:
            # The graded test exists only when the student library does (tests/NN-slug/).
            tests_cmake = ROOT / "tests" / ch.title / "CMakeLists.txt"
            has_tests = tests_cmake.is_file() and test in tests_cmake.read_text(errors="replace")
            ch.status = MISSING if has_tests else NO_TESTS
            say(f"== {ch.key}: {chapter_note(ch)}"
                + (f" (no .cpp or .cu in {student_dir / ch.title})" if ch.status == MISSING else ""))
            continue
        log_path = logs / f"build-{ch.key}.log"
        t0 = time.monotonic()
        ok, log = build_target(build, lib, args.jobs, args.build_timeout, log_path)
        if ok:
            ok, log = build_target(build, test, args.jobs, args.build_timeout, log_path)
            if not ok:
                if blames_student(failed_outputs(log), ch.number):
                    ch.status = NO_LINK
                else:
                    ch.status, lab_broken = LAB_BROKEN, True
        else:
            ch.status = NO_COMPILE if blames_student(failed_outputs(log), ch.number) else LAB_BROKEN
            lab_broken = lab_broken or ch.status == LAB_BROKEN
        ch.build_s = time.monotonic() - t0
        if ch.status != GRADED:
            ch.build_errors = first_errors(log)
            say(f"== {ch.key}: {chapter_note(ch)} ({ch.build_s:.1f} s); first errors:")
            say("   " + ch.build_errors.replace("\n", "\n   "))
            continue
        cheats = forbidden_references(build, ch.number)
        if cheats:
            ch.status = FORBIDDEN
            ch.build_errors = "the student library refers to reference code it is graded against:\n" + \
                "\n".join(cheats[:20])
            say(f"== {ch.key}: {chapter_note(ch)}:\n   " + "\n   ".join(cheats[:10]))
            continue
        ch.binary = find_binary(build, test)
        if ch.binary is None:
            raise GradeError(f"built {test} but cannot find it under {build}")
        say(f"== {ch.key}: built ({ch.build_s:.1f} s)")

    # The tests: list, then run each in its own process.
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // args.jobs)))
    env["GTEST_COLOR"] = "no"
    _limit_children(args.memory_limit)
    work: list[tuple[Chapter, str]] = []
    for ch in chapters:
        if ch.binary is None:
            continue
        r = run_contained([str(ch.binary), "--gtest_list_tests"], args.timeout, cwd=ch.binary.parent, env=env)
        names = parse_gtest_list(r.output) if r.returncode == 0 else []
        if r.returncode != 0 or not names:
            ch.status = NO_LIST
            msg = "no tests listed" if r.returncode == 0 else \
                classify(r.returncode, r.timed_out, r.output, "missing", args.timeout)[1]
            ch.build_errors = f"--gtest_list_tests: {msg}\n{r.output[-2000:]}"
            say(f"== {ch.key}: {chapter_note(ch)} ({msg})")
            continue
        work += [(ch, n) for n in names]
    if work:
        say(f"== running {len(work)} tests, {args.jobs} at a time, {args.timeout:g} s limit each")
    results: dict[tuple[str, str], TestResult] = {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs)
    try:
        futures = {pool.submit(run_test, ch.binary, n, args.timeout, env): (ch, n) for ch, n in work}
        for fut in concurrent.futures.as_completed(futures):
            ch, n = futures[fut]
            results[(ch.key, n)] = fut.result()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        kill_all_live()
        raise
    pool.shutdown()
    for ch, n in work:
        ch.tests.append(results[(ch.key, n)])

    # Report.
    for ch in chapters:
        if not ch.tests:
            continue
        d = logs / ch.key
        d.mkdir(exist_ok=True)
        for t in ch.tests:
            (d / (re.sub(r"[^A-Za-z0-9._-]+", "_", t.name) + ".log")).write_text(t.output)
    say()
    say(score_table(chapters))
    details = [(ch, t) for ch in chapters for t in ch.tests if t.outcome != PASSED]
    if details:
        say()
        say("not passed:")
        shown = 0
        for ch, t in details:
            if shown >= 40:
                say(f"  ... and {len(details) - shown} more (see grade.json)")
                break
            say(f"  {ch.key} {t.name}: {t.outcome}" + (f" — {t.message}" if t.message else ""))
            shown += 1
    meta = {
        "tool": "inferlab grade",
        "format": 1,
        "student": {"argument": args.student, "path": str(student_dir)},
        "build_dir": str(build),
        "timeout_s": args.timeout,
        "jobs": args.jobs,
        "graded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - started, 1),
    }
    (out / "grade.json").write_text(json.dumps(grade_json(chapters, meta), indent=2) + "\n")
    (out / "junit.xml").write_bytes(junit_xml(chapters))
    say()
    say(f"report: {out / 'grade.json'}, {out / 'junit.xml'}, logs in {logs} "
        f"({time.monotonic() - started:.0f} s)")

    if lab_broken:
        raise GradeError("the lab's own code (not the student's) failed to build; see the logs above")
    if args.expect_not_implemented or args.expect_full_marks:
        problems = check_expectations(chapters, args.expect_not_implemented, args.expect_full_marks)
        what = "every graded test fails with 'not implemented yet'" if args.expect_not_implemented \
            else "every chapter scores 100%"
        if problems:
            say(f"\nEXPECTATION NOT MET ({what}):")
            for line in problems[:50]:
                say(f"  {line}")
            return 1
        say(f"expectation met: {what}")
    return 0


def _limit_children(memory_mib: int) -> None:
    """Limits inherited by the test processes (set once, after the builds): no core files, and
    an address-space cap so a runaway allocation fails in the test instead of swapping."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_mib > 0:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        want = memory_mib * 1024 * 1024
        if hard != resource.RLIM_INFINITY:
            want = min(want, hard)
        # The grader's own threads live under the same cap; it needs far less.
        resource.setrlimit(resource.RLIMIT_AS, (want, hard))


def _terminate(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        return grade(args)
    except GradeError as e:
        print(f"inferlab grade: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("inferlab grade: interrupted", file=sys.stderr)
        return 130
    finally:
        kill_all_live()


if __name__ == "__main__":
    sys.exit(main())
