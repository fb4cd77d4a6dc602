"""`inferlab serve` against careless and hostile clients (chapter 09): each finding of a review
that tried to take the server down, as a test. Loopback only; every loop is bounded in count and
time. Standard library only (raw sockets: every byte seen). About a minute on the lab's 2-core
machine.

  - a 10,000-deep JSON body (20 KB): 400 in well under a second, five times, RSS unchanged;
  - 60 "slowloris" connections sending one header byte a second: /health answers within 1 s
    throughout, the slow connections are closed after --request-timeout, and SIGTERM with them
    open exits within 2 s;
  - connections beyond --max-connections: 503 at once, and /health still answers once they close;
  - a non-streamed request whose client leaves: the engine's running count drops within 1 s and
    the request is counted as aborted;
  - three requests written at once on one connection (pipelining): three answers, in order;
  - max_model_len is what the pool holds, and a prompt longer than it is a 400 naming it;
  - the finish reasons of /health are those of /metrics (a stop string is "stop", not "aborted");
  - a 429's Retry-After comes from the queued work, not a constant;
  - the server's threads do not grow with the connections it has served.

Run: python3 tests/09-serving/test_hostile_clients.py   (ctest: ServePython.HostileClients, label ch09)
"""

import json
import re
import signal
import socket
import sys
import threading
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_fixture import require_installed, start_server  # noqa: E402

MODEL = None  # the model's id in the API: the path the server was started with (set in setUpModule)


def port_of(server):
    return int(server.url.rsplit(":", 1)[1])


