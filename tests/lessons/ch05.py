"""Chapter 05's numbers: §1's traffic ratios and intensities, the sizes of §3–§5 (a score matrix, a
head's K and V, the context one block's shared memory holds, the split count), the arithmetic
inside §6's tables (GFLOP/s from the times, % of the peak, the ratios, the streaming rates) and
what docs/plots/ch05-bench.json shows, and the FlashAttention percentages of §7."""
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_lessons import NUMBER, Claim, row  # noqa: E402

D, HEADS, L_PREFILL = 128, 4, 4096
PEAK_RUNS = 473  # the fp32 FMA peak of the runs' build/roofline.json, as the lesson states it
H100_FP16, A100_FP16 = 989, 312
SMEM_H100_KIB, SMEM_A100_KIB = 227, 163
CPU_THREADS, ITEMS_PER_THREAD, MIN_TOKENS_CPU = 2, 4, 512
# (the figure as the lesson prints it now, the wrong one it printed before): each must be caught.
WRONG_BEFORE = [("128 × 4 B = 33.6 MB (32 MiB)", "128 × 4 B = 33.5 MB (32 MiB)"),
                ("S = 8 streams it at 33.6 MB", "S = 8 streams it at 33.5 MB"),
                ("230 / 312 = 73.7%", "230 / 312 = 73.0%")]


def rounded_ratio(pattern, a, b, why, a_digits, b_digits, out_digits):
    """a / b of two figures the lesson prints rounded: the tolerance is their rounding plus the result's."""
    ua, ub, uo = 0.5 * 10 ** -a_digits, 0.5 * 10 ** -b_digits, 0.5 * 10 ** -out_digits
    return Claim(pattern, [a / b], why, rel=ua / a + ub / b + uo / (a / b))


