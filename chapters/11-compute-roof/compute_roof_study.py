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


def gemm_study(repetitions):
    data = run_bench(os.path.join(BUILD, "chapters", "bench_ch11"),
                     ["--benchmark_filter=^gemm/", f"--benchmark_repetitions={repetitions}",
                      "--benchmark_report_aggregates_only=true", "--benchmark_min_time=0.2"], {})
    rows = []
    for name, row in sorted(medians(data).items()):
        parts = name.split("/")  # gemm/<format>/<out>x<in>/<kernel>/<M>/manual_time
        rows.append({"format": parts[1], "shape": parts[2], "kernel": parts[3], "M": int(parts[4]),
                     "GOP/s": row["GOP/s"], "int8_pct": row["int8_pct"], "AI": row["AI"],
                     "roof_pct": row["roof_pct"], "GB/s": row["GB/s"]})
    return {"context": {k: data["context"].get(k) for k in ("packed_kernel", "int8_gops", "int8_instruction",
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


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=["gemm", "model"])
    p.add_argument("--rounds", type=int, default=3, help="model study: alternations of the two GEMMs")
    p.add_argument("--repetitions", type=int, default=3, help="Google Benchmark repetitions a run")
    p.add_argument("--out-dir", default=os.path.join(ROOT, "docs", "plots"))
    args = p.parse_args()
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
