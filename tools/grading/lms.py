"""What a learning-management system reads: Gradescope's and PrairieLearn's results.json, and the
Gradescope autograder package (`--gradescope-autograder OUT.zip`).

Both results files score out of the same points as the rest of the reports (report.chapter_points:
each counted chapter is worth the same, each of its tests an equal share), so an LMS total equals
grade.json's score_percent.

  Gradescope    /autograder/results/results.json: {"score", "execution_time", "output",
                "tests": [{"name", "score", "max_score", "status", "output", "visibility"}]}
                (https://gradescope-autograders.readthedocs.io/en/latest/specs/)
  PrairieLearn  /grade/results/results.json: {"gradable", "score" in [0, 1], "message", "output",
                "tests": [{"name", "points", "max_points", "message", "output"}]}
                (https://prairielearn.readthedocs.io/en/latest/externalGrading/)
"""

from __future__ import annotations

import argparse
import json
import stat
import subprocess
import zipfile
from pathlib import Path

from .gtest import output_excerpt
from .model import GRADED, NO_TESTS, PASSED, ROOT, Chapter, GradeError
from .report import (chapter_integrity_violation, chapter_note, chapter_points, overall_score, test_integrity_violation,
                     test_points)

FORMATS = ("gradescope", "prairielearn")
# Gradescope's visibility values (a test's and the whole result's).
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")


def graded_items(chapters: list[Chapter]) -> list[dict]:
    """One item per graded test (a chapter that did not build: each of its tests, failed; its tests
    unknown: one 'build' item worth the chapter): name, points, max_points, passed, output."""
    points = chapter_points(chapters)
    items = []
    for ch in chapters:
        if not ch.counted:
            continue
        violation = chapter_integrity_violation(ch)
        if not ch.tests:
            items.append({"name": f"{ch.title}: build", "points": 0.0, "max_points": points[ch.key],
                          "passed": False,
                          "output": _join(f"{ch.key}: {chapter_note(ch)}", ch.build_errors)})
            continue
        each = test_points(ch, points)
        for t in ch.tests:
            passed = t.outcome == PASSED and ch.status == GRADED
            why = test_integrity_violation(t) or (violation if not t.ran else "")
            if passed:
                output = ""
            elif t.ran:
                output = _join(f"{t.outcome}: {t.message}", output_excerpt(t.output))
            else:
                output = _join(t.message, ch.build_errors)
            if why:
                output = f"SUSPECTED INTEGRITY VIOLATION: {why}\n{output}"
            items.append({"name": f"{ch.key} {t.name}", "points": each if passed else 0.0, "max_points": each,
                          "passed": passed, "output": output})
    return items


def _join(*parts: str) -> str:
    return "\n".join(p for p in parts if p)


def summary(chapters: list[Chapter]) -> str:
    """The per-chapter lines an LMS shows above the tests."""
    lines = []
    for ch in chapters:
        if ch.status == NO_TESTS:
            continue
        line = f"{ch.title}: {ch.passed}/{ch.total or '-'} passed, {ch.score:.0f}%"
        note = chapter_note(ch)
        lines.append(line + (f" ({note})" if note else ""))
    return "\n".join(lines)


def gradescope_results(chapters: list[Chapter], execution_time_s: float, visibility: str = "visible",
                       seed: int | None = None) -> dict:
    items = graded_items(chapters)
    return {
        "score": round(sum(i["points"] for i in items), 4),
        "execution_time": int(round(execution_time_s)),
        "output": summary(chapters) + (f"\nseed {seed}" if seed is not None else ""),
        "visibility": visibility,
        "stdout_visibility": "hidden",
        "tests": [{
            "name": i["name"],
            "score": round(i["points"], 4),
            "max_score": round(i["max_points"], 4),
            "status": "passed" if i["passed"] else "failed",
            "output": i["output"],
            "visibility": visibility,
        } for i in items],
    }


