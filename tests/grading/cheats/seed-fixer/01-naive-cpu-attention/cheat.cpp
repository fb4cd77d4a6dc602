// CHEAT (caught by the inspection: startup code): a static initialiser sets INFERLAB_SEED before
// main(), so the "fresh" data would be the same every run and a table of answers recorded from
// one run would pass the next. The grader now passes the seed on the command line and ignores the
// environment; and no exercise file may run code before main().
#include <cstdlib>

#include "01-naive-cpu-attention/ch01.h"
#include "common/check.h"

namespace inferlab::student {
namespace {
const int seed_fixed = (::setenv("INFERLAB_SEED", "1", 1), 0);
}  // namespace

void softmax_row(std::span<float>) { throw NotImplemented("softmax_row (a table would go here)"); }
void attention_single_head(std::span<const float>, std::span<const float>, std::span<const float>, int64_t, int64_t,
                           bool, std::span<float>) {
  throw NotImplemented("attention_single_head");
}
Cost count_prefill_cost(int64_t, int64_t, double) { return Cost{double(seed_fixed), 0.0}; }

}  // namespace inferlab::student
