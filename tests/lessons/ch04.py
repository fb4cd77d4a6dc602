"""Chapter 04's numbers: the bytes of a cache row and its scales (§1), the DRAM point's sizes, the
ratios inside the three runs' table, the sweep's medians and fastest calls from
docs/plots/ch04-bench.json, LLaMA-7B's bytes at batch 1 from its shapes (§5), and the formats' bits."""
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_lessons import NUMBER, Claim, row  # noqa: E402

KV_HEADS, HEAD_DIM = 32, 128  # LLaMA-7B
LLAMA7_LAYERS, LLAMA7_DIM, LLAMA7_HIDDEN, LLAMA7_VOCAB = 32, 4096, 11008, 32000
REPORTED_L3_MIB, SHARE_MIB = 480, (64, 256)
FP16_MAX = 65504
# The three runs at the DRAM point (ms): fp32, fp16, INT8 per-token, per-channel, per-token with fp16 scales.
RUNS = {1: (200.1, 119.2, 51.8, 51.0, 49.8), 2: (198.7, 119.0, 56.4, 57.1, 49.7), 3: (204.7, 122.4, 58.6, 56.6, 57.3)}
WRONG_BEFORE = [("| L 2048 × batch 4 (in cache) | 1.27 | 0.63 |", "| L 2048 × batch 4 (in cache) | 1.17 | 0.58 |"),
                ("| L 32768 × batch 24 (DRAM point) | 212.7 | 123.0 | 57.3 (2.15×, 3.71×) | 61.6 (2.00×, 3.45×) |",
                 "| L 32768 × batch 24 (DRAM point) | 211.2 | 120.4 | 56.1 (2.15×, 3.77×) | 58.7 (2.05×, 3.60×) |"),
                ("streams at 43–49 GB/s", "streams at 45–55 GB/s"),
                ("the weights are 92% of the bytes", "the weights are 93% of the bytes"),
                ("cut the error 3.2–4.6× and the KL 12–24×", "cut the error 2.8–4.9× and the KL 5–33×"),
                ("values saturated, and the error was 1.0–2.9× that", "values saturated, and the error was 1.0–5.1× that")]
# §3's error table: what `INFERLAB_SEED=1 test_ch04_cpu --gtest_filter='*PerChannelKeyScalesHelp*'` prints (seeds 1–5):
# per dataset, (relative error, KL) of per-token K with fp32 scales, with fp16 scales, per-channel K with the whole context
# in the prompt, and (relative error, KL, saturated values) of per-channel K with 16 tokens appended.
ERRORS = {1: ((0.0772654, 0.00728444), (0.0766118, 0.00680455), (0.016951, 0.000378642), (0.0276193, 0.00140349, 54)),
          2: ((0.0650706, 0.00833077), (0.0637721, 0.00797929), (0.0181168, 0.000580988), (0.0179551, 0.000562852, 59)),
          3: ((0.0603502, 0.00628374), (0.0599769, 0.00628471), (0.0172742, 0.000433332), (0.0306113, 0.00370523, 51)),
          4: ((0.0671594, 0.0076406), (0.0658668, 0.00671508), (0.0157848, 0.000316989), (0.0459872, 0.0401701, 64)),
          5: ((0.0541785, 0.00438352), (0.0538884, 0.00433841), (0.0165936, 0.000360892), (0.0283789, 0.0115144, 69))}
# LLaMA-7B in analysis/: the A100s' bandwidth (GB/s), the 16-bit peak, the 80 GB of memory.
A100_40_BW, A100_80_BW, A100_PEAK, A100_80_MEMORY = 1555e9, 2039e9, 312e12, 80e9


