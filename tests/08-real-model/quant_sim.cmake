# Chapter 08's quantized matmul on the device backends (kernels/quant/cuda_quant_matmul.h): the
# activation quantizer byte for byte against quantize_row(), the __dp4a matmul bit for bit against
# quant_matmul_cpu (scalar) and within the float64 oracle's bound, batch invariance, every thread
# order (sim), bad arguments. One source, two builds: test_ch08_quant_sim (the SIMT emulator) and
# test_ch08_quant_cuda (skips without a GPU). Included from this folder's CMakeLists.txt.
inferlab_add_backend_tests(test_ch08_quant SOURCES test_quant_sim.cpp CHAPTER ch08 BACKENDS sim cuda
                           LIBS inferlab::runtime)

# Its wrong fixtures (tests/wrong/kernels/wrong_ch08_quant_kernels.cu: lanes that split an output's
# blocks and add them with a shuffle tree, the Q4_1 minimum's term dropped, Q4 nibbles read as
# adjacent pairs), compiled for sim (and, with nvcc, cuda), through the same checks
# (quant_device_check.h) that cuda/quant_matmul passes.
inferlab_add_kernels(wrong_ch08_quant_kernels SOURCES ${PROJECT_SOURCE_DIR}/tests/wrong/kernels/wrong_ch08_quant_kernels.cu
                     LIBS inferlab::kernels)
inferlab_add_test(test_wrong_ch08_quant_gpu SOURCES ${PROJECT_SOURCE_DIR}/tests/wrong/wrong_ch08_quant_gpu.cpp
                  LABELS "wrong;ch08;sim" LIBS wrong_ch08_quant_kernels_sim GTest::gmock)
