#!/usr/bin/env python3
"""Chapter 08's peer benchmark: the same GGUF file through llama.cpp, beside the lab, in one run.

llama.cpp comes from PyPI's llama-cpp-python, built from source for this machine (about 10–15
minutes on 2 cores; it is not a dependency of the lab or its tests):

    python3 -m venv build/venv-llama
    CMAKE_ARGS="$(python3 chapters/08-real-model/llama_cpp_peer.py --print-cmake-args)" \
        build/venv-llama/bin/pip install llama-cpp-python==0.3.36
    GOMP_SPINCOUNT=1000 build/venv-llama/bin/python chapters/08-real-model/llama_cpp_peer.py \
        --lab build/default/chapters/bench_ch08 --out docs/plots/ch08-llama-cpp.json

--print-cmake-args prints llama.cpp's instruction-set switches from this CPU's own flags
(/proc/cpuinfo): GGML_NATIVE=ON where the CPU has no AMX; where it has AMX, the sets it reports
with AMX off — llama.cpp built with -DGGML_NATIVE=ON crashed in its AMX path on any batch of more
than one token inside the lab's VM. An earlier version of this comment listed fixed switches,
-DGGML_AVX_VNNI=ON among them: that is Intel's VEX-encoded AVX-VNNI, which AMD Zen 4 does not have
(it has the EVEX AVX512-VNNI only), and the build died there with SIGILL. With a -DGGML_NATIVE=ON
build, --no-extra-buffer-types avoids the AMX path too, and turns off the repacked-weight buffers
with it.

What it measures, with the lab's benchmark's own conventions (bench.cpp (a)):
  prefill  the first 512 tokens of chapters/08-real-model/data/alice-chapter-1.txt in one call
           (llama.cpp's batch of 512), logits for the last one: tokens/s;
  decode   then 128 greedy tokens one at a time, at context 512 … 640: tokens/s of each step.
Both with 2 threads, a context of 1024 and llama.cpp's default f16 KV cache; the medians of
--repetitions runs. Then, unless --lab is omitted, the lab's decode/file,kv=fp16 (the file's weights
over an fp16 cache, as llama.cpp's) and prefill/file rows (bench_ch08 with the same repetitions),
and the ratios lab / llama.cpp.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def llama_cpp_run(model, text, threads, repetitions, decode_tokens, extra_buffer_types):
    import llama_cpp  # noqa: imported here so that --help works without it
    import llama_cpp.llama
    import numpy as np

    if not extra_buffer_types:
        # llama.cpp's "extra buffer types" (AMX tiles, weights repacked for its GEMM) off: built
        # with -march=native on a CPU that reports AMX, its AMX path crashed (SIGSEGV) on any
        # batch of more than one token inside this lab's VM.
        defaults = llama_cpp.llama_model_default_params

        def without_extra():
            params = defaults()
            params.use_extra_bufts = False
            return params

        llama_cpp.llama.llama_cpp.llama_model_default_params = without_extra

    llm = llama_cpp.Llama(model_path=model, n_ctx=1024, n_batch=512, n_threads=threads,
                          n_threads_batch=threads, logits_all=False, verbose=False)
    ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
    if len(ids) < 512:
        sys.exit(f"the text has {len(ids)} tokens; 512 are needed")
    prompt = ids[:512]
    vocab = llm.n_vocab()

    def greedy():  # the argmax of the last evaluated token's logits (llama.cpp keeps only those)
        return int(np.argmax(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(vocab,))))

    prefill, decode = [], []
    generated = None
    for _ in range(repetitions):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        prefill.append(time.perf_counter() - t0)
        tokens, steps = [], []
        token = greedy()
        for _ in range(decode_tokens):
            tokens.append(token)
            t0 = time.perf_counter()
            llm.eval([token])
            steps.append(time.perf_counter() - t0)
            token = greedy()
        decode.append(statistics.median(steps))
        generated = tokens
    return {
        "version": llama_cpp.__version__,
        "threads": threads,
        "extra_buffer_types": extra_buffer_types,
        "prompt_tokens": len(prompt),
        "decode_tokens": decode_tokens,
        "prefill_seconds_median": statistics.median(prefill),
        "prefill_tokens_per_s": len(prompt) / statistics.median(prefill),
        "decode_step_seconds_median": statistics.median(decode),
        "decode_tokens_per_s": 1.0 / statistics.median(decode),
        "first_generated_ids": generated[:16],
    }


def cmake_args():
    """llama.cpp's CMake switches for this CPU (the module comment)."""
    flags = set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    if "amx_int8" not in flags and "amx_tile" not in flags:
        return "-DGGML_NATIVE=ON"
    switches = {"GGML_AVX": "avx", "GGML_AVX2": "avx2", "GGML_FMA": "fma", "GGML_F16C": "f16c", "GGML_BMI2": "bmi2",
                "GGML_AVX512": "avx512f", "GGML_AVX512_VBMI": "avx512vbmi", "GGML_AVX512_VNNI": "avx512_vnni",
                "GGML_AVX512_BF16": "avx512_bf16", "GGML_AVX_VNNI": "avx_vnni"}
    args = ["-DGGML_NATIVE=OFF"] + [f"-D{name}={'ON' if flag in flags else 'OFF'}" for name, flag in switches.items()]
    return " ".join(args + ["-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"])


