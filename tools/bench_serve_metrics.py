"""The measurements of `./inferlab bench serve` (tools/bench_serve.py, chapter 09): one streamed
answer read event by event into a RequestResult (StreamTally), and the statistics `vllm bench
serve` reports — percentiles (numpy's default, linear), mean, std, TPOT, SLOs and goodput, the
run's summary under vLLM's field names and its table. Pure functions, standard library only;
unit-tested against hand-computed values in tests/09-serving/test_bench_serve.py.
"""

import json
import math
from dataclasses import dataclass, field

# ---------------------------------------------------------------------------------------------
# One streamed answer, read event by event (pure: fed lines and times).
# ---------------------------------------------------------------------------------------------

@dataclass
class RequestResult:
    """What one request measured (seconds on the client's clock)."""
    index: int
    prompt_len: int
    max_tokens: int
    sent: float = 0.0                  # when it was sent, after the benchmark's start
    ttft: float = None                 # first content chunk − send
    e2el: float = None                 # end of the stream − send
    itl: list = field(default_factory=list)  # gaps between successive content chunks
    prompt_tokens: int = None          # from usage
    completion_tokens: int = None      # from usage
    finish_reason: str = None
    status: int = None                 # the HTTP status
    error: str = None                  # why it failed; None: completed

    @property
    def ok(self):
        return self.error is None


class StreamTally:
    """Reads one SSE answer (`data: {json}` lines, blank lines between events, `data: [DONE]` at
    the end) into a RequestResult, timing each content chunk. feed() raises ValueError on a
    malformed event; finish() says whether the stream was complete."""

    def __init__(self, result, send_time):
        self.result = result
        self.send_time = send_time
        self.last_content = None
        self.done = False

    def feed(self, line, now):
        if self.done:
            if line.strip():
                raise ValueError(f"data after [DONE]: {line[:80]!r}")
            return
        if not line.strip() or line.startswith(":"):
            return  # the blank line that ends an event, or an SSE comment
        if not line.startswith("data:"):
            raise ValueError(f"not an SSE data line: {line[:80]!r}")
        data = line[5:].strip()
        if data == "[DONE]":
            self.done = True
            self.result.e2el = now - self.send_time
            return
        chunk = json.loads(data)
        if "error" in chunk:
            raise ValueError(f"error event: {json.dumps(chunk['error'])[:200]}")
        if chunk.get("usage"):
            self.result.prompt_tokens = chunk["usage"].get("prompt_tokens")
            self.result.completion_tokens = chunk["usage"].get("completion_tokens")
        for choice in chunk.get("choices") or []:
            text = choice.get("text")
            if text is None:
                text = (choice.get("delta") or {}).get("content")
            if text:
                if self.last_content is None:
                    self.result.ttft = now - self.send_time
                else:
                    self.result.itl.append(now - self.last_content)
                self.last_content = now
            if choice.get("finish_reason"):
                self.result.finish_reason = choice["finish_reason"]

    def finish(self):
        """Sets the result's error if the stream was not complete; returns whether it was."""
        r = self.result
        if not self.done:
            r.error = "the stream ended before data: [DONE]"
        elif r.completion_tokens is None:
            r.error = "no usage chunk (stream_options.include_usage)"
        elif r.ttft is None and r.completion_tokens > 0:
            r.error = f"{r.completion_tokens} tokens but no content chunk"
        return r.error is None


# ---------------------------------------------------------------------------------------------
# Statistics (pure functions; tests/09-serving/test_bench_serve.py checks them by hand).
# ---------------------------------------------------------------------------------------------

def percentile(values, p):
    """The @p p-th percentile (0 ≤ p ≤ 100) of @p values as numpy.percentile's default ("linear"):
    sorted values v[0..n−1], rank h = (n − 1) · p / 100, v[⌊h⌋] + (h − ⌊h⌋) · (v[⌊h⌋+1] − v[⌊h⌋]).
    0.0 for no values (as vLLM reports an empty metric)."""
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p}: must be in [0, 100]")
    if not values:
        return 0.0
    v = sorted(values)
    h = (len(v) - 1) * p / 100.0
    lo = math.floor(h)
    if lo + 1 >= len(v):
        return float(v[-1])
    return v[lo] + (h - lo) * (v[lo + 1] - v[lo])


def mean(values):
    """The arithmetic mean; 0.0 for no values."""
    return math.fsum(values) / len(values) if values else 0.0


def std(values):
    """The population standard deviation (numpy.std's default, ddof = 0); 0.0 for no values."""
    if not values:
        return 0.0
    m = mean(values)
    return math.sqrt(math.fsum((x - m) ** 2 for x in values) / len(values))


def tpot(e2el, ttft, output_tokens):
    """Time per output token after the first: (E2EL − TTFT) / (n − 1); None when n < 2."""
    if output_tokens is None or output_tokens < 2 or e2el is None or ttft is None:
        return None
    return (e2el - ttft) / (output_tokens - 1)


def parse_slo(items):
    """`ttft:MS tpot:MS e2el:MS` (any subset) → {"ttft": seconds, …}."""
    slo = {}
    for item in items or []:
        key, sep, value = item.partition(":")
        if not sep or key not in ("ttft", "tpot", "e2el"):
            raise ValueError(f"--slo {item!r}: expected ttft:MS, tpot:MS or e2el:MS")
        try:
            ms = float(value)
        except ValueError:
            raise ValueError(f"--slo {item!r}: {value!r} is not a number of milliseconds") from None
        if not ms > 0:
            raise ValueError(f"--slo {item!r}: the bound must be > 0 ms")
        slo[key] = ms / 1000.0
    return slo


