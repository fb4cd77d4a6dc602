#!/usr/bin/env python3
"""Unit tests of the grader's (tools/grading/) pure logic and its process containment. Builds nothing.

Run: python3 tools/test_grade.py   (ctest: the 'grade_tool' test, label 'tools')
"""

import json
import os
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
import grading as grade  # noqa: E402

LIST_OUTPUT = """\
Running main() from ./googletest/src/gtest_main.cc
Ch01Softmax.
  RandomRows
  ExtremeLogitsDoNotOverflow
Ch01Attention.
  OddShapes
Shapes/ParamTest.
  Runs/0  # GetParam() = 4
  Runs/1  # GetParam() = 8
"""

NOT_IMPL_OUTPUT = """\
[ RUN      ] Ch01Softmax.RandomRows
unknown file: Failure
C++ exception with description "not implemented yet: softmax_row" thrown in the test body.
[  FAILED  ] Ch01Softmax.RandomRows (0 ms)
"""

NESTED_NOT_IMPL_OUTPUT = """\
/work/main/tests/01-naive-cpu-attention/test_student.cpp:74: Failure
Value of: testing::attention_matches_oracle(student_multi_head, Precision::fp32, c)
  Actual: false (h2_kv2_L1_d64: threw not implemented yet: attention_single_head (seed 309559))
Expected: true
"""

WRONG_OUTPUT = """\
[ RUN      ] Ch01Cost.MatchesHandComputedValues
/work/main/tests/01-naive-cpu-attention/test_student.cpp:98: Failure
Expected equality of these values:
  c.flops
    Which is: 1073741824
  2147483648.0
[  FAILED  ] Ch01Cost.MatchesHandComputedValues (0 ms)
"""

# Captured output of graded tests whose student kernel tripped the emulator's checkers. A crash:
# memcheck's fault report, then the test program killed by SIGABRT.
SIMT_CRASH_OUTPUT = """\
Note: Google Test filter = Ch03Decode.OddShapes
[==========] Running 1 test from 1 test suite.
[ RUN      ] Ch03Decode.OddShapes
simt: memcheck: out-of-bounds write of 4 bytes at decode_attention.cu:71 (in inferlab::sim::decode_kernel)
  block (1,0,0), thread (13,0,0); 4 bytes past the end of a 1152-byte cudaMalloc allocation
malloc(): corrupted top size
"""

# A failure: the launch's sticky error, printed by the emulator and quoted by the check.
SIMT_FAILURE_OUTPUT = """\
[ RUN      ] Ch02BlockReduce.RandomRows
simt: racecheck: read of shared memory at block_reduce.cu:44 by thread (0,0,0) races with the write at block_reduce.cu:39 by thread (31,0,0) since the last barrier
  in kernel 'inferlab::sim::student::block_reduce_kernel' block (2,0,0)
/work/main/tests/02-gpu-prefill/test_student.cpp:120: Failure
Value of: testing::rows_match_oracle(student_block_reduce, c)
  Actual: false (rows 33 x 257: the student code threw std::runtime_error: CUDA error 719 (unspecified launch failure) at block_reduce.cu:60: simt: racecheck: read of shared memory at block_reduce.cu:44 by thread (0,0,0) races with the write at block_reduce.cu:39 by thread (31,0,0) since the last barrier (seed 77))
Expected: true
[  FAILED  ] Ch02BlockReduce.RandomRows (40 ms)
"""

# The report only inside an exception's description (nothing printed on stderr before it).
SIMT_QUOTED_OUTPUT = """\
[ RUN      ] Ch05Flash.Causal
unknown file: Failure
C++ exception with description "the student code threw std::runtime_error: simt: initcheck: read of shared memory nothing wrote at flash.cu:88 (in inferlab::sim::student::flash_kernel)" thrown in the test body.
[  FAILED  ] Ch05Flash.Causal (3 ms)
"""

# A crash without an emulator report: the signal stays the reason.
PLAIN_CRASH_OUTPUT = """\
[ RUN      ] Ch03Decode.OddShapes
malloc(): corrupted top size
"""


def failure_blocks_output(count):
    """A test whose check failed on `count` shapes: one GoogleTest failure block per shape."""
    blocks = "".join(f"/work/main/tests/01/test_student.cpp:{100 + i}: Failure\n"
                     f"Value of: matches(shape {i})\n  Actual: false (max abs error {i}.5 at row {i})\n"
                     "Expected: true\n" for i in range(count))
    return f"[ RUN      ] Ch01Attention.OddShapes\nseed 1234\n{blocks}[  FAILED  ] Ch01Attention.OddShapes (5 ms)\n"


def gtest_xml(suite, name, body="", result="completed", status="run"):
    return (f'<?xml version="1.0"?><testsuites><testsuite name="{suite}">'
            f'<testcase name="{name}" status="{status}" result="{result}">{body}</testcase>'
            f'</testsuite></testsuites>')


class ParseTests(unittest.TestCase):
    def test_list_tests(self):
        self.assertEqual(grade.parse_gtest_list(LIST_OUTPUT), [
            "Ch01Softmax.RandomRows", "Ch01Softmax.ExtremeLogitsDoNotOverflow", "Ch01Attention.OddShapes",
            "Shapes/ParamTest.Runs/0", "Shapes/ParamTest.Runs/1"])

    def test_list_tests_empty(self):
        self.assertEqual(grade.parse_gtest_list("Running main() from x.cc\n"), [])

    def test_xml_status(self):
        self.assertEqual(grade.parse_gtest_xml(gtest_xml("S", "T"), "S.T"), "passed")
        self.assertEqual(grade.parse_gtest_xml(gtest_xml("S", "T", '<failure message="x"/>'), "S.T"), "failed")
        self.assertEqual(grade.parse_gtest_xml(gtest_xml("S", "T", "<skipped/>", "skipped"), "S.T"), "skipped")
        self.assertEqual(grade.parse_gtest_xml(gtest_xml("S", "T", status="notrun"), "S.T"), "not-run")
        self.assertEqual(grade.parse_gtest_xml(gtest_xml("S", "Other"), "S.T"), "not-run")
        self.assertEqual(grade.parse_gtest_xml(None, "S.T"), "missing")
        self.assertEqual(grade.parse_gtest_xml("<testsuites><trunc", "S.T"), "missing")


class ClassifyTests(unittest.TestCase):
    def test_passed(self):
        self.assertEqual(grade.classify(0, False, "[  PASSED  ] 1 test.", "passed"), (grade.PASSED, ""))

    def test_not_implemented(self):
        self.assertEqual(grade.classify(1, False, NOT_IMPL_OUTPUT, "failed"),
                         (grade.NOT_IMPL, "not implemented yet: softmax_row"))
        self.assertEqual(grade.classify(1, False, NESTED_NOT_IMPL_OUTPUT, "failed"),
                         (grade.NOT_IMPL, "not implemented yet: attention_single_head"))

    def test_failed_with_message(self):
        outcome, message = grade.classify(1, False, WRONG_OUTPUT, "failed")
        self.assertEqual(outcome, grade.FAILED)
        self.assertIn("Expected equality", message)
        self.assertIn("1073741824", message)

    def test_failure_at_the_students_code_leads_with_it(self):
        # tests/support/student_code.h prints a graded failure at the student's definition first.
        output = ("[ RUN      ] Ch01Softmax.ExtremeLogitsDoNotOverflow\n"
                  "/home/s/tree/01-naive-cpu-attention/softmax_row.cpp:10: Failure\n"
                  "in student::softmax_row (the check: tests/01-naive-cpu-attention/test_student.cpp:71)\n"
                  "Value of: c.ok\n  Actual: false\nExpected: true\n"
                  "row of 3: DOES NOT MATCH the float64 oracle: 2 of 3 outputs are NaN\n"
                  "[  FAILED  ] Ch01Softmax.ExtremeLogitsDoNotOverflow (3 ms)\n")
        outcome, message = grade.classify(1, False, output, "failed")
        self.assertEqual(outcome, grade.FAILED)
        self.assertEqual(message, "softmax_row.cpp:10 student::softmax_row: row of 3: DOES NOT MATCH the float64 "
                                  "oracle: 2 of 3 outputs are NaN")
        self.assertNotIn("the check", message)

    def test_crash_beats_not_implemented(self):
        self.assertEqual(grade.classify(-11, False, NOT_IMPL_OUTPUT, "missing"),
                         (grade.CRASHED, "killed by SIGSEGV"))
        self.assertEqual(grade.classify(-6, False, "", "missing")[0], grade.CRASHED)

    def test_timeout(self):
        outcome, message = grade.classify(None, True, NOT_IMPL_OUTPUT, "missing", 30)
        self.assertEqual(outcome, grade.TIMEOUT)
        self.assertIn("30 s", message)

    def test_exit_zero_without_report_is_not_a_pass(self):
        outcome, message = grade.classify(0, False, "[  PASSED  ] 1 test.", "missing")
        self.assertEqual(outcome, grade.FAILED)
        self.assertIn("exited before the test finished", message)

    def test_skipped(self):
        self.assertEqual(grade.classify(0, False, "", "skipped")[0], grade.SKIPPED)