def lab_run(binary, model, repetitions, quant_gemm=None):
    env = dict(os.environ)
    if quant_gemm:
        env["INFERLAB_QUANT_GEMM"] = quant_gemm  # "ch08": the lab's previous GEMM (chapter 11's ladder)
    out = subprocess.run(
        [binary, "--model", model, "--no-quality", "--benchmark_filter=^(decode/file,kv=fp16|prefill/file)/",
         f"--benchmark_repetitions={repetitions}", "--benchmark_report_aggregates_only=true",
         "--benchmark_format=json"],
        check=True, capture_output=True, text=True, env=env).stdout
    runs = json.loads(out)["benchmarks"]
    # the medians over the repetitions (with one repetition Google Benchmark writes no aggregate)
    rows = {b["run_name"]: b for b in runs if b.get("aggregate_name") == "median"} or \
        {b["run_name"]: b for b in runs if b.get("run_type") == "iteration"}
    return {
        "decode_tokens_per_s": rows["decode/file,kv=fp16/manual_time"]["tokens/s"],
        "prefill_tokens_per_s": rows["prefill/file/manual_time"]["tokens/s"],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    p.add_argument("--text", default=os.path.join(ROOT, "chapters", "08-real-model", "data", "alice-chapter-1.txt"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repetitions", type=int, default=5)
    p.add_argument("--decode-tokens", type=int, default=128)
    p.add_argument("--no-extra-buffer-types", action="store_true",
                   help="turn off llama.cpp's AMX and repacked-weight buffers (use_extra_bufts = false)")
    p.add_argument("--lab", help="the lab's bench_ch08 binary, to run its rows in the same session")
    p.add_argument("--lab-ch08", action="store_true",
                   help="also run the lab's rows with chapter 08's GEMM (INFERLAB_QUANT_GEMM=ch08), same session")
    p.add_argument("--out", help="write the figures as JSON")
    p.add_argument("--print-cmake-args", action="store_true",
                   help="print llama.cpp's CMake switches for this CPU (see above) and exit")
    args = p.parse_args()
    if args.print_cmake_args:
        print(cmake_args())
        return
    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    result = {"machine": f"{cpu}, {os.cpu_count()} CPUs", "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT", "unset"),
              "command": " ".join(sys.argv), "model": os.path.basename(args.model),
              "llama_cpp": llama_cpp_run(args.model, text, args.threads, args.repetitions, args.decode_tokens,
                                               not args.no_extra_buffer_types)}
    if args.lab:
        result["lab"] = lab_run(args.lab, args.model, args.repetitions)
        for key in ("decode_tokens_per_s", "prefill_tokens_per_s"):
            result["lab_over_llama_cpp_" + key.split("_")[0]] = result["lab"][key] / result["llama_cpp"][key]
        if args.lab_ch08:
            result["lab_ch08_gemm"] = lab_run(args.lab, args.model, args.repetitions, "ch08")
    text_out = json.dumps(result, indent=2)
    print(text_out)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text_out + "\n")


if __name__ == "__main__":
    main()
