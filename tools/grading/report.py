"""The report: the score table, grade.json, junit.xml, and whether an expectation was met."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from .gtest import output_excerpt, shorten
from .model import (CRASHED, FAILED, FORBIDDEN, GRADED, LAB_BROKEN, MISSING, NO_COMPILE, NO_LINK, NO_LIST,
                    NO_TESTS, NOT_IMPL, NOT_IMPLEMENTED, OUTCOMES, PASSED, SKIPPED, TIMEOUT, Chapter, TestResult)


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(s: str) -> str:
    return _XML_BAD.sub("?", s)


# ---- integrity: what marks a failure as a suspected integrity violation --------------------------

# A test's output that shows student code doing what no honest answer does: the emulator's report of
# host code reading or writing device memory outside a launch or a copy (tests/support: the kernel
# launched for show beside a host loop), or the sandbox killing student code for a forbidden system
# call (opening a file, starting a process, signalling another process).
_TEST_GUARDS = (
    ("simt: memcheck: host code ", "host access to device memory"),
    ("(a forbidden system call)", "sandbox violation: a forbidden system call"),
)


def test_integrity_violation(t: TestResult) -> str:
    """Why test @p t's failure is a suspected integrity violation ('' when it is not one)."""
    if t.outcome == PASSED or not t.ran:
        return ""
    for marker, reason in _TEST_GUARDS:
        if marker in t.output or marker in t.message:
            return reason
    return ""


def chapter_integrity_violation(ch: Chapter) -> str:
    """Why chapter @p ch is a suspected integrity violation ('' when it is not): the inspection's
    finding (a forbidden symbol, startup code, an include that is not offered), or the first test
    an integrity guard stopped."""
    if ch.status == FORBIDDEN:
        lines = [l.strip() for l in ch.build_errors.splitlines() if l.strip()]
        return shorten("the inspection: " + " ".join(lines[:2]), 240) if lines else "the inspection"
    for t in ch.tests:
        reason = test_integrity_violation(t)
        if reason:
            return f"{reason} ({t.name})"
    return ""


def fill_not_built(ch: Chapter, names: list[str]) -> None:
    """Records every graded test of chapter @p ch, which did not build (or failed the
    inspection), as failed and not run, so that totals count them."""
    if ch.status in (GRADED, NO_TESTS) or ch.tests or not names:
        return
    why = "suspected integrity violation" if ch.status == FORBIDDEN else chapter_note(ch)
    ch.tests = [TestResult(n, FAILED, f"not run: the chapter {why}", ran=False) for n in names]


def chapter_points(chapters: list[Chapter]) -> dict[str, float]:
    """The points each counted chapter is worth out of 100 (each chapter weighs the same, as the
    overall score is the mean of the chapter scores); a test is worth its chapter's points over
    the chapter's tests, so the points of the passed tests add up to the overall score."""
    counted = [c for c in chapters if c.counted]
    return {c.key: 100.0 / len(counted) for c in counted}


def test_points(ch: Chapter, points: dict[str, float]) -> float:
    return points.get(ch.key, 0.0) / len(ch.tests) if ch.tests else 0.0


def overall_score(chapters: list[Chapter]) -> float:
    counted = [c for c in chapters if c.counted]
    return sum(c.score for c in counted) / len(counted) if counted else 0.0


def chapter_note(ch: Chapter) -> str:
    notes = {
        NO_COMPILE: "did not compile",
        NO_LINK: "did not link",
        FORBIDDEN: "failed the inspection",
        MISSING: "no student sources",  # (the folder's there; a missing folder is named below)
        NO_LIST: "tests could not be listed",
        LAB_BROKEN: "the lab's own code failed to build",
        NO_TESTS: "no graded tests yet (not counted)",
    }
    if ch.status == MISSING and ch.folder_missing:
        parts = [f"chapter folder {ch.title}/ missing"]
    elif ch.status in notes:
        parts = [notes[ch.status]]
    else:
        c = ch.counts()
        parts = []
        for outcome, word in ((NOT_IMPL, "not implemented"), (FAILED, "failed"), (CRASHED, "crashed"),
                              (TIMEOUT, "timed out"), (SKIPPED, "skipped")):
            if c[outcome]:
                parts.append(f"{c[outcome]} {word}")
    violation = chapter_integrity_violation(ch)
    if violation:
        parts.append(f"SUSPECTED INTEGRITY VIOLATION: {violation}")
    return ", ".join(parts + ch.notes)


