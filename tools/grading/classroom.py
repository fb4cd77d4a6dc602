"""`inferlab grade --class DIR`: every student folder of DIR graded against one shared build with one
seed, each into its own report folder, and the class's gradebook.csv.

The students are graded one after another: they share the build folder (each recompiles only its
own files), and a student's tests run --jobs at a time as for one student. A student whose tree
cannot be graded at all (no chapter folders) is a row with its error, not a 0%, and the class goes
on; the lab's own code failing to build stops the class (every grade would be wrong).
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from .model import GRADED, ROOT, Chapter, GradeError
from .phases import count_not_built, grade_tree, has_chapter_folders, replay_command, say, write_reports
from .report import chapter_integrity_violation, chapter_note, overall_score, test_integrity_violation


@dataclass
class StudentGrade:
    """One row of the gradebook: a student's chapters, or why the student was not graded."""
    name: str
    chapters: list[Chapter] = field(default_factory=list)
    error: str = ""


def student_folders(class_dir: Path, out: Path | None = None) -> list[Path]:
    """The class's student folders: its subfolders, hidden ones and the report folder left out."""
    if not class_dir.is_dir():
        raise GradeError(f"--class {class_dir}: not a folder")
    if has_chapter_folders(class_dir):
        raise GradeError(f"--class {class_dir}: this folder has chapter folders itself, so it is one student's "
                         f"tree, not a class: grade it with --student {class_dir}")
    folders = [d for d in sorted(class_dir.iterdir())
               if d.is_dir() and not d.name.startswith(".") and d.resolve() != out]
    if not folders:
        raise GradeError(f"--class {class_dir}: no student folders in it (one folder per student, each a copy "
                         "of exercises/)")
    return folders


def student_tree(folder: Path) -> Path:
    """The tree to grade in a student's folder: the folder, or its exercises/ when the student
    handed in a whole clone."""
    if not has_chapter_folders(folder) and (folder / "exercises").is_dir():
        return folder / "exercises"
    return folder


def gradebook_rows(students: list[StudentGrade], seed: int) -> list[dict[str, str]]:
    """The gradebook: one row per student; each chapter's score in percent, the total (the mean of
    the chapter scores, as every report), passed/tests counting each test of a chapter that did not
    build as failed, suspected integrity violations, and what kept chapters from being graded."""
    keys: list[str] = []
    for s in students:
        keys += [c.key for c in s.chapters if c.counted and c.key not in keys]
    keys.sort()
    rows = []
    for s in students:
        row = {"student": s.name}
        by_key = {c.key: c for c in s.chapters}
        for k in keys:
            ch = by_key.get(k)
            row[k] = f"{ch.score:.2f}" if ch is not None and ch.counted and not s.error else ""
        row["total"] = "" if s.error else f"{overall_score(s.chapters):.2f}"
        row["passed"] = "" if s.error else str(sum(c.passed for c in s.chapters))
        row["tests"] = "" if s.error else str(sum(c.total for c in s.chapters))
        row["seed"] = str(seed)
        row["integrity"] = "; ".join(f"{c.key}: {v}" for c in s.chapters if (v := chapter_integrity_violation(c)))
        row["notes"] = s.error or "; ".join(f"{c.key}: {chapter_note(c)}" for c in s.chapters
                                            if c.counted and c.status != GRADED)
        rows.append(row)
    return rows


def gradebook_csv(rows: list[dict[str, str]]) -> str:
    if not rows:
        return ""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def gradebook_table(rows: list[dict[str, str]]) -> str:
    """The gradebook as the terminal shows it (the integrity and notes columns last, unpadded)."""
    if not rows:
        return ""
    cols = [c for c in rows[0] if c not in ("integrity", "notes")]
    w = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    lines = ["  ".join(f"{c:<{w[c]}}" for c in cols) + "  notes"]
    for r in rows:
        extra = "; ".join(x for x in (f"SUSPECTED INTEGRITY VIOLATION {r['integrity']}" if r["integrity"] else "",
                                      r["notes"]) if x)
        lines.append(("  ".join(f"{r[c]:<{w[c]}}" for c in cols) + "  " + extra).rstrip())
    return "\n".join(lines)


def grade_class(args: argparse.Namespace) -> int:
    class_dir = Path(args.class_dir).expanduser().resolve()
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", class_dir.name) or "class"
    out = Path(args.out).expanduser().resolve() if args.out else ROOT / "grade" / f"class-{name}"
    folders = student_folders(class_dir, out)
    seed = args.seed if args.seed is not None else secrets.randbits(63)
    build = args.build_dir or str(ROOT / "build" / "grade-student")
    out.mkdir(parents=True, exist_ok=True)
    say(f"== inferlab grade --class {class_dir}: {len(folders)} students, build folder {build}")
    say(f"   seed {seed} for the whole class (the same data again: {replay_command(args, seed)})")

    students: list[StudentGrade] = []
    waiting = []  # graded, but a chapter that did not build has tests no build has listed yet
    for i, folder in enumerate(folders, 1):
        say(f"\n===== student {i}/{len(folders)}: {folder.name}")
        sub = argparse.Namespace(**vars(args))
        sub.class_dir, sub.student, sub.seed, sub.build_dir = None, str(student_tree(folder)), seed, build
        sub.out = str(out / folder.name)
        try:
            run = grade_tree(sub, quiet=True)
        except GradeError as e:
            say(f"== {folder.name}: NOT GRADED: {e}")
            students.append(StudentGrade(folder.name, error=f"not graded: {e}".replace("\n", " ")))
            continue
        students.append(StudentGrade(folder.name, run.chapters))
        if run.lab_broken:
            write_reports(run)
            raise GradeError("the lab's own code (not the student's) failed to build; the class was stopped "
                             f"at {folder.name}: see the logs above")
        if count_not_built(run):
            write_reports(run)
            _drop_outputs(run.chapters)
        else:
            waiting.append(run)
    for run in waiting:  # a later student's build listed them (or no build of the class did)
        count_not_built(run)
        write_reports(run)

    rows = gradebook_rows(students, seed)
    (out / "gradebook.csv").write_text(gradebook_csv(rows))
    say(f"\n===== gradebook ({len(students)} students, seed {seed})")
    say(gradebook_table(rows))
    say(f"\ngradebook: {out / 'gradebook.csv'}; each student's grade.json, junit.xml and logs/ in {out}/<student>/")
    say(f"the same data again: {replay_command(args, seed)}")
    failed = [s for s in students if s.error]
    if failed:
        say(f"\ninferlab grade: {len(failed)} of {len(students)} student folders could not be graded: "
            + ", ".join(s.name for s in failed))
        return 2
    return 0


def _drop_outputs(chapters: list[Chapter]) -> None:
    """A reported student's test outputs are in its logs/; the gradebook needs only the outcomes
    (and the outputs that show a suspected integrity violation)."""
    for ch in chapters:
        for t in ch.tests:
            if not test_integrity_violation(t):
                t.output = ""
