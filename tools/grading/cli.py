"""The command line of `inferlab grade`: options, help, exit status."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from pathlib import Path

from .classroom import grade_class
from .contain import kill_all_live
from .lms import FORMATS, VISIBILITIES, write_autograder, write_error_results
from .model import GradeError
from .phases import grade

EPILOG = """\
what it does
  1. configures its own build folder (Ninja, Release, CPU + sim backends, no CUDA, no docs)
     with -DINFERLAB_STUDENT=<the student tree>: build/grade-exercises, build/grade-solutions,
     or build/grade-student, shared by every student copy (so grading a class recompiles only
     each student's own files; concurrent runs wait for each other); --build-dir picks another;
  2. for each chapter folder exercises/NN-slug/ (those of --chapters) builds the student's
     library student_chNN and the lab's libraries its graded program links, INSPECTS the
     student's (below), then links the chapter's graded test program test_chNN_student,
     SEPARATELY: a chapter that does not compile or link, or fails the inspection, scores 0
     (its first errors are shown) and the others are still graded;
  3. lists each program's tests (--gtest_list_tests) and runs every test in its own process
     (--gtest_filter), --jobs at a time, each with a --timeout, all with the same --seed.
     A test is
       passed           it ran to the end and GoogleTest recorded a pass
       not-implemented  it failed with "not implemented yet: <exercise>" (a stub)
       failed           any other failure (wrong values, an exception, student code that
                        crashed, exited or made a forbidden system call)
       crashed          the test program itself was killed by a signal
       timeout          still running after --timeout seconds (its process group is killed)
       skipped          GTEST_SKIP (counts as not passed)
  4. prints a per-chapter table and writes, into --out:
       grade.json      everything: seed, chapters, scores, each test's outcome, message, time,
                       and an excerpt of a failing test's output
       junit.xml       JUnit XML, one <testsuite> per chapter (for CI / LMS import)
       logs/           build-chNN.log per chapter and chNN/<test>.log per test (full output)
     A failing or crashed test's message is the emulator's first report when its output has
     one ("simt: memcheck: out-of-bounds write of 4 bytes at decode_attention.cu:71 ..."),
     else GoogleTest's first failure, led by the student's file, line and function
     ("softmax_row.cpp:10 student::softmax_row: ..."; tests/support/student_code.h). The excerpt (grade.json, junit.xml) is the output's first
     3 failure blocks, at most 4 KB; logs/ keeps the rest.

score
  chapter score = tests passed / graded tests of the chapter (each TEST is one unit);
  a chapter that does not compile, does not link or fails the inspection scores 0, and each of
  its graded tests (as this build folder last listed them) counts as failed in every total.
  overall = the mean of the chapter scores (each chapter weighs the same); a test is worth its
  chapter's 100/chapters points over the chapter's tests (the points in junit.xml and results.json).
  A failure an integrity guard caught (the inspection: a forbidden symbol, startup code, an
  include not offered; host access to device memory; a sandbox violation) is marked SUSPECTED
  INTEGRITY VIOLATION with its reason, in the table, grade.json, junit.xml and the gradebook.

a class (--class DIR)
  every subfolder of DIR is one student's copy of exercises/ (or a clone holding exercises/),
  graded one after another in one shared build folder (default build/grade-student) with one
  seed for the whole class (printed with the command that replays it); each student's reports go
  to OUT/<student>/ and the class's gradebook to OUT/gradebook.csv (OUT: --out, default
  grade/class-<DIR's name>/): student, each chapter's score (%), total (%), passed, tests, seed,
  integrity, notes. A folder that has no chapter folders is a row "not graded: ..." (and exit
  status 2), never a 0%; the other students are graded.

LMS output
  --format gradescope     also writes OUT/results.json as Gradescope's autograder reads it
                          (score, execution_time, tests: name, score, max_score, output, visibility)
  --format prairielearn   also writes OUT/results.json as PrairieLearn's external grader reads it
                          (gradable: false when no chapter builds, score in [0, 1], tests)
  --gradescope-autograder OUT.zip   writes Gradescope's autograder package (setup.sh,
                          run_autograder, the lab under inferlab/) and grades nothing

