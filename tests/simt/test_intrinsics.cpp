// The emulator's intrinsics that no lesson kernel uses yet, each checked against CUDA's
// documented semantics (CUDA C++ Programming Guide: warp reduce / vote functions, atomic
// functions; CUDA Math API: integer, type-casting, single-precision and half/bfloat16 intrinsics).
// The models below are written from those definitions, not from the emulator's code.
#include <gtest/gtest.h>

#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <type_traits>
#include <vector>

#include "simt/device_buffer.h"
#include "simt_test_kernels.h"
#include "tests/support/schedules.h"
#include "tests/support/seeded.h"

namespace inferlab::sim::simt_tests {
namespace {

using testing::DeviceOutput;
using testing::same_under_schedules;

// |got - expected| within @p ulps units in the last place of a float with @p mantissa_bits
// explicit mantissa bits, at @p expected's magnitude.
bool within_ulps(double got, double expected, int mantissa_bits, double ulps) {
  if (std::isnan(expected)) return std::isnan(got);
  if (std::isinf(expected)) return got == expected;
  const int exponent = expected == 0.0 ? -14 : std::ilogb(expected);
  return std::abs(got - expected) <= ulps * std::ldexp(1.0, exponent - mantissa_bits);
}

TEST(SimtIntrinsics, WarpReductionsAndActiveMask) {
  testing::SeededRng rng;
  const int threads = 40;  // warp 0: 32 lanes, warp 1: 8 lanes
  std::vector<int> in(threads);
  for (int& v : in) v = static_cast<int>(rng.integer(-50, 50));
  in[3] = -1;  // the largest unsigned value in warp 0
  in[35] = 0;
  DeviceBuffer<int> din(in), dout(11 * threads);
  EXPECT_TRUE(same_under_schedules([&] { return warp_reductions(din.data(), dout.data(), threads); },
                                   {DeviceOutput{"out", dout.data(), dout.bytes()}}));
  const std::vector<int> out = dout.download();
  for (int t = 0; t < threads; ++t) {
    const int base = t / 32 * 32, lanes = std::min(32, threads - base), lane = t % 32;
    const unsigned existing = lanes == 32 ? ~0u : (1u << lanes) - 1;
    unsigned sum = 0, all_and = ~0u, any_or = 0, parity = 0, min_u = UINT_MAX, max_u = 0;
    int min_s = INT_MAX, max_s = INT_MIN;
    for (int l = 0; l < lanes; ++l) {
      const int v = in[base + l];
      const auto u = static_cast<unsigned>(v);
      sum += u;
      all_and &= u;
      any_or |= u;
      parity ^= u;
      min_u = std::min(min_u, u);
      max_u = std::max(max_u, u);
      min_s = std::min(min_s, v);
      max_s = std::max(max_s, v);
    }
    const int* o = &out[11 * t];
    // __activemask at the start: the emulator's lanes have all started and none has exited (a
    // GPU's warp is converged there in practice, though CUDA promises only the caller's bit)
    EXPECT_EQ(static_cast<unsigned>(o[0]), existing) << t;
    EXPECT_EQ(static_cast<unsigned>(o[1]), sum) << t;
    EXPECT_EQ(o[2], static_cast<int>(sum)) << t;
    EXPECT_EQ(o[3], min_s) << t;
    EXPECT_EQ(static_cast<unsigned>(o[4]), min_u) << t;
    EXPECT_EQ(o[5], max_s) << t;
    EXPECT_EQ(static_cast<unsigned>(o[6]), max_u) << t;
    EXPECT_EQ(static_cast<unsigned>(o[7]), all_and) << t;
    EXPECT_EQ(static_cast<unsigned>(o[8]), any_or) << t;
    EXPECT_EQ(static_cast<unsigned>(o[9]), parity) << t;
    // after every fourth lane returned: those lanes are inactive, the caller is active
    EXPECT_EQ(o[10], lane % 4 == 3 ? -1 : 1) << t;
  }
}

TEST(SimtIntrinsics, BitCountsDp4aReinterpretationRoundingRsqrtLog) {
  testing::SeededRng rng;
  std::vector<unsigned> bits{0u, 1u, 0x80000000u, 0xffffffffu, 0x00010000u, 0x7f800000u, 0x7fc00001u};
  std::vector<unsigned long long> wide{0ull, 1ull, 1ull << 63, ~0ull, 1ull << 40, 0x00000000ffffffffull, 3ull << 31};
  // round half to even, both signs; then the special values of rsqrtf and __logf
  std::vector<float> values{0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.49f};
  const std::vector<float> specials{0.0f, -0.0f, INFINITY, -1.0f, 0.75f, 1.0f, 1.9f, 1e-30f, 3e30f};
  values.insert(values.end(), specials.begin(), specials.end());
  while (bits.size() < 90) bits.push_back(static_cast<unsigned>(rng.integer(0, UINT32_MAX)));
  while (wide.size() < bits.size())
    wide.push_back(static_cast<unsigned long long>(rng.integer(0, UINT32_MAX)) << rng.integer(0, 32));
  while (values.size() < bits.size()) values.push_back(rng.uniform(-1000.0f, 1000.0f));
  const int count = static_cast<int>(bits.size());
  DeviceBuffer<unsigned> dbits(bits);
  DeviceBuffer<unsigned long long> dwide(wide);
  DeviceBuffer<float> dvalues(values), dfloats(3 * count);
  DeviceBuffer<int> dints(13 * count);
  EXPECT_TRUE(same_under_schedules(
      [&] {
        return scalar_intrinsics(dbits.data(), dwide.data(), dvalues.data(), dints.data(), dfloats.data(), count);
      },
      {DeviceOutput{"ints", dints.data(), dints.bytes()}, DeviceOutput{"floats", dfloats.data(), dfloats.bytes()}}));
  const std::vector<int> ints = dints.download();
  const std::vector<float> floats = dfloats.download();
  for (int i = 0; i < count; ++i) {
    const unsigned u = bits[i], next = bits[(i + 1) % count];
    const unsigned long long w = wide[i];
    const float f = values[i];
    const int* o = &ints[13 * i];
    SCOPED_TRACE(::testing::Message() << "element " << i << ": bits 0x" << std::hex << u << ", wide 0x" << w << std::dec
                                      << ", value " << f);
    int popc = 0, popcll = 0, clz = 32, clzll = 64, ffs = 0, ffsll = 0;
    for (int b = 0; b < 32; ++b) popc += (u >> b) & 1u;
    for (int b = 0; b < 64; ++b) popcll += static_cast<int>((w >> b) & 1u);
    for (int b = 31; b >= 0; --b)
      if ((u >> b) & 1u) {
        clz = 31 - b;
        break;
      }
    for (int b = 63; b >= 0; --b)
      if ((w >> b) & 1u) {
        clzll = 63 - b;
        break;
      }
    for (int b = 0; b < 32 && ffs == 0; ++b)
      if ((u >> b) & 1u) ffs = b + 1;  // 1-based; 0 when no bit is set
    for (int b = 0; b < 64 && ffsll == 0; ++b)
      if ((w >> b) & 1u) ffsll = b + 1;
    EXPECT_EQ(o[0], popc);
    EXPECT_EQ(o[1], popcll);
    EXPECT_EQ(o[2], clz);
    EXPECT_EQ(o[3], clzll);
    EXPECT_EQ(o[4], ffs);
    EXPECT_EQ(o[5], ffsll);
    int dot_signed = -7;
    unsigned dot_unsigned = 7;
    for (int k = 0; k < 4; ++k) {
      dot_signed += static_cast<int8_t>(u >> (8 * k)) * static_cast<int8_t>(next >> (8 * k));
      dot_unsigned += ((u >> (8 * k)) & 0xffu) * ((next >> (8 * k)) & 0xffu);
    }
    EXPECT_EQ(o[6], dot_signed);
    EXPECT_EQ(static_cast<unsigned>(o[7]), dot_unsigned);
    uint32_t f_bits;
    std::memcpy(&f_bits, &f, 4);
    EXPECT_EQ(static_cast<uint32_t>(o[8]), f_bits);
    EXPECT_EQ(static_cast<uint32_t>(o[9]), f_bits);
    EXPECT_EQ(static_cast<unsigned>(o[10]), u);  // reinterpretation keeps every bit, NaN payloads too
    EXPECT_EQ(static_cast<unsigned>(o[11]), u);
    uint32_t r_bits;
    std::memcpy(&r_bits, &floats[3 * i + 2], 4);
    EXPECT_EQ(r_bits, u);
    if (std::abs(f) < 1e9f) {  // (the kernel leaves values beyond int's range out)
      // round to nearest, ties to even
      const double down = std::floor(static_cast<double>(f)), fraction = f - down;
      const double even = std::fmod(down, 2.0) == 0.0 ? down : down + 1.0;
      const double nearest = fraction < 0.5 ? down : fraction > 0.5 ? down + 1.0 : even;
      EXPECT_EQ(o[12], static_cast<int>(nearest));
    }
    // rsqrtf: 1/sqrt(x) within 2 ulp; rsqrtf(+-0) = +-inf, rsqrtf(+inf) = +0, negative -> NaN
    const float rsqrt_value = floats[3 * i];
    if (f == 0.0f)
      EXPECT_EQ(rsqrt_value, std::copysign(INFINITY, f));
    else if (f < 0.0f)
      EXPECT_TRUE(std::isnan(rsqrt_value)) << rsqrt_value;
    else if (std::isinf(f))
      EXPECT_EQ(rsqrt_value, 0.0f);
    else
      EXPECT_TRUE(within_ulps(rsqrt_value, 1.0 / std::sqrt(static_cast<double>(f)), 23, 2.0)) << rsqrt_value;
    // __logf: absolute error <= 2^-21.41 on [0.5, 2], else <= 3 ulp (for x > 0)
    const float log_value = floats[3 * i + 1];
    if (f > 0.0f && std::isfinite(f)) {
      const double expected = std::log(static_cast<double>(f));
      if (f >= 0.5f && f <= 2.0f)
        EXPECT_NEAR(log_value, expected, std::exp2(-21.41));
      else
        EXPECT_TRUE(within_ulps(log_value, expected, 23, 3.0)) << log_value;
    }
  }
}

TEST(SimtIntrinsics, AtomicOverloadsAcrossBlocksAndWorkers) {
  const int blocks = 5, threads = 64;
  const unsigned total = blocks * threads;
  AtomicTargets start{};
  start.min_u = UINT_MAX;
  start.min_ll = LLONG_MAX;
  start.min_ull = ULLONG_MAX;
  start.max_ll = LLONG_MIN;
  start.and_i = -1;
  DeviceBuffer<AtomicTargets> targets(std::vector<AtomicTargets>{start});
  DeviceBuffer<unsigned> exch_old(total);
  const auto run = [&] {
    targets.upload(std::vector<AtomicTargets>{start});
    return atomic_overloads(targets.data(), exch_old.data(), blocks, threads);
  };
  // Everything but the exchanges and the compare-and-swap winners is independent of the order.
  const auto field = [&](auto AtomicTargets::*member, const char* name) {
    return DeviceOutput{name, &(targets.data()->*member), sizeof(start.*member)};
  };
  EXPECT_TRUE(same_under_schedules(
      run, {field(&AtomicTargets::add_u, "add_u"), field(&AtomicTargets::add_ull, "add_ull"),
            field(&AtomicTargets::add_d, "add_d"), field(&AtomicTargets::sub_u, "sub_u"),
            field(&AtomicTargets::max_u, "max_u"), field(&AtomicTargets::min_u, "min_u"),
            field(&AtomicTargets::max_ll, "max_ll"), field(&AtomicTargets::min_ll, "min_ll"),
            field(&AtomicTargets::max_ull, "max_ull"), field(&AtomicTargets::min_ull, "min_ull"),
            field(&AtomicTargets::dec, "dec"), field(&AtomicTargets::and_i, "and_i"),
            field(&AtomicTargets::or_i, "or_i"), field(&AtomicTargets::xor_i, "xor_i"),
            field(&AtomicTargets::xor_u, "xor_u"), field(&AtomicTargets::cas_u_winners, "cas_u_winners"),
            field(&AtomicTargets::cas_ull_winners, "cas_ull_winners")}));
  ASSERT_EQ(run(), cudaSuccess);
  const AtomicTargets a = targets.download()[0];

  unsigned add_u = 0, max_u = 0, min_u = UINT_MAX, xor_u = 0;
  unsigned long long add_ull = 0, max_ull = 0, min_ull = ULLONG_MAX;
  long long max_ll = LLONG_MIN, min_ll = LLONG_MAX;
  int xor_i = 0;
  for (unsigned g = 0; g < total; ++g) {
    const unsigned scrambled = g * 2654435761u;
    const long long centred = (static_cast<long long>(g) - 100) * 10000000000ll;
    add_u += g % 7;
    add_ull += (1ull << 40) + g;
    max_u = std::max(max_u, scrambled);
    min_u = std::min(min_u, scrambled);
    max_ll = std::max(max_ll, centred);
    min_ll = std::min(min_ll, centred);
    max_ull = std::max(max_ull, static_cast<unsigned long long>(scrambled) << 20);
    min_ull = std::min(min_ull, static_cast<unsigned long long>(scrambled) << 20);
    xor_i ^= 1 << (g % 31);
    xor_u ^= scrambled;
  }
  EXPECT_EQ(a.add_u, add_u);
  EXPECT_EQ(a.add_ull, add_ull);
  EXPECT_EQ(a.add_d, 0.5 * total);
  EXPECT_EQ(a.sub_u, 0u - total);  // unsigned arithmetic wraps
  EXPECT_EQ(a.max_u, max_u);
  EXPECT_EQ(a.min_u, min_u);
  EXPECT_EQ(a.max_ll, max_ll);
  EXPECT_EQ(a.min_ll, min_ll);
  EXPECT_EQ(a.max_ull, max_ull);
  EXPECT_EQ(a.min_ull, min_ull);
  // atomicDec(p, 4): ((old == 0) || (old > 4)) ? 4 : old - 1, from 0: 4, 3, 2, 1, 0, 4, …
  EXPECT_EQ(a.dec, total % 5 == 0 ? 0u : 5 - total % 5);
  EXPECT_EQ(a.and_i, INT_MIN);  // bits 0..30 cleared
  EXPECT_EQ(a.or_i, INT_MAX);   // bits 0..30 set
  EXPECT_EQ(a.xor_i, xor_i);
  EXPECT_EQ(a.xor_u, xor_u);
  // atomicCAS returns the old value: exactly one thread saw 0 and stored its value.
  EXPECT_EQ(a.cas_u_winners, 1u);
  EXPECT_EQ(a.cas_ull_winners, 1u);
  EXPECT_GE(a.cas_u, 1u);
  EXPECT_LE(a.cas_u, total);
  EXPECT_EQ(a.cas_ull & 0xffffffffull, 0ull);
  EXPECT_GE(a.cas_ull >> 32, 1ull);
  EXPECT_LE(a.cas_ull >> 32, total);
  // atomicExch returns the old value: the values handed back, plus the one left, are the
  // initial 0 and every value stored, each exactly once.
  std::vector<unsigned> seen = exch_old.download();
  seen.push_back(a.exch_u);
  std::multiset<unsigned> values(seen.begin(), seen.end());
  std::multiset<unsigned> expected{0u};
  for (unsigned g = 0; g < total; ++g) expected.insert(g + 1);
  EXPECT_EQ(values, expected);
  EXPECT_EQ(a.exch_ull & ((1ull << 33) - 1), 0ull);
  EXPECT_GE(a.exch_ull >> 33, 1ull);
  EXPECT_LE(a.exch_ull >> 33, total);
  EXPECT_EQ(a.exch_f, std::floor(a.exch_f));
  EXPECT_GE(a.exch_f, 0.0f);
  EXPECT_LT(a.exch_f, static_cast<float>(total));
}

TEST(SimtIntrinsics, ThreadfenceLastBlockReduction) {
  testing::SeededRng rng;
  const int count = 3001, blocks = 7, threads = 64;
  std::vector<float> values(count);
  for (float& v : values) v = rng.uniform(-1.0f, 1.0f);
  DeviceBuffer<float> in(values), partial(blocks), total(1);
  DeviceBuffer<unsigned> ticket(std::vector<unsigned>{0u});
  EXPECT_TRUE(same_under_schedules(
      [&] {
        ticket.upload(std::vector<unsigned>{0u});
        return threadfence_sum(in.data(), count, partial.data(), ticket.data(), total.data(), blocks);
      },
      {DeviceOutput{"partial", partial.data(), partial.bytes()}, DeviceOutput{"total", total.data(), total.bytes()}}));
  // The same float additions in the same order on the host: the same bits.
  float expected = 0.0f;
  for (int b = 0; b < blocks; ++b) {
    float block_sum = 0.0f;
    for (int t = 0; t < threads; ++t) {
      float mine = 0.0f;
      for (int i = b * threads + t; i < count; i += blocks * threads) mine += values[i];
      block_sum += mine;
    }
    expected += block_sum;
  }
  for (int run = 0; run < 2; ++run) {  // atomicInc wrapped the ticket back to 0: it can run again
    total.upload(std::vector<float>{0.0f});
    ASSERT_EQ(threadfence_sum(in.data(), count, partial.data(), ticket.data(), total.data(), blocks), cudaSuccess);
    EXPECT_EQ(total.download()[0], expected) << "run " << run;
    EXPECT_EQ(ticket.download()[0], 0u) << "run " << run;
  }
}

// y = hexp, hexp2, hlog, hsqrt, hrsqrt, hrcp, __hfma(x, x, x) for each x: the 16-bit result of
// the exact value, within 2 ulp of the type.
template <class T>
void check_half_unary(const std::vector<float>& x_values, const std::vector<T>& y, int mantissa_bits,
                      const char* type) {
  const char* names[] = {"exp", "exp2", "log", "sqrt", "rsqrt", "rcp", "fma"};
  for (size_t i = 0; i < x_values.size(); ++i) {
    const double x = x_values[i];
    const double expected[] = {std::exp(x),        std::exp2(x), std::log(x), std::sqrt(x),
                               1.0 / std::sqrt(x), 1.0 / x,      x * x + x};
    for (int k = 0; k < 7; ++k) {
      float got;
      if constexpr (std::is_same_v<T, __half>)
        got = __half2float(y[7 * i + k]);
      else
        got = __bfloat162float(y[7 * i + k]);
      EXPECT_TRUE(within_ulps(got, expected[k], mantissa_bits, 2.0))
          << type << " " << names[k] << "(" << x << ") = " << got << ", expected " << expected[k];
    }
  }
}

TEST(SimtIntrinsics, HalfAndBfloat16Math) {
  testing::SeededRng rng;
  const int count = 70;
  std::vector<float> xs(count), ys(count);  // positive: in every function's domain
  for (int i = 0; i < count; ++i) {
    xs[i] = __half2float(__float2half(rng.uniform(0.125f, 4.0f)));          // exactly representable in half
    ys[i] = __bfloat162float(__float2bfloat16(rng.uniform(0.125f, 4.0f)));  // and in bf16
  }
  std::vector<__half> h(count);
  std::vector<__nv_bfloat16> b(count);
  std::vector<__half2> h2(count);
  std::vector<__nv_bfloat162> b2(count);
  for (int i = 0; i < count; ++i) {
    h[i] = __float2half(xs[i]);
    b[i] = __float2bfloat16(ys[i]);
    h2[i] = __floats2half2_rn(xs[i], xs[count - 1 - i]);
    b2[i] = __floats2bfloat162_rn(ys[i], ys[count - 1 - i]);
  }
  DeviceBuffer<__half> dh(h), dhy(7 * count);
  DeviceBuffer<__nv_bfloat16> db(b), dby(7 * count);
  DeviceBuffer<__half2> dh2(h2), dh2y(7 * count);
  DeviceBuffer<__nv_bfloat162> db2(b2), db2y(7 * count);
  ASSERT_EQ(half_unary(dh.data(), dhy.data(), count), cudaSuccess);
  ASSERT_EQ(half_unary(db.data(), dby.data(), count), cudaSuccess);
  ASSERT_EQ(half_unary(dh2.data(), dh2y.data(), count), cudaSuccess);
  ASSERT_EQ(half_unary(db2.data(), db2y.data(), count), cudaSuccess);
  check_half_unary(xs, dhy.download(), 10, "__half");
  check_half_unary(ys, dby.download(), 7, "__nv_bfloat16");
  // The pair forms: each half of the pair as its own scalar.
  std::vector<__half> h2_low(7 * count), h2_high(7 * count);
  std::vector<__nv_bfloat16> b2_low(7 * count), b2_high(7 * count);
  const std::vector<__half2> h2y = dh2y.download();
  const std::vector<__nv_bfloat162> b2y = db2y.download();
  for (int j = 0; j < 7 * count; ++j) {
    h2_low[j] = __float2half(__low2float(h2y[j]));  // exact: the value is a half already
    h2_high[j] = __float2half(__high2float(h2y[j]));
    b2_low[j] = __float2bfloat16(__low2float(b2y[j]));
    b2_high[j] = __float2bfloat16(__high2float(b2y[j]));
  }
  std::vector<float> xs_reversed(xs.rbegin(), xs.rend()), ys_reversed(ys.rbegin(), ys.rend());
  check_half_unary(xs, h2_low, 10, "__half2 (low)");
  check_half_unary(xs_reversed, h2_high, 10, "__half2 (high)");
  check_half_unary(ys, b2_low, 7, "__nv_bfloat162 (low)");
  check_half_unary(ys_reversed, b2_high, 7, "__nv_bfloat162 (high)");
}

}  // namespace
}  // namespace inferlab::sim::simt_tests
