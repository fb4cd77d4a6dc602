"""`inferlab serve` (chapter 09) through OpenAI's own Python client (PyPI `openai`): the API as
an application written for OpenAI meets it — for whoever changes the server's routes, request
parsing or responses. One server (SmolLM2, --max-seqs 32) for the whole file, started on a free
loopback port and stopped with SIGTERM (exit status 0). The client never retries (max_retries=0).

  - /v1/models lists the model under the name it was served with;
  - completions and chat, greedy: the streamed text equals the non-streamed one, the usage chunk
    equals the non-streamed usage; prompt_tokens equals `inferlab tokenize`'s count;
    completion_tokens equals the tokens `inferlab generate --ids` makes for the same prompt, whose
    text is the completion; finish_reason "length" when max_tokens cuts;
  - bad input: openai.BadRequestError (400) naming the parameter, an unknown model NotFoundError (404);
  - 32 concurrent streams with distinct prompts each equal the same request sent alone;
  - a seed reproduces a sampled answer; logprobs (completions' and chat's shapes, greedy: each token
    the most likely); n choices (the first equal to the same request with n = 1, streamed = not);
  - StopStrings (the server's `stop`): the text is the unstopped greedy text cut before the stop
    string's first occurrence — chosen across a token boundary —, never containing it, finish_reason
    "stop", streamed or not, one string or a list; more than 4 strings or an empty one is a 400.

Run: build/venv/bin/python tests/09-serving/test_openai_client.py   (ctest: ServePython.OpenAiClient, label ch09)
"""

import math
import subprocess
import sys
import unittest
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_fixture import EXE, GGUF, require_installed, start_server  # noqa: E402

SERVER = None
CLIENT = None
MODEL = GGUF  # the server's model id is --model as given


def setUpModule():
    global SERVER, CLIENT
    require_installed("openai")
    from openai import OpenAI
    SERVER = start_server("--max-seqs", "32")
    CLIENT = OpenAI(base_url=SERVER.url + "/v1", api_key="none", max_retries=0, timeout=120)


def tearDownModule():
    if CLIENT is not None:
        CLIENT.close()
    if SERVER is not None:
        code = SERVER.stop()
        if code != 0:
            raise AssertionError(f"inferlab serve exited {code} on SIGTERM, not 0:\n{SERVER.output()[-3000:]}")


def inferlab(*args):
    run = subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        raise AssertionError(f"inferlab {' '.join(args)} failed ({run.returncode}): {run.stderr}")
    return run.stdout


def token_count(text):
    """`inferlab tokenize`'s number of tokens for @p text (special tokens parsed, as the server does)."""
    return len(inferlab("tokenize", "--model", GGUF, "--text", text).split())


def completion(prompt, max_tokens, stream=False, **extra):
    """(text, finish_reason, usage, chunk texts) of a greedy completion."""
    if not stream:
        r = CLIENT.completions.create(model=MODEL, prompt=prompt, max_tokens=max_tokens, temperature=0, **extra)
        return r.choices[0].text, r.choices[0].finish_reason, r.usage, None
    texts, finish, usage = [], None, None
    for chunk in CLIENT.completions.create(model=MODEL, prompt=prompt, max_tokens=max_tokens, temperature=0,
                                           stream=True, stream_options={"include_usage": True}, **extra):
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.text:
                texts.append(choice.text)
            if choice.finish_reason:
                finish = choice.finish_reason
    return "".join(texts), finish, usage, texts


def chat(messages, max_tokens, stream=False, **extra):
    """(text, finish_reason, usage, chunk texts) of a greedy chat completion."""
    if not stream:
        r = CLIENT.chat.completions.create(model=MODEL, messages=messages, max_tokens=max_tokens, temperature=0,
                                           **extra)
        return r.choices[0].message.content, r.choices[0].finish_reason, r.usage, None
    texts, finish, usage = [], None, None
    for chunk in CLIENT.chat.completions.create(model=MODEL, messages=messages, max_tokens=max_tokens, temperature=0,
                                                stream=True, stream_options={"include_usage": True}, **extra):
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                texts.append(choice.delta.content)
            if choice.finish_reason:
                finish = choice.finish_reason
    return "".join(texts), finish, usage, texts


def usage_tuple(u):
    return (u.prompt_tokens, u.completion_tokens, u.total_tokens)


STORY = "Once upon a time"
SYSTEM = "You are a terse assistant."
QUESTION = "What is the capital of France?"
MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
# SmolLM2's chat template (ChatML) for MESSAGES, with the assistant's turn opened.
CHATML = (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{QUESTION}<|im_end|>\n"
          "<|im_start|>assistant\n")


