"""Chapter 06's numbers: the predict-first arithmetic of contiguous and paged KV memory from the
paper's mean lengths, the memory and sharing tables from docs/plots/ch06-memory.json, the sizes of
tables, blocks and pieces, and the decode and random-piece measurements from
docs/plots/ch06-bench.json."""
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_lessons import NUMBER, Claim, row  # noqa: E402

GIB, KIB, MIB = 2 ** 30, 1024, 2 ** 20
LAYERS, DIM, HIDDEN, VOCAB = 32, 4096, 11008, 32000  # LLaMA-7B
BUDGET, MAX_SEQ, B = 16 * GIB, 2048, 16
ALPACA_PROMPT, ALPACA_OUTPUT = 19.31, 58.45  # the vLLM paper's Fig. 11 legend
A100_80 = 80e9
BENCH_HEADS, BENCH_D = 8, 128
# Figures the lesson once printed wrong: none found when this check was written.
WRONG_BEFORE = []


def claims(lab):
    mem = lab.json("ch06-memory.json")
    per_token = mem["settings"]["bytes_per_token"]
    assert per_token == 2 * LAYERS * DIM * 2, "fp16 K and V of 32 layers × 4096"
    dist, drawn = mem["distribution"], mem["drawn"]
    rows = {(r["scheme"], r["block_size"]): r for r in mem["rows"]}
    contiguous, paged16 = rows[("contiguous", 0)], rows[("paged", 16)]
    share = mem["sharing"]
    mean_l = dist["mean_prompt"] + dist["mean_output"]
    budget_tokens = BUDGET / per_token
    c = [Claim(r"2048-token slot holds tokens in (\d+)% of its bytes", [100 * contiguous["share_held"]], "share_held"),
         Claim(r"\(block_size − 1\)/2 tokens on average: ([\d.]+)%$", [100 * paged16["share_held"]], "share_held at 16"),
         Claim(r"of the reserved bytes hold tokens at block 16, and (\d+)× as many", [paged16["sequences_fit"] /
                                                                                     contiguous["sequences_fit"]], "fit / fit"),
         Claim(r"\*\*Sharing saves blocks on top of that\*\*: ([\d.]+)% for four samples per prompt, ([\d.]+)% for a$",
               [100 * share["parallel_sampling"]["saving"], 100 * share["system_prompt"]["saving"]], "saving"),
         Claim(r"\(fp16: (\d+) KiB per token, chapter 03\)", [per_token / KIB], "2 · 32 · 4096 · 2 B"),
         Claim(r"E\[L\] ≈ (\d+) \+ (\d+) = (\d+) tokens", [dist["mean_prompt"], dist["mean_output"], mean_l], "the paper's means"),
         Claim(r"\*\*2048 − 499 ≈ (\d+) tokens per sequence\*\*", [MAX_SEQ - mean_l], "2048 − E[L]"),
         Claim(r"E\[L\] / max_seq_len ≈ ([\d.]+)%", [100 * mean_l / MAX_SEQ], "E[L] / 2048"),
         Claim(r"16 GiB / \(2048 × 512 KiB\) = (\d+) GiB per slot → \*\*(\d+) sequences\*\*",
               [MAX_SEQ * per_token / GIB, BUDGET // (MAX_SEQ * per_token)], "a slot's bytes; the budget / a slot"),
         Claim(r"\*\*\(B − 1\) / 2 tokens = ([\d.]+) at B = 16\*\*", [(B - 1) / 2], "(B − 1)/2"),
         Claim(r"Share held ≈ 499 / \(499 \+ 7\.5\) = ([\d.]+)%\. The budget is (" + NUMBER + r") tokens, so (" + NUMBER +
               r") / ([\d.]+) ≈ ([\d.]+) →", [100 * 499 / 506.5, budget_tokens, budget_tokens, 499 + 7.5,
                                              budget_tokens / 506.5], "the lesson's 499 and 7.5; 16 GiB / 512 KiB"),
         Claim(r"^  \*\*(\d+) sequences\*\*\.", [math.floor(budget_tokens / 506.5)], "whole sequences"),
         Claim(r"\(drawn means: prompt ([\d.]+), output ([\d.]+), sequence ([\d.]+)\)",
               [drawn["mean_prompt"], drawn["mean_output"], drawn["mean_length"]], "drawn")]
    c += [row("| scheme | block |", ["contiguous", "2048"],
              [100 * contiguous["share_held"], contiguous["wasted_tokens_per_sequence"], contiguous["sequences_fit"], 1.0],
              "the contiguous row")]
    for b in (1, 8, 16, 32, 128):
        r = rows[("paged", b)]
        c.append(row("| scheme | block |", ["paged", rf"(?:\*\*)?{b}(?:\*\*)?"],
                     [100 * r["share_held"], r["wasted_tokens_per_sequence"], r["sequences_fit"],
                      r["sequences_fit"] / contiguous["sequences_fit"]], f"paged, block {b}"))
    worst = max(abs(rows[("paged", b)]["wasted_tokens_per_sequence"] - (b - 1) / 2) for b in (1, 8, 16, 32, 128))
    alpaca = ALPACA_PROMPT + ALPACA_OUTPUT
    c += [Claim(r"is \(B − 1\)/2 to within ([\d.]+) token at every block size", [worst], "max |waste − (B − 1)/2|"),
          Claim(r"`--lengths alpaca`, mean ([\d.]+) tokens", [alpaca], "19.31 + 58.45"),
          Claim(r"blocks of 16 hold [\d.]+% \((\d+) sequences instead of 16\)", [budget_tokens // (alpaca + 7.5)],
                "32 768 / (77.8 + 7.5)"),
          Claim(r"the same 7\.5 tokens are (\d+)% of the memory", [100 * 7.5 / (alpaca + 7.5)], "7.5 / (77.8 + 7.5)"),
          row("| case | ShareGPT |", ["parallel sampling, n = 4 outputs per prompt"],
              [100 * share["parallel_sampling"]["saving"], None, None], "saving"),
          row("| case | ShareGPT |", ["a 341-token system prompt ahead of every request"],
              [100 * share["system_prompt"]["saving"], None, None], "saving")]
    weights = 2 * (LAYERS * (4 * DIM * DIM + 3 * DIM * HIDDEN) + 2 * VOCAB * DIM + (2 * LAYERS + 1) * DIM)
    room = A100_80 - weights
    c += [Claim(r"has room for (\d+) contiguous 2048-token slots or (\d+) ShareGPT-like paged sequences",
                [room // (MAX_SEQ * per_token), room / per_token // (drawn["mean_length"] + paged16["wasted_tokens_per_sequence"])],
                "80 GB less LLaMA-7B's fp16 weights, / a slot; / (E[L] + waste) tokens"),
          Claim(r"slot 5·4 \+ 2 = (\d+)", [5 * 4 + 2], "block 5, slot 2"),
          Claim(r"slot 3·4 \+ 2 = (\d+)", [3 * 4 + 2], "block 3, slot 2"),
          Claim(r"padded: (\d+) B per sequence at 2048 / 16, (\d+) KiB at 128K / 16",
                [MAX_SEQ / B * 4, 128 * 1024 / B * 4 / KIB], "⌈max_seq_len / B⌉ · 4 B"),
          Claim(r"\((\d+) B of table per (\d+) MiB of ShareGPT-sized", [MAX_SEQ / B * 4, drawn["mean_length"] * per_token / MIB],
                "the table; E[L] · 512 KiB")]

    # The decode measurements.
    bench = lab.json("ch06-bench.json")
    med = {b["run_name"].replace("/manual_time", ""): b for b in bench["benchmarks"] if b.get("aggregate_name") == "median"}
    points = [("`cpu/decode_simd`, fp16", r"8× LLC \(L 32768, batch 4\)", "paged_decode_8xllc_fp16/cpu/decode_simd/L:32768/batch:4"),
              ("`cpu/decode_int8_simd`, INT8", r"8× LLC \(L 32768, batch 8\)",
               "paged_decode_8xllc_int8/cpu/decode_int8_simd/L:32768/batch:8"),
              ("`cpu/decode_simd`, fp16", r"in cache \(L 512, batch 1\)", "paged_decode_incache_fp16/cpu/decode_simd/L:512/batch:1"),
              ("`cpu/decode_int8_simd`, INT8", r"in cache \(L 512, batch 1\)",
               "paged_decode_incache_int8/cpu/decode_int8_simd/L:512/batch:1")]
    x = {}
    for label, point, key in points:
        base = med[f"{key}/block:0"]["real_time"]
        values = [base, med[f"{key}/block:0"]["GB/s"]]
        for b in (1, 8, 16, 32, 128):
            t = med[f"{key}/block:{b}"]["real_time"]
            values += [t, t / base]
            x[(key, b)] = t / base
        for b in (1, 16, 128):
            x[(key, "in_order", b)] = med[f"{key}/in_order/block:{b}"]["real_time"] / base
            values.append(x[(key, "in_order", b)])
        c.append(Claim(r"^\| " + label + r" \| " + point + r" \| ([\d.]+) ms \(([\d.]+) GB/s\) \|" +
                       r" ([\d.]+) ms \(×([\d.]+)\) \|" * 5 + r" 1: ×([\d.]+), 16: ×([\d.]+), 128: ×([\d.]+) \|",
                       values, f"{key}: medians, / contiguous"))
    fp16_dram, int8_dram = points[0][2], points[1][2]
    fp16_cache, int8_cache = points[2][2], points[3][2]

    def pct(keys, b):
        return [100 * (x[(k, b)] - 1) for k in keys]
    cache_keys, dram_keys = (fp16_cache, int8_cache), (fp16_dram, int8_dram)
    chunks = {int(k.split("bytes:")[1]): v["GB/s"] for k, v in med.items() if k.startswith("random_chunks/")}
    seq = chunks[0]
    c += [Claim(r"the \*same\* kernels on both layouts: in cache, (\d+)–(\d+)% at block 16", [min(pct(cache_keys, 16)),
                                                                                            max(pct(cache_keys, 16))], "in cache"),
          Claim(r"from DRAM on this lab's CPU, 16-token blocks cost about (\d+)× — not the lookup but the (\d+)–(\d+) KiB",
                [x[(fp16_dram, 16)], 16 * BENCH_D * 1 / KIB, 16 * BENCH_D * 2 / KIB], "about: ×1.92 and ×2.06; an INT8 and an fp16 piece",
                rel=0.05),
          Claim(r"and 128-token blocks (\d+)–(\d+)% \(the measured", [min(pct(dram_keys, 128)), max(pct(dram_keys, 128))], "DRAM"),
          Claim(r"\(batch 1, L = 512: (\d+) MiB of fp16, (\d+) MiB of INT8\)",
                [512 * BENCH_HEADS * BENCH_D * 2 * 2 / MIB, 512 * BENCH_HEADS * BENCH_D * 2 / MIB], "K and V of 8 heads × 128"),
          Claim(r"cheap from block 16 up\*\*: (\d+)–(\d+)% at block 16, (\d+)–(\d+)% at block 32,$",
                pct(cache_keys, 16)[::-1] + pct(cache_keys, 32)[::-1], "in cache: int8, fp16"),
          Claim(r"^(\d+)–(\d+)% at block 128 — the instructions", pct(cache_keys, 128)[::-1], "in cache: int8, fp16"),
          Claim(r"costs ([\d.]+)–([\d.]+)×: never use it", [x[(fp16_cache, 1)], x[(int8_cache, 1)]], "in cache, block 1"),
          Claim(r"is as slow \(×([\d.]+) at block 16\)", [x[(fp16_dram, "in_order", 16)]], "fp16 in order"),
          Claim(r"— (\d+) KiB of fp16 or (\d+) KiB of$", [16 * BENCH_D * 2 / KIB, 16 * BENCH_D / KIB], "16 rows × 128"),
          row("| piece | sequential |", [r"GB/s \(median\)"], [chunks[b] for b in (0, 1024, 2048, 4096, 8192, 16384, 32768, 65536)],
              "random_chunks medians"),
          row("| piece | sequential |", ["× sequential"], [chunks[b] / seq for b in (0, 1024, 2048, 4096, 8192, 16384, 32768,
                                                                                   65536)], "/ sequential"),
          Claim(r"A random 4 KiB piece streams at ([\d.]+)× the sequential rate, a 2 KiB one at ([\d.]+)×",
                [chunks[4096] / seq, chunks[2048] / seq], "random_chunks"),
          Claim(r"bounded near 1 / ([\d.]+) ≈ ([\d.]+)× the contiguous", [chunks[4096] / seq, seq / chunks[4096]], "1 / 0.65"),
          Claim(r"^measures ×([\d.]+);", [x[(fp16_dram, 16)]], "fp16 from DRAM, block 16"),
          Claim(r"^costs ×([\d.]+) \(INT8, 16 KiB pieces: ×([\d.]+)\)", [x[(fp16_dram, 128)], x[(int8_dram, 128)]], "block 128"),
          Claim(r"\(and within (\d+)% at block 16\)", [max(pct(cache_keys, 16))], "in cache"),
          Claim(r"^16 costs ([\d.]+)–([\d.]+)× and block 128 ([\d.]+)–([\d.]+)×",
                [x[(int8_dram, 16)], x[(fp16_dram, 16)], x[(fp16_dram, 128)], x[(int8_dram, 128)]], "from DRAM")]
    return c
