#!/usr/bin/env python3
"""Turn the GPU benchmarks' JSON (--benchmark_out of bench_ch02 … bench_ch06, bench_ch08) into the Markdown
that tools/gpu-check.sh puts in its report: per file, the GPU's measured ceilings, the versions
side by side, and the GPU targets (note only: they are never asserted in tests):

  bench_ch02 (prefill/…, prefill_causal/…):
  - cuda/cublas reaches >= 50% of the GPU's measured fp32 GEMM rate at seq_len >= 2048;
  - cuda/tiled is >= 5x faster than cuda/naive (judged at seq_len >= 2048, where launch
    overheads no longer hide the kernels; the table shows every size).
  bench_ch03 (decode_fp32/cuda/decode/…, decode_fp16/…):
  - cuda/decode streams >= 80% of the measured device-to-device copy bandwidth at batch >= 8,
    context >= 4096.
  bench_ch04 (gpu_decode_<cache>/cuda/…):
  - INT8 decode (per-token and per-channel K scales) >= 1.7x faster than fp16 decode at
    batch >= 8, context >= 4096.
  bench_ch05 (prefill_gpu/…, non-causal, dense FLOPs):
  - cuda/flash_tc >= 300 TFLOP/s (fp16, head_dim 128, seq_len >= 4096);
  - cuda/flash_tc faster than cuda/cublas (unfused) at every seq_len >= 1024.
  bench_ch06 (paged_decode_gpu_fp16/cuda/decode/block:B/L:…/batch:…, block 0 = contiguous):
  - paged cuda/decode at most 10% slower than contiguous from block 16 up (vLLM's paged kernel
    was 20–26% slower than FasterTransformer's, the vLLM paper §7.1).
  bench_ch08 (decode_cuda/B, prefill_cuda: SmolLM2-135M through the resident runner):
  - a table of tokens/s against the batch B (no target: the first figures are the finding).

    python3 tools/gpu_bench_report.py build/gpu/bench/bench_ch0[2-68].json

Which benchmark a file holds is read from its context (the executable's name), else from the
file's name. Standard library only. Exit status 0 whether or not the targets are met (the report
says so); 1 when a file is unreadable.
"""

import json
import math
import os
import re
import sys

TARGET_L = 2048          # bench_ch02: both targets are judged at seq_len >= this
CUBLAS_GEMM_PCT = 50.0   # cuda/cublas: % of the measured SGEMM rate
TILED_SPEEDUP = 5.0      # cuda/tiled time vs cuda/naive time

DECODE_MIN_BATCH = 8     # bench_ch03 and bench_ch04: judged at batch >= this ...
DECODE_MIN_L = 4096      # ... and context >= this
DECODE_COPY_PCT = 80.0   # cuda/decode: % of the measured device-to-device copy bandwidth
INT8_SPEEDUP = 1.7       # fp16 time / INT8 time

FLASH_MIN_L = 4096       # bench_ch05: cuda/flash_tc's rate is judged at seq_len >= this
FLASH_TC_TFLOPS = 300.0  # ... at head_dim FLASH_HEAD_DIM
FLASH_HEAD_DIM = 128
FLASH_VS_CUBLAS_L = 1024  # cuda/flash_tc faster than cuda/cublas at every seq_len >= this


def load(path):
    with open(path) as f:
        return json.load(f)


def plain_runs(data):
    """The runs that are neither aggregates nor errors, by run name."""
    return [r for r in data.get("benchmarks", []) if r.get("run_type") != "aggregate" and not r.get("error_occurred")]


def error_lines(data):
    return [r["name"] + ": " + r.get("error_message", "?") for r in data.get("benchmarks", []) if r.get("error_occurred")]


def load_runs(data, families=r"prefill(?:_causal)?"):
    """{(family, version, L, d): run} of the plain prefill runs whose family matches @families."""
    runs = {}
    for run in plain_runs(data):
        name = run.get("run_name", run["name"])
        match = re.match(rf"({families})/(.+)/L:(\d+)/d:(\d+)", name)
        if match:
            family, version, seq_len, head_dim = match.groups()
            runs[(family, version, int(seq_len), int(head_dim))] = run
    return runs


