#!/usr/bin/env python3
"""`./inferlab bench serve` (chapter 09): a load generator for an OpenAI-compatible server — ours,
`./inferlab serve`, or any other (vLLM's, llama.cpp's) — that reports what `vllm bench serve`
reports. For students measuring their server, and for the lesson's tables.

    ./inferlab serve --model smollm2 &                       # in one terminal (port 8000)
    ./inferlab bench serve --num-requests 64 --rate 4 --lengths sharegpt --max-prompt 256 --max-output 128
    ./inferlab bench serve --sweep 1,2,4,inf --out sweep.json --plot sweep.png
    ./inferlab bench serve --start-server --engine-args "--max-seqs 16" --offline-compare

What it sends. N requests, each streamed (`stream: true, stream_options: {include_usage: true}`),
greedy (`temperature: 0`), with `max_tokens: n` and `ignore_eos: true` (vLLM's extension: generate
exactly n tokens whatever the model would end on, so a run's work is fixed by its lengths). On
/v1/completions (the default) the prompt is a list of token ids, so its length is exact; on
/v1/chat/completions it is words, and only the server's `usage` says how many tokens they made.
  - lengths: `--lengths sharegpt|alpaca`, chapter 06's workloads (analysis/kv_capacity.h,
    `sample_requests`): geometric lengths with the means of the vLLM paper's Fig. 11 (ShareGPT
    prompt 161.31 / output 337.99 tokens, Alpaca 19.31 / 58.45), drawn with the same generator
    and the same algorithm, so `--seed S` gives the C++ sampler's lengths exactly (then cut at
    --max-prompt / --max-output when given); or `--trace FILE.jsonl`, the format of
    runtime/engine/trace.h (arrival, prompt_ids or prompt_len, max_new_tokens);
  - arrivals: `--rate R` — a Poisson process of R requests/s (exponential gaps, the first request
    at 0; `inf`: all at once), or `--concurrency C` — a closed loop of C clients, each sending its
    next request when the last one ends; a trace's own arrival times when neither is given.

What it measures, per request, on the client's clock (time.perf_counter; on a small machine the
client shares the cores with the server, so its own scheduling is part of what it measures):
TTFT = the first chunk with content − the send; E2EL = the end of the stream (`data: [DONE]`) −
the send; TPOT = (E2EL − TTFT) / (n − 1) with n = the usage's completion_tokens (requests with
n ≥ 2); ITL = every gap between successive content chunks, pooled over requests. Token counts
come from the server's `usage`: no tokenizer here. Over the run: duration = the first send to
the last end; request, output-token and total-token throughput = completed requests, their output
tokens, their input + output tokens, per second of duration; goodput = completed requests meeting
every `--slo` given (`ttft:MS tpot:MS e2el:MS`, a request with one token meets any TPOT bound),
per second. Each statistic is mean, median and p99 (percentiles as numpy's default, linear
interpolation between order statistics: the value at rank (count − 1) · p / 100), and std. A
failed request — an HTTP error status, a connection error, a stream cut before `[DONE]` or
without its usage — is counted as failed and never retried; the throughputs and latencies are
over completed requests only.

`--offline-compare` then replays the completed requests — the same prompt ids, the same
max_new_tokens, arriving when they were sent — through the offline engine (`inferlab generate
--trace`, no HTTP, the same `--engine-args` as the server), and reports output tokens/s of both and
their ratio: the server's overhead (HTTP, detokenizing, the engine's thread hand-offs).

Writes a vLLM-like table to stdout and, with --out, the JSON (vLLM's field names: completed,
request_throughput, mean_ttft_ms, p99_itl_ms, …, plus one row per request). `--sweep R1,R2,…`
runs one benchmark per rate into one JSON with a row per rate: fresh prompt ids each, the same
lengths, so no row hits the prefix cache the previous one filled (a trace's own prompt_ids are
the same in every row). `--plot FILE.png` draws it (tools/plot_bench_serve.py). The pure parts
live beside it and are unit-tested in tests/09-serving/test_bench_serve.py: the workload
(tools/bench_serve_workload.py: the sampler, arrivals, traces) and the measurements
(tools/bench_serve_metrics.py: the SSE reading, the statistics, the table).
"""

