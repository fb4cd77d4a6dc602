"""Translates one plain CUDA source file into C++ that the SIMT emulator compiles (cuda-run).

The translation is source to source and keeps every line where it was, so that the compiler's
diagnostics and the emulator's reports (std::source_location, debug line tables) name the
user's own file and lines. The output starts with a short preamble and `#line 1 "FILE.cu"`;
after that, line N of the output is line N of the input. Only these rewrites are made:

- `kernel<<<grid, block[, shared_bytes[, stream]]>>>(args...)` becomes
  `::simt::launch(kernel, grid, block, shared_bytes, stream, args...)` (0 for a missing shared
  size or stream). `kernel` may be a template-id (`reduce<float, 128>`) or a qualified name;
  the text between the punctuation is kept verbatim, newlines included. A template kernel of
  the file named without template arguments (or an overloaded one) goes through
  `::inferlab_cuda_run::launch_deduced` (cuda_run_prelude.h), which lets the arguments choose;
- a block-scope `extern __shared__ T name[];` (with any `__align__(n)`) becomes
  `T* const name = ::inferlab_cuda_run::dynamic_shared<T>();`; a namespace-scope one becomes
  a macro with the same expression (and a `#line` directive that restores the numbering);
- `#include <cuda_runtime.h>` and the other headers the emulator provides itself are dropped
  (the preamble includes simt/simt.h); `<cublas_v2.h>` and `<mma.h>` map to the emulator's
  cuBLAS and WMMA models.

What the emulator cannot run is rejected with the construct and its line (see RULES and
the checks in Translator). Comments, string and character literals (raw strings included) are
never touched. Inactive `#if` branches that the emulator never compiles (`#ifdef __CUDA_ARCH__`,
`#if 0`) are not checked.

Run `python3 cuda_translate.py FILE.cu` to see the translation; cuda_run.py is the user-facing
driver, test_cuda_translate.py the unit tests.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from typing import Iterable, Optional

# ---- lexer -------------------------------------------------------------------------------------

IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
PP_NUMBER = re.compile(r"\.?[0-9](?:[eEpP][+-]|'[0-9A-Za-z_]|[0-9A-Za-z_.])*")
STRING_PREFIXES = {"u8", "u", "U", "L"}
RAW_PREFIXES = {"R", "u8R", "uR", "UR", "LR"}
# '>' is always one token (so that `a<b<c>>` closes two template lists); '<<<' is the launch.
PUNCTUATORS = ["<<<", "->*", "<<=", "<=>", "...", "::", "->", "<<", "<=", "&&", "||", "++", "--", "==", "!=",
               "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##"]


@dataclasses.dataclass
class Token:
    kind: str  # ident, number, string, punct, comment, space
    text: str
    start: int  # offsets into the source text
    end: int
    line: int  # 1-based line of the first character
    directive: int = -1  # index into Lexed.directives, -1 outside preprocessor directives
    active: bool = True  # False inside an #if branch that the emulator build never compiles

    @property
    def significant(self) -> bool:
        return self.kind not in ("comment", "space")


@dataclasses.dataclass
class Directive:
    start: int  # offset of '#'
    end: int  # offset of the newline that ends it (or len(text))
    line: int
    name: str = ""  # include, define, if, ...
    tokens: list = dataclasses.field(default_factory=list)  # indices into Lexed.tokens


@dataclasses.dataclass
class Lexed:
    text: str
    tokens: list
    directives: list


def _skip_splice(text: str, i: int) -> int:
    """Length of a backslash-newline at i (0 when there is none)."""
    if text.startswith("\\\n", i):
        return 2
    if text.startswith("\\\r\n", i):
        return 3
    return 0


def lex(text: str) -> Lexed:
    """Splits C++ source into tokens, keeping comments and whitespace as tokens of their own."""
    tokens: list[Token] = []
    directives: list[Directive] = []
    n = len(text)
    i = 0
    line = 1
    at_line_start = True  # only whitespace and comments since the last newline
    directive = -1
    last_significant = ""

    def add(kind: str, start: int, end: int, start_line: int) -> None:
        nonlocal at_line_start, last_significant
        token = Token(kind, text[start:end], start, end, start_line, directive)
        if directive >= 0:
            directives[directive].tokens.append(len(tokens))
        tokens.append(token)
        if token.significant:
            at_line_start = False
            last_significant = token.text

    while i < n:
        c = text[i]
        start, start_line = i, line
        splice = _skip_splice(text, i)
        if splice:
            i += splice
            line += 1
            add("space", start, i, start_line)
            continue
        if c == "\n":
            if directive >= 0:
                directives[directive].end = i
                directive = -1
            i += 1
            line += 1
            add("space", start, i, start_line)
            at_line_start = True
            continue
        if c in " \t\r\f\v":
            while i < n and text[i] in " \t\r\f\v":
                i += 1
            add("space", start, i, start_line)
            continue
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                splice = _skip_splice(text, i)
                if splice:  # a line comment ending in a backslash continues on the next line
                    i += splice
                    line += 1
                else:
                    i += 1
            saved = at_line_start
            add("comment", start, i, start_line)
            at_line_start = saved
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            line += text.count("\n", start, i)
            saved = at_line_start
            add("comment", start, i, start_line)
            at_line_start = saved
            continue
        if c == "#" and at_line_start and directive < 0:
            directives.append(Directive(start=i, end=n, line=line))
            directive = len(directives) - 1
            i += 1
            add("punct", start, i, start_line)
            # The directive's name.
            j = i
            while j < n and text[j] in " \t":
                j += 1
            m = IDENT.match(text, j)
            directives[directive].name = m.group() if m else ""
            continue
        m = IDENT.match(text, i)
        if m:
            word, j = m.group(), m.end()
            if j < n and text[j] == '"' and word in RAW_PREFIXES:
                i = _raw_string_end(text, j)
                line += text.count("\n", start, i)
                add("string", start, i, start_line)
                continue
            if j < n and text[j] in "\"'" and word in STRING_PREFIXES:
                i, line = _quoted_end(text, j, line)
                add("string", start, i, start_line)
                continue
            i = j
            add("ident", start, i, start_line)
            continue
        m = PP_NUMBER.match(text, i)
        if m:
            i = m.end()
            add("number", start, i, start_line)
            continue
        if c in "\"'":
            i, line = _quoted_end(text, i, line)
            add("string", start, i, start_line)
            continue
        for p in PUNCTUATORS:
            if text.startswith(p, i):
                if p == "<<<" and last_significant == "operator":
                    p = "<<"  # operator<< <T>: not a launch
                i += len(p)
                break
        else:
            i += 1
        add("punct", start, i, start_line)
    if directive >= 0:
        directives[directive].end = n
    return Lexed(text, tokens, directives)


def _raw_string_end(text: str, quote: int) -> int:
    """End offset of the raw string whose opening quote is at `quote`."""
    paren = text.find("(", quote + 1)
    if paren < 0:
        return len(text)
    closing = ")" + text[quote + 1:paren] + '"'
    j = text.find(closing, paren + 1)
    return len(text) if j < 0 else j + len(closing)


def _quoted_end(text: str, quote: int, line: int) -> tuple[int, int]:
    """End offset (and line) of the string or character literal opening at `quote`."""
    q = text[quote]
    i = quote + 1
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            if text.startswith("\n", i + 1):
                line += 1
            elif text.startswith("\r\n", i + 1):
                line += 1
                i += 1
            i += 2
            continue
        if c == q:
            return i + 1, line
        if c == "\n":  # unterminated: stop at the end of the line
            return i, line
        i += 1
    return n, line


# ---- #if evaluation ----------------------------------------------------------------------------

# Macros that the emulator build never defines: `#ifdef __CUDA_ARCH__` code is not compiled.
UNDEFINED_MACROS = {"__CUDA_ARCH__", "__CUDACC__", "__NVCC__", "__CUDACC_RTC__", "__CUDA_ARCH_LIST__"}


class _CondParser:
    """Three-valued evaluation of an #if expression: an int, or None where it depends on macros
    we do not know (such a branch counts as compiled)."""

    def __init__(self, words: list[str]):
        self.words = words
        self.i = 0

    def peek(self) -> str:
        return self.words[self.i] if self.i < len(self.words) else ""

    def take(self) -> str:
        word = self.peek()
        self.i += 1
        return word

    def parse(self) -> Optional[int]:
        value = self.ternary()
        return value if self.i >= len(self.words) else None

    def ternary(self):
        cond = self.binary(0)
        if self.peek() == "?":
            self.take()
            a = self.ternary()
            if self.take() != ":":
                raise ValueError
            b = self.ternary()
            if cond is None:
                return a if a == b else None
            return a if cond else b
        return cond

    LEVELS = [["||"], ["&&"], ["|"], ["^"], ["&"], ["==", "!="], ["<", ">", "<=", ">="], ["<<", ">>"], ["+", "-"],
              ["*", "/", "%"]]

    def binary(self, level: int):
        if level == len(self.LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek() in self.LEVELS[level]:
            op = self.take()
            right = self.binary(level + 1)
            left = self.apply(op, left, right)
        return left

    @staticmethod
    def apply(op: str, a, b):
        if op == "&&":
            if a == 0 or b == 0:
                return 0
            return None if a is None or b is None else 1
        if op == "||":
            if (a is not None and a != 0) or (b is not None and b != 0):
                return 1
            return None if a is None or b is None else 0
        if a is None or b is None:
            return None
        try:
            return int({"|": lambda: a | b, "^": lambda: a ^ b, "&": lambda: a & b, "==": lambda: a == b,
                        "!=": lambda: a != b, "<": lambda: a < b, ">": lambda: a > b, "<=": lambda: a <= b,
                        ">=": lambda: a >= b, "<<": lambda: a << b, ">>": lambda: a >> b, "+": lambda: a + b,
                        "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a // b,
                        "%": lambda: a % b}[op]())
        except (ZeroDivisionError, ValueError):
            return None

    def unary(self):
        word = self.take()
        if word == "!":
            value = self.unary()
            return None if value is None else int(not value)
        if word == "-":
            value = self.unary()
            return None if value is None else -value
        if word == "+":
            return self.unary()
        if word == "(":
            value = self.ternary()
            if self.take() != ")":
                raise ValueError
            return value
        if word == "defined":
            paren = self.peek() == "("
            if paren:
                self.take()
            name = self.take()
            if paren and self.take() != ")":
                raise ValueError
            return 0 if name in UNDEFINED_MACROS else None
        if re.fullmatch(r"[0-9][0-9A-Za-z_']*", word):
            digits = re.sub(r"[uUlL]+$", "", word.replace("'", ""))
            try:
                return int(digits, 0) if not re.fullmatch(r"0[0-7]+", digits) else int(digits, 8)
            except ValueError:
                return None
        if IDENT.fullmatch(word):
            if word in UNDEFINED_MACROS:
                return 0
            if self.peek() == "(":  # a function-like macro: skip its arguments
                depth = 0
                while self.i < len(self.words):
                    w = self.take()
                    depth += (w == "(") - (w == ")")
                    if depth == 0:
                        break
            return None
        raise ValueError


def evaluate_condition(name: str, words: list[str]) -> Optional[bool]:
    """True/False when an #if/#ifdef/#ifndef/#elif condition is known for the emulator build."""
    if name in ("ifdef", "ifndef"):
        if not words:
            return None
        known = words[0] in UNDEFINED_MACROS
        if not known:
            return None
        return name == "ifndef"
    try:
        value = _CondParser(words).parse()
    except (ValueError, IndexError):
        return None
    return None if value is None else bool(value)