class EmulatorReportTests(unittest.TestCase):
    """A failing test's reason quotes the emulator's first report, on one line."""

    def test_crash_names_the_checker_and_line(self):
        outcome, message = grade.classify(-6, False, SIMT_CRASH_OUTPUT, "missing")
        self.assertEqual(outcome, grade.CRASHED)
        self.assertEqual(message, "simt: memcheck: out-of-bounds write of 4 bytes at decode_attention.cu:71 "
                                  "(in inferlab::sim::decode_kernel) (killed by SIGABRT)")

    def test_failure_names_the_checker_and_line(self):
        outcome, message = grade.classify(1, False, SIMT_FAILURE_OUTPUT, "failed")
        self.assertEqual(outcome, grade.FAILED)
        self.assertTrue(message.startswith("simt: racecheck: read of shared memory at block_reduce.cu:44"), message)
        self.assertNotIn("\n", message)
        self.assertNotIn("in kernel", message)  # the report's first line only
        # The same when GoogleTest recorded the failure and the program still exited 0.
        self.assertEqual(grade.classify(0, False, SIMT_FAILURE_OUTPUT, "failed"), (outcome, message))

    def test_a_report_quoted_in_an_exception(self):
        outcome, message = grade.classify(1, False, SIMT_QUOTED_OUTPUT, "failed")
        self.assertEqual((outcome, message), (grade.FAILED, "simt: initcheck: read of shared memory nothing wrote "
                                                            "at flash.cu:88 (in inferlab::sim::student::flash_kernel)"))

    def test_without_a_report_the_old_reasons_stay(self):
        self.assertEqual(grade.classify(-6, False, PLAIN_CRASH_OUTPUT, "missing"), (grade.CRASHED, "killed by SIGABRT"))
        outcome, message = grade.classify(1, False, WRONG_OUTPUT, "failed")
        self.assertEqual(outcome, grade.FAILED)
        self.assertIn("Expected equality", message)
        self.assertEqual(grade.emulator_report(WRONG_OUTPUT + "libsimt: not a report\n"), "")

    def test_not_implemented_and_timeout_are_not_overridden(self):
        self.assertEqual(grade.classify(1, False, NOT_IMPL_OUTPUT, "failed")[0], grade.NOT_IMPL)
        self.assertEqual(grade.classify(None, True, SIMT_CRASH_OUTPUT, "missing", 30)[0], grade.TIMEOUT)

    def test_a_long_report_keeps_its_line_on_one_line(self):
        kernel = "inferlab::sim::student::decode_kernel<" + ", ".join(["std::vector<float, std::allocator<float>>"] * 12) + ">"
        output = f"simt: memcheck: out-of-bounds read of 8 bytes at decode_attention.cu:71 (in {kernel})\n  block (0,0,0)\n"
        message = grade.classify(1, False, output, "failed")[1]
        self.assertLessEqual(len(message), 300)
        self.assertEqual(message, "simt: memcheck: out-of-bounds read of 8 bytes at decode_attention.cu:71 "
                                  "(in inferlab::sim::student::decode_kernel<…>)")
        crash = grade.classify(-11, False, "simt: " + "x" * 1000 + "\n", "missing")[1]
        self.assertLessEqual(len(crash), 300)
        self.assertTrue(crash.endswith("… (killed by SIGSEGV)"), crash)


class OutputExcerptTests(unittest.TestCase):
    """What grade.json and junit.xml show of a test's output: a few failure blocks, a few KB."""

    def test_the_first_failure_blocks_and_a_count_of_the_rest(self):
        excerpt = grade.output_excerpt(failure_blocks_output(10))
        self.assertIn("seed 1234", excerpt)
        for i in range(3):
            self.assertIn(f"test_student.cpp:{100 + i}: Failure", excerpt)
        self.assertNotIn("test_student.cpp:103", excerpt)
        self.assertIn("7 more failure block(s) left out", excerpt)
        self.assertNotIn("[ RUN      ]", excerpt)  # GoogleTest's own lines
        self.assertNotIn("[  FAILED  ]", excerpt)

    def test_a_short_output_is_kept_whole(self):
        excerpt = grade.output_excerpt(failure_blocks_output(2))
        self.assertIn("test_student.cpp:101: Failure", excerpt)
        self.assertNotIn("left out", excerpt)
        self.assertIn("simt: memcheck: out-of-bounds write", grade.output_excerpt(SIMT_CRASH_OUTPUT))
        self.assertIn("malloc(): corrupted top size", grade.output_excerpt(SIMT_CRASH_OUTPUT))

    def test_capped_in_characters(self):
        huge_block = "/x/test.cpp:1: Failure\n" + "element 12 differs\n" * 5000
        excerpt = grade.output_excerpt(huge_block)
        self.assertLess(len(excerpt), 4096 + 200)
        self.assertTrue(excerpt.startswith("/x/test.cpp:1: Failure"))
        self.assertIn("characters left out by the grader", excerpt)
        # No failure block at all (a crash's noise): its head and its tail.
        noise = "start\n" + "noise\n" * 5000 + "the end\n"
        excerpt = grade.output_excerpt(noise)
        self.assertLess(len(excerpt), 4096 + 200)
        self.assertTrue(excerpt.startswith("start") and excerpt.endswith("the end"), excerpt[-40:])

    def test_reports_carry_the_excerpt(self):
        ch = grade.Chapter("01", "x")
        ch.tests = [grade.TestResult("Ch01Attention.OddShapes", grade.FAILED, "m", 0.1, failure_blocks_output(50))]
        test = grade.grade_json([ch], {})["chapters"][0]["tests"][0]
        self.assertEqual(test["output_excerpt"], grade.output_excerpt(failure_blocks_output(50)))
        self.assertLess(len(test["output_excerpt"]), 4096 + 200)
        failure = ET.fromstring(grade.junit_xml([ch])).find("testsuite/testcase/failure")
        self.assertIn("47 more failure block(s) left out", failure.text)


