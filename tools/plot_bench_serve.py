#!/usr/bin/python3
"""Draws a `./inferlab bench serve` JSON (tools/bench_serve.py --out) for chapter 09's lesson:

  - a sweep (--sweep R1,R2,…: one row per rate): against the offered request rate, (a) output
    tokens/s and requests/s (with goodput when SLOs were given), (b) TTFT, (c) TPOT and (d) E2EL,
    median and p99 — where the server saturates, throughput flattens and the latencies climb;
  - one run: the distributions (empirical CDFs) of TTFT, TPOT, ITL and E2EL over its requests.

    /usr/bin/python3 tools/plot_bench_serve.py sweep.json --out sweep.png

matplotlib from Debian (python3-matplotlib) for /usr/bin/python3, as the lab's other plot tools;
`bench serve --plot FILE.png` calls this script. Standard library otherwise.
"""

import argparse
import json
import math
import sys


def rate_value(rate):
    return math.inf if rate == "inf" else float(rate)


def plot_sweep(plt, data, out):
    rows = sorted(data["rows"], key=lambda r: rate_value(r["rate"]))
    finite = [rate_value(r["rate"]) for r in rows if rate_value(r["rate"]) != math.inf]
    # An "all at once" row is drawn one step right of the largest finite rate, labelled inf.
    inf_x = (max(finite) * 2 if finite else 1.0)
    xs = [rate_value(r["rate"]) if rate_value(r["rate"]) != math.inf else inf_x for r in rows]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    ax = axes[0][0]
    ax.plot(xs, [r["output_throughput"] for r in rows], "o-", label="output tokens/s")
    ax.set_ylabel("output tokens/s")
    ax2 = ax.twinx()
    ax2.plot(xs, [r["request_throughput"] for r in rows], "s--", color="tab:orange", label="requests/s")
    if any(r.get("request_goodput") is not None for r in rows):
        ax2.plot(xs, [r.get("request_goodput") or 0 for r in rows], "^:", color="tab:green", label="goodput (req/s)")
    ax2.set_ylabel("requests/s")
    ax.set_title("(a) throughput")
    lines = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(lines, [line.get_label() for line in lines], loc="upper left", fontsize=8)
    for ax, metric, title in ((axes[0][1], "ttft", "(b) time to first token"),
                              (axes[1][0], "tpot", "(c) time per output token"),
                              (axes[1][1], "e2el", "(d) end-to-end latency")):
        ax.plot(xs, [r[f"median_{metric}_ms"] for r in rows], "o-", label="median")
        ax.plot(xs, [r[f"p99_{metric}_ms"] for r in rows], "s--", label="p99")
        ax.set_ylabel("ms")
        ax.set_title(title)
        ax.legend(fontsize=8)
    for ax in axes.flat:
        ax.set_xlabel("offered request rate (req/s)")
        ax.set_xticks(xs)
        ax.set_xticklabels([str(r["rate"]) for r in rows])
        ax.grid(alpha=0.3)
    c = data.get("config", {})
    fig.suptitle(f"bench serve sweep: {c.get('model')} at {c.get('url')}, {c.get('lengths') or c.get('trace')} lengths")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_run(plt, data, out):
    done = [r for r in data["requests"] if r.get("error") is None]
    samples = {"TTFT": [r["ttft_ms"] for r in done if r["ttft_ms"] is not None],
               "TPOT": [r["tpot_ms"] for r in done if r["tpot_ms"] is not None],
               "ITL": [g for r in done for g in r["itl_ms"]],
               "E2EL": [r["e2el_ms"] for r in done if r["e2el_ms"] is not None]}
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for ax, (name, values) in zip(axes.flat, samples.items()):
        values = sorted(values)
        if values:
            ax.step(values, [(i + 1) / len(values) for i in range(len(values))], where="post")
            for p, style in ((50, ":"), (99, "--")):
                ax.axvline(data.get(f"{'median' if p == 50 else 'p99'}_{name.lower()}_ms", 0), linestyle=style,
                           color="gray", label=f"p{p}")
            ax.legend(fontsize=8)
        ax.set_title(f"{name} ({len(values)} values)")
        ax.set_xlabel("ms")
        ax.set_ylabel("share of values ≤ x")
        ax.grid(alpha=0.3)
    fig.suptitle(f"bench serve: {data['completed']} requests in {data['duration']:.1f} s, "
                 f"{data['output_throughput']:.1f} output tokens/s")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("json", help="bench serve's --out file")
    p.add_argument("--out", required=True, help="the PNG to write")
    args = p.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(args.json) as f:
        data = json.load(f)
    (plot_sweep if "rows" in data else plot_run)(plt, data, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
