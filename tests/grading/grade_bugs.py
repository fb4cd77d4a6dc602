#!/usr/bin/env python3
"""Grades the buggy submissions of tests/grading/bugs/ — the kernel bugs students make most — and
requires the grader to report each with the emulator's checker that catches it and the faulty
file:line, or, for a bug only the float64 oracle can see, at the student's own code. CI runs it.

  python3 tests/grading/grade_bugs.py [--build-dir DIR] [--only NAME ...] [--seed N] [--timeout S]

A bug is a file tests/grading/bugs/<name>.bug: comment lines (#), "file: <chapter-slug>/<file>"
naming a file of solutions/, then one or more edits, each "--- solution" with the solution's
lines followed by "+++ bug" with the lines that replace them (none: the lines are deleted). Each
solution block must occur exactly once, so a bug stops with a clear error when the solution it
edits changes. The driver writes the chapter's solution files with the edits applied into a
temporary student tree, so only the bug can fail. The faulty line carries the marker comment
"BUG(<name>)". A bug is reported as expected when its chapter compiles and is graded, at least
one test fails, and every test that does not pass has a reason (grade.json's "message") holding
"simt: <checker>:" and "<file>:<line>" of the marker. A bug of the checker "oracle" (plain C++ that
computes wrong numbers) is reported as expected when every test that does not pass starts its
output at the student's code ("<chapter>/<file>:<line>: Failure", then "in student::<function>";
tests/support/student_code.h), and one of them at the definition of the bug's function in the
bug's file.

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

# name → (chapter, the checker that must report it). The file and line come from the marker; for
# "oracle", the bug's function (the failure starts at its definition).
EXPECTED = {
    "softmax-no-max-shift": ("01", "oracle:softmax_row"),  # 1.1: exp(x) unshifted overflows on logits near 1000
    "missing-barrier": ("02", "racecheck"),  # 2.2: block_reduce without its second __syncthreads()
    "warmup-missing-barrier": ("02", "racecheck"),  # W2: the vector sum's tree without its barrier per step
    "off-by-one-load": ("03", "memcheck"),   # 3.2: c <= head_dim reads one float past q's cudaMalloc buffer
    "capacity-loop": ("05", "initcheck"),    # 5.3: sums kMaxSplits shared weights, not the num_splits written
    "gemv-row-guard": ("08", "memcheck"),    # 8.4: row > out_features lets one warp read the row past W's end
}


class BugError(Exception):
    """A bug file that does not hold what the driver needs (a solution file, edits that apply, one marker)."""


class Bug:
    """One bug: the solution file it edits and that file's text with the edits applied."""

    def __init__(self, name: str, chapter: str):
        path = BUGS / f"{name}.bug"
        shown = path.relative_to(ROOT)
        target, edits = None, []
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.startswith("#") and not edits:
                continue
            if line.startswith("file:") and target is None and not edits:
                target = line.removeprefix("file:").strip()
            elif line == "--- solution":
                edits.append(([], []))
            elif line == "+++ bug" and edits and not edits[-1][1]:
                edits[-1][1].append(None)  # the bug's lines follow
            elif edits:
                edits[-1][1 if edits[-1][1] else 0].append(line)
            elif line.strip():
                raise BugError(f"{shown}:{number}: expected '# comment', 'file: …' or '--- solution', found '{line}'")
        if target is None or not target.startswith(f"{chapter}-") or target.count("/") != 1:
            raise BugError(f"{shown} needs a line 'file: {chapter}-<slug>/<file>', has {target!r}")
        self.solution = ROOT / "solutions" / target
        if not self.solution.is_file():
            raise BugError(f"{shown}: solutions/{target} does not exist")
        lines = self.solution.read_text().splitlines()
        if not edits:
            raise BugError(f"{shown} holds no '--- solution' … '+++ bug' edit")
        for old, new in edits:
            if not old or not new:
                raise BugError(f"{shown}: an edit needs the solution's lines, then '+++ bug'")
            new = new[1:]
            at = [i for i in range(len(lines) - len(old) + 1) if lines[i:i + len(old)] == old]
            if len(at) != 1:
                raise BugError(f"{shown}: the solution lines {old!r} occur {len(at)} times in solutions/{target} "
                               "(exactly once needed: has the solution changed?)")
            lines[at[0]:at[0] + len(old)] = new
        self.text = "\n".join(lines) + "\n"
        marker = f"BUG({name})"
        marked = [n for n, text in enumerate(lines, 1) if marker in text]
        if len(marked) != 1:
            raise BugError(f"{shown}: the bug must mark one line {marker}, marks {len(marked)}")
        self.site = f"{self.solution.name}:{marked[0]}"
        self.lines = lines

    def definition(self, function: str) -> str:
        """"<file>:<line>" of @p function's definition in the bug's file, as the graded programs find it
        (tests/support/student_code.cpp: `function(` on a line that is no comment and no statement)."""
        pattern = re.compile(r"(?<![\w:])" + re.escape(function) + r"\s*\(")
        for number, text in enumerate(self.lines, 1):
            code = text.split("//")[0].strip()
            if code and not code.startswith("*") and not code.endswith(";") and pattern.search(code):
                return f"{self.solution.name}:{number}"
        raise BugError(f"{function} is not defined in the bug's {self.solution.name}")

    def student_tree(self, name: str) -> Path:
        """The bug's chapter: the solution files, this one with the bug, in build/grading/bugs/<name>/."""
        chapter_dir = self.solution.parent.name
        tree = ROOT / "build" / "grading" / "bugs" / name
        shutil.rmtree(tree, ignore_errors=True)
        (tree / chapter_dir).mkdir(parents=True)
        for solution in sorted(self.solution.parent.iterdir()):
            if solution.is_file():
                shutil.copy(solution, tree / chapter_dir / solution.name)
        (tree / chapter_dir / self.solution.name).write_text(self.text)
        return tree