class BuildLogTests(unittest.TestCase):
    LOG = """\
[1/3] Building CXX object exercises/CMakeFiles/student_ch01.dir/x/count.cpp.o
FAILED: exercises/CMakeFiles/student_ch01.dir/x/softmax_row.cpp.o
/usr/bin/c++ -I/work/main/exercises -O3 -c /x/softmax_row.cpp
/x/softmax_row.cpp: In function 'void inferlab::student::softmax_row(std::span<float>)':
/x/softmax_row.cpp:11:38: error: expected ';' before 'int'
   11 |   throw NotImplemented("softmax_row")  int x = ;
[2/3] Building CXX object common/CMakeFiles/inferlab_common.dir/npy.cpp.o
ninja: build stopped: subcommand failed.
"""

    def test_first_errors_skip_command_and_progress(self):
        errors = grade.first_errors(self.LOG)
        self.assertTrue(errors.startswith("/x/softmax_row.cpp: In function"), errors)
        self.assertIn("error: expected ';'", errors)
        self.assertNotIn("/usr/bin/c++", errors)
        self.assertNotIn("[2/3]", errors)
        self.assertNotIn("ninja:", errors)

    def test_blame(self):
        self.assertEqual(grade.failed_outputs(self.LOG), ["exercises/CMakeFiles/student_ch01.dir/x/softmax_row.cpp.o"])
        self.assertTrue(grade.blames_student(grade.failed_outputs(self.LOG), "01"))
        self.assertTrue(grade.blames_student(["tests/01-naive-cpu-attention/test_ch01_student"], "01"))
        self.assertFalse(grade.blames_student(["kernels/CMakeFiles/inferlab_kernels.dir/a.cpp.o"], "01"))
        self.assertFalse(grade.blames_student(["exercises/CMakeFiles/student_ch02.dir/a.cpp.o"], "01"))


def sample_chapters():
    ok = grade.Chapter("01", "naive-cpu-attention")
    ok.tests = [grade.TestResult("Ch01Softmax.RandomRows", grade.PASSED, "", 0.01),
                grade.TestResult("Ch01Softmax.Extreme", grade.NOT_IMPL, "not implemented yet: softmax_row", 0.01,
                                 "C++ exception \x1b[31m\x00 & <bad>"),
                grade.TestResult("Ch01Attention.OddShapes", grade.CRASHED, "killed by SIGSEGV", 0.2, "boom"),
                grade.TestResult("Ch01Cost.Hand", grade.TIMEOUT, "timed out after 30 s", 30.0, "")]
    broken = grade.Chapter("02", "tiled")
    broken.status = grade.NO_COMPILE
    broken.build_errors = "a.cpp:1:1: error: expected ';'"
    later = grade.Chapter("03", "not-yet")
    later.status = grade.NO_TESTS
    return [ok, broken, later]


class ReportTests(unittest.TestCase):
    def test_scores(self):
        chapters = sample_chapters()
        self.assertEqual(chapters[0].score, 25.0)
        self.assertEqual(chapters[1].score, 0.0)
        self.assertFalse(chapters[2].counted)
        self.assertEqual(grade.overall_score(chapters), 12.5)  # mean of 25 and 0; ch03 not counted

    def test_notes_and_table(self):
        chapters = sample_chapters()
        self.assertEqual(grade.chapter_note(chapters[0]), "1 not implemented, 1 crashed, 1 timed out")
        self.assertEqual(grade.chapter_note(chapters[1]), "did not compile")
        table = grade.score_table(chapters)
        self.assertIn("01-naive-cpu-attention", table)
        self.assertIn("1/4", table)
        self.assertIn("25%", table)
        self.assertIn("did not compile", table)
        self.assertIn("overall", table)

    def test_json(self):
        data = grade.grade_json(sample_chapters(), {"tool": "inferlab grade"})
        data = json.loads(json.dumps(data))  # serialisable
        self.assertEqual(data["score_percent"], 12.5)
        ch1, ch2, _ = data["chapters"]
        self.assertEqual((ch1["chapter"], ch1["passed"], ch1["total"]), ("ch01", 1, 4))
        self.assertEqual(ch1["counts"]["crashed"], 1)
        self.assertEqual(ch1["tests"][1]["outcome"], "not-implemented")
        self.assertNotIn("output_excerpt", ch1["tests"][0])  # passed
        self.assertEqual(ch1["tests"][2]["output_excerpt"], "boom")
        self.assertEqual(ch2["status"], "did-not-compile")
        self.assertIn("expected ';'", ch2["build_errors"])

    def test_junit(self):
        root = ET.fromstring(grade.junit_xml(sample_chapters()))  # well-formed despite \x00 and \x1b
        suites = root.findall("testsuite")
        self.assertEqual([s.get("name") for s in suites], ["ch01-naive-cpu-attention", "ch02-tiled", "ch03-not-yet"])
        ch1, ch2, ch3 = suites
        self.assertEqual((ch1.get("tests"), ch1.get("failures"), ch1.get("errors")), ("4", "1", "2"))
        cases = ch1.findall("testcase")
        self.assertEqual(cases[0].get("classname"), "ch01.Ch01Softmax")
        self.assertEqual(cases[1].find("failure").get("type"), "not-implemented")
        self.assertIn("<bad>", cases[1].find("failure").text)
        self.assertEqual(cases[2].find("error").get("type"), "crashed")
        self.assertEqual((ch2.get("tests"), ch2.get("errors")), ("1", "1"))
        self.assertEqual(ch2.find("testcase/error").get("type"), "did-not-compile")
        self.assertEqual(ch3.get("tests"), "0")
        self.assertEqual(root.get("tests"), "5")

    def test_expectations(self):
        chapters = sample_chapters()
        self.assertTrue(grade.check_expectations(chapters, True, False))
        self.assertTrue(grade.check_expectations(chapters, False, True))
        stubs = grade.Chapter("01", "x")
        stubs.tests = [grade.TestResult("A.B", grade.NOT_IMPL), grade.TestResult("A.C", grade.NOT_IMPL)]
        self.assertEqual(grade.check_expectations([stubs], True, False), [])
        self.assertTrue(grade.check_expectations([stubs], False, True))
        stubs.tests.append(grade.TestResult("A.D", grade.CRASHED, "killed by SIGSEGV"))
        self.assertEqual(len(grade.check_expectations([stubs], True, False)), 1)
        full = grade.Chapter("01", "x")
        full.tests = [grade.TestResult("A.B", grade.PASSED)]
        self.assertEqual(grade.check_expectations([full], False, True), [])
        self.assertTrue(grade.check_expectations([grade.Chapter("01", "x")], False, True))  # no tests found



