#!/usr/bin/env python3
"""Independent float64 reference forward of a Llama-architecture GGUF model (chapter 08).

What it computes
----------------
The logits of a Llama model stored in a GGUF file (written for SmolLM2-135M-Instruct.Q4_1.gguf),
entirely in float64 with NumPy:

  x = token_embd[ids]
  per block:  h = RMSNorm(x) * attn_norm                       (eps from the file)
              q, k, v = h Wq^T, h Wk^T, h Wv^T
              RoPE on q and k, per head, on ADJACENT pairs (x[2i], x[2i+1]),
                  theta_i = pos * base^(-2i / n_rot)            (llama.cpp's "normal" RoPE,
                  the convention of llama GGUF files, whose converter permuted HF's q/k rows)
              grouped-query attention: query head h reads KV head h // (n_head / n_head_kv),
                  causal softmax(q k^T / sqrt(head_dim)) v
              x = x + (attn) Wo^T
              h = RMSNorm(x) * ffn_norm
              x = x + (silu(h Wgate^T) * (h Wup^T)) Wdown^T
  logits = (RMSNorm(x) * output_norm) Wout^T, Wout = output.weight, or token_embd.weight
           when the file has no output.weight (tied embeddings, as in SmolLM2).

The whole input sequence is computed in one pass (teacher forcing): logits for every position,
position p seeing tokens 0..p. Greedy continuation reuses the float64 K/V of earlier positions
(a KV cache), which gives the same numbers as recomputing the whole sequence.

The shape is read from the file's metadata ({arch}.embedding_length, .block_count,
.feed_forward_length, .attention.head_count(_kv), .rope.freq_base, .rope.dimension_count,
.attention.layer_norm_rms_epsilon, .attention.key_length when present). Every tensor is
dequantized once with `gguf.quants.dequantize` (llama.cpp's own Python reader) and held as
float64. Facts about the layout, checked on this file with gguf 0.19.0:
  * `ReaderTensor.shape` is ggml's ne, contiguous dimension first: attn_q is ne = [576, 576],
    attn_k ne = [576, 192] (in, out), token_embd ne = [576, 49152].
  * `ReaderTensor.data` of a quantized tensor is a uint8 array [rows, bytes_per_row]
    (attn_k: (192, 360) = 18 Q4_1 blocks of 20 bytes a row); of an F32 tensor, float32 [ne0].
  * `dequantize` returns float32 in NumPy (row-major) order, i.e. ne reversed: [out, in]
    (attn_k -> (192, 576), token_embd -> (49152, 576)), so y = x @ W.T.
  * Its Q4_1 arithmetic is float32 (d*q, then + m), as in ggml's dequantize_row_q4_1; Q8_0's
    d*q is exact in float32. The float32 weights are widened to float64 exactly; everything
    after that is float64.

Independence
------------
It shares nothing with the C++ engine (runtime/) but the model file: the GGUF parsing and
dequantization come from PyPI `gguf`, the tokenizer from PyPI `tokenizers` (Hugging Face), and
the forward is written here from the architecture's definition (no llama.cpp, no transformers).

Tokenizer
---------
`--text` builds a Hugging Face `tokenizers` BPE tokenizer from the file's
tokenizer.ggml.tokens / .merges (byte-level, no prefix space, no BOS since add_bos_token is
false), with control tokens (token_type 3/4, e.g. <|im_start|>) registered as special tokens so
that they are cut out of the text first. The pre-tokenizer for `pre = smollm` is approximated as
Digits(individual_digits) followed by ByteLevel's GPT-2 regex; that is close to (it may well be
identical to) llama.cpp's two-pass smollm split, but it is not verified against it here: for
exact id comparisons feed `--ids`.

Usage
-----
  reference_forward.py --model M --ids "1 2 3" --out logits.npy
      float64 logits [n_tokens, vocab] of every position, saved with numpy.save.
  reference_forward.py --model M --ids "1 2 3" --greedy 20
      continue greedily (first maximum) for up to 20 tokens; prints the generated ids on one
      line (stdout line 1) and their decoded text after it. Generation stops before an
      end-of-generation token (<|im_end|>, <|endoftext|>, eos) unless --ignore-eos.
  reference_forward.py --model M --chat --text "What is the capital of France?" --greedy 30
      tokenizes the prompt (ChatML with the chat template's default system message when
      --chat), prints the prompt ids to stderr, then generates as above.
Options: --out works together with --greedy (logits of the prompt only); --rope half_split
rotates (x[i], x[i + n_rot/2]) instead -- the wrong convention for GGUF weights, kept to
demonstrate that it yields garbage; --cache DIR stores the dequantized float64 weights as .npy
files (memory-mapped on later runs); --time prints the seconds of the forward to stderr.
Set OMP_NUM_THREADS / OPENBLAS_NUM_THREADS to limit the BLAS threads.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

import numpy as np


# --------------------------------------------------------------------------------------------
# Reading the model
# --------------------------------------------------------------------------------------------

def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        if default is None:
            raise KeyError(f"GGUF metadata key {key!r} missing")
        return default
    return f.contents()


class Model:
    """The model's shape, float64 weights and tokenizer metadata, read from one GGUF file."""

    def __init__(self, path: str, cache_dir: str | None = None):
        import gguf

        self.path = path
        r = gguf.GGUFReader(path)
        arch = _field(r, "general.architecture")
        if arch != "llama":
            raise ValueError(f"{path}: architecture {arch!r}, expected 'llama'")
        a = arch + "."
        self.dim = int(_field(r, a + "embedding_length"))
        self.n_layers = int(_field(r, a + "block_count"))
        self.ffn = int(_field(r, a + "feed_forward_length"))
        self.n_head = int(_field(r, a + "attention.head_count"))
        self.n_head_kv = int(_field(r, a + "attention.head_count_kv", self.n_head))
        self.rope_base = float(_field(r, a + "rope.freq_base", 10000.0))
        self.eps = float(_field(r, a + "attention.layer_norm_rms_epsilon"))
        self.head_dim = int(_field(r, a + "attention.key_length", self.dim // self.n_head))
        self.n_rot = int(_field(r, a + "rope.dimension_count", self.head_dim))
        if self.n_head % self.n_head_kv or self.n_rot % 2 or self.n_rot > self.head_dim:
            raise ValueError(f"{path}: inconsistent heads / rope dimensions")

        # tokenizer metadata
        self.tokens = list(_field(r, "tokenizer.ggml.tokens"))
        self.token_type = [int(t) for t in _field(r, "tokenizer.ggml.token_type", [1] * len(self.tokens))]
        self.merges = list(_field(r, "tokenizer.ggml.merges", []))
        self.eos_id = int(_field(r, "tokenizer.ggml.eos_token_id", -1))
        self.add_bos = bool(_field(r, "tokenizer.ggml.add_bos_token", False))
        self.bos_id = int(_field(r, "tokenizer.ggml.bos_token_id", -1))
        self.chat_template = _field(r, "tokenizer.chat_template", "")

        # weights
        tensors = {t.name: t for t in r.tensors}
        meta_path = os.path.join(cache_dir, "meta.json") if cache_dir else None
        stamp = {"model": os.path.abspath(path), "size": os.path.getsize(path),
                 "mtime": os.path.getmtime(path)}
        use_cache = False
        if meta_path and os.path.exists(meta_path):
            with open(meta_path) as f:
                use_cache = json.load(f) == stamp

        def load(name):
            if use_cache:
                return np.load(os.path.join(cache_dir, name + ".npy"), mmap_mode="r")
            t = tensors[name]
            w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float64)
            ne = [int(n) for n in t.shape]
            if list(w.shape) != ne[::-1]:  # numpy order is ne reversed: [out, in]
                w = w.reshape(ne[::-1])
            if cache_dir:
                np.save(os.path.join(cache_dir, name + ".npy"), w)
            return w

        if cache_dir:
            os.makedirs(cache_dir, exist_ok=True)
        self.tok_embd = load("token_embd.weight")
        self.vocab = self.tok_embd.shape[0]
        self.out_norm = load("output_norm.weight")
        has_output = (("output.weight" in tensors) if not use_cache
                      else os.path.exists(os.path.join(cache_dir, "output.weight.npy")))
        self.output = load("output.weight") if has_output else self.tok_embd
        self.tied = not has_output
        names = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
                 "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")
        self.layers = [{n: load(f"blk.{i}.{n}.weight") for n in names} for i in range(self.n_layers)]
        if cache_dir and not use_cache:
            with open(meta_path, "w") as f:
                json.dump(stamp, f)

        d, hd, kvd = self.dim, self.head_dim, self.n_head_kv * self.head_dim
        expect = {"attn_norm": (d,), "attn_q": (self.n_head * hd, d), "attn_k": (kvd, d),
                  "attn_v": (kvd, d), "attn_output": (d, self.n_head * hd), "ffn_norm": (d,),
                  "ffn_gate": (self.ffn, d), "ffn_up": (self.ffn, d), "ffn_down": (d, self.ffn)}
        for i, L in enumerate(self.layers):
            for n, shp in expect.items():
                if L[n].shape != shp:
                    raise ValueError(f"blk.{i}.{n}: shape {L[n].shape}, expected {shp}")
        if self.tok_embd.shape != (self.vocab, d) or self.output.shape != (self.vocab, d):
            raise ValueError("embedding / output shape mismatch")


