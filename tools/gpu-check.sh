#!/usr/bin/env bash
# GPU check: on a machine with an NVIDIA GPU, build the cuda configuration, run the cuda tests
# (ctest -L cuda) and the benchmarks, and write a short report. CI never needs this script: it
# proves the kernels on the SIMT emulator; this is the same check on real hardware.
#
#   tools/gpu-check.sh                     # build in build/gpu, report in build/gpu/gpu-report.md
#   BUILD_DIR=/tmp/b CUDA_ARCHS=90 tools/gpu-check.sh
#   BENCH_FILTER='attention' BENCH_MIN_TIME=0.2 tools/gpu-check.sh
#
# Exit status: 0 when the build and every cuda test pass, 1 on a failure, 2 when no GPU/nvcc.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
root=$(pwd)
build=${BUILD_DIR:-build/gpu}
archs=${CUDA_ARCHS:-80;90}
bench_filter=${BENCH_FILTER:-.}
bench_min_time=${BENCH_MIN_TIME:-0.1}
jobs=${JOBS:-$(nproc)}
report=${REPORT:-$build/gpu-report.md}

die() { echo "gpu-check: $*" >&2; exit 2; }

command -v nvidia-smi >/dev/null 2>&1 || die "nvidia-smi not found: this machine has no NVIDIA driver"
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>/dev/null | head -1)
[[ -n "$gpu" ]] || die "nvidia-smi sees no GPU"
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[[ -x "$nvcc" ]] || die "nvcc not found (install the CUDA toolkit or set CUDACXX)"

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

step "benchmarks (filter '$bench_filter')"
bench_lines=()
while IFS= read -r bench; do
  name=$(basename "$bench")
  json="$build/bench/$name.json"
  if timeout 900 "$bench" --benchmark_filter="$bench_filter" --benchmark_min_time="$bench_min_time" \
       --benchmark_out="$json" --benchmark_out_format=json >>"$log" 2>&1; then
    bench_lines+=("| $name | ok | bench/$name.json |")
  else
    bench_lines+=("| $name | FAILED (exit $?) | see gpu-check.log |")
    status=1
  fi
done < <(find "$build" -type f -executable -name 'bench_*' -not -path '*/CMakeFiles/*' | sort)

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
  echo "| benchmark | status | results |"
  echo "| --- | --- | --- |"
  printf '%s\n' "${bench_lines[@]}"
  echo
  echo "Full log: gpu-check.log"
} >"$report"

cat "$report"
exit $status
