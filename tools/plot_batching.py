#!/usr/bin/python3
"""Draw chapter 07's figures from bench_ch07's two JSON files:

1. the batch roofline of one decode step (family decode_step/B): achieved GFLOP/s against
   arithmetic intensity on log axes, each point labelled with its batch size B, under the roof
   min(peak, AI × read bandwidth) of the roofline the run measured against;
2. which request runs in which step, for static and for continuous batching on the same requests
   (the first two runs of the serving study, all arriving at t = 0).

    ./inferlab bench ch07 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \\
        --benchmark_out=docs/plots/ch07-bench.json --benchmark_out_format=json \\
        --serving-out=docs/plots/ch07-serving.json
    /usr/bin/python3 tools/plot_batching.py docs/plots/ch07-bench.json docs/plots/ch07-serving.json \\
        --out docs/plots/ch07-batching

Reads the median aggregates when the run had repetitions. Writes OUT.png and OUT.svg. Needs
matplotlib from Debian (python3-matplotlib) for /usr/bin/python3.
"""

import argparse
import json
import sys


def decode_points(data):
    """[(B, AI, GFLOP/s, roof GFLOP/s)] of the decode_step runs (medians when aggregated)."""
    runs = data.get("benchmarks", [])
    aggregated = any(r.get("aggregate_name") == "median" for r in runs)
    points = []
    for r in runs:
        if not r.get("run_name", r["name"]).startswith("decode_step/") or r.get("error_occurred"):
            continue
        if aggregated and r.get("aggregate_name") != "median":
            continue
        if not aggregated and r.get("run_type") == "aggregate":
            continue
        points.append((int(r["B"]), r["AI"], r["GFLOP/s"], r["roof_GFLOP/s"]))
    return sorted(points)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench_json")
    parser.add_argument("serving_json")
    parser.add_argument("--out", required=True, help="output path without extension")
    args = parser.parse_args(argv)
    with open(args.bench_json) as f:
        bench = json.load(f)
    with open(args.serving_json) as f:
        serving = json.load(f)
    points = decode_points(bench)
    if not points:
        sys.exit("plot_batching.py: no decode_step runs in " + args.bench_json)
    runs = [r["result"] for r in serving["runs"] if "steps" in r["result"]]
    if len(runs) < 2:
        sys.exit("plot_batching.py: the serving JSON has no per-step records for two runs")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), gridspec_kw={"width_ratios": [1.2, 1, 1]})
    ax = axes[0]
    ai = [p[1] for p in points]
    ax.loglog(ai, [p[2] for p in points], "o-", label="measured (median)")
    # The roof: each point's own min(peak, AI × read bandwidth) — the same ceiling at every AI.
    lo, hi = min(ai) / 1.5, max(ai) * 1.5
    read_gbs = points[0][3] / points[0][1]  # the roof at the first (bandwidth-bound) point / its AI
    peak = max(p[3] for p in points)
    xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    ax.loglog(xs, [min(peak, read_gbs * x) for x in xs], "k--",
              label=f"roof: min({peak:.0f} GFLOP/s peak, AI × {read_gbs:.1f} GB/s read)")
    for b, x, y, _ in points:
        ax.annotate(f"B={b}", (x, y), textcoords="offset points", xytext=(4, -12), fontsize=8)
    ax.set_xlabel("arithmetic intensity (FLOP/byte: weights + KV read once per step)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("one decode step of the whole model vs batch B")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)

    for ax, run in zip(axes[1:], runs[:2]):
        for step, record in enumerate(run["steps"]):
            ax.scatter([step] * len(record["ids"]), record["ids"], s=2, marker="s", color="tab:blue")
        summary = run["run"]["summary"]
        ax.set_title(f"{run['name']}: {summary['tokens_per_s']:.0f} tokens/s, {len(run['steps'])} steps")
        ax.set_xlabel("step")
        ax.set_ylabel("request id")
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{args.out}.{ext}", dpi=110)
    print(f"wrote {args.out}.png and {args.out}.svg")


if __name__ == "__main__":
    main(sys.argv[1:])