class IntegrityTests(unittest.TestCase):
    """What a student library may define and include (tools/grading/integrity.py)."""

    offered = {"inferlab", "require", "Tensor", "dim", "sim", "DeviceBuffer", "check_cuda", "blockIdx"}

    def problem(self, kind, name):
        from grading import integrity
        return integrity.export_problem(kind, name, self.offered)

    def test_student_namespaces_may_define_anything(self):
        self.assertIsNone(self.problem("T", "inferlab::student::softmax_row(std::span<float, 18446744073709551615ul>)"))
        self.assertIsNone(self.problem("T", "inferlab::sim::student::decode_attention(float const*, int)"))

    def test_a_strong_definition_outside_is_rejected(self):
        self.assertIsNotNone(self.problem("T", "inferlab::compare_to_oracle(std::span<float const>, double)"))
        self.assertIsNotNone(self.problem("T", "write"))
        self.assertIsNotNone(self.problem("T", "main"))
        self.assertIsNotNone(self.problem("D", "inferlab::some_table"))

    def test_weak_copies_of_offered_templates_are_allowed(self):
        self.assertIsNone(self.problem("W", "void inferlab::require<int>(bool, std::basic_string_view<char>, int const&)"))
        self.assertIsNone(self.problem("W", "inferlab::Tensor<float>::dim(int) const"))
        self.assertIsNone(self.problem("W", "std::__cxx11::to_string(int)"))
        self.assertIsNone(self.problem("u", "blockIdx"))
        self.assertIsNone(self.problem("V", "DW.ref.__gxx_personality_v0"))

    def test_type_information_of_student_types_is_allowed(self):
        # A kernel taking a pointer to a student struct (chapter 08's BlockQ8_0): the emulator's launch
        # records its argument types, so the object holds weak type information for the pointer type.
        self.assertIsNone(self.problem("V", "typeinfo for inferlab::student::BlockQ8_0 const*"))
        self.assertIsNone(self.problem("V", "typeinfo name for inferlab::student::BlockQ8_0 const*"))
        self.assertIsNone(self.problem("V", "typeinfo for inferlab::sim::student::Row*"))
        self.assertIsNone(self.problem("V", "typeinfo for inferlab::student::BlockQ4_1 const&"))
        # … but not that of a lab type, however it is spelled.
        self.assertIsNotNone(self.problem("V", "typeinfo for inferlab::quant::BlockQ8_0 const*"))
        self.assertIsNotNone(self.problem("V", "typeinfo for inferlab::quant::BlockQ8_0*"))
        self.assertIsNotNone(self.problem("T", "inferlab::quant::dequantize_row_q4_1(std::span<inferlab::quant::BlockQ4_1 "
                                               "const, 18446744073709551615ul>, std::span<float, 18446744073709551615ul>)"))

    def test_a_weak_definition_of_a_lab_name_is_rejected(self):
        # An inline redefinition of the comparison the parent uses would shadow the lab's copy.
        self.assertIsNotNone(self.problem("W", "inferlab::compare_to_oracle(std::span<float const>, double)"))
        self.assertIsNotNone(self.problem("W", "inferlab::testing::attention_matches_oracle()"))
        self.assertIsNotNone(self.problem("i", "inferlab::student::dispatch()"))

    def test_includes_outside_the_offered_set_are_named(self):
        from grading import integrity
        root = integrity.ROOT
        student = root / "solutions"
        build = root / "build" / "x"
        ok = [student / "01-naive-cpu-attention" / "helpers.h", root / "exercises" / "01-naive-cpu-attention" / "ch01.h",
              root / "common" / "tensor.h", root / "common" / "simt" / "simt.h", Path("/usr/include/c++/12/vector"),
              build / "generated" / "common" / "config.h"]
        for header in ok:
            self.assertIsNone(integrity.include_problem(header, student, build), header)
        bad = [root / "kernels" / "attention" / "softmax_warp.cuh", root / "tests" / "support" / "attention_check.h",
               root / "common" / "compare.h", root / "runtime" / "engine" / "step_planner.h",
               root / "exercises" / "01-naive-cpu-attention" / "softmax_row.cpp"]
        for header in bad:
            self.assertIsNotNone(integrity.include_problem(header, student, build), header)
        # A student working in this repo's exercises/ includes their own files there.
        exercises = root / "exercises"
        self.assertIsNone(integrity.include_problem(exercises / "01-naive-cpu-attention" / "softmax_row.cpp", exercises, build))

    def test_chapter_08_is_graded_and_its_contract_alone_is_offered(self):
        # exercises/08-real-model/ is a chapter the grader finds; its contract headers may be included,
        # the block formats, quantized matmul and tokenizer it is graded against may not.
        from grading import integrity
        self.assertIn(("08", "real-model"), [(c.number, c.slug) for c in grade.discover_chapters()])
        root = integrity.ROOT
        student, build = root / "solutions", root / "build" / "x"
        for header in (root / "exercises" / "08-real-model" / "ch08.h", root / "exercises" / "08-real-model" / "predictions.h",
                       root / "common" / "half.h"):
            self.assertIsNone(integrity.include_problem(header, student, build), header)
        for header in (root / "kernels" / "quant" / "block_quant.h", root / "kernels" / "quant" / "quant_matmul.h",
                       root / "runtime" / "tokenizer" / "bpe_tokenizer.h", root / "tests" / "08-real-model" / "student_check.h",
                       root / "exercises" / "08-real-model" / "gemv_q8_0.cu"):
            self.assertIsNotNone(integrity.include_problem(header, student, build), header)
        self.assertTrue(grade.blames_student(["exercises/CMakeFiles/student_ch08_sim.dir/x/gemv_q8_0.cu.o"], "08"))
        self.assertTrue(grade.blames_student(["tests/08-real-model/test_ch08_student"], "08"))
        self.assertFalse(grade.blames_student(["tests/08-real-model/CMakeFiles/test_ch08_gguf.dir/a.cpp.o"], "08"))

    def test_chapter_09_is_graded_and_its_contract_alone_is_offered(self):
        # exercises/09-serving/ is a chapter the grader finds; its contract headers may be included,
        # the server's stop strings, histogram and admission control it is graded against may not.
        from grading import integrity
        self.assertIn(("09", "serving"), [(c.number, c.slug) for c in grade.discover_chapters()])
        root = integrity.ROOT
        student, build = root / "solutions", root / "build" / "x"
        for header in (root / "exercises" / "09-serving" / "ch09.h", root / "exercises" / "09-serving" / "predictions.h",
                       root / "common" / "check.h"):
            self.assertIsNone(integrity.include_problem(header, student, build), header)
        for header in (root / "runtime" / "tokenizer" / "stop_strings.h", root / "tools" / "cli" / "prometheus.h",
                       root / "tools" / "cli" / "admission.h", root / "tests" / "09-serving" / "student_check.h",
                       root / "exercises" / "09-serving" / "admission.cpp"):
            self.assertIsNotNone(integrity.include_problem(header, student, build), header)
        self.assertTrue(grade.blames_student(["exercises/CMakeFiles/student_ch09.dir/09-serving/admission.cpp.o"], "09"))
        self.assertTrue(grade.blames_student(["tests/09-serving/test_ch09_student"], "09"))
        self.assertFalse(grade.blames_student(["tests/09-serving/CMakeFiles/inferlab_ch09_reference.dir/a.cpp.o"], "09"))

    def test_chapter_10_is_graded_and_its_contract_alone_is_offered(self):
        # exercises/10-parallelism/ is a chapter the grader finds; its contract headers may be included,
        # the lab's sharding, communicator and the thread world it is graded on may not.
        from grading import integrity
        self.assertIn(("10", "parallelism"), [(c.number, c.slug) for c in grade.discover_chapters()])
        root = integrity.ROOT
        student, build = root / "solutions", root / "build" / "x"
        for header in (root / "exercises" / "10-parallelism" / "ch10.h",
                       root / "exercises" / "10-parallelism" / "predictions.h", Path("/usr/include/x86_64-linux-gnu/mpi/mpi.h")):
            self.assertIsNone(integrity.include_problem(header, student, build), header)
        for header in (root / "kernels" / "layers" / "weight.h", root / "runtime" / "parallel" / "tensor_parallel.h",
                       root / "runtime" / "parallel" / "communicator.h", root / "tests" / "10-parallelism" / "thread_world.h",
                       root / "exercises" / "10-parallelism" / "ring_all_reduce.cpp"):
            self.assertIsNotNone(integrity.include_problem(header, student, build), header)
        self.assertTrue(grade.blames_student(["exercises/CMakeFiles/student_ch10.dir/10-parallelism/shard.cpp.o"], "10"))
        self.assertTrue(grade.blames_student(["tests/10-parallelism/test_ch10_student"], "10"))
        self.assertFalse(grade.blames_student(["tests/10-parallelism/CMakeFiles/test_ch10_ring_mpi.dir/a.cpp.o"], "10"))
        self.assertTrue(grade.declares_graded_test("10-parallelism", "test_ch10_student"))

    def test_chapter_11_is_graded_and_its_contract_alone_is_offered(self):
        # exercises/11-compute-roof/ is a chapter the grader finds; its contract headers may be included,
        # the lab's packed matrix and GEMM it is graded against may not.
        from grading import integrity
        self.assertIn(("11", "compute-roof"), [(c.number, c.slug) for c in grade.discover_chapters()])
        root = integrity.ROOT
        student, build = root / "solutions", root / "build" / "x"
        for header in (root / "exercises" / "11-compute-roof" / "ch11.h",
                       root / "exercises" / "11-compute-roof" / "predictions.h"):
            self.assertIsNone(integrity.include_problem(header, student, build), header)
        for header in (root / "kernels" / "quant" / "packed_matrix.h", root / "kernels" / "quant" / "packed_matmul.h",
                       root / "kernels" / "quant" / "quant_matmul.h", root / "exercises" / "11-compute-roof" / "repack.cpp"):
            self.assertIsNotNone(integrity.include_problem(header, student, build), header)
        self.assertTrue(grade.blames_student(["exercises/CMakeFiles/student_ch11.dir/11-compute-roof/repack.cpp.o"], "11"))
        self.assertTrue(grade.declares_graded_test("11-compute-roof", "test_ch11_student"))

    def test_chapter_12_is_graded_and_its_contract_alone_is_offered(self):
        # exercises/12-speculative-decoding/ is a chapter the grader finds; its contract headers may be
        # included, the engine's speculative decisions and block manager it is graded against may not.
        from grading import integrity
        self.assertIn(("12", "speculative-decoding"), [(c.number, c.slug) for c in grade.discover_chapters()])
        root = integrity.ROOT
        student, build = root / "solutions", root / "build" / "x"
        for header in (root / "exercises" / "12-speculative-decoding" / "ch12.h",
                       root / "exercises" / "12-speculative-decoding" / "predictions.h"):
            self.assertIsNone(integrity.include_problem(header, student, build), header)
        for header in (root / "runtime" / "engine" / "speculative.h", root / "runtime" / "engine" / "sampling.h",
                       root / "runtime" / "paged" / "block_manager.h",
                       root / "tests" / "12-speculative-decoding" / "distribution_check.h",
                       root / "exercises" / "12-speculative-decoding" / "rollback.cpp"):
            self.assertIsNotNone(integrity.include_problem(header, student, build), header)
        self.assertTrue(grade.blames_student(
            ["exercises/CMakeFiles/student_ch12.dir/12-speculative-decoding/verify_rejection.cpp.o"], "12"))
        self.assertTrue(grade.blames_student(["tests/12-speculative-decoding/test_ch12_student"], "12"))
        self.assertFalse(grade.blames_student(
            ["tests/12-speculative-decoding/CMakeFiles/test_ch12_speculative.dir/test_speculative.cpp.o"], "12"))
        self.assertTrue(grade.declares_graded_test("12-speculative-decoding", "test_ch12_student"))

    def test_mpi_is_a_forbidden_reference(self):
        # MPI's library is not under the build folder, so the references to it are named by their C
        # names: a ring all-reduce by MPI_Allreduce (MPI_FLOAT, MPI_SUM and MPI_COMM_WORLD are Open
        # MPI's ompi_* handles) is refused; a student name that merely contains "mpi" is not.
        from grading import integrity
        for name in ("MPI_Allreduce", "PMPI_Send", "ompi_mpi_comm_world", "ompi_mpi_float", "mca_pml_base_send"):
            self.assertTrue(integrity.FORBIDDEN_EXTERNAL.match(name), name)
        for name in ("_ZN8inferlab7student15ring_all_reduceERNS0_4LinkESt4spanIfLm18446744073709551615EE",
                     "memcpy", "impi_helper", "_ZN3mpi4sendEv"):
            self.assertIsNone(integrity.FORBIDDEN_EXTERNAL.match(name), name)

    def test_the_libraries_a_graded_program_links_are_built_before_the_inspection(self):
        # The inspection forbids what the lab's libraries define, so those the graded program links
        # are listed (from Ninja's graph) and built first: the student's own and system ones left out.
        import shutil
        if shutil.which("ninja") is None:
            self.skipTest("needs ninja")
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "build.ninja").write_text(
                "rule touch\n  command = touch $out\n"
                "build kernels/libinferlab_kernels.a: touch\n"
                "build tests/09-serving/libinferlab_ch09_reference.a: touch\n"
                "build exercises/libstudent_ch09.a: touch\n"
                "build tests/09-serving/test_ch09_student: touch tests/09-serving/main.cpp.o | "
                "kernels/libinferlab_kernels.a exercises/libstudent_ch09.a /usr/lib/libz.so "
                "tests/09-serving/libinferlab_ch09_reference.a || kernels/libinferlab_kernels.a\n"
                "build tests/09-serving/main.cpp.o: touch\n"
                "build test_ch09_student: phony tests/09-serving/test_ch09_student\n"
                "build student_ch09_tests: phony test_ch09_student\n")
            self.assertEqual(grade.lab_libraries(Path(tmp), "test_ch09_student"),
                             ["kernels/libinferlab_kernels.a", "tests/09-serving/libinferlab_ch09_reference.a"])
            self.assertEqual(grade.lab_libraries(Path(tmp), "no_such_target"), [])

    def test_chapters_restricts_the_run(self):
        chapters = [grade.Chapter("09", "serving"), grade.Chapter("10", "parallelism"), grade.Chapter("01", "x")]
        self.assertEqual(grade.select_chapters(chapters, None), chapters)
        self.assertEqual([c.number for c in grade.select_chapters(chapters, ["10", "01"])], ["10", "01"])
        with self.assertRaises(grade.GradeError) as caught:
            grade.select_chapters(chapters, ["11"])
        self.assertIn("no chapter 11", str(caught.exception))
        self.assertEqual(grade.parse_args(["--chapters", "09,10"]).chapters, ["09", "10"])
        self.assertIsNone(grade.parse_args([]).chapters)
        with self.assertRaises(SystemExit):
            grade.parse_args(["--chapters", "9"])

    def test_a_graded_program_declared_in_an_included_cmake_file_is_found(self):
        # Chapters 08 and 09 declare test_chNN_student in student.cmake (included by CMakeLists.txt):
        # a student tree without the chapter's sources is then "missing", not "no graded tests".
        self.assertTrue(grade.declares_graded_test("08-real-model", "test_ch08_student"))
        self.assertTrue(grade.declares_graded_test("09-serving", "test_ch09_student"))
        self.assertTrue(grade.declares_graded_test("01-naive-cpu-attention", "test_ch01_student"))
        self.assertFalse(grade.declares_graded_test("09-serving", "test_ch10_student"))
        self.assertTrue(grade.declares_graded_test("10-parallelism", "test_ch10_student"))
        self.assertFalse(grade.declares_graded_test("99-no-such-chapter", "test_ch99_student"))

    def test_the_instrumentation_constructor_is_the_only_startup_code_allowed(self):
        # The sim build compiles student kernels with -fsanitize=thread's calls, whose constructor
        # only jumps to __tsan_init; a student's own constructor (any priority) is still refused.
        import shutil
        import subprocess
        from grading import integrity
        if shutil.which("g++") is None or shutil.which("objdump") is None:
            self.skipTest("needs g++ and binutils")
        flags = ["-O2", "-c", "-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0"]
        sources = {
            "clean": "float load(const float* p) { return *p; }\n",
            "evil": "#include <cstdio>\n__attribute__((constructor(99))) static void evil() { std::puts(\"x\"); }\n"
                    "float load(const float* p) { return *p; }\n",
            "global": "#include <string>\nstd::string name = std::to_string(42);\n",
        }
        with tempfile.TemporaryDirectory() as tmp:
            found = {}
            for name, text in sources.items():
                source, obj, lib = Path(tmp) / f"{name}.cpp", Path(tmp) / f"{name}.o", Path(tmp) / f"lib{name}.a"
                source.write_text(text)
                subprocess.run(["g++", *flags, "-w", str(source), "-o", str(obj)], check=True)
                subprocess.run(["ar", "rcs", str(lib), str(obj)], check=True)
                found[name] = integrity.check_startup(lib)
        self.assertEqual(found["clean"], [])
        self.assertEqual(found["evil"], [".init_array.00099 in evil.o"])
        self.assertTrue(any(f.startswith(".init_array in global.o") for f in found["global"]), found["global"])

    def test_expect_zero_needs_a_built_chapter_with_no_pass(self):
        ch = grade.Chapter("04", "int8-kv-cache")
        ch.tests = [grade.TestResult("A.b", grade.FAILED), grade.TestResult("A.c", grade.PASSED)]
        self.assertTrue(grade.check_zero([ch], ["04"]))
        ch.tests[1].outcome = grade.FAILED
        self.assertEqual(grade.check_zero([ch], ["04"]), [])
        ch.status = grade.NO_COMPILE
        self.assertTrue(grade.check_zero([ch], ["04"]))
        ch.status = grade.FORBIDDEN
        self.assertEqual(grade.check_zero([ch], ["04"]), [])



