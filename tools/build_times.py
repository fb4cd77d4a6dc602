#!/usr/bin/env python3
"""Where a build's time went, from its folder's .ninja_log: job seconds by top-level folder and by
compiler (nvcc, g++, links), and the slowest steps.

Job seconds are the sum of each step's wall time, so on N cores a build's wall time is roughly
their total over N. Ninja keeps one line per output (the latest build of it), so a log of a
build folder that was built several times mixes the builds: measure a fresh folder, or pass
--since-last to keep only the steps of the last `ninja` run (the steps whose start is after the
log's last restart of the clock).

  python3 tools/build_times.py build/default            # the breakdown
  python3 tools/build_times.py build/default --top 25   # and the 25 slowest steps
  python3 tools/build_times.py build/a build/b          # two folders side by side (before, after)
"""
import argparse
import collections
import os
import sys


def read_log(folder, since_last):
    """{output: seconds} of the steps in folder/.ninja_log, or in the log file given (the latest
    line for each output)."""
    path = folder if os.path.isfile(folder) else os.path.join(folder, ".ninja_log")
    if not os.path.exists(path):
        sys.exit(f"build_times: no {path} (is {folder} a Ninja build folder that was built?)")
    runs = [[]]  # ninja's clock restarts at 0 with each run: split the log where it goes back
    latest_start = 0
    with open(path) as log:
        for line in log:
            if line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 4:
                continue
            start, end, output = int(fields[0]), int(fields[1]), fields[3]
            if start < 1000 and latest_start > 10000:  # (lines come in finishing order)
                runs.append([])
                latest_start = 0
            latest_start = max(latest_start, start)
            runs[-1].append((start, end, output))
    steps = runs[-1] if since_last else [step for run in runs for step in run]
    seconds = {}
    for start, end, output in steps:
        seconds[output] = (end - start) / 1000.0
    return seconds


def kind(output):
    """What made the output: nvcc (a .cu object), g++ (another object), pch, link, other."""
    if output.endswith(".cu.o"):
        return "nvcc"
    if output.endswith((".hxx.gch", ".hxx.pch")):
        return "pch"
    if output.endswith(".o"):
        return "g++"
    if output.endswith((".a", ".so")) or "." not in os.path.basename(output):
        return "link"
    return "other"


def top_folder(output):
    """The source folder an output belongs to: the first path component (CMakeFiles, a program
    at the top or an absolute path: the root)."""
    first = output.split("/", 1)[0]
    return "(root)" if first in ("CMakeFiles", "") or "/" not in output else first


def breakdown(seconds):
    by_folder = collections.Counter()
    by_kind = collections.Counter()
    nvcc_by_folder = collections.Counter()
    for output, s in seconds.items():
        by_folder[top_folder(output)] += s
        by_kind[kind(output)] += s
        if kind(output) == "nvcc":
            nvcc_by_folder[top_folder(output)] += s
    return by_folder, by_kind, nvcc_by_folder


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", help="build folders (each with a .ninja_log), or .ninja_log files")
    parser.add_argument("--top", type=int, default=15, help="how many of the slowest steps to list (default 15)")
    parser.add_argument("--since-last", action="store_true", help="only the steps of the log's last ninja run")
    args = parser.parse_args()

    logs = [read_log(folder, args.since_last) for folder in args.folders]
    tables = [breakdown(seconds) for seconds in logs]
    width = max(12, *(len(f) for f in args.folders))
    header = f"{'':24}" + "".join(f"{f:>{width + 2}}" for f in args.folders)

    def section(title, index):
        keys = sorted({k for table in tables for k in table[index]},
                      key=lambda k: -max(table[index].get(k, 0) for table in tables))
        print(f"\n{title}\n{header}")
        for key in keys:
            print(f"  {key:22}" + "".join(f"{tables[i][index].get(key, 0):>{width + 2}.0f}" for i in range(len(tables))))

    print(f"job seconds (sum of the steps' wall times) from .ninja_log")
    print(header)
    print(f"  {'all':22}" + "".join(f"{sum(seconds.values()):>{width + 2}.0f}" for seconds in logs))
    print(f"  {'steps':22}" + "".join(f"{len(seconds):>{width + 2}d}" for seconds in logs))
    section("by folder", 0)
    section("by tool (nvcc: .cu objects; pch: precompiled headers; link: archives and programs)", 1)
    section("nvcc by folder", 2)
    for folder, seconds in zip(args.folders, logs):
        print(f"\nthe {args.top} slowest steps of {folder}")
        for output, s in sorted(seconds.items(), key=lambda item: -item[1])[:args.top]:
            print(f"  {s:7.1f} s  {output}")


if __name__ == "__main__":
    main()