def decode_runs(data, pattern):
    """{(kind, L, batch): run} of the plain decode runs; @pattern captures the kind (cache)."""
    runs = {}
    for run in plain_runs(data):
        name = run.get("run_name", run["name"])
        match = re.match(pattern + r"/L:(\d+)/batch:(\d+)", name)
        if match:
            kind, seq_len, batch = match.groups()
            runs[(kind, int(seq_len), int(batch))] = run
    return runs


def seconds(run):
    """A run's time per call in seconds (real_time in its time_unit)."""
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[run.get("time_unit", "ns")]
    return run["real_time"] * scale


def number(context, key):
    try:
        return float(context[key])
    except (KeyError, ValueError):
        return None


def fmt(value, digits=1):
    return "–" if value is None else f"{value:,.{digits}f}"


def rate(value):
    """GFLOP/s with about three significant digits."""
    if value is None:
        return "–"
    return fmt(value, 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2)


def version_order(version):
    ladder = ["cpu/naive", "cpu/blocked", "cpu/openblas", "cpu/flash", "cuda/naive", "cuda/tiled", "cuda/cublas",
              "cuda/cublas_fp16", "cuda/cublas_bf16", "cuda/flash", "cuda/flash_tc"]
    return (ladder.index(version) if version in ladder else len(ladder), version)


def table(runs, family, pct_counter="gemm_pct"):
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
            elif pct_counter in run and version.startswith("cuda/"):
                cells.append(f"{rate(run.get('GFLOP/s'))} ({fmt(run[pct_counter])}%)")
            else:
                cells.append(rate(run.get("GFLOP/s")))
        lines.append(f"| {seq_len} | {head_dim} | " + " | ".join(cells) + " |")
    return lines


def verdict(met):
    return "**MET**" if met else "**NOT MET**"


def target_line(claim, items, value, threshold, describe, missing):
    """One target's line: '- claim: MET/NOT MET (lowest <worst>; <every item>)', judged on the item
    whose value(item) is smallest against value ≥ threshold; '- missing' when there is no item."""
    if not items:
        return f"- {missing}"
    worst = min(items, key=value)
    detail = ", ".join(describe(item) for item in sorted(items))
    return f"- {claim}: {verdict(value(worst) >= threshold)} (lowest {describe(worst)}; {detail})"


def targets(runs):
    """Lines judging bench_ch02's two GPU targets on the non-causal sweep."""
    lines = []
    cublas = [(k[2], k[3], r["gemm_pct"]) for k, r in runs.items()
              if k[0] == "prefill" and k[1] == "cuda/cublas" and k[2] >= TARGET_L and "gemm_pct" in r]
    if cublas:
        worst = min(cublas, key=lambda c: c[2])
        detail = ", ".join(f"L={L} d={d}: {pct:.1f}%" for L, d, pct in sorted(cublas))
        lines.append(f"- cuda/cublas ≥ {CUBLAS_GEMM_PCT:.0f}% of the measured SGEMM rate at L ≥ {TARGET_L}: "
                     f"{verdict(worst[2] >= CUBLAS_GEMM_PCT)} (lowest {worst[2]:.1f}% at L={worst[0]} d={worst[1]}; "
                     f"{detail})")
    else:
        lines.append(f"- cuda/cublas vs GEMM rate: no cuda/cublas run at L ≥ {TARGET_L} in this file")
    ratios = []
    for (family, version, seq_len, head_dim), naive in runs.items():
        tiled = runs.get((family, "cuda/tiled", seq_len, head_dim))
        if family == "prefill" and version == "cuda/naive" and tiled and tiled.get("real_time"):
            ratios.append((seq_len, head_dim, seconds(naive) / seconds(tiled)))
    judged = [r for r in ratios if r[0] >= TARGET_L]
    if judged:
        worst = min(judged, key=lambda r: r[2])
        detail = ", ".join(f"L={L} d={d}: {x:.1f}×" for L, d, x in sorted(ratios))
        lines.append(f"- cuda/tiled ≥ {TILED_SPEEDUP:.0f}× cuda/naive at L ≥ {TARGET_L}: "
                     f"{verdict(worst[2] >= TILED_SPEEDUP)} "
                     f"(lowest {worst[2]:.1f}× at L={worst[0]} d={worst[1]}; every size: {detail})")
    else:
        lines.append(f"- cuda/tiled vs cuda/naive: no pair of runs at L ≥ {TARGET_L} in this file")
    return lines