# ---- a class, its gradebook, and what an LMS reads ----------------------------------------------


def student_chapters(kind):
    """Three chapters as a student of the given kind leaves them: 'full' (every test passes),
    'stubs' (every test not implemented), 'broken' (chapter 01 does not compile: its tests, as the
    build folder listed them, count as failed), 'cheat' (chapter 01 fails the inspection, chapter 02
    reads device memory from the host)."""
    names = {"01": ["A.a", "A.b", "A.c", "A.d"], "02": ["B.a", "B.b"], "03": ["C.a"]}
    slugs = {"01": "naive-cpu-attention", "02": "gpu-prefill", "03": "kv-cache-decode"}
    chapters = []
    for n in ("01", "02", "03"):
        ch = grade.Chapter(n, slugs[n])
        outcome = grade.PASSED if kind in ("full", "broken", "cheat") else grade.NOT_IMPL
        ch.tests = [grade.TestResult(t, outcome, "" if outcome == grade.PASSED else "not implemented yet: f", 0.1)
                    for t in names[n]]
        chapters.append(ch)
    if kind == "broken":
        ch = chapters[0]
        ch.status, ch.tests = grade.NO_COMPILE, []
        ch.build_errors = "attention_single_head.cpp:9:1: error: 'this' does not name a type"
        grade.fill_not_built(ch, names["01"])
    if kind == "cheat":
        ch = chapters[0]
        ch.status, ch.tests = grade.FORBIDDEN, []
        ch.build_errors = ("the student library refers to code it is graded against (reference kernels, ...):\n"
                           "  inferlab::attention_reference(...)")
        grade.fill_not_built(ch, names["01"])
        chapters[1].tests[0] = grade.TestResult(
            "B.a", grade.CRASHED, "simt: memcheck: host code reads device memory (killed by SIGABRT)", 0.1,
            "simt: memcheck: host code reads device memory at 0x7f00 (4 bytes)\n")
        chapters[1].tests[1] = grade.TestResult(
            "B.b", grade.FAILED, "the student code was killed by SIGSYS (a forbidden system call)", 0.1,
            "the student code was killed by SIGSYS (a forbidden system call) — run in a sandboxed child process\n")
    return chapters