def claims(lab):
    c = []
    for L in (64, 128, 512, 2048, 4096, 32768):
        c.append(row("| L | fused / article-unfused |", [str(L)],
                     [4 * D / (L + 4 * D), D / (L + D), L * D / (2 * (L + D)), L / 2],
                     f"L = {L}: 4d/(L + 4d), d/(L + d), Ld/(2(L + d)), L/2"))
    c += [Claim(r"L·g/\(g \+ 1\) in fp16 — ([\d.]+)·L for$", [4 / 5], "g/(g + 1), g = 4"),
          Claim(r"halves the traffic only from L = 4d = (\d+);", [4 * D], "4d"),
          Claim(r"At L = 4096 it removes (\d+)% of it", [100 * (1 - D / (4096 + D))], "1 − d/(L + d)"),
          Claim(r"against ([\d.]+) MB for one L×L matrix", [2048 * 2048 * 4 / 1e6], "2048² fp32"),
          Claim(r"one head's K and V are 2·L·d·e bytes \((\d+) MiB at L = 4096", [2 * 4096 * D * 2 / 2 ** 20], "fp16")]
    max_l = SMEM_H100_KIB * 1024 // 4 - 4 * D
    c += [Claim(r"so L ≤ (" + NUMBER + r") tokens at$", [max_l], "227 KiB / 4 − 4·d"),
          Claim(r"^d = 128 \(≈ ([\d.]+)K; (" + NUMBER + r") in an A100's 163 KiB\)",
                [max_l / 1e3, SMEM_A100_KIB * 1024 // 4 - 4 * D], "163 KiB / 4 − 4·d")]
    # The split heuristic at batch 1, one KV head, on the CPU (no max_tokens there).
    for L in (8192, 32768):
        s = min(math.ceil(CPU_THREADS * ITEMS_PER_THREAD / 1), max(1, L // MIN_TOKENS_CPU))
        assert s == 8, f"the heuristic picks 8 at L = {L}"
    c.append(Claim(r"^S = (\d+); best call\):", [8], "min(⌈8 items / 1⌉, ⌊L / 512⌋)"))

    # §6's prefill table: the GFLOP/s of a time, the percentages, the ratios.
    gflop = HEADS * 4 * L_PREFILL ** 2 * D / 1e9
    t = {"openblas": (189, 180, 196), "blocked": (123, 134, 139), "flash": (104, 118, 125)}

    def gf(ms):
        return gflop / (ms / 1e3)
    c += [Claim(r"^\| `cpu/openblas` .*\| (\d+), (\d+)% \| 1\.00 \|", [gf(180), 100 * gf(180) / PEAK_RUNS], "FLOPs / 180 ms",
                rel=0.5 / 180),
          Claim(r"^\| `cpu/blocked` .*\| (\d+), (\d+)% \|", [gf(134), 100 * gf(134) / PEAK_RUNS], "FLOPs / 134 ms",
                rel=0.5 / 134),
          Claim(r"\*\*(\d+), (\d+)% \((\d+), (\d+)%\)\*\*",
                [gf(118), 100 * gf(118) / PEAK_RUNS, gf(125), 100 * gf(125) / PEAK_RUNS], "FLOPs / 118 and 125 ms",
                rel=0.5 / 118),
          rounded_ratio(r"\| 256, 54% \| ([\d.]+)× \(", 180, 134, "openblas / blocked, best", 0, 0, 2),
          rounded_ratio(r"\| 256, 54% \| [\d.]+× \(([\d.]+)×\)", 196, 139, "openblas / blocked, median", 0, 0, 2),
          rounded_ratio(r"\| \*\*([\d.]+)× \(", 180, 118, "openblas / flash, best", 0, 0, 2),
          rounded_ratio(r"\| \*\*[\d.]+× \(([\d.]+)×\)\*\* \|", 196, 125, "openblas / flash, median", 0, 0, 2),
          Claim(r"Run A's `cpu/flash`: (\d+) GFLOP/s, (\d+)% of the peak", [gf(104), 100 * gf(104) / PEAK_RUNS],
                "FLOPs / 104 ms", rel=0.5 / 104),
          rounded_ratio(r"\(mean 64%\), ([\d.]+)× `cpu/openblas`", 189, 104, "run A: 189 / 104", 0, 0, 2)]
    # The split-KV tables: S = 1 / S = 8 of the times shown.
    split = [("fp32, 8192", 0.492, 0.231, 3), ("fp32, 32768", 2.02, 0.902, 2), ("fp16, 8192", 0.439, 0.242, 3),
             ("fp16, 32768", 1.78, 0.976, 2)]
    for label, s1, s8, digits in split:
        c.append(rounded_ratio(r"^\| " + label + r" \|.*\| \**([\d.]+)×\** \|", s1, s8, f"{label}: S = 1 / S = 8",
                               digits, 3, 2))
    again = [(r"0\.343 / 0\.178 ms \(([\d.]+)×\)", 0.343, 0.178, "fp32 8192"),
             (r"^0\.698 ms \(\*\*([\d.]+)×\*\*\)", 1.454, 0.698, "fp32 32768"),
             (r"0\.392 / 0\.207 ms \(([\d.]+)×\)", 0.392, 0.207, "fp16 8192"),
             (r"^0\.827 ms \(\*\*([\d.]+)×\*\*\)", 1.655, 0.827, "fp16 32768")]
    for pattern, s1, s8, label in again:
        c.append(rounded_ratio(pattern, s1, s8, f"re-measured {label}: S = 1 / S = 8", 3, 3, 2))
    cache_mb = 2 * 32768 * D * 4 / 1e6
    c += [Claim(r"2 × 32768 × 128 × 4 B = ([\d.]+) MB", [cache_mb], "one fp32 cache at 32K"),
          Claim(r"S = 8 streams it at ([\d.]+) MB / ([\d.]+) ms = (\d+) GB/s \((\d+) GB/s in the first table\)",
                [cache_mb, 0.698, cache_mb / 0.698, cache_mb / 0.902], "the cache / the S = 8 times"),
          Claim(r"single-split run (\d+)% slower than$", [100 * (2.02 / 1.82 - 1)], "2.02 / 1.82", rel=0.05),
          rounded_ratio(r"\(against `cpu/decode_simd` the same run gives ([\d.]+)×\)", 1.82, 0.902, "1.82 / 0.902", 2, 3, 2),
          Claim(r"`cpu/flash` is ([\d.]+)–([\d.]+)× faster than `cpu/openblas` at L = 4096", [180 / 118, 189 / 104],
                "run B and run A", rel=0.005),
          Claim(r"it reaches (\d+)–(\d+)% of the FMA peak by best call", [100 * gf(118) / PEAK_RUNS, 100 * gf(104) / PEAK_RUNS],
                "runs B and A, best calls", rel=0.005),
          Claim(r"split-KV is ([\d.]+)–([\d.]+)× the single split at$", [1.78 / 0.976, 2.02 / 0.902], "the 32K rows",
                rel=0.006),
          Claim(r"^batch 1, 32K \(([\d.]+)–([\d.]+)× after chapter 04's changes\)", [1.655 / 0.827, 1.454 / 0.698],
                "the re-measured 32K rows", rel=0.005)]

    # What ch05-bench.json shows.
    bench = lab.json("ch05-bench.json")
    med = {b["name"].split("/manual_time")[0]: b for b in bench["benchmarks"] if b.get("aggregate_name") == "median"}
    points = [b["peak_pct"] for b in bench["benchmarks"] if b["name"].startswith("prefill/") and "aggregate_name" not in b]
    load = bench["context"]["load_avg"]
    slower = [med[f"prefill/cpu/{v}/L:4096/d:128"]["real_time"] / t[v][1] for v in t]
    c += [Claim(r"was recorded at a load average of ([\d.]+)–([\d.]+) on the 2-core VM", [min(load), max(load)], "load_avg"),
          Claim(r"^its points sit at (\d+)–(\d+)% of the peak, its L = 4096 medians (\d+)–(\d+)× slower",
                [min(points), max(points), min(slower), max(slower)], "peak_pct of each call; medians / run B's"),
          Claim(r"at L = 2048 \(([\d.]+) vs ([\d.]+) ms\)",
                [med["prefill/cpu/blocked/L:2048/d:128"]["real_time"], med["prefill/cpu/flash/L:2048/d:128"]["real_time"]],
                "the L = 2048 medians"),
          Claim(r"a head's scores \((\d+) MiB at L = 512\)", [512 * 512 * 4 / 2 ** 20], "512² fp32"),
          Claim(r"L/4 in fp32 \((\d+) at L = 4096\), (\d+) for the real unfused pipeline",
                [4096 / 4, 4096 * D / (4 * (4096 + D))], "L/4; Ld/(4(L + d))"),
          Claim(r"unfused bytes are L/d \+ 1 = (\d+)× the fused ones",
                [med["prefill/cpu/flash/L:4096/d:128"]["unfused_over_fused"]], "unfused_over_fused")]
    assert med["prefill/cpu/flash/L:4096/d:128"]["unfused_over_fused"] == 4096 / D + 1
    # §7: the percentages of the quoted rates.
    c += [Claim(r"\| up to 335 \| (\d+)% of 989 \|", [100 * 335 / H100_FP16], "335 / 989"),
          Claim(r"\| up to 740 \(FP16\) \| (\d+)% \|", [100 * 740 / H100_FP16], "740 / 989"),
          Claim(r"non-causal; (\d+)% of an H100's 989\)", [100 * 300 / H100_FP16], "300 / 989")]
    # The DRAM roof §6 compares with: chapter 04's measurement; the median of run B (run A's 64% is a mean, an input).
    c += [Claim(r"^(\d+\.\d) GB/s DRAM read roof \(measured with chapter 04's runs",
                [float(lab.json("ch04-bench.json")["context"]["roofline_read_gbs"])], "ch04-bench.json's roofline_read_gbs"),
          Claim(r"of the FMA peak by best call, (\d+)% by run B's median", [100 * gf(125) / PEAK_RUNS], "FLOPs / 125 ms / 473",
                rel=0.5 / 125),
          Claim(r"\| up to 230 \| (\d+)% of (\d+) \(the paper's words; 230 / 312 = ([\d.]+)%\) \|",
                [73, A100_FP16, 100 * 230 / A100_FP16], "the paper's 73% as quoted; 230 / 312")]
    return c