def threads_of(server):
    for line in Path(f"/proc/{server.pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


def read_response(sock, deadline):
    """One HTTP response from @p sock (Content-Length or chunked), as (status, headers, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a whole head: {data!r}")
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    if "content-length" in headers:
        n = int(headers["content-length"])
        while len(rest) < n:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed inside a body")
            rest += chunk
        return status, headers, rest[:n], rest[n:]
    body = b""
    while True:  # chunked
        while b"\r\n" not in rest:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            rest += sock.recv(65536)
        size_line, rest = rest.split(b"\r\n", 1)
        size = int(size_line, 16)
        while len(rest) < size + 2:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            rest += sock.recv(65536)
        body += rest[:size]
        rest = rest[size + 2:]
        if size == 0:
            return status, headers, body, rest


def request_bytes(method, path, body=None, keep_alive=True):
    payload = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
    if not keep_alive:
        head += "Connection: close\r\n"
    return head.encode() + b"\r\n" + payload


def call(port, method, path, body=None, timeout=30.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request_bytes(method, path, body, keep_alive=False))
        status, headers, payload, _ = read_response(s, time.monotonic() + timeout)
        return status, headers, payload


def health(port, timeout=30.0):
    status, _, body = call(port, "GET", "/health", timeout=timeout)
    assert status == 200, body
    return json.loads(body)


def metric(port, name, labels):
    _, _, body = call(port, "GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {name}{labels} in /metrics")


def setUpModule():
    require_installed()


class HostileClients(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # A small pool (64 blocks of 16 = 1,024 tokens) for max_model_len, a short request timeout
        # so that the slow clients' fate is seen within the test's bound.
        cls.server = start_server("--max-seqs", "4", "--max-waiting", "4", "--num-blocks", "64",
                                  "--request-timeout", "3", "--max-connections", "100")
        cls.port = port_of(cls.server)
        global MODEL
        MODEL = cls.server.args[cls.server.args.index("--model") + 1]
        # Warm: the pool, the worker threads and the model's OpenMP threads exist.
        call(cls.port, "POST", "/v1/completions", {"model": MODEL, "prompt": "Hi", "max_tokens": 2})

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def wait_idle(self, within=10.0):
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            h = health(self.port)
            if h["running"] == 0 and h["waiting"] == 0:
                return h
            time.sleep(0.05)
        self.fail(f"the engine is still busy after {within} s: {health(self.port)}")

    def test_a_deeply_nested_body_is_refused_at_once_and_keeps_no_memory(self):
        body = (b'{"model": "' + MODEL.encode() + b'", "max_tokens": 1, "prompt": ' + b"[" * 10000 + b"1"
                + b"]" * 10000 + b"}")
        rss_before = self.server.rss_kib()
        for _ in range(5):
            start = time.monotonic()
            status, _, payload = call(self.port, "POST", "/v1/completions", body)
            elapsed = time.monotonic() - start
            self.assertEqual(status, 400, payload)
            self.assertIn("deep", json.loads(payload)["error"]["message"])
            self.assertLess(elapsed, 0.5, "a 20 KB body should be refused in milliseconds")
        growth_mib = (self.server.rss_kib() - rss_before) / 1024
        self.assertLess(abs(growth_mib), 10, f"RSS moved {growth_mib:.1f} MiB over five deep bodies")

    def test_slow_clients_hold_no_thread_and_are_closed_after_the_request_timeout(self):
        threads_before = threads_of(self.server)
        slow = []
        for _ in range(60):
            s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            s.sendall(b"P")
            slow.append(s)
        line = b"OST /v1/completions HTTP/1.1\r\nHost: x\r\n"
        closed_at = {}
        worst = 0.0
        start = time.monotonic()
        for second in range(6):  # one byte a second from each; /health probed meanwhile
            for i, s in enumerate(slow):
                if i in closed_at:
                    continue
                try:
                    s.sendall(line[second:second + 1])
                except OSError:
                    closed_at[i] = time.monotonic() - start
            probe_end = time.monotonic() + 1.0
            while time.monotonic() < probe_end:
                t = time.monotonic()
                health(self.port, timeout=1.0)
                worst = max(worst, time.monotonic() - t)
                time.sleep(0.1)
        self.assertLess(worst, 1.0, f"/health took {worst:.2f} s beside 60 slow connections")
        # The request timeout is 3 s: by now (6 s) the server has closed every slow connection.
        for i, s in enumerate(slow):
            if i not in closed_at:
                s.settimeout(2.0)
                try:
                    data = s.recv(1024)
                    self.assertEqual(data, b"", f"slow connection {i} got {data!r} instead of being closed")
                except (ConnectionResetError, BrokenPipeError):
                    pass
                except socket.timeout:
                    self.fail(f"slow connection {i} is still open after {time.monotonic() - start:.1f} s")
            s.close()
        self.assertLessEqual(threads_of(self.server), threads_before,
                             "the server started threads for slow clients")

    def test_connections_beyond_the_limit_get_503(self):
        idle = [socket.create_connection(("127.0.0.1", self.port), timeout=5) for _ in range(100)]
        try:
            time.sleep(0.2)  # the server has accepted them
            status, _, payload = call(self.port, "GET", "/health", timeout=5)
            self.assertEqual(status, 503, payload)
            self.assertIn("connections", json.loads(payload)["error"]["message"])
        finally:
            for s in idle:
                s.close()
        deadline = time.monotonic() + 5
        while True:
            status, _, _ = call(self.port, "GET", "/health", timeout=5)
            if status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(status, 200, "the server still refuses after the idle connections closed")

    def test_an_abandoned_request_is_aborted_within_a_second(self):
        self.wait_idle()
        aborted_before = health(self.port)["aborted"]
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        s.sendall(request_bytes("POST", "/v1/completions",
                                {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 900, "ignore_eos": True,
                                 "temperature": 0}))
        deadline = time.monotonic() + 10
        while health(self.port)["running"] == 0:
            self.assertLess(time.monotonic(), deadline, "the request never ran")
            time.sleep(0.02)
        time.sleep(0.3)
        s.close()  # the client leaves without reading
        left = time.monotonic()
        while health(self.port)["running"] != 0:
            self.assertLess(time.monotonic() - left, 1.0, "the abandoned request still runs after 1 s")
            time.sleep(0.02)
        deadline = time.monotonic() + 5
        while health(self.port)["aborted"] == aborted_before and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual(health(self.port)["aborted"], aborted_before + 1)

    def test_pipelined_requests_are_each_answered_in_order(self):
        three = (request_bytes("GET", "/health")
                 + request_bytes("POST", "/v1/completions", {"model": MODEL, "prompt": "Paris is", "max_tokens": 2,
                                                             "temperature": 0})
                 + request_bytes("GET", "/v1/models", keep_alive=False))
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            s.sendall(three)
            deadline = time.monotonic() + 30
            answers = []
            leftover = b""
            for _ in range(3):
                # read_response reads from the socket; feed it what the last one left over
                status, headers, body, leftover = read_response(_Prefixed(s, leftover), deadline)
                answers.append((status, json.loads(body)))
        self.assertEqual([a[0] for a in answers], [200, 200, 200], answers)
        self.assertEqual(answers[0][1]["status"], "ok")
        self.assertEqual(answers[1][1]["object"], "text_completion")
        self.assertEqual(answers[1][1]["usage"]["completion_tokens"], 2)
        self.assertEqual(answers[2][1]["object"], "list")

    def test_max_model_len_is_what_the_pool_holds(self):
        status, _, body = call(self.port, "GET", "/v1/models")
        self.assertEqual(json.loads(body)["data"][0]["max_model_len"], 64 * 16)
        status, _, body = call(self.port, "POST", "/v1/completions",
                               {"model": MODEL, "prompt": [1] * 1030, "max_tokens": 1})
        self.assertEqual(status, 400, body)
        self.assertEqual(json.loads(body)["error"]["param"], "prompt")

    def test_health_and_metrics_share_the_finish_reasons(self):
        self.wait_idle()
        labels = {"finished_reason": "stop"}
        stop_before = metric(self.port, "vllm:request_success_total", labels)
        h_before = health(self.port)
        status, _, body = call(self.port, "POST", "/v1/completions",
                               {"model": MODEL, "prompt": "1, 2, 3, 4,", "max_tokens": 40, "temperature": 0,
                                "stop": [","]})
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["choices"][0]["finish_reason"], "stop")
        h = health(self.port)
        self.assertEqual(metric(self.port, "vllm:request_success_total", labels), stop_before + 1)
        self.assertEqual(h["finished_reason"]["stop"], h_before["finished_reason"]["stop"] + 1)
        self.assertEqual(h["aborted"], h_before["aborted"], "a stop string's finish counted as aborted")
        self.assertEqual(h["finished"], h_before["finished"] + 1)

    def test_retry_after_comes_from_the_queued_work(self):
        self.wait_idle()
        long = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 400, "ignore_eos": True,
                "temperature": 0}
        holders = [socket.create_connection(("127.0.0.1", self.port), timeout=60) for _ in range(8)]
        try:
            for s in holders:  # 4 running + 4 waiting: the server is full
                s.sendall(request_bytes("POST", "/v1/completions", long))
            deadline = time.monotonic() + 10
            while True:
                h = health(self.port)
                if h["running"] + h["waiting"] == 8 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            time.sleep(0.5)  # a few steps measured
            status, headers, body = call(self.port, "POST", "/v1/completions", long)
            self.assertEqual(status, 429, body)
            retry = int(headers["retry-after"])
            # ~3,000 tokens queued at 4 a step: several seconds, not the 1 s of "nothing measured yet".
            self.assertGreater(retry, 1, headers)
            self.assertLessEqual(retry, 3600)
        finally:
            for s in holders:
                s.close()
        self.wait_idle()


class _Prefixed:
    """A socket whose first reads return @p prefix (bytes already read past the last response)."""

    def __init__(self, sock, prefix):
        self.sock, self.prefix = sock, prefix

    def settimeout(self, t):
        self.sock.settimeout(t)

    def recv(self, n):
        if self.prefix:
            data, self.prefix = self.prefix, b""
            return data
        return self.sock.recv(n)


class Shutdown(unittest.TestCase):
    def test_sigterm_with_slow_connections_open_exits_within_two_seconds(self):
        server = start_server("--request-timeout", "30")
        port = port_of(server)
        slow = []
        try:
            for _ in range(60):
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                s.sendall(b"POST /v1/comp")
                slow.append(s)
            streaming = socket.create_connection(("127.0.0.1", port), timeout=30)
            streaming.sendall(request_bytes("POST", "/v1/completions",
                                            {"model": server.args[server.args.index("--model") + 1],
                                             "prompt": "Once", "max_tokens": 2000, "ignore_eos": True,
                                             "stream": True}))
            streaming.recv(100)  # the stream has begun
            start = time.monotonic()
            status = server.stop(signal.SIGTERM, timeout=10)
            elapsed = time.monotonic() - start
            self.assertEqual(status, 0, server.output()[-2000:])
            self.assertLess(elapsed, 2.0, f"SIGTERM took {elapsed:.2f} s with 60 slow connections and a stream open")
            streaming.close()
        finally:
            for s in slow:
                s.close()
            server.kill()


if __name__ == "__main__":
    unittest.main(verbosity=2)