# --------------------------------------------------------------------------------------------
# The float64 forward
# --------------------------------------------------------------------------------------------

def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, n_rot, base, style):
    """x: [T, heads, head_dim]; pos: [T]. Rotates the first n_rot dims of every head."""
    half = n_rot // 2
    inv = base ** (-2.0 * np.arange(half, dtype=np.float64) / n_rot)
    ang = pos.astype(np.float64)[:, None] * inv[None, :]          # [T, half]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]       # [T, 1, half]
    y = x.copy()
    if style == "adjacent":      # pairs (x[2i], x[2i+1]): llama.cpp "normal" RoPE
        a, b = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
        y[..., 0:n_rot:2] = a * c - b * s
        y[..., 1:n_rot:2] = a * s + b * c
    elif style == "half_split":  # pairs (x[i], x[i + n_rot/2]): HF rotate_half / NeoX
        a, b = x[..., :half], x[..., half:n_rot]
        y[..., :half] = a * c - b * s
        y[..., half:n_rot] = a * s + b * c
    else:
        raise ValueError(f"unknown rope style {style!r}")
    return y


class Session:
    """One sequence: a float64 K/V cache per layer, fed chunks of tokens in order."""

    def __init__(self, model: Model, rope_style: str = "adjacent"):
        self.m = model
        self.rope_style = rope_style
        self.k = [np.zeros((0, model.n_head_kv, model.head_dim)) for _ in range(model.n_layers)]
        self.v = [np.zeros((0, model.n_head_kv, model.head_dim)) for _ in range(model.n_layers)]
        self.n_past = 0

    def forward(self, ids, all_logits: bool = True):
        """Feeds tokens @p ids after those already fed. Returns float64 logits [len(ids), vocab]
        (or [1, vocab] for the last position only when all_logits is False)."""
        m = self.m
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError("need a non-empty 1-D token sequence")
        if ids.min() < 0 or ids.max() >= m.vocab:
            raise ValueError(f"token id outside [0, {m.vocab})")
        T, H, KV, hd = ids.size, m.n_head, m.n_head_kv, m.head_dim
        group = H // KV
        pos = np.arange(self.n_past, self.n_past + T)
        S = self.n_past + T                                   # keys visible to the last query
        # causal mask: query at pos p sees keys 0..p
        mask = np.arange(S)[None, :] > pos[:, None]           # [T, S]
        scale = 1.0 / np.sqrt(hd)

        x = np.array(m.tok_embd[ids], dtype=np.float64)       # [T, dim]
        for li, L in enumerate(m.layers):
            h = rms_norm(x, L["attn_norm"], m.eps)
            q = (h @ L["attn_q"].T).reshape(T, H, hd)
            k = (h @ L["attn_k"].T).reshape(T, KV, hd)
            v = (h @ L["attn_v"].T).reshape(T, KV, hd)
            q = rope(q, pos, m.n_rot, m.rope_base, self.rope_style)
            k = rope(k, pos, m.n_rot, m.rope_base, self.rope_style)
            self.k[li] = np.concatenate([self.k[li], k], axis=0)
            self.v[li] = np.concatenate([self.v[li], v], axis=0)
            K, V = self.k[li], self.v[li]                     # [S, KV, hd]
            # GQA: query head h uses KV head h // group
            qg = q.reshape(T, KV, group, hd).transpose(1, 2, 0, 3)   # [KV, group, T, hd]
            Kt = K.transpose(1, 2, 0)[:, None]                       # [KV, 1, hd, S]
            sc = (qg @ Kt) * scale                                   # [KV, group, T, S]
            sc = np.where(mask, -np.inf, sc)
            sc = sc - sc.max(axis=-1, keepdims=True)
            p = np.exp(sc)
            p /= p.sum(axis=-1, keepdims=True)
            o = p @ V.transpose(1, 0, 2)[:, None]                    # [KV, group, T, hd]
            o = o.transpose(2, 0, 1, 3).reshape(T, H * hd)           # head order h = kv*group + g
            x = x + o @ L["attn_output"].T
            h = rms_norm(x, L["ffn_norm"], m.eps)
            g = h @ L["ffn_gate"].T
            u = h @ L["ffn_up"].T
            x = x + ((g / (1.0 + np.exp(-g))) * u) @ L["ffn_down"].T
        self.n_past = S
        if not all_logits:
            x = x[-1:]
        return rms_norm(x, m.out_norm, m.eps) @ m.output.T