def meets_slo(result, slo):
    """Whether a completed @p result meets every bound of @p slo (seconds); a request with fewer
    than two tokens has no TPOT and meets any TPOT bound."""
    if not result.ok:
        return False
    if "ttft" in slo and (result.ttft is None or result.ttft > slo["ttft"]):
        return False
    if "e2el" in slo and (result.e2el is None or result.e2el > slo["e2el"]):
        return False
    t = tpot(result.e2el, result.ttft, result.completion_tokens)
    if "tpot" in slo and t is not None and t > slo["tpot"]:
        return False
    return True


def goodput(results, slo, duration):
    """Completed requests meeting every SLO, per second of @p duration; None without an SLO."""
    if not slo:
        return None
    return sum(meets_slo(r, slo) for r in results) / duration if duration > 0 else 0.0


PERCENTILE_METHOD = "linear interpolation between order statistics (numpy.percentile's default)"


def summarize(results, duration, slo=None):
    """The run's metrics under `vllm bench serve`'s names (times in ms): counts, throughputs
    over @p duration seconds, and mean / median / std / p99 of TTFT, TPOT, ITL and E2EL over the
    completed requests (ITL pooled over them)."""
    done = [r for r in results if r.ok]
    input_tokens = sum(r.prompt_tokens or 0 for r in done)
    output_tokens = sum(r.completion_tokens or 0 for r in done)
    per_second = (lambda x: x / duration) if duration > 0 else (lambda x: 0.0)
    samples = {
        "ttft": [r.ttft for r in done if r.ttft is not None],
        "tpot": [t for t in (tpot(r.e2el, r.ttft, r.completion_tokens) for r in done) if t is not None],
        "itl": [gap for r in done for gap in r.itl],
        "e2el": [r.e2el for r in done if r.e2el is not None],
    }
    out = {
        "completed": len(done),
        "failed": len(results) - len(done),
        "duration": duration,
        "total_input_tokens": input_tokens,
        "total_output_tokens": output_tokens,
        "request_throughput": per_second(len(done)),
        "request_goodput": goodput(results, slo or {}, duration),
        "output_throughput": per_second(output_tokens),
        "total_token_throughput": per_second(input_tokens + output_tokens),
        # with ignore_eos every completed request should make exactly max_tokens tokens
        "outputs_below_max_tokens": sum(1 for r in done if (r.completion_tokens or 0) < r.max_tokens),
    }
    for metric, values in samples.items():
        ms = [v * 1000.0 for v in values]
        out[f"mean_{metric}_ms"] = mean(ms)
        out[f"median_{metric}_ms"] = percentile(ms, 50)
        out[f"std_{metric}_ms"] = std(ms)
        out[f"p99_{metric}_ms"] = percentile(ms, 99)
    out["percentile_method"] = PERCENTILE_METHOD
    return out


def result_row(r):
    """One request's row of the JSON (times in ms)."""
    ms = (lambda x: None if x is None else round(x * 1000.0, 3))
    return {"index": r.index, "prompt_len": r.prompt_len, "max_tokens": r.max_tokens, "sent_s": round(r.sent, 6),
            "ttft_ms": ms(r.ttft), "tpot_ms": ms(tpot(r.e2el, r.ttft, r.completion_tokens)), "e2el_ms": ms(r.e2el),
            "itl_ms": [ms(g) for g in r.itl], "prompt_tokens": r.prompt_tokens,
            "completion_tokens": r.completion_tokens, "finish_reason": r.finish_reason, "status": r.status,
            "error": r.error}


def format_table(summary, title="Serving Benchmark Result"):
    """The summary as `vllm bench serve` prints it."""
    lines = [f"{' ' + title + ' ':=^50}"]
    row = lambda label, value, fmt="{:<10.2f}": lines.append(f"{label:<40}" + (fmt.format(value) if value is not None else "n/a"))
    row("Successful requests:", summary["completed"], "{:<10}")
    row("Failed requests:", summary["failed"], "{:<10}")
    row("Benchmark duration (s):", summary["duration"])
    row("Total input tokens:", summary["total_input_tokens"], "{:<10}")
    row("Total generated tokens:", summary["total_output_tokens"], "{:<10}")
    row("Request throughput (req/s):", summary["request_throughput"])
    if summary.get("request_goodput") is not None:
        row("Request goodput (req/s):", summary["request_goodput"])
    row("Output token throughput (tok/s):", summary["output_throughput"])
    row("Total Token throughput (tok/s):", summary["total_token_throughput"])
    for metric, heading in (("ttft", "Time to First Token"), ("tpot", "Time per Output Token (excl. 1st token)"),
                            ("itl", "Inter-token Latency"), ("e2el", "End-to-end Latency")):
        lines.append(f"{heading:-^50}")
        name = metric.upper()
        row(f"Mean {name} (ms):", summary[f"mean_{metric}_ms"])
        row(f"Median {name} (ms):", summary[f"median_{metric}_ms"])
        row(f"P99 {name} (ms):", summary[f"p99_{metric}_ms"])
    lines.append("=" * 50)
    return "\n".join(lines)
