// Chapter 07's part of `inferlab tour`: continuous batching. stories260K (models/, a trained
// llama2.c checkpoint) generates from BOS on the lab's kernels — the ids the float64 reference
// gives (tests/07-continuous-batching/data/); then the same requests served by static and by
// continuous batching with the same KV memory, side by side; then one decode step of a random
// model against the batch size, the seed's "decode is memory-bound" made precise for a whole
// model. A few seconds; the sweeps are `./inferlab bench ch07`.
#include <filesystem>
#include <iomanip>
#include <string>
#include <vector>

#include "chapters/07-continuous-batching/serving_study.h"
#include "chapters/tour.h"
#include "common/timer.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/serving_run.h"
#include "runtime/model/llama_model.h"

namespace inferlab {

namespace {

// models/stories260K.bin in the working directory or the source tree this binary was built from;
// "" when missing.
std::string stories_path() {
  for (const std::string& path : {std::string("models/stories260K.bin"),
                                 std::string(INFERLAB_SOURCE_DIR) + "/models/stories260K.bin"})
    if (std::filesystem::exists(path)) return path;
  return "";
}

}  // namespace

void tour_chapter07(std::ostream& out, const Roofline& roofline, const TourOptions& options) {
  out << "== Chapter 07: continuous batching (a scheduler serving many requests on a small Llama) ==\n";

  // 1. A trained checkpoint, generated on the lab's kernels.
  if (const std::string path = stories_path(); !path.empty()) {
    const model::LlamaModel m(model::load_llama2c(path));
    engine::Request r;
    r.prompt = {1};  // BOS
    r.sampling.max_new_tokens = options.quick ? 16 : 64;
    const Stopwatch stopwatch;
    const engine::RequestOutput o = engine::generate_alone(m, r);
    const double seconds = stopwatch.seconds();
    out << "stories260K (" << m.config().describe() << "), greedy from BOS, " << o.tokens.size()
        << " tokens in " << std::fixed << std::setprecision(3) << seconds << " s:\n  ";
    for (size_t i = 0; i < o.tokens.size(); ++i) out << (i ? " " : "") << o.tokens[i];
    out << "\n  (the float64 reference gives the same ids: tests/07-continuous-batching/data/; the model's\n"
           "   greedy text is repetitive — a trained checkpoint with an exact reference, not a demo of language)\n";
  } else {
    out << "stories260K: models/stories260K.bin not found next to the sources; skipped\n";
  }

  // 2. Static vs continuous batching on the same requests and the same KV memory.
  {
    const model::LlamaModel m(model::load_model("random:bench,dim=256,hidden=688,layers=4,heads=8,kv_heads=4,vocab=4096"));
    serving::Workload w;
    w.requests = options.quick ? 12 : 32;
    w.prompt_min = 8, w.prompt_max = 64, w.output_min = 8, w.output_max = options.quick ? 48 : 128;
    const auto requests = serving::make_requests(w, m.config().vocab_size);
    engine::EngineConfig c;
    c.block_size = 16;
    c.num_blocks = 64;  // 1024 tokens of KV for both policies
    c.max_seq_len = 256;
    c.max_num_seqs = 32;
    c.prefix_caching = false;
    out << "Serving " << w.requests << " requests (prompts " << w.prompt_min << "–" << w.prompt_max << ", outputs "
        << w.output_min << "–" << w.output_max << " tokens, all at t = 0) on a " << m.config().describe()
        << " random model,\n64 blocks of 16 tokens of KV; real clock:\n";
    out << "  policy        tokens/s   TTFT p50   TPOT p50   steps   max batch\n";
    double static_rate = 0;
    for (const auto policy : {engine::BatchingPolicy::static_batch, engine::BatchingPolicy::continuous}) {
      c.policy = policy;
      const engine::ServingRun run = engine::serve(std::string(engine::to_string(policy)), m, c, requests);
      const auto& s = run.summary;
      out << "  " << std::left << std::setw(12) << run.name << std::right << std::fixed << std::setprecision(0)
          << std::setw(10) << s.tokens_per_second << std::setprecision(3) << std::setw(10) << s.ttft.p50 << " s"
          << std::setprecision(4) << std::setw(9) << s.tpot.p50 << " s" << std::setw(8) << run.stats.steps
          << std::setw(12) << run.stats.max_running;
      if (policy == engine::BatchingPolicy::static_batch) {
        static_rate = s.tokens_per_second;
      } else {
        out << "   (" << std::setprecision(1) << s.tokens_per_second / static_rate << "× static)";
      }
      out << "\n";
    }
    out << "  static reserves max_seq_len = 256 tokens per request (4 fit) and waits for each batch's slowest;\n"
           "  continuous admits while blocks are free and replaces a finished request at the next step.\n";
  }

  // 3. One decode step of a whole model against B: weights are read once per step, so AI ≈ B.
  {
    const model::LlamaModel m(model::load_model(options.quick ? "random:bench,dim=256,hidden=688,layers=4,heads=8,kv_heads=4,vocab=4096"
                                                              : "random:bench,layers=4"));
    const int64_t context = 128, max_batch = 32;
    KvCache cache = serving::random_decode_cache(m, max_batch, context, 5);
    out << "One decode step of a " << m.config().describe() << " random model, " << context
        << " cached tokens per sequence\n(weights " << std::setprecision(0) << double(m.weights().bytes()) / 1e6
        << " MB fp32; the roofline: " << roofline.peak_gflops << " GFLOP/s peak, " << roofline.read_gbs
        << " GB/s read):\n";
    out << "     B      AI   ms/step   GFLOP/s   tokens/s   % of roof\n";
    for (int64_t B = 1; B <= max_batch; B *= (options.quick ? 4 : 2)) {
      const model::StepPlan fb = serving::decode_batch(m, cache, B, context);
      const Cost cost = m.step_cost(fb);
      // One untimed call (pages, caches, threads), then the fastest of 1 or 3.
      const double best = best_time_seconds(options.quick ? 1 : 3, [&] { m.forward(fb, cache); });
      const double gflops = cost.flops / best / 1e9;
      const double roof = std::min(roofline.peak_gflops, cost.arithmetic_intensity() * roofline.read_gbs);
      out << std::setw(6) << B << std::setprecision(1) << std::setw(8) << cost.arithmetic_intensity()
          << std::setprecision(2) << std::setw(10) << best * 1e3 << std::setprecision(1) << std::setw(10) << gflops
          << std::setprecision(0) << std::setw(11) << double(B) / best << std::setw(12) << 100.0 * gflops / roof
          << "\n";
    }
    out << "  (fastest of " << (options.quick ? 1 : 3) << " calls; decode *attention* stays at ~1 FLOP/byte, but the\n"
           "   whole step's AI grows ~B until the KV reads catch up with the weights: batching is the decode\n"
           "   optimization. ./inferlab bench ch07 measures B = 1…64 on a 101 M-parameter model.)\n";
  }
  out << "\n";
}

}  // namespace inferlab
