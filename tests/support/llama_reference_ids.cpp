// llama_reference_ids: the float64 reference of tests/support/llama_reference.h from the command line.
//
//   llama_reference_ids MODEL PROMPT_IDS MAX_NEW   greedy generation (run.c's rule) from the
//                                                  comma-separated prompt; prints the generated
//                                                  ids space-separated on one line
//   llama_reference_ids --logits MODEL IDS         the logits at every position of the
//                                                  comma-separated ids: one line per position,
//                                                  vocab_size values printed with %.17g
#include <cstdio>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/llama_reference.h"

namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long value = 0;
    try {
      value = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || value < INT32_MIN || value > INT32_MAX) {
      throw std::invalid_argument("ids = '" + text + "': '" + item + "' is not an integer");
    }
    ids.push_back(static_cast<int32_t>(value));
  }
  if (ids.empty()) throw std::invalid_argument("ids = '" + text + "': empty");
  return ids;
}

int64_t parse_count(const std::string& text) {
  size_t used = 0;
  long long value = -1;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < 0) {
    throw std::invalid_argument("MAX_NEW = '" + text + "': must be a non-negative integer");
  }
  return value;
}

int usage() {
  std::fprintf(stderr,
               "usage: llama_reference_ids MODEL PROMPT_IDS MAX_NEW\n"
               "       llama_reference_ids --logits MODEL IDS\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 4 && std::string(argv[1]) == "--logits") {
      const inferlab::testing::LlamaReference model(argv[2]);
      for (const auto& row : model.logits(parse_ids(argv[3]))) {
        for (size_t i = 0; i < row.size(); ++i) std::printf(i == 0 ? "%.17g" : " %.17g", row[i]);
        std::printf("\n");
      }
      return 0;
    }
    if (argc != 4) return usage();
    const inferlab::testing::LlamaReference model(argv[1]);
    const std::vector<int32_t> ids = model.greedy(parse_ids(argv[2]), parse_count(argv[3]));
    for (size_t i = 0; i < ids.size(); ++i) std::printf(i == 0 ? "%d" : " %d", ids[i]);
    std::printf("\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llama_reference_ids: %s\n", e.what());
    return 1;
  }
}
