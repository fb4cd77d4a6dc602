# Chapter 09's graded exercises (exercises/09-serving/), included by this folder's CMakeLists.txt:
# 9.1–9.3 on the CPU — the student's stop-string filter, Prometheus histogram and admission control
# against the server's own (runtime/tokenizer/stop_strings.h, runtime/serving/prometheus.h,
# runtime/serving/admission.h) — and the prediction questions; with the checks of student_check.h and
# predictions_check.h (shared with tests/wrong/wrong_ch09_exercises.cpp and wrong_predictions.cpp).

# The server's histogram, exposition and admission control as a library of the lab (the server
# has them in inferlab::serving; this small copy keeps the graded link apart from Beast): the graded program and the wrong fixtures
# compare with it, and the grader's inspection forbids student code to refer to what it defines.
add_library(inferlab_ch09_reference STATIC ${PROJECT_SOURCE_DIR}/runtime/serving/prometheus.cpp
                                           ${PROJECT_SOURCE_DIR}/runtime/serving/admission.cpp)
target_include_directories(inferlab_ch09_reference PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(inferlab_ch09_reference PUBLIC inferlab::common)

if(TARGET student_ch09)
  inferlab_add_test(test_ch09_student GRADED SOURCES test_student.cpp test_predictions.cpp LABELS "ch09;cpu;student"
                    LIBS student_ch09 inferlab_ch09_reference inferlab::runtime)
endif()
