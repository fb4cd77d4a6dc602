"""Starts and stops `inferlab serve` (chapter 09) as a child process, for the load generator
(tools/bench_serve.py --start-server, --offline-compare) and the chapter's Python tests
(tests/09-serving/*.py). Standard library only.

    with ServerProcess(exe, "models/SmolLM2-135M-Instruct.Q4_1.gguf", ["--max-seqs", "32"]) as server:
        ... server.url ...            # http://127.0.0.1:PORT, from the line the server prints
        server.rss_kib()              # its resident memory now (/proc/PID/status VmRSS)
    # leaving the block sends SIGTERM and waits; server.stop() returns the exit status

The server is started with --port 0 (any free loopback port) and is ready once it prints
`listening on http://HOST:PORT` on stdout: it prints that only when its listen loop runs.
"""

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LISTENING = re.compile(r"listening on (http://[0-9A-Za-z.:\[\]-]+)")


def default_inferlab_exe():
    """The inferlab executable: $INFERLAB_EXE, else build/$INFERLAB_PRESET/inferlab (default preset)."""
    if os.environ.get("INFERLAB_EXE"):
        return os.environ["INFERLAB_EXE"]
    return str(ROOT / "build" / os.environ.get("INFERLAB_PRESET", "default") / "inferlab")


class ServerError(RuntimeError):
    """The server did not start, or did not stop as it should."""


class ServerProcess:
    """A running `inferlab serve --model MODEL --port 0 EXTRA…`; its output is kept (self.output())."""

    def __init__(self, exe, model, extra_args=(), start_timeout=120.0, env=None):
        self.exe = str(exe)
        if not Path(self.exe).is_file():
            raise ServerError(f"no inferlab executable at {self.exe} (build it: cmake --build build/default --target inferlab)")
        self.args = [self.exe, "serve", "--model", str(model), "--port", "0", *map(str, extra_args)]
        self._lines = []
        self._lock = threading.Lock()
        self._listening = threading.Event()
        self.url = None
        self.returncode = None
        env = dict(os.environ if env is None else env)
        # As the launcher does (./inferlab): OpenMP's idle workers spin briefly, then sleep, so the
        # clients on the same cores (a load generator, a test) get the CPU they need.
        if "OMP_WAIT_POLICY" not in env:
            env.setdefault("GOMP_SPINCOUNT", "1000")
        self.process = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=env, text=True, errors="replace")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + start_timeout
        while not self._listening.wait(0.05):
            if self.process.poll() is not None:
                self._reader.join(2)
                raise ServerError(f"`{' '.join(self.args)}` exited with {self.process.returncode} before listening:\n"
                                  + self.output())
            if time.monotonic() > deadline:
                self.kill()
                raise ServerError(f"`{' '.join(self.args)}` printed no 'listening on' line in {start_timeout:.0f} s:\n"
                                  + self.output())

    def _read(self):
        for line in self.process.stdout:
            with self._lock:
                self._lines.append(line)
            match = LISTENING.search(line)
            if match and self.url is None:
                self.url = match.group(1)
                self._listening.set()

    @property
    def pid(self):
        return self.process.pid

    def output(self):
        """Everything the server printed so far (stdout and stderr)."""
        with self._lock:
            return "".join(self._lines)

    def alive(self):
        return self.process.poll() is None

    def rss_kib(self):
        """The server's resident set size now, in KiB (VmRSS of /proc/PID/status)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise ServerError(f"/proc/{self.pid}/status has no VmRSS line")

    def stop(self, sig=signal.SIGTERM, timeout=30.0):
        """Sends @p sig and waits for the exit; returns the exit status (negative: killed by a signal)."""
        if self.returncode is not None:
            return self.returncode
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            self.returncode = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise ServerError(f"the server did not exit within {timeout:.0f} s of signal {sig}; killed:\n"
                              + self.output()[-4000:])
        self._reader.join(5)
        return self.returncode

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
        self.returncode = self.process.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.returncode is None:
            try:
                self.stop()
            except ServerError:
                pass
