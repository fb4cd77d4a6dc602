"""grade() in phases: prepare → configure → build and inspect each chapter → list → run → report.

Each phase reads and extends one GradeRun; a chapter that fails a phase keeps its status and
skips the later ones, so one broken chapter never stops the others from being graded.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import fcntl
import json
import os
import re
import resource
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import integrity
from .lms import write_results
from .build import (blames_student, build_target, declares_graded_test, discover_chapters, failed_outputs, find_binary,
                    first_errors, lab_libraries, ninja_targets, resolve_student)
from .contain import kill_all_live, limit_children, run_contained
from .gtest import classify, parse_gtest_list, parse_gtest_xml
from .model import (CHAPTER_DIR, FORBIDDEN, GRADED, LAB_BROKEN, MISSING, NO_COMPILE, NO_LINK, NO_LIST, NO_TESTS,
                    PASSED, ROOT, Chapter, GradeError, TestResult)
from .report import (check_expectations, check_zero, chapter_note, fill_not_built, grade_json, junit_xml,
                     score_table)


def say(msg: str = "") -> None:
    print(msg, flush=True)


@dataclass
class GradeRun:
    """Everything one grade run knows, phase by phase."""
    args: argparse.Namespace
    started: float = field(default_factory=time.monotonic)
    cmake_value: str = ""            # INFERLAB_STUDENT
    student_dir: Path = ROOT
    name: str = ""                   # names the out folder
    build: Path = ROOT
    out: Path = ROOT
    logs: Path = ROOT
    seed: int = 0
    chapters: list[Chapter] = field(default_factory=list)
    lab_broken: bool = False
    lock: object = None              # the build folder's lock file, held from configure() to release()
    quiet: bool = False              # a class run: the per-student table, not the header

    def release(self) -> None:
        """Lets another grade run (or the next student of a class) use the build folder."""
        if self.lock is not None:
            self.lock.close()
            self.lock = None


# ---- 1. prepare ---------------------------------------------------------------------------------


def prepare(args: argparse.Namespace, run: GradeRun | None = None) -> GradeRun:
    """The student tree, the build and report folders, the seed."""
    run = run or GradeRun(args)
    for tool, pkg in (("cmake", "cmake"), ("ninja", "ninja-build"), ("g++", "g++"), ("nm", "binutils"),
                      ("readelf", "binutils")):
        if not shutil.which(tool):
            raise GradeError(f"missing {tool}; install it with: sudo apt-get install -y {pkg}")
    run.cmake_value, run.student_dir, run.name = resolve_student(args.student)
    if not run.student_dir.is_dir():
        raise GradeError(f"student tree '{args.student}' is not a folder "
                         "(use exercises, solutions or a path to a copy of exercises/)")
    if not has_chapter_folders(run.student_dir):
        # Graded anyway it would score 0% with nothing wrong to show: a wrong folder, not a grade.
        inside = [d.name for d in sorted(run.student_dir.iterdir()) if d.is_dir() and has_chapter_folders(d)]
        hint = (f"; its folder{'s' if len(inside) > 1 else ''} {', '.join(inside[:3])} "
                f"{'have' if len(inside) > 1 else 'has'} them" + (" — a class? use --class" if len(inside) > 1 else
                                                                   f" — use --student {run.student_dir / inside[0]}")
                if inside else "")
        raise GradeError(f"{run.student_dir} has no chapter folders (NN-slug, e.g. 01-naive-cpu-attention): "
                         f"it is not a copy of exercises/{hint}")
    # exercises and solutions get their own build folders; every student copy shares one, so
    # grading a class recompiles only each student's files (a lock serialises concurrent runs).
    if args.build_dir:
        run.build = Path(args.build_dir).expanduser().resolve()
    else:
        run.build = ROOT / "build" / f"grade-{run.name if run.name in ('exercises', 'solutions') else 'student'}"
    run.out = Path(args.out).expanduser().resolve() if args.out else ROOT / "grade" / run.name
    run.logs = run.out / "logs"
    if run.logs.exists():
        shutil.rmtree(run.logs)
    run.logs.mkdir(parents=True)
    for stale in ("grade.json", "junit.xml"):
        (run.out / stale).unlink(missing_ok=True)
    # The grader picks the seed; the environment's INFERLAB_SEED is ignored (and removed from the
    # tests' environment), so nothing the student controls fixes the "fresh" data.
    run.seed = args.seed if args.seed is not None else secrets.randbits(63)
    run.chapters = select_chapters(discover_chapters(), getattr(args, "chapters", None))
    if not run.chapters:
        raise GradeError(f"no chapter folders (NN-slug) in {ROOT / 'exercises'}")
    say(f"== inferlab grade: {run.student_dir}")
    say(f"   build folder {_show(run.build)}, report in {run.out}")
    if not run.quiet:
        say(f"   seed {run.seed} (the same data again: {replay_command(args, run.seed)})")
    return run


def has_chapter_folders(folder: Path) -> bool:
    return any(d.is_dir() and CHAPTER_DIR.match(d.name) for d in folder.iterdir())


def replay_command(args: argparse.Namespace, seed: int) -> str:
    """The command that grades the same tree (or class) on the same data again."""
    what = f"--class {args.class_dir}" if getattr(args, "class_dir", None) else f"--student {args.student}"
    chapters = f" --chapters {','.join(args.chapters)}" if getattr(args, "chapters", None) else ""
    build = f" --build-dir {args.build_dir}" if getattr(args, "build_dir", None) else ""
    return f"./inferlab grade {what}{chapters}{build} --seed {seed}"


def select_chapters(chapters: list[Chapter], numbers: list[str] | None) -> list[Chapter]:
    """The chapters --chapters names (all when it is not given); a number with no chapter folder is
    an error naming the chapters there are."""
    if numbers is None:
        return chapters
    known = {c.number for c in chapters}
    unknown = [n for n in numbers if n not in known]
    if unknown:
        raise GradeError(f"--chapters: no chapter {', '.join(unknown)} in {ROOT / 'exercises'} "
                         f"(the chapters are {', '.join(sorted(known))})")
    return [c for c in chapters if c.number in numbers]


def _show(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


# ---- 2. configure -------------------------------------------------------------------------------


def configure(run: GradeRun) -> set[str]:
    """Configures the build folder for the student tree (every time: cheap, and it picks up the
    tree's files). Returns the build's target names. Holds the folder's lock from here on."""
    run.build.mkdir(parents=True, exist_ok=True)
    lock_path = run.build.parent / f".{run.build.name}.lock"
    run.lock = lock_path.open("w")  # kept open (and locked) until release() or the process ends
    try:
        fcntl.flock(run.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        say(f"   waiting for another grade run using {run.build} ...")
        fcntl.flock(run.lock, fcntl.LOCK_EX)
    t0 = time.monotonic()
    cache = run.build / "CMakeCache.txt"
    if cache.exists() and "CMAKE_GENERATOR:INTERNAL=Ninja" not in cache.read_text(errors="replace"):
        shutil.rmtree(run.build)
        run.build.mkdir(parents=True)
    # A new folder gets the grader's settings (Release, CPU + sim, no CUDA, no docs); a folder that
    # is already configured keeps its own and only changes the student tree, so that grading in a
    # build of the lab (CI grades in build/default) recompiles only the student files. Either way
    # the graded programs link only the sim variant of a student's kernels.
    cmd = ["cmake", "-S", str(ROOT), "-B", str(run.build), f"-DINFERLAB_STUDENT={run.cmake_value}"]
    if not cache.exists():
        cmd[5:5] = ["-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DINFERLAB_CUDA=OFF", "-DINFERLAB_DOCS=OFF"]
    r = run_contained(cmd, run.args.build_timeout, max_output=4 * 1024 * 1024)
    (run.logs / "configure.log").write_text(f"$ {' '.join(cmd)}\n{r.output}")
    if r.returncode != 0:
        tail = r.output[r.output.find("CMake Error"):] if "CMake Error" in r.output else r.output[-3000:]
        raise GradeError(f"configuring {run.build} failed:\n{tail.strip()}")
    say(f"== configured ({time.monotonic() - t0:.1f} s)")
    return ninja_targets(run.build)


# ---- 3. build and inspect each chapter ----------------------------------------------------------


def build_chapter(run: GradeRun, ch: Chapter, targets: set[str]) -> None:
    """Builds the student library, inspects it (tools/grading/integrity.py), then links the graded
    test program — a library that fails the inspection is never linked, let alone run."""
    lib, test = f"student_ch{ch.number}", f"test_ch{ch.number}_student"
    if lib not in targets and f"{lib}_sim" in targets:
        # A chapter of .cu files: student_chNN is an interface library over student_chNN_sim
        # (and _cuda, never configured here); Ninja has no target for an interface.
        lib = f"{lib}_sim"
    if test not in targets or lib not in targets:
        # The graded test exists only when the student library does (tests/NN-slug/).
        ch.status = MISSING if declares_graded_test(ch.title, test) else NO_TESTS
        ch.folder_missing = ch.status == MISSING and not (run.student_dir / ch.title).is_dir()
        if ch.status == MISSING:
            ch.build_errors = (f"the student's tree {run.student_dir} has no folder {ch.title}/" if ch.folder_missing
                               else f"no .cpp or .cu in {run.student_dir / ch.title}")
        say(f"== {ch.key}: {chapter_note(ch)}" + (f" ({ch.build_errors})" if ch.status == MISSING else ""))
        return
    log_path = run.logs / f"build-{ch.key}.log"
    t0 = time.monotonic()
    ok, log = build_target(run.build, lib, run.args.jobs, run.args.build_timeout, log_path)
    if ok and (libs := lab_libraries(run.build, test)):
        # The lab's libraries the graded program links, before the inspection: it forbids what they
        # define, and in a fresh build folder (or for the first chapter graded) none exist yet.
        ok, log = build_target(run.build, libs, run.args.jobs, run.args.build_timeout, log_path)
    if not ok:
        ch.status = NO_COMPILE if blames_student(failed_outputs(log), ch.number) else LAB_BROKEN
    else:
        findings = integrity.inspect(run.build, lib, run.student_dir)
        if not findings.clean():
            ch.status = FORBIDDEN
            ch.build_s = time.monotonic() - t0
            ch.build_errors = findings.explain()
            say(f"== {ch.key}: {chapter_note(ch)}:\n   " + ch.build_errors.replace("\n", "\n   "))
            return
        ok, log = build_target(run.build, test, run.args.jobs, run.args.build_timeout, log_path)
        if not ok:
            ch.status = NO_LINK if blames_student(failed_outputs(log), ch.number) else LAB_BROKEN
    ch.build_s = time.monotonic() - t0
    run.lab_broken = run.lab_broken or ch.status == LAB_BROKEN
    if ch.status != GRADED:
        ch.build_errors = first_errors(log)
        say(f"== {ch.key}: {chapter_note(ch)} ({ch.build_s:.1f} s); first errors:")
        say("   " + ch.build_errors.replace("\n", "\n   "))
        return
    ch.binary = find_binary(run.build, test)
    if ch.binary is None:
        raise GradeError(f"built {test} but cannot find it under {run.build}")
    say(f"== {ch.key}: built and inspected ({ch.build_s:.1f} s)")


# ---- 4. list and 5. run the tests ---------------------------------------------------------------


def test_environment(run: GradeRun) -> dict:
    # The grader's seed is its own, and the emulator's host-access check stays on whatever the
    # caller's environment says (SIMT_HOST_ACCESS=allow would let a kernel-for-show pass).
    env = {k: v for k, v in os.environ.items() if k not in ("INFERLAB_SEED", "SIMT_HOST_ACCESS")}
    env.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // run.args.jobs)))
    env["GTEST_COLOR"] = "no"
    return env


def list_tests(run: GradeRun, env: dict) -> list[tuple[Chapter, str]]:
    work: list[tuple[Chapter, str]] = []
    for ch in run.chapters:
        if ch.binary is None:
            continue
        r = run_contained([str(ch.binary), "--gtest_list_tests"], run.args.timeout, cwd=ch.binary.parent, env=env)
        names = parse_gtest_list(r.output) if r.returncode == 0 else []
        if r.returncode != 0 or not names:
            ch.status = NO_LIST
            msg = "no tests listed" if r.returncode == 0 else \
                classify(r.returncode, r.timed_out, r.output, "missing", run.args.timeout)[1]
            ch.build_errors = f"--gtest_list_tests: {msg}\n{r.output[-2000:]}"
            say(f"== {ch.key}: {chapter_note(ch)} ({msg})")
            continue
        work += [(ch, n) for n in names]
        save_test_list(run.build, ch, names)
    return work


# Each chapter's graded tests as its program last listed them, kept in the build folder: a chapter
# that does not build for one student still counts every one of its tests as failed.
def _test_list_path(build: Path, ch: Chapter) -> Path:
    return build / "grade-test-lists" / f"{ch.key}.txt"


def save_test_list(build: Path, ch: Chapter, names: list[str]) -> None:
    path = _test_list_path(build, ch)
    path.parent.mkdir(exist_ok=True)
    path.write_text("".join(n + "\n" for n in names))


def saved_test_list(build: Path, ch: Chapter) -> list[str]:
    path = _test_list_path(build, ch)
    return path.read_text().split() if path.is_file() else []


def count_not_built(run: GradeRun) -> bool:
    """Records the tests of each chapter that did not build as failed; False when a chapter's
    tests are not known yet (no build in this folder has listed them)."""
    known = True
    for ch in run.chapters:
        if ch.status in (GRADED, NO_TESTS) or ch.tests:
            continue
        fill_not_built(ch, saved_test_list(run.build, ch))
        known = known and bool(ch.tests)
    return known


def run_test(binary: Path, test: str, timeout_s: float, env: dict, seed: int) -> TestResult:
    """One graded test in its own process. The verdict is GoogleTest's report written by that
    process's trusted parent side: the student code in it runs only in sandboxed children that
    can open no file (tests/support/isolation.h)."""
    with tempfile.TemporaryDirectory(prefix="inferlab-grade-") as tmp:
        xml_path = Path(tmp) / "result.xml"
        # The full name is an exact filter: GoogleTest names are identifiers joined by '.' and '/',
        # so none of the filter's special characters (: * ? -) can appear in them.
        cmd = [str(binary), f"--gtest_filter={test}", f"--gtest_output=xml:{xml_path}", "--gtest_color=no",
               "--inferlab_grading", f"--inferlab_seed={seed}"]
        r = run_contained(cmd, timeout_s, cwd=binary.parent, env=env)
        xml_text_ = xml_path.read_text(errors="replace") if xml_path.exists() else None
    status = parse_gtest_xml(xml_text_, test)
    outcome, message = classify(r.returncode, r.timed_out, r.output, status, timeout_s)
    return TestResult(test, outcome, message, r.duration_s, r.output, r.returncode)


def run_tests(run: GradeRun, work: list[tuple[Chapter, str]], env: dict) -> None:
    if work:
        say(f"== running {len(work)} tests, {run.args.jobs} at a time, {run.args.timeout:g} s limit each")
    results: dict[tuple[str, str], TestResult] = {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=run.args.jobs)
    try:
        futures = {pool.submit(run_test, ch.binary, n, run.args.timeout, env, run.seed): (ch, n) for ch, n in work}
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


# ---- 6. report ----------------------------------------------------------------------------------


def write_reports(run: GradeRun) -> None:
    """The score table on stdout; grade.json, junit.xml, logs/ and, with --format, results.json."""
    chapters, logs, out, args = run.chapters, run.logs, run.out, run.args
    for ch in chapters:
        if not any(t.ran for t in ch.tests):
            continue
        d = logs / ch.key
        d.mkdir(exist_ok=True)
        for t in ch.tests:
            (d / (re.sub(r"[^A-Za-z0-9._-]+", "_", t.name) + ".log")).write_text(t.output)
    say()
    say(score_table(chapters))
    details = [(ch, t) for ch in chapters for t in ch.tests if t.outcome != PASSED and t.ran]
    if details:
        say()
        say("not passed:")
        for shown, (ch, t) in enumerate(details):
            if shown >= 40:
                say(f"  ... and {len(details) - shown} more (see grade.json)")
                break
            say(f"  {ch.key} {t.name}: {t.outcome}" + (f" — {t.message}" if t.message else ""))
    meta = {
        "tool": "inferlab grade",
        "format": 3,  # 3: each test not passed has an output_excerpt (format 2: output_tail)
        "student": {"argument": args.student, "path": str(run.student_dir)},
        "build_dir": str(run.build),
        "seed": run.seed,
        "timeout_s": args.timeout,
        "jobs": args.jobs,
        "graded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": round(time.monotonic() - run.started, 1),
    }
    (out / "grade.json").write_text(json.dumps(grade_json(chapters, meta), indent=2) + "\n")
    (out / "junit.xml").write_bytes(junit_xml(chapters, student_name(run), run.seed))
    written = [out / "grade.json", out / "junit.xml"]
    if getattr(args, "format", None):
        written.append(write_results(out, args, chapters, time.monotonic() - run.started, run.seed))
    say()
    say(f"report: {', '.join(map(str, written))}, logs in {logs} ({time.monotonic() - run.started:.0f} s)")


def student_name(run: GradeRun) -> str:
    """The student as the reports name them: the folder's name (exercises, solutions, alice)."""
    return run.student_dir.name


def report(run: GradeRun) -> int:
    """The reports, then the exit status: the lab broken, or an expectation not met."""
    write_reports(run)
    chapters, args = run.chapters, run.args

    if run.lab_broken:
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
    if args.expect_zero:
        problems = check_zero(chapters, args.expect_zero)
        what = "chapter(s) " + ", ".join(args.expect_zero) + " score 0 (the cheat is caught)"
        if problems:
            say(f"\nEXPECTATION NOT MET ({what}):")
            for line in problems:
                say(f"  {line}")
            return 1
        say(f"expectation met: {what}")
    return 0


def grade_tree(args: argparse.Namespace, quiet: bool = False) -> GradeRun:
    """Phases 1–5 for one student tree (no report): the build folder's lock is released at the
    end, and the memory cap the tests ran under is lifted again (a class builds its next student)."""
    run = prepare(args, GradeRun(args, quiet=quiet))
    try:
        targets = configure(run)
        for ch in run.chapters:
            build_chapter(run, ch, targets)
        env = test_environment(run)
        saved = resource.getrlimit(resource.RLIMIT_AS)
        limit_children(args.memory_limit)
        try:
            run_tests(run, list_tests(run, env), env)
        finally:
            resource.setrlimit(resource.RLIMIT_AS, saved)
        count_not_built(run)
    finally:
        run.release()
    return run


def grade(args: argparse.Namespace) -> int:
    """The whole run; returns the exit status (see the epilog)."""
    return report(grade_tree(args))
