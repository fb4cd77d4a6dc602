#!/usr/bin/env bash
# GPU check: on a machine with an NVIDIA GPU, build the cuda configuration, run the cuda tests
# (ctest -L cuda: chapter 10's NCCL communicator among them, a world of one rank on one GPU) and
# the benchmarks, and write a short report. CI never needs this script: it
# proves the kernels on the SIMT emulator; this is the same check on real hardware.
#
#   tools/gpu-check.sh                     # build in build/gpu, report in build/gpu/gpu-report.md
#   BUILD_DIR=/tmp/b CUDA_ARCHS=90 tools/gpu-check.sh
#   BENCHES=bench_ch05 tools/gpu-check.sh        # one chapter's benchmark only
#   BENCHES=all BENCH_FILTER='L:2048' BENCH_MIN_TIME=0.2 tools/gpu-check.sh
#
# Benchmarks: by default the GPU families of bench_ch02 … bench_ch06, each filtered short (the
# whole script, build included, is meant to fit in about 8 minutes on an H100/H200-class GPU;
# each benchmark is stopped after BENCH_TIMEOUT seconds):
#   bench_ch02  every cuda/... prefill version over its sweep, plus cpu/blocked and cpu/openblas
#               at L = 2048, d = 128 for comparison;
#   bench_ch03  cuda/decode, fp32 and fp16 caches, L = 8192 and 32768, batch 1, 4, 16;
#   bench_ch04  cuda/decode_int8 (per-token and per-channel K scales) beside cuda/decode over
#               fp16 and fp32 caches, L = 4096 and 16384, batch 8 and 32 (every gpu_decode_ run);
#   bench_ch05  cuda/flash and cuda/flash_tc beside cuda/cublas and cuda/cublas_fp16, non-causal,
#               d = 128, L = 1024 … 16384 (every prefill_gpu/ run);
#   bench_ch06  cuda/decode over a contiguous fp16 cache and paged ones (blocks 1, 8, 16, 32, 128 in
#               scattered order), L = 8192 batch 16 and L = 32768 batch 4 (every paged_decode_gpu_ run);
#   bench_ch08  SmolLM2-135M through the resident cuda model runner: a decode step of B = 1 … 64
#               sequences at 512 cached tokens, and a 512-token prefill (decode_cuda/, prefill_cuda);
#               skipped, and said so, when the model is not installed (./inferlab setup needs PyPI);
#   bench_ch11  chapter 08's per-row __dp4a matmul beside chapter 11's tiled one (64 outputs × 16
#               rows a thread block), Q8_0 / Q4_0 / Q4_1 at SmolLM2's shapes, M = 1, 16, 64, 512
#               (every gemm_cuda/ run).
# Their JSON goes to $build/bench/<bench>.json, and tools/gpu_bench_report.py turns each into the
# report's sections: the GPU's measured ceilings, the side-by-side tables and the GPU
# targets (ch02: cuda/cublas ≥ 50% of SGEMM, cuda/tiled ≥ 5× cuda/naive; ch03: cuda/decode ≥ 80%
# of the copy bandwidth; ch04: INT8 ≥ 1.7× fp16 at batch ≥ 8, L ≥ 4096; ch05: cuda/flash_tc
# ≥ 300 TFLOP/s at L ≥ 4096 and faster than cuda/cublas at every L ≥ 1024; ch06: paged cuda/decode
# ≤ 1.10× contiguous from block 16 up). BENCHES=all runs
# every bench_* executable (their CPU families too: many minutes more); BENCH_FILTER replaces the
# filter for all of them.
#
# Exit status: 0 when the build, every cuda test and the benchmarks pass, 1 on a failure, 2 when
# no GPU/nvcc.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$(pwd)
build=${BUILD_DIR:-build/gpu}
benches=${BENCHES:-bench_ch02 bench_ch03 bench_ch04 bench_ch05 bench_ch06 bench_ch08 bench_ch11}
bench_filter=${BENCH_FILTER:-}
# The default filter of each benchmark (see above); one not listed runs whole ('.').
declare -A default_filter=(
  [bench_ch02]='cuda/|cpu/(blocked|openblas)/L:2048/d:128'
  [bench_ch03]='^decode_fp(32|16)/cuda/decode/L:(8192|32768)/'
  [bench_ch04]='^gpu_decode_'
  [bench_ch05]='^prefill_gpu/'
  [bench_ch06]='^paged_decode_gpu_'
  [bench_ch08]='^(decode|prefill)_cuda'
  [bench_ch11]='^gemm_cuda/'
)
bench_min_time=${BENCH_MIN_TIME:-0.1}
bench_timeout=${BENCH_TIMEOUT:-240}
jobs=${JOBS:-$(nproc)}
report=${REPORT:-$build/gpu-report.md}

die() { echo "gpu-check: $*" >&2; exit 2; }