def _condition_words(tokens: list) -> list[str]:
    """Token texts of an #if expression, with '>=' and '>>' (lexed as single '>') joined again."""
    words: list[str] = []
    previous = None
    for t in tokens:
        if previous is not None and previous.text == ">" and t.text in ("=", ">") and t.start == previous.end \
                and words and words[-1] == ">":
            words[-1] += t.text
        else:
            words.append(t.text)
        previous = t
    return words


def mark_inactive(lexed: Lexed) -> None:
    """Sets Token.active to False inside #if branches that the emulator build never compiles."""
    stack: list[tuple[bool, Optional[bool], bool]] = []  # (parent active, a branch known taken, active)
    active = True
    directive_at = {d.start: k for k, d in enumerate(lexed.directives)}
    for token in lexed.tokens:
        if token.directive >= 0 and token.start in directive_at and token.text == "#":
            d = lexed.directives[token.directive]
            words = _condition_words([lexed.tokens[k] for k in d.tokens if lexed.tokens[k].significant][2:])
            if d.name in ("if", "ifdef", "ifndef"):
                cond = evaluate_condition(d.name, words)
                stack.append((active, cond is True, active and cond is not False))
                # `taken` is only "known taken" when cond is True.
            elif d.name == "elif" and stack:
                parent, taken, _ = stack[-1]
                cond = evaluate_condition("if", words)
                now = parent and not taken and cond is not False
                stack[-1] = (parent, taken or cond is True, now)
            elif d.name == "else" and stack:
                parent, taken, _ = stack[-1]
                stack[-1] = (parent, True, parent and not taken)
            elif d.name == "endif" and stack:
                stack.pop()
            active = stack[-1][2] if stack else True
            token.active = True  # the directive itself
            continue
        token.active = active if token.directive < 0 or lexed.directives[token.directive].name not in (
            "if", "ifdef", "ifndef", "elif", "else", "endif") else True


