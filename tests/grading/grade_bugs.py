#!/usr/bin/env python3
"""Grades the buggy submissions of tests/grading/bugs/ — the kernel bugs students make most — and
requires the grader to report each with the emulator's checker that catches it and the faulty
file:line. CI runs it.

  python3 tests/grading/grade_bugs.py [--build-dir DIR] [--only NAME ...] [--seed N] [--timeout S]

A bug folder holds ONE modified copy of a solutions/ file; the driver completes the chapter with
the other solution files, in a temporary student tree, so only the bug can fail. The faulty line
carries the marker comment "BUG(<name>)", so the expected line never drifts when the file is
edited. A bug is reported as expected when its chapter compiles and is graded, at least one test
fails, and every test that does not pass has a reason (grade.json's "message") holding
"simt: <checker>:" and "<file>:<line>" of the marker.

--build-dir: reuse a configured grade folder (CI passes build/default, so only the bug's chapter
and its graded program are recompiled). --timeout: the per-test limit passed to the grader
(default 120 s, not the grader's 30: the chapter's clean tests must finish on a loaded machine,
since a timeout's reason names no checker; the solutions phase holds the grader's own limit).
Exit status 0 when every bug is reported as expected.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUGS = ROOT / "tests" / "grading" / "bugs"

# name → (chapter, the checker that must report it). The file and line come from the marker.
EXPECTED = {
    "missing-barrier": ("02", "racecheck"),  # 2.2: block_reduce without its second __syncthreads()
    "warmup-missing-barrier": ("02", "racecheck"),  # W2: the vector sum's tree without its barrier per step
    "off-by-one-load": ("03", "memcheck"),   # 3.2: c <= head_dim reads one float past q's cudaMalloc buffer
    "capacity-loop": ("05", "initcheck"),    # 5.3: sums kMaxSplits shared weights, not the num_splits written
}


class BugError(Exception):
    """A bug folder that does not hold what the driver needs (one file, one marker)."""


def bug_file(name: str, chapter: str) -> tuple[Path, str]:
    """The bug's one file and the "file:line" of its BUG(<name>) marker."""
    folders = sorted((BUGS / name).glob(f"{chapter}-*"))
    if len(folders) != 1 or not folders[0].is_dir():
        raise BugError(f"tests/grading/bugs/{name}/ needs one folder {chapter}-<slug>/, found {[f.name for f in folders]}")
    files = sorted(f for f in folders[0].iterdir() if f.is_file())
    if len(files) != 1:
        raise BugError(f"{folders[0].relative_to(ROOT)} must hold one file, holds {[f.name for f in files]}")
    f = files[0]
    if not (ROOT / "solutions" / folders[0].name / f.name).is_file():
        raise BugError(f"{f.relative_to(ROOT)} is not a modified copy of a file of solutions/{folders[0].name}/")
    marker = f"BUG({name})"
    lines = [n for n, text in enumerate(f.read_text().splitlines(), 1) if marker in text]
    if len(lines) != 1:
        raise BugError(f"{f.relative_to(ROOT)} must have one line marked {marker}, has {len(lines)}")
    return f, f"{f.name}:{lines[0]}"


def student_tree(name: str, bug: Path) -> Path:
    """The bug's chapter: the solution files, the bug's file in place of its solution, in
    build/grading/bugs/<name>/ (as deep as tests/grading/bugs/<name>/)."""
    chapter_dir = bug.parent.name
    tree = ROOT / "build" / "grading" / "bugs" / name
    shutil.rmtree(tree, ignore_errors=True)
    (tree / chapter_dir).mkdir(parents=True)
    for solution in sorted((ROOT / "solutions" / chapter_dir).iterdir()):
        if solution.is_file():
            shutil.copy(solution, tree / chapter_dir / solution.name)
    shutil.copy(bug, tree / chapter_dir / bug.name)
    return tree


