"""Chapter 02's numbers: §6's intensities under the four traffic models and the GPUs' ridge points
from their data sheets, the counts of §1–§3 (bytes a warp loads, cache lines, bank conflicts,
accumulators), and §7's measured rows from docs/plots/ch02-bench.json (its context is the saved
roofline)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_lessons import Claim, row  # noqa: E402

# NVIDIA's data sheets, SXM versions: HBM TB/s and dense fp16 tensor TFLOP/s.
GPUS = {"A100 40GB SXM": (1.555, 312), "A100 80GB SXM": (2.039, 312), "H100 SXM": (3.35, 989), "H200 SXM": (4.8, 989)}
H100_FP32, H100_SMS, SMEM_BYTES_PER_CLOCK, SMEM_GHZ = 67, 132, 128, 1.8
D = 128
WRONG_BEFORE = [("| `cpu/blocked` | 27.0 | 318 | 66% | 32× |", "| `cpu/blocked` | 27.2 | 315 | 65% | 33× |"),
                ("| `cpu/openblas` | 32.0 | 269 | 56% | 27× |", "| `cpu/openblas` | 32.4 | 265 | 55% | 28× |"),
                ("`cpu/blocked` takes 13.9 ms", "`cpu/blocked` takes 14.7 ms"),
                ("would reach 63 × 3.35 ≈ 211)", "would reach 63 × 3.35 ≈ 210)")]


def article(L, d=D):  # fp16: 4·L²·d / (2·(L² + 4·L·d))
    return 2 * L * d / (L + 4 * d)


def unfused(L, d=D):  # fp16: 4·L²·d / (2·(4·L² + 4·L·d))
    return L * d / (2 * (L + d))


def cublas_fp16(L, d=D):  # 12 bytes a score, 16-bit Q, K, V, fp32 O: 4·L²·d / (12·L² + 10·L·d)
    return 4 * L * L * d / (12 * L * L + 10 * L * d)


def unfused_fp32(L, d=D):
    return L * d / (4 * (L + d))


def ratio_claim(pattern, a, b, why):
    """A gain, to one decimal, of two rates the lesson rounds to integers: the tolerance is their rounding
    (half a unit of each) plus the gain's own (0.05)."""
    return Claim(pattern, [a / b], why, rel=0.5 / a + 0.5 / b + 0.05 / (a / b))


