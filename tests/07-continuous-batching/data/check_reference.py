#!/usr/bin/env python3
"""Independent cross-check of the C++ float64 Llama reference (tests/support/llama_reference.*).

A second float64 implementation, in numpy, of llama2.c's run.c forward on a legacy checkpoint.
It checks two things against the C++ side:

  1. greedy generation from BOS (token 1), 256 new tokens, equals the committed ids in
     stories260K_greedy_bos_256.txt (run.c's rule: first maximum, stop before a BOS);
  2. the logits at every position of the BOS run and of a seeded random token sequence equal
     `llama_reference_ids --logits` (printed with %.17g); the largest |difference| is reported.

Not part of ctest. Run from the repository root after building llama_reference_ids:

    /usr/bin/python3 tests/07-continuous-batching/data/check_reference.py \
        [--exe build/dev/tests/llama_reference_ids] [--model models/stories260K.bin]

(/usr/bin/python3: the interpreter Debian's python3-numpy installs into.)
"""
import argparse
import pathlib
import struct
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    sys.exit("numpy is missing: apt-get install -y python3-numpy, then run with /usr/bin/python3")

ROOT = pathlib.Path(__file__).resolve().parents[3]
HERE = pathlib.Path(__file__).resolve().parent
BOS = 1
LOGIT_TOLERANCE = 1e-9  # two float64 evaluations of the same sums, in different orders


class Model:
    """A llama2.c legacy checkpoint, weights as float64 arrays (out x in)."""

    def __init__(self, path):
        data = pathlib.Path(path).read_bytes()
        (self.dim, self.hidden, self.layers, self.heads, self.kv_heads, vocab, self.seq_len) = struct.unpack(
            "<7i", data[:28])
        self.shared = vocab > 0
        self.vocab = abs(vocab)
        self.head = self.dim // self.heads
        self.kv_dim = self.kv_heads * self.head
        floats = np.frombuffer(data, dtype="<f4", offset=28).astype(np.float64)
        self._at = 0

        def next_block(*shape):
            count = int(np.prod(shape))
            block = floats[self._at:self._at + count].reshape(shape)
            self._at += count
            return block

        d, h, n, kv = self.dim, self.hidden, self.layers, self.kv_dim
        self.embedding = next_block(self.vocab, d)
        self.rms_att = next_block(n, d)
        self.wq = next_block(n, d, d)
        self.wk = next_block(n, kv, d)
        self.wv = next_block(n, kv, d)
        self.wo = next_block(n, d, d)
        self.rms_ffn = next_block(n, d)
        self.w1 = next_block(n, h, d)
        self.w2 = next_block(n, d, h)
        self.w3 = next_block(n, h, d)
        self.rms_final = next_block(d)
        self._at += self.seq_len * self.head  # the legacy RoPE tables, cos then sin
        self.classifier = self.embedding if self.shared else next_block(self.vocab, d)
        if self._at != floats.size:
            sys.exit(f"{path}: {floats.size} floats after the header, the header implies {self._at}")


def rms_norm(x, gain):
    return gain * x / np.sqrt(np.mean(x * x) + 1e-5)


def rotate(vectors, pos, head):
    """RoPE on (heads, head) rows: the pair (2i, 2i+1) turns by pos / 10000^(2i / head)."""
    angle = pos / 10000.0 ** (np.arange(0, head, 2) / head)
    cos, sin = np.cos(angle), np.sin(angle)
    even, odd = vectors[:, 0::2], vectors[:, 1::2]
    out = np.empty_like(vectors)
    out[:, 0::2] = even * cos - odd * sin
    out[:, 1::2] = even * sin + odd * cos
    return out


class Decoder:
    """One sequence with a float64 KV cache; step() feeds the next token, returns its logits."""

    def __init__(self, m):
        self.m = m
        self.keys = np.zeros((m.layers, m.seq_len, m.kv_heads, m.head))
        self.values = np.zeros_like(self.keys)
        self.pos = 0

    def step(self, token):
        m, p = self.m, self.pos
        x = m.embedding[token].copy()
        group = m.heads // m.kv_heads
        for layer in range(m.layers):
            xn = rms_norm(x, m.rms_att[layer])
            q = rotate((m.wq[layer] @ xn).reshape(m.heads, m.head), p, m.head)
            self.keys[layer, p] = rotate((m.wk[layer] @ xn).reshape(m.kv_heads, m.head), p, m.head)
            self.values[layer, p] = (m.wv[layer] @ xn).reshape(m.kv_heads, m.head)
            keys = np.repeat(self.keys[layer, :p + 1], group, axis=1)  # (t, heads, head)
            values = np.repeat(self.values[layer, :p + 1], group, axis=1)
            scores = np.einsum("hd,thd->ht", q, keys) / np.sqrt(m.head)
            weights = np.exp(scores - scores.max(axis=1, keepdims=True))
            weights /= weights.sum(axis=1, keepdims=True)
            x = x + m.wo[layer] @ np.einsum("ht,thd->hd", weights, values).reshape(-1)
            xn = rms_norm(x, m.rms_ffn[layer])
            gate = m.w1[layer] @ xn
            x = x + m.w2[layer] @ (gate / (1.0 + np.exp(-gate)) * (m.w3[layer] @ xn))
        self.pos += 1
        return m.classifier @ rms_norm(x, m.rms_final)


def greedy(m, prompt, new_tokens):
    decoder = Decoder(m)
    for token in prompt:
        logits = decoder.step(token)
    out = []
    while len(out) < new_tokens:
        nxt = int(np.argmax(logits))  # numpy's argmax: the first maximum, as run.c
        if nxt == BOS:
            break
        out.append(nxt)
        if len(out) < new_tokens:
            logits = decoder.step(nxt)
    return out


def all_logits(m, tokens):
    decoder = Decoder(m)
    return np.array([decoder.step(t) for t in tokens])


def cpp_logits(exe, model, tokens):
    text = subprocess.run([exe, "--logits", model, ",".join(map(str, tokens))], check=True,
                          capture_output=True, text=True).stdout
    return np.array([[float(v) for v in line.split()] for line in text.splitlines()])


def committed_ids():
    lines = (HERE / "stories260K_greedy_bos_256.txt").read_text().splitlines()
    return [int(v) for line in lines if not line.startswith("#") for v in line.split()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--exe", default=str(ROOT / "build/dev/tests/llama_reference_ids"))
    parser.add_argument("--model", default=str(ROOT / "models/stories260K.bin"))
    args = parser.parse_args()
    m = Model(args.model)

    ids = greedy(m, [BOS], 256)
    expected = committed_ids()
    same = ids == expected
    print(f"greedy from BOS: numpy {len(ids)} ids, committed {len(expected)}: {'identical' if same else 'DIFFERENT'}")
    print("first 20:", " ".join(map(str, ids[:20])))

    random_tokens = np.random.default_rng(20240607).integers(0, m.vocab, size=64).tolist()
    worst = 0.0
    for name, tokens in (("BOS run", [BOS] + ids[:-1]), ("random sequence", random_tokens)):
        diff = float(np.max(np.abs(all_logits(m, tokens) - cpp_logits(args.exe, args.model, tokens))))
        worst = max(worst, diff)
        print(f"logits, {name} ({len(tokens)} positions): max |numpy - C++| = {diff:.3e}")
    ok = same and worst <= LOGIT_TOLERANCE
    print("AGREE" if ok else f"DISAGREE (logit tolerance {LOGIT_TOLERANCE:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
