// Chapter 06's part of `inferlab tour`: PagedAttention. The memory a contiguous max-length
// reservation wastes and what paging keeps (analysis/kv_capacity.h, LLaMA-7B sizes);
// one decode step over the same tokens held contiguously and paged over scattered blocks —
// cpu/decode_simd timed side by side, cuda/decode on the emulator, both against the float64
// oracle; then the block manager sharing a system prompt through the prefix cache and a fork
// through copy-on-write. About a second; the sweeps are `./inferlab bench ch06`.
#include <iomanip>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/inference_cost.h"
#include "analysis/kv_capacity.h"
#include "analysis/model_shape.h"
#include "chapters/03-kv-cache-decode/random_cache.h"
#include "chapters/tour.h"
#include "common/compare.h"
#include "common/rng.h"
#include "kernels/kv/kv_factories.h"
#include "kernels/registry.h"
#include "runtime/paged/block_manager.h"

namespace inferlab {

namespace {

// "rel. error 1.2e-07  ok" for @p c.
std::string verdict(const Comparison& c) {
  std::ostringstream text;
  text << "rel. error " << std::scientific << std::setprecision(1) << c.rel_frobenius << (c.ok ? "  ok" : "  WRONG");
  return text.str();
}

}  // namespace

void tour_chapter06(std::ostream& out, const Roofline& roofline, const TourOptions& options) {
  out << "== Chapter 06: PagedAttention (KV memory in blocks, a block table per sequence) ==\n";
  Rng rng(Rng::fresh_seed());

  // 1. Waste: contiguous max-length slots vs blocks, for ShareGPT-like lengths.
  {
    analysis::KvWasteSettings settings =
        analysis::kv_waste_settings(analysis::find_model("llama-7b"), analysis::KvFormat::fp16);
    settings.requests = options.quick ? 500 : 10000;
    const analysis::KvWasteReport report = analysis::kv_waste_report(settings);
    const analysis::KvWasteRow* contiguous = &report.rows.front();
    const analysis::KvWasteRow* block16 = nullptr;
    for (const analysis::KvWasteRow& row : report.rows)
      if (row.waste.block_size == 16) block16 = &row;
    out << std::fixed << std::setprecision(1) << "Memory (" << settings.label << ", " << settings.requests
        << " ShareGPT-like requests, mean " << report.mean_length << " tokens, 16 GiB of KV):\n"
        << "  contiguous " << settings.max_seq_len << "-token slots: " << 100.0 * contiguous->waste.share_held()
        << "% of reserved bytes hold tokens -> " << contiguous->sequences_fit << " sequences fit\n";
    if (block16)
      out << "  paged, blocks of 16:         " << 100.0 * block16->waste.share_held()
          << "% (waste < one block per sequence) -> " << block16->sequences_fit << " sequences fit\n";
    out << "  sharing at block 16: n = 4 parallel samples save " << 100.0 * report.parallel_sampling.saving() << "%, a "
        << settings.system_prompt_tokens << "-token system prompt saves " << 100.0 * report.system_prompt.saving()
        << "%\n"
        << "  (the whole table: ./inferlab analyze --kv-waste; the vLLM paper measured 20.4-38.2% held before "
           "paging)\n\n";
  }

  // 2. The same tokens, contiguous and paged: one decode step each.
  {
    const int64_t batch = options.quick ? 2 : 4, heads = 8, kv_heads = 8, d = 128, L = options.quick ? 1024 : 8192;
    const KvCache contiguous = random_full_cache({batch, kv_heads, L, d}, KvDtype::fp16, rng);
    const KvCache paged = to_paged(contiguous, 16, rng.seed());
    const Tensor<float> q = rng.normal_tensor({batch, heads, d});
    const Tensor<double> expected = decode_reference(q, contiguous);
    const DecodeVersion& simd = find_decode_version("cpu/decode_simd", Backend::cpu, KvDtype::fp16);
    out << "One decode step, batch " << batch << ", L=" << L << ", " << heads << " heads, d=" << d << ", fp16 cache ("
        << std::setprecision(0) << contiguous.bytes() / 1048576.0
        << " MiB); paged: blocks of 16 tokens in scattered order (" << paged.paging().num_blocks << " blocks):\n";
    out << "  " << std::left << std::setw(28) << "version, layout" << std::right << std::setw(9) << "ms" << std::setw(9)
        << "GB/s" << std::setw(9) << "% read"
        << "   vs float64 oracle\n";
    double seconds[2] = {0.0, 0.0};
    int row = 0;
    for (const KvCache* cache : {&contiguous, &paged}) {
      Tensor<float> o(q.shape());
      o.poison();
      simd.run(q, *cache, o);
      const Comparison c = compare_to_oracle(o, expected, tolerance_for(simd.precision));
      const DecodeMeasurement m = measure_decode(simd, *cache, heads, options.quick);
      seconds[row] = m.seconds;
      out << "  " << std::left << std::setw(28) << (simd.name + (row == 0 ? ", contiguous" : ", paged 16"))
          << std::right << std::fixed << std::setprecision(2) << std::setw(9) << m.seconds * 1e3 << std::setprecision(1)
          << std::setw(9) << m.gbs() << std::setw(8) << 100.0 * m.gbs() / roofline.read_gbs << "%   " << verdict(c)
          << "\n";
      ++row;
    }
    out << std::fixed << std::setprecision(2) << "  paged / contiguous time: " << seconds[1] / seconds[0]
        << " (fastest calls; the medians over block sizes 1-128 are ./inferlab bench ch06)\n";
    // cuda/decode on the emulator reads the same paged pool through the device block table.
    const KvCache small =
        to_paged(random_full_cache({2, 2, options.quick ? 37 : 77, 64}, KvDtype::fp32, rng), 7, rng.seed());
    const Tensor<float> q_small = rng.normal_tensor({2, 4, 64});
    const DecodeVersion& device = find_decode_version("cuda/decode", Backend::sim, KvDtype::fp32);
    Tensor<float> o(q_small.shape());
    o.poison();
    device.run(q_small, small, o);
    out << "  " << device.name << " on the sim backend over a paged pool (blocks of 7, GQA 2:1): "
        << verdict(compare_to_oracle(o, decode_reference(q_small, small), tolerance_for(device.precision))) << "\n\n";
  }

  // 3. Sharing blocks: a common system prompt through the prefix cache, a fork through
  //    copy-on-write (runtime/paged/block_manager.h — bookkeeping only, over block tables that
  //    live in the caller's sequences: here plain paged::BlockTable values, the engine's
  //    Sequence holds one each).
  {
    const int64_t block = 16, system_tokens = 341, requests = 8;
    std::vector<int32_t> system_prompt(static_cast<size_t>(system_tokens));
    for (int32_t& t : system_prompt) t = int32_t(rng.integer(0, 31999));
    int64_t blocks[2] = {0, 0}, cached = 0;
    for (const bool caching : {false, true}) {
      paged::BlockManager manager(4096, block, caching);
      std::vector<paged::BlockTable> tables(static_cast<size_t>(requests));  // the requests' own tables
      std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(requests));
      std::vector<paged::SequenceBlocks> live;
      for (int64_t r = 0; r < requests; ++r) {
        std::vector<int32_t> prompt = system_prompt;
        for (int i = 0; i < 40; ++i) prompt.push_back(int32_t(rng.integer(0, 31999)));
        const int64_t before = manager.num_free_blocks();
        paged::BlockTable& table = tables[size_t(r)];
        const paged::PromptAllocation a = manager.allocate(table, prompt);
        manager.mark_computed(table, int64_t(prompt.size()));
        blocks[caching] += before - manager.num_free_blocks();
        if (caching) cached += a.cached_tokens;
        live.push_back({r, &table, {}});
        prompts[size_t(r)] = std::move(prompt);
        live.back().tokens = prompts[size_t(r)];
      }
      manager.check_invariants(live);
    }
    paged::BlockManager manager(64, block);
    std::vector<int32_t> prompt(40, 7);
    paged::BlockTable parent;
    manager.allocate(parent, prompt);
    manager.mark_computed(parent, 40);
    paged::BlockTable child = manager.fork(parent);
    prompt.push_back(1);
    const paged::SlotAllocation first = manager.append_slot(child, prompt);
    prompt.push_back(2);
    const paged::SlotAllocation second = manager.append_slot(child, prompt);
    out << "Sharing, blocks of " << block << ": " << requests << " requests = a " << system_tokens
        << "-token system prompt + 40 tokens each.\n"
        << "  without the prefix cache: " << blocks[0] << " blocks; with it: " << blocks[1] << ", and " << cached
        << " prompt tokens not recomputed\n"
        << "  (the first request computes the system prompt, the others take its full blocks by their chained hash).\n"
        << "  Fork a 40-token sequence (2 full blocks + 8 tokens) and append to the child: the first append copies\n"
        << "  the shared partial block (copy-on-write: " << (first.copy ? "yes" : "no")
        << "), the second writes in place (" << (second.copy ? "copied again: WRONG" : "no copy")
        << "); the 2 full blocks stay shared.\n\n";
  }
}

}  // namespace inferlab
