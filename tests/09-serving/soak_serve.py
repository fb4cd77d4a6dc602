"""A bounded soak of `inferlab serve` (chapter 09), for whoever changes the server: a few hundred
requests from 8 threads at once over raw loopback sockets (every byte seen), then the server's
books checked. Under a minute on the lab's 2-core machine.

Soak (one server, SmolLM2, --max-seqs 8): after a warm-up, 300 requests in a seeded shuffle —
non-streamed and streamed completions and chats (greedy and sampled), clients that close the
connection after the first event, malformed bodies (bad JSON, wrong types, unknown model, no such
route, invalid UTF-8). Checked:
  - every request got exactly one well-formed answer: a status line with a JSON body (the answer,
    or OpenAI's error object with the expected status and parameter), or a complete SSE stream
    (chunked framing, `data: {json}` events, one finish, the usage chunk when asked, `data: [DONE]`
    last and nothing after), or was disconnected by us;
  - at the end /health shows running 0, waiting 0, free_blocks == num_blocks, and submitted ==
    finished + aborted + rejected == the requests that reached the engine;
  - its thread count does not grow over the soak;
  - the server's RSS (VmRSS) after the soak is within RSS_GROWTH_BOUND_KIB of its RSS after the
    warm-up (the pool and the HTTP threads exist by then: what grows after is a leak);
  - it exits 0 on SIGTERM;
  - Metrics (pending: the server's /metrics): it parses as Prometheus text (prometheus_client's
    parser), has vLLM's names labelled model_name, and its counters agree with what was sent.
Backpressure (pending: --max-body-bytes, --max-waiting): a body over the limit gets 413 with the
error object; with --max-seqs 2 --max-waiting 2, bursts of 12 streams get 429 with Retry-After
for what does not fit, the rest complete; the same end checks.

Run: build/venv/bin/python tests/09-serving/soak_serve.py   (ctest: ServePython.Soak, label ch09)
"""

import json
import random
import socket
import sys
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_fixture import GGUF, require_installed, start_server  # noqa: E402

MODEL = GGUF
# What the RSS may grow between the warm-up and the end of the soak. The KV pool, the weights'
# mapping and the thread pools exist after the warm-up; malloc's per-thread arenas may still grow a
# little as other threads take other requests. A leak of 50 KiB a request (the bodies, a stream's
# detokenizer) would add ~15 MiB over 300 requests and fail this.
RSS_GROWTH_BOUND_KIB = 12 * 1024
WORKERS = 8


# ---------------------------------------------------------------------------------------------
# A raw HTTP/1.1 exchange: one request on a fresh connection (Connection: close), the whole answer.
# ---------------------------------------------------------------------------------------------

class Answer:
    def __init__(self):
        self.status = None
        self.headers = {}
        self.body = b""
        self.disconnected = False  # we closed it after the first event
        self.problem = None        # a framing error


def exchange(port, method, path, body=b"", disconnect_after_first_event=False, timeout=60):
    """Sends one request and reads its whole answer (or, disconnecting, until the first SSE event)."""
    answer = Answer()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        sock.sendall(head + body)
        data = b""
        while True:
            piece = sock.recv(65536)
            if not piece:
                break
            data += piece
            if disconnect_after_first_event and b"\r\n\r\n" in data and b"data: " in data.split(b"\r\n\r\n", 1)[1]:
                answer.disconnected = True
                break
    head, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        answer.problem = f"no complete header block in {data[:200]!r}"
        return answer
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        answer.problem = f"bad status line {lines[0]!r}"
        return answer
    answer.status = int(parts[1])
    for line in lines[1:]:
        name, _, value = line.partition(":")
        answer.headers[name.strip().lower()] = value.strip()
    if answer.disconnected:
        return answer
    if answer.headers.get("transfer-encoding", "").lower() == "chunked":
        answer.body, answer.problem = dechunk(rest)
    elif "content-length" in answer.headers:
        length = int(answer.headers["content-length"])
        if len(rest) != length:
            answer.problem = f"Content-Length {length} but {len(rest)} bytes before the close"
        answer.body = rest[:length]
    else:
        answer.body = rest
    return answer


