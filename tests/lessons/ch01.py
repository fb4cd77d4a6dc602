"""Chapter 01's numbers: the worked example's FLOPs, bytes, intensities and floors from L, d and the
saved roofline; the traffic models' long-L limits; the roofline runs' ridge points; and the
measured table from docs/plots/ch01-bench.json (with docs/plots/ch01-roofline-machine.json)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_lessons import Claim, row  # noqa: E402

H100_FP16_DENSE, H100_HBM = 989.4e12, 3.35e12  # NVIDIA's H100 SXM data sheet (dense fp16/bf16 tensor, HBM3)
FMA_LATENCY_CYCLES, FLOPS_PER_FMA = 4, 2
PEAK_LANES = 2 * 2 * 16 * 2  # 2 cores × 2 FMA units × 16 fp32 lanes × 2 FLOPs
L7_LAYERS, L7_DIM, L7_HIDDEN, L7_VOCAB = 32, 4096, 11008, 32000  # LLaMA-7B, for the intro's analyze figure
# Figures the lesson once printed wrong, put back by the self-test: none yet (the §4 range once said "the
# table's" 9.6–10 GFLOP/s, which only the d = 64 rows span; the d = 128 rows go down to 9.2).
WRONG_BEFORE = []


def article_ai(L, d, e):
    return 4 * L * L * d / (e * (L * L + 4 * L * d))


def unfused_ai(L, d, e):
    return 4 * L * L * d / (e * (4 * L * L + 4 * L * d))


def claims(lab):
    machine = lab.json("ch01-roofline-machine.json")
    bench = lab.json("ch01-bench.json")
    ctx = bench["context"]
    peak, avx2, triad = float(ctx["roofline_peak_gflops"]), float(ctx["roofline_peak_avx2_gflops"]), \
        float(ctx["roofline_triad_gbs"])
    assert abs(peak - machine["peak_gflops"]) < 1e-3 and abs(triad - machine["triad_gbs"]) < 1e-3, \
        "the benchmark's roofline is the committed machine file"
    ridge = peak / triad
    med = {b["name"].split("/manual_time")[0].replace("prefill/cpu/naive/", ""): b
           for b in bench["benchmarks"] if b.get("aggregate_name") == "median"}

    # The intro: LLaMA-7B's decode step at batch 16, 4096 tokens, fp16 (what `inferlab analyze` computes).
    linear = L7_LAYERS * (4 * L7_DIM ** 2 + 3 * L7_DIM * L7_HIDDEN) + L7_VOCAB * L7_DIM
    weights_read = 2 * (linear + (2 * L7_LAYERS + 1) * L7_DIM)
    step_flops = 16 * (2 * linear + 4 * 4096 * L7_DIM * L7_LAYERS)
    step_bytes = weights_read + 16 * 4096 * L7_LAYERS * 2 * L7_DIM * 2
    c0 = [Claim(r"--model llama-7b --batch 16 --context 4096` gives ([\d.]+) FLOP/byte", [step_flops / step_bytes],
                "batch 16 × (2 · linear weights + 4 · L · H · N) / (weights + KV)")]

    # §3: the three roofline runs (the lesson's table is their input) and the saved roofline.
    c = c0 + [row("| fp32 peak, AVX-512", [str(run)], [None, None, None, p / t], f"run {run}: ridge = peak / triad")
         for run, p, t in [(1, 496.5, 30.0), (2, 483.8, 29.8), (3, 495.4, 29.8)]]
    c += [Claim(r"roofline the benchmark ran against: P = (\d+) GFLOP/s \(AVX-512\), AVX2 (\d+), B = ([\d.]+) GB/s",
                [peak, avx2, triad], "ch01-bench.json's context (the saved roofline)"),
          Claim(r"So here \*\*P ≈ (\d+) GFLOP/s and B ≈ ([\d.]+) GB/s: the ridge point is ≈ ([\d.]+) FLOP/byte",
                [peak, triad, ridge], "peak / triad"),
          Claim(r"the lower, AVX2 roof \(≈ (\d+) GFLOP/s\)", [avx2], "the saved AVX2 peak"),
          Claim(r"Two cores reach ~(\d+) GB/s here", [triad], "the triad, \"~\"", rel=0.05)]

    # §4: the worked example, one head, L = 1024, d = 64, fp32.
    L, d, e = 1024, 64, 4
    flops, causal = 4 * L * L * d, 2 * d * L * (L + 1)
    article, unfused, fused = e * (L * L + 4 * L * d), e * (4 * L * L + 4 * L * d), e * 4 * L * d
    floor_ms = flops / (peak * 1e9) * 1e3
    r = med["L:1024/d:64"]
    per_head_ms = r["real_time"] / 4
    ghz = peak / PEAK_LANES
    chain_gflops = FLOPS_PER_FMA / FMA_LATENCY_CYCLES * ghz
    d64 = [med[f"L:{n}/d:64"]["GFLOP/s"] for n in (64, 128, 256, 512, 1024, 2048)]
    c += [Claim(r"FLOPs = 4 · 1024² · 64 = \*\*([\d.]+) MFLOP\*\* \(causal: 2 · 64 · 1024 · 1025 = ([\d.]+) MFLOP\)",
                [flops / 1e6, causal / 1e6], "4·L²·d and 2·d·L·(L+1)"),
          Claim(r"= \*\*([\d.]+) MB\*\*, so$", [article / 1e6], "e·(L² + 4·L·d)"),
          Claim(r"AI = ([\d.]+) / ([\d.]+) = \*\*([\d.]+) FLOP/byte\*\*", [flops / 1e6, article / 1e6, flops / article],
                "article AI"),
          Claim(r"time is ([\d.]+) MFLOP / (\d+) GFLOP/s = \*\*([\d.]+) ms\*\*", [flops / 1e6, peak, floor_ms],
                "FLOPs / peak"),
          Claim(r"Unfused bytes = .* = \*\*([\d.]+) MB\*\*, AI = \*\*([\d.]+)\*\*", [unfused / 1e6, flops / unfused],
                "e·(4·L² + 4·L·d)"),
          Claim(r"Memory time ([\d.]+) MB / ([\d.]+) GB/s = ([\d.]+) ms", [unfused / 1e6, triad, unfused / triad / 1e6],
                "unfused bytes / triad"),
          Claim(r"Fused bytes = 4 · 4 · 1024 · 64 = ([\d.]+) MB, AI = L/4 = \*\*(\d+)\*\*", [fused / 1e6, flops / fused],
                "e·4·L·d"),
          Claim(r"`cpu/naive` measures ([\d.]+) GFLOP/s at this size", [r["GFLOP/s"]], "ch01-bench.json L:1024/d:64"),
          Claim(r"\*\*([\d.]+)% of the$", [r["roof_pct"]], "roof_pct, L:1024/d:64"),
          Claim(r"roof\*\*: ([\d.]+) ms per head, about \d+ times the ([\d.]+) ms floor",
                [per_head_ms, floor_ms], "the median ms / 4 heads; FLOPs / peak"),
          Claim(r"ms per head, about (\d+) times the", [per_head_ms / floor_ms], "per head / the floor, \"about\"",
                rel=0.05),
          Claim(r"at this machine's ~([\d.]+) GHz \((\d+) GFLOP/s = 2 cores", [ghz, peak], "peak / (2·2·16·2)"),
          Claim(r"that is \*\*≈ ([\d.]+) GFLOP/s\*\*", [chain_gflops], "2 FLOPs per 4 cycles at the clock"),
          Claim(r"The d = 64 rows' ([\d.]+)–(\d+) GFLOP/s is the blend", [min(d64), max(d64)], "the d = 64 rows"),
          Claim(r"single chain would need 2·L²·d / ([\d.]+) GFLOP/s = (\d+) ms per head",
                [chain_gflops, 2 * L * L * d / (chain_gflops * 1e9) * 1e3], "Q·Kᵀ's FLOPs at one chain's rate"),
          Claim(r"^loops took ([\d.]+) ms\.", [per_head_ms], "the median ms / 4 heads")]

    # §2 and §5: the traffic models' limits.
    c += [Claim(r"\(L/2 for g = 1, ([\d.]+)·L for$", [4 / 5], "g/(g + 1), g = 4"),
          Claim(r"With d = 128 that is (\d+) FLOP/byte, at or below an H100's ridge point \(≈ (\d+)\)",
                [2 * 128, H100_FP16_DENSE / H100_HBM], "2·d; 989.4 TFLOP/s / 3.35 TB/s"),
          Claim(r"L = 2048 gives 2·128/\(1 \+ 512/2048\) = ([\d.]+) FLOP/byte", [article_ai(2048, 128, 2)],
                "the article model, fp16"),
          Claim(r"^under the article's model, ([\d.]+) under the unfused model and (\d+) fused",
                [unfused_ai(2048, 128, 2), 2048 / 2], "unfused and fused, fp16"),
          Claim(r"^([\d.]+) at L = 2048 \(limit (\d+)\), comfortably right of this machine's ridge \(≈ ([\d.]+)\)",
                [article_ai(2048, 64, 4), 64, ridge], "the article model in fp32, d = 64; its limit d"),
          Claim(r"saturates at d/4 = (\d+)", [64 / 4], "d/4")]

    # §6: the measured table, ch01-bench.json's medians.
    for n_d in (64, 128):
        for n_l in (64, 128, 256, 512, 1024, 2048):
            b = med[f"L:{n_l}/d:{n_d}"]
            c.append(row("| MB (article) |", ["cpu/naive", str(n_l), str(n_d)],
                         [b["FLOPs"] / 1e6, b["bytes"] / 1e6, b["AI"], b["AI_unfused"], b["real_time"], b["GFLOP/s"],
                          b["GB/s"], b["roof_GFLOP/s"], b["roof_pct"]], f"L = {n_l}, d = {n_d}: the medians"))
    c += [Claim(r"d = 64 never passes it \(at most ([\d.]+)\) and d = 128 only$",
                [max(med[f"L:{n}/d:64"]["AI_unfused"] for n in (64, 128, 256, 512, 1024, 2048))], "d = 64's AI_unfused"),
          Claim(r"^from L = 256 \(([\d.]+)\)", [med["L:256/d:128"]["AI_unfused"]], "L = 256, d = 128's AI_unfused"),
          Claim(r"^(\d+) MiB at L = 2048, even fits", [2048 * 2048 * 4 / 2 ** 20], "L² fp32 scores")]
    assert med["L:128/d:128"]["AI_unfused"] < ridge < med["L:256/d:128"]["AI_unfused"]
    return c
