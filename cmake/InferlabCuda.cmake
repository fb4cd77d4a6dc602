# Placeholder until the SIMT emulator lands (issue 3): inferlab_add_kernels() compiles each .cu
# as C++ for the sim backend and, when nvcc is found, for the cuda backend.
set(INFERLAB_HAVE_NVCC OFF)
