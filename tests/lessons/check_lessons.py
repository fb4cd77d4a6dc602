#!/usr/bin/env python3
"""Keeps the lessons' numbers true: every figure a chapter's claim file lists is found in the
lesson's text and compared with the value computed from its inputs (the lesson's own stated
inputs, or the committed measurements in docs/plots/*.json).

    python3 tests/lessons/check_lessons.py [ROOT] [--chapter ch09]   check the lessons
    python3 tests/lessons/check_lessons.py [ROOT] --self-test         prove the check fails

A claim file, tests/lessons/chNN.py, defines claims(lab) → a list of claims; each names one line
of the lesson (a regular expression that must match exactly one line, or a table and a row) and
the number(s) on it with the value each must round to. A stated number passes when it is the
value rounded to the digits the lesson shows (|stated − value| ≤ half a unit of its last digit),
or within the claim's relative tolerance where the lesson says "about". A failure names the file,
the line, the stated and the computed number and how it was computed.

--self-test changes each checked number of each lesson in turn (in memory: stated × 1.3 plus two
units of its last digit) and requires the check to fail naming that line; then it puts back the
wrong figures the lessons once printed (WRONG_BEFORE in the claim files) and requires each to be
caught. Standard library only.
"""
import importlib.util
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

CHAPTERS = {"ch01": "chapters/01-naive-cpu-attention/README.md", "ch02": "chapters/02-gpu-prefill/README.md",
            "ch03": "chapters/03-kv-cache-decode/README.md", "ch04": "chapters/04-int8-kv-cache/README.md", "ch05": "chapters/05-fused-attention/README.md",
            "ch06": "chapters/06-paged-attention/README.md", "ch07": "chapters/07-continuous-batching/README.md",
            "ch08": "chapters/08-real-model/README.md", "ch09": "chapters/09-serving/README.md",
            "ch10": "chapters/10-parallelism/README.md", "ch11": "chapters/11-compute-roof/README.md",
            "ch12": "chapters/12-speculative-decoding/README.md"}
# A number as the lessons print it: "1 013" (a space, thin or narrow no-break space between groups),
# "0.41", "−5.2" (the minus sign or a hyphen).
NUMBER = r"[−-]?\d{1,3}(?:[  \u2009]\d{3})+(?:\.\d+)?|[−-]?\d+(?:\.\d+)?"


def parse_number(text):
    """The value and the decimals shown of a number as printed."""
    clean = re.sub(r"[  \u2009]", "", text).replace("−", "-")
    decimals = len(clean.split(".")[1]) if "." in clean else 0
    return float(clean), decimals


@dataclass
class Claim:
    """Number(s) on one line of a lesson. `pattern` matches exactly one line; its groups are the
    numbers, compared in order with `values` (None: not checked)."""
    pattern: str
    values: list
    why: str
    rel: float = 0.0  # accepted relative difference, for a figure the lesson gives as "about"
    table: str = None  # when set: the pattern is searched only inside the table whose header has this text


@dataclass
class Failure:
    line: int
    message: str


@dataclass
class Result:
    failures: list = field(default_factory=list)
    checked: list = field(default_factory=list)  # (line, start, end) of each number checked


def row(table, first_cells, values, why, rel=0.0):
    """A Markdown table row: its first cells given as text (regular expressions), every later cell's
    first number compared with `values` in order (None skips a cell)."""
    head = r"^\|\s*" + r"\s*\|\s*".join(first_cells) + r"\s*\|"
    cells = "".join(r"[^|\d−-]*(" + NUMBER + r")[^|]*\|" if v is not None else r"[^|]*\|" for v in values)
    return Claim(head + cells, [v for v in values if v is not None], why, rel, table)


def table_lines(lines, header_text):
    """Indices of the lines of the table whose header line contains header_text."""
    starts = [i for i, l in enumerate(lines) if l.startswith("|") and header_text in l]
    if len(starts) != 1:
        return None, f"{len(starts)} tables have a header with {header_text!r}"
    i = starts[0]
    span = []
    while i < len(lines) and lines[i].startswith("|"):
        span.append(i)
        i += 1
    return span, None


