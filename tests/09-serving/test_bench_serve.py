"""Tests of `./inferlab bench serve` (tools/bench_serve.py, chapter 09), for whoever changes it:

  - Statistics: the percentile (numpy's default, linear), mean, std, TPOT, SLOs and goodput, the
    summary and the SSE reading, against values computed by hand (and numpy's percentile, an
    independent implementation, on seeded random data);
  - Sampler: the 64-bit Mersenne Twister against the C++ standard's check value, and the ShareGPT
    and Alpaca lengths against chapter 06's C++ sampler — values printed by
    `inferlab analyze --kv-waste --json --requests K` (its drawn means times K are the sums of the
    first K lengths; the differences give each one), kept below and compared live when the
    inferlab executable is there;
  - Workload: Poisson arrivals, traces read and written in runtime/engine/trace.h's format;
  - EndToEnd: `./inferlab bench serve --start-server … --offline-compare` on SmolLM2, 8 small
    requests: the JSON has every field, all 8 completed, the offline engine ran the same requests.

Run: build/venv/bin/python tests/09-serving/test_bench_serve.py [Statistics Sampler Workload EndToEnd]
(ctest: BenchServe.Statistics and BenchServe.EndToEnd, label ch09). INFERLAB_EXE names the inferlab
executable (default build/default/inferlab).
"""

import json
import math
import os
import random
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.dont_write_bytecode = True
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from bench_serve_metrics import (RequestResult, StreamTally, format_table, goodput, mean, meets_slo,  # noqa: E402
                                 parse_slo, percentile, std, summarize, tpot)
from bench_serve_workload import (BenchRequest, Mt19937_64, geometric_length, poisson_arrivals,  # noqa: E402
                                  read_trace, request_body, sample_lengths, trace_lines, workload_from_lengths)
from serve_process import default_inferlab_exe  # noqa: E402

EXE = default_inferlab_exe()


def result(ttft, e2el, tokens, itl=(), error=None, max_tokens=None):
    r = RequestResult(index=0, prompt_len=10, max_tokens=max_tokens or tokens or 1, ttft=ttft, e2el=e2el,
                      itl=list(itl), prompt_tokens=10, completion_tokens=tokens, error=error)
    return r