def verdict(report: dict | None, chapter: str, checker: str, site: str) -> tuple[list[str], list[dict]]:
    """(what is wrong — nothing when the bug is reported as expected, the tests not passed). For an
    "oracle:<function>" checker, @p site is the function's definition."""
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
    if checker.startswith("oracle:"):
        return at_student_code(failed, chapter, checker.removeprefix("oracle:"), site), failed
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


def at_student_code(failed: list[dict], chapter: str, function: str, site: str) -> list[str]:
    """What is wrong with the failed tests' output excerpts: each must start a failure at the
    student's chapter folder ("/NN-slug/<file>:<line>: Failure" then "in student::"), one of them
    at @p site (the definition of @p function)."""
    start = re.compile(r"^\S*/" + re.escape(chapter) + r"-[\w-]+/([\w.]+:\d+): Failure\nin student::(\S+) ", re.M)
    problems, starts = [], []
    for t in failed:
        found = start.findall(t.get("output_excerpt", ""))
        if not found:
            problems.append(f"{t['name']} ({t['outcome']}): no failure starts at the student's code: "
                            + (t.get("output_excerpt", "") or "(no output)")[:600])
        starts += found
    if not any(where == site and name == function for where, name in starts):
        problems.append(f"no failure starts at {site} in student::{function}; they start at "
                        + (", ".join(sorted({f"{w} ({n})" for w, n in starts})) or "nothing"))
    return problems


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", help="the grade build folder to reuse")
    p.add_argument("--only", nargs="*", help="grade only these bugs")
    p.add_argument("--seed", type=int, help="the grader's seed (default: a new one per bug, printed by the grader)")
    p.add_argument("--timeout", type=float, default=120.0, help="per-test time limit, seconds (default: 120)")
    args = p.parse_args()
    found = sorted(f.stem for f in BUGS.glob("*.bug"))
    missing = sorted(set(EXPECTED) - set(found))
    unknown = sorted(set(found) - set(EXPECTED))
    if missing or unknown:
        print(f"bugs without a .bug file: {missing}; .bug files without an expectation: {unknown}")
        return 1
    names = args.only or found
    if set(names) - set(EXPECTED):
        print(f"no such bug: {sorted(set(names) - set(EXPECTED))}; the bugs: {', '.join(found)}")
        return 1
    failures = []
    for name in names:
        chapter, checker = EXPECTED[name]
        try:
            bug = Bug(name, chapter)
        except BugError as e:
            print(f"== bug {name}: {e}")
            failures.append(name)
            continue
        site = bug.site
        if checker.startswith("oracle:"):
            try:
                site = bug.definition(checker.removeprefix("oracle:"))
            except BugError as e:
                print(f"== bug {name}: {e}")
                failures.append(name)
                continue
        print(f"== bug {name} (solutions/{bug.solution.parent.name}/{bug.solution.name} with "
              f"tests/grading/bugs/{name}.bug): must be reported by {checker} at {site}", flush=True)
        with tempfile.TemporaryDirectory(prefix=f"bug-{name}-") as out:
            tree = bug.student_tree(name)
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
            how = (f"each starting at the student's code, one at {site} (student::{checker[7:]})"
                   if checker.startswith("oracle:") else f"each with {checker} at {site}")
            print(f"   reported: {len(failed)} of {ch['total']} tests failed, {how}"
                  f" (seed {report['seed']}):")
            for t in failed:
                print(f"     {t['name']}: {t['message']}")
        sys.stdout.flush()
    print(f"{len(names) - len(failures)}/{len(names)} bugs reported with their checker and line"
          + (f"; not: {', '.join(failures)}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