# ---- what the emulator provides and what it rejects --------------------------------------------

# Headers the preamble already provides (simt/simt.h includes the toolkit's types or their fallback).
PROVIDED_HEADERS = {
    "cuda_runtime.h", "cuda_runtime_api.h", "cuda.h", "device_launch_parameters.h", "cuda_fp16.h", "cuda_bf16.h",
    "vector_types.h", "vector_functions.h", "device_functions.h", "builtin_types.h", "driver_types.h",
    "cuda_device_runtime_api.h", "sm_20_atomic_functions.h", "sm_30_intrinsics.h", "sm_32_intrinsics.h",
    "device_atomic_functions.h", "math_functions.h", "cuda/std/cstdint",
}
# Headers mapped to the emulator's own model: header -> (preamble lines, what it is).
MAPPED_HEADERS = {
    "cublas_v2.h": ['#include "simt/cublas.h"'],
    "mma.h": ['#include "simt/wmma.h"', "namespace nvcuda { namespace wmma = ::simt::wmma; }"],
}
# Headers of libraries the emulator does not model: prefix -> (construct, advice).
REJECTED_HEADERS = [
    ("cooperative_groups", "cooperative groups", "use __syncthreads(), __syncwarp() and __shfl_*_sync()"),
    ("curand", "cuRAND", "draw the random numbers on the host and cudaMemcpy them to the device"),
    ("thrust/", "Thrust", "write the kernel (or the host loop) yourself"),
    ("cub/", "CUB", "write the block reduction/scan with __shared__ memory and __syncthreads()"),
    ("cuda/", "libcu++ (cuda::...)", "use the CUDA built-ins (atomics, __syncthreads(), __shfl_*_sync())"),
    ("cuda_pipeline", "asynchronous copies (cuda_pipeline)", "copy to shared memory with plain loads and stores"),
    ("cuda_awbarrier", "arrive/wait barriers", "use __syncthreads()"),
    ("cublas.h", "the legacy cuBLAS API", "include <cublas_v2.h> (cublasCreate, cublasSgemm, cublasGemmEx, ...)"),
    ("cublasLt", "cuBLASLt", "use cublasGemmEx from <cublas_v2.h>"),
    ("cublasXt", "cuBLASXt", "use <cublas_v2.h>"),
    ("cufft", "cuFFT", None), ("cusparse", "cuSPARSE", None), ("cusolver", "cuSOLVER", None),
    ("cudnn", "cuDNN", None), ("nccl", "NCCL", None), ("nvrtc", "NVRTC (run-time compilation)", None),
    ("cutlass/", "CUTLASS", None), ("cute/", "CuTe", None), ("nvtx3/", "NVTX markers", "remove them for the emulator"),
    ("nvToolsExt", "NVTX markers", "remove them for the emulator"),
    ("cuda_gl_interop", "graphics interop", None), ("cuda_egl_interop", "graphics interop", None),
    ("texture_", "texture references", "read the data through a plain pointer"),
    ("surface_", "surface references", "write the data through a plain pointer"),
    ("cuda_fp4", "FP4 types", None), ("cuda_fp6", "FP6 types", None),
]

