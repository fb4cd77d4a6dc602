"""The workload of `./inferlab bench serve` (tools/bench_serve.py, chapter 09): what each request
sends and when. Chapter 06's request lengths (analysis/kv_capacity.cpp's sample_requests,
reproduced bit for bit: the same 64-bit Mersenne Twister, the same inverse-CDF geometric draws,
the same redraws and cuts), random prompt ids, Poisson arrivals, and request traces in the
format of runtime/engine/trace.h (read, and written for `inferlab generate --trace`). Pure
Python, standard library only; unit-tested in tests/09-serving/test_bench_serve.py.
"""

import json
import math
import random
from dataclasses import dataclass, field

# ---------------------------------------------------------------------------------------------
# Request lengths: chapter 06's sampler (analysis/kv_capacity.cpp), bit for bit.
# ---------------------------------------------------------------------------------------------

# The means of the vLLM paper's Fig. 11 legend (Kwon et al., SOSP 2023, arXiv:2309.06180).
LENGTH_DISTRIBUTIONS = {
    "sharegpt": {"name": "ShareGPT", "mean_prompt": 161.31, "mean_output": 337.99},
    "alpaca": {"name": "Alpaca", "mean_prompt": 19.31, "mean_output": 58.45},
}

_MASK64 = (1 << 64) - 1


class Mt19937_64:
    """The 64-bit Mersenne Twister, as C++'s std::mt19937_64 (the raw 64-bit outputs, no
    distribution): seeded as std::mt19937_64(seed), next() is its operator()."""

    _N, _M = 312, 156
    _MATRIX_A = 0xB5026F5AA96619E9
    _UPPER, _LOWER = 0xFFFFFFFF80000000, 0x7FFFFFFF

    def __init__(self, seed):
        state = [seed & _MASK64]
        for i in range(1, self._N):
            previous = state[-1]
            state.append((6364136223846793005 * (previous ^ (previous >> 62)) + i) & _MASK64)
        self._state = state
        self._index = self._N

    def _twist(self):
        state, n, m = self._state, self._N, self._M
        for i in range(n):
            x = (state[i] & self._UPPER) | (state[(i + 1) % n] & self._LOWER)
            shifted = x >> 1
            if x & 1:
                shifted ^= self._MATRIX_A
            state[i] = state[(i + m) % n] ^ shifted
        self._index = 0

    def next(self):
        if self._index >= self._N:
            self._twist()
        x = self._state[self._index]
        self._index += 1
        x ^= (x >> 29) & 0x5555555555555555
        x ^= (x << 17) & 0x71D67FFFEDA60000
        x ^= (x << 37) & 0xFFF7EEE000000000
        x ^= x >> 43
        return x & _MASK64


def uniform_open_closed(engine):
    """A uniform double in (0, 1] from one raw 64-bit output: (its top 53 bits + 1) · 2^-53."""
    return float((engine.next() >> 11) + 1) * 2.0 ** -53


def geometric_length(engine, mean):
    """A geometric length on {1, 2, …} with @p mean (p = 1 / mean) by inverting its CDF:
    1 + ⌊ln u / ln(1 − p)⌋, u uniform in (0, 1]; a mean ≤ 1 gives 1 without drawing."""
    if mean <= 1.0:
        return 1
    u = uniform_open_closed(engine)
    k = math.floor(math.log(u) / math.log1p(-1.0 / mean))
    return 1 + int(min(k, 1e15))


def sample_lengths(lengths, count, max_seq_len, seed, max_prompt=None, max_output=None):
    """@p count (prompt, output) pairs drawn as chapter 06's sample_requests(): for each request a
    prompt, drawn again while it is ≥ @p max_seq_len, then an output cut at max_seq_len − prompt —
    every total in [2, max_seq_len]. Then, only here, each is cut at @p max_prompt / @p max_output
    when given (small CI runs), which keeps the draws, so the uncut lengths stay the C++ ones."""
    if lengths not in LENGTH_DISTRIBUTIONS:
        raise ValueError(f"--lengths {lengths}: unknown (known: {', '.join(LENGTH_DISTRIBUTIONS)})")
    if count < 1:
        raise ValueError(f"count = {count}: must be >= 1")
    if max_seq_len < 2:
        raise ValueError(f"max_seq_len = {max_seq_len}: must be >= 2 (one prompt and one output token)")
    d = LENGTH_DISTRIBUTIONS[lengths]
    engine = Mt19937_64(seed)
    out = []
    for _ in range(count):
        prompt = geometric_length(engine, d["mean_prompt"])
        while prompt >= max_seq_len:  # a server rejects prompts with no room to generate
            prompt = geometric_length(engine, d["mean_prompt"])
        output = min(geometric_length(engine, d["mean_output"]), max_seq_len - prompt)
        if max_prompt is not None:
            prompt = min(prompt, max_prompt)
        if max_output is not None:
            output = min(output, max_output)
        out.append((prompt, output))
    return out


# ---------------------------------------------------------------------------------------------
# The workload: what each request sends, and when.
# ---------------------------------------------------------------------------------------------

# SmolLM2's vocabulary: ids 0–16 are special tokens (<|endoftext|>, <|im_start|>, <|im_end|>, …);
# random prompts draw from the ordinary ones.
DEFAULT_PROMPT_IDS = (17, 49152)

