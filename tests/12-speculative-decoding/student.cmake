# Chapter 12's graded exercises (exercises/12-speculative-decoding/), included at the end of this
# folder's CMakeLists.txt: 12.1 prompt lookup against the engine's propose_ngram(); 12.2 the rejection
# sampler against the engine's verify_rejection() draw for draw and by the distribution test; 12.3
# the rollback of a block table against BlockManager::truncate() — and the prediction questions —
# with the checks of student_check.h, distribution_check.h and predictions_check.h (shared with
# tests/wrong/wrong_ch12_exercises.cpp and wrong_predictions.cpp).
if(TARGET student_ch12)
  inferlab_add_test(test_ch12_student GRADED SOURCES test_student.cpp test_predictions.cpp LABELS "ch12;cpu;student"
                    LIBS student_ch12 inferlab::runtime)
endif()
