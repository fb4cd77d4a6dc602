#include "common/rng.h"

#include "common/check.h"

#include <chrono>
#include <cstdlib>
#include <string>

namespace inferlab {

namespace {
bool seed_fixed = false;
uint64_t fixed_seed = 0;
}  // namespace

void Rng::fix_fresh_seed(uint64_t seed) {
  seed_fixed = true;
  fixed_seed = seed;
}

uint64_t Rng::fresh_seed() {
  if (seed_fixed) return fixed_seed;
  if (const char* fixed = std::getenv("INFERLAB_SEED"); fixed != nullptr && *fixed != '\0') {
    try {
      return std::stoull(fixed);
    } catch (const std::exception&) {
      require(false, "INFERLAB_SEED", fixed, "must be an unsigned integer");
    }
  }
  std::random_device device;
  const auto now = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return (static_cast<uint64_t>(device()) << 32) ^ device() ^ now;
}

void Rng::fill_normal(std::span<float> values, float mean, float stddev) {
  std::normal_distribution<float> normal(mean, stddev);
  for (float& value : values) value = normal(engine_);
}

Tensor<float> Rng::normal_tensor(const Shape& shape, float mean, float stddev) {
  Tensor<float> tensor(shape);
  fill_normal(tensor.span(), mean, stddev);
  return tensor;
}

}  // namespace inferlab
