#!/usr/bin/python3
"""Draw this machine's roofline with benchmark results as points.

Reads the roofline JSON written by `inferlab roofline` (build/roofline.json) and one or more
Google Benchmark JSON files (`--benchmark_out=FILE`), and writes OUT.png and OUT.svg: a log-log
plot of attainable GFLOP/s against arithmetic intensity (FLOP/byte), with the compute roof, the
bandwidth roof, the ridge point where they meet, and one point per benchmark run at
(AI, achieved GFLOP/s).

    ./inferlab bench ch01 --benchmark_out=build/ch01.json
    /usr/bin/python3 tools/plot_roofline.py build/ch01.json --out docs/plots/ch01-roofline

Without --roofline the script reads build/roofline.json, and if that is missing it uses the
ceilings the benchmark recorded in its JSON context (roofline_peak_gflops, roofline_triad_gbs).
Points are grouped into one series per (version label, head dimension d, batch) and annotated
with L. Prefill and decode side by side (chapter 03): pass both JSON files, pick runs with
--filter, and draw the read-bandwidth roof that decode (which only reads) lives under:

    /usr/bin/python3 tools/plot_roofline.py docs/plots/ch02-bench.json docs/plots/ch03-bench.json \
        --filter '^prefill/cpu/blocked/.*d:128|^decode_fp(32|16)/cpu/decode_simd/.*batch:16' \
        --read-roof --out docs/plots/ch03-prefill-vs-decode

Fused against unfused (chapter 05): plot each run at the AI of the traffic it really moves — the
unfused versions at AI_unfused, the fused one at AI_fused (Q, K, V, O only) — with
--ai-counter-for PATTERN=COUNTER, which takes the AI of the runs whose name matches PATTERN from
COUNTER instead of --ai-counter (repeatable; the first match wins):

    /usr/bin/python3 tools/plot_roofline.py docs/plots/ch05-bench.json --filter '^prefill/' \
        --ai-counter AI_unfused --ai-counter-for 'cpu/flash=AI_fused' --out docs/plots/ch05-roofline

Needs matplotlib from Debian (python3-matplotlib) for /usr/bin/python3.
"""

import argparse
import json
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    matplotlib.rcParams["svg.hashsalt"] = "inferlab"  # stable SVG ids from run to run
    import matplotlib.pyplot as plt
except ImportError:
    # Another python3 first on PATH (pyenv, a venv): retry once with the system one, which is
    # where Debian's python3-matplotlib lives.
    SYSTEM_PYTHON = "/usr/bin/python3"
    if (os.path.exists(SYSTEM_PYTHON) and os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON)
            and not os.environ.get("INFERLAB_PLOT_REEXEC")):
        os.environ["INFERLAB_PLOT_REEXEC"] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
    sys.exit(
        "plot_roofline.py: matplotlib is missing for " + sys.executable + ".\n"
        "Install the Debian package and run the script with the system Python:\n"
        "  sudo apt-get install -y python3-matplotlib\n"
        "  /usr/bin/python3 tools/plot_roofline.py ..."
    )


