#!/usr/bin/env python3
"""cuda-run: compile one plain CUDA file for the SIMT emulator, run it, and summarise like
compute-sanitizer. The front door is `./inferlab cuda-run` (which builds the emulator first);
docs/pages/cuda-run.md says what CUDA it accepts and what it rejects."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cuda_translate  # noqa: E402

USAGE = """\
usage: ./inferlab cuda-run [options] FILE.cu [program arguments...]

Compiles one CUDA source file (with its own main()) for the SIMT emulator — the CPU that runs
the lab's kernels — and runs it with the emulator's checks, like compute-sanitizer on a GPU:

  ./inferlab cuda-run my_kernel.cu 1024
  ...the program's output...
  ========= ERROR SUMMARY: 0 errors

Accepted: <cuda_runtime.h>, <cuda_fp16.h>, <cuda_bf16.h>, kernel<<<grid, block[, smem[, stream]]>>>(...)
(template kernels with or without their template arguments), extern __shared__ T name[] (block
or namespace scope), static __shared__,
the runtime calls the emulator provides (cudaMalloc, cudaMemcpy, cudaMemset, streams, events, ...),
__syncthreads, __shfl_*_sync and the other warp collectives, atomics, printf in kernels,
<cublas_v2.h> (the GEMM calls the lab uses) and <mma.h> (the m16n16k16 WMMA model).
Rejected, with the construct and its line: cooperative groups, cuRAND, Thrust/CUB/libcu++,
inline PTX (asm), dynamic parallelism (a launch or runtime call in device code), system-scope
fences and atomics, texture/surface memory, unified memory (cudaMallocManaged, __managed__),
graphs and runtime calls the emulator does not provide. Streams are accepted, but every launch
and copy runs synchronously (kernels never overlap).

options (before FILE.cu; everything after it goes to the program):
  --schedule S      thread order inside blocks: forward (default), reverse, random:SEED
  --workers N       OS threads that run blocks (default: the number of cores)
  --leak-check      count device memory still allocated at exit as an error
  --translate-only  print the C++ that would be compiled (and any rejections), run nothing
  --verbose         print the compile command and where the program was built
  --config PATH     the build's cuda_run.conf (default: build/$INFERLAB_PRESET/tools/cuda-run/,
                    preset 'default')
  -h, --help        this text

