#!/usr/bin/env python3
"""Chapter 09's measurements, in one run, for the lesson's tables (docs/plots/ch09-serving.json):

  (a) overhead — the same requests through `inferlab serve` (HTTP, streaming, detokenizing, the
      engine on its own thread) and through the offline engine (`inferlab generate --trace`):
      output tokens/s of each and their ratio, three times, the median kept;
  (b) TTFT at low load — 512-token prompts arriving 2.5 s apart (nothing queues): the server's
      TTFT (client clock) against the offline engine's for the same trace, which is the prefill;
  (c) the latency–throughput curve — Poisson arrivals at a sweep of rates, ShareGPT-like lengths
      (cut at 256 prompt / 64 output tokens), TPOT and ITL median and p99, goodput under
      TPOT ≤ 100 ms; the rate where TPOT leaves that SLO predicted first from chapter 08's
      measured step costs (docs/plots/ch08-bench.json), then measured;
  (d) the same sweep with chunked prefill off: whole prompts in one step;
  (e) overhead again with the engine on one core (OMP_NUM_THREADS=1 for the server and the
      offline run alike), so that the load generator and the HTTP threads have the other core:
      what serving itself adds, without the client competing for the engine's cores.

    build/venv/bin/python chapters/09-serving/serving_study.py            # ~6 minutes, 2 cores
    build/venv/bin/python chapters/09-serving/serving_study.py --quick    # a smoke run (~1 minute)
    build/venv/bin/python chapters/09-serving/serving_study.py --only one-thread   # (e) alone, into the JSON

Everything goes through ./inferlab bench serve (tools/bench_serve.py), which starts and stops the
server for each run; figures are medians as bench serve reports them. Run it on an idle machine:
the load generator shares the cores with the server (its CPU time is recorded per run).
"""

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# As ./inferlab exports it: libgomp's default spinning makes every step ~100× slower as soon as
# another process (the load generator) wants a core (chapter 08's lesson).
os.environ.setdefault("GOMP_SPINCOUNT", "1000")
BENCH = ROOT / "tools" / "bench_serve.py"
CH08 = ROOT / "docs" / "plots" / "ch08-bench.json"
SLO_TPOT_MS = 100.0
# The serving configuration of every run: 16 sequences at once, a pool that holds them all
# (16 × 320 tokens < 512 blocks of 16), 512 tokens a step; chunked prefill in chunks of 64 tokens,
# or whole prompts (which --no-chunking requires to fit one step: max_seq_len ≤ the budget).
ENGINE = "--max-seqs 16 --num-blocks 512 --max-seq-len 512 --budget 512"
CHUNKED = ENGINE + " --chunk 64"
UNCHUNKED = ENGINE + " --no-chunking"
# The low-load run: one 512-token prompt in one step, as chapter 08's prefill row measures it.
LOW_LOAD = "--max-seqs 16 --num-blocks 512 --max-seq-len 1024 --budget 512 --chunk 512"
LENGTHS = ["--lengths", "sharegpt", "--max-prompt", "256", "--max-output", "64"]


