# INFERLAB_STUDENT picks the tree that builds the student/... versions:
#   solutions (default) -> solutions/, exercises -> exercises/, anything else -> that folder
#   (a student's copy of exercises/). The contract headers always come from exercises/.
if(INFERLAB_STUDENT STREQUAL "solutions")
  set(INFERLAB_STUDENT_DIR ${PROJECT_SOURCE_DIR}/solutions)
elseif(INFERLAB_STUDENT STREQUAL "exercises")
  set(INFERLAB_STUDENT_DIR ${PROJECT_SOURCE_DIR}/exercises)
else()
  get_filename_component(INFERLAB_STUDENT_DIR "${INFERLAB_STUDENT}" ABSOLUTE)
endif()
if(NOT IS_DIRECTORY "${INFERLAB_STUDENT_DIR}")
  message(FATAL_ERROR "INFERLAB_STUDENT='${INFERLAB_STUDENT}' is not a folder "
                      "(use solutions, exercises or a path to a copy of exercises/)")
endif()
message(STATUS "InferLab student tree: ${INFERLAB_STUDENT_DIR}")
