#!/usr/bin/env python3
"""Runs cuda-run on one sample .cu file and checks what the sample says must happen.

A sample states its expectations in comments (tests/simt/cuda_run/*.cu):

    // expect: exit 0                      (or: exit 2, exit nonzero)
    // expect: output contains TEXT          (TEXT || OTHER: either of them)
    // expect: output does not contain TEXT
    // expect: output names the line marked MARK         (FILE.cu:N, N = the line whose comment says MARK)
    // expect: output does not name the line marked MARK

usage: check_sample.py --config build/<preset>/tools/cuda-run/cuda_run.conf SAMPLE.cu [cuda-run options]
"""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def expectations(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    expected = [line.split("expect:", 1)[1].strip() for line in lines if re.match(r"\s*//\s*expect:", line)]

    def marked(mark):
        found = [n for n, line in enumerate(lines, 1)
                 if "expect:" not in line and re.search(r"(//|/\*).*\b" + re.escape(mark) + r"\b", line)]
        if len(found) != 1:
            raise SystemExit(f"{path}: marker {mark} is on {len(found)} lines (expected exactly one)")
        return found[0]

    return expected, marked


def main(argv):
    if len(argv) < 4 or argv[1] != "--config":
        print(__doc__, file=sys.stderr)
        return 2
    config, sample, extra = argv[2], argv[3], argv[4:]
    expected, marked = expectations(sample)
    if not expected:
        print(f"{sample}: no '// expect:' lines", file=sys.stderr)
        return 2
    command = [sys.executable, os.path.join(HERE, "cuda_run.py"), "--config", config] + extra + [sample]
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = result.stdout.decode(errors="replace")
    print(f"$ {' '.join(command)}\n{output}(exit status {result.returncode})\n")
    base = os.path.basename(sample)
    failures = []
    for expectation in expected:
        if expectation.startswith("exit "):
            want = expectation[5:].strip()
            ok = result.returncode != 0 if want == "nonzero" else result.returncode == int(want)
        elif expectation.startswith("output contains "):  # `A || B`: either (e.g. under a sanitizer preset)
            ok = any(text in output for text in expectation[len("output contains "):].split(" || "))
        elif expectation.startswith("output does not contain "):
            ok = expectation[len("output does not contain "):] not in output
        elif expectation.startswith("output names the line marked "):
            line = marked(expectation.rsplit(" ", 1)[1])
            ok = re.search(re.escape(base) + ":" + str(line) + r"(?!\d)", output) is not None
            expectation += f" ({base}:{line})"
        elif expectation.startswith("output does not name the line marked "):
            line = marked(expectation.rsplit(" ", 1)[1])
            ok = re.search(re.escape(base) + ":" + str(line) + r"(?!\d)", output) is None
            expectation += f" ({base}:{line})"
        else:
            raise SystemExit(f"{sample}: unknown expectation '{expectation}'")
        print(("ok      " if ok else "FAILED  ") + expectation)
        if not ok:
            failures.append(expectation)
    if failures:
        print(f"\n{len(failures)} of {len(expected)} expectations failed for {base}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
