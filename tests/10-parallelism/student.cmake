# Chapter 10's graded exercises (exercises/10-parallelism/), included at the end of this folder's
# CMakeLists.txt (after inferlab_add_mpi_test is defined): 10.1 the column- and row-parallel shards
# of a weight matrix, against the lab's Weight::take_rows / take_columns (kernels/layers/weight.h);
# 10.2 a ring all-reduce on the contract's Link, run on ranks that are threads (thread_world.h);
# and the prediction questions — with the checks of student_check.h and predictions_check.h
# (shared with tests/wrong/wrong_ch10_exercises.cpp and wrong_predictions.cpp).
if(TARGET student_ch10)
  inferlab_add_test(test_ch10_student GRADED SOURCES test_student.cpp test_predictions.cpp LABELS "ch10;cpu;student"
                    LIBS student_ch10 inferlab::runtime)
endif()

# Not graded: the solution's ring (solutions/10-parallelism/ring_all_reduce.cpp, whatever tree is
# graded) on a Link over the lab's MPI communicator, under mpiexec -n 3, against
# Communicator::all_reduce_sum — the same exercise over real processes and MPI's own send/recv.
inferlab_add_mpi_test(test_ch10_ring_mpi SOURCES test_ring_mpi.cpp
                      ${PROJECT_SOURCE_DIR}/solutions/10-parallelism/ring_all_reduce.cpp
                      TESTS RingOverMpi.TheSolutionsRingEqualsTheCommunicatorsAllReduce
                      RANKS 3 LIBS inferlab_exercise_headers)