def dechunk(data):
    """(body, problem) of a chunked transfer encoding that must end with the 0-size chunk."""
    body, at = b"", 0
    while True:
        end = data.find(b"\r\n", at)
        if end < 0:
            return body, "the chunked body was cut (no last chunk)"
        size = int(data[at:end].split(b";")[0], 16)
        if size == 0:
            trailer = data[end + 2:]
            return body, None if trailer == b"\r\n" else f"bytes after the last chunk: {trailer[:80]!r}"
        body += data[end + 2:end + 2 + size]
        if data[end + 2 + size:end + 4 + size] != b"\r\n":
            return body, "a chunk is not followed by CRLF"
        at = end + 4 + size


# ---------------------------------------------------------------------------------------------
# What each kind of request must get back.
# ---------------------------------------------------------------------------------------------

def error_problem(answer, status, param=None):
    """Why @p answer is not OpenAI's error object with @p status (and @p param), or None."""
    if answer.status != status:
        return f"status {answer.status}, expected {status}: {answer.body[:200]!r}"
    try:
        error = json.loads(answer.body)["error"]
    except (ValueError, KeyError, TypeError):
        return f"not an error object: {answer.body[:200]!r}"
    if not isinstance(error.get("message"), str) or not error["message"] or not isinstance(error.get("type"), str):
        return f"the error object lacks message or type: {error}"
    if "param" not in error or "code" not in error:
        return f"the error object lacks param or code: {error}"
    if param is not None and error["param"] != param:
        return f"the error names {error['param']!r}, expected {param!r}: {error}"
    return None


def json_problem(answer, chat):
    if answer.status != 200:
        return f"status {answer.status}: {answer.body[:300]!r}"
    if not answer.headers.get("content-type", "").startswith("application/json"):
        return f"Content-Type {answer.headers.get('content-type')!r}"
    try:
        body = json.loads(answer.body)
        choice = body["choices"][0]
        text = choice["message"]["content"] if chat else choice["text"]
        usage = body["usage"]
    except (ValueError, KeyError, IndexError, TypeError) as e:
        return f"not a completion ({e!r}): {answer.body[:300]!r}"
    if body["object"] != ("chat.completion" if chat else "text_completion") or not isinstance(text, str):
        return f"object {body['object']!r}, text {text!r}"
    if choice["finish_reason"] not in ("stop", "length"):
        return f"finish_reason {choice['finish_reason']!r}"
    if usage["total_tokens"] != usage["prompt_tokens"] + usage["completion_tokens"]:
        return f"usage does not add up: {usage}"
    return None


def stream_problem(answer, chat, include_usage):
    """Why @p answer is not a complete SSE stream, or None; also returns its usage (or None)."""
    if answer.status != 200:
        return f"status {answer.status}: {answer.body[:300]!r}", None
    if not answer.headers.get("content-type", "").startswith("text/event-stream"):
        return f"Content-Type {answer.headers.get('content-type')!r}", None
    text = answer.body.decode("utf-8")
    if not text.endswith("data: [DONE]\n\n"):
        return f"does not end with data: [DONE]: ...{text[-200:]!r}", None
    events = text.split("\n\n")[:-1]
    finishes, usage = 0, None
    for i, event in enumerate(events):
        if not event.startswith("data: ") or "\n" in event:
            return f"event {i} is not one data line: {event[:120]!r}", None
        data = event[6:]
        if data == "[DONE]":
            if i != len(events) - 1:
                return "data: [DONE] is not last", None
            continue
        chunk = json.loads(data)
        if chunk.get("object") != ("chat.completion.chunk" if chat else "text_completion"):
            return f"event {i}: object {chunk.get('object')!r}", None
        if chunk.get("usage"):
            usage = chunk["usage"]
            if chunk["choices"] != []:
                return "the usage chunk has choices", None
        finishes += sum(1 for c in chunk["choices"] if c.get("finish_reason"))
    if finishes != 1:
        return f"{finishes} finish reasons in the stream, not 1", None
    if include_usage and usage is None:
        return "no usage chunk despite include_usage", None
    if not include_usage and usage is not None:
        return "a usage chunk that was not asked for", None
    return None, usage


# ---------------------------------------------------------------------------------------------
# The mix.
# ---------------------------------------------------------------------------------------------

