"""Chapter 11's numbers: the ceilings and ridges from docs/plots/ch11-roofline-machine.json, the
predictions' answers (operations of an instruction, a GEMM's intensity and the batch at which it
crosses a ridge, the micro-kernel's bound) from their inputs, and the measured tables from
ch11-gemm.json, ch11-model.json and ch11-llama-cpp.json."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_lessons import NUMBER, Claim, row  # noqa: E402

ZMM_BITS = 512
GATE_OUT, GATE_IN, HEAD_OUT = 1536, 576, 49152  # SmolLM2-135M's gate/up matrix and its output head
Q8_0, Q4_1 = 34 / 32, 20 / 32  # bytes a weight
LAYERS, KV_HEADS, HEAD_DIM, CONTEXT = 30, 3, 64, 512
QUIET_INT8_GOPS, QUIET_READ_GBS, CH08_PEAK, CH08_READ = 1388, 31.0, 386, 33.5  # stated in the lesson
# Tile: MR = 4 rows × NV = 2 vectors, 8 chunks a Q8_0 block; around the vpdpbusd: 8 conversions, 8 multiplies,
# 8 FMAs, 2 scale conversions.
TILE_DPBUSD = 4 * 2 * 8
TILE_OTHER = 8 + 8 + 8 + 2
Q4_1_INSTRUCTIONS = 124  # "about 124": the lesson's count for Q4_1
# (the figure as the lesson prints it now, the wrong one it printed before): each must be caught.
WRONG_BEFORE = [("1.87 op/byte (x and y add 0.9%", "1.87 op/byte (x and y add 0.7%"),
                ("to 43–45% of the int8 ceiling", "to 43–56% of the int8 ceiling"),
                ("M = 64 … 512; 34–37% for the down", "M = 64 … 512; 34–42% for the down"),
                ("and Q4_0 reach 27–50% from M = 32 on", "and Q4_0 reach 33–50% from M = 32 on"),
                ("the 30 MB head at 33 GB/s by median", "the 30 MB head at 42 GB/s by median"),
                ("not the 11× a memory-bound step", "not the 5× a memory-bound step")]
# The prefill profile's shares (perf record, one uncommitted run): GEMM + quantization, attention, SwiGLU, norms + RoPE.
PROFILE = (55, 24, 8, 4)
L2_BYTES, ACTIVATION_BYTES, MR = 2 * 2 ** 20, 44, 4  # sysconf's L2 here; sizeof(Activation): d, s, start, 32 codes


def gemm_ai(m, out, inp, w):
    """2·M·out·in operations over the weights once plus x and y in fp32 (predictions.cpp's P11.3)."""
    return 2 * m * out * inp / (out * inp * w + 4 * m * inp + 4 * m * out)


def rows_at_ridge(ridge, out, inp, w):
    m = 1
    while gemm_ai(m, out, inp, w) < ridge:
        m += 1
    return m


def claims(lab):
    mach = lab.json("ch11-roofline-machine.json")
    peak, int8, triad, read = mach["peak_gflops"], mach["int8_gops"], mach["triad_gbs"], mach["read_gbs"]
    dots = {d["instruction"]: d["gops"] for d in mach["dot_ceilings"]}
    assert dots[mach["int8_instruction"]] == int8
    ops = 2 * ZMM_BITS // 8
    c = [row("| ceiling | instruction |", ["fp32 FMA", "vfmadd zmm"], [peak, 1.0], "peak_gflops"),
         row("| ceiling | instruction |", ["int8", r"\*\*vpdpbusd zmm \(AVX512-VNNI\)\*\*"], [int8, int8 / peak],
             "int8_gops, / the fp32 peak"),
         row("| ceiling | instruction |", ["int8", r"vpdpbusd ymm \(AVX512-VNNI, EVEX\)"],
             [dots["vpdpbusd ymm (AVX512-VNNI, EVEX)"], None], "dot_ceilings"),
         row("| ceiling | instruction |", ["int8", r"vpdpbusd ymm \(AVX-VNNI, VEX\)"],
             [dots["vpdpbusd ymm (AVX-VNNI, VEX)"], None], "dot_ceilings"),
         row("| ceiling | instruction |", ["int8", r"vpmaddubsw \+ vpmaddwd \+ vpaddd ymm \(AVX2\)"],
             [dots["vpmaddubsw+vpmaddwd ymm (AVX2)"], None], "dot_ceilings"),
         row("| ceiling | instruction |", ["bf16", r"vdpbf16ps zmm \(AVX512-BF16\)"], [mach["bf16_gflops"], None],
             "bf16_gflops"),
         Claim(r"^\| read bandwidth \| \| ([\d.]+) GB/s \(triad ([\d.]+)\)", [read, triad], "read_gbs, triad_gbs"),
         Claim(r"P11\.1: (\d+) products, each added: \*\*(\d+) operations\*\*, four times a zmm FMA's (\d+)",
               [ZMM_BITS // 8, ops, 2 * ZMM_BITS // 32], "512 bits of bytes, × 2; 16 fp32 lanes × 2"),
         Claim(r"the int8 ceiling is ([\d.]+)× the fp32 peak", [int8 / peak], "int8_gops / peak_gflops"),
         Claim(r"^(\d\.\d) G instructions a second a core: two a cycle at ([\d.]+) GHz",
               [QUIET_INT8_GOPS / 2 / ops, QUIET_INT8_GOPS / 2 / ops / 2], "1 388 GOP/s / 2 cores / 128; / 2 a cycle"),
         Claim(r"The fp32 ridge is ([\d.]+) / ([\d.]+) = ([\d.]+) op/byte", [peak, triad, peak / triad], "peak / triad"),
         Claim(r"^is (" + NUMBER + r") / ([\d.]+) = \*\*([\d.]+) op/byte\*\*", [int8, triad, int8 / triad], "int8 / triad")]

    # P11.3 and P11.4: the gate's intensity and the batch at each ridge.
    w_bytes = GATE_OUT * GATE_IN * Q8_0
    xy = 4 * (GATE_IN + GATE_OUT)
    c += [Claim(r"per 1\.0625 bytes of weight, ([\d.]+) op/byte \(x and y add ([\d.]+)%",
                [gemm_ai(1, GATE_OUT, GATE_IN, Q8_0), 100 * xy / w_bytes], "P11.3 at M = 1; x and y's bytes / the weights'"),
          Claim(r"^(" + NUMBER + r") of the weights; an earlier version said", [w_bytes], "1536 · 576 · 1.0625"),
          Claim(r"out·in / \(2·\(out \+ in\)\) = (\d+)$", [GATE_OUT * GATE_IN / (2 * (GATE_OUT + GATE_IN))],
                "the limit of P11.3 as M grows"),
          Claim(r"P11\.4: the gate \(Q8_0\) crosses the fp32 ridge at M = (\d+), the$",
                [rows_at_ridge(peak / triad, GATE_OUT, GATE_IN, Q8_0)], "the first M whose AI reaches peak / triad"),
          Claim(r"^int8 ridge at \*\*M = (\d+)\*\*; Q4_1's fewer bytes reach it at M = (\d+)\.",
                [rows_at_ridge(int8 / triad, GATE_OUT, GATE_IN, Q8_0), rows_at_ridge(int8 / triad, GATE_OUT, GATE_IN, Q4_1)],
                "the first M whose AI reaches int8 / triad"),
          Claim(r"this CPU's ridge \(386 / 33\.5 = ([\d.]+)\)\": that was", [CH08_PEAK / CH08_READ], "386 / 33.5"),
          Claim(r"B ≈ 32 \(386 / 33\.5 = ([\d.]+)\)\"\*\*", [CH08_PEAK / CH08_READ], "386 / 33.5"),
          Claim(r"packed block \(Q8_0, (\d+) bytes = 16 × 34\)", [16 * 34], "16 blocks of 34 bytes"),
          Claim(r"\(2 · 255 · 127 = (" + NUMBER + r") > 32 767\)", [2 * 255 * 127], "two u8 × s8 products"),
          Claim(r"keep every pair at or below (" + NUMBER + r")\.", [2 * 128 * 127], "2 · 128 · 127"),
          Claim(r"A block costs the tile (\d+) `vpdpbusd`", [TILE_DPBUSD], "4 rows × 2 vectors × 8 chunks"),
          Claim(r"at best (\d+) of every (\d+) vector instructions multiply, \*\*(\d+)% of the int8",
                [TILE_DPBUSD, TILE_DPBUSD + TILE_OTHER, 100 * TILE_DPBUSD / (TILE_DPBUSD + TILE_OTHER)], "64 / (64 + 26)"),
          Claim(r"second FMA: 64 of about 124, (\d+)%\.\)", [100 * TILE_DPBUSD / Q4_1_INSTRUCTIONS], "64 / 124"),
          Claim(r"^(\d+) KB\), so no KC blocking", [32 * GATE_OUT * Q8_0 / 1e3], "32 outputs × 1536 values, Q8_0")]

    # (a) and (b): ch11-gemm.json.
    g = lab.json("ch11-gemm.json")
    rows = {(r["format"], r["shape"], r["kernel"], r["M"]): r for r in g["rows"]}
    ladder = [("ch08", r"chapter 08: GGUF's rows, hadd trees"), ("avx2", r"packed, vpmaddubsw \+ vpmaddwd ymm"),
              ("avx-vnni", r"packed, vpdpbusd ymm"), ("packed", r"packed, vpdpbusd zmm")]
    gop = {k: rows[("Q8_0", "1536x576", k, 64)]["GOP/s"] for k, _ in ladder}
    previous = None
    for kernel, what in ladder:
        r = rows[("Q8_0", "1536x576", kernel, 64)]
        c.append(row("| kernel (Q8_0, 1536 × 576, M = 64) |", [kernel, what],
                     [r["GOP/s"], r["int8_pct_now"], None if previous is None else r["GOP/s"] / previous],
                     f"(a) {kernel}: GOP/s, int8_pct_now, × previous"))
        previous = r["GOP/s"]
    before_after = g["int8_gops_measured_before_and_after"]
    c += [Claim(r"ceiling moved between (\d+) and (" + NUMBER + r") GOP/s during this sweep",
                [min(before_after), max(before_after)], "int8_gops_measured_before_and_after"),
          Claim(r"AVX2 path — buys ([\d.]+)×; `vpdpbusd` on$", [gop["avx2"] / gop["ch08"]], "(a) avx2 / ch08"),
          Claim(r"^ymm ([\d.]+)× more; zmm's doubled lanes ([\d.]+)× more",
                [gop["avx-vnni"] / gop["avx2"], gop["packed"] / gop["avx-vnni"]], "(a)'s rungs"),
          Claim(r"Chapter 08's kernel ran at (\d+)% of the int8 ceiling\.", [rows[("Q8_0", "1536x576", "ch08", 64)]
                                                                        ["int8_pct_now"]], "(a) ch08"),
          Claim(r"ran at about (\d+)% \(([\d.]+)% here, \(a\) below\)",
                [rows[("Q8_0", "1536x576", "ch08", 64)]["int8_pct_now"]] * 2, "(a) ch08")]
    cell = r" (\d+) → \*\*(\d+)\*\* \((\d+)%\) ([\d.]+)× \|"
    for shape in ("1536x576", "576x1536", "49152x576"):
        for m in sorted({k[3] for k in rows if k[1] == shape}):
            values = []
            for fmt in ("Q8_0", "Q4_0", "Q4_1"):
                old, new = rows[(fmt, shape, "ch08", m)], rows[(fmt, shape, "packed", m)]
                values += [old["GOP/s"], new["GOP/s"], new["int8_pct_now"], new["GOP/s"] / old["GOP/s"]]
            c.append(Claim(r"^\| \| " + str(m) + r" \|" + cell * 3, values, f"(b) {shape}, M = {m}",
                           table=f"| {shape.replace('x', ' × ')} | M |"))

    def ratios(shapes, m_from):
        return [rows[(f, s, "packed", m)]["GOP/s"] / rows[(f, s, "ch08", m)]["GOP/s"]
                for (f, s, k, m) in rows if k == "packed" and s in shapes and m >= m_from]

    def pct(fmts, shapes, m_from):
        return [r["int8_pct_now"] for (f, s, k, m), r in rows.items() if k == "packed" and f in fmts and s in shapes
                and m >= m_from]
    at_m1 = [rows[(f, s, "packed", 1)]["GOP/s"] / rows[(f, s, "ch08", 1)]["GOP/s"] for (f, s, k, m) in rows
             if k == "packed" and m == 1]
    bound_q4 = 100 * TILE_DPBUSD / Q4_1_INSTRUCTIONS
    q4 = pct({"Q4_0", "Q4_1"}, {"1536x576", "576x1536", "49152x576"}, 32)
    above = [(k, r) for k, r in rows.items() if k[2] == "packed" and k[0] in ("Q4_0", "Q4_1") and k[3] >= 32
             and r["int8_pct_now"] > bound_q4]
    assert [k for k, _ in above] == [("Q4_1", "1536x576", "packed", 512)], "the lesson names Q4_1 at M = 512 alone"
    odd = above[0][1]
    q4_within = [p for p in q4 if p <= bound_q4]
    gate_from4, others_from4 = ratios({"1536x576"}, 4), ratios({"576x1536", "49152x576"}, 4)
    c += [Claim(r"^is ([\d.]+) op/byte, far below any ridge\) and the packed one does it ([\d.]+)–(\d+)× faster",
                [gemm_ai(1, GATE_OUT, GATE_IN, Q8_0), min(at_m1), max(at_m1)], "P11.3 at M = 1; (b)'s ratios at M = 1"),
          Claim(r"past the int8 ridge \(M ≈ (\d+) for Q8_0\)", [rows_at_ridge(int8 / triad, GATE_OUT, GATE_IN, Q8_0)],
                "P11.4"),
          Claim(r"^to (\d+)–(\d+)% of the int8 ceiling \(gate/up, M = 64 … 512; (\d+)–(\d+)% for the down matrix",
                [min(pct({"Q8_0"}, {"1536x576"}, 64)), max(pct({"Q8_0"}, {"1536x576"}, 64)),
                 min(pct({"Q8_0"}, {"576x1536"}, 64)), max(pct({"Q8_0"}, {"576x1536"}, 64))],
                "(b): Q8_0's int8_pct_now past the ridge"),
          Claim(r"against the micro-kernel's (\d+)% bound", [100 * TILE_DPBUSD / (TILE_DPBUSD + TILE_OTHER)], "64 / 90"),
          Claim(r"^and Q4_0 reach (\d+)–(\d+)% from M = 32 on", [min(q4_within), max(q4_within)],
                "(b): Q4_0 and Q4_1 from M = 32, every shape, under their bound"),
          Claim(r"^bound to about (\d+)%; Q4_1's (\d+)% at M = 512", [bound_q4, odd["int8_pct_now"]], "64 / 124; (b)"),
          Claim(r"^fell to (\d+) GOP/s\)", [odd["int8_now_GOP/s"]], "int8_now_GOP/s of Q4_1, 1536 × 576, M = 512"),
          Claim(r"(\d+)–(\d+)× from M = 4 on for the gate/up shape \((\d+)–(\d+)× for the$",
                [min(gate_from4), max(gate_from4), min(others_from4), max(others_from4)], "(b)'s ratios from M = 4")]

    # (c): ch11-model.json.
    mod = {r["name"]: r for r in lab.json("ch11-model.json")["rows"]}
    pre, dec = mod["prefill/file"], mod["decode/file,kv=fp16"]
    weights_mb = next(b for b in lab.json("ch08-bench.json")["benchmarks"]
                      if b["name"].startswith("decode/file/") and b.get("aggregate_name") == "median")["weight_MB"]
    kv16_mb = 2 * LAYERS * KV_HEADS * HEAD_DIM * 2 * CONTEXT / 1e6
    c += [row("| chapter 08 GEMM | chapter 11 GEMM |", [r"prefill, 512 tokens \(tokens/s\)"],
              [pre["ch08_tokens/s"], pre["packed_tokens/s"], pre["packed_over_ch08"]], "(c) prefill"),
          row("| chapter 08 GEMM | chapter 11 GEMM |", [r"decode, batch 1, fp16 KV, 512 cached \(tokens/s\)"],
              [dec["ch08_tokens/s"], dec["packed_tokens/s"], dec["packed_over_ch08"]], "(c) decode"),
          Claim(r"the packed prefill's rounds were (\d+), (\d+), (\d+) tokens/s", pre["packed_tokens/s_rounds"],
                "packed_tokens/s_rounds"),
          Claim(r"^(\d+), (\d+), (\d+): this is the spread", dec["packed_tokens/s_rounds"], "packed_tokens/s_rounds"),
          Claim(r"The prefill is ([\d.]+)× faster", [pre["packed_over_ch08"]], "(c)"),
          Claim(r"^(\d+) GOP/s over all its operations, about (\d+)% of the int8 ceiling \((" + NUMBER + r") GOP/s\)",
                [pre["packed_GFLOP/s"], 100 * pre["packed_GFLOP/s"] / int8, int8], "(c) prefill's GOP/s / int8_gops"),
          Claim(r"Decode at batch 1 gains ([\d.]+)×", [dec["packed_over_ch08"]], "(c)"),
          Claim(r"Its (\d+) tokens/s read ([\d.]+) GB/s \(([\d.]+) MB of weights and ([\d.]+) MB of fp16 KV",
                [dec["packed_tokens/s"], dec["packed_GB/s"], weights_mb, kv16_mb],
                "(c); ch08-bench.json's weight_MB; 2 · 30 · 3 · 64 · 2 · 512"),
          Claim(r"^(\d+)% of the read roof of `ch11-roofline-machine.json` \(([\d.]+) GB/s, measured busy\), (\d+)% of the",
                [100 * dec["packed_GB/s"] / read, read, 100 * dec["packed_GB/s"] / QUIET_READ_GBS], "GB/s / read_gbs; / 31.0"),
          Claim(r"the (\d+) MB head at", [HEAD_OUT * GATE_IN * Q8_0 / 1e6], "49152 × 576 in Q8_0")]
    base32, base8 = mod["decode_batch/1"], mod["decode_batch,kv=int8/1"]
    for b in (1, 2, 4, 8, 16, 32, 64):
        f, i = mod[f"decode_batch/{b}"], mod[f"decode_batch,kv=int8/{b}"]
        c.append(Claim(r"^\| " + str(b) + r" \| (\d+) → (\d+) \| ([\d.]+)× \| (\d+) → (\d+) \| ([\d.]+)× \| ([\d.]+) \|",
                       [f["ch08_tokens/s"], f["packed_tokens/s"], f["packed_tokens/s"] / base32["packed_tokens/s"],
                        i["ch08_tokens/s"], i["packed_tokens/s"], i["packed_tokens/s"] / base8["packed_tokens/s"],
                        i["packed_AI"]], f"(c) batched decode, B = {b}", table="| B | fp32 KV: ch08 → packed"))
    i32 = mod["decode_batch,kv=int8/32"]
    c += [Claim(r"\*\*([\d.]+)× at B = 32 with INT8 KV\*\*", [i32["packed_tokens/s"] / base8["packed_tokens/s"]], "(c)"),
          Claim(r"the step's intensity \((\d+) op/byte\) is$", [i32["packed_AI"]], "(c) INT8 KV, B = 32"),
          Claim(r"^below the int8 ridge \(([\d.]+)\)", [int8 / triad], "int8 / triad"),
          Claim(r"at B = 32 \(AI ([\d.]+)\) the batched decode", [mod["decode_batch/32"]["ch08_AI"]],
                "chapter 08's B = 32 step")]

    # (d): ch11-llama-cpp.json.
    peer = lab.json("ch11-llama-cpp.json")
    lc, new, old = peer["llama_cpp"], peer["lab"], peer["lab_ch08_gemm"]
    for key, label in (("prefill_tokens_per_s", r"prefill tokens/s \(512 tokens\)"),
                       ("decode_tokens_per_s", r"decode tokens/s \(fp16 KV, context 512\)")):
        c.append(row("| 2 threads, the same file |", [label], [lc[key], old[key], new[key], new[key] / lc[key]], f"(d) {key}"))
    c += [Claim(r"prefill from ([\d.]+)× llama\.cpp to ([\d.]+)×, and its decode from$",
                [old["prefill_tokens_per_s"] / lc["prefill_tokens_per_s"], peer["lab_over_llama_cpp_prefill"]], "(d)"),
          Claim(r"^([\d.]+)× to ([\d.]+)×\. The ratios move",
                [old["decode_tokens_per_s"] / lc["decode_tokens_per_s"], peer["lab_over_llama_cpp_decode"]], "(d)"),
          Claim(r"^([\d.]+)× and ([\d.]+)×\. llama\.cpp here", [722 / 142, 139 / 63], "the earlier run: 722 / 142, 139 / 63")]
    # The head's GEMV (M = 1, Q8_0, packed) in ch11-gemm.json: the median and the best call's GB/s.
    head = next(r for r in lab.json("ch11-gemm.json")["rows"] if r["format"] == "Q8_0" and r["shape"] == "49152x576"
                and r["kernel"] == "packed" and r["M"] == 1)
    c.append(Claim(r"the \d+ MB head at (\d+) GB/s by median, (\d+) by its best call", [head["GB/s"], head["best_GOP/s"] / head["AI"]],
                   "GB/s; best_GOP/s / AI"))
    # MC (kernels/quant/cpu_packed_microkernel.h): half the L2 over a row's activations, a multiple of MR.
    mc = (L2_BYTES // 2) // ((GATE_IN // 32) * ACTIVATION_BYTES) // MR * MR
    c.append(Claim(r"^~(" + NUMBER + r") rows of 576 values", [mc], "1 MiB / (18 blocks × 44 B), to the hundred", rel=50 / mc))
    c.append(Claim(r"^RoPE at 4%, the remaining (\d+)% elsewhere", [100 - sum(PROFILE)], "100 − 55 − 24 − 8 − 4"))
    # A memory-bound step's speed-up at B = 32: B × the bytes of a B = 1 step / the bytes of a B = 32 step.
    step = {b: b * mod[f"decode_batch,kv=int8/{b}"]["packed_GB/s"] / mod[f"decode_batch,kv=int8/{b}"]["packed_tokens/s"]
            for b in (1, 32)}
    c += [Claim(r"not the (\d+)× a memory-bound step would give \((\d+)$", [32 * step[1] / step[32], 32],
                "32 × bytes(1) / bytes(32)"),
          Claim(r"^tokens for (\d+) MB a step against 1 for (\d+) MB, the bytes of ch11-model\.json",
                [step[32] * 1e3, step[1] * 1e3], "GB/s / tokens/s × B")]
    return c