class Statistics(unittest.TestCase):
    def test_percentile_is_numpys_linear_interpolation(self):
        # rank h = (n − 1) · p / 100 between the sorted values
        self.assertEqual(percentile([4, 1, 3, 2], 50), 2.5)            # h = 1.5: 2 + 0.5 · (3 − 2)
        self.assertAlmostEqual(percentile([1, 2, 3, 4], 99), 3.97)     # h = 2.97: 3 + 0.97 · 1
        self.assertAlmostEqual(percentile([1, 2, 3, 4, 100], 99), 96.16)  # h = 3.96: 4 + 0.96 · 96
        self.assertEqual(percentile([1, 2, 3, 4, 100], 50), 3)         # h = 2: the middle value
        self.assertEqual(percentile([7], 99), 7)
        self.assertEqual(percentile([3, 1, 2], 0), 1)
        self.assertEqual(percentile([3, 1, 2], 100), 3)
        self.assertEqual(percentile([], 99), 0.0)                      # vLLM reports an empty metric as 0
        with self.assertRaises(ValueError):
            percentile([1], 101)

    def test_percentile_agrees_with_numpy(self):
        try:
            import numpy
        except ImportError:
            self.skipTest("numpy is not installed (./inferlab setup installs it into build/venv)")
        rng = random.Random(9)
        for n in (1, 2, 3, 10, 101, 1000):
            values = [rng.expovariate(1.0) for _ in range(n)]
            for p in (0, 1, 50, 90, 99, 99.9, 100):
                self.assertAlmostEqual(percentile(values, p), float(numpy.percentile(values, p)), places=12,
                                       msg=f"n = {n}, p = {p}")

    def test_mean_and_std(self):
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)
        self.assertAlmostEqual(std([1, 2, 3, 4]), math.sqrt(1.25))  # population: √(Σ(x − 2.5)² / 4)
        self.assertEqual(mean([]), 0.0)
        self.assertEqual(std([5]), 0.0)

    def test_tpot_excludes_the_first_token(self):
        self.assertAlmostEqual(tpot(e2el=1.0, ttft=0.1, output_tokens=10), 0.1)  # 0.9 s / 9 tokens
        self.assertAlmostEqual(tpot(e2el=0.5, ttft=0.3, output_tokens=2), 0.2)
        self.assertIsNone(tpot(e2el=0.5, ttft=0.5, output_tokens=1))          # no token after the first
        self.assertIsNone(tpot(e2el=None, ttft=0.5, output_tokens=4))

    def test_slo_parsing(self):
        self.assertEqual(parse_slo(["ttft:500", "tpot:50", "e2el:2000"]), {"ttft": 0.5, "tpot": 0.05, "e2el": 2.0})
        for bad in (["ttft"], ["itl:5"], ["ttft:fast"], ["e2el:0"]):
            with self.assertRaises(ValueError, msg=bad):
                parse_slo(bad)

    def test_goodput_counts_completed_requests_meeting_every_slo(self):
        a = result(ttft=0.1, e2el=1.0, tokens=10)    # TPOT 0.1 s
        b = result(ttft=0.5, e2el=2.0, tokens=5)     # TPOT 0.375 s
        c = result(ttft=None, e2el=None, tokens=None, error="HTTP 429")
        d = result(ttft=0.2, e2el=0.2, tokens=1)     # no TPOT: meets any TPOT bound
        runs = [a, b, c, d]
        self.assertEqual(goodput(runs, {"ttft": 0.3}, 4.0), 0.5)           # a, d
        self.assertEqual(goodput(runs, {"tpot": 0.2}, 4.0), 0.5)           # a, d (b: 0.375)
        self.assertEqual(goodput(runs, {"e2el": 1.5}, 2.0), 1.0)           # a, d
        self.assertEqual(goodput(runs, {"ttft": 0.6, "tpot": 0.4}, 3.0), 1.0)  # a, b, d
        self.assertEqual(goodput(runs, {"ttft": 0.15, "e2el": 0.5}, 1.0), 0.0)  # a's e2el, d's ttft
        self.assertIsNone(goodput(runs, {}, 4.0))
        self.assertFalse(meets_slo(c, {"ttft": 10}))

    def test_summary_over_completed_requests(self):
        runs = [result(ttft=0.1, e2el=1.0, tokens=10, itl=[0.1] * 9),
                result(ttft=0.5, e2el=2.0, tokens=5, itl=[0.3, 0.4, 0.5, 0.3], max_tokens=8),
                result(ttft=None, e2el=None, tokens=None, error="the stream ended before data: [DONE]"),
                result(ttft=0.2, e2el=0.2, tokens=1)]
        s = summarize(runs, duration=4.0, slo={"ttft": 0.3})
        self.assertEqual((s["completed"], s["failed"]), (3, 1))
        self.assertEqual(s["total_input_tokens"], 30)
        self.assertEqual(s["total_output_tokens"], 16)
        self.assertEqual(s["request_throughput"], 0.75)
        self.assertEqual(s["output_throughput"], 4.0)
        self.assertEqual(s["total_token_throughput"], 11.5)
        self.assertEqual(s["request_goodput"], 0.5)
        self.assertEqual(s["outputs_below_max_tokens"], 1)
        self.assertAlmostEqual(s["mean_ttft_ms"], 800 / 3)        # (100 + 500 + 200) / 3
        self.assertAlmostEqual(s["median_ttft_ms"], 200)
        self.assertAlmostEqual(s["p99_ttft_ms"], 200 + 0.98 * 300)  # h = 1.98 over 100, 200, 500
        self.assertAlmostEqual(s["mean_tpot_ms"], 237.5)          # 100 and 375 (the 1-token request has none)
        self.assertAlmostEqual(s["p99_tpot_ms"], 100 + 0.99 * 275)
        self.assertAlmostEqual(s["mean_itl_ms"], (900 + 1500) / 13)  # 13 gaps, pooled
        self.assertAlmostEqual(s["median_itl_ms"], 100)
        self.assertAlmostEqual(s["mean_e2el_ms"], 3200 / 3)
        self.assertIn("Successful requests:", format_table(s))

    def test_a_streamed_completion_is_timed_by_its_content_chunks(self):
        r = RequestResult(index=0, prompt_len=3, max_tokens=3)
        t = StreamTally(r, send_time=10.0)
        events = [(10.5, {"choices": [{"index": 0, "text": "Hel", "finish_reason": None}]}),
                  (10.6, {"choices": [{"index": 0, "text": "", "finish_reason": None}]}),    # no content: no ITL
                  (10.75, {"choices": [{"index": 0, "text": "lo", "finish_reason": None}]}),
                  (11.0, {"choices": [{"index": 0, "text": "!", "finish_reason": "length"}]}),
                  (11.0, {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}})]
        for now, chunk in events:
            t.feed("data: " + json.dumps(chunk), now)
            t.feed("", now)
        t.feed("data: [DONE]", 11.25)
        self.assertTrue(t.finish(), r.error)
        self.assertEqual(r.ttft, 0.5)
        self.assertEqual([round(g, 9) for g in r.itl], [0.25, 0.25])
        self.assertEqual(r.e2el, 1.25)
        self.assertEqual((r.prompt_tokens, r.completion_tokens, r.finish_reason), (3, 3, "length"))
        self.assertAlmostEqual(tpot(r.e2el, r.ttft, r.completion_tokens), 0.375)

    def test_a_chat_stream_skips_the_role_chunk(self):
        r = RequestResult(index=0, prompt_len=3, max_tokens=2)
        t = StreamTally(r, send_time=0.0)
        t.feed('data: {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}', 0.1)
        t.feed('data: {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}', 0.3)
        t.feed('data: {"choices": [{"index": 0, "delta": {"content": "!"}, "finish_reason": "stop"}]}', 0.4)
        t.feed('data: {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}', 0.4)
        t.feed("data: [DONE]", 0.5)
        self.assertTrue(t.finish(), r.error)
        self.assertEqual(r.ttft, 0.3)
        self.assertEqual(r.finish_reason, "stop")

    def test_an_incomplete_stream_is_a_failure(self):
        r = RequestResult(index=0, prompt_len=3, max_tokens=2)
        t = StreamTally(r, send_time=0.0)
        t.feed('data: {"choices": [{"index": 0, "text": "a"}]}', 0.1)
        self.assertFalse(t.finish())
        self.assertIn("[DONE]", r.error)
        r2 = RequestResult(index=0, prompt_len=3, max_tokens=2)
        t2 = StreamTally(r2, send_time=0.0)
        t2.feed('data: {"choices": [{"index": 0, "text": "a"}]}', 0.1)
        t2.feed("data: [DONE]", 0.2)
        self.assertFalse(t2.finish())
        self.assertIn("usage", r2.error)
        with self.assertRaises(ValueError):
            StreamTally(RequestResult(0, 1, 1), 0.0).feed("event: nope", 0.0)