def claims(lab):
    bench = lab.json("ch02-bench.json")
    ctx = bench["context"]
    peak, triad = float(ctx["roofline_peak_gflops"]), float(ctx["roofline_triad_gbs"])
    ridge = peak / triad
    runs = {b["name"].replace("/manual_time", ""): b for b in bench["benchmarks"]}
    h100 = GPUS["H100 SXM"][1] / GPUS["H100 SXM"][0]

    c = [Claim(r"its 32 loads of `x\[r\]\[c\]` … `x\[r\]\[c\+31\]` are (\d+) consecutive bytes", [32 * 4], "32 floats"),
         Claim(r"moves (\d+) bytes per element and computes nothing", [4 + 4], "a float read and a float written"),
         Claim(r"touch (\d+) different cache$", [32 // 2], "a warp of a (16, 16) block: 16 keys"),
         Claim(r"its loads of Q (\d+) more \(one per row, each shared by (\d+)$", [32 // 16, 16], "two rows y of 16 threads"),
         Claim(r"threads\) — (\d+) lines where", [32 // 2 + 32 // 16], "16 K lines + 2 Q lines"),
         Claim(r"\| ~(\d+) TB/s aggregate \|", [H100_SMS * SMEM_BYTES_PER_CLOCK * SMEM_GHZ * 1e9 / 1e12],
               "132 SMs × 128 bytes per clock × 1.8 GHz, \"~\"", rel=0.05),
         Claim(r"words 16 apart, which fall into (\d+) banks — an (\d+)-way conflict",
               [len({16 * t % 32 for t in range(16)}), 16 / len({16 * t % 32 for t in range(16)})], "16 reads, stride 16 words"),
         Claim(r"saturates at 2·d\*\*: (\d+) FLOP/byte for d = 128", [2 * D], "2·d"),
         Claim(r"saturates at \*\*d/2 = (\d+)\*\* for d = 128", [D / 2], "d/2"),
         Claim(r"\*\*d/3 ≈ ([\d.]+)\*\* for d = 128 \(([\d.]+) at L = 8192\)", [D / 3, cublas_fp16(8192)], "d/3; at L = 8192")]
    # §6's table of intensities, fp16, d = 128.
    for L in (64, 256, 1024, 2048, 8192):
        c.append(row("| L (d = 128, fp16) |", [str(L)], [article(L), unfused(L), cublas_fp16(L), L / 2],
                     f"L = {L}: 2Ld/(L + 4d), Ld/(2(L + d)), 4L²d/(12L² + 10Ld), L/2"))
    c.append(row("| L (d = 128, fp16) |", ["L → ∞"], [2 * D, D / 2, D / 3, None], "the limits 2d, d/2, d/3"))
    for gpu, (tbs, tflops) in GPUS.items():
        c.append(row("| GPU | HBM TB/s |", [gpu], [tbs, tflops, tflops / tbs], f"{gpu}: TFLOP/s / TB/s"))
    c += [Claim(r"can never pass an H100's ridge point \((\d+) < (\d+) even in the", [2 * D, h100], "2d; 989 / 3.35"),
          Claim(r"counted realistically \(≤ (\d+), or ≤ ([\d.]+) for `cuda/cublas_fp16`\)", [D / 2, D / 3], "d/2, d/3"),
          Claim(r"^(\d+) / ([\d.]+) ≈ \*\*(\d+) FLOP/byte\*\*", [H100_FP32, 3.35, H100_FP32 / 3.35], "fp32 peak / HBM"),
          Claim(r"^L ≈ (\d+) \(([\d.]+) for d = 128, saturating at d/4 = (\d+)\)",
                [next(L for L in (2 ** k for k in range(4, 16)) if unfused_fp32(L) >= H100_FP32 / 3.35), unfused_fp32(256),
                 D / 4], "the first power of two whose fp32 unfused AI passes 20; L·d/(4(L + d)) at 256; d/4"),
          Claim(r"moves 12 bytes per score \(fp32 S, 16-bit P\), AI ([\d.]+) FLOP/byte", [cublas_fp16(8192)], "L = 8192"),
          Claim(r"at most ([\d.]+) × ([\d.]+) ≈ (\d+) TFLOP/s to it, about a seventh",
                [cublas_fp16(8192), 3.35, cublas_fp16(8192) * 3.35], "AI × HBM"),
          Claim(r"would reach (\d+) × ([\d.]+) ≈ (\d+)\)", [unfused(8192), 3.35, unfused(8192) * 3.35],
                "the unfused AI at L = 8192 × HBM")]
    assert 6.5 < GPUS["H100 SXM"][1] / (cublas_fp16(8192) * 3.35) < 7.5, "\"about a seventh\""

    # §7: the machine and the measured rows.
    c.append(Claim(r"fp32 FMA peak is (\d+) GFLOP/s$", [peak], "the saved roofline"))
    c.append(Claim(r"and its triad bandwidth ([\d.]+) GB/s", [triad], "the saved roofline"))
    naive = runs["prefill/cpu/naive/L:2048/d:128"]
    for name in ("naive", "blocked", "openblas"):
        r = runs[f"prefill/cpu/{name}/L:2048/d:128"]
        c.append(row("| version | ms per call |", [f"`cpu/{name}`"],
                     [r["real_time"], r["GFLOP/s"], r["peak_pct"], naive["real_time"] / r["real_time"]],
                     f"cpu/{name}, L = 2048, d = 128: ch02-bench.json"))
    blocked, openblas = runs["prefill/cpu/blocked/L:2048/d:128"], runs["prefill/cpu/openblas/L:2048/d:128"]
    c += [Claim(r"`cpu/blocked` / `cpu/openblas` time: ([\d.]+)", [blocked["real_time"] / openblas["real_time"]], "ms / ms"),
          Claim(r"`cpu/blocked` takes ([\d.]+) ms — it skips", [runs["prefill_causal/cpu/blocked/L:2048/d:128"]["real_time"]],
                "prefill_causal/cpu/blocked"),
          Claim(r"^([\d.]+) ms either way", [runs["prefill_causal/cpu/openblas/L:2048/d:128"]["real_time"]],
                "prefill_causal/cpu/openblas")]
    # The development steps (recorded, not in the JSON): percentages of the peak and the gains of rounded rates.
    steps = [("`cpu/naive`: three scalar loops", 9), ("blocked structure, K packed", 33), (r"\+ register tiles of 6 rows", 81),
             (r"\+ vector exp in the softmax", 144)]
    for (label, rate), previous in zip(steps, [None] + [s[1] for s in steps]):
        c.append(Claim(r"^\| " + label + r".*\| " + str(rate) + r" \| .*\| (\d+)%", [100 * rate / peak], f"{rate} / peak"))
        if previous:
            c.append(ratio_claim(r"^\| " + label + r".*\| " + str(rate) + r" \| ([\d.]+)× \|", rate, previous,
                                 f"{rate} / {previous}, within their rounding"))
    c += [Claim(r"\| 30% \((\d+)% of one core's share\) \|", [100 * 144 / (peak / 2)], "144 / (peak / 2)"),
          Claim(r"\| 280–315 \| 2\.0× \| (\d+)–(\d+)% \|", [100 * 280 / peak, 100 * 315 / peak], "280 and 315 / peak"),
          Claim(r"tiles of 6 rows × 64 keys \((\d+) accumulators\)", [6 * 64 / 16], "6 rows × 4 zmm of 16"),
          Claim(r"6 × 16 tiles, (\d+) accumulators", [6 * 16 / 8], "6 rows × 2 ymm of 8")]
    # The sweep at d = 128.
    d128 = {n: r for n, r in runs.items() if n.endswith("/d:128")}

    def pct(version, from_l):
        return [r["peak_pct"] for n, r in d128.items() if n.startswith(f"prefill/cpu/{version}/")
                and int(n.split("L:")[1].split("/")[0]) >= from_l]
    c += [Claim(r"^ridge \(([\d.]+)\) from L = 128 on under the article model \(at L = 64 its AI is ([\d.]+), just",
                [ridge, runs["prefill/cpu/naive/L:64/d:128"]["AI"]], "peak / triad; AI at L = 64"),
          Claim(r"unfused model \(([\d.]+) at L = 128, ([\d.]+) at L = 256\)",
                [runs["prefill/cpu/naive/L:128/d:128"]["AI_unfused"], runs["prefill/cpu/naive/L:256/d:128"]["AI_unfused"]],
                "AI_unfused"),
          Claim(r"^(\d+)–(\d+) % of the FMA peak from L = 512, `cpu/openblas` (\d+)–(\d+) %, `cpu/naive` (\d+) % at every L",
                [min(pct("blocked", 512)), max(pct("blocked", 512)), min(pct("openblas", 512)), max(pct("openblas", 512)),
                 min(pct("naive", 0))], "peak_pct, d = 128")]
    assert max(pct("naive", 0)) < 2.5
    assert runs["prefill/cpu/naive/L:64/d:128"]["AI"] < ridge < runs["prefill/cpu/naive/L:128/d:128"]["AI"]
    return c