def end_of_generation_ids(model: Model):
    ids = set()
    for name in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>"):
        if name in model.tokens:
            ids.add(model.tokens.index(name))
    if model.eos_id >= 0:
        ids.add(model.eos_id)
    return ids


def greedy(session: Session, prompt, n_new: int, stop_ids=frozenset(), prompt_logits=None):
    """Greedy continuation (first maximum). Returns the generated ids (a stop id ends the run
    and is not included)."""
    logits = prompt_logits if prompt_logits is not None else session.forward(prompt, all_logits=False)
    out = []
    for i in range(n_new):
        nxt = int(np.argmax(logits[-1]))
        if nxt in stop_ids:
            break
        out.append(nxt)
        if i + 1 < n_new:
            logits = session.forward([nxt], all_logits=False)
    return out


# --------------------------------------------------------------------------------------------
# Tokenizer (Hugging Face `tokenizers`, built from the GGUF vocabulary)
# --------------------------------------------------------------------------------------------

def build_tokenizer(model: Model):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {t: i for i, t in enumerate(model.tokens)}
    merges = [tuple(mg.split(" ", 1)) for mg in model.merges]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    # Approximation of llama.cpp's `smollm` pre-tokenizer: every digit alone, then GPT-2's regex.
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    specials = [AddedToken(t, special=True, normalized=False)
                for t, ty in zip(model.tokens, model.token_type) if ty in (3, 4)]
    tok.add_special_tokens(specials)
    return tok