import argparse
import asyncio
import importlib.util
import json
import math
import random
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serve_metrics import RequestResult, StreamTally, format_table, parse_slo, result_row, summarize  # noqa: E402
from bench_serve_workload import (DEFAULT_PROMPT_IDS, LENGTH_DISTRIBUTIONS, BenchRequest,  # noqa: E402
                                  poisson_arrivals, read_trace, request_body, sample_lengths, trace_lines,
                                  workload_from_lengths)

# ---------------------------------------------------------------------------------------------
# The client: asyncio + httpx.
# ---------------------------------------------------------------------------------------------

def endpoint_path(endpoint):
    return "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"


async def send_request(client, path, body, request, start):
    """Sends one request, streams its answer and returns what it measured; never raises, never
    retries: any failure is the result's error."""
    import httpx
    result = RequestResult(index=request.index, prompt_len=request.prompt_len, max_tokens=request.max_tokens)
    send_time = time.perf_counter()
    result.sent = send_time - start
    tally = StreamTally(result, send_time)
    try:
        async with client.stream("POST", path, json=body) as response:
            result.status = response.status_code
            if response.status_code != 200:
                text = (await response.aread()).decode(errors="replace")
                result.error = f"HTTP {response.status_code}: {text[:300]}"
                return result
            async for line in response.aiter_lines():
                tally.feed(line, time.perf_counter())
        tally.finish()
    except (httpx.HTTPError, ValueError) as e:  # a connection error, a cut stream, a malformed event
        result.error = f"{type(e).__name__}: {e}"[:300] or type(e).__name__
    return result


def new_client(url, timeout):
    import httpx
    # keepalive_expiry below cpp-httplib's 5 s keep-alive: a pooled connection is never reused
    # just as the server closes it (that request would fail, and failures are not retried).
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None, keepalive_expiry=2.0)
    return httpx.AsyncClient(base_url=url, limits=limits, timeout=httpx.Timeout(timeout, connect=10.0))


async def run_benchmark(url, model, endpoint, requests, arrivals=None, concurrency=None, ignore_eos=True,
                        timeout=600.0, seed=0):
    """Sends @p requests — at @p arrivals (seconds after the start) or through @p concurrency
    closed-loop clients — and returns (results in workload order, duration in seconds)."""
    path = endpoint_path(endpoint)
    chat_rng = random.Random(seed)
    bodies = [request_body(r, endpoint, model, ignore_eos, chat_rng) for r in requests]
    async with new_client(url, timeout) as client:
        start = time.perf_counter()
        if concurrency:
            queue = list(range(len(requests)))[::-1]
            results = [None] * len(requests)

            async def worker():
                while queue:
                    i = queue.pop()
                    results[i] = await send_request(client, path, bodies[i], requests[i], start)

            await asyncio.gather(*(worker() for _ in range(min(concurrency, len(requests)))))
        else:
            tasks = []
            for i, r in enumerate(requests):
                delay = start + arrivals[i] - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(send_request(client, path, bodies[i], r, start)))
            results = await asyncio.gather(*tasks)
        duration = time.perf_counter() - start
    return list(results), duration


def get_json(url, path, timeout=10.0):
    """GET @p path as JSON, or None when the server has no such route (another server's /health)."""
    import httpx
    try:
        response = httpx.get(url + path, timeout=timeout)
        return response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def check_server(url, model, endpoint):
    """The server's /v1/models (it must serve @p model) and one short warm-up request (not
    counted); raises SystemExit with the reason when the server cannot serve the benchmark."""
    import httpx
    try:
        models = httpx.get(url + "/v1/models", timeout=10.0)
    except httpx.HTTPError as e:
        raise SystemExit(f"bench serve: cannot reach {url} ({type(e).__name__}: {e}). Start a server first "
                         f"(./inferlab serve --model {model}) or pass --start-server") from None
    ids = [m.get("id") for m in models.json().get("data", [])] if models.status_code == 200 else []
    if model not in ids:
        raise SystemExit(f"bench serve: {url} does not serve the model {model!r} (its /v1/models: {ids}); "
                         f"pass --model with one of those")
    warm = BenchRequest(index=-1, prompt_len=8, max_tokens=2, prompt_ids=list(range(100, 108)))
    result = asyncio.run(_warm_up(url, model, endpoint, warm))
    if not result.ok:
        raise SystemExit(f"bench serve: the warm-up request failed: {result.error}")
    info = next(m for m in models.json()["data"] if m.get("id") == model)
    return info


