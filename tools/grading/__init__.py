"""The InferLab grader (`./inferlab grade`): builds a student tree, inspects it, runs its graded
tests with student code sandboxed, and scores each chapter. Standard library only.

  model      outcomes, chapter states, records
  build      build folder, chapters, targets, build-log reading
  integrity  what a student library may define, run at load, refer to and include
  contain    running a command in its own process group with a timeout and capped output
  gtest      reading GoogleTest's list and report; the outcome of one run
  report     score table, grade.json, junit.xml, points, integrity marks, expectations
  lms        Gradescope's and PrairieLearn's results.json, the Gradescope autograder package
  phases     grade() in phases
  classroom  --class: every student of a folder, one build, one seed, gradebook.csv
  cli        options and main()
"""

from .build import *  # noqa: F401,F403  (tools/test_grade.py reaches every part through the package)
from .contain import *  # noqa: F401,F403
from .gtest import *  # noqa: F401,F403
from .model import *  # noqa: F401,F403
from .report import *  # noqa: F401,F403
from .integrity import Findings, inspect  # noqa: F401
from .phases import grade, run_test, select_chapters  # noqa: F401
from . import classroom, lms, phases  # noqa: F401
from .cli import main, parse_args  # noqa: F401