TEXTURE_ADVICE = "texture and surface memory are not emulated: read and write through plain device pointers"
# Identifiers (in compiled code) the emulator cannot run: name -> (construct, advice).
RULES = {
    "cooperative_groups": ("cooperative groups", "use __syncthreads(), __syncwarp() and __shfl_*_sync()"),
    "asm": ("inline assembly (asm)", "the emulator compiles kernels as C++ for the CPU, PTX cannot run there: use "
                                     "the CUDA intrinsic or plain C++"),
    "__asm__": ("inline assembly (asm)", "the emulator compiles kernels as C++ for the CPU, PTX cannot run there"),
    "__asm": ("inline assembly (asm)", "the emulator compiles kernels as C++ for the CPU, PTX cannot run there"),
    "__threadfence_system": ("a system-scope fence (__threadfence_system)",
                             "the emulator has no host-device concurrency: __threadfence() orders device memory"),
    "__managed__": ("managed memory (__managed__)", "unified memory is not emulated: use cudaMalloc and cudaMemcpy"),
    "__cluster_dims__": ("thread block clusters", "launch plain blocks"),
    "cudaTextureObject_t": ("texture objects", TEXTURE_ADVICE),
    "cudaSurfaceObject_t": ("surface objects", TEXTURE_ADVICE),
    "cudaArray": ("CUDA arrays", TEXTURE_ADVICE),
    "cudaArray_t": ("CUDA arrays", TEXTURE_ADVICE),
    "__nanosleep": ("__nanosleep", "the emulator has no clock to wait on: restructure the wait"),
}
RULE_PATTERNS = [
    (re.compile(r"^curand\w*$"), ("cuRAND", "draw the random numbers on the host and cudaMemcpy them to the device")),
    (re.compile(r"^atomic\w+_system$"), ("a system-scope atomic", "use the device-scope atomic (atomicAdd, ...)")),
    (re.compile(r"^(tex|surf)(1D|2D|3D|Cubemap)\w*$"), ("texture/surface fetches", TEXTURE_ADVICE)),
]
# Runtime calls with a more specific explanation than "not emulated".
RUNTIME_ADVICE = {
    "cudaMallocManaged": ("managed memory (cudaMallocManaged)",
                          "unified memory is not emulated: allocate with cudaMalloc and copy with cudaMemcpy"),
    "cudaLaunchKernel": ("cudaLaunchKernel", "launch with kernel<<<grid, block, shared_bytes, stream>>>(args...)"),
    "cudaLaunchKernelEx": ("cudaLaunchKernelEx", "launch with kernel<<<grid, block, shared_bytes, stream>>>(args...)"),
    "cudaLaunchCooperativeKernel": ("cooperative launches (cudaLaunchCooperativeKernel)",
                                    "grid-wide synchronisation is not emulated: split the kernel in two launches"),
    "cudaCreateTextureObject": ("texture objects", TEXTURE_ADVICE),
    "cudaCreateSurfaceObject": ("surface objects", TEXTURE_ADVICE),
    "cudaMallocArray": ("CUDA arrays", TEXTURE_ADVICE),
    "cudaMalloc3DArray": ("CUDA arrays", TEXTURE_ADVICE),
    "cudaBindTexture": ("texture references", TEXTURE_ADVICE),
    "cudaHostAlloc": ("mapped/pinned host allocations (cudaHostAlloc)", "use cudaMallocHost or plain malloc"),
    "cudaHostRegister": ("registered host memory (cudaHostRegister)", "copy with cudaMemcpy"),
    "cudaMemPrefetchAsync": ("unified memory prefetching", "unified memory is not emulated"),
    "cudaMemAdvise": ("unified memory advice", "unified memory is not emulated"),
    "cudaGraphCreate": ("CUDA graphs", "launch the kernels directly"),
    "cudaStreamBeginCapture": ("CUDA graphs (stream capture)", "launch the kernels directly"),
}
# Runtime calls that exist on the device too: called inside a kernel they are the device runtime.
STREAM_NAMES = {"cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority"}
# When the toolkit's headers are missing: calls known to be outside the emulator.
FALLBACK_RUNTIME_KNOWN = set(RUNTIME_ADVICE) | {
    "cudaMallocPitch", "cudaMemcpy2D", "cudaMemcpy2DAsync", "cudaMemcpy3D", "cudaMemset2D", "cudaGetSymbolAddress",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessor", "cudaOccupancyMaxPotentialBlockSize", "cudaFuncGetAttributes",
    "cudaDeviceSetLimit", "cudaDeviceGetLimit", "cudaMemcpyPeer", "cudaDeviceEnablePeerAccess", "cudaMallocAsync",
    "cudaFreeAsync", "cudaIpcGetMemHandle", "cudaLaunchHostFunc", "cudaGraphLaunch", "cudaGraphInstantiate",
    "cudaProfilerStart", "cudaProfilerStop", "cudaPointerGetAttributes", "cudaSetDeviceFlags",
}
# The runtime calls simt/detail/cuda_api.h provides, for when that header cannot be read.
FALLBACK_RUNTIME_SUPPORTED = {
    "cudaMalloc", "cudaFree", "cudaMallocHost", "cudaFreeHost", "cudaMemcpy", "cudaMemcpyAsync", "cudaMemset",
    "cudaMemsetAsync", "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol", "cudaDeviceSynchronize", "cudaDeviceReset",
    "cudaGetLastError", "cudaPeekAtLastError", "cudaGetErrorString", "cudaGetErrorName", "cudaGetDeviceCount",
    "cudaGetDevice", "cudaSetDevice", "cudaGetDeviceProperties", "cudaDeviceGetAttribute", "cudaFuncSetAttribute",
    "cudaMemGetInfo", "cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamDestroy", "cudaStreamSynchronize",
    "cudaStreamQuery", "cudaStreamWaitEvent", "cudaEventCreate", "cudaEventCreateWithFlags", "cudaEventDestroy",
    "cudaEventRecord", "cudaEventSynchronize", "cudaEventQuery", "cudaEventElapsedTime",
}
FALLBACK_DRIVER = re.compile(r"^cu(Init|Ctx|Module|Launch|Mem|Device|Stream|Event|Func|Graph|Tex|Surf|Link|"
                             r"Array|Pointer|Occupancy|GetErrorString|GetErrorName|DriverGetVersion)\w*$")


