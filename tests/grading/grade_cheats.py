#!/usr/bin/env python3
"""Grades every cheating submission of tests/grading/cheats/ and requires each to score zero on
the chapter it cheats, caught by the mechanism it is meant to be caught by. CI runs it.

  python3 tests/grading/grade_cheats.py [--build-dir DIR] [--only NAME ...]

A cheat folder holds only its cheating files; the driver completes the chapter with the
unmodified stubs of exercises/ (a stub whose file name the cheat does not use), in a temporary
student tree.

--build-dir: reuse a configured grade folder (CI passes build/grade-exercises, so only the cheat
files and the graded programs are recompiled). Exit status 0 when every cheat is caught.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHEATS = ROOT / "tests" / "grading" / "cheats"

# name → (chapter, what must catch it[, a report that some failed test must show]). "inspection":
# the chapter is rejected before any test runs (status forbidden-calls); "tests": it builds and
# runs, and no graded test passes.
EXPECTED = {
    "report-writer": ("01", "tests"),       # the sandbox: open() fails, the early exit fails the call
    "override-harness": ("01", "inspection"),
    "seed-fixer": ("01", "inspection"),
    "cost-function": ("01", "inspection"),
    "answer-table": ("01", "tests"),
    "reference-header": ("02", "inspection"),
    "weak-reference": ("04", "inspection"),
    "host-loop": ("05", "tests"),            # no kernel launched
    "sandbox-escape": ("07", "tests"),       # open/kill/fork/exec all fail, the exit fails the call
    "quant-reference": ("08", "inspection"),  # 8.1 by the lab's dequantizer, declared by hand
    "admission-reference": ("09", "inspection"),  # 9.3's Retry-After by the server's, declared by hand
    "shard-reference": ("10", "inspection"),  # 10.1 by the lab's Weight::take_rows / take_columns, declared by hand
    "mpi-ring": ("10", "inspection"),          # 10.2 by MPI_Allreduce (<mpi/mpi.h>, a system header)
    "packed-reference": ("11", "inspection"),  # 11.1 by the lab's quant::PackedMatrix, declared by hand
    "speculative-reference": ("12", "inspection"),  # 12.2 by the engine's verify_rejection, declared by hand
    # a kernel for show, the host reading device memory: the emulator's host-access report
    "kernel-for-show": ("02", "tests", "simt: memcheck: host code read device memory allocated at softmax_rows.cu:"),
}


def student_tree(name: str, chapter: str) -> Path:
    """The cheat's chapter folder completed with the exercises' stubs it does not replace, in
    build/grading/cheats/<name>/ (as deep as tests/grading/cheats/<name>/, so a cheat's relative
    include climbs to the same place)."""
    cheat = next((CHEATS / name).glob(f"{chapter}-*"))
    stubs = ROOT / "exercises" / cheat.name
    tree = ROOT / "build" / "grading" / "cheats" / name
    shutil.rmtree(tree, ignore_errors=True)
    (tree / cheat.name).mkdir(parents=True)
    # A cheat written as one file (cheat.cpp) answers every exercise of the chapter itself; the
    # chapter's prediction questions (predictions.cpp) keep their stubs, so that it still links.
    one_file = (cheat / "cheat.cpp").exists()
    for stub in sorted(stubs.glob("*.c*")):
        if not one_file or stub.name == "predictions.cpp":
            shutil.copy(stub, tree / cheat.name / stub.name)
    for f in sorted(cheat.iterdir()):
        shutil.copy(f, tree / cheat.name / f.name)
    return tree


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", help="the grade build folder to reuse")
    p.add_argument("--only", nargs="*", help="grade only these cheats")
    args = p.parse_args()
    found = sorted(d.name for d in CHEATS.iterdir() if d.is_dir())
    missing = sorted(set(EXPECTED) - set(found))
    unknown = sorted(set(found) - set(EXPECTED))
    if missing or unknown:
        print(f"cheats without a folder: {missing}; folders without an expectation: {unknown}")
        return 1
    names = args.only or found
    failures = []
    for name in names:
        chapter, caught_by, *report = EXPECTED[name]
        with tempfile.TemporaryDirectory(prefix=f"cheat-{name}-") as out:
            tree = student_tree(name, chapter)
            cmd = [sys.executable, str(ROOT / "tools" / "grade.py"), "--student", str(tree), "--out", out,
                   "--expect-zero", chapter]
            if args.build_dir:
                cmd += ["--build-dir", args.build_dir]
            print(f"== cheat {name} (chapter {chapter}, must be caught by the {caught_by})", flush=True)
            r = subprocess.run(cmd, text=True, capture_output=True)
            report_path = Path(out) / "grade.json"
            grade = json.loads(report_path.read_text()) if report_path.exists() else None
        status = passed = total = None
        messages = []
        if grade:
            ch = next(c for c in grade["chapters"] if c["chapter"] == f"ch{chapter}")
            status, passed, total = ch["status"], ch["passed"], ch["total"]
            messages = [t.get("message") or "" for t in ch.get("tests", [])]
        want_status = "forbidden-calls" if caught_by == "inspection" else "graded"
        reported = not report or any(report[0] in m for m in messages)
        ok = r.returncode == 0 and status == want_status and passed == 0 and reported
        print(f"   {'caught' if ok else 'NOT CAUGHT AS EXPECTED'}: status {status}, passed {passed}/{total} "
              f"(grade exit {r.returncode})" + (f"; report \"{report[0]}\" {'shown' if reported else 'NOT shown'}"
                                               if report else ""), flush=True)
        if not ok:
            failures.append(name)
            print("\n".join("   | " + l for l in (r.stdout + r.stderr).splitlines()[-40:]))
    print(f"{len(names) - len(failures)}/{len(names)} cheats caught as expected"
          + (f"; not: {', '.join(failures)}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