def check_text(name, text, claims):
    lines = text.split("\n")
    result = Result()
    for claim in claims:
        where = range(len(lines))
        if claim.table:
            span, error = table_lines(lines, claim.table)
            if error:
                result.failures.append(Failure(0, f"{name}: {error} ({claim.why})"))
                continue
            where = span
        hits = [(i, m) for i in where for m in [re.search(claim.pattern, lines[i])] if m]
        if len(hits) != 1:
            result.failures.append(Failure(hits[0][0] + 1 if hits else 0,
                                           f"{name}: {len(hits)} lines match /{claim.pattern}/ — the claim "
                                           f"({claim.why}) must name exactly one line"))
            continue
        i, match = hits[0]
        if match.re.groups != len(claim.values):
            result.failures.append(Failure(i + 1, f"{name}:{i + 1}: the pattern has {match.re.groups} numbers, "
                                                  f"the claim {len(claim.values)} values"))
            continue
        for g, expected in enumerate(claim.values, start=1):
            stated, decimals = parse_number(match.group(g))
            result.checked.append((i, match.start(g), match.end(g)))
            half_unit = 0.5 * 10 ** -decimals
            slack = max(half_unit * (1 + 1e-9), abs(expected) * claim.rel)
            if not math.isfinite(expected) or abs(stated - expected) > slack:
                result.failures.append(Failure(i + 1, f"{name}:{i + 1}: states {match.group(g)}, computed "
                                                      f"{expected:.6g} — {claim.why}"))
    return result


class Lab:
    """The inputs a claim file computes from: the committed JSON, by name."""

    def __init__(self, root):
        self.root = Path(root)

    def json(self, name):
        return json.loads((self.root / "docs" / "plots" / name).read_text())


def load_claims(root, chapter):
    path = Path(__file__).resolve().parent / f"{chapter}.py"
    spec = importlib.util.spec_from_file_location(f"lesson_claims_{chapter}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.claims(Lab(root)), getattr(module, "WRONG_BEFORE", [])


def check(root, chapters):
    failures, total = 0, 0
    for chapter in chapters:
        claims, _ = load_claims(root, chapter)
        text = (Path(root) / CHAPTERS[chapter]).read_text()
        result = check_text(CHAPTERS[chapter], text, claims)
        total += len(result.checked)
        for f in result.failures:
            print(f.message)
        failures += len(result.failures)
        print(f"{chapter}: {len(result.checked)} numbers on {len(claims)} claims checked, "
              f"{len(result.failures)} wrong")
    return failures == 0 and total > 0


def mutate(number_text):
    stated, decimals = parse_number(number_text)
    wrong = stated * 1.3 + 2 * 10 ** -decimals
    return f"{wrong:.{decimals}f}"


def self_test(root, chapters):
    ok = True
    for chapter in chapters:
        claims, wrong_before = load_claims(root, chapter)
        name = CHAPTERS[chapter]
        text = (Path(root) / name).read_text()
        clean = check_text(name, text, claims)
        if clean.failures or not clean.checked:
            print(f"self-test: {name} must pass before it is mutated")
            return False
        lines = text.split("\n")
        caught = 0
        for i, start, end in clean.checked:
            changed = lines[:]
            changed[i] = lines[i][:start] + mutate(lines[i][start:end]) + lines[i][end:]
            result = check_text(name, "\n".join(changed), claims)
            if any(f.line == i + 1 for f in result.failures):
                caught += 1
            else:
                ok = False
                print(f"self-test: {name}:{i + 1}: {lines[i][start:end]} → {mutate(lines[i][start:end])} not caught")
        print(f"self-test {chapter}: {caught} of {len(clean.checked)} changed numbers caught")
        for right, wrong in wrong_before:
            if text.count(right) != 1:
                ok = False
                print(f"self-test: {name}: {right!r} is not in the lesson once")
                continue
            result = check_text(name, text.replace(right, wrong), claims)
            if result.failures:
                print(f"self-test {chapter}: the old figure {wrong!r} caught: {result.failures[0].message}")
            else:
                ok = False
                print(f"self-test: {name}: the old figure {wrong!r} passes the check")
    return ok


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    root = Path(args[0]) if args else Path(__file__).resolve().parents[2]
    chapters = list(CHAPTERS)
    if "--chapter" in argv:
        chapters = [argv[argv.index("--chapter") + 1]]
        root = Path(args[0]) if args and args[0] not in chapters else Path(__file__).resolve().parents[2]
    passed = self_test(root, chapters) if "--self-test" in argv else check(root, chapters)
    print("PASS" if passed else "FAIL")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
