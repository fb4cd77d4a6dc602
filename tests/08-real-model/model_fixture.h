#pragma once
// Chapter 08 test helpers: the installed SmolLM2 file (or a failure naming ./inferlab setup), the
// venv's Python, and the float64 reference forward (reference_forward.py) run on token ids.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "common/npy.h"
#include "common/tensor.h"
#include "tests/support/run_inferlab.h"

namespace inferlab::testing {

/// The installed model's path; fails the test (fatally, in the caller: use ASSERT_NO_FATAL_FAILURE)
/// when it or the venv is missing, with the command that installs them.
inline std::string smollm2_path() {
  const std::string path = INFERLAB_SMOLLM2_GGUF;
  if (!std::filesystem::exists(path) || !std::filesystem::exists(INFERLAB_VENV_PYTHON))
    ADD_FAILURE() << "chapter 08's model or Python tools are not installed (" << path << ", " << INFERLAB_VENV_PYTHON
                  << "): run ./inferlab setup";
  return path;
}

/// @p ids space-separated.
inline std::string id_string(const std::vector<int32_t>& ids) {
  std::ostringstream s;
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? " " : "") << ids[i];
  return s.str();
}

/// The float64 reference's logits of every position of @p ids, [ids.size(), vocab]
/// (tests/08-real-model/reference_forward.py: PyPI gguf's reader and dequantizer and a NumPy
/// forward written apart from the engine). Empty (with a failure) when the script fails.
inline Tensor<double> reference_logits(const std::string& model, const std::vector<int32_t>& ids) {
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("inferlab_ref_" + std::to_string(::getpid()) + ".npy");
  const std::string args = std::string(INFERLAB_SOURCE_DIR) + "/tests/08-real-model/reference_forward.py --model " +
                           model + " --ids \"" + id_string(ids) + "\" --out " + out.string();
  const CommandResult r = run_command(INFERLAB_VENV_PYTHON, args, "OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2");
  if (r.exit_code != 0) {
    ADD_FAILURE() << "reference_forward.py failed (exit " << r.exit_code << "):\n" << r.output;
    return {};
  }
  const NpyArray a = read_npy(out);
  std::filesystem::remove(out);
  EXPECT_EQ(a.dtype, NpyDType::f64);
  Tensor<double> t(a.shape);
  std::memcpy(t.data(), a.bytes.data(), a.bytes.size());
  return t;
}

}  // namespace inferlab::testing