# Chapter 06's C++ sampler (analysis/kv_capacity.cpp), as `inferlab analyze --kv-waste --json
# --lengths L --seed S --context MAX --requests K` prints it: K · drawn.mean_prompt and
# K · drawn.mean_output for K = 1, 2, … are the running sums; their differences are each request's.
CPP_CAPTURED = {}  # (lengths, seed, max_seq_len) → [(prompt, output), …]: set at the end of this file


def cpp_lengths(lengths, seed, max_seq_len, count):
    """The first @p count (prompt, output) pairs of the C++ sampler, through `inferlab analyze`."""
    out, previous = [], (0, 0)
    for k in range(1, count + 1):
        run = subprocess.run([EXE, "analyze", "--kv-waste", "--json", "--lengths", lengths, "--seed", str(seed),
                              "--context", str(max_seq_len), "--requests", str(k)], capture_output=True, text=True)
        if run.returncode != 0:
            raise AssertionError(f"inferlab analyze --kv-waste failed ({run.returncode}): {run.stderr}")
        drawn = json.loads(run.stdout)["drawn"]
        sums = (round(drawn["mean_prompt"] * k), round(drawn["mean_output"] * k))
        out.append((sums[0] - previous[0], sums[1] - previous[1]))
        previous = sums
    return out


