"""`inferlab serve --speculative ngram` (chapter 12) through OpenAI's own Python client (PyPI
`openai`): speculation changes the speed, never the answer, and the API is the one chapter 09's
server speaks. Two servers on free loopback ports for the whole file (tests/09-serving/
serve_fixture.py), both SmolLM2: a plain one and one with prompt lookup, γ = 4; each stopped with
SIGTERM (exit status 0). The client never retries.

  - Greedy (temperature 0) answers to input-grounded prompts — "repeat exactly" a sentence of
    chapter 08's Alice text in chat, and a completion that copies a passage — are the plain
    server's, text and usage, streamed and not;
  - n = 2 greedy choices are both the plain greedy answer; completions' logprobs name the plain
    server's tokens, each the most likely, with the plain server's log-probabilities bit for bit;
  - /metrics: the four spec-decode families of vLLM (drafts, draft tokens, accepted tokens,
    accepted per position) as counters; with speculation drafts > 0, 0 < accepted ≤ draft tokens,
    the per-position counts never grow with the position and sum to the accepted tokens; the
    plain server's counters stay 0.

About 20-40 s on the lab's 2-core machine (max_tokens ≤ 40).

Run: build/venv/bin/python tests/12-speculative-decoding/test_serve_speculative.py
     (ctest: ServePython.Speculative, label ch12)
"""

import sys
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "09-serving"))
from serve_fixture import GGUF, require_installed, start_server  # noqa: E402

MODEL = GGUF  # the servers' model id is --model as given
PLAIN = SPEC = None  # (server, client) of each
GAMMA = 4
STARTED = time.monotonic()

SENTENCE = ("There was nothing so very remarkable in that; nor did Alice think it so very much out of the way "
            "to hear the Rabbit say to itself, \"Oh dear! Oh dear! I shall be late!\"")
REPEAT = [{"role": "user", "content": f"Repeat exactly: {SENTENCE}"}]
PASSAGE = ("Alice was beginning to get very tired of sitting by her sister on the bank, and of having nothing to "
           "do: once or twice she had peeped into the book her sister was reading, but it had no pictures or "
           "conversations in it, \"and what is the use of a book,\" thought Alice \"without pictures or "
           "conversations?\"")
COPY = f"Text: {PASSAGE}\n\nThe same text, copied word for word:\n"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]  # free chat: few guesses accepted
SPEC_FAMILIES = ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                 "vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_per_pos")


def setUpModule():
    global PLAIN, SPEC
    require_installed("openai", "prometheus_client")
    from openai import OpenAI

    def serve(*args):
        server = start_server("--max-seqs", "8", *args)
        return server, OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)
    PLAIN = serve()
    SPEC = serve("--speculative", "ngram", "--num-speculative-tokens", str(GAMMA))


def tearDownModule():
    failures = []
    for pair in (PLAIN, SPEC):
        if pair is None:
            continue
        server, client = pair
        client.close()
        code = server.stop()
        if code != 0:
            failures.append(f"`{' '.join(server.args)}` exited {code} on SIGTERM, not 0:\n{server.output()[-3000:]}")
    print(f"test_serve_speculative: {time.monotonic() - STARTED:.1f} s", file=sys.stderr)
    if failures:
        raise AssertionError("\n".join(failures))


def chat(client, messages, max_tokens, stream=False, **extra):
    """(text, finish_reason, (prompt, completion, total tokens)) of a greedy chat completion."""
    if not stream:
        r = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=max_tokens, temperature=0,
                                           **extra)
        return r.choices[0].message.content, r.choices[0].finish_reason, usage_tuple(r.usage)
    texts, finish, usage = [], None, None
    for chunk in client.chat.completions.create(model=MODEL, messages=messages, max_tokens=max_tokens, temperature=0,
                                                stream=True, stream_options={"include_usage": True}, **extra):
        usage = chunk.usage or usage
        for choice in chunk.choices:
            texts.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    return "".join(texts), finish, usage_tuple(usage)


def completion(client, prompt, max_tokens, stream=False, **extra):
    """(text, finish_reason, (prompt, completion, total tokens)) of a greedy completion."""
    if not stream:
        r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=max_tokens, temperature=0, **extra)
        return r.choices[0].text, r.choices[0].finish_reason, usage_tuple(r.usage)
    texts, finish, usage = [], None, None
    for chunk in client.completions.create(model=MODEL, prompt=prompt, max_tokens=max_tokens, temperature=0,
                                           stream=True, stream_options={"include_usage": True}, **extra):
        usage = chunk.usage or usage
        for choice in chunk.choices:
            texts.append(choice.text or "")
            finish = choice.finish_reason or finish
    return "".join(texts), finish, usage_tuple(usage)


def usage_tuple(u):
    return None if u is None else (u.prompt_tokens, u.completion_tokens, u.total_tokens)


