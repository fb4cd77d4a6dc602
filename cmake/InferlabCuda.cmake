# The CUDA side of the build.
#
# - INFERLAB_CUDA_INCLUDE_DIR: the toolkit's headers, used by the SIMT emulator for CUDA's own
#   types (cuda_fp16.h, vector types, cudaError_t, …) even where nvcc is not used; without them
#   the emulator falls back to its own small copies (simt/detail/fallback_types.h).
# - INFERLAB_CUDA (AUTO | ON | OFF, default AUTO): whether the cuda backend is compiled by nvcc.
#   AUTO compiles it only where a GPU can run it (`nvidia-smi -L` lists one at configure time):
#   elsewhere nvcc's objects are a third of a first build's compile time (443 of 2,773 job
#   seconds on the 2-core CI machine) for code nothing can run. ON compiles it whenever nvcc is
#   found (CI's cuda-compile preset does, so that a CUDA compile error still fails CI); OFF never.
# - INFERLAB_HAVE_NVCC: ON when the cuda backend is compiled; then the CUDA language is enabled
#   and every kernel file is also compiled by nvcc: machine code for sm_90 (H100/H200, the GPU the
#   lab is checked on) and PTX for compute_80 (A100: the driver compiles it at first launch), so
#   both architectures' code paths (e.g. the FP8 conversion in software below sm_89) are compiled
#   in every build. Machine code for both, as before, is -DCMAKE_CUDA_ARCHITECTURES="80;90"; one
#   GPU's only, e.g. -DCMAKE_CUDA_ARCHITECTURES=native.
# - inferlab_cuda_compile: a target building every nvcc object library and nothing else (CI).
# - inferlab_add_kernels(): compiles .cu files for the sim backend (always) and the cuda backend.

option(INFERLAB_SIM_TOOLKIT_HEADERS "SIMT emulator: take CUDA types from the toolkit's headers when found" ON)
find_path(INFERLAB_CUDA_INCLUDE_DIR cuda_runtime_api.h
  HINTS ENV CUDA_PATH ENV CUDA_HOME
  PATH_SUFFIXES include
  PATHS /usr/local/cuda /opt/cuda /usr)
if(INFERLAB_SIM_TOOLKIT_HEADERS AND INFERLAB_CUDA_INCLUDE_DIR
   AND EXISTS "${INFERLAB_CUDA_INCLUDE_DIR}/cuda_fp16.h" AND EXISTS "${INFERLAB_CUDA_INCLUDE_DIR}/cuda_bf16.h")
  set(INFERLAB_SIM_USES_TOOLKIT_HEADERS ON)
else()
  set(INFERLAB_SIM_USES_TOOLKIT_HEADERS OFF)
endif()

# A build folder configured before AUTO existed holds the old option's ON (its default): switch it
# to AUTO once, so that an existing folder stops compiling nvcc objects without a GPU too.
get_property(_inferlab_cuda_help CACHE INFERLAB_CUDA PROPERTY HELPSTRING)
if(_inferlab_cuda_help STREQUAL "Compile the CUDA backend with nvcc when nvcc is found")
  set_property(CACHE INFERLAB_CUDA PROPERTY VALUE AUTO)
  message(STATUS "InferLab: INFERLAB_CUDA reset to AUTO (the new default) in this build folder")
endif()
set(INFERLAB_CUDA AUTO CACHE STRING
    "Compile the cuda backend with nvcc: AUTO (only when nvidia-smi lists a GPU) | ON (whenever nvcc is found) | OFF")
set_property(CACHE INFERLAB_CUDA PROPERTY TYPE STRING)
set_property(CACHE INFERLAB_CUDA PROPERTY HELPSTRING
             "Compile the cuda backend with nvcc: AUTO (only when nvidia-smi lists a GPU) | ON (whenever nvcc is found) | OFF")
set_property(CACHE INFERLAB_CUDA PROPERTY STRINGS AUTO ON OFF)

