// Chapter 06: every decode version of chapters 03–05 reads a paged cache through its layout —
// no paged copy of any kernel. Each registered version on this backend, for block sizes 1, 2,
// 7, 16, 32 and 128, over blocks handed out in scattered order (no logical neighbour physically
// next to its predecessor, so ignoring the block table cannot pass by luck):
//   - equals the float64 oracle over the same tokens, and its own run on the contiguous copy
//     within the version's tolerance (not bit for bit: the CPU passes group keys by run, and a
//     compiler may contract a multiply-add into an FMA differently in each layout's
//     instantiation — g++ did so in the emulator's build of cuda/decode_split);
//   - replays generation: prefill, then append + decode step by step, every step equal to row t
//     of the causal prefill (the append writing through the block table);
//   - on the emulator, gives the same bits under every thread schedule.
// Ragged batches, GQA, every element type (INT8 with fp32 and fp16 scales, FP8).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/compare.h"
#include "kernels/kv/kv_factories.h"
#include "kernels/registry.h"
#include "tests/support/decode_check.h"
#include "tests/support/seeded.h"
#include "tests/support/test_backend.h"

namespace inferlab {
namespace {

using testing::kTestBackend;

const std::vector<int64_t> kBlockSizes{1, 2, 7, 16, 32, 128};

struct PagedCase {
  const DecodeVersion* version = nullptr;
  KvFormat format;
  int64_t block_size = 0;
};

std::vector<PagedCase> paged_cases() {
  std::vector<PagedCase> cases;
  for (const DecodeVersion& v : decode_versions()) {
    if (v.backend != kTestBackend) continue;
    std::vector<KvFormat> formats{KvFormat(v.input)};
    if (v.input == KvDtype::int8) formats.push_back(KvFormat::int8(KeyScaling::per_token, ScaleDtype::fp16));
    for (const KvFormat& format : formats)
      for (const int64_t block_size : kBlockSizes) cases.push_back({&v, format, block_size});
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<PagedCase>& info) {
  std::string name = info.param.version->name + "_" + info.param.format.name() + "_bs" +
                     std::to_string(info.param.block_size);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

class PagedDecode : public ::testing::TestWithParam<PagedCase> {};

// Paged = contiguous twin = float64 oracle, for two ragged GQA shapes (d 80 and 64).
TEST_P(PagedDecode, EqualsItsContiguousTwinAndTheOracle) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  const PagedCase& p = GetParam();
  struct Shape4 {
    std::vector<int64_t> lengths;
    int64_t heads, kv_heads, d;
  };
  // The same lengths on every backend (the emulator's decode grids are small): a machine without
  // a GPU checks the kernels on the shapes a GPU runs, 150 tokens crossing a block of 128.
  const int64_t longest = 150;
  const std::vector<Shape4> shapes{{{longest, 1, 18, 33}, 8, 2, 80}, {{7, longest - 4}, 4, 4, 64}};
  for (const Shape4& shape : shapes) {
    testing::SeededRng rng;
    const int64_t B = int64_t(shape.lengths.size()), max_len = longest + 3;
    const Tensor<float> k = rng.normal_tensor({B, shape.kv_heads, max_len, shape.d});
    const Tensor<float> v = rng.normal_tensor({B, shape.kv_heads, max_len, shape.d});
    const KvCache contiguous = make_kv_cache(k, v, shape.lengths, p.format);
    const KvCache paged = to_paged(contiguous, p.block_size, rng.seed());
    const Tensor<float> q = rng.normal_tensor({B, shape.heads, shape.d});

    Tensor<float> out_contiguous(q.shape()), out_paged(q.shape());
    out_contiguous.poison();
    out_paged.poison();
    p.version->run(q, contiguous, out_contiguous);
    p.version->run(q, paged, out_paged);

    const Tolerance tolerance = tolerance_for(p.version->precision);
    const Comparison oracle = compare_to_oracle(out_paged, decode_reference(q, contiguous), tolerance);
    EXPECT_TRUE(oracle.ok) << "paged output vs the float64 oracle, d = " << shape.d << ":\n" << oracle.report();
    Tensor<double> twin(q.shape());
    for (int64_t i = 0; i < q.size(); ++i) twin[i] = out_contiguous[i];
    const Comparison same = compare_to_oracle(out_paged, twin, tolerance);
    EXPECT_TRUE(same.ok) << "paged vs the contiguous run of the same version, d = " << shape.d << ":\n"
                         << same.report();
  }
}

// A cuda build without nvcc has no versions to instantiate with.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PagedDecode);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PagedGeneration);

INSTANTIATE_TEST_SUITE_P(EveryDecodeVersion, PagedDecode, ::testing::ValuesIn(paged_cases()), case_name);

// Generation over a paged cache: the append writes through the block table (cpu/append, or the
// device slot-mapped append), the decode reads through it, every step equals the prefill oracle.
// fp32 and fp16 caches (the quantized replays are chapter 04's; their paged decode is above).
class PagedGeneration : public ::testing::TestWithParam<const DecodeVersion*> {};

TEST_P(PagedGeneration, EveryStepEqualsThePrefillOracle) {
  INFERLAB_SKIP_WITHOUT_BACKEND();
  const DecodeVersion& version = *GetParam();
  const KvAppendVersion& append =
      kTestBackend == Backend::cpu ? find_version(kv_append_versions(), "cpu/append", Backend::cpu, version.input)
                                   : kv_append_version_for(kTestBackend, version.input);
  for (const int64_t block_size : {int64_t(1), int64_t(7), int64_t(16)}) {
    testing::DecodeCase c{{9, 3, 17}, 3, 8, 2, 80};
    c.block_size = block_size;
    EXPECT_TRUE(testing::decode_steps_match_prefill(version.run, version.input, append.run, c));
    testing::DecodeCase full{{12, 16}, 4, 4, 4, 64, 0};  // the longest sequence fills its last block
    full.block_size = block_size;
    EXPECT_TRUE(testing::decode_steps_match_prefill(version.run, version.input, append.run, full));
  }
}

std::vector<const DecodeVersion*> plain_versions() {
  std::vector<const DecodeVersion*> versions;
  for (const DecodeVersion& v : decode_versions())
    if (v.backend == kTestBackend && !KvFormat(v.input).quantized()) versions.push_back(&v);
  return versions;
}

INSTANTIATE_TEST_SUITE_P(Fp32AndFp16, PagedGeneration, ::testing::ValuesIn(plain_versions()),
                         [](const ::testing::TestParamInfo<const DecodeVersion*>& info) {
                           std::string name = info.param->name + "_" + std::string(to_string(info.param->input));
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

#if defined(INFERLAB_TEST_BACKEND_SIM)
// The paged kernels (every element type) under forward, reverse and shuffled thread orders: the
// same bits.
TEST(PagedDecodeSchedules, EveryDeviceVersionIsScheduleIndependent) {
  for (const DecodeVersion& v : decode_versions()) {
    if (v.backend != Backend::sim) continue;
    const DecodeVersion* version = &v;
    testing::DecodeCase c{{23, 5}, 1, 4, 2, 64};
    c.block_size = 7;
    EXPECT_TRUE(testing::decode_same_under_schedules(version->run, version->input, c)) << version->name;
  }
}
#endif

}  // namespace
}  // namespace inferlab
