"""Chapter 08's numbers: the bytes of a token from SmolLM2-135M's shapes, and the measured tables
from docs/plots/ch08-bench.json, ch08-llama-cpp.json and ch08-quality.json."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_lessons import NUMBER, Claim, row  # noqa: E402

# SmolLM2-135M, as the lesson reads it from the file.
LAYERS, DIM, HIDDEN, VOCAB, HEADS, KV_HEADS, HEAD_DIM = 30, 576, 1536, 49152, 9, 3, 64
KV_DIM = KV_HEADS * HEAD_DIM
LAYER_PARAMS = DIM * DIM * 2 + KV_DIM * DIM * 2 + HIDDEN * DIM * 3
EMBEDDING = VOCAB * DIM
NORMS = LAYERS * 2 * DIM + DIM
BYTES_PER_WEIGHT = {"f32": 4, "f16": 2, "q8_0": 34 / 32, "q4_1": 20 / 32}
KV_FP32_PER_TOKEN = 2 * LAYERS * KV_HEADS * HEAD_DIM * 4
INT8_CODES_PER_TOKEN = 2 * LAYERS * KV_HEADS * HEAD_DIM
INT8_SCALES_PER_TOKEN = 2 * LAYERS * KV_HEADS * 4  # one fp32 scale per (token, KV head, layer), K and V
CONTEXT = 512

# (the figure as the lesson prints it now, the wrong one it printed before): each must be caught.
WRONG_BEFORE = [("decodes at 131 tokens/s here (median, 512 cached tokens), 3.0×",
                 "decodes at 131 tokens/s here (median, 512 cached tokens), 2.9×"),
                ("tokens at ≈ 506 tokens/s, (a)'s prefill rate: 63 ms",
                 "tokens at ≈ 530 tokens/s, (a)'s prefill rate: 60 ms"),
                ("= 6.3 MB, saves 17.3 of the 120.2 MB", "= 12 MB, saves 17.3 of the 120.2 MB")]


def weights_mb(fmt_layers, fmt_head, embedding_row_bytes):
    layers = LAYERS * LAYER_PARAMS * BYTES_PER_WEIGHT[fmt_layers]
    head = EMBEDDING * BYTES_PER_WEIGHT[fmt_head]
    return layers / 1e6, head / 1e6, (layers + head + NORMS * 4 + embedding_row_bytes) / 1e6


def claims(lab):
    bench = lab.json("ch08-bench.json")
    read_gbs = float(bench["context"]["roofline_read_gbs"])
    fma_peak = float(bench["context"]["roofline_peak_gflops"])
    med = {b["name"].split("/manual_time")[0]: b for b in bench["benchmarks"] if b.get("aggregate_name") == "median"}
    cv = {b["name"].split("/manual_time")[0]: b for b in bench["benchmarks"] if b.get("aggregate_name") == "cv"}
    peer = lab.json("ch08-llama-cpp.json")
    quality = {r["name"]: r["ppl"] for r in lab.json("ch08-quality.json")["runs"]}

    c = [Claim(r"W_down 576 × 1536 \| (" + NUMBER + r") \|", [LAYER_PARAMS], "one layer's weights from the shapes"),
         Claim(r"^\| 30 layers \| ([\d.]+) M \|", [LAYERS * LAYER_PARAMS / 1e6], "30 × a layer"),
         Claim(r"^\| token embedding = output head, 49 152 × 576 \| ([\d.]+) M \|", [EMBEDDING / 1e6], "49 152 × 576"),
         Claim(r"^\| total \(the norms add (\d+) k\) \| ([\d.]+) M \|",
               [NORMS / 1e3, (LAYERS * LAYER_PARAMS + EMBEDDING + NORMS) / 1e6], "layers + embedding + norms")]
    # The bytes of one token: layers, head, the norms in fp32 and one embedding row, and the ceiling.
    fmt_rows = [("f32", r"f32 \| 4", "f32", "f32", DIM * 4), ("f16", r"f16 \| 2", "f16", "f16", DIM * 2),
                ("q8_0", r"Q8_0 \(34 bytes / 32\) \| 1\.0625", "q8_0", "q8_0", DIM // 32 * 34),
                ("q4_1", r"Q4_1 \(20 bytes / 32\) \| 0\.625", "q4_1", "q4_1", DIM // 32 * 20),
                ("file", r"\*\*the file\*\*: Q4_1 layers, Q8_0 head \| ", "q4_1", "q8_0", DIM // 32 * 34)]
    for name, head, layers_fmt, head_fmt, row_bytes in fmt_rows:
        layers_mb, head_mb, total_mb = weights_mb(layers_fmt, head_fmt, row_bytes)
        c.append(Claim(r"^\| " + head + r" ?\| ([\d.]+) MB \| ([\d.]+) MB \| (?:\*\*)?([\d.]+) MB(?:\*\*)? \| "
                       r"(?:\*\*)?(\d+) tokens/s",
                       [layers_mb, head_mb, total_mb, read_gbs * 1e3 / total_mb],
                       f"{name}: the weights' bytes and {read_gbs:.1f} GB/s / bytes per token"))
    f16_mb, q8_mb = weights_mb("f16", "f16", DIM * 2)[2], weights_mb("q8_0", "q8_0", DIM // 32 * 34)[2]
    kv_mb = KV_FP32_PER_TOKEN * CONTEXT / 1e6
    c += [Claim(r"\*\*(\d+) KB per cached token\*\* in fp32: ([\d.]+) MB at 512 tokens",
                [KV_FP32_PER_TOKEN / 1e3, kv_mb], "2 · 30 · 3 · 64 · 4 bytes, × 512"),
          Claim(r"\(f16 → Q8_0 is ([\d.]+)× fewer bytes per token; ([\d.]+)× once the ([\d.]+) MB",
                [f16_mb / q8_mb, (f16_mb + kv_mb) / (q8_mb + kv_mb), kv_mb], "f16 / Q8_0 bytes, without and with the KV"),
          Claim(r'token/s" on LLaMA-7B is ([\d.]+)×', [187 / 102], "the article's 187 / 102")]
    int8_mb = CONTEXT * (INT8_CODES_PER_TOKEN + INT8_SCALES_PER_TOKEN) / 1e6
    step_mb = med["decode/file"]["bytes"] / 1e6
    c += [Claim(r"INT8 KV, 512 × \((" + NUMBER + r") bytes of codes \+ (\d+) bytes of fp32$",
                [INT8_CODES_PER_TOKEN, INT8_SCALES_PER_TOKEN], "2 · 30 · 3 · 64 codes, 2 · 30 · 3 fp32 scales"),
          Claim(r"= ([\d.]+) MB, saves ([\d.]+) of the ([\d.]+) MB$", [int8_mb, kv_mb - int8_mb, step_mb],
                "the INT8 cache at 512 tokens, what it saves, the step's bytes (ch08-bench.json)"),
          Claim(r"^the step reads: (\d+)%", [100 * (kv_mb - int8_mb) / step_mb], "saved / read")]
    weights_file_mb = med["decode/file"]["weight_MB"]
    c += [Claim(r"the file's weights at (" + NUMBER + r") tokens of one sequence",
                [weights_file_mb * 1e6 / KV_FP32_PER_TOKEN], "96.6 MB / 46 080 bytes", rel=0.01),
          Claim(r"^server's step at B = 32 × 512 tokens reads (\d+) MB of KV", [32 * kv_mb], "32 × 23.6 MB")]

    # (a): one row per format, as tools/plot_ch08.py --tables prints them.
    table_a = "decode tokens/s | GB/s | % of read roof"
    for key, name in [("f32", r"f32 \(the file dequantized\)"), ("f16", "f16"), ("q8_0", "Q8_0"),
                      ("q4_1", "Q4_1 everywhere"), ("file", r"\*\*the file\*\* \(Q4_1 \+ Q8_0 head\)")]:
        d, p = med[f"decode/{key}"], med[f"prefill/{key}"]
        c.append(row(table_a, [name], [d["weight_MB"], d["kv_MB"], d["tokens/s"], d["GB/s"], d["read_pct"],
                                       d["roof_tokens/s"], p["tokens/s"]], f"(a) {key}: ch08-bench.json medians"))
    d = med["decode/file,kv=fp16"]
    c.append(row(table_a, ["the file, fp16 KV"], [d["weight_MB"], d["kv_MB"], d["tokens/s"], d["GB/s"], d["read_pct"],
                                                  d["roof_tokens/s"], None], "(a) fp16 KV: ch08-bench.json"))
    tps = {k: v["tokens/s"] for k, v in med.items()}
    c += [Claim(r"decodes at (\d+) tokens/s here \(median, 512 cached tokens\), ([\d.]+)×",
                [tps["decode/file"], tps["decode/file"] / tps["decode/f32"]], "the file's decode, / f32's"),
          Claim(r"dequantized to f32 \((\d+) tokens/s, (\d+) MB a token; an earlier version said 2\.9×: ([\d.]+) / ([\d.]+) =$",
                [tps["decode/f32"], med["decode/f32"]["weight_MB"], tps["decode/file"], tps["decode/f32"]],
                "f32 decode and bytes"),
          Claim(r"^  (\d\.\d+)\); Q8_0 decodes ([\d.]+)× faster than f16",
                [tps["decode/file"] / tps["decode/f32"], tps["decode/q8_0"] / tps["decode/f16"]], "ratios of medians"),
          Claim(r"^  (\d\.\d+)× \(the byte ratio is ([\d.]+)×, ([\d.]+)× with the KV\)",
                [tps["decode/q8_0"] / tps["decode/f16"], f16_mb / q8_mb,
                 med["decode/f16"]["bytes"] / med["decode/q8_0"]["bytes"]], "(a): Q8_0 / f16"),
          Claim(r"reaches only (\d+)% of the read roof$", [med["decode/f16"]["read_pct"]], "f16's read_pct"),
          Claim(r"^  and ([\d.]+)% of the FMA peak", [med["decode/f16"]["GFLOP/s"] / fma_peak * 100], "f16 GFLOP/s / peak"),
          Claim(r"do — while f32 streams at (\d+)%", [med["decode/f32"]["read_pct"]], "f32's read_pct"),
          Claim(r"— (\d+) vs (\d+) tokens/s, ([\d.]+)% slower",
                [tps["decode/file,kv=fp16"], tps["decode/file"], 100 * (1 - tps["decode/file,kv=fp16"] / tps["decode/file"])],
                "fp16 KV against fp32 KV"),
          Claim(r"coefficient of variation of either row \(([\d.]+)%, ([\d.]+)%\)",
                [100 * cv["decode/file,kv=fp16"]["tokens/s"], 100 * cv["decode/file"]["tokens/s"]], "the cv aggregates"),
          Claim(r"\((\d+)–(\d+) tokens/s\): 512 tokens use", [tps["prefill/q4_1"], tps["prefill/q8_0"]],
                "the prefill rows' range"),
          Claim(r"runs at the speed of chapter 07's fp32 GEMM \((\d+)–(\d+) GFLOP/s\)",
                [med["prefill/q4_1"]["GFLOP/s"], med["prefill/q8_0"]["GFLOP/s"]], "quantized prefill GFLOP/s")]
    # (b): the llama.cpp session.
    lc, lab_run = peer["llama_cpp"], peer["lab"]
    c += [row("| llama.cpp | the lab |", [r"decode tokens/s \(fp16 KV, context 512\)"],
              [lc["decode_tokens_per_s"], lab_run["decode_tokens_per_s"], peer["lab_over_llama_cpp_decode"]], "(b) decode"),
          row("| llama.cpp | the lab |", [r"prefill tokens/s \(512-token prompt\)"],
              [lc["prefill_tokens_per_s"], lab_run["prefill_tokens_per_s"], peer["lab_over_llama_cpp_prefill"]], "(b) prefill"),
          Claim(r"\((\d+) vs (\d+) tokens/s; (\d+) vs (\d+) tokens/s for a 512-token prompt",
                [lab_run["decode_tokens_per_s"], lc["decode_tokens_per_s"], lab_run["prefill_tokens_per_s"],
                 lc["prefill_tokens_per_s"]], "the peer session")]
    # (c): batched decode.
    one = med["decode_batch/1"]
    for b in (1, 2, 4, 8, 16, 32, 64):
        d = med[f"decode_batch/{b}"]
        c.append(row("| B | step | tokens/s |", [str(b)], [d["real_time"], d["tokens/s"], d["tokens/s"] / one["tokens/s"],
                                                          d["AI"], d["GFLOP/s"], d["GB/s"]], f"(c) B = {b}"))
    b32 = med["decode_batch/32"]
    bound = 32 * one["bytes"] / b32["bytes"]
    c += [Claim(r"^  the tokens/s of one \((\d+) vs (\d+)\), not the ([\d.]+)× a memory-bound step",
                [b32["tokens/s"], one["tokens/s"], bound], "(c): B = 32 against B = 1"),
          Claim(r"step would \(32 × ([\d.]+) MB at B = 1$", [one["bytes"] / 1e6], "B = 1's bytes"),
          Claim(r"^  against ([\d.]+) MB a step at B = 32", [b32["bytes"] / 1e6], "B = 32's bytes"),
          Claim(r"^step's bytes grow from ([\d.]+) MB at B = 1 to ([\d.]+) MB at B = 32 \(each sequence adds its ([\d.]+) MB",
                [one["bytes"] / 1e6, b32["bytes"] / 1e6, kv_mb], "(c)'s bytes"),
          Claim(r"32 × ([\d.]+) / ([\d.]+) = \*\*([\d.]+)×\*\*", [one["bytes"] / 1e6, b32["bytes"] / 1e6, bound],
                "the memory-bound gain: B × bytes(1) / bytes(B)"),
          Claim(r"the fp32 ridge \((\d+) / ([\d.]+) = ([\d.]+)\)", [fma_peak, read_gbs, fma_peak / read_gbs], "peak / bandwidth"),
          Claim(r"tokens at ≈ (\d+) tokens/s, \(a\)'s prefill rate: (\d+) ms\)",
                [tps["prefill/file"], 32e3 / tps["prefill/file"]], "32 tokens at the file's prefill rate"),
          Claim(r"attention reads 32 × ([\d.]+) MB = (\d+) MB of", [kv_mb, 32 * kv_mb], "32 sequences' KV"),
          Claim(r"\(INT8 KV: ([\d.]+) MB a sequence instead$", [int8_mb], "INT8 KV a sequence"),
          Claim(r"the gain is the byte ratio — ([\d.]+)× here", [bound], "the memory-bound gain")]
    # (d): perplexities.
    floor, file = quality["file dequantized to f32 (the floor)"], quality["file weights (Q4_1 + Q8_0 head), fp32 KV"]
    for name, ppl in quality.items():
        escaped = name.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")
        c.append(row("| PPL | vs the f32 floor |", [escaped],
                     [ppl, 100 * (ppl / floor - 1), 100 * (ppl / file - 1)], f"(d) {name}: ch08-quality.json"))
    return c

