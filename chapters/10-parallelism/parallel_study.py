#!/usr/bin/env python3
"""Chapter 10's measurements, in one run, for the lesson's tables (docs/plots/ch10-parallelism.json):

  (a) all-reduce latency against the message size, 2 ranks on this machine's 2 cores (MPI over
      shared memory), and the α–β fit t(n) = α + β·n by least squares on the medians;
  (b) prefill (a 512-token prompt in one step) and batch-1 decode (512 cached tokens) through the
      engine, the model whole on 2 threads against split over ranks of 1 thread each — a random
      model of chapter 07's `bench` shape in Q4_1 (12 query / 4 KV heads: tp 2) and SmolLM2 as
      shipped (9 / 3 heads: tp 3, three ranks on two cores) — with the bytes every decode step
      hands to all-reduce, against 2 · hidden · 4 bytes a token a layer;
  (c) the decode step projected to p GPUs: the weights' bytes / (p · bandwidth) + 2 · layers ·
      the all-reduce latency of a link, with published latencies (see LINKS);
  (d) pipeline parallelism: the `bench` model in 2 stages of 1 thread, each step cut into m = 1,
      2, 4, 8 micro-batches, against the whole model on 1 and on 2 threads — prefill and decode at
      batch 1 (512-token prompts) and at batch 8 (128-token prompts); the bubble measured two ways
      (rank 0's wait in send / receive, and 1 − t(whole, 1 thread) / (p · t(pipeline))) against
      (p − 1)/(m + p − 1); SmolLM2 in 2 stages; every rank's resident memory;
  (e) what a rank holds: its weights' bytes, a token's KV bytes in its pool and its resident
      memory once loaded, whole and split both ways (short runs: only the memory is kept).

    build/venv/bin/python chapters/10-parallelism/parallel_study.py      # ~7 minutes, idle machine
    build/venv/bin/python chapters/10-parallelism/parallel_study.py --only pipeline   # (d) alone, into the JSON
    build/venv/bin/python chapters/10-parallelism/parallel_study.py --only memory     # (e) alone, into the JSON
    build/venv/bin/python chapters/10-parallelism/parallel_study.py --projection-only   # (c) again

Every run goes through mpirun with the flags of runtime/parallel/ranks.cpp; figures are medians.
"""

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "build" / os.environ.get("INFERLAB_PRESET", "default") / "chapters" / "parallel_bench"
FLAGS = ["--oversubscribe", "--bind-to", "none", "--mca", "pml", "ob1", "--mca", "btl", "self,vader"]
ENV = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
       "OMPI_MCA_btl_vader_single_copy_mechanism": "none", "GOMP_SPINCOUNT": "1000"}
# Published latencies of a small all-reduce. H100 over NVLink: sglang PR #2904's table (without
# CUDA graphs) has its own kernel at 5.7–7.8 µs on 8 GPUs for 4 096–32 768-element messages (a
# 70B model's token is 8 192) — 6.8 µs, their middle; vLLM's custom all-reduce, in the same table,
# 9.3–11.8 µs. 8× RTX 4090 over PCIe: nccl issue #1530's all_reduce_perf, 42.14 µs for 8 bytes
# (out of place; 40.06 in place).
LINKS = {"NVLink (H100, sglang #2904)": 6.8e-6, "PCIe (RTX 4090, nccl #1530)": 42e-6}
# H100 SXM's memory bandwidth, NVIDIA's spec sheet (analysis/device_spec.cpp): 3.35 TB/s.
H100_BYTES_PER_S = 3.35e12
# Decoders to project: the fp16 bytes a decode step reads, and the layers. SmolLM2-135M: 269.1 MB
# (chapter 08's f16 row), 30 layers; Llama-2-70B's shape (hidden 8192, 80 layers, 64 / 8 heads,
# FFN 28672, vocab 32000): 137.4 GB read a forward, as `inferlab analyze --hidden 8192 --layers 80
# --heads 64 --kv-heads 8 --ffn 28672 --vocab 32000 --weights fp16` counts it.
# The GPU counts are those GQA's rule allows: SmolLM2's 9 query / 3 KV heads split over 1 or 3
# (its hidden width 1536 does not split over 9); Llama-2-70B's 64 / 8 over 1, 2, 4 or 8.
PROJECTED = {"SmolLM2-135M fp16": (269.1e6, 30, (1, 3)), "Llama-2-70B fp16": (137.4e9, 80, (1, 2, 4, 8))}