PROMPTS = ["Once upon a time", "The weather today is", "List three colors:", "def add(a, b):", "Paris is",
           "A haiku about the sea:", "1, 2, 3,", "Dear diary,", "The best way to learn is", "In the year 2050"]

MALFORMED = [  # (path, body, expected status, the parameter named or None for any)
    ("/v1/completions", b"{not json", 400, None),
    ("/v1/completions", b"", 400, None),
    ("/v1/completions", b"[1, 2]", 400, None),
    ("/v1/completions", json.dumps({"model": MODEL, "prompt": 5}).encode(), 400, "prompt"),
    ("/v1/completions", json.dumps({"model": MODEL, "prompt": "hi", "max_tokens": "ten"}).encode(), 400, "max_tokens"),
    ("/v1/completions", json.dumps({"model": MODEL, "prompt": "hi", "stream": "yes"}).encode(), 400, "stream"),
    ("/v1/completions", json.dumps({"model": MODEL, "prompt": "hi", "temperature": -1}).encode(), 400, "temperature"),
    ("/v1/chat/completions", json.dumps({"model": MODEL, "messages": "hi"}).encode(), 400, "messages"),
    ("/v1/chat/completions", json.dumps({"model": MODEL, "messages": [{"role": "user"}]}).encode(), 400, None),
    ("/v1/completions", json.dumps({"model": "gpt-4o", "prompt": "hi"}).encode(), 404, "model"),
    ("/v1/completions", b'{"model": "' + MODEL.encode() + b'", "prompt": "\xff\xfe"}', 400, None),
    ("/v1/nothing", b"{}", 404, None),
]


def build_mix(rng, count):
    """@p count request specs: ~40% non-streamed, ~33% streamed, ~10% disconnects, ~17% malformed."""
    specs = []
    for i in range(count):
        roll = rng.random()
        chat = rng.random() < 0.4
        body = {"model": MODEL, "max_tokens": rng.randint(1, 6), "temperature": 0 if rng.random() < 0.7 else 0.8,
                "seed": i}
        prompt = rng.choice(PROMPTS) + f" ({i % 7})"
        if chat:
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        path = "/v1/chat/completions" if chat else "/v1/completions"
        if roll < 0.40:
            specs.append({"kind": "json", "path": path, "body": body, "chat": chat})
        elif roll < 0.73:
            usage = rng.random() < 0.75
            body["stream"] = True
            if usage:
                body["stream_options"] = {"include_usage": True}
            specs.append({"kind": "stream", "path": path, "body": body, "chat": chat, "usage": usage})
        elif roll < 0.83:
            body.update(stream=True, max_tokens=64)
            specs.append({"kind": "disconnect", "path": path, "body": body, "chat": chat})
        else:
            path, raw, status, param = MALFORMED[i % len(MALFORMED)]
            specs.append({"kind": "malformed", "path": path, "raw": raw, "status": status, "param": param})
    return specs


def run_spec(port, spec):
    """Sends @p spec; returns (outcome, problem, usage): outcome is what it got, problem None when right."""
    if spec["kind"] == "malformed":
        a = exchange(port, "POST", spec["path"], spec["raw"])
        return "error", a.problem or error_problem(a, spec["status"], spec["param"]), None
    raw = json.dumps(spec["body"]).encode()
    if spec["kind"] == "disconnect":
        a = exchange(port, "POST", spec["path"], raw, disconnect_after_first_event=True)
        if a.problem or a.status != 200 or not a.disconnected:
            return "disconnect", a.problem or f"status {a.status}, disconnected {a.disconnected}", None
        return "disconnect", None, None
    a = exchange(port, "POST", spec["path"], raw)
    if a.problem:
        return spec["kind"], a.problem, None
    if spec["kind"] == "json":
        problem = json_problem(a, spec["chat"])
        return "json", problem, None if problem else json.loads(a.body)["usage"]
    problem, usage = stream_problem(a, spec["chat"], spec["usage"])
    return "stream", problem, usage


def get(port, path):
    a = exchange(port, "GET", path)
    return a