# AUTO: is there a GPU to run the nvcc build? nvidia-smi is the driver's; without it, no GPU runs.
set(_inferlab_want_nvcc OFF)
string(TOUPPER "${INFERLAB_CUDA}" _inferlab_cuda)
if(_inferlab_cuda STREQUAL "AUTO")
  execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE _smi_status OUTPUT_VARIABLE _smi_gpus ERROR_QUIET
                  TIMEOUT 20)
  if(_smi_status EQUAL 0 AND _smi_gpus MATCHES "GPU [0-9]+:")
    set(_inferlab_want_nvcc ON)
    set(_inferlab_cuda_why "INFERLAB_CUDA=AUTO and nvidia-smi -L lists a GPU")
  else()
    message(STATUS "InferLab: cuda backend OFF (INFERLAB_CUDA=AUTO and no GPU: nvidia-smi -L lists none), so "
                   "nvcc compiles nothing; the sim backend runs the CUDA kernels. -DINFERLAB_CUDA=ON compiles "
                   "the cuda backend anyway")
  endif()
elseif(INFERLAB_CUDA)  # ON, TRUE, 1, YES …
  set(_inferlab_want_nvcc ON)
  set(_inferlab_cuda_why "INFERLAB_CUDA=${INFERLAB_CUDA}")
else()
  message(STATUS "InferLab: cuda backend OFF (INFERLAB_CUDA=${INFERLAB_CUDA})")
endif()

set(INFERLAB_HAVE_NVCC OFF)
if(_inferlab_want_nvcc)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(INFERLAB_NVCC nvcc HINTS ENV CUDA_PATH ENV CUDA_HOME PATH_SUFFIXES bin PATHS /usr/local/cuda /opt/cuda)
    if(INFERLAB_NVCC)
      set(ENV{CUDACXX} "${INFERLAB_NVCC}")
    endif()
  endif()
  # CUDA 13 dropped the architectures older than sm_75: choose ours before CUDA is enabled.
  # sm_80 as PTX only skips its ptxas pass, the most expensive of nvcc's phases with cicc: for
  # kernels/decode/cuda_decode_int8.cu, 52.7 s of CPU time for "80;90" (cicc 11.5 s and ptxas
  # 12.9 s per architecture, host compile 3.6 s), 28.4 s for "90" alone.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80-virtual;90-real")
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_HOST_COMPILER "${CMAKE_CXX_COMPILER}" CACHE FILEPATH "Host compiler for nvcc")
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # CMake 3.25 knows no C++20 flag for nvcc: without these, CUDA_STANDARD 20 adds nothing.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(INFERLAB_HAVE_NVCC ON)
    message(STATUS "InferLab: cuda backend ON (${_inferlab_cuda_why}; nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                   "architectures ${CMAKE_CUDA_ARCHITECTURES})")
    # Every nvcc-compiled object (inferlab_add_kernels' <name>_cuda …) and nothing else: CI's
    # cuda-compile phase builds this on a machine without a GPU. (inferlab_cuda_objects())
    add_custom_target(inferlab_cuda_compile)
  else()
    message(STATUS "InferLab: cuda backend OFF (${_inferlab_cuda_why}, but nvcc was not found); the sim backend "
                   "runs the CUDA kernels")
  endif()
endif()

# The emulator's compute-sanitizer (memcheck, racecheck, initcheck: common/simt/detail/checks.h)
# needs every sim kernel compiled with instrumentation that calls the emulator on each memory
# access and atomic (-fsanitize=thread's calls; its runtime is not linked: the emulator defines
# the called functions, and the constructor it adds to each object calls an empty __tsan_init),
# on array indices and pointer alignment (-fsanitize=bounds,alignment,null, whose handlers the
# emulator defines too), and with line tables (-g1) so that reports name source lines.
# Under the asan / tsan presets the sanitizers' own runtimes do the checking instead.
option(INFERLAB_SIMT_CHECKS "SIMT emulator: compile sim kernels with memcheck/racecheck/initcheck" ON)
set(INFERLAB_SIMT_CHECK_OPTIONS "")
if(INFERLAB_SIMT_CHECKS AND NOT INFERLAB_SANITIZE)
  set(INFERLAB_SIMT_CHECK_OPTIONS
      -fsanitize=thread --param=tsan-instrument-func-entry-exit=0
      -fsanitize=bounds,alignment,null -fsanitize-recover=bounds,alignment,null -g1)
  set(INFERLAB_SIMT_CHECKS_ON ON)
else()
  set(INFERLAB_SIMT_CHECKS_ON OFF)
endif()

