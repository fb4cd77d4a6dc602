#include "tests/support/seeded.h"

#include <string>

#include "tests/support/isolation.h"

namespace inferlab::testing {

std::string replay_hint(uint64_t seed) {
  return grading_run() ? "replay: ./inferlab grade --seed " + std::to_string(seed)
                       : "rerun with INFERLAB_SEED=" + std::to_string(seed);
}

std::string seed_note(uint64_t seed) {
  return "seed " + std::to_string(seed) + " (" + replay_hint(seed) + ")";
}

SeededRng::SeededRng() : SeededRng(Rng::fresh_seed()) {}

SeededRng::SeededRng(uint64_t seed)
    : Rng(seed),
      trace_(__FILE__, __LINE__, "random data seed " + std::to_string(seed) + " (" + replay_hint(seed) + ")") {}

}  // namespace inferlab::testing