class NotBuiltTests(unittest.TestCase):
    """A chapter that did not build counts every one of its tests as failed, everywhere."""

    def test_totals_count_the_tests_of_a_chapter_that_did_not_build(self):
        chapters = student_chapters("broken")
        ch1 = chapters[0]
        self.assertEqual((ch1.passed, ch1.total, ch1.score), (0, 4, 0.0))
        self.assertTrue(all(not t.ran and t.outcome == grade.FAILED for t in ch1.tests))
        self.assertIn("did not compile", ch1.tests[0].message)
        table = grade.score_table(chapters)
        self.assertIn("0/4", table)
        self.assertRegex(table, r"overall\s+3/7\s+67%")  # not 3/3 (100%): ch01's 4 tests failed
        data = grade.grade_json(chapters, {})
        self.assertEqual((data["passed"], data["total"]), (3, 7))
        self.assertEqual(data["chapters"][0]["total"], 4)
        self.assertFalse(data["chapters"][0]["tests"][0]["ran"])
        self.assertNotIn("output_excerpt", data["chapters"][0]["tests"][0])
        root = ET.fromstring(grade.junit_xml(chapters, "carol"))
        suite = root.find("testsuite")
        self.assertEqual((suite.get("tests"), suite.get("failures")), ("4", "4"))
        failure = suite.find("testcase/failure")
        self.assertEqual(failure.get("type"), grade.NO_COMPILE)
        self.assertIn("does not name a type", failure.text)  # the compiler's error, in each case
        self.assertEqual(root.get("tests"), "7")

    def test_tests_not_yet_known_are_one_build_case(self):
        ch = grade.Chapter("01", "x")
        ch.status = grade.NO_COMPILE
        grade.fill_not_built(ch, [])
        self.assertEqual(ch.tests, [])
        suite = ET.fromstring(grade.junit_xml([ch], "carol")).find("testsuite")
        self.assertEqual((suite.get("tests"), suite.get("errors")), ("1", "1"))
        self.assertEqual(suite.find("testcase").get("name"), "build")

    def test_the_build_folder_keeps_each_chapters_test_list(self):
        with tempfile.TemporaryDirectory() as tmp:
            build = Path(tmp)
            ch = grade.Chapter("01", "x")
            self.assertEqual(grade.phases.saved_test_list(build, ch), [])
            grade.phases.save_test_list(build, ch, ["A.a", "A.b/0"])
            self.assertEqual(grade.phases.saved_test_list(build, ch), ["A.a", "A.b/0"])
            run = grade.phases.GradeRun(None, build=build)
            broken, later, unknown = grade.Chapter("01", "x"), grade.Chapter("03", "y"), grade.Chapter("02", "z")
            broken.status = later.status = grade.NO_COMPILE
            later.status = grade.NO_TESTS
            unknown.status = grade.NO_LINK
            run.chapters = [broken, unknown, later]
            self.assertFalse(grade.phases.count_not_built(run))  # ch02's tests were never listed here
            self.assertEqual([t.name for t in broken.tests], ["A.a", "A.b/0"])
            self.assertEqual(later.tests, [])
            grade.phases.save_test_list(build, unknown, ["Z.a"])
            self.assertTrue(grade.phases.count_not_built(run))  # a later student's build listed them
            self.assertEqual([t.name for t in unknown.tests], ["Z.a"])

    def test_a_missing_chapter_folder_is_named(self):
        ch = grade.Chapter("05", "fused-attention")
        ch.status, ch.folder_missing = grade.MISSING, True
        self.assertEqual(grade.chapter_note(ch), "chapter folder 05-fused-attention/ missing")
        ch.folder_missing = False
        self.assertEqual(grade.chapter_note(ch), "no student sources")