class OpenAiClient(unittest.TestCase):
    def test_models_lists_the_served_model(self):
        self.assertIn(MODEL, [m.id for m in CLIENT.models.list().data])

    def test_completion_streamed_equals_non_streamed(self):
        text, finish, usage, _ = completion(STORY, 20)
        streamed, streamed_finish, streamed_usage, chunks = completion(STORY, 20, stream=True)
        self.assertEqual(streamed, text, "the streamed deltas do not concatenate to the non-streamed text")
        self.assertEqual((finish, streamed_finish), ("length", "length"))
        self.assertIsNotNone(streamed_usage, "no usage chunk despite stream_options.include_usage")
        self.assertEqual(usage_tuple(streamed_usage), usage_tuple(usage))
        self.assertEqual(usage.prompt_tokens, token_count(STORY), "prompt_tokens is not `inferlab tokenize`'s count")
        self.assertEqual(usage.completion_tokens, 20)
        self.assertEqual(usage.total_tokens, usage.prompt_tokens + 20)
        self.assertGreater(len(chunks), 1, "the answer came in one chunk: not streamed")

    def test_completion_logprobs(self):
        # Greedy, so each token is the most likely at its position: its logprob is the largest of its
        # alternatives; the tokens spell the text; the offsets are where each token's text starts.
        r = CLIENT.completions.create(model=MODEL, prompt=STORY, max_tokens=12, temperature=0, logprobs=3)
        lp = r.choices[0].logprobs
        self.assertEqual("".join(lp.tokens), r.choices[0].text)
        self.assertEqual(len(lp.tokens), 12)
        offset = 0
        for token, logprob, top, at in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, lp.text_offset):
            self.assertLessEqual(logprob, 0.0)
            self.assertEqual(len(top), 3)
            self.assertEqual(max(top, key=top.get), token)
            self.assertAlmostEqual(top[token], logprob, places=5)
            self.assertLessEqual(sum(math.exp(v) for v in top.values()), 1.0 + 1e-5)
            self.assertEqual(at, offset)
            offset += len(token.encode())
        plain = CLIENT.completions.create(model=MODEL, prompt=STORY, max_tokens=12, temperature=0)
        self.assertIsNone(plain.choices[0].logprobs)
        self.assertEqual(plain.choices[0].text, r.choices[0].text, "asking for logprobs changed the tokens")

    def test_chat_logprobs_streamed_equal_non_streamed(self):
        r = CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=16, temperature=0,
                                           logprobs=True, top_logprobs=2)
        content = r.choices[0].logprobs.content
        self.assertEqual("".join(t.token for t in content), r.choices[0].message.content)
        for t in content:
            self.assertEqual(bytes(t.bytes).decode(errors="replace"), t.token)
            self.assertEqual(len(t.top_logprobs), 2)
            self.assertEqual(t.top_logprobs[0].token, t.token, "greedy: the token is the most likely")
            self.assertGreaterEqual(t.top_logprobs[0].logprob, t.top_logprobs[1].logprob)
        streamed = []
        for chunk in CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=16, temperature=0,
                                                    logprobs=True, top_logprobs=2, stream=True):
            for choice in chunk.choices:
                if choice.logprobs is not None and choice.logprobs.content:
                    streamed += [(t.token, round(t.logprob, 5)) for t in choice.logprobs.content]
        self.assertEqual(streamed, [(t.token, round(t.logprob, 5)) for t in content])
        import openai
        with self.assertRaises(openai.BadRequestError) as refused:
            CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=2, top_logprobs=2)
        self.assertIn("top_logprobs", str(refused.exception))

    def test_n_choices_share_a_prompt_and_sample_apart(self):
        # n = 3 sampled: choice 0 is the same request with n = 1 (its seed), the others differ from
        # it; streamed, each index's chunks spell the same text; greedy choices all equal greedy.
        r = CLIENT.completions.create(model=MODEL, prompt=STORY, max_tokens=16, temperature=1.0, seed=77, n=3)
        self.assertEqual(sorted(c.index for c in r.choices), [0, 1, 2])
        texts = {c.index: c.text for c in r.choices}
        one = CLIENT.completions.create(model=MODEL, prompt=STORY, max_tokens=16, temperature=1.0, seed=77)
        self.assertEqual(texts[0], one.choices[0].text)
        self.assertEqual(len(set(texts.values())), 3, texts)
        self.assertEqual(r.usage.completion_tokens, 3 * 16)
        self.assertEqual(r.usage.prompt_tokens, one.usage.prompt_tokens, "the prompt is counted once")
        streamed = {}
        for chunk in CLIENT.completions.create(model=MODEL, prompt=STORY, max_tokens=16, temperature=1.0, seed=77,
                                               n=3, stream=True):
            for choice in chunk.choices:
                streamed[choice.index] = streamed.get(choice.index, "") + (choice.text or "")
        self.assertEqual(streamed, texts)
        greedy = chat(MESSAGES, 12)[0]
        both = CLIENT.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=12, temperature=0, n=2)
        self.assertEqual([c.message.content for c in both.choices], [greedy, greedy])
        import openai
        with self.assertRaises(openai.BadRequestError) as refused:
            CLIENT.completions.create(model=MODEL, prompt=STORY, max_tokens=2, n=33)  # --max-seqs 32
        self.assertIn("'n'", str(refused.exception))

    def test_a_seed_makes_sampling_reproducible(self):
        # A sampled request with a seed draws from its own random stream (the engine's per-request
        # generator): the same seed gives the same text, alone or beside other requests.
        def sampled(seed):
            return CLIENT.completions.create(model=MODEL, prompt=STORY, max_tokens=24, temperature=1.0,
                                             seed=seed).choices[0].text
        first = sampled(1234)
        with ThreadPoolExecutor(4) as pool:
            crowd = list(pool.map(sampled, [1234, 99, 1234, 7]))
        self.assertEqual([crowd[0], crowd[2]], [first, first], "the same seed gave another text")
        self.assertEqual(len({first, crowd[1], crowd[3]}), 3, "different seeds gave the same text: not sampling?")

    def test_completion_tokens_are_the_generated_tokens(self):
        # `generate --ids` prints the greedy ids of the same prompt (the engine alone, no HTTP); the
        # server's completion_tokens counts them and its text is their decoding.
        text, finish, usage, _ = completion(STORY, 12)
        ids = inferlab("generate", "--model", GGUF, "--prompt", STORY, "--max-new-tokens", "12", "--ids").split()
        self.assertEqual(usage.completion_tokens, len(ids))
        self.assertEqual(text, inferlab("tokenize", "--model", GGUF, "--decode", " ".join(ids))[:-1])

    def test_chat_streamed_equals_non_streamed(self):
        text, finish, usage, _ = chat(MESSAGES, 48)
        streamed, streamed_finish, streamed_usage, _ = chat(MESSAGES, 48, stream=True)
        self.assertEqual(streamed, text)
        self.assertEqual(streamed_finish, finish)
        self.assertIn(finish, ("stop", "length"))
        self.assertIsNotNone(streamed_usage)
        self.assertEqual(usage_tuple(streamed_usage), usage_tuple(usage))
        self.assertEqual(usage.prompt_tokens, token_count(CHATML), "prompt_tokens is not the ChatML's token count")
        self.assertNotIn("<|im_end|>", text, "the end-of-generation token is shown")
        if finish == "length":
            self.assertEqual(usage.completion_tokens, 48)
        else:
            self.assertLess(usage.completion_tokens, 48)

    def test_finish_reason_length_when_max_tokens_cuts(self):
        for stream in (False, True):
            _, finish, usage, _ = completion(STORY, 3, stream=stream)
            self.assertEqual((finish, usage.completion_tokens), ("length", 3), f"stream={stream}")
            _, finish, usage, _ = chat(MESSAGES, 2, stream=stream)
            self.assertEqual((finish, usage.completion_tokens), ("length", 2), f"chat, stream={stream}")

    def test_bad_request_names_the_parameter(self):
        import openai
        cases = [(lambda: CLIENT.completions.create(model=MODEL, prompt=STORY, max_tokens=0), "max_tokens"),
                 (lambda: CLIENT.completions.create(model=MODEL, prompt=STORY, max_tokens=4, temperature=-1),
                  "temperature"),
                 (lambda: CLIENT.completions.create(model=MODEL, prompt=STORY, max_tokens=4, top_p=0), "top_p"),
                 (lambda: CLIENT.chat.completions.create(model=MODEL, messages=[], max_tokens=4), "messages"),
                 (lambda: CLIENT.chat.completions.create(model=MODEL, messages=[{"role": "robot", "content": "hi"}],
                                                         max_tokens=4), "messages[0].role"),
                 (lambda: CLIENT.completions.create(model=MODEL, prompt=STORY, max_tokens=100000), "max_tokens")]
        for call, param in cases:
            with self.assertRaises(openai.BadRequestError, msg=param) as caught:
                call()
            e = caught.exception
            self.assertEqual(e.status_code, 400, param)
            self.assertEqual(e.param, param, f"the error object names {e.param!r}: {e.body}")
            self.assertEqual(e.type, "invalid_request_error", e.body)
            self.assertTrue(e.message, e.body)

    def test_unknown_model_is_not_found(self):
        import openai
        for call in (lambda: CLIENT.completions.create(model="gpt-4o", prompt=STORY, max_tokens=4),
                     lambda: CLIENT.chat.completions.create(model="gpt-4o", messages=MESSAGES, max_tokens=4,
                                                            stream=True)):
            with self.assertRaises(openai.NotFoundError) as caught:
                call()
            self.assertEqual(caught.exception.status_code, 404)
            self.assertEqual(caught.exception.param, "model", caught.exception.body)

    def test_32_concurrent_streams_each_equal_the_request_alone(self):
        prompts = [f"Fact number {i} about the sea:" for i in range(32)]
        alone = [completion(p, 8)[0] for p in prompts]  # one at a time, not streamed
        with ThreadPoolExecutor(len(prompts)) as pool:
            together = list(pool.map(lambda p: completion(p, 8, stream=True), prompts))
        for i, (text, finish, usage, _) in enumerate(together):
            self.assertEqual((finish, usage.completion_tokens if usage else None), ("length", 8), prompts[i])
            self.assertEqual(text, alone[i], f"{prompts[i]!r}: batched with 31 others it differs from alone")
        self.assertGreater(len(set(alone)), 1, "every prompt gave the same text: the prompts were not used")