@dataclasses.dataclass
class Api:
    """What the emulator provides (runtime and cuBLAS calls) and what the toolkit declares."""
    runtime_supported: set
    runtime_known: set  # every runtime call the toolkit declares (or a fallback list)
    cublas_supported: set
    cublas_known: set
    driver_known: set  # driver API calls (cuda.h); empty: FALLBACK_DRIVER decides

    @staticmethod
    def load(include_dirs: Iterable[str], cuda_include_dir: str = "") -> "Api":
        """Reads the emulator's headers (simt/detail/cuda_api.h, simt/cublas.h) and the toolkit's."""
        include_dirs = list(include_dirs)

        def read(name: str, dirs: list[str]) -> str:
            for d in dirs:
                path = os.path.join(d, name)
                if d and os.path.isfile(path):
                    with open(path, encoding="utf-8", errors="replace") as f:
                        return f.read()
            return ""

        renamed = re.compile(r"^#define\s+(cu\w+)\s+simt_\1\b", re.M)
        runtime_supported = set(renamed.findall(read("simt/detail/cuda_api.h", include_dirs)))
        cublas_supported = set(renamed.findall(read("simt/cublas.h", include_dirs)))
        toolkit = [cuda_include_dir] if cuda_include_dir else []
        calls = re.compile(r"\b(cuda[A-Z]\w*)\s*\(")
        runtime_known = set(calls.findall(read("cuda_runtime_api.h", toolkit) + read("cuda_runtime.h", toolkit)))
        cublas_known = set(re.findall(r"\b(cublas[A-Z]\w*?)(?:_v2|_64|_v2_64)?\s*\(", read("cublas_api.h", toolkit)))
        driver_known = set(re.findall(r"\b(cu[A-Z]\w*?)(?:_v2|_v3|_ptds|_ptsz)?\s*\(", read("cuda.h", toolkit)))
        return Api(runtime_supported or set(FALLBACK_RUNTIME_SUPPORTED),
                   (runtime_known or set()) | FALLBACK_RUNTIME_KNOWN,
                   cublas_supported, cublas_known, driver_known)


# ---- the translation ---------------------------------------------------------------------------

@dataclasses.dataclass
class Issue:
    line: int
    construct: str  # what was found, e.g. "inline assembly (asm)"
    advice: str = ""  # what to do instead
    unsupported: bool = True  # False: cuda-run could not read it (not a limit of the emulator)

    def format(self, path: str, severity: str) -> str:
        text = f"{path}:{self.line}: {severity}: {self.construct}"
        if severity == "error" and self.unsupported:
            text += ": not supported by the emulator"
        return text + (f" — {self.advice}" if self.advice else "")


@dataclasses.dataclass
class Translation:
    text: str  # the C++ source to compile (preamble + translated file)
    rejections: list  # Issue: constructs the emulator cannot run
    notes: list  # Issue: constructs that run, with a caveat
    launches: int = 0  # launches translated


@dataclasses.dataclass
class _Scope:
    kind: str  # namespace, class, function, block, init
    device: bool = False  # inside a __global__ / __device__ function


CLASS_KEYS = {"class", "struct", "union", "enum"}
CONTROL_KEYWORDS = {"if", "while", "for", "switch", "return", "sizeof", "alignof", "decltype", "catch", "co_return",
                    "co_await", "throw", "else", "do", "case", "new", "delete", "typeid", "static_assert",
                    "noexcept", "requires", "alignas", "__attribute__"}