async def _warm_up(url, model, endpoint, request):
    async with new_client(url, 120.0) as client:
        return await send_request(client, endpoint_path(endpoint), request_body(request, endpoint, model), request,
                                  time.perf_counter())


# ---------------------------------------------------------------------------------------------
# The offline engine on the same requests.
# ---------------------------------------------------------------------------------------------

def offline_compare(exe, model, requests, results, summary, engine_args, server_health, server_model, workdir):
    """Replays the requests that completed on the server — their prompt ids, their max_tokens,
    arriving when they were sent — through `inferlab generate --trace` with the same engine
    options, and compares output tokens/s. The engine's clock (ClockMode::real) jumps idle gaps
    to the next arrival, so its makespan (first arrival → last finish) is the duration the
    server's would be without HTTP."""
    done = [(requests[r.index], r) for r in results if r.ok]
    if not done:
        return {"error": "no request completed on the server: nothing to compare"}
    trace = Path(workdir) / "offline-trace.jsonl"
    out = Path(workdir) / "offline-run.json"
    first = min(r.sent for _, r in done)
    trace.write_text("\n".join(trace_lines([q for q, _ in done], [r.sent - first for _, r in done])) + "\n")
    command = [str(exe), "generate", "--model", str(model), "--trace", str(trace), "--out", str(out),
               *shlex.split(engine_args or "")]
    started = time.perf_counter()
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        return {"error": f"`{shlex.join(command)}` exited {run.returncode}: {run.stderr.strip()[-600:]}"}
    offline = json.loads(out.read_text())
    config, offline_summary = offline["config"], offline["summary"]
    # Both sides' engine settings must agree: the server shows its own in /health's "config".
    mismatches = []
    server_config = (server_health or {}).get("config", {})  # the server's engine settings (/health)
    for key, value in server_config.items():
        if key != "clock" and key in config and config[key] != value:
            mismatches.append(f"{key}: server {value}, offline {config[key]}")
    if server_health and "num_blocks" in server_health and server_health["num_blocks"] != config["num_blocks"] \
            and "num_blocks" not in server_config:
        mismatches.append(f"num_blocks: server {server_health['num_blocks']}, offline {config['num_blocks']}")
    # The server's max_model_len is what one request may hold: the context, and the pool.
    offline_len = min(config["max_seq_len"], config["num_blocks"] * config["block_size"])
    if server_model and "max_model_len" in server_model and server_model["max_model_len"] != offline_len:
        mismatches.append(f"max_model_len: server {server_model['max_model_len']}, offline {offline_len} "
                          f"(max_seq_len {config['max_seq_len']}, {config['num_blocks']} blocks of {config['block_size']})")
    offline_tokens = {row["id"]: row["output_tokens"] for row in offline["requests"]}
    differing = [r.index for _, r in done if offline_tokens.get(r.index) != r.completion_tokens]
    server_tps = summary["total_output_tokens"] / summary["duration"] if summary["duration"] > 0 else 0.0
    offline_tps = float(offline_summary["tokens_per_s"])
    return {
        "command": shlex.join(command),
        "engine_args": engine_args or "",
        "requests": len(done),
        "server_output_tokens": summary["total_output_tokens"],
        "offline_output_tokens": int(offline_summary["generated_tokens"]),
        "server_duration_s": summary["duration"],
        "offline_makespan_s": float(offline_summary["makespan_s"]),
        "server_output_throughput": server_tps,
        "offline_output_throughput": offline_tps,
        "ratio": server_tps / offline_tps if offline_tps > 0 else None,
        "requests_with_other_output_tokens": differing,
        "option_mismatches": mismatches,
        "offline_config": config,
        "offline_wall_s": time.perf_counter() - started,
    }


