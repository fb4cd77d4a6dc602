"""Chapter 03's numbers: the KV cache's bytes and decode's intensity from the shapes, the worked
example's floors, the context a GPU block's shared memory holds, the decode sweep and the 8× LLC
points from docs/plots/ch03-bench.json (against the saved read roof of ch01-roofline-machine.json),
LLaMA-7B's decode step (§7) and the launch-bound prediction for a small model on a GPU."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_lessons import NUMBER, Claim  # noqa: E402

KIB, MIB, GIB = 1024, 2 ** 20, 2 ** 30
L7_LAYERS, L7_DIM, L7_HIDDEN, L7_VOCAB = 32, 4096, 11008, 32000  # LLaMA-7B
L3_KV_HEADS, L3_HEAD_DIM, L3_LAYERS, L3_HIDDEN, L3_VOCAB = 8, 128, 32, 14336, 128256  # Llama-3-8B (untied head)
H100_HBM, A100_HBM, A100_FP16 = 3.35e12, 1555e9, 312e12
BENCH_HEADS, BENCH_D = 8, 128
# SmolLM2-135M-like: 30 layers, hidden 576, 9 query and 3 KV heads of 64, MLP 1536, vocabulary 49152, tied.
S_LAYERS, S_DIM, S_Q, S_KV, S_HD, S_MLP, S_VOCAB = 30, 576, 9, 3, 64, 1536, 49152
LAUNCH_US = (3.3, 6.0)
KERNELS_A_LAYER, KERNELS_AFTER = 12, 3
# (the figure as the lesson prints it now, the wrong one it printed before): each must be caught.
WRONG_BEFORE = [("is 4 GiB, 4.30 GB read for the same", "is 4 GiB, 4.29 GB read for the same"),
                ("| 15.2 (35.1) | 82.6 (6.4) |", "| 15.2 (35.1) | 82.7 (6.4) |"),
                ("| 32 MiB | 2979 (11.3) |", "| 32 MiB | 2980 (11.3) |"),
                ("and 21–22 GB/s with an", "and 21–23 GB/s with an")]


def claims(lab):
    read_saved = lab.json("ch01-roofline-machine.json")["read_gbs"]
    kv_layer = 2 * L7_DIM * 2  # fp16, MHA
    linear = L7_LAYERS * (4 * L7_DIM ** 2 + 3 * L7_DIM * L7_HIDDEN) + L7_VOCAB * L7_DIM  # the head, not the embedding
    weights_read = 2 * linear + 2 * (2 * L7_LAYERS + 1) * L7_DIM  # and the norms

    def step(batch, ctx):
        flops = batch * (2 * linear + 4 * ctx * L7_DIM * L7_LAYERS)
        kv = batch * ctx * kv_layer * L7_LAYERS
        return flops, weights_read + kv, kv
    f2k, b2k, _ = step(16, 2048)
    f4k, b4k, kv4k = step(16, 4096)
    c = [Claim(r"^([\d.]+) FLOP/byte with 2048 tokens of context and ([\d.]+) with 4096, where the KV is already (\d+)% of$",
               [f2k / b2k, f4k / b4k, 100 * kv4k / b4k], "LLaMA-7B at batch 16: FLOPs / bytes; KV / bytes"),
         Claim(r"\*\*4·H bytes = (\d+) KiB for H = 4096\*\*", [4 * L7_DIM / KIB], "4·H"),
         Claim(r"stores (\d+) KiB per token per layer\.", [2 * L3_KV_HEADS * L3_HEAD_DIM * 2 / KIB], "2 · 8 · 128 · 2 B"),
         Claim(r"^\| KV cache \| (\d+) KiB \| (\d+) KiB \| (\d+) MiB \| (\d+) GiB \|",
               [kv_layer / KIB, kv_layer * L7_LAYERS / KIB, kv_layer * 2048 / MIB, kv_layer * L7_LAYERS * 2048 / GIB],
               "a layer's token, × 32 layers, × 2048 tokens")]
    # The worked example: 8 heads, d = 128, one layer, batch 16 × 32768.
    tokens = 16 * 32768
    flops = 4 * tokens * BENCH_D * BENCH_HEADS
    fp16 = tokens * 2 * BENCH_HEADS * BENCH_D * 2
    io = 16 * BENCH_HEADS * 2 * BENCH_D  # q read and out written, per element byte
    c += [Claim(r"the fp16 cache is (\d+) GiB, a step does ([\d.]+) GFLOP and reads ([\d.]+) GB — AI ([\d.]+); in fp32 the cache$",
                [fp16 / GIB, flops / 1e9, (fp16 + 2 * io) / 1e9, flops / (fp16 + 2 * io)], "4·L·d FLOPs, 2·L·d·e + 2·d·e bytes"),
          Claim(r"^is (\d+) GiB, ([\d.]+) GB read for the same ([\d.]+) GFLOP — AI ([\d.]+)\. On this machine \(([\d.]+) GB/s read\)",
                [2 * fp16 / GIB, (2 * fp16 + 4 * io) / 1e9, flops / 1e9, flops / (2 * fp16 + 4 * io), read_saved], "fp32"),
          Claim(r"^the floors are (\d+) ms and (\d+) ms; on an H100 \(3\.35 TB/s\) ([\d.]+) ms and ([\d.]+) ms",
                [(fp16 + 2 * io) / (read_saved * 1e9) * 1e3, (2 * fp16 + 4 * io) / (read_saved * 1e9) * 1e3,
                 (fp16 + 2 * io) / H100_HBM * 1e3, (2 * fp16 + 4 * io) / H100_HBM * 1e3], "bytes / bandwidth"),
          Claim(r"caps the context at L ≤ (" + NUMBER + r") tokens for d = 128", [227 * KIB // 4 - 4 * BENCH_D], "227 KiB / 4 − 4·d"),
          Claim(r"^per block, ≈ ([\d.]+) K; (" + NUMBER + r") in an A100's 163 KiB\)",
                [(227 * KIB // 4 - 4 * BENCH_D) / 1e3, 163 * KIB // 4 - 4 * BENCH_D], "163 KiB / 4 − 4·d")]

    # The sweep (mean of the timed calls, one run), as % of the saved read roof.
    bench = lab.json("ch03-bench.json")
    runs = {b["name"].replace("/manual_time", ""): b for b in bench["benchmarks"]}
    measured_before = float(bench["context"]["roofline_read_gbs"])
    c.append(Claim(r"machine with ([\d.]+) GB/s of read bandwidth measured right before it\)", [measured_before], "context"))
    for version in ("decode", "decode_simd"):
        for dtype in ("fp32", "fp16"):
            for batch in (1, 16):
                values = []
                for L in (512, 2048, 8192, 32768):
                    gbs = runs[f"decode_{dtype}/cpu/{version}/L:{L}/batch:{batch}"]["GB/s"]
                    values += [gbs, 100 * gbs / read_saved]
                c.append(Claim(r"^\| `cpu/" + version + r"` \| " + dtype + r", batch " + str(batch) + r" \|" +
                               r" ([\d.]+) \((\d+)%\) \|" * 4, values, f"cpu/{version}, {dtype}, batch {batch}: GB/s, / 31.3"))
    c += [Claim(r"The cache is (\d+) KiB \(fp32\) or (\d+) KiB \(fp16\) per token per sequence: batch 1 × 512 tokens is (\d+) MiB,$",
                [2 * BENCH_HEADS * BENCH_D * 4 / KIB, 2 * BENCH_HEADS * BENCH_D * 2 / KIB,
                 runs["decode_fp32/cpu/decode/L:512/batch:1"]["cache_MiB"]], "2 · 8 · 128 · e; cache_MiB"),
          Claim(r"^batch 16 × 32768 tokens (\d+) GiB \(fp32\) or (\d+) GiB \(fp16\)\. AI is ([\d.]+) \(fp32\) and ([\d.]+) \(fp16\)",
                [runs["decode_fp32/cpu/decode/L:32768/batch:16"]["cache_MiB"] / 1024,
                 runs["decode_fp16/cpu/decode/L:32768/batch:16"]["cache_MiB"] / 1024,
                 runs["decode_fp32/cpu/decode/L:32768/batch:16"]["AI"], runs["decode_fp16/cpu/decode/L:32768/batch:16"]["AI"]],
                "cache_MiB; AI")]
    big = {("fp32", 15): runs["decode_8xllc_fp32/cpu/decode_simd/L:32768/batch:15"],
           ("fp32", 16): runs["decode_fp32/cpu/decode_simd/L:32768/batch:16"],
           ("fp16", 30): runs["decode_8xllc_fp16/cpu/decode_simd/L:32768/batch:30"],
           ("fp16", 16): runs["decode_fp16/cpu/decode_simd/L:32768/batch:16"]}
    # The two 8× LLC rows were measured in a separate run (repetitions 3, right after the sweep): their cache
    # sizes are the JSON's, their GB/s the bytes over the ms shown, their % that over the saved roof (within rounding).
    sweep8 = {"fp32": runs["decode_8xllc_fp32/cpu/decode_simd/L:32768/batch:15"],
              "fp16": runs["decode_8xllc_fp16/cpu/decode_simd/L:32768/batch:30"]}
    side = {("fp32", 15): (144, 27.9), ("fp16", 30): (165, 24.4)}
    for (dtype, batch), (ms, gbs) in side.items():
        r = sweep8[dtype]
        c.append(Claim(r"^\| `cpu/decode_simd` " + dtype + r", L = 32768, batch " + str(batch) + r" \| (\d+) MiB, ([\d.]+)× LLC \|",
                       [r["cache_MiB"], r["cache_x_llc"]], f"{dtype}, batch {batch}: the cache"))
        c.append(Claim(r"^\| `cpu/decode_simd` " + dtype + r", L = 32768, batch " + str(batch) + r" \| .*\| \d+ \| ([\d.]+) \(",
                       [r["bytes"] / (ms * 1e6)], f"{dtype}, batch {batch}: bytes / {ms} ms", rel=0.5 / ms))
        c.append(Claim(r"^\| `cpu/decode_simd` " + dtype + r", L = 32768, batch " + str(batch) + r" \| .*\| \*\*([\d.]+)%\*\* \|",
                       [100 * gbs / read_saved], f"{gbs} GB/s / the saved roof", rel=0.05 / gbs))
    for (dtype, batch), r in ((("fp32", 16), big[("fp32", 16)]), (("fp16", 16), big[("fp16", 16)])):
        c.append(Claim(r"^\| `cpu/decode_simd` " + dtype + r", L = 32768, batch 16 \| (\d+) MiB, ([\d.]+)× LLC \| "
                       r"(\d+) \| ([\d.]+) \(([\d.]+)\) \| (?:\*\*)?([\d.]+)%(?:\*\*)? \|",
                       [r["cache_MiB"], r["cache_x_llc"], r["real_time"], r["GB/s"], r["best_GB/s"], 100 * r["GB/s"] / read_saved],
                       f"{dtype}, batch 16: ch03-bench.json"))
    c += [Claim(r"^fp16, a (\d+) MiB cache = ([\d.]+)× the reported 480 MiB L3, (\d+)–(\d+)× what the VM really gets\)",
                [sweep8["fp32"]["cache_MiB"], sweep8["fp32"]["cache_x_llc"], sweep8["fp32"]["cache_MiB"] / 256,
                 sweep8["fp32"]["cache_MiB"] / 64], "cache_MiB; / 480; / the VM's share, 64–256 MiB"),
          Claim(r"met with both caches: ([\d.]+)% \(fp32\) and ([\d.]+)% \(fp16\) of the saved ([\d.]+) GB/s",
                [100 * 27.9 / read_saved, 100 * 24.4 / read_saved, read_saved], "the side-by-side rows", rel=0.05 / 24.4),
          Claim(r"the same rows read (\d+)%, (\d+)%, (\d+)% and (\d+)%",
                [100 * 27.9 / measured_before, 100 * big[("fp32", 16)]["GB/s"] / measured_before, 100 * 24.4 / measured_before,
                 100 * big[("fp16", 16)]["GB/s"] / measured_before], "GB/s / 27.1"),
          Claim(r"^sweep's own single pass over the 8× LLC points, in the same JSON, read ([\d.]+) and ([\d.]+) GB/s: (\d+)% and$",
                [sweep8["fp32"]["GB/s"], sweep8["fp16"]["GB/s"], 100 * sweep8["fp32"]["GB/s"] / read_saved], "the JSON's 8× LLC rows"),
          Claim(r"^(\d+)% of the saved roof, the target met there too", [100 * sweep8["fp16"]["GB/s"] / read_saved], "/ 31.3")]

    # §7: LLaMA-7B at batch 1, 2048 tokens, on an A100 40GB.
    f1, b1, kv1 = step(1, 2048)
    weights_l3 = 2 * (L3_LAYERS * (2 * L7_DIM * L7_DIM + 2 * L7_DIM * L3_KV_HEADS * L3_HEAD_DIM + 3 * L7_DIM * L3_HIDDEN) +
                      L3_VOCAB * L7_DIM + (2 * L3_LAYERS + 1) * L7_DIM)
    c += [Claim(r"\| 6\.607 B · 2 B = ([\d.]+) GB \|", [weights_read / 1e9], "the layers, the head and the norms in fp16"),
          Claim(r"\| ([\d.]+) GB \+ ([\d.]+) GB \|$", [weights_read / 1e9, kv1 / 1e9], "weights + KV"),
          Claim(r"\| B · \(2 · linear weights \+ 4 · L · H · N\) \| ([\d.]+) GFLOP \|", [f1 / 1e9], "batch 1, 2048"),
          Claim(r"that is ([\d.]+) GB of weights against ([\d.]+) GB of KV:", [weights_read / 1e9, kv1 / 1e9], "batch 1, 2048"),
          Claim(r"the floor on an A100 40GB \((\d+) GB/s\) is ([\d.]+) GB / \d+ GB/s = ([\d.]+) ms, \*\*([\d.]+) token/s\*\*",
                [A100_HBM / 1e9, b1 / 1e9, b1 / A100_HBM * 1e3, A100_HBM / b1], "bytes / bandwidth"),
          Claim(r"^   \(([\d.]+) token/s for a very short context", [A100_HBM / weights_read], "weights alone"),
          Claim(r"13\.21 GB / 512 KiB = \*\*(" + NUMBER + r") cached tokens\*\* \(batch (\d+) at 2048",
                [weights_read / (kv_layer * L7_LAYERS), weights_read / (kv_layer * L7_LAYERS) // 2048], "weights / KV a token"),
          Claim(r"and its crossover (" + NUMBER + r") tokens", [weights_l3 / (2 * L3_KV_HEADS * L3_HEAD_DIM * 2 * L3_LAYERS)],
                "Llama-3-8B's weights read / its KV a token"),
          Claim(r"far below any GPU's ridge point \((\d+) FLOP/byte on an A100 40GB\)", [A100_FP16 / A100_HBM], "312 / 1.555")]

    # The launch-bound prediction.
    s_layer = 2 * S_DIM * S_Q * S_HD + 2 * S_DIM * S_KV * S_HD + 3 * S_DIM * S_MLP
    s_params = S_LAYERS * s_layer + S_VOCAB * S_DIM + (2 * S_LAYERS + 1) * S_DIM
    s_bytes = 2 * s_params
    mem_us = s_bytes / H100_HBM * 1e6
    kv_token = 2 * S_LAYERS * S_KV * S_HD * 2
    launches = S_LAYERS * KERNELS_A_LAYER + KERNELS_AFTER
    lo, hi = launches * LAUNCH_US[0] / 1e3, launches * LAUNCH_US[1] / 1e3
    l8 = 32 * KERNELS_A_LAYER + KERNELS_AFTER
    c += [Claim(r"tied embeddings: ([\d.]+) M parameters,$", [s_params / 1e6], "the shapes"),
          Claim(r"^(\d+) MB in bf16\)", [s_bytes / 1e6], "2 bytes a parameter"),
          Claim(r"every weight read once, (\d+) MB / 3\.35 TB/s ≈ \*\*(\d+) µs\*\* \(the KV cache adds (\d+) KB per$",
                [s_bytes / 1e6, mem_us, kv_token / 1e3], "bytes / HBM; 2 · 30 · 3 · 64 · 2 B"),
          Claim(r"^  token of context: (\d+) µs at 1K tokens\)", [1000 * kv_token / H100_HBM * 1e6], "1000 tokens' KV / HBM"),
          Claim(r"\*\*compute\*\*: 2 × ([\d.]+) M ≈ ([\d.]+) GFLOP, ≈ ([\d.]+) µs at the ≈ 990",
                [s_params / 1e6, 2 * s_params / 1e9, 2 * s_params / 990e12 * 1e6], "2 FLOPs a parameter / 990 TFLOP/s"),
          Claim(r"^  sampling\) ≈ (\d+) launches", [launches], "30 × 12 + 3"),
          Claim(r"At 3\.3–6 µs per launch: \*\*([\d.]+)–([\d.]+) ms per token\*\*, (\d+)–(\d+)× the memory$",
                [lo, hi, lo * 1e3 / mem_us, hi * 1e3 / mem_us], "launches × 3.3 and 6 µs; / the memory floor"),
          Claim(r"floor — about (\d+)–(\d+) tokens/s where the bandwidth would allow ≈ (" + NUMBER + r")\.",
                [1e3 / hi, 1e3 / lo, 1e6 / mem_us], "1 / the step, \"about\" (two digits)", rel=0.04),
          Claim(r"layers, ≈ (\d+) launches cost ([\d.]+)–([\d.]+) ms while its (\d+) GB of weights take ([\d.]+) ms",
                [l8, l8 * LAUNCH_US[0] / 1e3, l8 * LAUNCH_US[1] / 1e3, 16, 16e9 / H100_HBM * 1e3], "32 × 12 + 3 (\"≈\"); 16 GB / HBM",
                rel=0.01)]
    # The fixed cost of a call (ch03-overhead.json): the median call of each repetition, the median of those.
    over = {b["run_name"].replace("/manual_time", ""): b for b in lab.json("ch03-overhead.json")["benchmarks"]
            if b.get("aggregate_name") == "median"}
    omp, sim = over["overhead/omp_region"], over["overhead/sim_launch"]
    c += [Claim(r"2 threads \| 0 \| ([\d.]+) \(best ([\d.]+)\) \|", [omp["median_us"], omp["best_us"]], "median_us, best_us"),
          Claim(r"on the SIMT emulator \| 0 \| ([\d.]+) \|", [sim["median_us"]], "median_us")]
    for L, size in ((1, r"(\d+) KiB"), (4, r"(\d+) KiB"), (16, r"(\d+) KiB"), (64, r"(\d+) KiB"), (256, r"([\d.]+) MiB"),
                    (1024, r"([\d.]+) MiB"), (4096, r"(\d+) MiB"), (16384, r"(\d+) MiB")):
        simd, plain = over[f"overhead_decode_fp32/cpu/decode_simd/L:{L}"], over[f"overhead_decode_fp32/cpu/decode/L:{L}"]
        unit = KIB if "KiB" in size else MIB
        c.append(Claim(r"^\| decode, L = " + str(L) + r" \| " + size + r" \| ([\d.]+) \(([\d.]+)\) \| ([\d.]+) \(([\d.]+)\) \|",
                       [simd["bytes"] / unit, simd["median_us"], simd["GB/s"], plain["median_us"], plain["GB/s"]],
                       f"L = {L}: bytes, median_us and GB/s"))
    # §8, the plot: prefill's intensities and reach from ch02-bench.json, decode's from the sweep above.
    ch02 = {b["name"].replace("/manual_time", ""): b for b in lab.json("ch02-bench.json")["benchmarks"]}
    blocked = [b["peak_pct"] for n, b in ch02.items() if n.startswith("prefill/cpu/blocked/") and n.endswith("/d:128")
               and int(n.split("L:")[1].split("/")[0]) >= 512]
    dram32 = [100 * runs[n]["GB/s"] / read_saved for n in runs if n.startswith("decode_fp32/cpu/decode_simd/")
              and runs[n]["cache_MiB"] >= 256]
    c += [Claim(r"It moves right as L grows — from ([\d.]+) FLOP/byte$", [ch02["prefill/cpu/naive/L:64/d:128"]["AI_unfused"]],
                "ch02-bench.json AI_unfused"),
          Claim(r"^at L = 64 to ([\d.]+) at L = 8192 in fp32 with d = 128, towards its limit d/4 = (\d+)",
                [ch02["prefill/cpu/blocked/L:8192/d:128"]["AI_unfused"], BENCH_D / 4], "AI_unfused; d/4"),
          Claim(r"it would climb from (\d+) to (\d+)\)", [ch02["prefill/cpu/naive/L:64/d:128"]["AI"],
                                                        ch02["prefill/cpu/blocked/L:8192/d:128"]["AI"]], "the article model's AI"),
          Claim(r"^reaches (\d+)–(\d+) % of the compute roof;", [min(blocked), max(blocked)], "cpu/blocked from L = 512"),
          Claim(r"gets to (\d+)–(\d+)% of the read roof with an fp32 cache", [min(dram32), max(dram32)],
                "the fp32 points from 256 MiB (DRAM)")]
    # §5's prose: the DRAM points (cache ≥ 256 MiB) of the sweep, and fp16's time against fp32's at the same shape.
    dram_pts = {dt: {n.split("decode_simd/")[1]: runs[n] for n in runs if n.startswith(f"decode_{dt}/cpu/decode_simd/")
                     and runs[n]["cache_MiB"] >= 256} for dt in ("fp32", "fp16")}
    g32, g16 = [r["GB/s"] for r in dram_pts["fp32"].values()], [r["GB/s"] for r in dram_pts["fp16"].values()]
    assert len(g16) == 3, "the lesson says three fp16 points"
    t_ratio = [dram_pts["fp16"][k]["real_time"] / dram_pts["fp32"][k]["real_time"] for k in dram_pts["fp16"]]
    c += [Claim(r"reads (\d+)–(\d+) GB/s with an fp32 cache and (\d+)–(\d+) GB/s with an$",
                [min(g32), max(g32), min(g16), max(g16)], "the sweep's GB/s from 256 MiB"),
          Claim(r"fp16 one\*\* \(([\d.]+)–([\d.]+) at the three fp16 points from 256 MiB", [min(g16), max(g16)],
                "the sweep's fp16 GB/s from 256 MiB"),
          Claim(r"so a step takes ([\d.]+)–([\d.]+)× the fp32 time instead of 0\.5×", [min(t_ratio), max(t_ratio)],
                "fp16 ms / fp32 ms at the same shape, both from DRAM")]
    # The development runs and the run "since chapter 04" (not committed): their GB/s are the committed bytes over
    # the ms they state (±0.5 ms, and the GB/s's own rounding), their % those GB/s over the bandwidth stated beside.
    b8 = sweep8["fp16"]["bytes"]  # = the fp32 batch-15 bytes
    b16 = runs["decode_fp16/cpu/decode_simd/L:32768/batch:16"]["bytes"]

    def over_ms(nbytes, ms):
        return nbytes / (ms * 1e6)

    def ms_rel(nbytes, ms):
        return 0.5 / ms + 0.05 / over_ms(nbytes, ms)
    run1, run2 = (27.0 + 27.5) / 2, (27.0 + 25.9) / 2
    c += [Claim(r"^bandwidth\. Batch 30: fp16 ([\d.]+) → ([\d.]+) GB/s \(238 → 167 ms, ", [over_ms(b8, 238), over_ms(b8, 167)],
                "the 8× LLC bytes / 238 and 167 ms", rel=max(ms_rel(b8, 238), ms_rel(b8, 167))),
          Claim(r"^bandwidth\. Batch 30: .* ms, (\d+)% → (\d+)% of the read bandwidth$", [100 * 16.9 / run1, 100 * 24.1 / run1],
                "16.9 and 24.1 GB/s / the mean of 27.0 and 27.5", rel=0.05 / 16.9),
          Claim(r"^alongside\), fp32 ([\d.]+) → ([\d.]+) GB/s \(177 → 147 ms\)", [over_ms(b8, 177), over_ms(b8, 147)],
                "the 8× LLC bytes / 177 and 147 ms", rel=max(ms_rel(b8, 177), ms_rel(b8, 147))),
          Claim(r"^fp16 16\.3 → 23\.6 GB/s \((\d+)%\)", [100 * 23.6 / run2], "23.6 / the mean of 27.0 and 25.9", rel=0.05 / 23.6),
          Claim(r"\): 132 → 98 ms, ([\d.]+) → ([\d.]+) GB/s, with 28\.6", [over_ms(b16, 132), over_ms(b16, 98)],
                "the batch-16 bytes / 132 and 98 ms", rel=max(ms_rel(b16, 132), ms_rel(b16, 98))),
          Claim(r"measures its read roof on the same storage: ([\d.]+) GB/s \(the",
                [float(lab.json("ch04-bench.json")["context"]["roofline_read_gbs"])], "ch04-bench.json's roofline_read_gbs"),
          Claim(r"fp32 batch 15 \*\*135 ms, ([\d.]+) GB/s \((\d+)% of the read roof\)\*\*, fp16 batch 30 \*\*158 ms,$",
                [over_ms(b8, 135), 100 * 29.8 / 31.1], "bytes / 135 ms; 29.8 / 31.1", rel=ms_rel(b8, 135)),
          Claim(r"^([\d.]+) GB/s \((\d+)%\)\*\* — 144 → 135 ms", [over_ms(b8, 158), 100 * 25.4 / 31.1],
                "bytes / 158 ms; 25.4 / 31.1", rel=ms_rel(b8, 158))]
    return c