def default_system_message(template: str):
    mt = re.search(r"<\|im_start\|>system\n(.*?)<\|im_end\|>", template, re.S)
    return mt.group(1) if mt else None


def chatml(prompt: str, system: str | None):
    s = ""
    if system is not None:
        s += f"<|im_start|>system\n{system}<|im_end|>\n"
    return s + f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--ids", help='token ids, e.g. "1 2 3" (commas allowed)')
    src.add_argument("--text", help="prompt text, tokenized with the GGUF's vocabulary")
    ap.add_argument("--chat", action="store_true", help="wrap --text in ChatML with the default system message")
    ap.add_argument("--out", help="write float64 logits [n_tokens, vocab] of the input as .npy")
    ap.add_argument("--greedy", type=int, default=0, metavar="N", help="generate N tokens greedily")
    ap.add_argument("--ignore-eos", action="store_true", help="do not stop at end-of-generation tokens")
    ap.add_argument("--rope", choices=("adjacent", "half_split"), default="adjacent")
    ap.add_argument("--cache", metavar="DIR", help="cache the dequantized float64 weights as .npy here")
    ap.add_argument("--time", action="store_true", help="print timings to stderr")
    args = ap.parse_args(argv)
    if args.chat and args.text is None:
        ap.error("--chat needs --text")
    if not args.out and args.greedy <= 0:
        ap.error("nothing to do: give --out and/or --greedy N")

    t0 = time.perf_counter()
    model = Model(args.model, args.cache)
    t1 = time.perf_counter()
    if args.time:
        print(f"load+dequantize: {t1 - t0:.2f} s", file=sys.stderr)

    tok = None
    if args.text is not None:
        tok = build_tokenizer(model)
        text = chatml(args.text, default_system_message(model.chat_template)) if args.chat else args.text
        ids = tok.encode(text, add_special_tokens=False).ids
        if model.add_bos and model.bos_id >= 0:
            ids = [model.bos_id] + ids
        print("prompt ids: " + " ".join(map(str, ids)), file=sys.stderr)
    else:
        ids = [int(t) for t in args.ids.replace(",", " ").split()]

    sess = Session(model, args.rope)
    t2 = time.perf_counter()
    logits = sess.forward(ids, all_logits=bool(args.out))
    t3 = time.perf_counter()
    if args.time:
        print(f"forward of {len(ids)} tokens: {t3 - t2:.2f} s", file=sys.stderr)
    if args.out:
        np.save(args.out, logits)

    if args.greedy > 0:
        stop = frozenset() if args.ignore_eos else frozenset(end_of_generation_ids(model))
        gen = greedy(sess, ids, args.greedy, stop, prompt_logits=logits[-1:])
        t4 = time.perf_counter()
        if args.time:
            print(f"greedy {len(gen)} tokens: {t4 - t3:.2f} s", file=sys.stderr)
        print(" ".join(map(str, gen)))
        if tok is None:
            tok = build_tokenizer(model)
        print(tok.decode(gen, skip_special_tokens=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
