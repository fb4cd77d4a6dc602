# Every third-party dependency comes from a Debian package. Missing ones are collected and the
# configure step stops once, with the exact install command.
set(_inferlab_missing "")

find_package(Threads REQUIRED)

find_package(GTest QUIET)
if(NOT GTest_FOUND)
  list(APPEND _inferlab_missing libgtest-dev libgmock-dev)
endif()

find_package(benchmark QUIET)
if(NOT benchmark_FOUND)
  list(APPEND _inferlab_missing libbenchmark-dev)
endif()

find_package(OpenMP QUIET COMPONENTS CXX)
if(NOT OpenMP_CXX_FOUND)
  list(APPEND _inferlab_missing libomp-dev)
endif()

set(BLA_VENDOR OpenBLAS)
find_package(BLAS QUIET)
find_path(INFERLAB_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas x86_64-linux-gnu/openblas-pthread)
if(NOT BLAS_FOUND OR NOT INFERLAB_CBLAS_INCLUDE)
  list(APPEND _inferlab_missing libopenblas-dev)
endif()

# Fibers for the SIMT emulator: Boost.Context (fast); ucontext is the fallback when absent.
find_package(Boost QUIET COMPONENTS context)
if(Boost_FOUND)
  set(INFERLAB_HAVE_BOOST_CONTEXT ON)
else()
  set(INFERLAB_HAVE_BOOST_CONTEXT OFF)
  list(APPEND _inferlab_missing libboost-context-dev)
endif()
# Boost.Beast and Asio (header-only, in libboost-dev): chapter 09's HTTP transport
# (runtime/serving/http_server.cpp).
if(NOT TARGET Boost::headers OR NOT EXISTS "${Boost_INCLUDE_DIRS}/boost/beast.hpp")
  list(APPEND _inferlab_missing libboost-dev)
endif()

# xxHash: the chained block hash of chapter 06's prefix cache (runtime/paged/prefix_hash.cpp).
find_path(INFERLAB_XXHASH_INCLUDE xxhash.h)
find_library(INFERLAB_XXHASH_LIBRARY xxhash)
if(INFERLAB_XXHASH_INCLUDE AND INFERLAB_XXHASH_LIBRARY)
  add_library(inferlab_xxhash INTERFACE IMPORTED)
  target_include_directories(inferlab_xxhash INTERFACE ${INFERLAB_XXHASH_INCLUDE})
  target_link_libraries(inferlab_xxhash INTERFACE ${INFERLAB_XXHASH_LIBRARY})
else()
  list(APPEND _inferlab_missing libxxhash-dev)
endif()

# ICU: Unicode character classes for chapter 08's pre-tokenizer (runtime/tokenizer/pretokenizer.cpp:
# general categories L and N, the White_Space property).
find_package(ICU QUIET COMPONENTS uc)
if(NOT ICU_FOUND)
  list(APPEND _inferlab_missing libicu-dev)
endif()

# nlohmann/json: the one JSON reader and writer (common/json.h: roofline.json, traces, serving
# metrics, analyze --json).
find_package(nlohmann_json 3 CONFIG QUIET)
if(NOT nlohmann_json_FOUND)
  list(APPEND _inferlab_missing nlohmann-json3-dev)
endif()

# CLI11 (header-only): the option tables of `inferlab generate`, `serve` and `chat`
# (tools/cli/command_line.h): each option declared once, the --help text written from it.
find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  list(APPEND _inferlab_missing libcli11-dev)
endif()

# cpp-httplib: chapter 09's HTTP server (`inferlab serve`) and its tests' client. Debian builds it
# as a library with OpenSSL, zlib and Brotli support and says so in its pkg-config file only (no
# CMake config): its Cflags (-DCPPHTTPLIB_OPENSSL_SUPPORT …) must be used as given or the
# classes' layout differs from the library's. pkg-config itself comes with pkgconf.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(INFERLAB_HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
endif()
if(INFERLAB_HTTPLIB_FOUND)
  add_library(inferlab_httplib INTERFACE IMPORTED)
  target_link_libraries(inferlab_httplib INTERFACE PkgConfig::INFERLAB_HTTPLIB)
else()
  if(NOT PKG_CONFIG_FOUND)
    list(APPEND _inferlab_missing pkgconf)
  endif()
  list(APPEND _inferlab_missing libcpp-httplib-dev)
endif()

# MPI: chapter 10's ranks (runtime/parallel/mpi_communicator.cpp; `inferlab generate --tp N` starts
# them with mpirun). Open MPI from Debian; MPICH beside it would give two mpirun.
find_package(MPI QUIET COMPONENTS CXX)
if(NOT MPI_CXX_FOUND OR NOT MPIEXEC_EXECUTABLE)
  list(APPEND _inferlab_missing openmpi-bin libopenmpi-dev)
endif()

if(INFERLAB_DOCS)
  find_package(Doxygen QUIET COMPONENTS dot)
  if(NOT DOXYGEN_FOUND)
    list(APPEND _inferlab_missing doxygen graphviz)
  endif()
endif()

if(_inferlab_missing)
  list(REMOVE_DUPLICATES _inferlab_missing)
  list(JOIN _inferlab_missing " " _inferlab_missing_str)
  message(FATAL_ERROR
    "InferLab needs Debian packages that are not installed. Install them with:\n"
    "  sudo apt-get install -y ${_inferlab_missing_str}\n"
    "(then run the same command again)")
endif()