def load_json(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as error:
        sys.exit(f"plot_roofline.py: cannot read {path}: {error}")


def roofline_from(args, bench_files):
    """The ceilings: --roofline, else build/roofline.json, else the first benchmark context."""
    path = args.roofline or os.path.join(ROOT, "build", "roofline.json")
    if os.path.exists(path):
        data = load_json(path)
        data["source"] = os.path.relpath(path, ROOT) if path.startswith(ROOT) else path
        return data
    if args.roofline:
        sys.exit(f"plot_roofline.py: roofline file {path} not found (run ./inferlab roofline)")
    for bench in bench_files:
        context = bench["data"].get("context", {})
        if "roofline_peak_gflops" in context and "roofline_triad_gbs" in context:
            return {
                "peak_gflops": float(context["roofline_peak_gflops"]),
                "peak_avx2_gflops": float(context.get("roofline_peak_avx2_gflops", 0) or 0),
                "triad_gbs": float(context["roofline_triad_gbs"]),
                "read_gbs": float(context.get("roofline_read_gbs", 0) or 0),
                "simd": context.get("roofline_peak_simd", ""),
                "source": bench["path"] + " (context)",
            }
    sys.exit("plot_roofline.py: no roofline: run ./inferlab roofline, or pass --roofline FILE")


def benchmark_points(bench_files, ai_counter, flops_counter, name_filter=None, ai_counter_for=()):
    """One entry per run: series key, L, AI, GFLOP/s. Medians are used when repetitions ran.
    With name_filter (a regular expression), only runs whose name it matches. ai_counter_for:
    (pattern, counter) pairs; a run whose name matches a pattern takes its AI from that counter."""
    series = {}
    for bench in bench_files:
        runs = bench["data"].get("benchmarks", [])
        medians = [r for r in runs if r.get("run_type") == "aggregate" and r.get("aggregate_name") == "median"]
        chosen = medians if medians else [r for r in runs if r.get("run_type", "iteration") == "iteration"]
        for run in chosen:
            name = run.get("run_name", run["name"])
            counter = next((c for pattern, c in ai_counter_for if re.search(pattern, name)), ai_counter)
            if counter not in run or flops_counter not in run:
                continue
            if name_filter and not re.search(name_filter, name):
                continue
            version = run.get("label") or name.split("/L:")[0]
            size = re.search(r"/L:(\d+)", name)
            dim = re.search(r"/d:(\d+)", name)
            batch = re.search(r"/batch:(\d+)", name)
            key = version + (f", d={dim.group(1)}" if dim else "") + (f", batch {batch.group(1)}" if batch else "")
            series.setdefault(key, []).append(
                {
                    "L": int(size.group(1)) if size else None,
                    "ai": float(run[counter]),
                    "gflops": float(run[flops_counter]),
                    "ai_unfused": float(run["AI_unfused"]) if "AI_unfused" in run else None,
                }
            )
    for points in series.values():
        points.sort(key=lambda p: (p["L"] or 0, p["ai"]))
    return series


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench", nargs="+", help="Google Benchmark JSON files (--benchmark_out)")
    parser.add_argument("--roofline", help="roofline JSON (default: build/roofline.json)")
    parser.add_argument("--out", default=os.path.join("docs", "plots", "roofline"),
                        help="output path without extension; .png and .svg are written")
    parser.add_argument("--title", default=None, help="plot title")
    parser.add_argument("--ai-counter", default="AI", help="counter used as arithmetic intensity (default AI)")
    parser.add_argument("--ai-counter-for", action="append", default=[], metavar="PATTERN=COUNTER",
                        help="runs whose name matches the regular expression PATTERN take their AI from COUNTER "
                             "(repeatable; the first match wins), e.g. 'cpu/flash=AI_fused'")
    parser.add_argument("--gflops-counter", default="GFLOP/s", help="counter used as performance")
    parser.add_argument("--filter", default=None,
                        help="only runs whose benchmark name matches this regular expression")
    parser.add_argument("--read-roof", action="store_true",
                        help="also draw the read-bandwidth roof (AI x read GB/s), the one decode lives under")
    parser.add_argument("--xlabel",
                        help="x-axis label naming the traffic model behind each AI (default: the counters' names)")
    parser.add_argument("--show-unfused", action="store_true",
                        help="also mark each run at its AI_unfused (hollow markers, same GFLOP/s)")
    args = parser.parse_args()

    bench_files = [{"path": path, "data": load_json(path)} for path in args.bench]
    roof = roofline_from(args, bench_files)
    ai_counter_for = []
    for item in args.ai_counter_for:
        pattern, equals, counter = item.rpartition("=")
        if not equals or not pattern or not counter:
            parser.error(f"--ai-counter-for {item!r}: expected PATTERN=COUNTER")
        ai_counter_for.append((pattern, counter))
    series = benchmark_points(bench_files, args.ai_counter, args.gflops_counter, args.filter, ai_counter_for)
    if not series:
        sys.exit(f"plot_roofline.py: no runs with counters {args.ai_counter!r} and {args.gflops_counter!r}")

    peak = float(roof["peak_gflops"])
    bandwidth = float(roof["triad_gbs"])
    ridge = peak / bandwidth
    avx2 = float(roof.get("peak_avx2_gflops", 0) or 0)

    all_ai = [p["ai"] for pts in series.values() for p in pts]
    all_ai += [p["ai_unfused"] for pts in series.values() for p in pts if args.show_unfused and p["ai_unfused"]]
    all_gf = [p["gflops"] for pts in series.values() for p in pts]
    ai_lo = 10 ** math.floor(math.log10(min(min(all_ai), ridge) / 2))
    ai_hi = max(max(all_ai), ridge) * 3
    gf_lo = 10 ** math.floor(math.log10(min(min(all_gf), ai_lo * bandwidth) / 1.5))
    # The int8 and bf16 dot-product ceilings (chapter 11), drawn where roofline.json has them: an int8
    # kernel's points are read against the int8 one.
    int8 = float(roof.get("int8_gops", 0) or 0)
    bf16 = float(roof.get("bf16_gflops", 0) or 0)
    gf_hi = 10 ** math.ceil(math.log10(max(peak, int8) * 1.5))
    ai_hi = max(ai_hi, (int8 / bandwidth) * 3 if int8 > 0 else 0)

    fig, ax = plt.subplots(figsize=(8.5, 5.6), dpi=120)
    ax.set_xscale("log")
    ax.set_yscale("log")
    # The roofline: memory roof up to the ridge point, compute roof after it.
    ax.plot([ai_lo, ridge], [ai_lo * bandwidth, peak], color="tab:blue", lw=2.2,
            label=f"memory roof: AI × {bandwidth:.1f} GB/s (triad)")
    ax.plot([ridge, ai_hi], [peak, peak], color="tab:red", lw=2.2,
            label=f"compute roof: {peak:.0f} GFLOP/s ({roof.get('simd', '') or 'fp32 FMA'})")
    if avx2 > 0 and roof.get("simd") == "avx512":
        ax.plot([avx2 / bandwidth, ai_hi], [avx2, avx2], color="tab:red", lw=1.2, ls="--",
                label=f"AVX2 (256-bit) FMA roof: {avx2:.0f} GFLOP/s")
    if int8 > 0:
        ax.plot([ridge, int8 / bandwidth], [peak, int8], color="tab:purple", lw=1.2, ls=":")
        ax.plot([int8 / bandwidth, ai_hi], [int8, int8], color="tab:purple", lw=1.6, ls="--",
                label=f"int8 roof: {int8:.0f} GOP/s ({roof.get('int8_instruction', 'int8 dot product')})")
    if bf16 > 0:
        ax.plot([bf16 / bandwidth, ai_hi], [bf16, bf16], color="tab:olive", lw=1.2, ls="-.",
                label=f"bf16 roof: {bf16:.0f} GFLOP/s ({roof.get('bf16_instruction', 'bf16 dot product')})")
    read = float(roof.get("read_gbs", 0) or 0)
    if args.read_roof and read > 0:
        ax.plot([ai_lo, peak / read], [ai_lo * read, peak], color="tab:cyan", lw=1.2, ls="--",
                label=f"read roof: AI × {read:.1f} GB/s (read only)")
    ax.axvline(ridge, color="grey", lw=1, ls=":")
    ax.annotate(f"ridge point\n{ridge:.1f} FLOP/byte", xy=(ridge, gf_lo), xytext=(4, 8),
                textcoords="offset points", fontsize=8, color="dimgrey", va="bottom")

    markers = ["o", "s", "^", "D", "v", "P", "X", "*"]
    for index, (key, points) in enumerate(sorted(series.items())):
        marker = markers[index % len(markers)]
        xs = [p["ai"] for p in points]
        ys = [p["gflops"] for p in points]
        line = ax.plot(xs, ys, marker=marker, ms=6, lw=1, label=key)[0]
        # L beside each point, slanted (AI bunches up at large L as it saturates); series
        # alternate above and below their line.
        below = index % 2 == 1
        ais = [p["ai"] for p in points]
        vertical = len(points) > 1 and max(ais) < 1.5 * min(ais)
        if vertical:
            # A vertical series (decode: the same AI at every L): one horizontal label to the right
            # per cluster of points that land on top of each other.
            clusters = []
            for p in sorted(points, key=lambda p: p["gflops"]):
                if clusters and p["gflops"] < 1.1 * clusters[-1][-1]["gflops"]:
                    clusters[-1].append(p)
                else:
                    clusters.append([p])
            for cluster in clusters:
                sizes = ", ".join(str(L) for L in sorted(p["L"] for p in cluster if p["L"] is not None))
                if sizes:
                    ax.annotate(f"L={sizes}", xy=(cluster[0]["ai"], cluster[0]["gflops"]), xytext=(6, 0),
                                textcoords="offset points", fontsize=7, color=line.get_color(), va="center")
        for p in [] if vertical else points:
            if p["L"] is not None:
                ax.annotate(f"L={p['L']}", xy=(p["ai"], p["gflops"]), xytext=(2, -6 if below else 6),
                            textcoords="offset points", fontsize=7, color=line.get_color(),
                            rotation=-50 if below else 50, rotation_mode="anchor",
                            va="top" if below else "bottom", ha="left")
        if args.show_unfused:
            ux = [p["ai_unfused"] for p in points if p["ai_unfused"]]
            uy = [p["gflops"] for p in points if p["ai_unfused"]]
            ax.plot(ux, uy, marker=marker, ms=6, lw=0, mfc="none", color=line.get_color(),
                    label=f"{key} at AI_unfused")

    ax.set_xlim(ai_lo, ai_hi)
    ax.set_ylim(gf_lo, gf_hi)
    exceptions = "".join(f"; {pattern}: {counter}" for pattern, counter in ai_counter_for)
    ax.set_xlabel(args.xlabel or f"arithmetic intensity ({args.ai_counter}{exceptions}), FLOP/byte")
    ax.set_ylabel(f"achieved {args.gflops_counter}")
    ax.set_title(args.title or "Roofline of this machine with benchmark runs")
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)
    ax.legend(fontsize=8, loc="upper left", framealpha=0.9)
    cpu = roof.get("cpu", "")
    note = f"roofline: {roof['source']}" + (f", {cpu}" if cpu else "")
    if roof.get("measured_at"):
        note += f", measured {roof['measured_at']}"
    fig.text(0.01, 0.005, note, fontsize=6.5, color="grey")
    fig.tight_layout(rect=(0, 0.02, 1, 1))

    out_dir = os.path.dirname(args.out)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    for extension in ("png", "svg"):
        path = f"{args.out}.{extension}"
        # No date in the SVG: with the fixed hash salt the file only changes when the data does.
        metadata = {"Date": None} if extension == "svg" else {}
        fig.savefig(path, metadata=metadata)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
