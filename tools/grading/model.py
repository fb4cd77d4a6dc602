"""What a grade is made of: the outcomes of one test, the states of one chapter, and their records."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
NOT_IMPLEMENTED = "not implemented yet"
CHAPTER_DIR = re.compile(r"^(\d\d)-([A-Za-z0-9._-]+)$")

# Outcomes of one graded test, in the order the report lists them.
PASSED, FAILED, NOT_IMPL, CRASHED, TIMEOUT, SKIPPED = (
    "passed", "failed", "not-implemented", "crashed", "timeout", "skipped")
OUTCOMES = (PASSED, NOT_IMPL, FAILED, CRASHED, TIMEOUT, SKIPPED)

# States of one chapter.
GRADED, NO_COMPILE, NO_LINK, FORBIDDEN, MISSING, NO_LIST, LAB_BROKEN, NO_TESTS = (
    "graded", "did-not-compile", "did-not-link", "forbidden-calls", "missing",
    "listing-failed", "lab-build-failed", "no-graded-tests")


@dataclass
class TestResult:
    name: str                 # Suite.Test
    outcome: str = FAILED
    message: str = ""
    duration_s: float = 0.0
    output: str = ""          # captured output (possibly truncated)
    returncode: int | None = None
    ran: bool = True          # False: a test of a chapter that did not build, counted as failed


@dataclass
class Chapter:
    number: str               # "01"
    slug: str                 # "naive-cpu-attention"
    status: str = GRADED
    notes: list[str] = field(default_factory=list)
    build_errors: str = ""
    build_s: float = 0.0
    tests: list[TestResult] = field(default_factory=list)
    binary: Path | None = None
    folder_missing: bool = False  # the student's tree has no folder NN-slug for this chapter

    @property
    def key(self) -> str:
        return f"ch{self.number}"

    @property
    def title(self) -> str:
        return f"{self.number}-{self.slug}"

    @property
    def passed(self) -> int:
        return sum(t.outcome == PASSED for t in self.tests)

    @property
    def total(self) -> int:
        return len(self.tests)

    @property
    def counted(self) -> bool:
        """Whether the chapter counts towards the overall score."""
        return self.status != NO_TESTS

    @property
    def score(self) -> float:
        if self.status != GRADED or not self.tests:
            return 0.0
        return 100.0 * self.passed / self.total

    def counts(self) -> dict[str, int]:
        return {o: sum(t.outcome == o for t in self.tests) for o in OUTCOMES}


# ---------------------------------------------------------------------------------------------


class GradeError(Exception):
    """The grader itself could not run (exit status 2): a bad folder, a failed configure, the
    lab's own code not building."""