class Translator:
    def __init__(self, text: str, path: str, api: Optional[Api] = None, prelude: str = "cuda_run_prelude.h"):
        self.text = text
        self.path = path
        self.api = api or Api(set(FALLBACK_RUNTIME_SUPPORTED), set(FALLBACK_RUNTIME_KNOWN), set(), set(), set())
        self.prelude = prelude
        self.lexed = lex(text)
        mark_inactive(self.lexed)
        self.edits: list[tuple[int, int, str]] = []  # (start, end, replacement)
        self.preamble: list[str] = []
        self.rejections: list[Issue] = []
        self.notes: list[Issue] = []
        self.launches = 0

    # -- helpers --

    def reject(self, line: int, construct: str, advice: str = "", unsupported: bool = True) -> None:
        issue = Issue(line, construct, advice or "", unsupported)
        if all((i.line, i.construct) != (issue.line, issue.construct) for i in self.rejections):
            self.rejections.append(issue)

    def note(self, line: int, construct: str, advice: str = "") -> None:
        if all(i.construct != construct for i in self.notes):  # once per kind
            self.notes.append(Issue(line, construct, advice))

    def line_directive(self, line: int) -> str:
        escaped = self.path.replace("\\", "\\\\").replace('"', '\\"')
        return f'#line {line} "{escaped}"'

    # -- entry point --

    def run(self) -> Translation:
        code = [t for t in self.lexed.tokens if t.significant and t.directive < 0]
        self.deduced_kernels = _kernels_needing_deduction(code)
        self._includes()
        self._walk(code)
        for d in self.lexed.directives:
            if d.name == "define":
                body = [self.lexed.tokens[k] for k in d.tokens if self.lexed.tokens[k].significant]
                self._launches_in(body, in_device=False, check=False)
                self._identifiers(body[3:] if len(body) > 3 else [], scopes=None)
        self.rejections.sort(key=lambda i: i.line)
        out = []
        pos = 0
        for start, end, replacement in sorted(self.edits):
            if start < pos:
                continue  # overlapping edit (cannot happen for well-formed code); keep the first
            out.append(self.text[pos:start])
            out.append(replacement)
            pos = end
        out.append(self.text[pos:])
        header = [f'#include "{self.prelude}"'] + self.preamble + [self.line_directive(1)]
        return Translation("\n".join(header) + "\n" + "".join(out), self.rejections, self.notes, self.launches)

    # -- #include --

    def _includes(self) -> None:
        for d in self.lexed.directives:
            if d.name != "include":
                continue
            first = self.lexed.tokens[d.tokens[0]] if d.tokens else None
            if first is not None and not first.active:
                continue
            m = re.match(r"#\s*include\s*([<\"])([^>\"]+)[>\"]", self.text[d.start:d.end])
            if not m:
                continue
            header = m.group(2).strip()
            base = header[2:] if header.startswith("./") else header
            # Only `#include <header>` is replaced: a comment after it stays where it was.
            end = d.start + m.end()
            keep_newlines = "\n" * self.text.count("\n", d.start, end)
            if base in PROVIDED_HEADERS:
                self.edits.append((d.start, end, f"/* {base}: provided by cuda-run */" + keep_newlines))
            elif base in MAPPED_HEADERS:
                for line in MAPPED_HEADERS[base]:
                    if line not in self.preamble:
                        self.preamble.append(line)
                self.edits.append((d.start, end, f"/* {base}: the emulator's model */" + keep_newlines))
            else:
                for prefix, construct, advice in REJECTED_HEADERS:
                    if base.startswith(prefix):
                        self.reject(d.line, f"#include <{header}>: {construct}", advice or "")
                        break

    # -- the token walk: scopes, launches, extern __shared__, identifiers --

    def _walk(self, code: list[Token]) -> None:
        scopes: list[_Scope] = []
        head_start = 0  # first token of the current declaration/statement at this level
        paren = 0
        i = 0
        n = len(code)
        while i < n:
            t = code[i]
            text = t.text
            if text in ("(", "["):
                paren += 1
            elif text in (")", "]"):
                paren = max(0, paren - 1)
            elif text == "{":
                scopes.append(self._classify(code[head_start:i], scopes))
                head_start = i + 1
                paren = 0
            elif text == "}":
                if scopes:
                    scopes.pop()
                head_start = i + 1
                paren = 0
            elif text == ";" and paren == 0:
                head_start = i + 1
            elif text == "<<<":
                # The tokens of the launch are still walked: braces in its arguments keep the scopes
                # balanced and identifiers in them are checked like any other.
                self._launch(code, i, lo=0, in_device=bool(scopes) and scopes[-1].device, check=t.active)
            elif text == "extern" and t.active:
                # `__shared__ extern float s[];` starts before `extern`.
                start = head_start if all(c.text in ("__shared__", "volatile", "const")
                                          for c in code[head_start:i]) else i
                end = self._extern_shared(code, start, scopes)
                if end > start:
                    head_start = end
                    i = end
                    continue
            if t.kind == "ident" and t.active:
                self._identifier(code, i, scopes)
            i += 1

    def _classify(self, head: list[Token], scopes: list[_Scope]) -> _Scope:
        outer = scopes[-1] if scopes else _Scope("namespace")
        words = [t.text for t in head]
        if outer.kind in ("function", "block", "init"):
            return _Scope("block", outer.device)
        if "namespace" in words:
            return _Scope("namespace")
        if len(words) == 2 and words[0] == "extern" and head[1].kind == "string":  # extern "C" {
            return _Scope("namespace")
        if "(" in words:
            return _Scope("function", "__global__" in words or "__device__" in words)
        if CLASS_KEYS & set(words):
            return _Scope("class")
        return _Scope("init")

    # -- launches --

    def _launches_in(self, tokens: list[Token], in_device: bool, check: bool) -> None:
        i = 0
        while i < len(tokens):
            if tokens[i].text == "<<<":
                end = self._launch(tokens, i, lo=0, in_device=in_device, check=check)
                i = max(end, i + 1)
            else:
                i += 1

    def _launch(self, toks: list[Token], k: int, lo: int, in_device: bool, check: bool) -> int:
        """Rewrites the launch whose '<<<' is toks[k]; returns the index after it (k on failure)."""
        line = toks[k].line
        start = _callee_start(toks, k, lo)
        close = _launch_close(toks, k)
        if start is None or close is None or close + 3 >= len(toks) or toks[close + 3].text != "(":
            if check:
                self.reject(line, "a kernel launch cuda-run cannot read",
                            "write it as kernel<<<grid, block, shared_bytes, stream>>>(args...) "
                            "(parenthesise template arguments that contain commas)", unsupported=False)
            return k
        open_paren = close + 3
        close_paren = _match_forward(toks, open_paren)
        if close_paren is None:
            if check:
                self.reject(line, "a kernel launch without a closing parenthesis", unsupported=False)
            return k
        if in_device and check:
            self.reject(line, "a kernel launch inside a __global__/__device__ function (dynamic parallelism)",
                        "the emulator launches kernels from host code only")
        parts = _split_commas(toks, k + 1, close)
        if not 2 <= len(parts) <= 4:
            if check:
                self.reject(line, f"a kernel launch with {len(parts)} configuration arguments",
                            "expected <<<grid, block[, shared_bytes[, stream]]>>> (parenthesise template "
                            "arguments that contain commas)", unsupported=False)
            return k
        text = self.text
        pieces = []
        bounds = [toks[k].end] + [toks[c].end for c in parts[1:]]  # start offsets of each part's text
        ends = [toks[c].start for c in parts[1:]] + [toks[close].start]
        for a, b in zip(bounds, ends):
            pieces.append(text[a:b])
        if len(parts) == 4:
            self.note(line, "streams", "the emulator runs every launch and copy synchronously, in program order: "
                                       "kernels on different streams never overlap")
        while len(pieces) < 4:
            pieces.append(" 0")
        callee = text[toks[start].start:toks[k].start]
        gap = text[toks[close + 2].end:toks[open_paren].start]
        args = text[toks[open_paren].end:toks[close_paren].start]
        has_args = close_paren > open_paren + 1

        def spaced(piece: str) -> str:
            return piece if piece[:1].isspace() else " " + piece
        callee_words = [t.text for t in toks[start:k]]
        if callee_words[-1] in self.deduced_kernels and all(w == "::" or IDENT.fullmatch(w) for w in callee_words):
            # A template (or overloaded) kernel whose arguments choose the specialization: the
            # prelude's launch_deduced resolves it (see cuda_run_prelude.h).
            name = callee.strip()
            callee = (f"[](auto&&... a_) {{ {name}(a_...); }}, [](auto t_) -> decltype(static_cast<typename "
                      f"decltype(t_)::type>({name})) {{ return static_cast<typename decltype(t_)::type>({name}); }}"
                      + callee[len(callee.rstrip()):])
            replacement = "::inferlab_cuda_run::launch_deduced(" + callee + ","
        else:
            replacement = "::simt::launch(" + callee + ","
        replacement += ",".join(spaced(p) for p in pieces)
        replacement += ("," + spaced(gap + args) if has_args else gap + args) + ")"
        self.edits.append((toks[start].start, toks[close_paren].end, replacement))
        self.launches += 1
        return close_paren + 1

    # -- extern __shared__ --

    def _extern_shared(self, code: list[Token], i: int, scopes: list[_Scope]) -> int:
        """Rewrites `extern __shared__ T name[];` starting at code[i]; returns the index after it."""
        j = i
        depth = 0
        while j < len(code):
            w = code[j].text
            if w in ("(", "["):
                depth += 1
            elif w in (")", "]"):
                depth -= 1
            elif w in ("{", "}"):
                return i
            elif w == ";" and depth == 0:
                break
            j += 1
        else:
            return i
        decl = code[i:j]
        if not any(t.text == "__shared__" for t in decl):
            return i
        line = code[i].line
        # Specifiers: drop extern, __shared__ and alignment attributes.
        kept: list[Token] = []
        k = 0
        while k < len(decl):
            w = decl[k].text
            if w in ("extern", "__shared__"):
                k += 1
                continue
            if w in ("__align__", "alignas", "__attribute__") and k + 1 < len(decl) and decl[k + 1].text == "(":
                close = _match_forward(decl, k + 1)
                k = (close if close is not None else k) + 1
                continue
            kept.append(decl[k])
            k += 1
        # Declarators: NAME [ ] separated by commas after the type.
        names = []
        m = len(kept)
        while m >= 3 and kept[m - 1].text == "]" and kept[m - 2].text == "[" and kept[m - 3].kind == "ident":
            names.insert(0, kept[m - 3].text)
            m -= 3
            if m >= 1 and kept[m - 1].text == ",":
                m -= 1
            else:
                break
        type_tokens = kept[:m]
        if not names or not type_tokens:
            self.reject(line, "an extern __shared__ declaration cuda-run cannot read",
                        "write it as extern __shared__ T name[];", unsupported=False)
            return j + 1
        type_text = " ".join(t.text for t in type_tokens)
        expression = f"::inferlab_cuda_run::dynamic_shared<{type_text}>()"
        span_start, span_end = code[i].start, code[j].end
        newlines = self.text.count("\n", span_start, span_end)
        scope = scopes[-1].kind if scopes else "namespace"
        if scope in ("function", "block"):
            replacement = " ".join(f"{type_text}* const {name} = {expression};" for name in names)
            self.edits.append((span_start, span_end, replacement + "\n" * newlines))
        elif scope == "namespace":
            defines = "".join(f"\n#define {name} ({expression})" for name in names)
            end_line = code[j].line
            self.edits.append((span_start, span_end, defines + "\n" + self.line_directive(end_line) + "\n"))
        else:
            self.reject(line, "extern __shared__ inside a class", "declare it in the kernel", unsupported=False)
        return j + 1

    # -- identifiers --

    def _identifiers(self, tokens: list[Token], scopes) -> None:
        for k, t in enumerate(tokens):
            if t.kind == "ident" and t.active:
                self._identifier(tokens, k, scopes or [])

    def _identifier(self, toks: list[Token], k: int, scopes: list[_Scope]) -> None:
        t = toks[k]
        name = t.text
        nxt = toks[k + 1].text if k + 1 < len(toks) else ""
        prev = toks[k - 1].text if k > 0 else ""
        member = prev in (".", "->")  # a member of the user's own object, not a CUDA name
        in_device = bool(scopes) and scopes[-1].device
        if name in RULES and not member:
            construct, advice = RULES[name]
            self.reject(t.line, construct if name in construct else f"{construct} ({name})", advice)
            return
        for pattern, (construct, advice) in RULE_PATTERNS:
            if pattern.match(name) and not member:
                self.reject(t.line, f"{construct} ({name})", advice)
                return
        if name in ("texture", "surface") and nxt == "<" and not member:
            self.reject(t.line, f"{name} references ({name}<...>)", TEXTURE_ADVICE)
            return
        if name == "cuda" and nxt == "::" and prev != "::":
            self.reject(t.line, "libcu++ (cuda::...)", "use the CUDA built-ins (atomics, __syncthreads(), __shfl_*_sync())")
            return
        if nxt != "(" or member:
            if name in STREAM_NAMES or name == "cudaStream_t":
                self.note(t.line, "streams", "the emulator runs every launch and copy synchronously, in program "
                                             "order: kernels on different streams never overlap")
            return
        # Calls.
        api = self.api
        if name.startswith("cuda") and name[4:5].isupper():
            if in_device:
                self.reject(t.line, f"{name} called in device code (the device runtime)",
                            "the emulator runs runtime calls on the host only")
            elif name in RUNTIME_ADVICE:
                construct, advice = RUNTIME_ADVICE[name]
                self.reject(t.line, construct if name in construct else f"{construct} ({name})", advice)
            elif name not in api.runtime_supported and name in api.runtime_known:
                self.reject(t.line, f"the runtime call {name}",
                            "the emulator provides " + ", ".join(sorted(api.runtime_supported)))
            if name in STREAM_NAMES:
                self.note(t.line, "streams", "the emulator runs every launch and copy synchronously, in program "
                                             "order: kernels on different streams never overlap")
        elif name.startswith("cublas") and name[6:7].isupper():
            if api.cublas_supported and name not in api.cublas_supported and name in api.cublas_known:
                self.reject(t.line, f"the cuBLAS call {name}",
                            "the emulator provides " + ", ".join(sorted(api.cublas_supported)))
        elif name.startswith("cu") and name[2:3].isupper():
            known = name in api.driver_known if api.driver_known else bool(FALLBACK_DRIVER.match(name))
            if known:
                self.reject(t.line, f"the CUDA driver API ({name})",
                            "use the runtime API (cudaMalloc, cudaMemcpy, kernel<<<...>>>)")