class IntegrityMarkTests(unittest.TestCase):
    def test_guards_mark_a_suspected_violation_with_its_reason(self):
        chapters = student_chapters("cheat")
        ch1, ch2, ch3 = chapters
        self.assertTrue(grade.chapter_integrity_violation(ch1).startswith("the inspection: the student library refers"))
        self.assertIn("attention_reference", grade.chapter_integrity_violation(ch1))
        self.assertEqual(grade.test_integrity_violation(ch2.tests[0]), "host access to device memory")
        self.assertEqual(grade.test_integrity_violation(ch2.tests[1]), "sandbox violation: a forbidden system call")
        self.assertEqual(grade.chapter_integrity_violation(ch3), "")
        self.assertEqual(grade.test_integrity_violation(grade.TestResult("A.b", grade.FAILED, "wrong", 0, "x != y")), "")
        self.assertIn("SUSPECTED INTEGRITY VIOLATION: the inspection", grade.chapter_note(ch1))
        self.assertIn("SUSPECTED INTEGRITY VIOLATION: host access to device memory (B.a)", grade.score_table(chapters))
        data = grade.grade_json(chapters, {})
        self.assertEqual([v["chapter"] for v in data["suspected_integrity_violations"]], ["ch01", "ch02"])
        self.assertEqual(data["chapters"][1]["tests"][1]["suspected_integrity_violation"],
                         "sandbox violation: a forbidden system call")
        root = ET.fromstring(grade.junit_xml(chapters, "mallory"))
        s2 = root.findall("testsuite")[1]
        self.assertIn("host access", s2.find("properties/property[@name='suspected_integrity_violation']").get("value"))
        self.assertTrue(s2.find("testcase/error").get("message").startswith("SUSPECTED INTEGRITY VIOLATION"))


class JUnitPointsTests(unittest.TestCase):
    def test_junit_names_the_student_and_carries_points(self):
        chapters = student_chapters("broken")
        root = ET.fromstring(grade.junit_xml(chapters, "carol", 42))
        self.assertEqual(root.get("name"), "inferlab-grade carol")
        props = {p.get("name"): p.get("value") for p in root.findall("properties/property")}
        self.assertEqual((props["student"], props["seed"], props["score_percent"]), ("carol", "42", "66.67"))
        earned = total = 0.0
        for suite in root.findall("testsuite"):
            self.assertEqual(suite.get("hostname"), "carol")
            for case in suite.findall("testcase"):
                p = {q.get("name"): float(q.get("value")) for q in case.findall("properties/property")}
                earned += p["points"]
                total += p["max_points"]
        self.assertAlmostEqual(total, 100.0, places=2)
        self.assertAlmostEqual(earned, grade.overall_score(chapters), places=2)  # ch02 and ch03 in full


def check_gradescope_schema(test, data):
    """Gradescope's results.json, field by field (gradescope-autograders.readthedocs.io, specs):
    top level score (number), execution_time (integer seconds), optional output (string) and
    visibility/stdout_visibility (hidden|after_due_date|after_published|visible), tests (list);
    each test name (string), score and max_score (numbers), optional status (passed|failed),
    output (string), visibility."""
    visibilities = {"hidden", "after_due_date", "after_published", "visible"}
    allowed = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
               "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
    test.assertIsInstance(data, dict)
    test.assertLessEqual(set(data), allowed)
    test.assertIsInstance(data["score"], (int, float))
    test.assertNotIsInstance(data["score"], bool)
    test.assertIsInstance(data["execution_time"], int)
    test.assertIsInstance(data.get("output", ""), str)
    for key in ("visibility", "stdout_visibility"):
        if key in data:
            test.assertIn(data[key], visibilities)
    test.assertIsInstance(data["tests"], list)
    test_fields = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
                   "tags", "visibility", "extra_data"}
    for t in data["tests"]:
        test.assertLessEqual(set(t), test_fields)
        test.assertIsInstance(t["name"], str)
        test.assertIsInstance(t["score"], (int, float))
        test.assertIsInstance(t["max_score"], (int, float))
        test.assertLessEqual(t["score"], t["max_score"] + 1e-9)
        test.assertIn(t.get("status", "passed"), {"passed", "failed"})
        test.assertIsInstance(t["output"], str)
        test.assertIn(t["visibility"], visibilities)
    json.dumps(data)


def check_prairielearn_schema(test, data):
    """PrairieLearn's external grader results.json, field by field (prairielearn.readthedocs.io,
    externalGrading): gradable (bool), score (number in [0, 1]), optional message and output
    (strings), tests (list); each test name (string), points and max_points (numbers), optional
    description, message, output (strings)."""
    test.assertIsInstance(data, dict)
    test.assertLessEqual(set(data), {"gradable", "score", "format_errors", "message", "output", "images", "tests",
                                     "partial_scores"})
    test.assertIsInstance(data["gradable"], bool)
    test.assertIsInstance(data["score"], (int, float))
    test.assertNotIsInstance(data["score"], bool)
    test.assertTrue(0.0 <= data["score"] <= 1.0)
    for key in ("message", "output"):
        test.assertIsInstance(data.get(key, ""), str)
    test.assertIsInstance(data["tests"], list)
    for t in data["tests"]:
        test.assertLessEqual(set(t), {"name", "description", "points", "max_points", "message", "output", "images"})
        test.assertIsInstance(t["name"], str)
        test.assertIsInstance(t["points"], (int, float))
        test.assertIsInstance(t["max_points"], (int, float))
        test.assertTrue(0 <= t["points"] <= t["max_points"] + 1e-9)
        for key in ("description", "message", "output"):
            test.assertIsInstance(t.get(key, ""), str)
    json.dumps(data)


class LmsTests(unittest.TestCase):
    def test_gradescope_results(self):
        chapters = student_chapters("broken")
        data = grade.lms.gradescope_results(chapters, 12.6, "after_published", seed=7)
        check_gradescope_schema(self, data)
        self.assertEqual(data["execution_time"], 13)
        self.assertEqual(len(data["tests"]), 7)  # one per graded test, ch01's four failed
        self.assertAlmostEqual(data["score"], grade.overall_score(chapters), places=2)
        self.assertAlmostEqual(sum(t["max_score"] for t in data["tests"]), 100.0, places=2)
        self.assertEqual({t["visibility"] for t in data["tests"]}, {"after_published"})
        first = data["tests"][0]
        self.assertEqual((first["name"], first["score"], first["status"]), ("ch01 A.a", 0.0, "failed"))
        self.assertIn("does not name a type", first["output"])
        self.assertIn("seed 7", data["output"])
        stubs = grade.lms.gradescope_results(student_chapters("stubs"), 1.0)
        check_gradescope_schema(self, stubs)
        self.assertEqual(stubs["score"], 0.0)
        self.assertIn("not-implemented: not implemented yet", stubs["tests"][0]["output"])
        cheat = grade.lms.gradescope_results(student_chapters("cheat"), 1.0)
        check_gradescope_schema(self, cheat)
        self.assertTrue(cheat["tests"][0]["output"].startswith("SUSPECTED INTEGRITY VIOLATION: the inspection"))
        check_gradescope_schema(self, grade.lms.error_results("gradescope", "no chapter folders"))

    def test_prairielearn_results(self):
        data = grade.lms.prairielearn_results(student_chapters("broken"))
        check_prairielearn_schema(self, data)
        self.assertTrue(data["gradable"])
        self.assertAlmostEqual(data["score"], 2 / 3, places=4)
        self.assertEqual(len(data["tests"]), 7)
        full = grade.lms.prairielearn_results(student_chapters("full"))
        check_prairielearn_schema(self, full)
        self.assertEqual(full["score"], 1.0)
        nothing = student_chapters("stubs")
        for ch in nothing:
            ch.status, ch.tests = grade.NO_COMPILE, []
        none_built = grade.lms.prairielearn_results(nothing)
        check_prairielearn_schema(self, none_built)
        self.assertFalse(none_built["gradable"])  # nothing builds: not a 0
        self.assertEqual(len(none_built["tests"]), 3)  # tests unknown: one 'build' item per chapter
        check_prairielearn_schema(self, grade.lms.error_results("prairielearn", "no chapter folders"))
        self.assertFalse(grade.lms.error_results("prairielearn", "x")["gradable"])

    def test_gradescope_autograder_package(self):
        import zipfile
        args = grade.parse_args(["--gradescope-autograder", "x.zip", "--chapters", "01,02", "--visibility", "hidden"])
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "autograder.zip"
            self.assertEqual(grade.lms.write_autograder(path, args), ["setup.sh", "run_autograder"])
            with zipfile.ZipFile(path) as z:
                names = set(z.namelist())
                wanted = {"setup.sh", "run_autograder", "inferlab/inferlab", "inferlab/tools/grade.py",
                          "inferlab/tools/grading/lms.py", "inferlab/exercises/CMakeLists.txt"}
                self.assertEqual(wanted - names, set())
                self.assertFalse(any(n.startswith(("inferlab/build/", "inferlab/grade/")) for n in names))
                for script in ("setup.sh", "run_autograder"):
                    self.assertTrue((z.getinfo(script).external_attr >> 16) & 0o111, script)
                    self.assertTrue(z.read(script).startswith(b"#!/usr/bin/env bash\n"))
                run = z.read("run_autograder").decode()
                setup = z.read("setup.sh").decode()
        for expected in ("/autograder/submission", "--out /autograder/results", "--format gradescope",
                         "--visibility hidden", "--chapters 01,02", "--build-dir /autograder/build"):
            self.assertIn(expected, run)
        self.assertIn("./inferlab setup", setup)
        self.assertIn("--student solutions --build-dir /autograder/build", setup)