# inferlab_add_kernels(<name> SOURCES a.cu b.cu … [LIBS lib …])
#
# Compiles each CUDA source twice:
#   <name>_sim   static library: every .cu compiled by the C++ compiler as C++ (through a
#                generated wrapper .cpp that #includes it), for the SIMT emulator; the file's
#                code lands in namespace inferlab::sim (INFERLAB_BACKEND_NS, see simt/simt.h).
#   <name>_cuda  static library, only with the cuda backend (INFERLAB_HAVE_NVCC): the same files
#                compiled by nvcc (sm_90, compute_80 PTX) into namespace inferlab::cuda.
#   <name>       interface library linking both (whatever exists).
# LIBS are linked PUBLIC into both. COMPILE_ENV <target>: student code (exercises/CMakeLists.txt)
# compiles in the restricted environment <target> (PRIVATE) and links the emulator / CUDA runtime
# only, without their include paths. Example (kernels/attention/CMakeLists.txt):
#   inferlab_add_kernels(inferlab_attention_kernels SOURCES tiled.cu flash.cu LIBS inferlab::common)
#   target_link_libraries(inferlab_kernels PUBLIC inferlab_attention_kernels)
# Static libraries drop objects that nothing references: a .cu whose only job is to register
# itself at start-up needs a referenced symbol (or $<LINK_LIBRARY:WHOLE_ARCHIVE,…>).
function(inferlab_add_kernels name)
  cmake_parse_arguments(ARG "" "COMPILE_ENV" "SOURCES;LIBS" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "inferlab_add_kernels(${name}): no SOURCES")
  endif()
  set(wrappers "")
  set(absolute_sources "")
  foreach(source IN LISTS ARG_SOURCES)
    get_filename_component(absolute "${source}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    file(RELATIVE_PATH relative "${PROJECT_SOURCE_DIR}" "${absolute}")
    string(MAKE_C_IDENTIFIER "${relative}" identifier)
    set(wrapper "${CMAKE_CURRENT_BINARY_DIR}/${name}_sim/${identifier}.cpp")
    # file(CONFIGURE) rewrites only when the content changes: no needless rebuilds.
    file(CONFIGURE OUTPUT "${wrapper}"
         CONTENT "// Generated by inferlab_add_kernels(${name}): ${relative} compiled as C++ for the SIMT emulator.\n#include \"${absolute}\"\n")
    list(APPEND wrappers "${wrapper}")
    list(APPEND absolute_sources "${absolute}")
  endforeach()

  add_library(${name}_sim STATIC ${wrappers})
  target_compile_options(${name}_sim PRIVATE ${INFERLAB_SIMT_CHECK_OPTIONS})
  if(ARG_COMPILE_ENV)
    target_link_libraries(${name}_sim PUBLIC $<LINK_ONLY:inferlab::simt> ${ARG_LIBS} PRIVATE ${ARG_COMPILE_ENV})
  else()
    target_link_libraries(${name}_sim PUBLIC inferlab::simt ${ARG_LIBS})
  endif()

  add_library(${name} INTERFACE)
  target_link_libraries(${name} INTERFACE ${name}_sim)

  if(INFERLAB_HAVE_NVCC)
    add_library(${name}_cuda STATIC ${absolute_sources})
    set_target_properties(${name}_cuda PROPERTIES
      CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}"
      CUDA_STANDARD 20
      CUDA_STANDARD_REQUIRED ON
      CUDA_EXTENSIONS OFF
      POSITION_INDEPENDENT_CODE ON)
    target_compile_options(${name}_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
    if(ARG_COMPILE_ENV)
      target_link_libraries(${name}_cuda PUBLIC CUDA::cudart_static CUDA::cublas ${ARG_LIBS} PRIVATE ${ARG_COMPILE_ENV})
    else()
      target_link_libraries(${name}_cuda PUBLIC inferlab_simt_headers CUDA::cudart_static CUDA::cublas ${ARG_LIBS})
    endif()
    target_link_libraries(${name} INTERFACE ${name}_cuda)
    inferlab_cuda_objects(${name}_cuda)
  endif()
endfunction()

# inferlab_cuda_objects(<target>): <target>'s object files join inferlab_cuda_compile. Through
# the objects, not the target: a static library's archive step waits for the libraries it links
# (Ninja's order-only dependencies), which would compile the whole lab with g++ first.
function(inferlab_cuda_objects target)
  add_custom_target(${target}_objects DEPENDS $<TARGET_OBJECTS:${target}>)
  add_dependencies(inferlab_cuda_compile ${target}_objects)
endfunction()
