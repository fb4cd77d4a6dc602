#!/usr/bin/env python3
"""Chapter 11's measurements, side by side in one run, into the JSON the lesson's tables come from.

  gemm    bench_ch11's sweep: the quantized GEMM at SmolLM2's shapes, M = 1 … 512, chapter 08's
          kernel beside chapter 11's packed one (and the narrower instruction sets at M = 64),
          against the int8 ceiling of roofline.json  -> docs/plots/ch11-gemm.json
  model   bench_ch08's SmolLM2 rows — prefill/file (512 tokens), decode/file,kv=fp16 (batch 1, 512
          cached: llama.cpp's KV type), decode_batch/B (fp32 KV) and decode_batch,kv=int8/B for
          B = 1 … 64 — once with chapter 08's GEMM (INFERLAB_QUANT_GEMM=ch08) and once with the
          packed one, the two runs alternated --rounds times; each figure is the median of its
          rounds' medians                                             -> docs/plots/ch11-model.json

    build/venv/bin/python chapters/11-compute-roof/compute_roof_study.py            (both; ~10 min)
    build/venv/bin/python chapters/11-compute-roof/compute_roof_study.py --only model --rounds 3
    python3 chapters/11-compute-roof/compute_roof_study.py --tables     (the lesson's tables, from the JSON)
    python3 chapters/11-compute-roof/compute_roof_study.py --plot       (docs/plots/ch11-roofline.png)

Run it on an idle machine, after `./inferlab roofline` (the percentages are of that file's ceilings,
which the JSON records). The peer comparison with llama.cpp is chapters/08-real-model/llama_cpp_peer.py
(--lab-ch08 runs the lab with both GEMMs beside llama.cpp).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build", "default")


def run_bench(binary, args, env_extra):
    env = dict(os.environ)
    env.update(env_extra)
    out = subprocess.run([binary, *args, "--benchmark_format=json"], check=True, capture_output=True, text=True,
                         env=env).stdout
    return json.loads(out)


def medians(data):
    """{run_name: row} of the median aggregates (or the single iteration when there are none)."""
    rows = {b["run_name"]: b for b in data["benchmarks"] if b.get("aggregate_name") == "median"}
    return rows or {b["run_name"]: b for b in data["benchmarks"] if b.get("run_type") == "iteration"}


def int8_ceiling_now():
    """The int8 ceiling measured again, quickly, beside the sweep: on a shared VM the ceiling moves too."""
    path = os.path.join(BUILD, "roofline-study.json")
    subprocess.run([os.path.join(BUILD, "inferlab"), "roofline", "--runs", "1", "--seconds", "0.3", "--out", path],
                   check=True, capture_output=True, text=True)
    return json.load(open(path))["int8_gops"]


def gemm_study(repetitions):
    before = int8_ceiling_now()
    data = run_bench(os.path.join(BUILD, "chapters", "bench_ch11"),
                     ["--benchmark_filter=^gemm/", f"--benchmark_repetitions={repetitions}",
                      "--benchmark_report_aggregates_only=true", "--benchmark_min_time=0.2"], {})
    rows = []
    for name, row in sorted(medians(data).items()):
        parts = name.split("/")  # gemm/<format>/<out>x<in>/<kernel>/<M>/manual_time
        rows.append({"format": parts[1], "shape": parts[2], "kernel": parts[3], "M": int(parts[4]),
                     "GOP/s": row["GOP/s"], "int8_pct": row["int8_pct"], "AI": row["AI"],
                     "roof_pct": row["roof_pct"], "GB/s": row["GB/s"], "best_GOP/s": row["best_GOP/s"],
                     "int8_pct_now": row["int8_pct_now"], "int8_now_GOP/s": row["int8_now_GOP/s"]})
    after = int8_ceiling_now()
    return {"int8_gops_measured_before_and_after": [before, after],"context": {k: data["context"].get(k) for k in ("packed_kernel", "int8_gops", "int8_instruction",
                                                              "int8_ridge_point", "roofline_cpu", "host_name")},
            "command": "bench_ch11 --benchmark_filter=^gemm/ --benchmark_repetitions=%d "
                       "--benchmark_report_aggregates_only=true --benchmark_min_time=0.2" % repetitions,
            "rows": rows}


MODEL_FILTER = r"^(prefill/file|decode/file,kv=fp16|decode_batch|decode_batch,kv=int8)/"


def model_study(rounds, repetitions):
    binary = os.path.join(BUILD, "chapters", "bench_ch08")
    args = ["--no-quality", f"--benchmark_filter={MODEL_FILTER}", f"--benchmark_repetitions={repetitions}",
            "--benchmark_report_aggregates_only=true"]
    seen = {"ch08": [], "packed": []}
    for r in range(rounds):
        for gemm in ("ch08", "packed"):
            print(f"model study: round {r + 1} of {rounds}, {gemm} GEMM", file=sys.stderr, flush=True)
            seen[gemm].append(medians(run_bench(binary, args, {"INFERLAB_QUANT_GEMM": "ch08" if gemm == "ch08" else "",
                                                               "GOMP_SPINCOUNT": "1000"})))
    result = {"command": "bench_ch08 " + " ".join(args) + " (INFERLAB_QUANT_GEMM=ch08, then unset; alternated)",
              "rounds": rounds, "rows": []}
    for name in sorted(seen["packed"][0]):
        row = {"name": name.replace("/manual_time", "")}
        for gemm in ("ch08", "packed"):
            values = [s[name] for s in seen[gemm] if name in s]
            for key in ("tokens/s", "GB/s", "read_pct", "peak_pct", "AI", "GFLOP/s"):
                row[f"{gemm}_{key}"] = statistics.median(v[key] for v in values)
            row[f"{gemm}_tokens/s_rounds"] = [v["tokens/s"] for v in values]
        row["packed_over_ch08"] = row["packed_tokens/s"] / row["ch08_tokens/s"]
        result["rows"].append(row)
    return result


def load(out_dir, name):
    path = os.path.join(out_dir, name)
    return json.load(open(path)) if os.path.exists(path) else None


def print_tables(out_dir):
    """The lesson's Markdown tables, printed from the committed JSON (chapters/11-compute-roof/README.md)."""
    gemm, model, peer = load(out_dir, "ch11-gemm.json"), load(out_dir, "ch11-model.json"), load(out_dir, "ch11-llama-cpp.json")
    if gemm:
        roof = gemm["roofline"]
        print(f"roofline: int8 {roof['int8_gops']:.0f} GOP/s ({roof['int8_instruction']}), fp32 {roof['peak_gflops']:.0f}"
              f" GFLOP/s, read {roof['read_gbs']:.1f} GB/s, triad {roof['triad_gbs']:.1f} GB/s, int8 ridge "
              f"{roof['int8_ridge_point']:.1f}\n")
        rows = {(r["format"], r["shape"], r["kernel"], r["M"]): r for r in gemm["rows"]}
        print("| kernel (Q8_0, 1536 × 576, M = 64) | instruction | GOP/s | % of the int8 ceiling measured beside it | × previous |")
        print("| --- | --- | ---: | ---: | ---: |")
        previous = None
        for kernel, what in (("ch08", "chapter 08: GGUF's rows, hadd trees"), ("avx2", "packed, vpmaddubsw + vpmaddwd ymm"),
                             ("avx-vnni", "packed, vpdpbusd ymm"), ("packed", "packed, vpdpbusd zmm")):
            r = rows.get(("Q8_0", "1536x576", kernel, 64))
            if r is None:
                continue
            gain = "" if previous is None else f"{r['GOP/s'] / previous:.2f}×"
            print(f"| {kernel} | {what} | {r['GOP/s']:.0f} | {r['int8_pct_now']:.1f}% | {gain} |")
            previous = r["GOP/s"]
        print()
        for shape in ("1536x576", "576x1536", "49152x576"):
            print(f"| {shape.replace('x', ' × ')} | M | " + " | ".join(f"{f} ch08 → packed GOP/s (% of int8 beside)" for f in
                                                                 ("Q8_0", "Q4_0", "Q4_1")) + " |")
            print("| --- | ---: | ---: | ---: | ---: |")
            for m in sorted({k[3] for k in rows if k[1] == shape}):
                cells = []
                for fmt in ("Q8_0", "Q4_0", "Q4_1"):
                    old, new = rows.get((fmt, shape, "ch08", m)), rows.get((fmt, shape, "packed", m))
                    cells.append("" if old is None or new is None else
                                 f"{old['GOP/s']:.0f} → **{new['GOP/s']:.0f}** ({new['int8_pct_now']:.0f}%) "
                                 f"{new['GOP/s'] / old['GOP/s']:.1f}×")
                print(f"| | {m} | " + " | ".join(cells) + " |")
            print()
    if model:
        rows = {r["name"]: r for r in model["rows"]}
        print("| SmolLM2, the file's weights | chapter 08 GEMM | chapter 11 GEMM | × | % of roof (chapter 11) |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name, what, roof_key in (("prefill/file", "prefill, 512 tokens (tokens/s)", "peak_pct"),
                                     ("decode/file,kv=fp16", "decode, batch 1, fp16 KV (tokens/s)", "read_pct")):
            r = rows.get(name)
            if r:
                print(f"| {what} | {r['ch08_tokens/s']:.0f} | {r['packed_tokens/s']:.0f} | {r['packed_over_ch08']:.2f}× | "
                      f"{r['packed_' + roof_key]:.0f}% of {'int8' if roof_key == 'peak_pct' else 'read'} |")
        print()
        for kv, prefix in (("fp32", "decode_batch/"), ("INT8", "decode_batch,kv=int8/")):
            batch = sorted((int(n[len(prefix):]), r) for n, r in rows.items() if n.startswith(prefix))
            if not batch:
                continue
            base = batch[0][1]
            print(f"| B ({kv} KV) | ch08 tokens/s | packed tokens/s | packed × B = 1 | AI (op/byte) | GOP/s | % of int8 |")
            print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
            for b, r in batch:
                print(f"| {b} | {r['ch08_tokens/s']:.0f} | {r['packed_tokens/s']:.0f} | "
                      f"{r['packed_tokens/s'] / base['packed_tokens/s']:.1f}× | {r['packed_AI']:.1f} | "
                      f"{r['packed_GFLOP/s']:.0f} | {r['packed_peak_pct']:.1f}% |")
            print()
    if peer:
        lab, old, llama = peer["lab"], peer.get("lab_ch08_gemm", {}), peer["llama_cpp"]
        print("| 2 threads, the same file | llama.cpp | lab, chapter 08 GEMM | lab, chapter 11 GEMM | lab (11) / llama.cpp |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for key, what in (("prefill_tokens_per_s", "prefill tokens/s (512 tokens)"),
                          ("decode_tokens_per_s", "decode tokens/s (fp16 KV, context 512)")):
            print(f"| {what} | {llama[key]:.0f} | {old.get(key, float('nan')):.0f} | {lab[key]:.0f} | "
                  f"{lab[key] / llama[key]:.2f}× |")