Exit status: 0 when the program exited 0 and no check fired; 1 when a check fired; the program's
own status when it failed; 128+N when it died of signal N; 2 when FILE.cu was rejected or does
not compile. Error reports name FILE.cu's own lines (the translation keeps every line in place).
Environment: SIMT_SCHEDULE, SIMT_WORKERS (and the emulator's other settings, e.g. which checks
run) work as for every emulator program; SIMT_QUIET is ignored (the summary counts the reports)."""

PREFIX = "========="
# Reports of the asan / tsan presets' sanitizers (their runtimes check there instead of the emulator).
SANITIZER_REPORT = re.compile(rb"^==\d+==ERROR: AddressSanitizer|^WARNING: ThreadSanitizer:|: runtime error: ")
SIGNAL_WHY = {
    signal.SIGSEGV: "invalid memory access",
    signal.SIGBUS: "bus error (misaligned or unmapped memory)",
    signal.SIGFPE: "arithmetic exception (integer division by zero?)",
    signal.SIGILL: "illegal instruction",
    signal.SIGABRT: "aborted (a failed assert, an uncaught exception, or heap corruption)",
    signal.SIGKILL: "killed (out of memory?)",
}


class Failure(Exception):
    """Stops cuda-run with a message and an exit status."""

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


# ---- configuration -----------------------------------------------------------------------------

def default_config_path() -> str:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    preset = os.environ.get("INFERLAB_PRESET") or "default"
    return os.path.join(root, "build", preset, "tools", "cuda-run", "cuda_run.conf")


def read_config(path: str) -> dict:
    if not os.path.isfile(path):
        raise Failure(f"cuda-run: no build configuration at {path}\n"
                      "  run ./inferlab cuda-run FILE.cu (it configures and builds the emulator), or pass --config")
    config = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                config[key.strip()] = value
    return config


def as_list(value: str) -> list:
    return [item for item in value.split(";") if item.strip()]


def dedupe_keep_last(items: list) -> list:
    """Link order: a library must precede what it depends on, so the last mention wins."""
    seen = set()
    out = []
    for item in reversed(items):
        if item not in seen:
            seen.add(item)
            out.append(item)
    return list(reversed(out))


def _compile_flags(config: dict) -> list:
    """Compiler, flags, definitions and include directories of a target linking inferlab::simt."""
    system = {os.path.normpath(d) for d in as_list(config.get("system_include_dirs", ""))}
    command = [config["compiler"]] + shlex.split(config.get("cxx_flags", ""))
    if config.get("std_flag"):
        command.append(config["std_flag"])
    command += ["-D" + d for d in as_list(config.get("compile_definitions", ""))]
    command += ["-I" + config["prelude_dir"]]
    for d in as_list(config.get("include_dirs", "")):
        command += ["-isystem", d] if os.path.normpath(d) in system else ["-I" + d]
    for d in sorted(system - {os.path.normpath(x) for x in as_list(config.get("include_dirs", ""))}):
        command += ["-isystem", d]
    return command + as_list(config.get("compile_options", ""))


def support_command(config: dict, obj: str) -> list:
    """Compiles support.cpp (not instrumented: its crash handler must not call the checks)."""
    return _compile_flags(config) + ["-g", "-c", config["support_source"], "-o", obj]


def compile_command(config: dict, source: str, executable: str, user_dir: str, support: str) -> list:
    options = as_list(config.get("compile_options", ""))
    check = [o for o in as_list(config.get("check_options", "")) if o not in options]
    command = _compile_flags(config) + ["-iquote", user_dir]
    # -g: crash reports and the emulator name source lines; -UNDEBUG: assert() works in kernels,
    # as it does under nvcc (the lab's Release flags define NDEBUG). Two warnings nvcc does not give
    # are off: `#pragma unroll` means nothing to g++, and comparing the unsigned threadIdx.x with an
    # int count is idiomatic CUDA. Neither changes the code generated.
    command += check + ["-g", "-UNDEBUG", "-Wno-unknown-pragmas", "-Wno-sign-compare"]
    # -x c++: the translation keeps the .cu name (see build()), and `-x none` ends it before the objects.
    command += ["-o", executable, "-x", "c++", source, "-x", "none", support]
    command += shlex.split(config.get("exe_linker_flags", "")) + as_list(config.get("link_options", ""))
    command += ["-Wl,--wrap=main"]
    items = dedupe_keep_last(as_list(config.get("link_items", "")))
    command += items
    standard = {"/lib", "/usr/lib", "/lib64", "/usr/lib64", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu"}
    rpaths = sorted({os.path.dirname(i) for i in items if os.path.isabs(i) and ".so" in os.path.basename(i)} - standard)
    command += ["-Wl,-rpath," + d for d in rpaths]
    return command


def input_stamp(config: dict) -> str:
    """Size and time of everything the executable depends on besides the source."""
    paths = [config["compiler"], config["support_source"]]
    paths += [i for i in as_list(config.get("link_items", "")) if os.path.isabs(i)]
    for root in (os.path.join(config.get("source_dir", ""), "common", "simt"), config["prelude_dir"]):
        for folder, _, files in os.walk(root):
            paths += [os.path.join(folder, f) for f in files if f.endswith(".h")]
    parts = []
    for p in sorted(set(paths)):
        try:
            st = os.stat(p)
            parts.append(f"{p}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{p}:missing")
    return "\n".join(parts)


# ---- building ----------------------------------------------------------------------------------

def build(config: dict, translation: cuda_translate.Translation, display: str, source_path: str,
          verbose: bool) -> str:
    """Compiles the translation (cached by content); returns the executable's path."""
    stem = os.path.splitext(os.path.basename(source_path))[0] or "program"
    cache_root = os.path.join(config["build_dir"], "cuda-run")
    os.makedirs(cache_root, exist_ok=True)
    user_dir = os.path.dirname(os.path.abspath(source_path))
    support = build_support(config, cache_root, verbose)
    probe = compile_command(config, "SOURCE", "EXECUTABLE", user_dir, support)
    # The driver's own text is part of the key: a change in how it compiles rebuilds.
    driver = str(os.path.getmtime(__file__))
    key = hashlib.sha256("\0".join([translation.text, display, "\x01".join(probe), driver,
                                    input_stamp(config)]).encode()).hexdigest()[:16]
    folder = os.path.join(cache_root, f"{stem}-{key}")
    executable = os.path.join(folder, stem)
    log_path = os.path.join(folder, "compile.log")
    if os.path.isfile(executable) and os.path.isfile(log_path):
        if verbose:
            print(f"{PREFIX} cuda-run: up to date: {executable}", file=sys.stderr)
        with open(log_path, encoding="utf-8", errors="replace") as f:
            sys.stderr.write(f.read())
        os.utime(folder)
        return executable
    os.makedirs(folder, exist_ok=True)
    # The translation is named like the user's file: debug line tables then name FILE.cu whether a
    # reader takes DWARF 5's file entry 0 (the compiled file) or the #line file (addr2line 2.40
    # takes the former).
    source = os.path.join(folder, os.path.basename(source_path))
    _write_atomically(source, translation.text.encode())
    partial = executable + f".partial-{os.getpid()}"
    command = compile_command(config, source, partial, user_dir, support)
    # Compile and link in two steps: -fsanitize=thread (the checks' instrumentation) must not reach
    # the link, where g++ would add ThreadSanitizer's runtime (the emulator defines its entry points).
    sanitize = [o for o in command if o.startswith("-fsanitize=thread")]
    if sanitize:
        obj = partial + ".o"
        at = command.index("-o")
        compile_part = [o for o in command[:at] if o not in ("-Wl,--wrap=main",)] + \
            ["-c", "-o", obj, "-x", "c++", source]
        link_part = [o for o in command if o not in sanitize and o != source and o != "c++"]
        link_part = [o for o in link_part if o not in ("-x", "none")]
        link_part[link_part.index(partial) + 1:link_part.index(partial) + 1] = [obj]
        command = ["sh", "-c", shlex.join(compile_part) + " && " + shlex.join(link_part)]
    if verbose:
        print(f"{PREFIX} cuda-run: compiling {display} -> {executable}\n{PREFIX}   {shlex.join(command)}",
              file=sys.stderr)
    started = time.monotonic()
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=os.getcwd())
    output = result.stdout.decode(errors="replace")
    sys.stderr.write(output)
    if result.returncode != 0:
        try:
            os.unlink(partial)
        except OSError:
            pass
        hints = []
        if re.search(r"undefined reference to `(__real_)?main'", output):
            hints.append(f"{display} has no main(): cuda-run runs whole programs")
        missing = sorted(set(re.findall(r"undefined reference to `(cu\w+)", output)))
        if missing:
            hints.append("the emulator does not provide " + ", ".join(missing))
        raise Failure("".join(f"{PREFIX} cuda-run: {hint}\n" for hint in hints) +
                      f"{PREFIX} cuda-run: {display} does not compile for the emulator (the errors above name "
                      f"its lines; see docs/pages/cuda-run.md for what the emulator supports)")
    os.replace(partial, executable)
    _write_atomically(log_path, output.encode())
    if verbose:
        print(f"{PREFIX} cuda-run: compiled in {time.monotonic() - started:.1f} s", file=sys.stderr)
    _prune(cache_root, stem, keep=folder)
    return executable