# Chat prompts are words (no tokenizer here): common English words, one BPE token each in most
# vocabularies with their leading space, so a prompt of k words is about k tokens plus the template.
CHAT_WORDS = ("the of and to in is that it for on with as was at by be this from or an are not have but had they "
              "his her she he you we all can one will there their what so up out if about who get which go me when "
              "make like time no just him know take people into year your good some could them see other than then "
              "now look only come its over think also back after use two how our work first well way even new want "
              "because any these give day most us").split()


@dataclass
class BenchRequest:
    """One request of the workload."""
    index: int                   # its place in the workload (the trace's id)
    prompt_len: int              # prompt tokens asked for (chat: words)
    max_tokens: int              # tokens to generate (max_tokens / max_new_tokens)
    prompt_ids: list = None      # completions: the prompt's token ids
    arrival: float = 0.0         # planned send time, seconds after the start (rate and trace modes)
    sampling: dict = field(default_factory=dict)  # temperature, top_p, seed from a trace


def random_prompt_ids(length, rng, id_range=DEFAULT_PROMPT_IDS):
    return [rng.randrange(id_range[0], id_range[1]) for _ in range(length)]


def chat_text(length, rng):
    return " ".join(rng.choice(CHAT_WORDS) for _ in range(length))


def poisson_arrivals(count, rate, seed):
    """Send times of a Poisson process of @p rate requests/s: the first at 0, then exponential gaps
    of mean 1 / rate (vLLM's --request-rate with burstiness 1); all 0 for rate = inf."""
    if rate <= 0:
        raise ValueError(f"--rate {rate}: must be > 0 (or inf)")
    if math.isinf(rate):
        return [0.0] * count
    rng = random.Random(seed)
    times, t = [], 0.0
    for i in range(count):
        if i:
            t += rng.expovariate(rate)
        times.append(t)
    return times


def workload_from_lengths(pairs, seed, salt=0, id_range=DEFAULT_PROMPT_IDS):
    """Requests of the given (prompt, output) lengths, prompts of random ids from @p seed and
    @p salt (a sweep's rows use fresh prompts of the same lengths: no prefix-cache hits between
    rows)."""
    rng = random.Random(seed * 1_000_003 + salt)
    return [BenchRequest(index=i, prompt_len=p, max_tokens=o, prompt_ids=random_prompt_ids(p, rng, id_range))
            for i, (p, o) in enumerate(pairs)]


TRACE_KEYS = {"id", "arrival", "prompt_ids", "prompt_len", "max_new_tokens", "temperature", "top_p", "seed", "stop_ids"}


def read_trace(lines, seed, id_range=DEFAULT_PROMPT_IDS):
    """Requests of a JSON-lines trace (runtime/engine/trace.h): per line arrival (s, default 0),
    prompt_ids or prompt_len (random ids from @p seed), max_new_tokens (default 16) and optionally
    temperature, top_p, seed. Blank and '#' lines are skipped. stop_ids are refused: the API has no
    stop ids (they would change how many tokens a request makes)."""
    rng = random.Random(seed)
    out = []
    for number, text in enumerate(lines, 1):
        text = text.strip()
        if not text or text.startswith("#"):
            continue
        try:
            fields = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"trace line {number}: not JSON ({e})") from None
        if not isinstance(fields, dict):
            raise ValueError(f"trace line {number}: must be a JSON object, not {text[:60]}")
        unknown = set(fields) - TRACE_KEYS
        if unknown:
            raise ValueError(f"trace line {number}: unknown key {sorted(unknown)[0]!r} (known: {', '.join(sorted(TRACE_KEYS))})")
        if "stop_ids" in fields:
            raise ValueError(f"trace line {number}: stop_ids cannot be sent to an OpenAI API server")
        if "prompt_ids" in fields:
            ids = fields["prompt_ids"]
            if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and i >= 0 for i in ids):
                raise ValueError(f"trace line {number}: prompt_ids must be a non-empty array of token ids")
        elif isinstance(fields.get("prompt_len"), int) and fields["prompt_len"] >= 1:
            ids = random_prompt_ids(fields["prompt_len"], rng, id_range)
        else:
            raise ValueError(f"trace line {number}: needs prompt_ids or prompt_len >= 1")
        max_tokens = fields.get("max_new_tokens", 16)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"trace line {number}: max_new_tokens must be an integer >= 1")
        sampling = {k: fields[k] for k in ("temperature", "top_p", "seed") if k in fields}
        out.append(BenchRequest(index=len(out), prompt_len=len(ids), max_tokens=max_tokens, prompt_ids=ids,
                                arrival=float(fields.get("arrival", 0.0)), sampling=sampling))
    if not out:
        raise ValueError("the trace holds no requests")
    return out


def trace_lines(requests, arrivals=None):
    """The requests as trace.h's JSON lines (prompt_ids written out, so a replay sends the same
    tokens); arrivals default to each request's planned one."""
    lines = []
    for i, r in enumerate(requests):
        line = {"id": r.index, "arrival": round(arrivals[i] if arrivals is not None else r.arrival, 6),
                "prompt_ids": r.prompt_ids, "max_new_tokens": r.max_tokens}
        line.update(r.sampling)
        lines.append(json.dumps(line, separators=(",", ":")))
    return lines


def request_body(request, endpoint, model, ignore_eos=True, chat_rng=None):
    """The JSON body of @p request: streamed with the usage chunk, greedy unless a trace says
    otherwise, exactly max_tokens tokens (ignore_eos)."""
    body = {"model": model, "max_tokens": request.max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    if ignore_eos:
        body["ignore_eos"] = True
    body.update(request.sampling)
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": chat_text(request.prompt_len, chat_rng or random.Random(request.index))}]
    else:
        body["prompt"] = request.prompt_ids
    return body