def plot(out_dir):
    """docs/plots/ch11-roofline.png: the GEMM sweep and the batched decode on this machine's roofline,
    with the fp32 and the int8 compute roofs (from the committed JSON)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    gemm, model = load(out_dir, "ch11-gemm.json"), load(out_dir, "ch11-model.json")
    roof = (gemm or model)["roofline"]
    fp32, int8, bw = roof["peak_gflops"], roof["int8_gops"], roof["triad_gbs"]
    fig, ax = plt.subplots(figsize=(8.5, 5.6), dpi=120)
    ax.set_xscale("log")
    ax.set_yscale("log")
    lo, hi = 0.5, 400.0
    ax.plot([lo, int8 / bw], [lo * bw, int8], color="tab:blue", lw=2, label=f"memory roof: AI × {bw:.1f} GB/s (triad)")
    ax.plot([fp32 / bw, hi], [fp32, fp32], color="tab:red", lw=1.5, ls="--", label=f"fp32 FMA roof: {fp32:.0f} GFLOP/s")
    ax.plot([int8 / bw, hi], [int8, int8], color="tab:purple", lw=2,
            label=f"int8 roof: {int8:.0f} GOP/s ({roof['int8_instruction']})")
    if gemm:
        for kernel, marker, color in (("ch08", "s", "tab:orange"), ("packed", "o", "tab:green")):
            pts = sorted((r["AI"], r["GOP/s"], r["M"]) for r in gemm["rows"]
                         if r["format"] == "Q8_0" and r["shape"] == "1536x576" and r["kernel"] == kernel)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, lw=1,
                    label=f"GEMM Q8_0 1536×576, M = 1 … 512: {'chapter 08' if kernel == 'ch08' else 'chapter 11 (packed)'}")
    if model:
        for prefix, marker, label in (("decode_batch/", "^", "SmolLM2 decode step, fp32 KV, B = 1 … 64"),
                                      ("decode_batch,kv=int8/", "v", "SmolLM2 decode step, INT8 KV, B = 1 … 64")):
            pts = sorted((r["packed_AI"], r["packed_GFLOP/s"]) for r in model["rows"] if r["name"].startswith(prefix))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, lw=1, ls="--", label=label + " (packed)")
    bottom = ax.get_ylim()[0]
    for ridge, name in ((fp32 / bw, "fp32 ridge"), (int8 / bw, "int8 ridge")):
        ax.axvline(ridge, color="grey", lw=0.8, ls=":")
        ax.annotate(f"{name}\n{ridge:.1f} op/byte", xy=(ridge, bottom * 1.15), xytext=(3, 0), textcoords="offset points",
                    fontsize=7, color="dimgrey")
    ax.set_xlabel("arithmetic intensity (operations a byte)")
    ax.set_ylabel("GOP/s (a multiply or an add each)")
    ax.set_title(f"Chapter 11: the int8 roof ({roof.get('cpu', '')}, {roof.get('threads', '?')} threads)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    path = os.path.join(out_dir, "ch11-roofline.png")
    fig.tight_layout()
    fig.savefig(path)
    print(f"wrote {path}", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=["gemm", "model"])
    p.add_argument("--rounds", type=int, default=3, help="model study: alternations of the two GEMMs")
    p.add_argument("--repetitions", type=int, default=3, help="Google Benchmark repetitions a run")
    p.add_argument("--out-dir", default=os.path.join(ROOT, "docs", "plots"))
    p.add_argument("--tables", action="store_true", help="print the lesson's tables from the JSON and exit")
    p.add_argument("--plot", action="store_true", help="draw docs/plots/ch11-roofline.png from the JSON and exit")
    args = p.parse_args()
    if args.tables:
        print_tables(args.out_dir)
        return
    if args.plot:
        plot(args.out_dir)
        return
    roofline = json.load(open(os.path.join(ROOT, "build", "roofline.json")))
    for study in ("gemm", "model"):
        if args.only and args.only != study:
            continue
        result = gemm_study(args.repetitions) if study == "gemm" else model_study(args.rounds, args.repetitions)
        result["roofline"] = {k: roofline.get(k) for k in ("cpu", "threads", "peak_gflops", "int8_gops",
                                                           "int8_instruction", "read_gbs", "triad_gbs",
                                                           "int8_ridge_point", "ridge_point", "measured_at",
                                                           "load_average")}
        path = os.path.join(args.out_dir, f"ch11-{study}.json")
        with open(path, "w") as f:
            f.write(json.dumps(result, indent=1) + "\n")
        print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
