#!/usr/bin/python3
"""Draw chapter 06's paged-vs-contiguous decode benchmark: for each (version, point) series of
bench_ch06's JSON, the median time of a paged step divided by the contiguous one, against the
block size (log scale), with the 1.10 line (≤ 10% slower) that the lesson judges from block 16 up.

    ./inferlab bench ch06 --benchmark_repetitions=5 --benchmark_out=docs/plots/ch06-bench.json \\
        --benchmark_out_format=json
    /usr/bin/python3 tools/plot_paged.py docs/plots/ch06-bench.json --out docs/plots/ch06-paged-vs-contiguous

Reads the median aggregates when the run had repetitions (run_type "aggregate", aggregate_name
"median"), else the plain runs. Writes OUT.png and OUT.svg. Needs matplotlib from Debian
(python3-matplotlib) for /usr/bin/python3.
"""

import argparse
import json
import re
import sys


def medians(data):
    """{(family, block): seconds} from the median aggregates, or the plain runs without them."""
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
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
        # CPU rows: family/L:…/batch:…/block:B; GPU rows: family/block:B/L:…/batch:….
        match = re.match(r"(paged_decode_.+?)/block:(\d+)(/L:\d+/batch:\d+)?(?:/|$)", r.get("run_name", r["name"]))
        if not match:
            continue
        family, block = match.group(1) + (match.group(3) or ""), int(match.group(2))
        out[(family, block)] = r["real_time"] * scale[r.get("time_unit", "ns")]
    return out


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench_json")
    parser.add_argument("--out", required=True, help="output path without extension")
    args = parser.parse_args(argv)
    with open(args.bench_json) as f:
        times = medians(json.load(f))
    families = sorted({family for family, _ in times})
    if not families:
        sys.exit("plot_paged.py: no paged_decode runs in " + args.bench_json)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for family in families:
        base = times.get((family, 0))
        if not base:
            continue
        blocks = sorted(b for f, b in times if f == family and b > 0)
        ax.plot(blocks, [times[(family, b)] / base for b in blocks], marker="o", label=family.replace("paged_decode_", ""))
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(1.10, color="gray", linestyle="--", linewidth=0.8, label="10% slower")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("block size (tokens)")
    ax.set_ylabel("paged / contiguous time (median)")
    ax.set_title("One decode step: paged (scattered blocks) vs contiguous")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", linewidth=0.3)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{args.out}.{ext}", dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