def score_table(chapters: list[Chapter]) -> str:
    rows = [("chapter", "passed", "score", "notes")]
    for ch in chapters:
        total = str(ch.total) if ch.tests or ch.status == GRADED else "-"
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
    points = chapter_points(chapters)
    out = dict(meta)
    out["score_percent"] = round(overall_score(chapters), 2)
    out["passed"] = sum(c.passed for c in chapters)
    out["total"] = sum(c.total for c in chapters)  # a chapter that did not build: every test failed
    out["suspected_integrity_violations"] = [
        {"chapter": c.key, "reason": r} for c in chapters if (r := chapter_integrity_violation(c))]
    out["chapters"] = []
    for ch in chapters:
        each = test_points(ch, points)
        out["chapters"].append({
            "chapter": ch.key,
            "folder": ch.title,
            "status": ch.status,
            "counted": ch.counted,
            "passed": ch.passed,
            "total": ch.total,
            "score_percent": round(ch.score, 2),
            "points": round(ch.passed * each if ch.status == GRADED else 0.0, 4),
            "max_points": round(points.get(ch.key, 0.0), 4),
            "counts": ch.counts(),
            "note": chapter_note(ch),
            "suspected_integrity_violation": chapter_integrity_violation(ch),
            "build_errors": ch.build_errors,
            "build_s": round(ch.build_s, 2),
            "tests": [{
                "name": t.name,
                "outcome": t.outcome,
                "ran": t.ran,
                "message": t.message,
                "duration_s": round(t.duration_s, 3),
                "points": round(each if t.outcome == PASSED and ch.status == GRADED else 0.0, 4),
                "max_points": round(each, 4),
                **({"suspected_integrity_violation": v} if (v := test_integrity_violation(t)) else {}),
                **({"output_excerpt": output_excerpt(t.output)} if t.outcome != PASSED and t.ran else {}),
            } for t in ch.tests],
        })
    return out


def _properties(parent: ET.Element, values: dict) -> None:
    props = ET.SubElement(parent, "properties")
    for k, v in values.items():
        ET.SubElement(props, "property", name=k, value=xml_text(str(v)))


def junit_xml(chapters: list[Chapter], student: str = "", seed: int | None = None) -> bytes:
    """JUnit XML: one <testsuite> per chapter, named for the student; each <testcase> carries its
    points and max_points as properties. Every test of a chapter that did not build (or failed the
    inspection) is a failed case of that chapter's status; when its tests are not known (no build
    has listed them yet), the chapter is one errored 'build' case. A suspected integrity
    violation is a property of the suite and of the case, and begins the failure's message."""
    suites = ET.Element("testsuites", name=f"inferlab-grade {student}".strip())
    _properties(suites, {"student": student, "score_percent": f"{overall_score(chapters):.2f}",
                         **({"seed": seed} if seed is not None else {})})
    points = chapter_points(chapters)
    all_tests = all_fail = all_err = 0
    all_time = 0.0
    for ch in chapters:
        suite = ET.SubElement(suites, "testsuite", name=f"{ch.key}-{ch.slug}")
        if student:
            suite.set("hostname", student)  # the JUnit schema's field for where a suite ran: here, whose
        violation = chapter_integrity_violation(ch)
        _properties(suite, {"student": student, "status": ch.status, "score_percent": f"{ch.score:.2f}",
                            "max_points": f"{points.get(ch.key, 0.0):.4f}",
                            **({"suspected_integrity_violation": violation} if violation else {})})
        tests = failures = errors = skipped = 0
        time_s = 0.0
        if ch.status not in (GRADED, NO_TESTS) and not ch.tests:
            case = ET.SubElement(suite, "testcase", classname=ch.key, name="build", time="0")
            _properties(case, {"points": "0", "max_points": f"{points.get(ch.key, 0.0):.4f}"})
            el = ET.SubElement(case, "error", type=ch.status, message=xml_text(chapter_note(ch)))
            el.text = xml_text(ch.build_errors)
            tests, errors = 1, 1
        each = test_points(ch, points)
        for t in ch.tests:
            suite_name, _, test_name = t.name.partition(".")
            case = ET.SubElement(suite, "testcase", classname=f"{ch.key}.{suite_name}", name=test_name,
                                 time=f"{t.duration_s:.3f}")
            earned = each if t.outcome == PASSED and ch.status == GRADED else 0.0
            why = test_integrity_violation(t) or (violation if not t.ran else "")
            _properties(case, {"points": f"{earned:.4f}", "max_points": f"{each:.4f}",
                               **({"suspected_integrity_violation": why} if why else {})})
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
            message = f"SUSPECTED INTEGRITY VIOLATION ({why}): {t.message}" if why else t.message
            el = ET.SubElement(case, kind, type=t.outcome if t.ran else ch.status, message=xml_text(message))
            el.text = xml_text(output_excerpt(t.output) if t.ran else ch.build_errors)
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


def check_zero(chapters: list[Chapter], numbers: list[str]) -> list[str]:
    """Why the chapters @p numbers do not all score zero for a cheating submission (empty: they
    do). A chapter that does not build proves nothing about the grader, so it is a problem too."""
    problems: list[str] = []
    by_number = {c.number: c for c in chapters}
    for n in numbers:
        ch = by_number.get(n)
        if ch is None:
            problems.append(f"ch{n}: no such chapter")
        elif ch.status not in (GRADED, FORBIDDEN):
            problems.append(f"ch{n}: {chapter_note(ch)} — a cheat must build to prove it is caught")
        elif ch.passed:
            passed = ", ".join(t.name for t in ch.tests if t.outcome == PASSED)
            problems.append(f"ch{n}: {ch.passed}/{ch.total} passed ({passed})")
    return problems
