#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <vector>

#include "common/huge_pages.h"
#include "kernels/kv/kv_cache.h"
#include "kernels/kv/kv_cache.h"

namespace inferlab {
namespace {

uintptr_t address(const void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

TEST(HugePages, LargeBuffersStartOnAHugePageAndHoldTheirValues) {
  const size_t n = 5 * kHugePageBytes + 3;  // not a whole number of huge pages
  HugePageBuffer<int8_t> buffer(n);
  EXPECT_EQ(address(buffer.data()) % kHugePageBytes, 0u);
  for (size_t i = 0; i < n; i += 4093) ASSERT_EQ(buffer[i], 0) << "value-initialised element " << i;
  for (size_t i = 0; i < n; ++i) buffer[i] = int8_t(i * 7);
  for (size_t i = 0; i < n; i += 1021) ASSERT_EQ(buffer[i], int8_t(i * 7)) << "element " << i;
  EXPECT_EQ(buffer[n - 1], int8_t((n - 1) * 7));
}

TEST(HugePages, SmallBuffersAreCacheLineAligned) {
  for (const size_t n : {size_t(1), size_t(17), size_t(1000), size_t(100000)}) {
    HugePageBuffer<float> buffer(n, 1.5f);
    EXPECT_EQ(address(buffer.data()) % 64, 0u) << n << " floats";
    EXPECT_EQ(buffer.back(), 1.5f);
  }
}

TEST(HugePages, LargeBuffersAreAdvisedAsHugePages) {
#if defined(__linux__)
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled"))
    GTEST_SKIP() << "this kernel has no transparent huge pages (no /sys/kernel/mm/transparent_hugepage)";
  HugePageBuffer<uint16_t> large(3 * kHugePageBytes / 2);
  EXPECT_TRUE(advised_huge_pages(large.data(), large.size() * sizeof(uint16_t)))
      << "a buffer of " << large.size() * 2 << " bytes should be advised MADV_HUGEPAGE (VmFlags hg)";
  const std::vector<uint16_t> plain(large.size());  // the check itself tells the two apart
  EXPECT_FALSE(advised_huge_pages(plain.data(), plain.size() * sizeof(uint16_t)));
#else
  GTEST_SKIP() << "huge-page advice is Linux only";
#endif
}

TEST(HugePages, EveryKvCacheFormatKeepsItsRowsOnHugePages) {
  const KvCacheShape shape{2, 2, 4096, 128};  // 2 MiB of int8 per K, 4 MiB of fp16
  const KvCache fp16(shape, KvDtype::fp16);
  EXPECT_EQ(address(fp16.k_bytes().data()) % kHugePageBytes, 0u);
  EXPECT_EQ(address(fp16.v_bytes().data()) % kHugePageBytes, 0u);
  const KvCache int8(shape, KvFormat::int8(KeyScaling::per_token, ScaleDtype::fp32));
  EXPECT_EQ(address(int8.k_int8().data()) % kHugePageBytes, 0u);
  EXPECT_EQ(address(int8.v_int8().data()) % kHugePageBytes, 0u);
}

}  // namespace
}  // namespace inferlab