def spec_metrics(server):
    """{family: value} of the three spec-decode counters and {position: value} of the fourth, from
    GET /metrics parsed by prometheus_client; every vllm:spec_decode family must be a counter."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families
    body = httpx.get(server.url + "/metrics", timeout=30).raise_for_status().text
    totals, per_position, types = {}, {}, {}
    for family in text_string_to_metric_families(body):
        if not family.name.startswith("vllm:spec_decode"):
            continue
        types[family.name] = family.type
        for s in family.samples:
            if s.labels.get("model_name") != MODEL:
                raise AssertionError(f"{s.name}{s.labels}: model_name is not --model")
            if family.name.endswith("_per_pos"):
                per_position[int(s.labels["position"])] = s.value
            else:
                totals[family.name] = s.value
    return totals, per_position, types


class SpeculativeServer(unittest.TestCase):
    """The same greedy answers as the plain server, through the official client."""

    def same(self, call, what):
        plain, spec = call(PLAIN[1]), call(SPEC[1])
        self.assertEqual(spec, plain, f"{what}: the speculating server's (text, finish, usage) differ from the plain "
                                      "server's")
        return plain

    def test_chat_repeat_equals_plain(self):
        for stream in (False, True):
            text, finish, usage = self.same(lambda c: chat(c, REPEAT, 40, stream=stream), f"chat, stream={stream}")
            self.assertIn("Rabbit", text, "the model did not repeat the sentence: the prompt is not input-grounded")
            self.assertLessEqual(usage[1], 40)

    def test_completion_copy_equals_plain(self):
        for stream in (False, True):
            text, finish, usage = self.same(lambda c: completion(c, COPY, 32, stream=stream),
                                            f"completion, stream={stream}")
            self.assertEqual((finish, usage[1]), ("length", 32))

    def test_free_chat_equals_plain(self):
        self.same(lambda c: chat(c, QUESTION, 16), "a free question")

    def test_n_choices_are_the_greedy_answer(self):
        greedy, _, usage = chat(PLAIN[1], REPEAT, 24)
        for stream in (False, True):
            if not stream:
                r = SPEC[1].chat.completions.create(model=MODEL, messages=REPEAT, max_tokens=24, temperature=0, n=2)
                texts = {c.index: c.message.content for c in r.choices}
                self.assertEqual(usage_tuple(r.usage), (usage[0], 2 * usage[1], usage[0] + 2 * usage[1]),
                                 "n=2: the prompt counted once, each choice's tokens")
            else:
                texts = {}
                for chunk in SPEC[1].chat.completions.create(model=MODEL, messages=REPEAT, max_tokens=24, temperature=0,
                                                             n=2, stream=True):
                    for c in chunk.choices:
                        texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
            self.assertEqual(texts, {0: greedy, 1: greedy}, f"n=2, stream={stream}")

    def test_logprobs_are_the_plain_servers(self):
        def ask(client):
            return client.completions.create(model=MODEL, prompt=COPY, max_tokens=16, temperature=0, logprobs=2)
        plain, spec = ask(PLAIN[1]).choices[0], ask(SPEC[1]).choices[0]
        self.assertEqual(spec.text, plain.text)
        self.assertEqual(spec.logprobs.tokens, plain.logprobs.tokens)
        self.assertEqual(len(spec.logprobs.tokens), 16)
        for i, (token, top) in enumerate(zip(spec.logprobs.tokens, spec.logprobs.top_logprobs)):
            self.assertEqual(max(top, key=top.get), token, f"token {i}: greedy, yet not the most likely")
        # The verification step computes each position's logits with several query tokens of the
        # sequence in one forward, the plain server with one: the lab's kernels are batch-invariant
        # (chapter 07), so the log-probabilities are the same numbers, bit for bit.
        self.assertEqual(spec.logprobs.token_logprobs, plain.logprobs.token_logprobs)
        self.assertEqual(spec.logprobs.top_logprobs, plain.logprobs.top_logprobs)
        chat_plain = PLAIN[1].chat.completions.create(model=MODEL, messages=REPEAT, max_tokens=12, temperature=0,
                                                      logprobs=True, top_logprobs=2).choices[0].logprobs.content
        chat_spec = SPEC[1].chat.completions.create(model=MODEL, messages=REPEAT, max_tokens=12, temperature=0,
                                                    logprobs=True, top_logprobs=2).choices[0].logprobs.content
        self.assertEqual([t.token for t in chat_spec], [t.token for t in chat_plain])
        for t in chat_spec:
            self.assertEqual(t.top_logprobs[0].token, t.token, "greedy: the token is the most likely")


class SpeculativeMetrics(unittest.TestCase):
    """/metrics after at least one input-grounded answer (its own; whichever of the answers above ran
    before it are counted too)."""

    def test_spec_decode_counters(self):
        chat(SPEC[1], REPEAT, 24)
        totals, per_position, types = spec_metrics(SPEC[0])
        for family in SPEC_FAMILIES:
            self.assertEqual(types.get(family), "counter", f"{family}_total is not a counter in /metrics: {types}")
        drafts = totals["vllm:spec_decode_num_drafts"]
        draft_tokens = totals["vllm:spec_decode_num_draft_tokens"]
        accepted = totals["vllm:spec_decode_num_accepted_tokens"]
        self.assertGreater(drafts, 0, "no verification step with guesses")
        self.assertGreaterEqual(draft_tokens, drafts, "fewer guesses than steps with guesses")
        self.assertLessEqual(draft_tokens, GAMMA * drafts, f"more than γ = {GAMMA} guesses a step")
        self.assertGreater(accepted, 0, "prompt lookup on a repeated sentence had no guess accepted")
        self.assertLessEqual(accepted, draft_tokens, "more guesses accepted than made")
        self.assertEqual(sorted(per_position), list(range(len(per_position))), f"positions {sorted(per_position)}")
        self.assertLessEqual(len(per_position), GAMMA)
        counts = [per_position[i] for i in sorted(per_position)]
        self.assertEqual(counts, sorted(counts, reverse=True),
                         "a guess is accepted only after every guess before it: per position must not grow")
        self.assertEqual(sum(counts), accepted, "the per-position counts do not add up to the accepted tokens")
        plain_totals, plain_positions, plain_types = spec_metrics(PLAIN[0])
        for family in SPEC_FAMILIES[:3]:
            self.assertEqual(plain_types.get(family), "counter", f"the plain server lacks {family}_total")
            self.assertEqual(plain_totals[family], 0, f"the plain server counts {family}")
        self.assertTrue(all(v == 0 for v in plain_positions.values()), plain_positions)


if __name__ == "__main__":
    unittest.main()
