#include "tests/support/seeded.h"

#include <string>

namespace inferlab::testing {

SeededRng::SeededRng()
    : Rng(Rng::fresh_seed()),
      trace_(__FILE__, __LINE__, "random data seed " + std::to_string(seed()) +
                                     " (rerun with INFERLAB_SEED=" + std::to_string(seed()) + ")") {}

}  // namespace inferlab::testing
