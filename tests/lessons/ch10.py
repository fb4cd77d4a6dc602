"""Chapter 10's numbers: the all-reduce payload from the shapes, the measured all-reduce, the split
and the projection from docs/plots/ch10-parallelism.json, and the projection's bandwidth term."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_lessons import Claim, row  # noqa: E402

SMOLLM2_DIM, BENCH_DIM, LLAMA70_DIM, LLAMA70_LAYERS = 576, 768, 8192, 80
NVLINK_EACH_WAY, PCIE4_X16_ACHIEVED = 450e9, 25e9  # NVIDIA's H100 spec sheet; PCIe 4.0 x16 as transfers reach it
WRONG_BEFORE = [("It misses the middle sizes by up to 2.55×", "It misses the middle sizes by up to 2.4×"),
                ("8 H100s decode Llama-2-70B 6.6× faster", "8 H100s decode Llama-2-70B 6.2× faster"),
                ("| | 8 | 6.21 ms | 6.60 |", "| | 8 | 6.65 ms | 6.17 |")]


def claims(lab):
    d = lab.json("ch10-parallelism.json")
    ar = d["allreduce"]
    alpha, beta = ar["alpha_s"], ar["beta_s_per_byte"]
    by_bytes = {r["bytes"]: r["median_s"] for r in ar["rows"]}
    misses = {b: t / (alpha + beta * b) for b, t in by_bytes.items()}
    worst = max(misses, key=misses.get)
    assert worst == 4096, "the lesson names 4 KiB as the fit's worst miss"
    models = {(m["name"], m["ranks"]): m for m in d["models"]}
    proj = {(r["model"], r["gpus"], r["link"].split(" ")[0]): r for r in d["projection"]["rows"]}
    links = d["projection"]["links_s"]
    nvlink = next(v for k, v in links.items() if k.startswith("NVLink"))
    pcie = next(v for k, v in links.items() if k.startswith("PCIe"))
    ring_bytes_p8 = 2 * LLAMA70_DIM * 2 * 2 * 7 / 8
    c = [Claim(r"\(SmolLM2: 2 · 576 · 4 = (" + r"\d[\d ]*" + r")\)", [2 * SMOLLM2_DIM * 4], "2 · dim · 4"),
         Claim(r"^(\d[\d ]*) bytes at p = 2 for a 768-wide model", [2 * 2 * 1 / 2 * BENCH_DIM * 4], "2 · 2(p − 1)/p · dim · 4"),
         Claim(r"\((\d[\d ]*) for SmolLM2, (\d[\d ]*) for a 768-wide model\)", [2 * SMOLLM2_DIM * 4, 2 * BENCH_DIM * 4],
               "2 · dim · 4"),
         Claim(r"in 2 · layers \+ 1 all-reduces \((\d+) for SmolLM2's (\d+) layers\)",
               [models[("SmolLM2 (file)", 3)]["allreduces_per_decode_step"], 30], "counted: allreduces_per_decode_step"),
         row("| message | 4 B |", ["median time"], [by_bytes[4] * 1e6, by_bytes[256] * 1e6, by_bytes[4096] * 1e6,
                                                    by_bytes[65536] * 1e6, by_bytes[1 << 20] * 1e6, by_bytes[1 << 24] * 1e3],
             "(a): the all-reduce medians"),
         Claim(r"gives α = ([\d.]+) µs and 1/β = ([\d.]+)$", [alpha * 1e6, ar["bandwidth_bytes_per_s"] / 1e9], "the fit"),
         Claim(r"up to ([\d.]+)× \(([\d.]+) µs measured against ([\d.]+) µs fitted at 4 KiB;$",
               [misses[worst], by_bytes[worst] * 1e6, (alpha + beta * worst) * 1e6], f"the fit's worst miss, at {worst} B (4 KiB)"),
         Claim(r"decodes at (\d+) tokens/s split over 2 ranks of 1 thread against (\d+) whole$",
               [models[("bench q4_1", 2)]["decode_tokens_per_s"], models[("bench q4_1", 1)]["decode_tokens_per_s"]], "(b)"),
         Claim(r"on 2 threads \(([\d.]+)×; prefill ([\d.]+)×\)",
               [models[("bench q4_1", 2)]["decode_tokens_per_s"] / models[("bench q4_1", 1)]["decode_tokens_per_s"],
                models[("bench q4_1", 2)]["prefill_tokens_per_s"] / models[("bench q4_1", 1)]["prefill_tokens_per_s"]], "(b)"),
         Claim(r"a layer cost (\d+)% of the step over shared memory", [100 * models[("bench q4_1", 2)]
                                                                      ["median_collective_share_of_decode_step"]], "(b)")]
    for (name, ranks), m in models.items():
        label = {"bench q4_1": "`random:bench` Q4_1", "SmolLM2 (file)": r"SmolLM2 \(file\)"}[name]
        threads = f"{ranks} × {m['threads_per_rank']}"
        measured = m["measured_payload_bytes_per_token_per_layer"]
        c.append(row("| collectives, share of a decode step |", [label, threads],
                     [m["prefill_tokens_per_s"], m["decode_tokens_per_s"],
                      None if ranks == 1 else 100 * m["median_collective_share_of_decode_step"],
                      m["allreduces_per_decode_step"], None if ranks == 1 else measured], f"(b) {name}, {threads}"))
    # (c): the projection, as parallel_study.py --projection-only wrote it.
    c += [Claim(r"The latencies: \*\*([\d.]+) µs on H100 NVLink\*\*", [nvlink * 1e6], "links_s"),
          Claim(r"\*\*(\d+) µs over$", [pcie * 1e6], "links_s")]
    for model, label, layers_label in [("SmolLM2-135M fp16", r"SmolLM2-135M \(269 MB, 30 layers\)", None),
                                       ("Llama-2-70B fp16", r"Llama-2-70B shape \(137\.4 GB, 80 layers\)", None)]:
        for (m, gpus, link), r in sorted(proj.items()):
            if m != model or link != "NVLink":
                continue
            p = proj[(m, gpus, "PCIe")]
            c.append(row("| NVLink step | speed-up |", [label if gpus == 1 else "", str(gpus)],
                         [r["step_s"] * 1e3, r["speedup"], p["step_s"] * 1e3, p["speedup"]], f"(c) {model} on {gpus}"))
    smol, smol3 = proj[("SmolLM2-135M fp16", 1, "NVLink")], proj[("SmolLM2-135M fp16", 3, "NVLink")]
    llama8, llama8p = proj[("Llama-2-70B fp16", 8, "NVLink")], proj[("Llama-2-70B fp16", 8, "PCIe")]
    c += [Claim(r"8 H100s decode Llama-2-70B ([\d.]+)× faster than one over NVLink$", [llama8["speedup"]], "(c)"),
          Claim(r"^  \(([\d.]+)× over PCIe-class latency\)", [llama8p["speedup"]], "(c)"),
          Claim(r"its decode step \*\*([\d.]+)× slower\*\*: (\d+) all-reduces of ([\d.]+) µs \(([\d.]+) ms\)",
                [smol3["step_s"] / smol["step_s"], 60, nvlink * 1e6, 60 * nvlink * 1e3], "(c): SmolLM2 on 3"),
          Claim(r"^  (\d+) MB at 3\.35 TB/s \((\d+) µs\)", [269.1, smol["step_s"] * 1e6], "269.1 MB / 3.35 TB/s"),
          Claim(r"even a 70B model gets ([\d.]+)× from 8 GPUs", [llama8p["speedup"]], "(c)"),
          Claim(r"carry 2 · 8192 · 2 = (\d[\d ]*) bytes", [2 * LLAMA70_DIM * 2], "two fp16 all-reduces of 8192"),
          Claim(r"^ring sends 2\(p − 1\)/p from each rank, (\d[\d ]*) bytes at p = 8 — about ([\d.]+) µs a layer",
                [ring_bytes_p8, ring_bytes_p8 / NVLINK_EACH_WAY * 1e6], "the ring's share at NVLink's 450 GB/s"),
          Claim(r"900 GB/s in all\), (\d+) µs a step; and about ([\d.]+) µs a$",
                [LLAMA70_LAYERS * ring_bytes_p8 / NVLINK_EACH_WAY * 1e6, ring_bytes_p8 / PCIE4_X16_ACHIEVED * 1e6],
                "80 layers at NVLink; one layer at 25 GB/s"),
          Claim(r"PCI-SIG\), ([\d.]+) ms a step: ([\d.]+)% of the PCIe step",
                [LLAMA70_LAYERS * ring_bytes_p8 / PCIE4_X16_ACHIEVED * 1e3,
                 100 * LLAMA70_LAYERS * ring_bytes_p8 / PCIE4_X16_ACHIEVED / llama8p["step_s"]], "80 layers at 25 GB/s")]
    return c