def _kernels_needing_deduction(code: list[Token]) -> set:
    """Names of the file's template kernels and of kernels defined more than once (overloads):
    `name<<<...>>>(args)` lets the arguments pick the specialization, so simt::launch cannot take
    `name` as one function pointer."""
    templates, definitions = set(), {}
    for i, t in enumerate(code):
        if t.text != "__global__":
            continue
        j = i - 1
        is_template = False
        while j >= 0 and code[j].text not in (";", "{", "}"):
            is_template = is_template or code[j].text == "template"
            j -= 1
        # The name: the first identifier followed by '(' that is not an attribute.
        j = i + 1
        name = None
        while j + 1 < len(code) and code[j].text not in (";", "{", "}"):
            if code[j].text in ("__launch_bounds__", "__attribute__", "alignas", "__align__", "__declspec") \
                    and code[j + 1].text == "(":
                j = (_match_forward(code, j + 1) or j) + 1
                continue
            if code[j].kind == "ident" and code[j + 1].text == "(":
                name = code[j].text
                close = _match_forward(code, j + 1)
                is_definition = close is not None and any(
                    c.text == "{" for c in code[close + 1:close + 8] if c.text not in (";",)) and not any(
                    c.text == ";" for c in code[close + 1:close + 2])
                if is_definition:
                    definitions[name] = definitions.get(name, 0) + 1
                break
            j += 1
        if name and is_template:
            templates.add(name)
    return templates | {name for name, count in definitions.items() if count > 1}