def bench(args, out_json, env=None):
    """Runs bench serve with @p args (and @p env); returns its JSON and the CPU seconds it and the server used."""
    command = [sys.executable, str(BENCH), "--start-server", *args, "--out", str(out_json)]
    print("$ " + " ".join(command[1:]), flush=True)
    before = os.times()
    run = subprocess.run(command, text=True, capture_output=True, env=env)
    after = os.times()
    if run.returncode != 0:
        sys.exit(f"serving_study: bench serve failed ({run.returncode}):\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
    client_cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return json.loads(Path(out_json).read_text()), client_cpu


def summary_of(row):
    """The figures a table needs, without the per-request rows."""
    keep = ["rate", "completed", "failed", "duration", "total_input_tokens", "total_output_tokens",
            "request_throughput", "request_goodput", "output_throughput", "median_ttft_ms", "p99_ttft_ms",
            "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "median_itl_ms", "p99_itl_ms", "median_e2el_ms",
            "p99_e2el_ms", "mean_ttft_ms"]
    return {k: row.get(k) for k in keep}


def step_costs():
    """Chapter 08's measured costs: decode step time t(B) = a + b·B (least squares over B = 1 … 16,
    512 cached tokens) and prefill seconds per token (512-token prompt), the file's weights."""
    rows = {b["name"]: b for b in json.loads(CH08.read_text())["benchmarks"] if b.get("aggregate_name") == "median"}
    points = []
    for b in (1, 2, 4, 8, 16):
        row = rows[f"decode_batch/{b}/manual_time_median"]
        points.append((b, row["real_time"] / 1e3))
    n = len(points)
    mb = sum(p[0] for p in points) / n
    mt = sum(p[1] for p in points) / n
    slope = sum((p[0] - mb) * (p[1] - mt) for p in points) / sum((p[0] - mb) ** 2 for p in points)
    intercept = mt - slope * mb
    prefill = rows["prefill/file/manual_time_median"]
    return {"decode_a_s": intercept, "decode_b_s": slope, "prefill_s_per_token": 1.0 / prefill["tokens/s"],
            "points": points, "source": str(CH08.relative_to(ROOT))}


def predict(costs, mean_prompt, mean_output, max_seqs, rates):
    """The serving model of the lesson (section "Predict first"). Per second of arrivals λ:
       prefill share ρ = λ·P̄·c (c: prefill seconds per token);
       decode steps share the rest; a step of B sequences costs a + b·B, and each running request
       waits one step per token plus the prefill interleaved with it: TPOT = (a + b·B) / (1 − ρ);
       Little's law for the batch: B = λ·n̄·TPOT, so B = λ·n̄·a / (1 − ρ − λ·n̄·b).
       Saturation: 1 − ρ − λ·n̄·b ≤ λ·n̄·a / max_seqs, i.e. B reaches max_seqs; beyond it the queue
       grows without bound (TTFT) while TPOT stays at its value there."""
    a, b, c = costs["decode_a_s"], costs["decode_b_s"], costs["prefill_s_per_token"]
    rows = []
    # λ_sat: B(λ) = max_seqs  ⇔  λ·n̄·(a + b·max_seqs) = max_seqs·(1 − λ·P̄·c)
    lam_sat = max_seqs / (mean_output * (a + b * max_seqs) + max_seqs * mean_prompt * c)
    for lam in rates:
        lam_eff = min(lam, lam_sat)
        rho = lam_eff * mean_prompt * c
        denominator = 1 - rho - lam_eff * mean_output * b
        batch = max_seqs if lam >= lam_sat or denominator <= 0 else min(max_seqs, lam_eff * mean_output * a / denominator)
        tpot = (a + b * batch) / (1 - rho)
        rows.append({"rate": lam, "batch": batch, "prefill_share": rho, "tpot_ms": tpot * 1e3,
                     "saturated": lam >= lam_sat})
    # The rate where the predicted TPOT reaches the SLO (bisection on the curve below saturation).
    def tpot_at(lam):
        lam = min(lam, lam_sat)
        rho = lam * mean_prompt * c
        d = 1 - rho - lam * mean_output * b
        batch = max_seqs if d <= 0 else min(max_seqs, lam * mean_output * a / d)
        return (a + b * batch) / (1 - rho) * 1e3
    lo, hi = 1e-3, lam_sat
    crossing = None
    if tpot_at(hi) >= SLO_TPOT_MS:
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if tpot_at(mid) < SLO_TPOT_MS else (lo, mid)
        crossing = hi
    return {"saturation_rate": lam_sat, "slo_crossing_rate": crossing, "rows": rows,
            "mean_prompt": mean_prompt, "mean_output": mean_output, "max_seqs": max_seqs}


def one_thread_env():
    """The environment of (e): the engine's OpenMP team of one thread, for the server and the offline run."""
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def overhead_runs(tmp, repeats, per_rate, env):
    """(a) or (e): the same requests through the server and offline, @p repeats times; the median ratio."""
    runs = []
    tag = "one-thread" if env else "default"
    for i in range(repeats):
        data, cpu = bench(["--engine-args", CHUNKED, "--rate", "inf", "--num-requests", str(per_rate),
                           *LENGTHS, "--seed", str(100 + i), "--offline-compare"], tmp / f"overhead-{tag}{i}.json", env)
        off = data["offline"]
        runs.append({"server_tok_s": off["server_output_throughput"],
                     "offline_tok_s": off["offline_output_throughput"], "ratio": off["ratio"],
                     "output_tokens": off["server_output_tokens"], "cpu_s_all_processes": cpu,
                     "duration_s": data["duration"], "median_ttft_ms": data["median_ttft_ms"],
                     "median_tpot_ms": data["median_tpot_ms"]})
    ratios = sorted(o["ratio"] for o in runs)
    return {"runs": runs, "median_ratio": ratios[len(ratios) // 2], "requests": per_rate, "rate": "inf",
            "omp_num_threads": env["OMP_NUM_THREADS"] if env else None}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests and rates (a smoke run)")
    parser.add_argument("--only", choices=["one-thread"],
                        help="run (e) alone and write it into the existing --out JSON (the rest kept)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "plots" / "ch09-serving.json"))
    args = parser.parse_args()
    quick = args.quick
    rates = [1, 2] if quick else [0.5, 1, 1.5, 2, 3, 4]
    per_rate = 8 if quick else 32
    repeats = 1 if quick else 3
    if args.only == "one-thread":
        study = json.loads(Path(args.out).read_text())
        with tempfile.TemporaryDirectory(prefix="ch09-study-") as tmp:
            study["overhead_engine_one_thread"] = overhead_runs(Path(tmp), repeats, per_rate, one_thread_env())
        study["overhead_engine_one_thread"]["commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True, capture_output=True).stdout.strip()
        Path(args.out).write_text(json.dumps(study, indent=1) + "\n")
        print(f"serving_study: wrote (e) into {args.out}")
        print_tables(study)
        return
    study = {"machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                         "load_average_before": os.getloadavg()[0]},
             "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                                      capture_output=True).stdout.strip(),
             "engine_args": {"chunked": CHUNKED, "unchunked": UNCHUNKED, "low_load": LOW_LOAD}, "slo_tpot_ms": SLO_TPOT_MS}
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="ch09-study-") as tmp:
        tmp = Path(tmp)
        # (a) overhead
        study["overhead"] = overhead_runs(tmp, repeats, per_rate, None)
        # (e) overhead with the engine on one core
        study["overhead_engine_one_thread"] = overhead_runs(tmp, repeats, per_rate, one_thread_env())

        # (b) TTFT at low load: 512-token prompts 2.5 s apart, 8 tokens each.
        trace = tmp / "lowload.jsonl"
        count = 3 if quick else 6
        trace.write_text("".join(json.dumps({"arrival": 2.5 * i, "prompt_len": 512, "max_new_tokens": 8}) + "\n"
                                 for i in range(count)))
        data, _ = bench(["--engine-args", LOW_LOAD, "--trace", str(trace), "--seed", "7"], tmp / "lowload.json")
        exe = ROOT / "build" / "default" / "inferlab"
        offline_out = tmp / "lowload-offline.json"
        subprocess.run([str(exe), "generate", "--model", "smollm2", "--trace", str(trace), "--out", str(offline_out),
                        *LOW_LOAD.split()], check=True, capture_output=True)
        offline = json.loads(offline_out.read_text())
        offline_ttft = sorted(r["ttft"] * 1e3 for r in offline["requests"])
        study["low_load_ttft"] = {"requests": count, "prompt_tokens": 512, "server_median_ttft_ms": data["median_ttft_ms"],
                                  "server_p99_ttft_ms": data["p99_ttft_ms"],
                                  "offline_median_ttft_ms": offline_ttft[len(offline_ttft) // 2],
                                  "note": "offline TTFT on the engine's clock: the prefill of the prompt (idle gaps skipped)"}

        # (c), (d) sweeps
        for key, engine in (("chunked", CHUNKED), ("unchunked", UNCHUNKED)):
            data, cpu = bench(["--engine-args", engine, "--sweep", ",".join(str(r) for r in rates),
                               "--num-requests", str(per_rate), *LENGTHS, "--seed", "3", "--slo", f"tpot:{SLO_TPOT_MS:g}"],
                              tmp / f"sweep-{key}.json")
            study[f"sweep_{key}"] = {"rows": [summary_of(r) for r in data["rows"]]}
            if key == "chunked":
                inputs = sum(r["total_input_tokens"] for r in data["rows"])
                outputs = sum(r["total_output_tokens"] for r in data["rows"])
                done = sum(r["completed"] for r in data["rows"])
                study["workload"] = {"mean_prompt": inputs / done, "mean_output": outputs / done,
                                     "requests_per_rate": per_rate, "lengths": " ".join(LENGTHS)}
    costs = step_costs()
    study["step_costs"] = costs
    study["prediction"] = predict(costs, study["workload"]["mean_prompt"], study["workload"]["mean_output"], 16, rates)
    measured_cross = None
    for row in study["sweep_chunked"]["rows"]:
        if row["p99_tpot_ms"] is not None and row["p99_tpot_ms"] > SLO_TPOT_MS:
            measured_cross = row["rate"]
            break
    study["measured_slo_crossing_rate"] = measured_cross
    study["machine"]["load_average_after"] = os.getloadavg()[0]
    study["wall_seconds"] = time.time() - started
    Path(args.out).write_text(json.dumps(study, indent=1) + "\n")
    print(f"serving_study: wrote {args.out} ({study['wall_seconds']:.0f} s)")
    print_tables(study)


def print_tables(study):
    o = study["overhead"]
    print("\n(a) server vs offline engine, same requests (rate inf):")
    for r in o["runs"]:
        print(f"  server {r['server_tok_s']:.1f} tok/s, offline {r['offline_tok_s']:.1f} tok/s, ratio {r['ratio']:.3f}, "
              f"CPU (load generator + server + offline run) {r['cpu_s_all_processes']:.1f} s")
    print(f"  median ratio {o['median_ratio']:.3f}")
    e = study.get("overhead_engine_one_thread")
    if e:
        print("\n(e) the same with the engine on one core (OMP_NUM_THREADS=1, server and offline alike):")
        for r in e["runs"]:
            print(f"  server {r['server_tok_s']:.1f} tok/s, offline {r['offline_tok_s']:.1f} tok/s, ratio {r['ratio']:.3f}")
        print(f"  median ratio {e['median_ratio']:.3f}")
    t = study["low_load_ttft"]
    print(f"\n(b) TTFT at low load (512-token prompts): server median {t['server_median_ttft_ms']:.0f} ms, "
          f"offline (the prefill) {t['offline_median_ttft_ms']:.0f} ms")
    p = study["prediction"]
    print(f"\n(c) prediction: saturation at {p['saturation_rate']:.2f} req/s; TPOT reaches {study['slo_tpot_ms']:g} ms at "
          f"{p['slo_crossing_rate'] and round(p['slo_crossing_rate'], 2)} req/s")
    for key in ("sweep_chunked", "sweep_unchunked"):
        print(f"  {key}: rate | req/s | tok/s | TTFT p50 | TPOT p50 | TPOT p99 | ITL p99 | goodput")
        for r in study[key]["rows"]:
            print(f"    {r['rate']:>4} | {r['request_throughput']:.2f} | {r['output_throughput']:.0f} | "
                  f"{r['median_ttft_ms']:.0f} | {r['median_tpot_ms']:.1f} | {r['p99_tpot_ms']:.1f} | "
                  f"{r['p99_itl_ms']:.0f} | {r['request_goodput']:.2f}")
    print(f"  measured: TPOT p99 first above the SLO at rate {study['measured_slo_crossing_rate']}")


if __name__ == "__main__":
    main()