def format_offline(c):
    if "error" in c:
        return f"offline comparison failed: {c['error']}"
    lines = [f"{' Server vs offline engine ':=^50}",
             f"{'Requests (completed on the server):':<40}{c['requests']}",
             f"{'Output tokens, server / offline:':<40}{c['server_output_tokens']} / {c['offline_output_tokens']}",
             f"{'Server output throughput (tok/s):':<40}{c['server_output_throughput']:.2f}",
             f"{'Offline output throughput (tok/s):':<40}{c['offline_output_throughput']:.2f}",
             f"{'Server / offline:':<40}{c['ratio']:.3f}" if c["ratio"] else "Server / offline: n/a",
             "=" * 50]
    if c["requests_with_other_output_tokens"]:
        lines.append(f"warning: {len(c['requests_with_other_output_tokens'])} requests made other token counts offline "
                     "(does the server honour ignore_eos?)")
    for m in c["option_mismatches"]:
        lines.append(f"warning: engine options differ ({m}): pass the server's options as --engine-args")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The command line.
# ---------------------------------------------------------------------------------------------

def parse_rate(text):
    value = float(text)  # accepts "inf"
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text}: a rate must be > 0 (or inf)")
    return value


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="./inferlab bench serve",
        usage="./inferlab bench serve [--url URL | --start-server] [--rate R | --concurrency C | --sweep R1,R2,…] "
              "[--lengths sharegpt|alpaca | --trace FILE] [options]",
        description="A load generator for an OpenAI-compatible server (chapter 09): streamed greedy requests of "
                    "known lengths, then vllm bench serve's metrics (TTFT, TPOT, ITL, E2EL, throughputs, goodput).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Definitions and the JSON's fields: the opening comment of tools/bench_serve.py.")
    p.add_argument("--url", default="http://127.0.0.1:8000", help="the server (default %(default)s)")
    p.add_argument("--model", default="smollm2", help="the model id to ask for (default %(default)s)")
    p.add_argument("--endpoint", choices=("completions", "chat"), default="completions",
                   help="completions (prompt as token ids: exact lengths; default) or chat (words)")
    arrivals = p.add_mutually_exclusive_group()
    arrivals.add_argument("--rate", type=parse_rate, help="Poisson arrivals of R requests/s; inf: all at once "
                          "(the default, unless a trace gives arrival times)")
    arrivals.add_argument("--concurrency", type=int, help="a closed loop of C clients instead")
    arrivals.add_argument("--sweep", help="comma-separated rates: one run per rate, one JSON with a row per rate")
    p.add_argument("--num-requests", type=int, help="requests per run (default 100; a trace: all its lines)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--lengths", choices=sorted(LENGTH_DISTRIBUTIONS), help="chapter 06's length "
                        "distributions (default sharegpt)")
    source.add_argument("--trace", help="a JSON-lines trace (runtime/engine/trace.h's format)")
    p.add_argument("--max-seq-len", type=int, default=2048, help="prompt + output of a drawn request (default %(default)s)")
    p.add_argument("--max-prompt", type=int, help="cut drawn prompts to this many tokens")
    p.add_argument("--max-output", type=int, help="cut drawn outputs to this many tokens")
    p.add_argument("--seed", type=int, default=0, help="lengths, prompts and arrivals (default %(default)s)")
    p.add_argument("--prompt-id-range", default=f"{DEFAULT_PROMPT_IDS[0]}:{DEFAULT_PROMPT_IDS[1]}",
                   help="random prompt ids are drawn from [LO, HI) (default %(default)s: SmolLM2's ordinary tokens)")
    p.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false",
                   help="do not send ignore_eos (outputs may then end early)")
    p.add_argument("--slo", nargs="+", metavar="KEY:MS", help="goodput bounds: ttft:MS tpot:MS e2el:MS")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds without data before a request fails")
    p.add_argument("--out", help="write the results as JSON")
    p.add_argument("--plot", help="draw the run (or the sweep) into this PNG (matplotlib)")
    p.add_argument("--write-trace", help="write the requests it would send as a trace (JSON lines) and exit")
    p.add_argument("--offline-compare", action="store_true",
                   help="then run the completed requests through `inferlab generate --trace` and compare tokens/s")
    p.add_argument("--engine-args", default="", help="engine options of the server (for --offline-compare and "
                   "--start-server), e.g. \"--max-seqs 16 --num-blocks 256\"")
    p.add_argument("--start-server", action="store_true",
                   help="start `inferlab serve --model MODEL --port 0 ENGINE_ARGS` for the run, stop it after")
    p.add_argument("--server-model", help="with --start-server / --offline-compare: the file or name the engine loads "
                   "(default: --model)")
    p.add_argument("--inferlab", default=None, help="the inferlab executable (default $INFERLAB_EXE or build/default/inferlab)")
    args = p.parse_args(argv)
    for name in ("num_requests", "concurrency", "max_prompt", "max_output"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')} {value}: must be >= 1")
    try:
        lo, hi = (int(x) for x in args.prompt_id_range.split(":"))
        if not 0 <= lo < hi:
            raise ValueError
        args.id_range = (lo, hi)
    except ValueError:
        p.error(f"--prompt-id-range {args.prompt_id_range}: expected LO:HI with 0 <= LO < HI")
    try:
        args.slo_seconds = parse_slo(args.slo)
        args.rates = [parse_rate(x) for x in args.sweep.split(",")] if args.sweep else None
    except (ValueError, argparse.ArgumentTypeError) as e:
        p.error(str(e))
    if args.offline_compare and args.endpoint == "chat":
        p.error("--offline-compare needs --endpoint completions (the chat template's ids are the server's)")
    if args.write_trace and args.endpoint == "chat":
        p.error("--write-trace needs --endpoint completions (a trace holds token ids)")
    return args


def build_workload(args, salt=0):
    """The run's requests (planned arrivals from the trace; the caller sets them for --rate)."""
    if args.trace:
        requests = read_trace(Path(args.trace).read_text().splitlines(), args.seed, args.id_range)
        if args.num_requests:
            requests = requests[:args.num_requests]
        return requests
    pairs = sample_lengths(args.lengths or "sharegpt", args.num_requests or 100, args.max_seq_len, args.seed,
                           args.max_prompt, args.max_output)
    return workload_from_lengths(pairs, args.seed, salt, args.id_range)


def run_one(args, url, rate, salt, server_model, server_health_fn):
    """One benchmark at @p rate (None: the trace's arrivals or --concurrency): the summary and rows."""
    requests = build_workload(args, salt)
    if rate is not None:
        arrivals = poisson_arrivals(len(requests), rate, args.seed + salt)
    else:
        arrivals = [r.arrival for r in requests] if args.trace and not args.concurrency else [0.0] * len(requests)
    results, duration = asyncio.run(run_benchmark(url, args.model, args.endpoint, requests, arrivals,
                                                  args.concurrency, args.ignore_eos, args.timeout, args.seed + salt))
    summary = summarize(results, duration, args.slo_seconds)
    row = {"rate": rate if rate is None or math.isfinite(rate) else "inf", "concurrency": args.concurrency,
           **summary, "server_health_after": server_health_fn(), "requests": [result_row(r) for r in results]}
    errors = [r.error for r in results if not r.ok]
    print(format_table(summary))
    if errors:
        print(f"{len(errors)} requests failed; the first: {errors[0]}")
    if summary["outputs_below_max_tokens"]:
        print(f"warning: {summary['outputs_below_max_tokens']} completed requests made fewer tokens than max_tokens "
              "(the server does not honour ignore_eos?)")
    if args.offline_compare:
        with tempfile.TemporaryDirectory(prefix="bench-serve-") as workdir:
            row["offline"] = offline_compare(args.exe, args.server_model or args.model, requests, results, summary,
                                             args.engine_args, row["server_health_after"], server_model, workdir)
        print(format_offline(row["offline"]))
    return row


def plot(json_path, png_path):
    """Draws @p json_path into @p png_path with tools/plot_bench_serve.py: this Python when it has
    matplotlib, else Debian's /usr/bin/python3 (python3-matplotlib, the lab's plotting package)."""
    script = Path(__file__).resolve().parent / "plot_bench_serve.py"
    python = sys.executable
    if importlib.util.find_spec("matplotlib") is None:
        python = "/usr/bin/python3"
        if subprocess.run([python, "-c", "import matplotlib"], capture_output=True).returncode != 0:
            print("bench serve: --plot needs matplotlib (Debian: apt-get install python3-matplotlib)", file=sys.stderr)
            return 1
    return subprocess.run([python, str(script), json_path, "--out", png_path]).returncode


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if importlib.util.find_spec("httpx") is None:
        raise SystemExit("bench serve: the Python package httpx is missing: run ./inferlab setup "
                         "(it installs tools/python-requirements.txt into build/venv)")
    from serve_process import ServerProcess, default_inferlab_exe
    args.exe = args.inferlab or default_inferlab_exe()

    if args.write_trace:
        requests = build_workload(args)
        rate = args.rate if args.rate is not None else (None if args.trace else math.inf)
        arrivals = poisson_arrivals(len(requests), rate, args.seed) if rate is not None else None
        Path(args.write_trace).write_text("\n".join(trace_lines(requests, arrivals)) + "\n")
        print(f"bench serve: wrote {len(requests)} requests to {args.write_trace} "
              f"(replay: ./inferlab generate --model {args.server_model or args.model} --trace {args.write_trace} --out RUN.json)")
        return 0

    server = None
    url = args.url
    if args.start_server:
        server = ServerProcess(args.exe, args.server_model or args.model, shlex.split(args.engine_args))
        url = server.url
        print(f"bench serve: started {shlex.join(server.args)} at {url}")
    try:
        server_model = check_server(url, args.model, args.endpoint)
        health = lambda: get_json(url, "/health")
        config = {"url": url, "model": args.model, "endpoint": args.endpoint, "ignore_eos": args.ignore_eos,
                  "temperature": 0, "lengths": None if args.trace else (args.lengths or "sharegpt"),
                  "trace": args.trace, "num_requests": args.num_requests, "max_seq_len": args.max_seq_len,
                  "max_prompt": args.max_prompt, "max_output": args.max_output, "seed": args.seed,
                  "slo_ms": {k: v * 1000.0 for k, v in args.slo_seconds.items()}, "concurrency": args.concurrency,
                  "engine_args": args.engine_args, "server_model": server_model, "server_health_before": health()}
        if args.rates:
            rows = []
            for i, rate in enumerate(args.rates):
                print(f"\nbench serve: rate {rate} req/s")
                rows.append(run_one(args, url, rate, i, server_model, health))
            report = {"config": config, "rows": rows}
        else:
            rate = args.rate
            if rate is None and not args.concurrency and not args.trace:
                rate = math.inf
            config["rate"] = rate if rate is None or math.isfinite(rate) else "inf"
            row = run_one(args, url, rate, 0, server_model, health)
            report = {"config": config, **row}
    finally:
        if server is not None:
            code = server.stop()
            print(f"bench serve: stopped the server (exit {code})")
    out = args.out
    if args.plot and not out:
        out = str(Path(tempfile.mkdtemp(prefix="bench-serve-")) / "bench.json")
    if out:
        Path(out).write_text(json.dumps(report, indent=1) + "\n")
        if args.out:
            print(f"bench serve: results in {out}")
    if args.plot:
        if plot(out, args.plot) == 0:
            print(f"bench serve: plot in {args.plot}")
        else:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
