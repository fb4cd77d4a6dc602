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