class Sampler(unittest.TestCase):
    def test_mt19937_64_is_the_standards_engine(self):
        # [rand.predef]: the 10000th invocation of a default-constructed (seed 5489) std::mt19937_64
        # produces 9981545732273789042.
        engine = Mt19937_64(5489)
        for _ in range(9999):
            engine.next()
        self.assertEqual(engine.next(), 9981545732273789042)

    def test_geometric_by_hand(self):
        class Fixed:  # an engine whose raw outputs are given
            def __init__(self, values):
                self.values = list(values)

            def next(self):
                return self.values.pop(0)
        top = (1 << 64) - 1          # u = 1 exactly: ln u = 0, the shortest length
        self.assertEqual(geometric_length(Fixed([top]), 161.31), 1)
        half = (1 << 63) - (1 << 11)  # (x >> 11) + 1 = 2^52: u = 0.5
        # 1 + ⌊ln 0.5 / ln(1 − 1/2)⌋ = 2 for mean 2; mean 4: 1 + ⌊ln 0.5 / ln 0.75⌋ = 1 + ⌊2.409⌋ = 3
        self.assertEqual(geometric_length(Fixed([half]), 2.0), 2)
        self.assertEqual(geometric_length(Fixed([half]), 4.0), 3)
        self.assertEqual(geometric_length(Fixed([]), 1.0), 1)   # mean ≤ 1: no draw
        self.assertEqual(geometric_length(Fixed([0]), 2.0), 54)  # u = 2^-53: 1 + ⌊ln 2^-53 / ln 0.5⌋ = 1 + 53

    def test_lengths_equal_the_cpp_samplers(self):
        for key, expected in CPP_CAPTURED.items():
            lengths, seed, max_seq_len = key
            got = sample_lengths(lengths, len(expected), max_seq_len, seed)
            self.assertEqual(got, expected, f"{key}: the Python sampler differs from the C++ one")

    def test_lengths_equal_the_cpp_samplers_live(self):
        if not Path(EXE).is_file():
            self.fail(f"no inferlab executable at {EXE} (set INFERLAB_EXE, or build: cmake --build build/default "
                      "--target inferlab)")
        for (lengths, seed, max_seq_len), count in ((("sharegpt", 6, 2048), 6), (("alpaca", 3, 2048), 4),
                                                     (("sharegpt", 1, 40), 6)):
            self.assertEqual(sample_lengths(lengths, count, max_seq_len, seed),
                             cpp_lengths(lengths, seed, max_seq_len, count), (lengths, seed, max_seq_len))
        # and many at once: the sums of 2000 requests (tokens_held of block 1 is Σ prompt + output)
        run = subprocess.run([EXE, "analyze", "--kv-waste", "--json", "--lengths", "sharegpt", "--seed", "11",
                              "--context", "2048", "--requests", "2000"], capture_output=True, text=True, check=True)
        report = json.loads(run.stdout)
        pairs = sample_lengths("sharegpt", 2000, 2048, 11)
        self.assertEqual(round(report["drawn"]["mean_prompt"] * 2000), sum(p for p, _ in pairs))
        self.assertEqual(round(report["drawn"]["mean_output"] * 2000), sum(o for _, o in pairs))
        block1 = next(row for row in report["rows"] if row["block_size"] == 1)
        self.assertEqual(block1["tokens_held"], sum(p + o for p, o in pairs))

    def test_redraws_cuts_and_caps(self):
        for prompt, output in sample_lengths("sharegpt", 500, 40, 1):
            self.assertTrue(1 <= prompt < 40 and 1 <= output <= 40 - prompt, (prompt, output))
        capped = sample_lengths("sharegpt", 200, 2048, 6, max_prompt=32, max_output=8)
        uncapped = sample_lengths("sharegpt", 200, 2048, 6)
        self.assertEqual(capped, [(min(p, 32), min(o, 8)) for p, o in uncapped])  # caps keep the draws
        means = sample_lengths("alpaca", 20000, 1 << 40, 7)
        self.assertAlmostEqual(sum(p for p, _ in means) / 20000, 19.31, delta=0.6)
        self.assertAlmostEqual(sum(o for _, o in means) / 20000, 58.45, delta=1.5)
        with self.assertRaises(ValueError):
            sample_lengths("lmsys", 1, 2048, 0)