def _match_forward(toks: list[Token], k: int) -> Optional[int]:
    """Index of the bracket closing the '(' / '[' / '{' at toks[k]."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = []
    for j in range(k, len(toks)):
        w = toks[j].text
        if w in pairs:
            stack.append(pairs[w])
        elif w in (")", "]", "}"):
            if not stack or stack.pop() != w:
                return None
            if not stack:
                return j
    return None


def _match_back(toks: list[Token], k: int, lo: int) -> Optional[int]:
    """Index of the bracket opening the ')' / ']' / '}' / '>' at toks[k] (angles count as brackets
    only outside parentheses; `<<` is a shift)."""
    pairs = {")": "(", "]": "[", "}": "{", ">": "<"}
    stack = []
    j = k
    while j >= lo:
        w = toks[j].text
        if w in pairs:
            if w != ">" or not stack or stack[-1] == "<":
                stack.append(pairs[w])
        elif w in ("(", "[", "{", "<"):
            if w == "<" and stack and stack[-1] != "<":
                j -= 1
                continue  # a less-than inside parentheses
            if not stack or stack.pop() != w:
                return None
            if not stack:
                return j
        elif w in (";",):
            return None
        j -= 1
    return None


def _callee_start(toks: list[Token], k: int, lo: int) -> Optional[int]:
    """Index of the first token of the kernel expression before the '<<<' at toks[k]."""
    j = k - 1
    while j >= lo:
        t = toks[j]
        if t.text == ">":
            opening = _match_back(toks, j, lo)
            if opening is None or opening - 1 < lo or toks[opening - 1].kind != "ident":
                return None
            j = opening - 1
        elif t.text == ")":
            opening = _match_back(toks, j, lo)
            if opening is None:
                return None
            before = toks[opening - 1] if opening - 1 >= lo else None
            if before is not None and (before.text in (">", ")", "]") or
                                       (before.kind == "ident" and before.text not in CONTROL_KEYWORDS)):
                j = opening - 1  # a call returning the kernel: f(...)<<<...>>>
                continue
            return opening
        elif t.kind != "ident" or t.text in CONTROL_KEYWORDS:
            return None
        # toks[j] is an identifier: extend over `::`, `.`, `->`.
        if j - 1 >= lo and toks[j - 1].text == "::":
            if j - 2 >= lo and (toks[j - 2].kind == "ident" or toks[j - 2].text == ">"):
                j -= 2
                continue
            return j - 1
        if j - 1 >= lo and toks[j - 1].text in (".", "->"):
            j -= 2
            continue
        return j
    return None


def _launch_close(toks: list[Token], k: int) -> Optional[int]:
    """Index of the first '>' of the '>>>' closing the launch configuration opened at toks[k]."""
    depth = 0
    j = k + 1
    while j < len(toks):
        w = toks[j].text
        if w in ("(", "[", "{"):
            depth += 1
        elif w in (")", "]", "}"):
            depth -= 1
            if depth < 0:
                return None
        elif w == ";":
            return None
        elif w == ">" and depth == 0:
            run = j
            while run + 1 < len(toks) and toks[run + 1].text == ">" and toks[run + 1].start == toks[run].end:
                run += 1
            if run - j + 1 >= 3:
                return run - 2  # the last three of a run of '>' (`foo<int>>>>`)
            j = run
        j += 1
    return None


def _split_commas(toks: list[Token], lo: int, hi: int) -> list[int]:
    """Start indices of the comma-separated parts of toks[lo:hi] (a part's first index is lo or a
    comma's index)."""
    parts = [lo - 1]
    depth = 0
    for j in range(lo, hi):
        w = toks[j].text
        if w in ("(", "[", "{"):
            depth += 1
        elif w in (")", "]", "}"):
            depth -= 1
        elif w == "," and depth == 0:
            parts.append(j)
    if hi == lo:
        return []
    return parts


def translate(text: str, path: str, api: Optional[Api] = None) -> Translation:
    """Translates CUDA source `text` (read from `path`, the name the reports will show)."""
    return Translator(text, path, api).run()


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print("usage: cuda_translate.py FILE.cu   (prints the C++ that cuda-run compiles)", file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        result = translate(f.read(), argv[1])
    for issue in result.rejections:
        print(issue.format(argv[1], "error"), file=sys.stderr)
    for issue in result.notes:
        print(issue.format(argv[1], "note"), file=sys.stderr)
    sys.stdout.write(result.text)
    return 1 if result.rejections else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
