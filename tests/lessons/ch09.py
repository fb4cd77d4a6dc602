"""Chapter 09's numbers: Little's law from chapter 08's step costs, and the measured tables from
docs/plots/ch09-serving.json."""
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_lessons import Claim, row  # noqa: E402

MAX_SEQS = 16
WRONG_BEFORE = [("(1 − 0.504) = 122 ms", "(1 − 0.504) = 140 ms"),
                ("TTFT p50 jumps 8.3×", "TTFT p50 jumps 10×"),
                ("ITL p99 is 1.7–4.6× higher", "ITL p99 is 1.3–4× higher"),
                ("512 tokens, 853 ms:\n1.67 ms a token", "512 tokens, 853 ms:\n1.98 ms a token")]


def claims(lab):
    s = lab.json("ch09-serving.json")
    a, b, c = (s["step_costs"][k] for k in ("decode_a_s", "decode_b_s", "prefill_s_per_token"))
    p_mean, n_mean = s["workload"]["mean_prompt"], s["workload"]["mean_output"]
    # Little's law, as the lesson derives it.
    lam_sat = MAX_SEQS / (n_mean * (a + MAX_SEQS * b) + MAX_SEQS * p_mean * c)
    rho_sat = lam_sat * p_mean * c
    tpot_sat = (a + MAX_SEQS * b) / (1 - rho_sat)

    def tpot(lam):  # below saturation: B = λ n̄ a / (1 − ρ − λ n̄ b), TPOT = (a + b B) / (1 − ρ)
        rho = lam * p_mean * c
        batch = lam * n_mean * a / (1 - rho - lam * n_mean * b)
        return (a + b * batch) / (1 - rho)

    lo, hi = 0.01, lam_sat  # the rate at which the predicted TPOT reaches 100 ms
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tpot(mid) < 0.1 else (lo, mid)
    chunked = {r["rate"]: r for r in s["sweep_chunked"]["rows"]}
    unchunked = {r["rate"]: r for r in s["sweep_unchunked"]["rows"]}
    low = s["low_load_ttft"]
    one_thread = s["overhead_engine_one_thread"]
    both = s["overhead"]
    c_list = [Claim(r"`docs/plots/ch08-bench.json`: a = ([\d.]+) ms,$", [a * 1e3], "decode step's fixed cost (step_costs)"),
              Claim(r"^b = ([\d.]+) ms per sequence, c = ([\d.]+) ms per token\)", [b * 1e3, c * 1e3], "step_costs"),
              Claim(r"^([\d.]+), n̄ = ([\d.]+)\) that is \*\*λ_sat = ([\d.]+) requests/s\*\*",
                    [p_mean, n_mean, lam_sat], "the workload's means, and 16 / (n̄(a + 16b) + 16 P̄ c)"),
              Claim(r"\(it reaches 100 ms at ([\d.]+)/s\)", [lo], "the rate where (a + bB)/(1 − ρ) = 100 ms"),
              Claim(r"t\(16\)/\(1 − ρ\) = \(([\d.]+) \+ 16 × ([\d.]+) ms\)/\(1 − ([\d.]+)\) = (\d+) ms",
                    [a * 1e3, b * 1e3, rho_sat, tpot_sat * 1e3], "the saturated TPOT (a + 16b)/(1 − ρ)"),
              Claim(r"in (\d+) ms through HTTP \(median of (\d+)\), against (\d+) ms for the engine alone",
                    [low["server_median_ttft_ms"], low["requests"], low["offline_median_ttft_ms"]], "low_load_ttft"),
              Claim(r"saturates at ([\d.]+) requests/s on this workload", [lam_sat], "λ_sat"),
              Claim(r"\(([\d.]+) at an offered 3/s, ([\d.]+) at 4/s: (\d+)% above the prediction",
                    [chunked[3.0]["request_throughput"], chunked[4.0]["request_throughput"],
                     100 * (chunked[3.0]["request_throughput"] / lam_sat - 1)], "sweep_chunked's completed rates"),
              Claim(r"\(([\d.]+) ms at 2, (\d+) ms at 3\)\. Measured in \(c\)",
                    [chunked[2.0]["p99_tpot_ms"], chunked[3.0]["p99_tpot_ms"]], "TPOT p99"),
              Claim(r"\*\*Serving costs ([\d.]+)% of the engine's tokens/s\*\*", [100 * (1 - one_thread["median_ratio"])],
                    "1 − the one-thread median ratio"),
              Claim(r"the server delivered ([\d.]+)× the offline", [one_thread["median_ratio"]], "one-thread median ratio"),
              Claim(r"\(median of 3: ([\d.]+), ([\d.]+), ([\d.]+)\)\. With the engine on both cores it was ([\d.]+)× \(([\d.]+),$",
                    [*(r["ratio"] for r in one_thread["runs"]), both["median_ratio"], both["runs"][0]["ratio"]], "the ratios"),
              Claim(r"^  ([\d.]+), ([\d.]+)\): then what the Python", [r["ratio"] for r in both["runs"][1:]], "the ratios"),
              Claim(r"a step of (\d+)–(\d+) ms, the median TPOT",
                    [min(r["median_tpot_ms"] for r in one_thread["runs"]), max(r["median_tpot_ms"] for r in one_thread["runs"])],
                    "the one-thread runs' median TPOT"),
              Claim(r"^Now the two agree within ([\d.]+)%", [100 * (1 - one_thread["median_ratio"])], "1 − the ratio"),
              row("| TTFT median | p99 |", [r"through HTTP \(client clock\)"],
                  [low["server_median_ttft_ms"], low["server_p99_ttft_ms"]], "(b) through HTTP"),
              row("| TTFT median | p99 |", [r"the offline engine \(engine clock\)"], [low["offline_median_ttft_ms"], None],
                  "(b) offline"),
              Claim(r"^(\d+) ms — parsing, tokenizing", [low["server_median_ttft_ms"] - low["offline_median_ttft_ms"]],
                    "HTTP's share of the first token"),
              Claim(r"prefill of the (\d+) tokens, (\d+) ms:$", [low["prompt_tokens"], low["offline_median_ttft_ms"]],
                    "low_load_ttft"),
              Claim(r"^([\d.]+) ms a token\. \(An earlier version", [low["offline_median_ttft_ms"] / low["prompt_tokens"]],
                    "853 ms / 512 tokens"),
              Claim(r"that would be (" + r"\d[\d ]*" + r") ms\.", [low["prompt_tokens"] * c * 1e3], "512 × chapter 08's c"),
              Claim(r"TTFT p50 jumps ([\d.]+)× \((\d+) → ([\d ]+) ms",
                    [chunked[3.0]["median_ttft_ms"] / chunked[2.0]["median_ttft_ms"], chunked[2.0]["median_ttft_ms"],
                     chunked[3.0]["median_ttft_ms"]], "TTFT p50 at 3/s over 2/s"),
              Claim(r"ITL p99 is ([\d.]+)–([\d.]+)× higher \((\d+) against (\d+) ms at 1/s, (\d+)$",
                    [unchunked[1.0]["p99_itl_ms"] / chunked[1.0]["p99_itl_ms"],
                     unchunked[1.5]["p99_itl_ms"] / chunked[1.5]["p99_itl_ms"],
                     unchunked[1.0]["p99_itl_ms"], chunked[1.0]["p99_itl_ms"], unchunked[1.5]["p99_itl_ms"]],
                    "unchunked over chunked ITL p99, 1/s to 2/s (the largest at 1.5/s)"),
              Claim(r"^against (\d+) ms at 1\.5/s, (\d+) against (\d+) ms at 2/s\)",
                    [chunked[1.5]["p99_itl_ms"], unchunked[2.0]["p99_itl_ms"], chunked[2.0]["p99_itl_ms"]], "ITL p99"),
              Claim(r"keeps it at (\d+) ms\. At 0\.5/s it is ([\d.]+)× — lower \((\d+) against (\d+) ms\)",
                    [chunked[1.5]["p99_tpot_ms"], unchunked[0.5]["p99_itl_ms"] / chunked[0.5]["p99_itl_ms"],
                     unchunked[0.5]["p99_itl_ms"], chunked[0.5]["p99_itl_ms"]], "TPOT p99 at 1.5/s; ITL at 0.5/s")]
    # The other ratios in the range lie inside it.
    ratios = [unchunked[r]["p99_itl_ms"] / chunked[r]["p99_itl_ms"] for r in (1.0, 1.5, 2.0)]
    assert min(ratios) == ratios[0] and max(ratios) == ratios[1], "the lesson's ITL range assumes 1/s lowest, 1.5/s highest"
    for i, r in enumerate(both["runs"], start=1):
        c_list.append(row("| run | server tok/s |", [str(i)],
                          [r["server_tok_s"], r["offline_tok_s"], r["ratio"]], f"(a) run {i}, both cores"))
    for i, r in enumerate(one_thread["runs"], start=1):
        c_list.append(row("engine on one core", [str(i)], [r["server_tok_s"], r["offline_tok_s"], r["ratio"]],
                          f"(a) run {i}, engine on one core"))
    c_list.append(row("| run | server tok/s |", ["median", ""], [None, both["median_ratio"]],
                      "(a) median"))
    c_list.append(row("engine on one core", ["median", ""], [None, one_thread["median_ratio"]], "(a) one-thread median"))
    for rate, r in chunked.items():
        c_list.append(row("| tok/s | TTFT p50 |", [f"{rate:g}"],
                          [r["request_throughput"], r["output_throughput"], r["median_ttft_ms"], r["median_tpot_ms"],
                           r["p99_tpot_ms"], r["p99_itl_ms"], r["request_goodput"]], f"(c) {rate:g}/s: sweep_chunked"))
    for rate, r in unchunked.items():
        c_list.append(row("| completed req/s | TTFT p50 | TPOT p50 | TPOT p99 | ITL p99 | goodput |", [f"{rate:g}"],
                          [r["request_throughput"], r["median_ttft_ms"], r["median_tpot_ms"], r["p99_tpot_ms"],
                           r["p99_itl_ms"], r["request_goodput"]], f"(d) {rate:g}/s: sweep_unchunked"))
    return c_list