class Workload(unittest.TestCase):
    def test_poisson_arrivals(self):
        times = poisson_arrivals(4000, 8.0, seed=3)
        self.assertEqual(times[0], 0.0)
        self.assertEqual(times, sorted(times))
        self.assertAlmostEqual(times[-1] / 3999, 1 / 8, delta=0.01)  # mean gap 1 / rate
        self.assertEqual(times, poisson_arrivals(4000, 8.0, seed=3))
        self.assertEqual(poisson_arrivals(3, math.inf, seed=3), [0.0, 0.0, 0.0])

    def test_trace_round_trip(self):
        requests = workload_from_lengths([(5, 3), (2, 7)], seed=4)
        self.assertTrue(all(17 <= i < 49152 for r in requests for i in r.prompt_ids))
        lines = trace_lines(requests, [0.0, 0.25])
        back = read_trace(lines, seed=0)
        self.assertEqual([(r.prompt_ids, r.max_tokens, r.arrival) for r in back],
                         [(requests[0].prompt_ids, 3, 0.0), (requests[1].prompt_ids, 7, 0.25)])
        generated = read_trace(['{"arrival": 1.5, "prompt_len": 4, "max_new_tokens": 2, "temperature": 0.7}',
                                "# a comment", ""], seed=1)
        self.assertEqual((len(generated), generated[0].prompt_len, generated[0].sampling), (1, 4, {"temperature": 0.7}))
        for bad in ('{"prompt_len": 0}', '{"prompt_ids": [1], "stop_ids": [2]}', '{"prompt_ids": [1], "bogus": 1}',
                    "[1]", "{"):
            with self.assertRaises(ValueError, msg=bad):
                read_trace([bad], seed=0)

    def test_request_bodies(self):
        r = BenchRequest(index=0, prompt_len=3, max_tokens=5, prompt_ids=[20, 21, 22])
        body = request_body(r, "completions", "smollm2")
        self.assertEqual(body, {"model": "smollm2", "max_tokens": 5, "temperature": 0, "stream": True,
                                "stream_options": {"include_usage": True}, "ignore_eos": True, "prompt": [20, 21, 22]})
        chat = request_body(r, "chat", "smollm2", ignore_eos=False)
        self.assertNotIn("ignore_eos", chat)
        self.assertEqual(len(chat["messages"][0]["content"].split()), 3)