class StopStrings(unittest.TestCase):
    """The server's `stop` (a string or up to 4 non-empty strings, matched on the detokenized text
    across token boundaries, never shown; finish_reason "stop"; the text before the first match)."""

    @classmethod
    def setUpClass(cls):
        cls.full, _, _, chunks = completion(STORY, 40, stream=True)
        cls.stop = cls.stop_across_a_boundary(cls.full, chunks)
        cls.expected = cls.full[:cls.full.index(cls.stop)]

    @staticmethod
    def stop_across_a_boundary(full, chunks):
        """Three characters of @p full across a boundary between two streamed chunks (a token
        boundary), whose first occurrence is that one; the boundaries nearest the middle first."""
        boundaries, at = [], 0
        for c in chunks[:-1]:
            at += len(c)
            boundaries.append(at)
        for b in sorted(boundaries, key=lambda b: abs(b - len(full) // 2)):
            for start in (b - 1, b - 2):
                s = full[start:start + 3]
                if start > 0 and len(s) == 3 and s.strip() == s and full.index(s) == start:
                    return s
        raise AssertionError(f"no 3-character stop string across a token boundary in {full!r}")

    def check(self, text, finish, what):
        self.assertNotIn(self.stop, text, f"{what}: the stop string is shown")
        self.assertEqual(text, self.expected, f"{what}: not the unstopped text cut before {self.stop!r}")
        self.assertEqual(finish, "stop", what)

    def test_a_stop_string_cuts_the_text(self):
        text, finish, _, _ = completion(STORY, 40, stop=self.stop)
        self.check(text, finish, f"stop={self.stop!r}")

    def test_a_stop_string_cuts_the_stream(self):
        text, finish, usage, _ = completion(STORY, 40, stream=True, stop=self.stop)
        self.check(text, finish, f"streamed, stop={self.stop!r}")
        self.assertLess(usage.completion_tokens, 40)

    def test_the_first_of_several_stop_strings(self):
        for stream in (False, True):
            text, finish, _, _ = completion(STORY, 40, stream=stream, stop=["\u2603never", self.stop, "zq!"])
            self.check(text, finish, f"a list, stream={stream}")

    def test_a_stop_string_never_generated_changes_nothing(self):
        text, finish, _, _ = completion(STORY, 40, stop=["\u2603never"])
        self.assertEqual((text, finish), (self.full, "length"))

    def test_stop_strings_in_chat(self):
        reply, _, _, _ = chat(MESSAGES, 24)
        if len(reply) < 4:
            self.skipTest(f"the greedy reply {reply!r} is too short to cut")
        stop = reply[len(reply) // 2:len(reply) // 2 + 2]
        for stream in (False, True):
            text, finish, _, _ = chat(MESSAGES, 24, stream=stream, stop=[stop])
            self.assertEqual((text, finish), (reply[:reply.index(stop)], "stop"), f"chat, stream={stream}")

    def test_bad_stop_lists_are_refused(self):
        import openai
        for stop in (["a", "b", "c", "d", "e"], [""], ""):
            with self.assertRaises(openai.BadRequestError, msg=repr(stop)) as caught:
                CLIENT.completions.create(model=MODEL, prompt=STORY, max_tokens=4, stop=stop)
            self.assertEqual(caught.exception.param, "stop", caught.exception.body)


if __name__ == "__main__":
    unittest.main()