def prairielearn_results(chapters: list[Chapter], seed: int | None = None) -> dict:
    items = graded_items(chapters)
    # Nothing built: PrairieLearn shows the submission as not gradable (no score recorded) with the
    # compiler's errors, instead of a 0.
    built = any(c.status == GRADED for c in chapters if c.counted)
    return {
        "gradable": built,
        "score": round(min(1.0, max(0.0, overall_score(chapters) / 100.0)), 6),
        "message": (f"{overall_score(chapters):.0f}% (mean of the chapter scores)" if built
                    else "no chapter built: see the compiler's errors below"),
        "output": summary(chapters) + (f"\nseed {seed}" if seed is not None else ""),
        "tests": [{
            "name": i["name"],
            "points": round(i["points"], 4),
            "max_points": round(i["max_points"], 4),
            "message": "passed" if i["passed"] else i["output"].split("\n", 1)[0],
            "output": i["output"],
        } for i in items],
    }


def error_results(fmt: str, message: str) -> dict:
    """results.json when the grader could not grade at all (exit status 2): the LMS shows why."""
    if fmt == "gradescope":
        return {"score": 0.0, "execution_time": 0, "output": f"inferlab grade: {message}", "tests": []}
    return {"gradable": False, "score": 0.0, "message": f"inferlab grade: {message}", "output": message, "tests": []}


def write_results(out: Path, args: argparse.Namespace, chapters: list[Chapter], elapsed_s: float,
                  seed: int | None = None) -> Path:
    """results.json of --format into @p out."""
    if args.format == "gradescope":
        data = gradescope_results(chapters, elapsed_s, args.visibility, seed)
    else:
        data = prairielearn_results(chapters, seed)
    path = out / "results.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def write_error_results(args: argparse.Namespace, message: str) -> None:
    if getattr(args, "format", None) and getattr(args, "out", None):
        out = Path(args.out).expanduser()
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(error_results(args.format, message), indent=2) + "\n")


# ---- the Gradescope autograder package ---------------------------------------------------------

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu).
set -euo pipefail
lab=/autograder/source/inferlab
cd "$lab"
chmod +x inferlab tools/*.sh 2>/dev/null || true
./inferlab setup            # the lab's Debian packages (apt-get) and the model chapter 08 reads
# One build of the lab, shared by every submission: grading the solutions builds it and checks it.
python3 tools/grade.py --student solutions --build-dir /autograder/build --out /autograder/setup-check \\
    --expect-full-marks{chapters}
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for each submission: grades /autograder/submission (a copy of exercises/, or
# a whole clone with its exercises/) into /autograder/results/results.json.
set -uo pipefail
lab=/autograder/source/inferlab
submission=/autograder/submission
if [ -d "$submission/exercises" ] && ! ls -d "$submission"/[0-9][0-9]-*/ >/dev/null 2>&1; then
  submission="$submission/exercises"
fi
mkdir -p /autograder/results
python3 "$lab/tools/grade.py" --student "$submission" --build-dir /autograder/build \\
    --out /autograder/results --format gradescope --visibility {visibility}{options}
status=$?
# 0: graded; 2: the grader could not run (results.json says why). Either way Gradescope reads
# results.json; a missing one is an autograder failure it reports to the instructor.
[ -f /autograder/results/results.json ] || exit 1
exit 0
"""


def lab_files() -> list[str]:
    """The lab's files as a clone has them (tracked, and new ones git does not ignore): no build
    folders, no reports."""
    r = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       capture_output=True)
    if r.returncode != 0:
        raise GradeError("--gradescope-autograder needs the lab's git checkout (git ls-files failed)")
    return sorted({f for f in r.stdout.decode().split("\0") if f and (ROOT / f).is_file()})


def write_autograder(zip_path: Path, args: argparse.Namespace) -> list[str]:
    """Gradescope's autograder zip: setup.sh and run_autograder at its root, the lab under
    inferlab/ (unzipped by Gradescope into /autograder/source/). Returns the names of the scripts."""
    options = ""
    if args.chapters:
        options += f" --chapters {','.join(args.chapters)}"
    if args.timeout != 120.0:
        options += f" --timeout {args.timeout:g}"
    if args.seed is not None:
        options += f" --seed {args.seed}"
    scripts = {
        "setup.sh": SETUP_SH.format(chapters=f" --chapters {','.join(args.chapters)}" if args.chapters else ""),
        "run_autograder": RUN_AUTOGRADER.format(visibility=args.visibility, options=options),
    }
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(zip_path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in scripts.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | 0o755) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)
        for f in lab_files():
            z.write(ROOT / f, f"inferlab/{f}")
    return list(scripts)
