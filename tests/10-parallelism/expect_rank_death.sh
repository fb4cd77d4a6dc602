#!/usr/bin/env bash
# The killed-rank test: runs `mpiexec … dying_rank` (its arguments) under a 60 s timeout and passes
# when mpiexec exits non-zero by itself (not 124: the timeout, a hang) and its output names the
# process that was killed — Open MPI 4.1 prints "mpiexec noticed that process rank N with PID …
# exited on signal 9 (Killed)".
set -u
output=$(timeout 60 "$@" 2>&1)
code=$?
echo "$output"
echo "== mpiexec exit code $code"
if [ "$code" -eq 0 ]; then echo "FAIL: the job succeeded although a rank died"; exit 1; fi
if [ "$code" -eq 124 ]; then echo "FAIL: the job hung (timeout 60 s) after a rank died"; exit 1; fi
if ! grep -Eq "process rank [0-9]+ .*(signal 9|Killed)" <<<"$output"; then
  echo "FAIL: mpiexec did not name the dead rank"; exit 1
fi
echo "PASS: the job ended (exit $code), naming the dead rank"
