// CHEAT (caught by the inspection: references): answers exercise 12.2 with the engine's own
// verify_rejection() (runtime/engine/speculative.h, what the graded test compares with), its
// result type declared here by hand (no include of runtime/, which the inspection's include check
// would name as well, and which does not resolve on student code's include path). The other
// exercises are the unmodified stubs.
#include <cstdint>
#include <span>
#include <vector>

#include "12-speculative-decoding/ch12.h"

namespace inferlab::engine {
struct Verification {
  std::vector<int32_t> tokens;
  int64_t accepted = 0;
};
Verification verify_rejection(std::span<const std::vector<double>> p, std::span<const std::vector<double>> q,
                              std::span<const int32_t> draft, uint64_t& rng_state);
}  // namespace inferlab::engine

namespace inferlab::student {

Verification verify_rejection(std::span<const std::vector<double>> p, std::span<const std::vector<double>> q,
                              std::span<const int32_t> draft, uint64_t& rng_state) {
  const engine::Verification lab = engine::verify_rejection(p, q, draft, rng_state);
  return {lab.tokens, lab.accepted};
}

}  // namespace inferlab::student