what the grader guarantees (docs: README "Grading")
  the verdict    student code runs only in sandboxed child processes of the test (fork +
                 seccomp: no file can be opened, no process started, no signal sent to
                 another process); the parent draws the inputs, computes the oracle, compares
                 and writes the report. A crash, hang or exit of student code fails its test.
  the inspection the student library may define names only in its student namespaces (plus
                 weak copies of templates from the headers it may include); it may not refer
                 to the reference kernels, the runtime, the chapters, the test support, the
                 oracle comparison, the cost counts, GoogleTest or MPI, strongly or weakly; it may
                 contain no code that runs before main or after it; and it may include only
                 its own files, the contract headers, system headers and what common/ offers
                 (check.h, tensor.h, huge_pages.h, half.h, cost.h, simt/).
  the data       every graded test draws fresh inputs from --seed (the environment's
                 INFERLAB_SEED is ignored); kernel tests check that a kernel was launched and,
                 where the exercise is about memory, the device-memory peak; host code that
                 reads or writes device memory outside a launch or a copy aborts with the
                 emulator's host-access report, as it would crash on a GPU (the environment's
                 SIMT_HOST_ACCESS is ignored).
  not covered    a student who computes the right answer by other means than the exercise
                 asks (a kernel launched for show beside a host loop over the *host* inputs)
                 is not detected; code copied from elsewhere is not detected.

containment
  each test runs in its own process group, with no core dumps, a --memory-limit address-space
  cap and its output capped (head and tail kept); when it times out, it and every process it
  started are killed as a group (SIGKILL).

exit status
  0  graded (whatever the score: a low grade is not an error)
  1  --expect-not-implemented / --expect-full-marks / --expect-zero was not met
  2  the grader itself could not run (bad folder, configure failed, the lab's own code
     does not build, ...), or --class: a student folder could not be graded (its row says why;
     the gradebook is written)

examples
  ./inferlab grade                              # a student grading their own exercises/
  ./inferlab grade --student ~/subs/alice --out ~/grades/alice
  ./inferlab grade --student ~/subs/alice --seed 1234   # the same data as an earlier run
  ./inferlab grade --student solutions --expect-full-marks
  ./inferlab grade --student exercises --expect-not-implemented   # what .ci/run checks
  ./inferlab grade --student solutions --chapters 10 --expect-full-marks   # one chapter only
  ./inferlab grade --class ~/subs --build-dir build/grade-class   # a class: ~/subs/<student>/
  ./inferlab grade --class ~/subs --seed 1234                    # the class's data again
  ./inferlab grade --student /grade/student --out /grade/results --format prairielearn
  ./inferlab grade --gradescope-autograder autograder.zip --visibility after_published
