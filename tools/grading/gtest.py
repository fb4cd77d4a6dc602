"""Reading GoogleTest: the test list, the XML report, and what one run's outcome was."""

from __future__ import annotations

import re
import signal
import xml.etree.ElementTree as ET

from .model import (CRASHED, FAILED, NOT_IMPL, NOT_IMPLEMENTED, PASSED, SKIPPED, TIMEOUT)


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


# A report of the SIMT emulator's checkers (memcheck, racecheck, initcheck, barrier divergence, a
# launch's sticky error, ...): a line that begins with "simt: ", or such a report quoted inside
# another message (GoogleTest's 'C++ exception with description "... simt: ..."').
_SIMT_REPORT = re.compile(r"(?:^|(?<=[\s\"'(:]))simt: ", re.MULTILINE)
# GoogleTest's own lines: the [ RUN      ] / [  FAILED  ] markers, the filter note, the summary.
_GTEST_FRAME = re.compile(r"^(\[[ =A-Z-]{10}\]|Note: Google Test filter|Running main\(\) from|"
                          r"\s*\d+ FAILED TESTS?$|\s*YOU HAVE \d+ DISABLED TESTS?$)")


def emulator_report(output: str, limit: int = 300) -> str:
    """The first report of the SIMT emulator in a test's output, as one line of at most `limit`
    characters ('' when there is none): its first line, from "simt: " on — e.g.
    "simt: memcheck: out-of-bounds write of 4 bytes at decode_attention.cu:71 (in ...)"."""
    m = _SIMT_REPORT.search(output)
    if not m:
        return ""
    line = output[m.start():].split("\n", 1)[0].rstrip()
    # Quoted in an exception's description: drop GoogleTest's closing words.
    line = re.sub(r'" thrown in (the test body|the test fixture\'s constructor|SetUp\(\)|TearDown\(\))\.$', "",
                  line)
    return shorten(line, limit)


def shorten(text: str, limit: int) -> str:
    """`text` on one line of at most `limit` characters: whitespace squeezed, then (when still too
    long) template argument lists folded to <…>, so a report keeps its file:line and kernel name,
    and last the end cut off with an ellipsis."""
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) > limit:
        # Innermost lists first; "\0" stands for a folded one until the end.
        folded = text.replace("\0", "")
        while len(folded.replace("\0", "<…>")) > limit:
            inner = re.sub(r"<[^<>]+>", "\0", folded)
            if inner == folded:
                break
            folded = inner
        text = folded.replace("\0", "<…>")
    return text if len(text) <= limit else text[:limit - 1] + "…"


# A graded test's failure printed at the student's code (tests/support/student_code.h):
# "<tree>/01-…/softmax_row.cpp:10: Failure" then "in student::softmax_row (the check: …)".
_AT_STUDENT_CODE = re.compile(r"in student::(\S+) \(the check: [^)]*\)$")
_BOOLEAN_BOILERPLATE = re.compile(r"^(Value of: .*|Actual: (true|false)|Expected: (true|false))$")


def failure_message(output: str, limit: int = 300) -> str:
    """A one-line summary of a GoogleTest failure: the first failure block, squeezed. A failure
    printed at the student's code starts with its file, line and function ("softmax_row.cpp:10
    student::softmax_row: …"); the check's own place stays in the full output."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if "C++ exception with description" in line or "unknown file: Failure" in line:
            for cand in lines[i:i + 3]:
                if "C++ exception" in cand:
                    return _squeeze(cand.strip(), limit)
        if line.rstrip().endswith(": Failure") or line.rstrip().endswith(": error:"):
            block = [l.strip() for l in lines[i + 1:i + 9] if l.strip()]
            block = [l for l in block if not l.startswith("[")]
            # EXPECT_TRUE(ok) << report: GoogleTest's three lines say less than the report after them.
            block = [l for l in block if not _BOOLEAN_BOILERPLATE.match(l)] or block
            at = _AT_STUDENT_CODE.match(block[0]) if block else None
            if at:
                where = line.rstrip().removesuffix(": Failure").rsplit("/", 1)[-1]
                return _squeeze(f"{where} student::{at.group(1)}: " + " | ".join(block[1:4]), limit)
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
    """(outcome, one-line message) of one test run in its own process. The message of a failure
    or a crash is the emulator's first report when the output holds one (it names the checker and
    the source line), else GoogleTest's first failure, else the signal or exit status."""
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
        report = emulator_report(output, 300 - len(msg) - 3)
        return CRASHED, f"{report} ({msg})" if report else msg
    m = re.search(re.escape(NOT_IMPLEMENTED) + r"(: [A-Za-z0-9_:./<>-]+)?", output)
    if returncode == 0:
        if xml_status == "passed":
            return PASSED, ""
        if xml_status == "skipped":
            return SKIPPED, "skipped (GTEST_SKIP)"
        if xml_status == "failed":
            return FAILED, emulator_report(output) or failure_message(output) or "failed"
        return FAILED, "the process exited before the test finished (exit() called from the code under test?)"
    if m:
        return NOT_IMPL, m.group(0).strip()
    msg = emulator_report(output) or failure_message(output)
    if not msg:
        msg = f"exit status {returncode}"
    return FAILED, msg


def output_excerpt(output: str, max_blocks: int = 3, max_chars: int = 4096) -> str:
    """What a report shows of a test's output: GoogleTest's own lines dropped, the lines before
    the first failure (an emulator report printed as the kernel failed, ...), then the first
    `max_blocks` failure blocks (each from its "file:line: Failure" line on), the rest counted;
    at most `max_chars` characters (a test that prints no failure block, such as a crash, keeps
    its head and its tail). The full output stays in logs/."""
    lines = [l for l in output.splitlines() if not _GTEST_FRAME.match(l)]
    starts = [i for i, l in enumerate(lines) if l.rstrip().endswith(": Failure")]
    if starts:
        shown = starts[max_blocks] if len(starts) > max_blocks else len(lines)
        text = "\n".join(lines[:shown])
        if len(starts) > max_blocks:
            text += (f"\n[... {len(starts) - max_blocks} more failure block(s) left out by the grader;"
                     " the full output is in logs/ ...]")
    else:
        text = "\n".join(lines)
    text = text.strip("\n")
    if len(text) <= max_chars:
        return text
    note = f"\n[... {len(text) - max_chars} characters left out by the grader; the full output is in logs/ ...]\n"
    if starts:
        return text[:max_chars] + note.rstrip("\n")
    half = max_chars // 2
    return text[:half] + note + text[-half:]
