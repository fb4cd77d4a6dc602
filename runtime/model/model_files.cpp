#include "runtime/model/model_files.h"

#include <filesystem>
#include <stdexcept>

#ifndef INFERLAB_SOURCE_DIR
#define INFERLAB_SOURCE_DIR "."
#endif

namespace inferlab::model {

std::string smollm2_path() {
  return (std::filesystem::path(INFERLAB_SOURCE_DIR) / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf").string();
}

std::string resolve_model_path(const std::string& name) {
  if (name != "smollm2") return name;
  const std::string path = smollm2_path();
  if (!std::filesystem::exists(path)) {
    throw std::invalid_argument("--model smollm2: " + path +
                                " is not installed (run ./inferlab setup: it installs chapter 08's model)");
  }
  return path;
}

}  // namespace inferlab::model