def claims(lab):
    bench = lab.json("ch04-bench.json")
    med = {b["run_name"].replace("/manual_time", ""): b for b in bench["benchmarks"] if b.get("aggregate_name") == "median"}
    cv = {b["run_name"].replace("/manual_time", ""): b for b in bench["benchmarks"] if b.get("aggregate_name") == "cv"}
    calls = {}
    for b in bench["benchmarks"]:
        if b.get("run_type") == "iteration":
            calls.setdefault(b["run_name"].replace("/manual_time", ""), []).append(b)
    fastest = {k: min(x["real_time"] for x in v) for k, v in calls.items()}
    dram = "L:32768/batch:24"

    def name(cache, shape, prefix="decode_"):
        kernel = "decode_int8_simd" if cache.startswith("int8") else "decode_simd"
        return f"{prefix}{cache}/cpu/{kernel}/{shape}"
    big = {c: med[name(c, dram, "decode_8xllc_")] for c in ("fp32", "fp16", "int8_per_token", "int8_per_channel",
                                                           "int8_per_token_fp16scales")}
    mib = {c: b["bytes"] / 2 ** 20 for c, b in big.items()}

    # §1: scales and a row's bytes.
    row_kib = KV_HEADS * HEAD_DIM * 2 / 1024  # K and V, one byte each
    c = [Claim(r"^([\d.]+)% on top of the int8 data at head_dim 128\. `ScaleDtype::fp16` stores it in 2 bytes \(([\d.]+)%\)",
               [100 * 4 / HEAD_DIM, 100 * 2 / HEAD_DIM], "4 / 128, 2 / 128"),
         Claim(r"65504 — \|x\| > ([\d.]+)·10⁶", [FP16_MAX * 127 / 1e6], "65504 · 127"),
         Claim(r"it saves (\d+) MiB of (\d+) MiB — \*\*([\d.]+)%$",
               [big["int8_per_token"]["scale_MiB"] - big["int8_per_token_fp16scales"]["scale_MiB"], mib["int8_per_token"],
                100 * (mib["int8_per_token"] - mib["int8_per_token_fp16scales"]) / mib["int8_per_token"]], "scale_MiB, bytes"),
         Claim(r"^of the cache\*\* \((\d+) MiB of scales instead of (\d+);",
               [big["int8_per_token_fp16scales"]["scale_MiB"], big["int8_per_token"]["scale_MiB"]], "scale_MiB"),
         Claim(r"\(64: (\d+)% saved\)", [100 * 2 / (64 + 4)], "2 bytes saved of 64 + 4"),
         row("| cache | bytes per token per layer |", ["fp32"], [4 * row_kib, 2], "2 · 32 · 128 · 4 B"),
         row("| cache | bytes per token per layer |", ["fp16"], [2 * row_kib, 1], "2 · 32 · 128 · 2 B")]
    for label, scale_bytes in (("fp32", 4), ("fp16", 2)):
        scales = 2 * KV_HEADS * scale_bytes
        total = row_kib + scales / 1024
        c.append(Claim(r"^\| INT8, " + label + r" per-token scales \| (\d+) KiB \+ (\d+) B = ([\d.]+) KiB \| ([\d.]+)× \|",
                       [row_kib, scales, total, total / (2 * row_kib)], f"codes + {label} scales, / fp16"))
    # §4: the DRAM point.
    c += [Claim(r"cache of 8× that would be ([\d.]+) GiB and the fp32 cache of$", [8 * REPORTED_L3_MIB / 1024],
                "8 × 480 MiB"),
          Claim(r"^the same shape (\d+) GiB", [4 * 8 * REPORTED_L3_MIB / 1024], "4 bytes a value instead of 1"),
          Claim(r"fp32 (\d+) MiB \(([\d.]+)×$", [mib["fp32"], mib["fp32"] / REPORTED_L3_MIB], "bytes; / 480 MiB"),
          Claim(r"^the reported L3\), fp16 (\d+) MiB \(([\d.]+)×\), INT8 (\d+) MiB \(([\d.]+)×\)\*\*\. All three are (\d+)–(\d+)×",
                [mib["fp16"], mib["fp16"] / REPORTED_L3_MIB, mib["int8_per_token"], mib["int8_per_token"] / REPORTED_L3_MIB,
                 mib["int8_per_token"] / SHARE_MIB[1], mib["fp32"] / SHARE_MIB[0]], "bytes; / 480 MiB; / 256 and 64 MiB"),
          Claim(r"the INT8 cache is ([\d.]+)× the \*reported\* L3", [mib["int8_per_token"] / REPORTED_L3_MIB], "/ 480 MiB"),
          Claim(r"read bandwidth ([\d.]+) GB/s$", [float(bench["context"]["roofline_read_gbs"])], "the saved roofline")]
    for run, (f32, f16, *int8) in RUNS.items():
        c.append(row("| run | fp32 ms |", [str(run)], [None, None, None, None, None, min(f16 / t for t in int8), None],
                     f"run {run}: fp16 / the slowest INT8"))
        c.append(Claim(r"^\| " + str(run) + r" \|.*\| [\d.]+–([\d.]+)× \| ([\d.]+)–([\d.]+)× \|$",
                       [max(f16 / t for t in int8), min(f32 / t for t in int8), max(f32 / t for t in int8)],
                       f"run {run}: the ratios of its times", table="| run | fp32 ms |"))
    # The medians of the sweep.
    t = {k: b["real_time"] for k, b in big.items()}
    bytes_ratio = {"int8_per_token": mib["fp16"] / mib["int8_per_token"], "int8_per_channel": mib["fp16"] / mib["int8_per_channel"]}
    r16 = [t["fp16"] / t["int8_per_token"], t["fp16"] / t["int8_per_channel"]]
    r32 = [t["fp32"] / t["int8_per_token"], t["fp32"] / t["int8_per_channel"]]
    c += [Claim(r"\): fp32 ([\d.]+) ms \(([\d.]+) GB/s, (\d+)% of$", [t["fp32"], big["fp32"]["GB/s"], big["fp32"]["read_pct"]],
                "the DRAM point's fp32 median"),
          Claim(r"^the read roof\), fp16 ([\d.]+) ms \(([\d.]+) GB/s, (\d+)%\), INT8 per-token ([\d.]+) ms \(([\d.]+) GB/s, (\d+)%\),",
                [t["fp16"], big["fp16"]["GB/s"], big["fp16"]["read_pct"], t["int8_per_token"],
                 big["int8_per_token"]["GB/s"], big["int8_per_token"]["read_pct"]], "medians"),
          Claim(r"^per-channel ([\d.]+) ms \(([\d.]+) GB/s, (\d+)%\): \*\*int8/fp16 = ([\d.]+)–([\d.]+)×, "
                r"int8/fp32 = ([\d.]+)–([\d.]+)× by",
                [t["int8_per_channel"], big["int8_per_channel"]["GB/s"], big["int8_per_channel"]["read_pct"],
                 min(r16), max(r16), min(r32), max(r32)], "medians and their ratios"),
          Claim(r"the byte ratios are ([\d.]+)× and ([\d.]+)× \(([\d.]+)× and ([\d.]+)× for per-channel K",
                [bytes_ratio["int8_per_token"], mib["fp32"] / mib["int8_per_token"], bytes_ratio["int8_per_channel"],
                 mib["fp32"] / mib["int8_per_channel"]], "bytes / bytes"),
          Claim(r"one per token: (\d+) MiB\)", [mib["int8_per_channel"]], "per-channel bytes"),
          Claim(r"\(per-channel's ([\d.]+)× is ([\d.]+)% above its ([\d.]+)×, inside$",
                [r16[1], 100 * (r16[1] / bytes_ratio["int8_per_channel"] - 1), bytes_ratio["int8_per_channel"]],
                "time ratio against byte ratio"),
          Claim(r"a (\d+)% coefficient of variation", [100 * cv[name("int8_per_channel", dram, "decode_8xllc_")]["real_time"]],
                "cv of per-channel's calls"),
          Claim(r"^([\d.]+)–([\d.]+)× and ([\d.]+)–([\d.]+)×; a ratio above the ([\d.]+)× byte ratio",
                [min(r[1] / x for r in RUNS.values() for x in r[2:]), max(r[1] / x for r in RUNS.values() for x in r[2:]),
                 min(r[0] / x for r in RUNS.values() for x in r[2:]), max(r[0] / x for r in RUNS.values() for x in r[2:]),
                 bytes_ratio["int8_per_token"]], "the three runs' ratios; bytes")]
    # The sweep's fastest calls.
    shapes = [("L 2048 × batch 4 \\(in cache\\)", "L:2048/batch:4", "decode_"), ("L 8192 × batch 4", "L:8192/batch:4", "decode_"),
              ("L 32768 × batch 4 \\(264–1024 MiB\\)", "L:32768/batch:4", "decode_"),
              ("L 32768 × batch 24 \\(DRAM point\\)", dram, "decode_8xllc_")]
    for label, shape, prefix in shapes:
        f = {cache: fastest[name(cache, shape, prefix)] for cache in ("fp32", "fp16", "int8_per_token", "int8_per_channel")}
        c.append(Claim(r"^\| " + label + r" \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \(([\d.]+)×, ([\d.]+)×\) \| "
                       r"([\d.]+) \(([\d.]+)×, ([\d.]+)×\) \|",
                       [f["fp32"], f["fp16"], f["int8_per_token"], f["fp16"] / f["int8_per_token"],
                        f["fp32"] / f["int8_per_token"], f["int8_per_channel"], f["fp16"] / f["int8_per_channel"],
                        f["fp32"] / f["int8_per_channel"]], f"{shape}: the fastest calls and their ratios"))

    def gbs(cache, shape="L:8192/batch:4"):
        return [x["GB/s"] for x in calls[name(cache, shape)]]
    int8_8k = gbs("int8_per_token") + gbs("int8_per_channel")
    c += [Claim(r"At L 8192 × batch 4 the INT8 cache, (\d+) MiB,$", [med[name("int8_per_token", "L:8192/batch:4")]["bytes"] / 2 ** 20],
                "bytes"),
          Claim(r"^streams at (\d+)–(\d+) GB/s — above the DRAM read roof", [min(int8_8k), max(int8_8k)], "the calls' GB/s"),
          Claim(r"^while the fp16 one streams at (\d+)–(\d+) GB/s", [min(gbs("fp16")), max(gbs("fp16"))], "the calls' GB/s"),
          Claim(r"fp16 scales save ([\d.]+)% of the bytes",
                [100 * (mib["int8_per_token"] - mib["int8_per_token_fp16scales"]) / mib["int8_per_token"]], "bytes"),
          Claim(r"^holds ([\d.]+)× the INT8 bytes at the DRAM point; by median both stream at about (\d+) GB/s",
                [bytes_ratio["int8_per_token"], big["fp16"]["GB/s"]], "bytes; GB/s \"about\"", rel=0.03),
          Claim(r"^ratio is the bytes' \(([\d.]+)–([\d.]+)×\)", [min(r16), max(r16)], "the medians' ratios")]
    # The runs' fastest calls as bandwidths: the runs' times and the bytes of the JSON.
    read = float(bench["context"]["roofline_read_gbs"])
    mb = {k: v * 2 ** 20 / 1e6 for k, v in mib.items()}
    int8_gbs = [mb[k] / r[i] for r in RUNS.values() for i, k in ((2, "int8_per_token"), (3, "int8_per_channel"),
                                                                (4, "int8_per_token_fp16scales"))]
    fp16_gbs = [mb["fp16"] / r[1] for r in RUNS.values()]
    c += [Claim(r"INT8's reach (\d+)–(\d+) GB/s \((\d+)–(\d+)% of$",
                [min(int8_gbs), max(int8_gbs), 100 * min(int8_gbs) / read, 100 * max(int8_gbs) / read], "MB / ms; / read"),
          Claim(r"^the ([\d.]+) GB/s read roof, itself", [read], "the saved roofline"),
          Claim(r"fp16's (\d+)–(\d+)$", [min(fp16_gbs), max(fp16_gbs)], "MB / ms"),
          Claim(r"^GB/s \((\d+)–(\d+)%\)", [100 * min(fp16_gbs) / read, 100 * max(fp16_gbs) / read], "/ read"),
          Claim(r"context ≥ 4096 — (\d+)% of the ([\d.]+)× byte ratio", [100 * 1.7 / bytes_ratio["int8_per_token"],
                                                                       bytes_ratio["int8_per_token"]], "1.7 / 1.94")]
    # §5: LLaMA-7B at batch 1, 2048 tokens, fp16.
    weights = 2 * (LLAMA7_LAYERS * (4 * LLAMA7_DIM ** 2 + 3 * LLAMA7_DIM * LLAMA7_HIDDEN) + LLAMA7_VOCAB * LLAMA7_DIM)
    kv = 2048 * LLAMA7_LAYERS * 2 * LLAMA7_DIM * 2
    c += [Claim(r"reads ([\d.]+) GB of weights and (\d+) GiB of KV cache \(2048 tokens\): the weights are (\d+)% of the bytes",
                [weights / 1e9, kv / 2 ** 30, 100 * weights / (weights + kv)], "the layers and the head in fp16; 2 · 32 · 4096 · 2 B a token"),
          Claim(r"^\(([\d.]+) of ([\d.]+) GB; an earlier version", [weights / 1e9, (weights + kv) / 1e9], "weights, + KV"),
          Claim(r"int8 values with one fp16 scale each \(([\d.]+) bits per value\)", [(32 * 8 + 16) / 32], "32 bytes + 2"),
          Claim(r"relative error ≤ 2⁻⁴ = ([\d.]+)% \(about", [100 / 16], "2⁻⁴"),
          Claim(r"a relative error ≤ ([\d.]+)%, about 1\.2", [100 / 16], "2⁻⁴")]
    # §3: the error table and what it says.
    for ds, cells in ERRORS.items():
        pat = r"^\| " + str(ds) + r" \|"
        vals = []
        for i, cell in enumerate(cells):
            e = math.floor(math.log10(cell[1]))
            pat += r" ([\d.]+) \(([\d.]+)e" + str(e) + r"\)" + (r"; (\d+) \|" if i == 3 else r" \|")
            vals += [cell[0], cell[1] / 10 ** e] + ([cell[2]] if i == 3 else [])
        c.append(Claim(pat + "$", vals, f"dataset {ds}: the test's output (seed {ds})",
                       table="| dataset | per-token K, fp32 scales |"))
    err = [v[i][0] / v[2][0] for v in ERRORS.values() for i in (0, 1)]
    kl = [v[i][1] / v[2][1] for v in ERRORS.values() for i in (0, 1)]
    f16 = [100 * (v[1][0] / v[0][0] - 1) for v in ERRORS.values()]
    f16kl = [100 * (v[1][1] / v[0][1] - 1) for v in ERRORS.values()]
    sat = [v[3][2] for v in ERRORS.values()]
    app = [v[3][0] / v[2][0] for v in ERRORS.values()]
    tok = [v[i][0] for v in ERRORS.values() for i in (0, 1)]
    c += [Claim(r"cut the error ([\d.]+)–([\d.]+)× and the KL (\d+)–(\d+)×\*\*", [min(err), max(err), min(kl), max(kl)],
                "per-token (either scale) / per-channel, per dataset"),
          Claim(r"move the error by −?([\d.]+)% to −?([\d.]+)%$", [-min(f16), -max(f16)], "fp16 scales / fp32 scales − 1 (both negative)"),
          Claim(r"^  of itself \(KL −(\d+)% to (\d+)%\) on the five datasets above", [-min(f16kl), max(f16kl)], "KL with fp16 / fp32 scales − 1"),
          Claim(r"0\.0?(\d+)–0\.0?(\d+) for per-token scales across datasets", [1000 * min(tok), 1000 * max(tok)],
                "per-token errors (in thousandths)"),
          Claim(r"with 16 tokens appended past the prompt, (\d+)–(\d+) outlier$", [min(sat), max(sat)], "saturated values"),
          Claim(r"values saturated, and the error was ([\d.]+)–([\d.]+)× that", [min(app), max(app)],
                "appended / whole context in the prompt")]
    # §5: `inferlab analyze` (analysis/inference_cost.cpp): weights streamed (block matmuls in the weight format;
    # head and norms 16-bit), the KV of context + 1 tokens per sequence, a step's time max(bytes / bandwidth, FLOPs / peak).
    block = LLAMA7_LAYERS * (4 * LLAMA7_DIM ** 2 + 3 * LLAMA7_DIM * LLAMA7_HIDDEN)
    head, norms = LLAMA7_VOCAB * LLAMA7_DIM, LLAMA7_LAYERS * 2 * LLAMA7_DIM + LLAMA7_DIM

    def analyze(batch, ctx, w8, kv8, bw):
        streamed = block * (1 if w8 else 2) + 2 * (head + norms)
        per_token = LLAMA7_LAYERS * (2 * LLAMA7_DIM * (1 if kv8 else 2) + (2 * KV_HEADS * 2 if kv8 else 0))
        nbytes = streamed + per_token * (ctx + 1) * batch
        flops = 2 * (block + head) * batch + 4 * (ctx + 1) * HEAD_DIM * KV_HEADS * LLAMA7_LAYERS * batch
        secs = max(nbytes / bw, flops / A100_PEAK)
        return dict(tps=batch / secs, secs=secs, bytes=nbytes, kv=per_token * ctx * batch, held=streamed + 2 * head,
                    cross=streamed / per_token)
    small = {k: analyze(1, 2048, w8, kv8, A100_40_BW)["tps"] for k, w8, kv8 in
             (("as", 0, 0), ("w8", 1, 0), ("kv8", 0, 1), ("both", 1, 1))}
    for label, key in (("as given", "as"), ("int8 weights", "w8"), ("int8 KV", "kv8"), ("int8 weights \\+ int8 KV", "both")):
        c.append(Claim(r"^      " + label + r" +([\d.]+) tokens/s +x([\d.]+)$", [small[key], small[key] / small["as"]],
                       f"analyze, batch 1 × 2048, A100 40GB: {label}"))
    f16, i8 = analyze(64, 4096, 0, 0, A100_80_BW), analyze(64, 4096, 0, 1, A100_80_BW)
    w8 = analyze(64, 4096, 1, 0, A100_80_BW)
    c += [Claim(r"--kv fp16:  KV ([\d.]+) GiB = ([\d.]+) GB \(does NOT fit in (\d+) GB\); decode step ([\d.]+) GB, KV read ([\d.]+)%$",
                [f16["kv"] / 2 ** 30, f16["kv"] / 1e9, A100_80_MEMORY / 1e9, f16["bytes"] / 1e9,
                 100 * f16["kv"] / f16["bytes"]], "batch 64 × 4096, fp16 KV"),
          Claim(r"^                time floor ([\d.]+) ms, ([\d.]+) tokens/s$", [f16["secs"] * 1e3, f16["tps"]], "bytes / 2039 GB/s"),
          Claim(r"^                  int8 weights +([\d.]+) tokens/s +x([\d.]+)$", [w8["tps"], w8["tps"] / f16["tps"]], "int8 weights"),
          Claim(r"^                  int8 KV +(\d+) tokens/s +x([\d.]+)$", [i8["tps"], i8["tps"] / f16["tps"]], "int8 KV"),
          Claim(r"--kv int8:  KV ([\d.]+) GiB = ([\d.]+) GB \(with ([\d.]+) GB of weights: ([\d.]+) GB, still does NOT fit\);$",
                [i8["kv"] / 2 ** 30, i8["kv"] / 1e9, i8["held"] / 1e9, (i8["held"] + i8["kv"]) / 1e9], "INT8 KV, fp16 scales"),
          Claim(r"^                decode step ([\d.]+) GB, time floor ([\d.]+) ms, (\d+) tokens/s$",
                [i8["bytes"] / 1e9, i8["secs"] * 1e3, i8["tps"]], "INT8 KV"),
          Claim(r"At batch 1 the ×([\d.]+) comes from \*\*weight\*\* quantization; an INT8 KV cache buys (\d+)%",
                [small["w8"] / small["as"], 100 * (small["kv8"] / small["as"] - 1)], "the table above"),
          Claim(r"the cache is (\d+)% of the bytes a step reads, INT8 KV is worth ×([\d.]+) and INT8$",
                [100 * f16["kv"] / f16["bytes"], i8["tps"] / f16["tps"]], "the output above"),
          Claim(r"^weights ×([\d.]+)\. The calculator prints the crossover", [w8["tps"] / f16["tps"]], "the output above"),
          Claim(r"at batch × context = (" + NUMBER + r") cached tokens \(fp16 KV; (" + NUMBER + r") with an INT8 cache\)",
                [f16["cross"], i8["cross"]], "weights streamed / KV bytes a token"),
          Claim(r"cache's \*size\* \(here (\d+)$", [f16["kv"] / 1e9], "the fp16 KV in GB"),
          Claim(r"^GB vs (\d+) GB\) decides", [i8["kv"] / 1e9], "the INT8 KV in GB")]
    return c