"""


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="inferlab grade",
        description="Grade a student tree: build and inspect each chapter's exercises, run the graded tests "
                    "with student code sandboxed, a per-test timeout and crash isolation, print a per-chapter "
                    "score table and write grade.json and junit.xml.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("student_pos", nargs="?", metavar="DIR", help="same as --student DIR")
    p.add_argument("--student", metavar="DIR",
                   help="the tree to grade: 'exercises' (default: this repo's exercises/, where a student "
                        "works), 'solutions' (the instructor's solutions) or a path to a student's copy of "
                        "exercises/")
    p.add_argument("--out", metavar="DIR",
                   help="where grade.json, junit.xml and logs/ go (default: grade/<name>/ at the repo root, "
                        "git-ignored; <name> is exercises, solutions, or the student folder's name plus a "
                        "hash of its absolute path)")
    p.add_argument("--build-dir", metavar="DIR",
                   help="the build folder to configure and build in (default: build/grade-exercises, "
                        "build/grade-solutions or build/grade-student); a new folder gets Release, CPU + sim, "
                        "no CUDA; an existing one keeps its settings and only switches the student tree, so "
                        "reusing a folder (a class, or a build of the lab) recompiles only the student files")
    p.add_argument("--seed", type=int, metavar="N",
                   help="the seed of every graded test's fresh data (default: a new one, printed and saved "
                        "in grade.json; give it again to replay a run)")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                   help="per-test time limit (default: 120: every kernel access is checked, see docs/pages/sanitizer.md)")
    p.add_argument("--build-timeout", type=float, default=900.0, metavar="SECONDS",
                   help="time limit of each build step (default: 900)")
    p.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), metavar="N",
                   help="parallel compile jobs and tests run at once (default: the number of CPUs)")
    p.add_argument("--memory-limit", type=int, default=4096, metavar="MIB",
                   help="address-space cap of each test process, MiB (default: 4096; 0: none)")
    p.add_argument("--chapters", metavar="NN[,NN...]",
                   help="grade only these chapters (comma-separated two-digit numbers, e.g. 09,10); the "
                        "others are left out of the table, the reports and the expectations (default: every "
                        "chapter folder of exercises/)")
    p.add_argument("--class", dest="class_dir", metavar="DIR",
                   help="grade a class: every subfolder of DIR is one student's copy of exercises/; one shared "
                        "build, one seed; writes OUT/gradebook.csv and OUT/<student>/ (see 'a class' below)")
    p.add_argument("--format", choices=FORMATS,
                   help="also write OUT/results.json for Gradescope's autograder or PrairieLearn's external grader")
    p.add_argument("--visibility", choices=VISIBILITIES, default="visible",
                   help="Gradescope: when students see the tests' results (default: visible)")
    p.add_argument("--gradescope-autograder", metavar="OUT.zip",
                   help="write Gradescope's autograder package (setup.sh, run_autograder, the lab) and exit; "
                        "--chapters, --timeout, --seed and --visibility are passed on to its grading")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--expect-not-implemented", action="store_true",
                   help="exit 1 unless every chapter compiles and every graded test fails with "
                        "'not implemented yet' (no pass, crash or timeout): the check that the stubs are sound")
    g.add_argument("--expect-full-marks", action="store_true",
                   help="exit 1 unless every chapter scores 100%% (the check that the solutions are)")
    g.add_argument("--expect-zero", metavar="CHAPTERS",
                   help="exit 1 unless each listed chapter (comma-separated numbers, e.g. 01,04) scores 0 "
                        "with no test passed: the check that a cheating submission is caught")
    args = p.parse_args(argv)
    if args.student_pos and args.student and args.student_pos != args.student:
        p.error("give the student tree once (DIR or --student DIR)")
    if args.class_dir and (args.student or args.student_pos):
        p.error("give a class (--class DIR) or one student (--student DIR), not both")
    if args.class_dir and (args.expect_not_implemented or args.expect_full_marks or args.expect_zero):
        p.error("--expect-* check one student tree; not with --class")
    args.student = args.student or args.student_pos or "exercises"
    if args.jobs < 1:
        p.error("--jobs must be at least 1")
    if args.timeout <= 0:
        p.error("--timeout must be positive")
    if args.seed is not None and not 0 <= args.seed < 2 ** 64:
        p.error("--seed must be an unsigned 64-bit integer")
    for option in ("expect_zero", "chapters"):
        value = getattr(args, option)
        if value is None:
            continue
        chapters = [c.strip() for c in value.split(",") if c.strip()]
        if not chapters or not all(c.isdigit() and len(c) == 2 for c in chapters):
            p.error(f"--{option.replace('_', '-')} {value}: give two-digit chapter numbers, e.g. 01,04")
        setattr(args, option, chapters)
    return args


def _terminate(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        if args.gradescope_autograder:
            zip_path = Path(args.gradescope_autograder).expanduser().resolve()
            scripts = write_autograder(zip_path, args)
            print(f"wrote {zip_path} ({', '.join(scripts)}, the lab under inferlab/): upload it as the "
                  "assignment's autograder (Gradescope: Configure Autograder → Zip file upload)")
            return 0
        return grade_class(args) if args.class_dir else grade(args)
    except GradeError as e:
        print(f"inferlab grade: {e}", file=sys.stderr)
        write_error_results(args, str(e))
        return 2
    except KeyboardInterrupt:
        print("inferlab grade: interrupted", file=sys.stderr)
        return 130
    finally:
        kill_all_live()
