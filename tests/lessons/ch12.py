"""Chapter 12's numbers: E = (1 − α^(γ+1)) / (1 − α) for the prediction table, the weights' bytes
from chapter 08's bench (weight_MB), the H100 ridge from its datasheet figures, and the measured
tables from docs/plots/ch12-speculative.json (./inferlab bench ch12) and ch12-llama-cpp.json
(llama_cpp_peer.py) — the rows chapters/12-speculative-decoding/tables.py prints."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_lessons import NUMBER, Claim, row  # noqa: E402

H100_TFLOPS, H100_TBS = 989, 3.35  # bf16 dense, HBM3: NVIDIA's H100 SXM datasheet, as the lesson cites
Q4_1_BYTES = 20 / 32
STEP_NS = (1, 2, 3, 4, 5, 6, 8, 12, 16)
DRAFTERS = {"ngram": r"prompt lookup \(ngram\)", "draft": r"Q4_1 draft \(draft\)"}
TARGETS = {"file (Q4_1)": r"file \(Q4_1\)", "f32": "f32"}


def expected(alpha, gamma):
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def claims(lab):
    ch08 = {b["run_name"]: b for b in lab.json("ch08-bench.json")["benchmarks"] if b.get("aggregate_name") == "median"}
    bench = lab.json("ch12-speculative.json")
    c = [row("| α \\ γ |", [r"0\.6"], [expected(0.6, g) for g in (2, 4, 8)], "E(α, γ)"),
         row("| α \\ γ |", [r"0\.8"], [expected(0.8, g) for g in (2, 4, 8)], "E(α, γ)"),
         Claim(r"At α = 0\.6 the 5th to 8th guesses add (" + NUMBER + ") tokens",
               [expected(0.6, 8) - expected(0.6, 4)], "E(0.6, 8) − E(0.6, 4)"),
         Claim(r"reads its weights once: (" + NUMBER + r") MB as the file stores them",
               [ch08["decode/file/manual_time"]["weight_MB"]], "ch08-bench.json weight_MB", 0.01),
         Claim(r"Q8_0 embedding that is also the output head\), (" + NUMBER + ") MB widened to f32",
               [ch08["decode/f32/manual_time"]["weight_MB"]], "ch08-bench.json weight_MB", 0.01),
         Claim(r"its Q4_1 matrices \((" + NUMBER + r") MB read a token\)",
               [ch08["decode/file/manual_time"]["weight_MB"]], "ch08-bench.json weight_MB", 0.01),
         Claim(r"draft for the f32 widening of the same numbers \((" + NUMBER + ") MB\)",
               [ch08["decode/f32/manual_time"]["weight_MB"]], "ch08-bench.json weight_MB", 0.01),
         Claim(r"(" + NUMBER + r") operations a byte for every token of the step", [2 / Q4_1_BYTES],
               "2 operations a weight over Q4_1's bytes a weight"),
         Claim(r"bf16 ridge is about (" + NUMBER + r") FLOP a byte \((" + NUMBER + r") TFLOP/s dense over (" + NUMBER
               + r") TB/s", [H100_TFLOPS / H100_TBS, H100_TFLOPS, H100_TBS], "the datasheet's ratio", 0.005)]
    t = bench["step_times_s"]
    runs = {(r["method"], r["prompts"], r["batch"]): r for r in bench["runs"]}
    ng, ngc = runs[("ngram", "grounded", 1)], runs[("ngram", "chat", 1)]
    dg, dc = runs[("draft", "grounded", 1)], runs[("draft", "chat", 1)]
    bytes_bf16 = 2 * 135e6
    c += [Claim(r"T\(5\) is (" + NUMBER + r") ×", [t["file"][4] / t["file"][0]], "step_times_s file"),
          Claim(r"^(" + NUMBER + r")\.\) So on this CPU", [t["f32"][4] / t["f32"][0]], "step_times_s f32"),
          Claim(r"as it yields more than (" + NUMBER + r") tokens", [t["file"][4] / t["file"][0]], "T(5) / T(1)"),
          Claim(r"^(" + NUMBER + r")–(" + NUMBER + r")% of the guesses", [100 * min(dg["alpha"], dc["alpha"]),
                                                                         100 * max(dg["alpha"], dc["alpha"])], "α"),
          Claim(r"speed-up is within (" + NUMBER + r")% of P12\.2", [100 * max(abs(r["speedup"] / r["predicted_speedup"] - 1)
                                                                    for r in (dg, dc))], "|measured / predicted − 1|", 0.2),
          Claim(r"\((" + NUMBER + r")× against (" + NUMBER + r")× on the grounded prompts, (" + NUMBER + r")×$",
                [dg["speedup"], dg["predicted_speedup"], dc["speedup"]], "draft runs"),
          Claim(r"^against (" + NUMBER + r")× on chat\)", [dc["predicted_speedup"]], "draft chat predicted"),
          Claim(r"n-gram to copy \((" + NUMBER + r")% grounded, (" + NUMBER + r")% chat\)",
                [100 * ng["guessing_share"], 100 * ngc["guessing_share"]], "guessing_share"),
          Claim(r"even at α = (" + NUMBER + r") it buys (" + NUMBER + r")× on the grounded",
                [ng["alpha"], ng["speedup"]], "ngram grounded"),
          Claim(r"prompts — (" + NUMBER + r")% under its prediction",
                [100 * (1 - ng["speedup"] / ng["predicted_speedup"])], "1 − speed-up / predicted", 0.1),
          Claim(r"and (" + NUMBER + r")× on chat\.", [ngc["speedup"]], "ngram chat"),
          Claim(r"a batch of 16 — (" + NUMBER + r")× for prompt lookup, (" + NUMBER + r")× for the draft pair",
                [runs[("ngram", "grounded", 16)]["speedup"], runs[("draft", "grounded", 16)]["speedup"]], "batch 16"),
          Claim(r"where T\(n\) / T\(1\) is (" + NUMBER + r") for the file", [t["file"][15] / t["file"][0]],
                "T(16) / T(1)"),
          Claim(r"in bf16 \((" + NUMBER + r") MB\) takes about (" + NUMBER + r") µs to read and (" + NUMBER
                + r") µs of arithmetic", [bytes_bf16 / 1e6, bytes_bf16 / (H100_TBS * 1e12) * 1e6,
                                          2 * 135e6 / (H100_TFLOPS * 1e12) * 1e6], "135M × 2 bytes; / 3.35 TB/s; 2 FLOP a weight / 989 TFLOP/s", 0.01),
          Claim(r"flat in n up to about (" + NUMBER + r") tokens", [H100_TFLOPS / H100_TBS], "the ridge", 0.005),
          Claim(r"and so is a batch of (" + NUMBER + r") speculating", [H100_TFLOPS / H100_TBS / 5], "ridge / (γ + 1)",
                0.01)]
    for r in bench["ngram_min_sweep"]:
        c.append(row("| --prompt-lookup-min |", [str(r["ngram_min"]), r["prompts"]],
                     [r["draft_tokens"], r["accepted_tokens"], r["alpha"], r["mean_accepted_length"]], "ngram_min_sweep"))
    c = [x for x in c if x is not None]

    t = bench["step_times_s"]
    for key, name in (("file", r"file \(Q4_1\), ms"), ("f32", "f32, ms")):
        c.append(row("| weights |", [name], [t[key][n - 1] * 1e3 for n in STEP_NS], "step_times_s"))
        c.append(row("| weights |", [f"{key} T\\(n\\) / T\\(1\\)"], [t[key][n - 1] / t[key][0] for n in STEP_NS],
                     "step_times_s, / T(1)"))
    for r in bench["runs"]:
        if r["batch"] == 1:
            c.append(row("| drafter | target | prompts |", [DRAFTERS[r["method"]], TARGETS[r["target_weights"]],
                                                            r["prompts"]],
                         [r["plain_tokens_per_s"], r["spec_tokens_per_s"], r["speedup"], r["predicted_speedup"],
                          r["alpha"], r["mean_accepted_length"], 100 * r["guessing_share"]], "runs, batch 1"))
        if r["prompts"] == "grounded":
            c.append(row("| drafter | batch |", [DRAFTERS[r["method"]], str(r["batch"])],
                         [r["plain_tokens_per_s"], r["spec_tokens_per_s"], r["speedup"], r["alpha"],
                          r["mean_accepted_length"]], "runs, grounded"))
    peer = lab.json("ch12-llama-cpp.json")
    lab_rows = {r["prompts"]: r for r in bench["runs"] if r["method"] == "ngram" and r["batch"] == 1}
    for kind, p in peer["prompts"].items():
        r = lab_rows[kind]
        c.append(row("| prompts | llama.cpp plain", [kind],
                     [p["plain_tokens_per_s"], p["lookup_tokens_per_s"], p["speedup"], None, r["plain_tokens_per_s"],
                      r["spec_tokens_per_s"], r["speedup"]], "ch12-llama-cpp.json beside the lab's batch-1 ngram rows"))
    return c