def skipped_line(context):
    if context.get("cuda_versions", "").startswith("skipped"):
        return [f"cuda/... versions: {context['cuda_versions']}", ""]
    return []


def report_ch02(data):
    runs, context = load_runs(data), data.get("context", {})
    out = ["### Chapter 02 prefill benchmark (bench_ch02)", ""] + skipped_line(context)
    if "gpu_device" in context:
        out += [
            f"GPU ceilings, measured by bench_ch02 on {context['gpu_device']}: "
            f"device-to-device copy {fmt(number(context, 'gpu_copy_gbs'), 0)} GB/s (read + write, "
            f"{fmt(number(context, 'gpu_copy_mib'), 0)} MiB); cuBLAS SGEMM "
            f"{fmt(number(context, 'gpu_sgemm_gflops'), 0)} GFLOP/s and fp16 GemmEx (fp32 accumulation) "
            f"{fmt(number(context, 'gpu_hgemm_gflops'), 0)} GFLOP/s at n = {context.get('gpu_gemm_size', '?')}; "
            f"ridge points {fmt(number(context, 'gpu_ridge_point_fp32'))} (fp32) and "
            f"{fmt(number(context, 'gpu_ridge_point_fp16'))} (fp16) FLOP/byte.",
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
    if not runs and not error_lines(data):
        out += ["(no prefill runs in this file)", ""]
    return out


def decode_table(runs, kinds, time_of):
    """A Markdown table: a row per (L, batch), per cache kind its ms per step and GB/s (% of copy)."""
    shapes = sorted({(k[1], k[2]) for k in runs})
    lines = ["| L | batch | " + " | ".join(f"{kind}: ms, GB/s (% copy)" for kind in kinds) + " |",
             "| ---: | ---: |" + " ---: |" * len(kinds)]
    for seq_len, batch in shapes:
        cells = []
        for kind in kinds:
            run = runs.get((kind, seq_len, batch))
            cells.append("" if run is None else
                         f"{1e3 * time_of(run):.3f}, {fmt(run.get('GB/s'), 0)} ({fmt(run.get('copy_pct'))}%)")
        lines.append(f"| {seq_len} | {batch} | " + " | ".join(cells) + " |")
    return lines


def judged_shape(seq_len, batch):
    return batch >= DECODE_MIN_BATCH and seq_len >= DECODE_MIN_L


def report_ch03(data):
    context = data.get("context", {})
    runs = decode_runs(data, r"decode_(fp32|fp16)/cuda/decode")
    out = ["### Chapter 03 decode benchmark (bench_ch03, cuda/decode)", ""] + skipped_line(context)
    if "gpu_device" in context:
        out += [f"GPU: {context['gpu_device']}; device-to-device copy {fmt(number(context, 'gpu_copy_gbs'), 0)} GB/s "
                f"(read + write, {fmt(number(context, 'gpu_copy_mib'), 0)} MiB), the bandwidth % copy refers to.", ""]
    if not runs:
        return out + ["(no cuda/decode runs in this file)", ""]
    judged = [(k, r["copy_pct"]) for k, r in runs.items() if judged_shape(k[1], k[2]) and "copy_pct" in r]
    out += ["#### GPU target", ""]
    if judged:
        worst = min(judged, key=lambda j: j[1])
        detail = ", ".join(f"{k[0]} L={k[1]} batch {k[2]}: {pct:.1f}%" for k, pct in sorted(judged))
        out.append(f"- cuda/decode ≥ {DECODE_COPY_PCT:.0f}% of the copy bandwidth at batch ≥ {DECODE_MIN_BATCH}, "
                   f"L ≥ {DECODE_MIN_L}: {verdict(worst[1] >= DECODE_COPY_PCT)} (lowest {worst[1]:.1f}%, "
                   f"{worst[0][0]} cache L={worst[0][1]} batch {worst[0][2]}; {detail})")
    else:
        out.append(f"- cuda/decode vs copy bandwidth: no run at batch ≥ {DECODE_MIN_BATCH}, L ≥ {DECODE_MIN_L}")
    return out + ["", "#### One decode step", ""] + decode_table(runs, ["fp32", "fp16"], seconds) + [""]


def report_ch04(data):
    context = data.get("context", {})
    runs = decode_runs(data, r"gpu_decode_(\w+)/cuda")
    out = ["### Chapter 04 INT8 decode benchmark (bench_ch04, cuda/decode_int8 vs cuda/decode)", ""]
    out += skipped_line(context)
    if "gpu_device" in context:
        out += [f"GPU: {context['gpu_device']}; device-to-device copy {fmt(number(context, 'gpu_copy_gbs'), 0)} GB/s "
                f"(read + write), the bandwidth % copy refers to.", ""]
    if not runs:
        return out + ["(no gpu_decode_... runs in this file)", ""]
    out += ["#### GPU target", ""]
    for kind in ("int8_per_token", "int8_per_channel"):
        ratios = []
        for (k, seq_len, batch), int8 in runs.items():
            fp16 = runs.get(("fp16", seq_len, batch))
            if k == kind and fp16 and judged_shape(seq_len, batch):
                ratios.append((seq_len, batch, seconds(fp16) / seconds(int8)))
        out.append(target_line(f"{kind} ≥ {INT8_SPEEDUP}× fp16 at batch ≥ {DECODE_MIN_BATCH}, L ≥ {DECODE_MIN_L}",
                               ratios, lambda r: r[2], INT8_SPEEDUP, lambda r: f"L={r[0]} batch {r[1]}: {r[2]:.2f}×",
                               f"{kind} vs fp16: no pair of runs at batch ≥ {DECODE_MIN_BATCH}, L ≥ {DECODE_MIN_L}"))
    kinds = [k for k in ("fp32", "fp16", "int8_per_token", "int8_per_channel") if any(r[0] == k for r in runs)]
    return out + ["", "#### One decode step", ""] + decode_table(runs, kinds, seconds) + [""]


def report_ch05(data):
    context = data.get("context", {})
    runs = load_runs(data, "prefill_gpu")
    out = ["### Chapter 05 fused prefill benchmark (bench_ch05, prefill_gpu/...)", ""] + skipped_line(context)
    if "gpu_device" in context:
        out += [f"GPU: {context['gpu_device']}. Non-causal, 4 heads, dense FLOPs (4·L²·d per head); "
                "% = of the GPU's GEMM rate for the version's precision (cuBLAS SGEMM for fp32, fp16 GemmEx for "
                "fp16/bf16), measured by bench_ch05.", ""]
    if not runs:
        return out + ["(no prefill_gpu runs in this file)", ""]
    out += ["#### GPU targets", ""]
    flash = [(k[2], r["GFLOP/s"] / 1e3) for k, r in runs.items()
             if k[1] == "cuda/flash_tc" and k[2] >= FLASH_MIN_L and k[3] == FLASH_HEAD_DIM and "GFLOP/s" in r]
    out.append(target_line(f"cuda/flash_tc ≥ {FLASH_TC_TFLOPS:.0f} TFLOP/s (fp16, d={FLASH_HEAD_DIM}, "
                           f"L ≥ {FLASH_MIN_L}, non-causal)", flash, lambda f: f[1], FLASH_TC_TFLOPS,
                           lambda f: f"L={f[0]}: {f[1]:.0f} TFLOP/s",
                           f"cuda/flash_tc TFLOP/s: no run at d={FLASH_HEAD_DIM}, L ≥ {FLASH_MIN_L} in this file"))
    ratios = []
    for (family, version, seq_len, head_dim), cublas in runs.items():
        flash_tc = runs.get((family, "cuda/flash_tc", seq_len, head_dim))
        if version == "cuda/cublas" and flash_tc and seq_len >= FLASH_VS_CUBLAS_L:
            ratios.append((seq_len, head_dim, seconds(cublas) / seconds(flash_tc)))
    # "Faster" is strict; the ratio is cublas time / flash_tc time, so the threshold sits just above 1.
    out.append(target_line(f"cuda/flash_tc faster than cuda/cublas (unfused; cublas time / flash_tc time) at every "
                           f"L ≥ {FLASH_VS_CUBLAS_L}", ratios, lambda r: r[2], math.nextafter(1.0, 2.0),
                           lambda r: f"L={r[0]} d={r[1]}: {r[2]:.2f}×",
                           f"cuda/flash_tc vs cuda/cublas: no pair of runs at L ≥ {FLASH_VS_CUBLAS_L} in this file"))
    out += ["", "#### GFLOP/s (% of the GEMM rate for its precision)", ""]
    return out + table(runs, "prefill_gpu", "peak_pct") + [""]


PAGED_MAX_SLOWDOWN = 1.10  # bench_ch06: paged / contiguous time from block PAGED_MIN_BLOCK up
PAGED_MIN_BLOCK = 16


def report_ch06(data):
    context = data.get("context", {})
    out = ["### Chapter 06 paged decode benchmark (bench_ch06, cuda/decode contiguous vs paged)", ""]
    out += skipped_line(context)
    runs = {}
    for run in plain_runs(data):
        name = run.get("run_name", run["name"])
        match = re.match(r"paged_decode_gpu_fp16/cuda/decode/block:(\d+)/L:(\d+)/batch:(\d+)", name)
        if match:
            block, seq_len, batch = map(int, match.groups())
            runs[(seq_len, batch, block)] = run
    if not runs:
        return out + ["(no paged_decode_gpu runs in this file)", ""]
    blocks = sorted({k[2] for k in runs})
    lines = ["| L | batch | " + " | ".join("contiguous" if b == 0 else f"block {b}" for b in blocks) + " |",
             "| ---: | ---: |" + " ---: |" * len(blocks)]
    worst = None
    for seq_len, batch in sorted({(k[0], k[1]) for k in runs}):
        base = runs.get((seq_len, batch, 0))
        cells = []
        for block in blocks:
            run = runs.get((seq_len, batch, block))
            if run is None:
                cells.append("")
                continue
            ratio = seconds(run) / seconds(base) if base else None
            cells.append(f"{1e3 * seconds(run):.3f} ms" + ("" if ratio is None or block == 0 else f" (×{ratio:.2f})"))
            if ratio is not None and block >= PAGED_MIN_BLOCK and (worst is None or ratio > worst[0]):
                worst = (ratio, seq_len, batch, block)
        lines.append(f"| {seq_len} | {batch} | " + " | ".join(cells) + " |")
    out += ["#### GPU target", ""]
    if worst:
        out.append(f"- paged ≤ {PAGED_MAX_SLOWDOWN:.2f}× contiguous from block {PAGED_MIN_BLOCK} up: "
                   f"{verdict(worst[0] <= PAGED_MAX_SLOWDOWN)} (worst ×{worst[0]:.2f} at L={worst[1]}, batch "
                   f"{worst[2]}, block {worst[3]})")
    else:
        out.append("- paged vs contiguous: no contiguous run to compare with")
    return out + ["", "#### One decode step (fp16 cache; × = paged / contiguous)", ""] + lines + [""]


def report_ch08(data):
    out = ["### Chapter 08 SmolLM2-135M through the resident cuda runner (bench_ch08)", ""]
    decode, prefill = {}, None
    for run in plain_runs(data):
        name = run.get("run_name", run["name"])
        match = re.match(r"decode_cuda/(\d+)", name)
        if match:
            decode[int(match.group(1))] = run
        elif name.startswith("prefill_cuda"):
            prefill = run
    if not decode and prefill is None:
        return out + ["(no decode_cuda / prefill_cuda runs in this file: no GPU, or the model is missing)", ""]
    lines = ["| B | step | tokens/s | GB/s | × B = 1 |", "| ---: | ---: | ---: | ---: | ---: |"]
    base = decode.get(1)
    for batch in sorted(decode):
        run = decode[batch]
        ratio = run["tokens/s"] / base["tokens/s"] if base else None
        lines.append(f"| {batch} | {1e3 * seconds(run):.3f} ms | {run['tokens/s']:.0f} | {run['GB/s']:.0f} | "
                     + ("" if ratio is None else f"{ratio:.1f}×") + " |")
    if prefill is not None:
        lines.append(f"\nprefill of 512 tokens: {1e3 * seconds(prefill):.2f} ms, {prefill['tokens/s']:.0f} tokens/s")
    return out + ["#### One decode step at 512 cached tokens (the file's Q4_1 / Q8_0 weights on the device)", ""] + \
        lines + [""]


def report_ch11(data):
    """bench_ch11's gemm_cuda/<format>/<shape>/<per_row|tiled>/M: the two kernels side by side."""
    out = ["### Chapter 11 quantized GEMM on the GPU (bench_ch11: per-row vs tiled __dp4a)", ""]
    runs = {}
    for run in plain_runs(data):
        match = re.match(r"gemm_cuda/([^/]+)/([^/]+)/(per_row|tiled)/(\d+)", run.get("run_name", run["name"]))
        if match:
            runs[(match.group(1), match.group(2), int(match.group(4)), match.group(3))] = run
    if not runs:
        return out + ["(no gemm_cuda runs in this file: no GPU)", ""]
    lines = ["| format | out × in | M | per-row GOP/s | tiled GOP/s | tiled / per-row |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for fmt, shape, rows in sorted({(f, s, m) for (f, s, m, _) in runs}):
        per_row, tiled = runs.get((fmt, shape, rows, "per_row")), runs.get((fmt, shape, rows, "tiled"))
        if per_row is None or tiled is None:
            continue
        lines.append(f"| {fmt} | {shape} | {rows} | {per_row['GOP/s']:.0f} | {tiled['GOP/s']:.0f} | "
                     f"{tiled['GOP/s'] / per_row['GOP/s']:.2f}× |")
    return out + lines + [""]


REPORTS = {"bench_ch02": report_ch02, "bench_ch03": report_ch03, "bench_ch04": report_ch04,
           "bench_ch05": report_ch05, "bench_ch06": report_ch06, "bench_ch08": report_ch08,
           "bench_ch11": report_ch11}


def which_bench(path, data):
    """bench_chNN from the context's executable, else from the file's name; None if neither says."""
    for text in (data.get("context", {}).get("executable", ""), path):
        match = re.search(r"bench_ch\d\d", os.path.basename(text))
        if match and match.group(0) in REPORTS:
            return match.group(0)
    return None


def report(path):
    data = load(path)
    bench = which_bench(path, data)
    if bench is None:
        out = [f"### {path}", "", "(not the JSON of bench_ch02 … bench_ch06, bench_ch08 or bench_ch11: nothing to report)",
               ""]
    else:
        out = REPORTS[bench](data)
    errors = error_lines(data)
    if errors:
        out += ["#### Benchmarks that reported an error", ""] + [f"- {e}" for e in errors] + [""]
    return "\n".join(out)


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: gpu_bench_report.py BENCH_JSON...")
    status = 0
    for path in argv[1:]:
        try:
            print(report(path))
        except (OSError, ValueError, KeyError) as error:
            print(f"gpu_bench_report.py: cannot read {path}: {error}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
