# Warnings, instruction set and sanitizers for the project's own targets.
add_library(inferlab_flags INTERFACE)
target_compile_options(inferlab_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>)
if(INFERLAB_NATIVE)
  target_compile_options(inferlab_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
endif()

if(INFERLAB_SANITIZE)
  # Whole-build sanitizers (global flags so that every object, tests included, is instrumented).
  set(_san "-fsanitize=${INFERLAB_SANITIZE} -fno-omit-frame-pointer")
  if(INFERLAB_SANITIZE MATCHES "undefined")
    string(APPEND _san " -fsanitize=bounds -fno-sanitize-recover=undefined")
  endif()
  string(APPEND CMAKE_CXX_FLAGS " ${_san}")
  string(APPEND CMAKE_EXE_LINKER_FLAGS " ${_san}")
  string(APPEND CMAKE_SHARED_LINKER_FLAGS " ${_san}")
endif()