class EndToEnd(unittest.TestCase):
    """`./inferlab bench serve` against a server it starts: 8 requests, small lengths."""

    FIELDS = ["completed", "failed", "duration", "total_input_tokens", "total_output_tokens", "request_throughput",
              "request_goodput", "output_throughput", "total_token_throughput"] + [
        f"{stat}_{metric}_ms" for metric in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "std", "p99")]

    @classmethod
    def setUpClass(cls):
        gguf = Path(os.environ.get("INFERLAB_SMOLLM2_GGUF", ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
        if not gguf.is_file():
            raise AssertionError(f"chapter 08's model is not installed ({gguf}): run ./inferlab setup")
        cls.dir = tempfile.TemporaryDirectory()
        cls.out = Path(cls.dir.name) / "bench.json"
        command = [str(ROOT / "inferlab"), "bench", "serve", "--start-server", "--server-model", str(gguf),
                   "--model", str(gguf), "--num-requests", "8", "--lengths", "sharegpt", "--max-prompt", "24",
                   "--max-output", "6", "--rate", "inf", "--seed", "2", "--slo", "ttft:60000", "tpot:60000",
                   "--engine-args", "--max-seqs 8", "--offline-compare", "--out", str(cls.out)]
        env = dict(os.environ, INFERLAB_EXE=EXE)
        cls.bench = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        cls.report = json.loads(cls.out.read_text()) if cls.out.is_file() else None

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def setUp(self):
        self.assertEqual(self.bench.returncode, 0, f"bench serve failed:\n{self.bench.stdout}\n{self.bench.stderr}")
        self.assertIsNotNone(self.report, "bench serve wrote no JSON")

    def test_every_field_and_all_8_completed(self):
        for name in self.FIELDS:
            self.assertIn(name, self.report, f"the JSON has no {name!r}")
        self.assertEqual(self.report["completed"], 8, self.bench.stdout)
        self.assertEqual(self.report["failed"], 0, self.bench.stdout)
        self.assertEqual(len(self.report["requests"]), 8)
        expected = sample_lengths("sharegpt", 8, 2048, 2, max_prompt=24, max_output=6)
        self.assertEqual([(r["prompt_tokens"], r["max_tokens"]) for r in self.report["requests"]],
                         [(p, o) for p, o in expected], "the server's prompt tokens are not the sampled lengths")
        self.assertGreater(self.report["output_throughput"], 0)
        self.assertEqual(self.report["request_goodput"], self.report["request_throughput"])  # SLOs of 60 s
        self.assertIn("Serving Benchmark Result", self.bench.stdout)
        self.assertIn("Mean TTFT (ms):", self.bench.stdout)

    def test_the_offline_engine_ran_the_same_requests(self):
        offline = self.report.get("offline")
        self.assertIsNotNone(offline, "no offline comparison in the JSON")
        self.assertNotIn("error", offline, offline.get("error"))
        self.assertEqual(offline["requests"], 8)
        self.assertEqual(offline["option_mismatches"], [])
        self.assertEqual(offline["offline_config"]["max_num_seqs"], 8)
        self.assertGreater(offline["offline_output_throughput"], 0)
        self.assertGreater(offline["ratio"], 0)
        self.assertIn("Server / offline:", self.bench.stdout)

    def test_pending_ignore_eos_every_request_makes_max_tokens(self):
        """Pending the server's ignore_eos (vLLM's extension): until it lands, a request may end on
        <|im_end|> before max_tokens, and the offline engine (no stop ids) makes more tokens."""
        short = [(r["index"], r["completion_tokens"], r["max_tokens"]) for r in self.report["requests"]
                 if r["completion_tokens"] != r["max_tokens"]]
        self.assertEqual(short, [], "requests (index, completion_tokens, max_tokens) that ignored ignore_eos")
        self.assertEqual(self.report["offline"]["requests_with_other_output_tokens"], [])
        self.assertEqual(self.report["offline"]["offline_output_tokens"], self.report["total_output_tokens"])


# The C++ sampler's first 8 (prompt, output) pairs, from `inferlab analyze --kv-waste --json --lengths L
# --seed S --context MAX --requests K` for K = 1 … 8 (cpp_lengths above), captured 2026-12-02.
CPP_CAPTURED.update({
    ("sharegpt", 6, 2048): [(41, 196), (36, 73), (170, 437), (103, 208), (433, 145), (635, 47), (119, 483), (71, 117)],
    ("alpaca", 0, 2048): [(35, 1), (61, 30), (12, 166), (9, 50), (4, 6), (17, 25), (2, 62), (26, 47)],
    # max_seq_len 40: prompts of 40 or more drawn again, outputs cut at 40 − prompt (15 + 25, 38 + 2, …)
    ("sharegpt", 1, 40): [(15, 25), (38, 2), (36, 4), (38, 2), (20, 20), (20, 20), (1, 39), (12, 28)],
})

if __name__ == "__main__":
    unittest.main()
