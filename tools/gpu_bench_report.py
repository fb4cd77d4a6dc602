#!/usr/bin/env python3
"""Turn bench_ch02's JSON (--benchmark_out) into the Markdown that tools/gpu-check.sh puts in
its report: the GPU's measured ceilings, the versions side by side (GFLOP/s, and % of the GPU's
GEMM rate for cuda/... versions), and the issue's two GPU targets:

  - cuda/cublas reaches >= 50% of the GPU's measured fp32 GEMM rate at seq_len >= 2048;
  - cuda/tiled is >= 5x faster than cuda/naive (judged at seq_len >= 2048, where launch
    overheads no longer hide the kernels; the table shows every size).

    python3 tools/gpu_bench_report.py build/gpu/bench/bench_ch02.json

Standard library only. Exit status 0 whether or not the targets are met (the report says so);
1 when the file is unreadable.
"""

import json
import re
import sys

TARGET_L = 2048          # both targets are judged at seq_len >= this
CUBLAS_GEMM_PCT = 50.0   # cuda/cublas: % of the measured SGEMM rate
TILED_SPEEDUP = 5.0      # cuda/tiled time vs cuda/naive time


def load_runs(path):
    """{(family, version, L, d): run} of the plain (non-aggregate) runs, and the context."""
    with open(path) as f:
        data = json.load(f)
    runs = {}
    for run in data.get("benchmarks", []):
        if run.get("run_type") == "aggregate" or run.get("error_occurred"):
            continue
        name = run.get("run_name", run["name"])
        match = re.match(r"(prefill(?:_causal)?)/(.+)/L:(\d+)/d:(\d+)", name)
        if match:
            family, version, seq_len, head_dim = match.groups()
            runs[(family, version, int(seq_len), int(head_dim))] = run
    errors = [r["name"] + ": " + r.get("error_message", "?") for r in data.get("benchmarks", [])
              if r.get("error_occurred")]
    return runs, data.get("context", {}), errors


def fmt(value, digits=1):
    return "–" if value is None else f"{value:,.{digits}f}"


def rate(value):
    """GFLOP/s with about three significant digits."""
    if value is None:
        return "–"
    return fmt(value, 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2)


def version_order(version):
    ladder = ["cpu/naive", "cpu/blocked", "cpu/openblas", "cuda/naive", "cuda/tiled", "cuda/cublas",
              "cuda/cublas_fp16", "cuda/cublas_bf16"]
    return (ladder.index(version) if version in ladder else len(ladder), version)


def table(runs, family):
    """A Markdown table of one family: a row per (L, d), a column per version."""
    keys = [k for k in runs if k[0] == family]
    if not keys:
        return []
    versions = sorted({k[1] for k in keys}, key=version_order)
    sizes = sorted({(k[2], k[3]) for k in keys})
    lines = ["| L | d | " + " | ".join(versions) + " |", "| ---: | ---: |" + " ---: |" * len(versions)]
    for seq_len, head_dim in sizes:
        cells = []
        for version in versions:
            run = runs.get((family, version, seq_len, head_dim))
            if run is None:
                cells.append("")
            elif "gemm_pct" in run:
                cells.append(f"{rate(run.get('GFLOP/s'))} ({fmt(run['gemm_pct'])}%)")
            else:
                cells.append(rate(run.get("GFLOP/s")))
        lines.append(f"| {seq_len} | {head_dim} | " + " | ".join(cells) + " |")
    return lines