def wait_idle(port, timeout=15.0):
    """/health once nothing runs or waits (an aborted stream leaves within a step) and every request
    that reached the engine has been counted by how it ended (a worker counts its request as it
    answers, a moment after the engine let it go)."""
    deadline = time.monotonic() + timeout
    while True:
        health = json.loads(get(port, "/health").body)
        settled = health["submitted"] == health["finished"] + health["aborted"] + health["rejected"]
        if (health["running"] == 0 and health["waiting"] == 0 and settled) or time.monotonic() > deadline:
            return health
        time.sleep(0.05)


def threads_of(server):
    """The server's thread count now (Threads: of /proc/PID/status)."""
    for line in Path(f"/proc/{server.pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


def port_of(server):
    return int(server.url.rsplit(":", 1)[1])


# ---------------------------------------------------------------------------------------------
# The soak and its checks.
# ---------------------------------------------------------------------------------------------

class Soak(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_installed()
        started = time.monotonic()
        cls.server = start_server("--max-seqs", "8")
        port = port_of(cls.server)
        rng = random.Random(26)
        with ThreadPoolExecutor(WORKERS) as pool:
            warm = list(pool.map(lambda s: run_spec(port, s), build_mix(rng, 24)))
        wait_idle(port)
        cls.health_before = json.loads(get(port, "/health").body)
        cls.rss_warm = cls.server.rss_kib()
        cls.threads_warm = threads_of(cls.server)
        cls.specs = build_mix(rng, 300)
        soak_started = time.monotonic()
        with ThreadPoolExecutor(WORKERS) as pool:
            cls.outcomes = list(pool.map(lambda s: run_spec(port, s), cls.specs))
        cls.soak_seconds = time.monotonic() - soak_started
        cls.health = wait_idle(port)
        cls.rss_end = cls.server.rss_kib()
        cls.threads_end = threads_of(cls.server)
        cls.metrics = get(port, "/metrics")
        cls.warm_accepted = sum(1 for kind, problem, _ in warm if kind != "error")
        cls.exit_code = cls.server.stop()
        cls.wall_seconds = time.monotonic() - started
        print(f"\nsoak: {len(cls.specs)} requests in {cls.soak_seconds:.1f} s ({cls.wall_seconds:.1f} s with start, "
              f"warm-up and stop); RSS {cls.rss_warm / 1024:.1f} MiB after the warm-up, {cls.rss_end / 1024:.1f} MiB "
              f"after; /health {cls.health}", file=sys.stderr)

    def count(self, kind):
        return sum(1 for s in self.specs if s["kind"] == kind)

    def test_every_request_got_exactly_one_well_formed_answer(self):
        problems = [(i, spec["kind"], spec.get("path"), problem)
                    for i, (spec, (_, problem, _)) in enumerate(zip(self.specs, self.outcomes)) if problem]
        self.assertEqual(problems, [], f"{len(problems)} of {len(self.specs)} requests got a wrong answer")
        for kind in ("json", "stream", "disconnect", "malformed"):
            self.assertGreater(self.count(kind), 10, f"the mix has too few {kind} requests")

    def test_health_is_idle_and_every_block_free(self):
        h = self.health
        self.assertEqual((h["running"], h["waiting"]), (0, 0), h)
        self.assertEqual(h["free_blocks"], h["num_blocks"], f"blocks still held after the soak: {h}")

    def test_the_counters_add_up(self):
        h = self.health
        self.assertEqual(h["submitted"], h["finished"] + h["aborted"] + h["rejected"], h)
        accepted = len(self.specs) - self.count("malformed")
        self.assertEqual(h["submitted"] - self.health_before["submitted"], accepted,
                         "submitted is not the number of well-formed generation requests sent")
        self.assertLessEqual(h["aborted"] - self.health_before["aborted"], self.count("disconnect"))
        self.assertGreaterEqual(h["finished"] - self.health_before["finished"], self.count("json") + self.count("stream"))

    def test_rss_stays_within_its_bound(self):
        growth = self.rss_end - self.rss_warm
        self.assertLessEqual(growth, RSS_GROWTH_BOUND_KIB,
                             f"RSS grew {growth} KiB over the soak ({self.rss_warm} → {self.rss_end} KiB), more than "
                             f"the bound {RSS_GROWTH_BOUND_KIB} KiB: a leak?")

    def test_threads_do_not_grow(self):
        # The HTTP transport's threads are fixed (one I/O thread, --http-threads workers): 300 requests,
        # disconnects and malformed bodies start none.
        self.assertLessEqual(self.threads_end, self.threads_warm,
                             f"threads {self.threads_warm} after the warm-up, {self.threads_end} after the soak")

    def test_exits_zero_on_sigterm(self):
        self.assertEqual(self.exit_code, 0, self.server.output()[-3000:])

    def test_within_a_minute(self):
        self.assertLess(self.wall_seconds, 60, "the soak is meant to stay under a minute")

    # --- pending: /metrics -------------------------------------------------------------------

    def parsed_metrics(self):
        """{sample name: [(labels, value)]} and {family name: type} of the /metrics text."""
        self.assertEqual(self.metrics.status, 200, f"GET /metrics: {self.metrics.status} {self.metrics.body[:200]!r}")
        self.assertTrue(self.metrics.headers.get("content-type", "").startswith("text/plain"),
                        self.metrics.headers.get("content-type"))
        from prometheus_client.parser import text_string_to_metric_families
        samples, types = {}, {}
        for family in text_string_to_metric_families(self.metrics.body.decode("utf-8")):
            types[family.name] = family.type
            for s in family.samples:
                samples.setdefault(s.name, []).append((s.labels, s.value))
        return samples, types

    def value(self, samples, name, **labels):
        matching = [v for lab, v in samples.get(name, []) if all(lab.get(k) == x for k, x in labels.items())]
        self.assertEqual(len(matching), 1, f"{name}{labels}: {len(matching)} samples in /metrics")
        return matching[0]

    def test_metrics_parse_with_vllms_names(self):
        samples, types = self.parsed_metrics()
        for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
            self.assertEqual(types.get(name), "gauge", f"{name} is not a gauge in /metrics")
        for name in ("vllm:prompt_tokens", "vllm:generation_tokens", "vllm:num_preemptions", "vllm:request_success"):
            self.assertEqual(types.get(name), "counter", f"{name}_total is not a counter in /metrics")
        for name in ("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                     "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds"):
            self.assertEqual(types.get(name), "histogram", f"{name} is not a histogram in /metrics")
            buckets = sorted(((float(lab["le"]), v) for lab, v in samples[name + "_bucket"]))
            counts = [v for _, v in buckets]
            self.assertEqual(counts, sorted(counts), f"{name}'s buckets are not cumulative")
            self.assertEqual(buckets[-1][0], float("inf"), f"{name} has no +Inf bucket")
            self.assertEqual(buckets[-1][1], self.value(samples, name + "_count"), f"{name}: +Inf bucket != _count")
        for name, rows in samples.items():
            if name.startswith("vllm:"):
                for labels, _ in rows:
                    self.assertEqual(labels.get("model_name"), MODEL, f"{name}{labels}: model_name is not --model")

    def test_metrics_agree_with_what_was_sent(self):
        samples, _ = self.parsed_metrics()
        h = self.health
        success = {reason: self.value(samples, "vllm:request_success_total", finished_reason=reason)
                   for reason in ("stop", "length", "abort")}
        self.assertEqual(success["stop"] + success["length"], h["finished"], f"{success} vs /health {h}")
        self.assertEqual(success["abort"], h["aborted"], f"{success} vs /health {h}")
        e2e = self.value(samples, "vllm:e2e_request_latency_seconds_count")
        self.assertEqual(e2e, success["stop"] + success["length"], "e2e latency observations != requests finished")
        ttft = self.value(samples, "vllm:time_to_first_token_seconds_count")
        self.assertGreaterEqual(ttft, self.count("json") + self.count("stream") + self.warm_accepted - h["aborted"])
        self.assertLessEqual(ttft, h["submitted"])
        self.assertLessEqual(self.value(samples, "vllm:request_queue_time_seconds_count"), h["submitted"])
        usages = [u for (kind, problem, u) in self.outcomes if u]
        self.assertGreaterEqual(self.value(samples, "vllm:generation_tokens_total"),
                                sum(u["completion_tokens"] for u in usages))
        self.assertGreaterEqual(self.value(samples, "vllm:prompt_tokens_total"), sum(u["prompt_tokens"] for u in usages))
        self.assertGreaterEqual(self.value(samples, "vllm:inter_token_latency_seconds_count"),
                                sum(u["completion_tokens"] - 1 for u in usages if u["completion_tokens"] > 1))
        for gauge in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
            self.assertEqual(self.value(samples, gauge), 0, f"{gauge} after the soak")
        self.assertGreaterEqual(self.value(samples, "vllm:num_preemptions_total"), 0)


class Backpressure(unittest.TestCase):
    """Pending: --max-body-bytes (413) and admission control (--max-waiting: 429 with Retry-After)."""

    BODY_LIMIT = 64 * 1024

    @classmethod
    def setUpClass(cls):
        require_installed()
        cls.server = start_server("--max-seqs", "2", "--max-waiting", "2", "--max-body-bytes", str(cls.BODY_LIMIT))
        port = port_of(cls.server)
        big = json.dumps({"model": MODEL, "prompt": "a " * cls.BODY_LIMIT, "max_tokens": 1}).encode()
        cls.oversize = [exchange(port, "POST", "/v1/completions", big) for _ in range(3)]
        cls.bursts = []
        for burst in range(3):
            specs = [{"kind": "stream", "path": "/v1/completions", "chat": False, "usage": True,
                      "body": {"model": MODEL, "prompt": f"{PROMPTS[i % len(PROMPTS)]} [{burst}.{i}]", "max_tokens": 24,
                               "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}}
                     for i in range(12)]
            gate = threading.Barrier(len(specs))

            def send(spec):
                gate.wait()
                return exchange(port, "POST", spec["path"], json.dumps(spec["body"]).encode())
            with ThreadPoolExecutor(len(specs)) as pool:
                cls.bursts.append(list(pool.map(send, specs)))
        cls.health = wait_idle(port)
        cls.metrics = get(port, "/metrics")
        cls.exit_code = cls.server.stop()

    def test_an_oversize_body_gets_413_with_the_error_object(self):
        for a in self.oversize:
            self.assertIsNone(a.problem)
            self.assertIsNone(error_problem(a, 413), a.body[:200])

    def test_a_burst_beyond_max_seqs_plus_max_waiting_gets_429_with_retry_after(self):
        refused = accepted = 0
        for answers in self.bursts:
            for a in answers:
                self.assertIsNone(a.problem)
                if a.status == 429:
                    refused += 1
                    self.assertIsNone(error_problem(a, 429), a.body[:200])
                    self.assertIn("retry-after", a.headers, "a 429 without Retry-After")
                    self.assertTrue(a.headers["retry-after"].isdigit() and int(a.headers["retry-after"]) >= 1,
                                    f"Retry-After: {a.headers['retry-after']!r} is not a whole number of seconds ≥ 1")
                else:
                    accepted += 1
                    problem, _ = stream_problem(a, chat=False, include_usage=True)
                    self.assertIsNone(problem)
            self.assertGreaterEqual(sum(a.status == 200 for a in answers), 2, "a burst had fewer than max-seqs served")
        self.assertGreater(refused, 0, "no 429 in three bursts of 12 against max-seqs 2 + max-waiting 2")

    def test_health_is_idle_and_the_counters_add_up(self):
        h = self.health
        self.assertEqual((h["running"], h["waiting"], h["free_blocks"]), (0, 0, h["num_blocks"]), h)
        self.assertEqual(h["submitted"], h["finished"] + h["aborted"] + h["rejected"], h)

    def test_refusals_are_counted_in_metrics(self):
        self.assertEqual(self.metrics.status, 200)
        from prometheus_client.parser import text_string_to_metric_families
        refused = sum(a.status == 429 for answers in self.bursts for a in answers)
        values = {tuple(sorted(s.labels.items())): s.value
                  for f in text_string_to_metric_families(self.metrics.body.decode())
                  for s in f.samples if s.name == "inferlab:requests_rejected_total"}
        self.assertEqual(values.get((("model_name", MODEL), ("reason", "queue_full"))), refused, values)

    def test_exits_zero_on_sigterm(self):
        self.assertEqual(self.exit_code, 0, self.server.output()[-3000:])


if __name__ == "__main__":
    unittest.main()
