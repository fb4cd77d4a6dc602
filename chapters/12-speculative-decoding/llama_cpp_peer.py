#!/usr/bin/env python3
"""Chapter 12's peer: the same prompts through llama.cpp, plain and with its prompt-lookup drafter.

llama.cpp comes from PyPI's llama-cpp-python, built as chapter 08's llama_cpp_peer.py says (its
--print-cmake-args; build/venv-llama). Then:

    GOMP_SPINCOUNT=1000 build/venv-llama/bin/python chapters/12-speculative-decoding/llama_cpp_peer.py \\
        --out docs/plots/ch12-llama-cpp.json

For each prompt of chapters/12-speculative-decoding/data/prompts.json (input-grounded and free
chat, one user message through the GGUF's own chat template), greedy (temperature 0),
--max-new tokens, streamed: once plain, once with llama-cpp-python's LlamaPromptLookupDecoding
(num_pred_tokens = --gamma, max_ngram_size = 3), --repetitions times alternating. Decode
throughput, as the lab's bench_ch12 counts it: the tokens after the first / the time from the
first streamed token to the last (the prompt's evaluation excluded). Quoted per prompt kind: the
median over the repetitions of (Σ tokens / Σ seconds), and the ratio; whether both runs gave the
same text.
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(llm, messages, max_new):
    """The reply's text, its tokens after the first and the seconds from the first token to the last."""
    first = last = None
    text = []
    for chunk in llm.create_chat_completion(messages=messages, max_tokens=max_new, temperature=0.0, stream=True):
        piece = chunk["choices"][0]["delta"].get("content")
        if piece is None:
            continue
        now = time.perf_counter()
        first = now if first is None else first
        last = now
        text.append(piece)
    reply = "".join(text)
    tokens = len(llm.tokenize(reply.encode("utf-8"), add_bos=False, special=True))
    return reply, max(0, tokens - 1), (last - first) if first is not None else 0.0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--prompts", default=os.path.join(ROOT, "chapters", "12-speculative-decoding", "data",
                                                     "prompts.json"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--gamma", type=int, default=4, help="guesses per step (num_pred_tokens)")
    p.add_argument("--max-new", type=int, default=96)
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--out", help="write the figures as JSON")
    args = p.parse_args()
    import llama_cpp  # noqa: imported here so that --help works without it
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    prompts = json.load(open(args.prompts, encoding="utf-8"))["prompts"]
    common = dict(model_path=args.model, n_ctx=1024, n_batch=512, n_threads=args.threads,
                  n_threads_batch=args.threads, verbose=False)
    plain = llama_cpp.Llama(**common)
    lookup = llama_cpp.Llama(**common, draft_model=LlamaPromptLookupDecoding(num_pred_tokens=args.gamma,
                                                                              max_ngram_size=3))
    kinds = {}
    for kind in ("grounded", "chat"):
        chosen = [q for q in prompts if q["kind"] == kind]
        rates = {"plain": [], "lookup": []}
        same = True
        for _ in range(args.repetitions):
            for name, llm in (("plain", plain), ("lookup", lookup)):
                tokens = seconds = 0.0
                texts = []
                for q in chosen:
                    llm.reset()
                    reply, n, s = run(llm, [{"role": "user", "content": q["user"]}], args.max_new)
                    texts.append(reply)
                    tokens += n
                    seconds += s
                rates[name].append(tokens / seconds if seconds > 0 else 0.0)
                if name == "plain":
                    plain_texts = texts
                else:
                    same = same and texts == plain_texts
            print(kind, {k: round(v[-1], 1) for k, v in rates.items()}, file=sys.stderr)
        ratios = [b / a for a, b in zip(rates["plain"], rates["lookup"]) if a > 0]
        kinds[kind] = {"plain_tokens_per_s": statistics.median(rates["plain"]),
                       "lookup_tokens_per_s": statistics.median(rates["lookup"]),
                       "speedup": statistics.median(ratios), "same_text": same}
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    result = {"machine": f"{cpu}, {os.cpu_count()} CPUs", "command": " ".join(sys.argv),
              "llama_cpp_version": llama_cpp.__version__, "model": os.path.basename(args.model),
              "gamma": args.gamma, "max_new_tokens": args.max_new, "repetitions": args.repetitions,
              "threads": args.threads, "prompts": kinds}
    text_out = json.dumps(result, indent=2)
    print(text_out)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text_out + "\n")


if __name__ == "__main__":
    main()