def verdict(report: dict | None, chapter: str, checker: str, site: str) -> tuple[list[str], list[dict]]:
    """(what is wrong — nothing when the bug is reported as expected, the tests not passed)."""
    if report is None:
        return ["the grader wrote no grade.json"], []
    ch = next((c for c in report["chapters"] if c["chapter"] == f"ch{chapter}"), None)
    if ch is None:
        return [f"grade.json has no chapter ch{chapter}"], []
    if ch["status"] != "graded":
        return [f"chapter ch{chapter} was not graded: status {ch['status']} ({ch['note']})"
                + (f"\n{ch['build_errors']}" if ch["build_errors"] else "")], []
    failed = [t for t in ch["tests"] if t["outcome"] != "passed"]
    if not failed:
        return [f"every test of ch{chapter} passed ({ch['passed']}/{ch['total']}): the bug went unnoticed"], []
    # "simt: racecheck:" and "softmax_rows.cu:38", not "softmax_rows.cu:381" nor "my_softmax_rows.cu:38".
    wanted = {f"simt: {checker}:": re.compile(re.escape(f"simt: {checker}:")),
              site: re.compile(r"(?<![\w.-])" + re.escape(site) + r"(?!\d)")}
    problems = []
    for t in failed:
        lacks = [text for text, pattern in wanted.items() if not pattern.search(t["message"])]
        if lacks:
            problems.append(f"{t['name']} ({t['outcome']}): the reason lacks " + " and ".join(f"'{w}'" for w in lacks)
                            + f": {t['message'] or '(no reason)'}")
    return problems, failed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", help="the grade build folder to reuse")
    p.add_argument("--only", nargs="*", help="grade only these bugs")
    p.add_argument("--seed", type=int, help="the grader's seed (default: a new one per bug, printed by the grader)")
    p.add_argument("--timeout", type=float, default=120.0, help="per-test time limit, seconds (default: 120)")
    args = p.parse_args()
    found = sorted(d.name for d in BUGS.iterdir() if d.is_dir())
    missing = sorted(set(EXPECTED) - set(found))
    unknown = sorted(set(found) - set(EXPECTED))
    if missing or unknown:
        print(f"bugs without a folder: {missing}; folders without an expectation: {unknown}")
        return 1
    names = args.only or found
    if set(names) - set(EXPECTED):
        print(f"no such bug: {sorted(set(names) - set(EXPECTED))}; the bugs: {', '.join(found)}")
        return 1
    failures = []
    for name in names:
        chapter, checker = EXPECTED[name]
        try:
            bug, site = bug_file(name, chapter)
        except BugError as e:
            print(f"== bug {name}: {e}")
            failures.append(name)
            continue
        print(f"== bug {name} ({bug.relative_to(ROOT)}): must be reported by {checker} at {site}", flush=True)
        with tempfile.TemporaryDirectory(prefix=f"bug-{name}-") as out:
            tree = student_tree(name, bug)
            cmd = [sys.executable, str(ROOT / "tools" / "grade.py"), "--student", str(tree), "--out", out,
                   "--timeout", f"{args.timeout:g}"]
            if args.build_dir:
                cmd += ["--build-dir", args.build_dir]
            if args.seed is not None:
                cmd += ["--seed", str(args.seed)]
            r = subprocess.run(cmd, text=True, capture_output=True)
            report_path = Path(out) / "grade.json"
            report = json.loads(report_path.read_text()) if report_path.exists() else None
        problems, failed = verdict(report, chapter, checker, site)
        if r.returncode != 0:
            problems.insert(0, f"the grader exited with status {r.returncode}")
        if problems:
            failures.append(name)
            print("   NOT REPORTED AS EXPECTED:")
            print("\n".join("   - " + line.replace("\n", "\n     ") for line in problems))
            print("\n".join("   | " + l for l in (r.stdout + r.stderr).splitlines()[-40:]))
        else:
            ch = next(c for c in report["chapters"] if c["chapter"] == f"ch{chapter}")
            print(f"   reported: {len(failed)} of {ch['total']} tests failed, each with {checker} at {site}"
                  f" (seed {report['seed']}):")
            for t in failed:
                print(f"     {t['name']}: {t['message']}")
        sys.stdout.flush()
    print(f"{len(names) - len(failures)}/{len(names)} bugs reported with their checker and line"
          + (f"; not: {', '.join(failures)}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
