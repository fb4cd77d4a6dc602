#include "tools/cli/model_names.h"

#include <filesystem>
#include <stdexcept>

#ifndef INFERLAB_SOURCE_DIR
#define INFERLAB_SOURCE_DIR "."
#endif

namespace inferlab::cli {

std::string resolve_model_path(const std::string& name) {
  if (name != "smollm2") return name;
  const std::filesystem::path path =
      std::filesystem::path(INFERLAB_SOURCE_DIR) / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) {
    throw std::invalid_argument("--model smollm2: " + path.string() +
                                " is not installed (run ./inferlab setup: it installs chapter 08's model)");
  }
  return path.string();
}

}  // namespace inferlab::cli
