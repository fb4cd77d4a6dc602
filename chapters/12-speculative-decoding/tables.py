#!/usr/bin/env python3
"""Chapter 12's tables, printed as the lesson shows them, from the committed JSON:
docs/plots/ch12-speculative.json (./inferlab bench ch12) and docs/plots/ch12-llama-cpp.json
(llama_cpp_peer.py). tests/lessons/ch12.py checks the lesson's rows against the same files.

    python3 chapters/12-speculative-decoding/tables.py             # print them
    python3 chapters/12-speculative-decoding/tables.py --write     # put them into the lesson, between
                                                                   # its <!-- table:NAME --> markers
"""
import re
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STEP_NS = (1, 2, 3, 4, 5, 6, 8, 12, 16)
DRAFTERS = {"ngram": "prompt lookup (ngram)", "draft": "Q4_1 draft (draft)"}


def step_table(bench):
    t = bench["step_times_s"]
    head = "| weights | " + " | ".join(f"n = {n}" for n in STEP_NS) + " |"
    lines = [head, "|---" * (len(STEP_NS) + 1) + "|"]
    for key, name in (("file", "file (Q4_1), ms"), ("f32", "f32, ms")):
        lines.append(f"| {name} | " + " | ".join(f"{t[key][n - 1] * 1e3:.1f}" for n in STEP_NS) + " |")
        lines.append(f"| {key} T(n) / T(1) | " + " | ".join(f"{t[key][n - 1] / t[key][0]:.2f}" for n in STEP_NS) + " |")
    return lines


def batch_one_table(bench):
    lines = ["| drafter | target | prompts | plain tok/s | speculative tok/s | speed-up | predicted | α | "
             "mean accepted length | rows with guesses |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in bench["runs"]:
        if r["batch"] != 1:
            continue
        lines.append(f"| {DRAFTERS[r['method']]} | {r['target_weights']} | {r['prompts']} | "
                     f"{r['plain_tokens_per_s']:.1f} | {r['spec_tokens_per_s']:.1f} | {r['speedup']:.2f}× | "
                     f"{r['predicted_speedup']:.2f}× | {r['alpha']:.2f} | {r['mean_accepted_length']:.2f} | "
                     f"{100 * r['guessing_share']:.0f}% |")
    return lines


def batch_table(bench):
    lines = ["| drafter | batch | plain tok/s | speculative tok/s | speed-up | α | mean accepted length |",
             "|---|---|---|---|---|---|---|"]
    for method in DRAFTERS:
        for r in bench["runs"]:
            if r["method"] == method and r["prompts"] == "grounded":
                lines.append(f"| {DRAFTERS[method]} | {r['batch']} | {r['plain_tokens_per_s']:.1f} | "
                             f"{r['spec_tokens_per_s']:.1f} | {r['speedup']:.2f}× | {r['alpha']:.2f} | "
                             f"{r['mean_accepted_length']:.2f} |")
    return lines


def peer_table(bench, peer):
    lab = {r["prompts"]: r for r in bench["runs"] if r["method"] == "ngram" and r["batch"] == 1}
    lines = ["| prompts | llama.cpp plain tok/s | llama.cpp prompt lookup tok/s | llama.cpp speed-up | "
             "llama.cpp same text | lab plain tok/s | lab prompt lookup tok/s | lab speed-up |",
             "|---|---|---|---|---|---|---|---|"]
    for kind, p in peer["prompts"].items():
        r = lab[kind]
        lines.append(f"| {kind} | {p['plain_tokens_per_s']:.1f} | {p['lookup_tokens_per_s']:.1f} | "
                     f"{p['speedup']:.2f}× | {'yes' if p['same_text'] else 'no'} | {r['plain_tokens_per_s']:.1f} | "
                     f"{r['spec_tokens_per_s']:.1f} | {r['speedup']:.2f}× |")
    return lines


def ngram_min_table(bench):
    lines = ["| --prompt-lookup-min | prompts | guesses | accepted | α | mean accepted length |",
             "|---|---|---|---|---|---|"]
    for r in bench["ngram_min_sweep"]:
        lines.append(f"| {r['ngram_min']} | {r['prompts']} | {r['draft_tokens']} | {r['accepted_tokens']} | "
                     f"{r['alpha']:.2f} | {r['mean_accepted_length']:.2f} |")
    return lines


def main():
    bench = json.loads((ROOT / "docs/plots/ch12-speculative.json").read_text())
    peer_path = ROOT / "docs/plots/ch12-llama-cpp.json"
    tables = {"step-times": step_table(bench), "batch-one": batch_one_table(bench), "batches": batch_table(bench),
              "ngram-min": ngram_min_table(bench)}
    if peer_path.exists():
        tables["llama-cpp"] = peer_table(bench, json.loads(peer_path.read_text()))
    if "--write" not in sys.argv:
        for name, lines in tables.items():
            print(f"<!-- table:{name} -->\n" + "\n".join(lines) + "\n")
        return 0
    lesson = ROOT / "chapters/12-speculative-decoding/README.md"
    text = lesson.read_text()
    for name, lines in tables.items():
        block = f"<!-- table:{name} -->\n" + "\n".join(lines) + f"\n<!-- /table:{name} -->"
        text, n = re.subn(rf"<!-- table:{name} -->.*?<!-- /table:{name} -->", lambda _: block, text, flags=re.S)
        if n != 1:
            sys.exit(f"tables.py: the lesson has {n} <!-- table:{name} --> blocks, not 1")
    lesson.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
