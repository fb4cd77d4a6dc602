"""`inferlab serve --tp N` / `--pp N` (tools/cli/serve.cpp, ranks.h): the server starts its ranks
through mpirun, answers over HTTP what the whole model answers, and stops every rank when it is
signalled.

- SmolLM2 served whole, over 3 tensor-parallel ranks and in 2 pipeline stages: a greedy completion
  and a streamed chat completion give the same text all three ways;
- SIGTERM to the server (mpirun forwards it), idle or in the middle of a stream: rank 0 aborts
  what is in flight and releases the others, every rank of the job is gone, and rank 0 says how
  many requests it served and aborted.

Run by ctest with build/venv's Python (tests/09-serving/venv_python.sh); standard library only.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.dont_write_bytecode = True

from serve_process import ServerProcess, default_inferlab_exe  # noqa: E402

EXE = default_inferlab_exe()
GGUF = os.environ.get("INFERLAB_SMOLLM2_GGUF", str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return response.read().decode()


def answers(server):
    """A greedy completion's text and a streamed greedy chat's text, through @p server."""
    completion = json.loads(post(server.url + "/v1/completions",
                                 {"model": GGUF, "prompt": "The capital of France is", "max_tokens": 12,
                                  "temperature": 0}))["choices"][0]["text"]
    stream = post(server.url + "/v1/chat/completions",
                  {"model": GGUF, "messages": [{"role": "user", "content": "Name a primary colour."}],
                   "max_tokens": 12, "temperature": 0, "stream": True})
    chat = ""
    for line in stream.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:]).get("choices", []):
                chat += choice.get("delta", {}).get("content") or ""
    return completion, chat


def job_processes(args):
    """The pids of processes still running this exact command line (mpirun's ranks among them)."""
    out = subprocess.run(["pgrep", "-f", "--", re.escape(" ".join(args[1:]))], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


class ServeSplit(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not Path(GGUF).is_file():
            raise AssertionError(f"chapter 08's model {GGUF} is not installed: run ./inferlab setup")
        with ServerProcess(EXE, GGUF, ["--max-seqs", "4"]) as whole:
            cls.whole = answers(whole)

    def check_split(self, flags):
        server = ServerProcess(EXE, GGUF, ["--max-seqs", "4", *flags], env={**os.environ, "OMP_NUM_THREADS": "1"})
        try:
            self.assertIn("split over" if flags[0] == "--tp" else "pipeline stages", server.output())
            self.assertEqual(answers(server), self.whole, f"serve {' '.join(flags)} against the whole model")
        finally:
            started = time.monotonic()
            server.stop(signal.SIGTERM, timeout=20)
        self.assertLess(time.monotonic() - started, 20)
        self.assertEqual(job_processes(server.args), [], "a rank outlived the server")
        self.assertIn("stopped after 2 requests", server.output())
        # mpirun reports a job it was signalled to end with status 1; the ranks themselves exit 0.
        self.assertIn(server.returncode, (0, 1), server.output()[-2000:])

    def test_a_signal_during_a_stream_stops_every_rank(self):
        server = ServerProcess(EXE, GGUF, ["--max-seqs", "4", "--tp", "3"], env={**os.environ, "OMP_NUM_THREADS": "1"})
        try:
            request = urllib.request.Request(
                server.url + "/v1/completions", headers={"Content-Type": "application/json"},
                data=json.dumps({"model": GGUF, "prompt": "Once upon a time", "max_tokens": 400, "temperature": 0,
                                 "ignore_eos": True, "stream": True}).encode())
            stream = urllib.request.urlopen(request, timeout=120)
            self.assertTrue(stream.readline().startswith(b"data: "), "the stream's first chunk")
        finally:
            started = time.monotonic()
            server.stop(signal.SIGTERM, timeout=40)  # mid-stream: rank 0 aborts it, then releases the others
        self.assertLess(time.monotonic() - started, 40)
        self.assertEqual(job_processes(server.args), [], "a rank outlived the server")
        self.assertIn("1 aborted", server.output())
        self.assertIn(server.returncode, (0, 1), server.output()[-2000:])

    def test_three_tensor_parallel_ranks_answer_as_the_whole_model(self):
        self.check_split(["--tp", "3"])

    def test_two_pipeline_stages_answer_as_the_whole_model(self):
        self.check_split(["--pp", "2", "--micro-batches", "3"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