command -v nvidia-smi >/dev/null 2>&1 || die "nvidia-smi not found: this machine has no NVIDIA driver"
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null | head -1)
[[ -n "$gpu" ]] || die "nvidia-smi sees no GPU"
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[[ -x "$nvcc" ]] || die "nvcc not found (install the CUDA toolkit or set CUDACXX)"
# Compile for this GPU only (half the nvcc time of "80;90"), unless CUDA_ARCHS says otherwise.
gpu_arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
archs=${CUDA_ARCHS:-${gpu_arch:-80;90}}

mkdir -p "$build/bench"
log="$build/gpu-check.log"
: >"$log"
status=0
step() { echo "== $*" | tee -a "$log"; }

step "configure ($build, sm ${archs})"
if ! cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DINFERLAB_CUDA=ON -DINFERLAB_DOCS=OFF \
     -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$archs" >>"$log" 2>&1; then
  echo "configure failed, see $log" >&2; exit 1
fi
grep -q "cuda backend ON" "$log" || { echo "configure did not enable the cuda backend, see $log" >&2; exit 1; }

step "build (-j$jobs)"
build_start=$(date +%s)
if ! cmake --build "$build" -j "$jobs" >>"$log" 2>&1; then
  echo "build failed, see $log" >&2; exit 1
fi
build_seconds=$(( $(date +%s) - build_start ))

step "ctest -L cuda"
ctest_out="$build/ctest-cuda.txt"
ctest --test-dir "$build" -L cuda --output-on-failure --timeout 600 >"$ctest_out" 2>&1 || status=1
cat "$ctest_out" >>"$log"
ctest_summary=$(grep -E "tests passed|No tests were found" "$ctest_out" | tail -1)
[[ -n "$ctest_summary" ]] || ctest_summary="(no summary: see $ctest_out)"

step "benchmarks (${benches}, min time ${bench_min_time} s, timeout ${bench_timeout} s each)"
bench_lines=()
bench_jsons=()
while IFS= read -r bench; do
  name=$(basename "$bench")
  [[ "$benches" == all || " $benches " == *" $name "* ]] || continue
  json="$build/bench/$name.json"
  if [[ $name == bench_ch08 && ! -f "$root/models/SmolLM2-135M-Instruct.Q4_1.gguf" ]]; then
    bench_lines+=("| $name | | skipped: models/SmolLM2-135M-Instruct.Q4_1.gguf not installed (./inferlab setup) | |")
    continue
  fi
  filter=${bench_filter:-${default_filter[$name]:-.}}
  cell_filter=${filter//|/\\|}  # a literal | would end the Markdown table cell
  echo "-- $name --benchmark_filter='$filter'" >>"$log"
  rm -f "$json"  # a file from an earlier run must not be reported as this one's
  bench_start=$(date +%s)
  timeout "$bench_timeout" "$bench" --benchmark_filter="$filter" --benchmark_min_time="$bench_min_time" \
    --benchmark_out="$json" --benchmark_out_format=json >>"$log" 2>&1
  code=$?
  seconds=$(( $(date +%s) - bench_start ))
  if (( code == 0 )); then
    bench_lines+=("| $name | \`$cell_filter\` | ok, ${seconds} s | bench/$name.json |")
  else
    bench_lines+=("| $name | \`$cell_filter\` | FAILED (exit $code$( (( code == 124 )) && echo ', timed out'), ${seconds} s) | see gpu-check.log |")
    status=1
  fi
  [[ -s "$json" ]] && bench_jsons+=("$json")
done < <(find "$build" -type f -executable -name 'bench_*' -not -path '*/CMakeFiles/*' | sort)
(( ${#bench_lines[@]} > 0 )) || bench_lines+=("| ($benches) | | not found in $build | |")
bench_report=""
if (( ${#bench_jsons[@]} > 0 )); then
  bench_report=$(python3 "$root/tools/gpu_bench_report.py" "${bench_jsons[@]}" 2>&1) || status=1
fi

{
  echo "# GPU check — $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "| | |"
  echo "| --- | --- |"
  echo "| GPU (name, driver, memory, compute capability) | $gpu |"
  echo "| nvcc | $("$nvcc" --version | tail -1) |"
  echo "| commit | $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with local changes)') |"
  echo "| build | $build, sm ${archs}, ${build_seconds} s |"
  echo "| ctest -L cuda | $ctest_summary |"
  echo
  if grep -q "tests failed" "$ctest_out"; then
    echo "## Failed tests"
    echo
    grep -E "^\s+[0-9]+ - " "$ctest_out" | sed 's/^/    /'
    echo
  fi
  echo "## Benchmarks"
  echo
  echo "| benchmark | filter | status | results |"
  echo "| --- | --- | --- | --- |"
  printf '%s\n' "${bench_lines[@]}"
  echo
  if [[ -n "$bench_report" ]]; then
    echo "$bench_report"
    echo
  fi
  echo "Full log: gpu-check.log"
} >"$report"

cat "$report"
exit $status
