# Chapter 08's graded exercises (exercises/08-real-model/), included by this folder's
# CMakeLists.txt (after ch08_paths is set): 8.1–8.3 on the CPU — the student's Q4_1 decoder, Q4_1 ×
# Q8_1 dot product and BPE merge loop against the lab's kernels/quant and runtime/tokenizer (on
# SmolLM2's vocabulary and rows too: the model installed by ./inferlab setup) —, 8.4's GEMV kernel
# on the sim backend, and the prediction questions; with the checks of student_check.h and
# predictions_check.h (shared with tests/wrong/wrong_ch08_exercises.cpp, wrong_ch08_gemv.cpp and
# wrong_predictions.cpp).
if(TARGET student_ch08)
  inferlab_add_test(test_ch08_student GRADED SOURCES test_student.cpp test_predictions.cpp LABELS "ch08;sim;student"
                    LIBS $<IF:$<TARGET_EXISTS:student_ch08_sim>,student_ch08_sim,student_ch08> inferlab::runtime)
  target_compile_definitions(test_ch08_student PRIVATE ${ch08_paths})
endif()
