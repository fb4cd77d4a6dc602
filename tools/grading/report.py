"""The report: the score table, grade.json, junit.xml, and whether an expectation was met."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from .gtest import output_excerpt
from .model import (CRASHED, FAILED, FORBIDDEN, GRADED, LAB_BROKEN, MISSING, NO_COMPILE, NO_LINK, NO_LIST,
                    NO_TESTS, NOT_IMPL, NOT_IMPLEMENTED, OUTCOMES, PASSED, SKIPPED, TIMEOUT, Chapter)


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
                **({"output_excerpt": output_excerpt(t.output)} if t.outcome != PASSED else {}),
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
            el.text = xml_text(output_excerpt(t.output))
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