def mpirun(ranks, threads, *args):
    command = ["mpirun", "-n", str(ranks), *FLAGS, str(BENCH), *args]
    print(f"$ OMP_NUM_THREADS={threads} " + " ".join(command), flush=True)
    run = subprocess.run(command, env={**ENV, "OMP_NUM_THREADS": str(threads)}, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"parallel_study: failed ({run.returncode}):\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
    return json.loads(run.stdout)


def fit(rows):
    """t = α + β·bytes over the rows' medians, least squares on the *relative* error (weights 1/t²):
    the sizes span seven decades, and a plain fit would give the large messages all the say (and a
    negative α)."""
    xs = [r["bytes"] for r in rows]
    ys = [r["median_s"] for r in rows]
    ws = [1 / y ** 2 for y in ys]
    s0, s1, s2 = sum(ws), sum(w * x for w, x in zip(ws, xs)), sum(w * x * x for w, x in zip(ws, xs))
    t0, t1 = sum(w * y for w, y in zip(ws, ys)), sum(w * x * y for w, x, y in zip(ws, xs, ys))
    det = s0 * s2 - s1 * s1
    return (t0 * s2 - s1 * t1) / det, (s0 * t1 - s1 * t0) / det


def main():
    out = ROOT / "docs" / "plots" / "ch10-parallelism.json"
    if sys.argv[1:] == ["--projection-only"]:  # (c) alone, into the existing JSON: no measurement
        study = json.loads(out.read_text())
        study["projection"] = project()
        out.write_text(json.dumps(study, indent=1) + "\n")
        print_tables(study)
        return
    if sys.argv[1:2] == ["--only"] and sys.argv[2:] in (["pipeline"], ["memory"]):  # (d) or (e) alone, into the JSON
        study = json.loads(out.read_text())
        started = time.time()
        part = sys.argv[2]
        study[part] = pipeline() if part == "pipeline" else memory()
        study[part]["wall_seconds"] = time.time() - started
        out.write_text(json.dumps(study, indent=1) + "\n")
        print_tables(study)
        return
    if not BENCH.exists():
        sys.exit(f"parallel_study: {BENCH} is missing: build it with cmake --build --preset default --target parallel_bench")
    started = time.time()
    study = {"machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                         "load_average_before": os.getloadavg()[0]},
             "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                                      capture_output=True).stdout.strip()}
    a = mpirun(2, 1, "allreduce", "--max-floats", str(1 << 22))
    alpha, beta = fit(a["allreduce"])
    study["allreduce"] = {"ranks": 2, "rows": a["allreduce"], "alpha_s": alpha, "beta_s_per_byte": beta,
                          "bandwidth_bytes_per_s": 1 / beta}
    runs = []
    for name, spec, weights, split in (("bench q4_1", "random:bench", ["--weights", "q4_1"], 2),
                                       ("SmolLM2 (file)", "smollm2", [], 3)):
        common = ["model", "--model", spec, *weights, "--prompt", "512", "--decode", "32", "--repeats", "5"]
        for ranks, threads in ((1, 2), (split, 1)):
            r = mpirun(ranks, threads, *common)
            r["name"], r["threads_per_rank"] = name, threads
            runs.append(r)
    study["models"] = runs
    study["projection"] = project()
    study["pipeline"] = pipeline()
    study["memory"] = memory()
    study["machine"]["load_average_after"] = os.getloadavg()[0]
    study["wall_seconds"] = time.time() - started
    out.write_text(json.dumps(study, indent=1) + "\n")
    print(f"parallel_study: wrote {out} ({study['wall_seconds']:.0f} s)")
    print_tables(study)


def pipeline():
    """(d): the bench model (Q4_1) whole on 1 and 2 threads and in 2 stages of 1 thread with m
    micro-batches; at batch 1 (512-token prompt) and batch 8 (128-token prompts); and SmolLM2."""
    load = os.getloadavg()[0]
    runs = []
    for batch, prompt in ((1, 512), (8, 128)):
        common = ["model", "--model", "random:bench", "--weights", "q4_1", "--prompt", str(prompt), "--decode", "32",
                  "--repeats", "5", "--batch", str(batch)]
        for ranks, threads, m in ((1, 1, 1), (1, 2, 1), (2, 1, 1), (2, 1, 2), (2, 1, 4), (2, 1, 8)):
            extra = ["--split", "pp", "--micro-batches", str(m)] if ranks > 1 else []
            r = mpirun(ranks, threads, *common, *extra)
            r["name"], r["threads_per_rank"] = "bench q4_1", threads
            runs.append(r)
    for ranks, threads in ((1, 2), (2, 1)):
        extra = ["--split", "pp", "--micro-batches", "4"] if ranks > 1 else []
        r = mpirun(ranks, threads, "model", "--model", "smollm2", "--prompt", "512", "--decode", "32", "--repeats", "5",
                   *extra)
        r["name"], r["threads_per_rank"] = "SmolLM2 (file)", threads
        runs.append(r)
    # The bubble from the times: the whole model's work on 1 thread, spread over p stages, against
    # the pipeline's step — the share of the p cores' time the pipeline leaves idle.
    for r in runs:
        if r["split"] != "pp":
            continue
        one = next(o for o in runs if o["name"] == r["name"] and o["ranks"] == 1 and o["threads_per_rank"] == 1
                   and o["batch"] == r["batch"]) if r["name"] == "bench q4_1" else None
        if one:
            p = r["ranks"]
            r["idle_share_prefill_from_times"] = 1 - one["median_prefill_s"] / (p * r["median_prefill_s"])
            r["idle_share_decode_from_times"] = 1 - one["median_decode_step_s"] / (p * r["median_decode_step_s"])
    return {"runs": runs, "load_average_before": load, "load_average_after": os.getloadavg()[0]}


def memory():
    """(e): each rank's weights, KV bytes a token and resident memory, whole and split."""
    rows = []
    for name, spec, weights, splits in (("bench q4_1", "random:bench", ["--weights", "q4_1"], (("tp", 2), ("pp", 2))),
                                        ("SmolLM2 (file)", "smollm2", [], (("tp", 3), ("pp", 2), ("pp", 3)))):
        for split, ranks in (("tp", 1), *splits):
            r = mpirun(ranks, 1, "model", "--model", spec, *weights, "--prompt", "64", "--decode", "2", "--repeats", "1",
                       *(["--split", split] if ranks > 1 else []))
            rows.append({"name": name, "split": r["split"], "ranks": ranks, "whole_weight_bytes": r["whole_weight_bytes"],
                         "rank0_weight_bytes": r["rank0_weight_bytes"], "resident_mb_per_rank": r["resident_mb_per_rank"],
                         "rank0_kv_bytes_per_token": r["rank0_kv_bytes_per_token"],
                         "whole_kv_bytes_per_token": r["whole_kv_bytes_per_token"]})
    return {"rows": rows}


def project():
    """(c): the decode step on p H100s' memory bandwidth, with each link's all-reduce latency —
    2 · layers all-reduces a step, whose bandwidth term (2 · hidden · 2 bytes a token) is left out:
    at batch 1 it is nanoseconds against microseconds of latency."""
    projection = []
    for model, (bytes_fp16, layers, gpu_counts) in PROJECTED.items():
        for p in gpu_counts:
            memory = bytes_fp16 / (p * H100_BYTES_PER_S)
            for link, latency in LINKS.items():
                comm = 0.0 if p == 1 else 2 * layers * latency
                projection.append({"model": model, "gpus": p, "link": link, "memory_s": memory, "allreduce_s": comm,
                                   "step_s": memory + comm})
    for row in projection:
        one = next(r for r in projection if r["model"] == row["model"] and r["gpus"] == 1 and r["link"] == row["link"])
        row["speedup"] = one["step_s"] / row["step_s"]
    return {"h100_bytes_per_s": H100_BYTES_PER_S, "links_s": LINKS, "rows": projection}


def print_tables(study):
    a = study["allreduce"]
    print(f"\n(a) all-reduce, 2 ranks: α = {a['alpha_s'] * 1e6:.2f} µs, 1/β = {a['bandwidth_bytes_per_s'] / 1e9:.2f} GB/s")
    for r in a["rows"]:
        print(f"  {r['bytes']:>9} B  {r['median_s'] * 1e6:9.2f} µs")
    print("\n(b) model | ranks × threads | prefill tok/s | decode tok/s | collectives share | payload B/token/layer")
    for r in study["models"]:
        print(f"  {r['name']} | {r['ranks']} × {r['threads_per_rank']} | {r['prefill_tokens_per_s']:.0f} | "
              f"{r['decode_tokens_per_s']:.1f} | {r['median_collective_share_of_decode_step']:.1%} | "
              f"{r['measured_payload_bytes_per_token_per_layer'] or 0:.0f} (predicted {r['predicted_payload_bytes_per_token_per_layer']})")
    if "pipeline" in study:
        print("\n(d) pipeline: model | batch | ranks × threads | m | prefill tok/s | decode tok/s | rank 0 wait "
              "prefill / decode | idle from times prefill / decode | predicted bubble prefill / decode | RSS MB a rank")
        for r in study["pipeline"]["runs"]:
            idle = (f"{r['idle_share_prefill_from_times']:.1%} / {r['idle_share_decode_from_times']:.1%}"
                    if "idle_share_prefill_from_times" in r else "—")
            print(f"  {r['name']} | {r['batch']} | {r['ranks']} × {r['threads_per_rank']} | {r['micro_batches']} | "
                  f"{r['prefill_tokens_per_s']:.0f} | {r['decode_tokens_per_s']:.1f} | "
                  f"{r['rank0_wait_share_of_prefill']:.1%} / {r['rank0_wait_share_of_decode_step']:.1%} | {idle} | "
                  f"{r['predicted_bubble_prefill']:.3f} / {r['predicted_bubble_decode']:.3f} | "
                  f"{', '.join(f'{x:.0f}' for x in r['resident_mb_per_rank'])}")
    if "memory" in study:
        print("\n(e) memory: model | split | ranks | weights whole / rank 0 MB | KV B/token whole / rank 0 | RSS MB a rank")
        for r in study["memory"]["rows"]:
            print(f"  {r['name']} | {r['split']} | {r['ranks']} | {r['whole_weight_bytes'] / 1e6:.1f} / "
                  f"{r['rank0_weight_bytes'] / 1e6:.1f} | {r['whole_kv_bytes_per_token']} / {r['rank0_kv_bytes_per_token']} | "
                  f"{', '.join(f'{x:.0f}' for x in r['resident_mb_per_rank'])}")
    print("\n(c) projection: model | GPUs | link | step ms | speed-up")
    for r in study["projection"]["rows"]:
        print(f"  {r['model']} | {r['gpus']} | {r['link']} | {r['step_s'] * 1e3:.3f} | {r['speedup']:.2f}")


if __name__ == "__main__":
    main()