class ClassTests(unittest.TestCase):
    def test_gradebook_rows(self):
        students = [grade.classroom.StudentGrade("alice", student_chapters("full")),
                    grade.classroom.StudentGrade("bob", student_chapters("stubs")),
                    grade.classroom.StudentGrade("carol", student_chapters("broken")),
                    grade.classroom.StudentGrade("mallory", student_chapters("cheat")),
                    grade.classroom.StudentGrade("zed", error="not graded: /x/zed has no chapter folders")]
        rows = grade.classroom.gradebook_rows(students, 99)
        self.assertEqual(list(rows[0]), ["student", "ch01", "ch02", "ch03", "total", "passed", "tests", "seed",
                                         "integrity", "notes"])
        by = {r["student"]: r for r in rows}
        self.assertEqual([by["alice"][k] for k in ("ch01", "total", "passed", "tests", "seed")],
                         ["100.00", "100.00", "7", "7", "99"])
        self.assertEqual([by["bob"][k] for k in ("total", "passed", "tests")], ["0.00", "0", "7"])
        self.assertEqual([by["carol"][k] for k in ("ch01", "ch02", "total", "passed", "tests")],
                         ["0.00", "100.00", "66.67", "3", "7"])
        self.assertEqual(by["carol"]["notes"], "ch01: did not compile")
        self.assertEqual(by["alice"]["integrity"], "")
        self.assertIn("ch01: the inspection", by["mallory"]["integrity"])
        self.assertIn("ch02: host access to device memory", by["mallory"]["integrity"])
        self.assertEqual([by["zed"][k] for k in ("ch01", "total", "passed")], ["", "", ""])  # an error, not 0%
        self.assertIn("has no chapter folders", by["zed"]["notes"])
        text = grade.classroom.gradebook_csv(rows)
        import csv
        import io
        self.assertEqual(list(csv.DictReader(io.StringIO(text))), rows)
        table = grade.classroom.gradebook_table(rows)
        self.assertIn("SUSPECTED INTEGRITY VIOLATION ch01", table)

    def test_class_and_student_folders(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "alice" / "01-naive-cpu-attention").mkdir(parents=True)
            (root / "bob" / "exercises" / "01-naive-cpu-attention").mkdir(parents=True)  # a whole clone
            (root / "zed" / "notes").mkdir(parents=True)
            (root / ".git").mkdir()
            folders = grade.classroom.student_folders(root, root / "grades")
            self.assertEqual([f.name for f in folders], ["alice", "bob", "zed"])
            self.assertEqual(grade.classroom.student_tree(root / "bob"), root / "bob" / "exercises")
            self.assertEqual(grade.classroom.student_tree(root / "alice"), root / "alice")
            with self.assertRaisesRegex(grade.GradeError, "one student's tree, not a class"):
                grade.classroom.student_folders(root / "alice")
            with self.assertRaisesRegex(grade.GradeError, "no student folders"):
                grade.classroom.student_folders(root / "zed" / "notes")
            # --student on a folder with no chapter folders: an error (exit 2), not a 0%.
            for folder, hint in ((root / "zed", "not a copy of exercises/"), (root, "its folder alice has them — use --student")):
                args = grade.parse_args(["--student", str(folder), "--out", str(root / "out")])
                with self.assertRaisesRegex(grade.GradeError, hint):
                    grade.phases.prepare(args)

    def test_options_and_replay(self):
        args = grade.parse_args(["--class", "/subs", "--seed", "5", "--build-dir", "build/default"])
        self.assertEqual(grade.phases.replay_command(args, 5),
                         "./inferlab grade --class /subs --build-dir build/default --seed 5")
        args = grade.parse_args(["--student", "/subs/alice", "--chapters", "01"])
        self.assertEqual(grade.phases.replay_command(args, 9), "./inferlab grade --student /subs/alice --chapters 01 --seed 9")
        for bad in (["--class", "/subs", "--student", "x"], ["--class", "/subs", "--expect-full-marks"],
                    ["--format", "moodle"], ["--visibility", "sometimes"]):
            with self.assertRaises(SystemExit, msg=bad), open(os.devnull, "w") as devnull:
                stderr, sys.stderr = sys.stderr, devnull
                try:
                    grade.parse_args(bad)
                finally:
                    sys.stderr = stderr


class ContainmentTests(unittest.TestCase):
    def test_timeout_kills_the_process_group(self):
        # The child leaves a grandchild behind; both must die with the group.
        start = time.monotonic()
        r = grade.run_contained(["sh", "-c", "sleep 60 & echo started; sleep 60"], timeout_s=1.0)
        self.assertTrue(r.timed_out)
        self.assertLess(time.monotonic() - start, 10)
        self.assertIn("started", r.output)

    def test_crash_and_exit_status(self):
        r = grade.run_contained([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], 10)
        self.assertEqual(r.returncode, -11)
        self.assertEqual(grade.classify(r.returncode, r.timed_out, r.output, "missing")[0], grade.CRASHED)
        r = grade.run_contained(["sh", "-c", "echo not implemented yet: x; exit 1"], 10)
        self.assertEqual((r.returncode, r.timed_out), (1, False))

    def test_a_test_program_killed_after_an_emulator_report(self):
        # The grader's own path for one test (run_test): a program that prints memcheck's report
        # and dies of SIGABRT, as a test program does when the emulator aborts it.
        with tempfile.TemporaryDirectory() as tmp:
            program = Path(tmp) / "test_ch03_student"
            program.write_text(f"#!{sys.executable}\nimport os, sys\nsys.stdout.write({SIMT_CRASH_OUTPUT!r})\n"
                               "sys.stdout.flush()\nos.abort()\n")
            program.chmod(0o755)
            result = grade.run_test(program, "Ch03Decode.OddShapes", 10, dict(os.environ), 1)
        self.assertEqual(result.outcome, grade.CRASHED)
        self.assertTrue(result.message.startswith("simt: memcheck: out-of-bounds write of 4 bytes at "
                                                  "decode_attention.cu:71"), result.message)
        self.assertTrue(result.message.endswith("(killed by SIGABRT)"), result.message)

    def test_output_is_capped(self):
        r = grade.run_contained(["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a; echo END"], 10,
                                max_output=64 * 1024)
        self.assertEqual(r.returncode, 0)
        self.assertLess(len(r.output), 70 * 1024)
        self.assertIn("bytes of output dropped", r.output)
        self.assertTrue(r.output.rstrip().endswith("END"))


if __name__ == "__main__":
    unittest.main(verbosity=1)
