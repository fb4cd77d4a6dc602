# Chapter 11's graded exercises (exercises/11-compute-roof/), included at the end of this folder's
# CMakeLists.txt: 11.1 repacking a Q8_0 matrix, against the lab's quant::PackedMatrix
# (kernels/quant/packed_matrix.h); 11.2 the micro-kernel, against chapter 08's scalar
# quant_matmul_cpu(); and the prediction questions — with the checks of student_check.h and
# predictions_check.h (shared with tests/wrong/wrong_ch11_exercises.cpp and wrong_predictions.cpp).
if(TARGET student_ch11)
  inferlab_add_test(test_ch11_student GRADED SOURCES test_student.cpp test_predictions.cpp LABELS "ch11;cpu;student"
                    LIBS student_ch11 inferlab::kernels)
endif()