def targets(runs):
    """Lines judging the two GPU targets on the non-causal sweep."""
    lines = []
    cublas = [(k[2], k[3], r["gemm_pct"]) for k, r in runs.items()
              if k[0] == "prefill" and k[1] == "cuda/cublas" and k[2] >= TARGET_L and "gemm_pct" in r]
    if cublas:
        worst = min(cublas, key=lambda c: c[2])
        verdict = "MET" if worst[2] >= CUBLAS_GEMM_PCT else "NOT MET"
        detail = ", ".join(f"L={L} d={d}: {pct:.1f}%" for L, d, pct in sorted(cublas))
        lines.append(f"- cuda/cublas ≥ {CUBLAS_GEMM_PCT:.0f}% of the measured SGEMM rate at L ≥ {TARGET_L}: "
                     f"**{verdict}** (lowest {worst[2]:.1f}% at L={worst[0]} d={worst[1]}; {detail})")
    else:
        lines.append(f"- cuda/cublas vs GEMM rate: no cuda/cublas run at L ≥ {TARGET_L} in this file")
    ratios = []
    for (family, version, seq_len, head_dim), naive in runs.items():
        tiled = runs.get((family, "cuda/tiled", seq_len, head_dim))
        if family == "prefill" and version == "cuda/naive" and tiled and tiled.get("real_time"):
            ratios.append((seq_len, head_dim, naive["real_time"] / tiled["real_time"]))
    judged = [r for r in ratios if r[0] >= TARGET_L]
    if judged:
        worst = min(judged, key=lambda r: r[2])
        verdict = "MET" if worst[2] >= TILED_SPEEDUP else "NOT MET"
        detail = ", ".join(f"L={L} d={d}: {x:.1f}×" for L, d, x in sorted(ratios))
        lines.append(f"- cuda/tiled ≥ {TILED_SPEEDUP:.0f}× cuda/naive at L ≥ {TARGET_L}: **{verdict}** "
                     f"(lowest {worst[2]:.1f}× at L={worst[0]} d={worst[1]}; every size: {detail})")
    else:
        lines.append(f"- cuda/tiled vs cuda/naive: no pair of runs at L ≥ {TARGET_L} in this file")
    return lines


def report(path):
    runs, context, errors = load_runs(path)
    out = ["### Chapter 02 prefill benchmark (bench_ch02)", ""]
    if context.get("cuda_versions", "").startswith("skipped"):
        out += [f"cuda/... versions: {context['cuda_versions']}", ""]
    if "gpu_device" in context:
        def number(key):
            try:
                return float(context[key])
            except (KeyError, ValueError):
                return None
        out += [
            f"GPU ceilings, measured by bench_ch02 on {context['gpu_device']}: "
            f"device-to-device copy {fmt(number('gpu_copy_gbs'), 0)} GB/s (read + write, "
            f"{fmt(number('gpu_copy_mib'), 0)} MiB); cuBLAS SGEMM {fmt(number('gpu_sgemm_gflops'), 0)} GFLOP/s and "
            f"fp16 GemmEx (fp32 accumulation) {fmt(number('gpu_hgemm_gflops'), 0)} GFLOP/s at n = "
            f"{context.get('gpu_gemm_size', '?')}; ridge points {fmt(number('gpu_ridge_point_fp32'))} (fp32) and "
            f"{fmt(number('gpu_ridge_point_fp16'))} (fp16) FLOP/byte.",
            "",
            "#### GPU targets",
            "",
        ] + targets(runs) + [""]
    if "roofline_peak_gflops" in context:
        out += [f"CPU roofline (cpu/... rows): peak {context['roofline_peak_gflops']} GFLOP/s "
                f"({context.get('roofline_peak_simd', '?')}), triad {context.get('roofline_triad_gbs', '?')} GB/s.",
                ""]
    for family, title in (("prefill", "non-causal, dense FLOPs"), ("prefill_causal", "causal, useful FLOPs")):
        lines = table(runs, family)
        if lines:
            out += [f"#### GFLOP/s, {title} (cuda/...: % of the GPU's GEMM rate for its precision)", ""]
            out += lines + [""]
    if errors:
        out += ["#### Benchmarks that reported an error", ""] + [f"- {e}" for e in errors] + [""]
    if not runs and not errors:
        out += ["(no prefill runs in this file)", ""]
    return "\n".join(out)


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: gpu_bench_report.py BENCH_CH02_JSON")
    try:
        print(report(argv[1]))
    except (OSError, ValueError) as error:
        print(f"gpu_bench_report.py: cannot read {argv[1]}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