def build_support(config: dict, cache_root: str, verbose: bool) -> str:
    """support.cpp's object for this build's flags (compiled once, cached)."""
    with open(config["support_source"], "rb") as f:
        content = f.read()
    probe = support_command(config, "OBJECT")
    key = hashlib.sha256(content + b"\0" + "\x01".join(probe).encode() + input_stamp(config).encode()).hexdigest()[:16]
    obj = os.path.join(cache_root, f"support-{key}.o")
    if os.path.isfile(obj):
        return obj
    partial = obj + f".partial-{os.getpid()}"
    command = support_command(config, partial)
    if verbose:
        print(f"{PREFIX} cuda-run: compiling its support object\n{PREFIX}   {shlex.join(command)}", file=sys.stderr)
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        sys.stderr.write(result.stdout.decode(errors="replace"))
        raise Failure(f"{PREFIX} cuda-run: its support object ({config['support_source']}) does not compile")
    os.replace(partial, obj)
    for old in os.listdir(cache_root):  # support objects of earlier flags or sources
        if old.startswith("support-") and old.endswith(".o") and os.path.join(cache_root, old) != obj:
            try:
                os.unlink(os.path.join(cache_root, old))
            except OSError:
                pass
    return obj


def _write_atomically(path: str, data: bytes) -> None:
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(temporary, path)


def _prune(cache_root: str, stem: str, keep: str, count: int = 6) -> None:
    """Keeps the `count` most recently used builds of files named like this one."""
    try:
        folders = [os.path.join(cache_root, d) for d in os.listdir(cache_root) if d.startswith(stem + "-")]
        folders.sort(key=lambda d: os.stat(d).st_mtime, reverse=True)
        for old in folders[count:]:
            if old != keep:
                shutil.rmtree(old, ignore_errors=True)
    except OSError:
        pass


# ---- running -----------------------------------------------------------------------------------

