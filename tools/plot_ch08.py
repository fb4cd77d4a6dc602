#!/usr/bin/python3
"""Chapter 08's figure and tables from bench_ch08's JSON files:

1. decode tokens/s of each weight format beside the ceiling its bytes per token allow
   (read bandwidth / bytes), batch 1 at 512 cached tokens;
2. batched decode: tokens/s of one step against the batch B, on the file's weights.

    ./inferlab bench ch08 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \\
        --benchmark_out=docs/plots/ch08-bench.json --benchmark_out_format=json \\
        --quality-out=docs/plots/ch08-quality.json
    /usr/bin/python3 tools/plot_ch08.py docs/plots/ch08-bench.json --quality docs/plots/ch08-quality.json \\
        --peer docs/plots/ch08-llama-cpp.json --out docs/plots/ch08-real-model --tables

Reads the median aggregates when the run had repetitions. Writes OUT.png and OUT.svg (matplotlib
from Debian, python3-matplotlib, for /usr/bin/python3); --tables prints the lesson's Markdown
tables instead of (or, with --out, as well as) drawing.
"""

import argparse
import json
import sys


def rows(data):
    """{run name without /manual_time: counters} — the medians when the run was aggregated."""
    runs = data.get("benchmarks", [])
    aggregated = any(r.get("aggregate_name") == "median" for r in runs)
    out = {}
    for r in runs:
        if r.get("error_occurred"):
            continue
        if aggregated and r.get("aggregate_name") != "median":
            continue
        if not aggregated and r.get("run_type") == "aggregate":
            continue
        out[r["run_name"].replace("/manual_time", "")] = r
    return out


FORMATS = [("f32", "f32 (the file dequantized)"), ("f16", "f16"), ("q8_0", "Q8_0"),
           ("q4_1", "Q4_1 everywhere"), ("file", "**the file** (Q4_1 + Q8_0 head)"),
           ("file,kv=fp16", "the file, fp16 KV")]


def tables(data, quality, peer):
    r = rows(data)
    ctx = data.get("context", {})
    reps = next((v.get("repetitions") for v in r.values() if v.get("repetitions")), 1)
    out = [f"Medians of {reps} repetitions ({ctx.get('date', '?')}); read roof "
           f"{float(ctx.get('roofline_read_gbs', 0)):.1f} GB/s, FMA peak {float(ctx.get('roofline_peak_gflops', 0)):.0f} "
           f"GFLOP/s (`{ctx.get('roofline_file', '?')}`, measured {ctx.get('roofline_measured_at', '?')}); "
           f"GOMP_SPINCOUNT {ctx.get('GOMP_SPINCOUNT', '?')}.", ""]
    out += ["| weights | weights read | KV read | decode tokens/s | GB/s | % of read roof | ceiling tokens/s | "
            "prefill 512 tokens/s |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for key, label in FORMATS:
        d = r.get("decode/" + key)
        if d is None:
            continue
        p = r.get("prefill/" + key.split(",")[0]) if "," not in key else None
        out.append(f"| {label} | {d['weight_MB']:.1f} MB | {d['kv_MB']:.1f} MB | {d['tokens/s']:.1f} | {d['GB/s']:.1f} | "
                   f"{d['read_pct']:.0f}% | "
                   f"{d['roof_tokens/s']:.0f} | " + (f"{p['tokens/s']:.0f}" if p else "") + " |")
    out += ["", "| B | step | tokens/s | × B = 1 | AI | GFLOP/s | GB/s |", "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    batch = sorted((int(k.split("/")[1]), v) for k, v in r.items() if k.startswith("decode_batch/"))
    base = batch[0][1]["tokens/s"] if batch else None
    for b, v in batch:
        out.append(f"| {b} | {v['real_time']:.1f} ms | {v['tokens/s']:.0f} | {v['tokens/s'] / base:.1f}× | {v['AI']:.1f} | "
                   f"{v['GFLOP/s']:.0f} | {v['GB/s']:.1f} |")
    if quality:
        runs = quality["runs"]
        floor = next((x["ppl"] for x in runs if x["weights"] == "f32" and x["kv"] == "fp32"), None)
        file_ppl = next((x["ppl"] for x in runs if x["weights"] == "file" and x["kv"] == "fp32"), None)
        out += ["", f"Perplexity of `{quality['text']}` ({quality['tokens']} tokens, {quality['scored_tokens']} scored):", "",
                "| weights, KV cache | PPL | vs the f32 floor | vs the file |", "| --- | ---: | ---: | ---: |"]
        for x in runs:
            out.append(f"| {x['name']} | {x['ppl']:.4f} | {100 * (x['ppl'] / floor - 1):+.2f}% | "
                       f"{100 * (x['ppl'] / file_ppl - 1):+.2f}% |")
    if peer:
        lc, lab = peer["llama_cpp"], peer.get("lab", {})
        out += ["", "| 2 threads, the same file | llama.cpp | the lab | lab / llama.cpp |", "| --- | ---: | ---: | ---: |"]
        for key, label in (("decode_tokens_per_s", "decode tokens/s (fp16 KV, context 512)"),
                           ("prefill_tokens_per_s", "prefill tokens/s (512-token prompt)")):
            if key in lab:
                out.append(f"| {label} | {lc[key]:.1f} | {lab[key]:.1f} | {lab[key] / lc[key]:.2f}× |")
    return "\n".join(out)


def draw(data, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = rows(data)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    keys = [k for k, _ in FORMATS if "decode/" + k in r]
    x = range(len(keys))
    left.bar([i - 0.2 for i in x], [r["decode/" + k]["roof_tokens/s"] for k in keys], 0.4, label="ceiling: read roof / bytes",
             color="#cccccc")
    left.bar([i + 0.2 for i in x], [r["decode/" + k]["tokens/s"] for k in keys], 0.4, label="measured (median)", color="#3070b0")
    left.set_xticks(list(x), keys, rotation=20)
    left.set_ylabel("decode tokens/s, batch 1, 512 cached tokens")
    left.set_title("SmolLM2-135M: the weights' bytes set the ceiling")
    left.legend()
    batch = sorted((int(k.split("/")[1]), v["tokens/s"]) for k, v in r.items() if k.startswith("decode_batch/"))
    right.plot([b for b, _ in batch], [t for _, t in batch], "o-", color="#3070b0")
    right.set_xscale("log", base=2)
    right.set_xlabel("sequences in the step (B), 512 cached tokens each")
    right.set_ylabel("tokens/s")
    right.set_title("batched decode on the file's weights")
    right.grid(True, alpha=0.3)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{path}.{ext}", dpi=110)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bench")
    p.add_argument("--quality")
    p.add_argument("--peer")
    p.add_argument("--out")
    p.add_argument("--tables", action="store_true")
    a = p.parse_args(argv[1:])
    load = lambda f: json.load(open(f)) if f else None  # noqa: E731
    data = load(a.bench)
    if a.tables or not a.out:
        print(tables(data, load(a.quality), load(a.peer)))
    if a.out:
        draw(data, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
