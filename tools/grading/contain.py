"""Running a command contained: its own process group, a timeout that kills the group, capped output."""

from __future__ import annotations

import os
import resource
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class RunResult:
    returncode: int | None
    timed_out: bool
    output: str
    duration_s: float


def run_contained(cmd: list[str], timeout_s: float, cwd: Path | None = None, env: dict | None = None,
                  max_output: int = 256 * 1024) -> RunResult:
    """Runs cmd in its own process group; kills the whole group on timeout (and any stragglers
    when it ends). Keeps the first and last max_output/2 bytes of its combined output."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            cwd=cwd, env=env, start_new_session=True)
    with _LIVE_LOCK:
        _LIVE.add(proc.pid)
    half = max_output // 2
    head = bytearray()
    tail = bytearray()
    dropped = 0
    timed_out = False
    deadline = start + timeout_s
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    fd = proc.stdout.fileno()
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            if not sel.select(timeout=min(left, 1.0)):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            if len(head) < half:
                take = half - len(head)
                head += chunk[:take]
                chunk = chunk[take:]
            if chunk:
                tail += chunk
                if len(tail) > half:
                    dropped += len(tail) - half
                    del tail[:len(tail) - half]
        if not timed_out:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
    finally:
        _kill_group(proc.pid)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        with _LIVE_LOCK:
            _LIVE.discard(proc.pid)
        sel.close()
        proc.stdout.close()
    text = head.decode("utf-8", "replace")
    if dropped:
        text += f"\n[... {dropped} bytes of output dropped by the grader ...]\n"
    text += tail.decode("utf-8", "replace")
    return RunResult(None if timed_out else proc.returncode, timed_out, text, time.monotonic() - start)


# Process groups still running, killed if the grader itself is interrupted (they run in their
# own sessions, so Ctrl-C does not reach them).
_LIVE: set[int] = set()
_LIVE_LOCK = threading.Lock()


def kill_all_live() -> None:
    with _LIVE_LOCK:
        for pgid in list(_LIVE):
            _kill_group(pgid)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def limit_children(memory_mib: int) -> None:
    """Limits inherited by the test processes (set once, after the builds): no core files, and
    an address-space cap so a runaway allocation fails in the test instead of swapping."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_mib > 0:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        want = memory_mib * 1024 * 1024
        if hard != resource.RLIM_INFINITY:
            want = min(want, hard)
        # The grader's own threads live under the same cap; it needs far less.
        resource.setrlimit(resource.RLIMIT_AS, (want, hard))