def run_program(executable: str, args: list, env: dict) -> tuple:
    """Runs the program with its stderr passed through; returns (returncode, simt report lines)."""
    reports = []
    process = subprocess.Popen([executable] + args, stderr=subprocess.PIPE, env=env)
    try:
        for raw in process.stderr:
            sys.stderr.buffer.write(raw)
            sys.stderr.buffer.flush()
            # (Under a sanitizer preset the emulator follows the sanitizer's report with one line
            # of its own, "simt: the fault above happened in kernel …": one error, not two.)
            if (raw.startswith(b"simt: ") and not raw.startswith(b"simt: the fault above")) \
                    or SANITIZER_REPORT.search(raw):
                reports.append(raw.decode(errors="replace").rstrip("\n"))
    except KeyboardInterrupt:
        process.send_signal(signal.SIGINT)
    return process.wait(), reports


def read_status(path: str) -> dict:
    status = {"frame": []}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.rstrip("\n").partition("=")
                if key == "frame":
                    status["frame"].append(value)
                else:
                    status[key] = value
    except OSError:
        pass
    return status


def _elf_is_position_independent(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            header = f.read(18)
        return header[16] == 3  # ET_DYN
    except (OSError, IndexError):
        return True


def symbolize(executable: str, status: dict) -> list:
    """The crash's frames inside the program as (function, file, line), innermost first."""
    exe = os.path.realpath(executable)
    pie = _elf_is_position_independent(exe)

    def parse(entry: str):
        module, _, rest = entry.partition("|")
        address, _, base = rest.partition("|")
        try:
            return os.path.realpath(module) if module != "?" else "?", int(address, 16), int(base, 16)
        except ValueError:
            return "?", 0, 0

    frames = [parse(f) for f in status.get("frame", [])]
    addresses = []
    if "pc" in status:
        module, address, base = parse(status["pc"])
        if module == exe:
            addresses.append((address - base) if pie else address)
        # The frames below the faulting one: after its entry in the backtrace.
        later = [i for i, f in enumerate(frames) if f[1] == address]
        frames = frames[later[0] + 1:] if later else frames
    for module, address, base in frames:
        if module == exe and address:
            addresses.append(((address - base) if pie else address) - 1)  # return address -> call
    if not addresses or shutil.which("addr2line") is None:
        return []
    result = subprocess.run(["addr2line", "-C", "-f", "-i", "-p", "-e", exe] + [hex(a) for a in addresses],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = []
    for line in result.stdout.splitlines():
        line = line.strip()
        if line.startswith("(inlined by) "):
            line = line[len("(inlined by) "):]
        function, sep, where = line.rpartition(" at ")
        if not sep:
            continue
        function = re.sub(r"\.(cold|part\.\d+|isra\.\d+|constprop\.\d+)\b", "", function)
        file, _, number = where.rpartition(":")
        number = number.split(" ")[0]
        if file.startswith("??") or not number.isdigit() or number == "0":
            continue
        out.append((function, file, int(number)))
    return out


def crash_lines(executable: str, status: dict, display: str, signal_number: int) -> list:
    try:
        name = signal.Signals(signal_number).name
    except ValueError:
        name = f"signal {signal_number}"
    why = SIGNAL_WHY.get(signal_number, "")
    lines = [f"The program crashed: {name}" + (f" — {why}" if why else "")]
    if status.get("exception"):
        lines.append(f"  {status['exception']}")
    if "fault_address" in status:
        lines.append(f"  address {status['fault_address']}")
    frames = symbolize(executable, status) if status.get("crash") else []
    base = os.path.basename(display)
    mine = [f for f in frames if os.path.basename(f[1]) == base]
    if mine:
        function, file, number = mine[0]
        lines.append(f"  at {display}:{number} in {function}")
        previous = function
        for function, file, number in mine[1:8]:
            if function != previous:  # the same function again: an inlined or outlined part of it
                lines.append(f"  called from {display}:{number} in {function}")
            previous = function
    elif frames:
        function, file, number = frames[0]
        lines.append(f"  in {function} ({os.path.basename(file)}:{number}), not in {display}")
    elif status.get("crash"):
        lines.append("  (no frame in the program could be named: was it a stack overflow?)")
    return lines


# ---- the command -------------------------------------------------------------------------------

def parse_arguments(argv: list) -> tuple:
    options = {"schedule": None, "workers": None, "leak_check": False, "translate_only": False, "verbose": False,
               "config": None}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            print(USAGE)
            raise SystemExit(0)
        if arg == "--":
            i += 1
            break
        if not arg.startswith("--"):
            break
        name, eq, value = arg[2:].partition("=")
        if name in ("schedule", "workers", "config"):
            if not eq:
                i += 1
                if i >= len(argv):
                    raise Failure(f"cuda-run: --{name} needs a value\n\n{USAGE}")
                value = argv[i]
            options[name] = value
        elif name in ("leak-check", "translate-only", "verbose") and not eq:
            options[name.replace("-", "_")] = True
        else:
            raise Failure(f"cuda-run: unknown option {arg}\n\n{USAGE}")
        i += 1
    if i >= len(argv):
        raise Failure(f"cuda-run: no CUDA file given\n{USAGE.splitlines()[0]}\n(./inferlab cuda-run --help says more)")
    return options, argv[i], argv[i + 1:]


def main(argv: list) -> int:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `cuda-run --help | head` ends quietly
    try:
        return _main(argv)
    except Failure as failure:
        print(str(failure), file=sys.stderr)
        return failure.status


def _main(argv: list) -> int:
    options, source_path, program_args = parse_arguments(argv)
    if options["schedule"] is not None and not (options["schedule"] in ("forward", "reverse") or
                                                options["schedule"].startswith("random:")):
        raise Failure(f"cuda-run: --schedule {options['schedule']}: expected forward, reverse or random:SEED")
    if options["workers"] is not None and not options["workers"].isdigit():
        raise Failure(f"cuda-run: --workers {options['workers']}: expected a number of threads")
    if not os.path.isfile(source_path):
        raise Failure(f"cuda-run: {source_path}: no such file")
    display = source_path
    with open(source_path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    config = read_config(options["config"] or default_config_path())
    api = cuda_translate.Api.load(as_list(config.get("include_dirs", "")), config.get("cuda_include_dir", ""))
    translation = cuda_translate.translate(text, display, api)
    for issue in translation.rejections:
        print(issue.format(display, "error"), file=sys.stderr)
    if options["translate_only"]:
        sys.stdout.write(translation.text)
        return 2 if translation.rejections else 0
    if translation.rejections:
        count = len(translation.rejections)
        raise Failure(f"{PREFIX} cuda-run: {display} uses CUDA that the emulator cannot run "
                      f"({count} place{'s' if count != 1 else ''} above; see docs/pages/cuda-run.md)")
    for issue in translation.notes:
        print(issue.format(display, "note"), file=sys.stderr)

    executable = build(config, translation, display, source_path, options["verbose"])

    env = dict(os.environ)
    env.pop("SIMT_QUIET", None)
    if options["schedule"]:
        env["SIMT_SCHEDULE"] = options["schedule"]
    if options["workers"]:
        env["SIMT_WORKERS"] = options["workers"]
    schedule = env.get("SIMT_SCHEDULE", "forward")
    workers = env.get("SIMT_WORKERS", str(os.cpu_count() or 1))
    fd, status_path = tempfile.mkstemp(prefix="cuda-run-status-")
    os.close(fd)
    env["INFERLAB_CUDA_RUN_STATUS"] = status_path
    checks = f", SIMT_CHECK={env['SIMT_CHECK']}" if env.get("SIMT_CHECK") else ""
    plural = "" if workers == "1" else "s"
    print(f"{PREFIX} CUDA-RUN: {display} on the SIMT emulator (schedule {schedule}, {workers} worker{plural}{checks})",
          flush=True)
    try:
        returncode, reports = run_program(executable, program_args, env)
        status = read_status(status_path)
    finally:
        os.unlink(status_path)
    sys.stdout.flush()

    errors = len(reports)
    lines = []
    if errors == 0 and status.get("error"):
        errors = 1  # a report that was not printed
        lines.append(f"simt error: {status['error']}")
    exit_status = 0
    if returncode < 0:
        lines += crash_lines(executable, status, display, -returncode)
        errors += 0 if reports else 1  # a crash after a report is usually that report's consequence
        exit_status = 128 - returncode
    elif returncode != 0:
        lines.append(f"The program exited with status {returncode}")
        exit_status = returncode
    elif "exited" not in status and "started" in status:
        lines.append("The program ended without running its exit handlers (_exit or quick_exit?)")
    if options["leak_check"] and status.get("device_bytes_in_use", "0") not in ("", "0"):
        lines.append(f"Leak: {status['device_bytes_in_use']} bytes of device memory were never freed (cudaFree)")
        errors += 1
    if reports:
        lines.append(f"First report: {reports[0]}")
    for line in lines:
        print(f"{PREFIX} {line}")
    print(f"{PREFIX} ERROR SUMMARY: {errors} error{'s' if errors != 1 else ''}")
    if exit_status == 0 and errors:
        exit_status = 1
    return exit_status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
