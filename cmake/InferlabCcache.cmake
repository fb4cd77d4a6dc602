# ccache for every compile, when it is installed (tools/debian-packages.txt lists it; a build
# without it is the same build, uncached). A rebuild after `git pull`, a second build folder of
# the same sources, a clean CI clone on a machine that ran CI before, and the grader switching a
# build folder between student trees and back then cost a cache look-up per unchanged file.
#
# The launcher is `env CCACHE_…=… ccache`: these settings travel with the build, not ~/.ccache:
# - CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime: what ccache
#   needs to cache files compiled with a precompiled header (tests/CMakeLists.txt), whose .gch is
#   written moments before the files that use it.
# - CCACHE_BASEDIR=<source folder> and CCACHE_NOHASHDIR=1: paths under the source folder are
#   hashed relative to it, so two clones (CI's fresh clone each run) share the cache.
# INFERLAB_CCACHE=OFF (or a CMAKE_<LANG>_COMPILER_LAUNCHER of your own) compiles without it.
option(INFERLAB_CCACHE "Compile through ccache when it is installed" ON)
find_program(INFERLAB_CCACHE_PROGRAM ccache)
mark_as_advanced(INFERLAB_CCACHE_PROGRAM)
if(INFERLAB_CCACHE AND INFERLAB_CCACHE_PROGRAM AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(_inferlab_ccache env
      CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
      CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=1 ${INFERLAB_CCACHE_PROGRAM})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_inferlab_ccache})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${_inferlab_ccache})
  message(STATUS "InferLab: compiling through ccache (${INFERLAB_CCACHE_PROGRAM}; INFERLAB_CCACHE=OFF to not)")
elseif(INFERLAB_CCACHE AND NOT INFERLAB_CCACHE_PROGRAM)
  message(STATUS "InferLab: ccache not found, compiling without a cache (apt-get install ccache caches rebuilds)")
endif()
