#!/usr/bin/env python3
"""InferLab grader: builds a student tree, inspects it, runs its graded tests with student code
sandboxed, scores each chapter. The code is the package tools/grading/; see `--help`.

Run it through the launcher (`./inferlab grade ...`) or directly (`python3 tools/grade.py ...`).
"""

import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))

from grading.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
