#!/usr/bin/env python3
"""Unit tests of cuda-run's translator (cuda_translate.py): launches, extern __shared__, headers,
rejections — and that comments, strings and line numbers come through untouched."""

import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cuda_translate as ct  # noqa: E402

API = ct.Api(runtime_supported={"cudaMalloc", "cudaFree", "cudaMemcpy", "cudaDeviceSynchronize",
                                "cudaStreamCreate", "cudaGetLastError"},
             runtime_known={"cudaMalloc", "cudaFree", "cudaMemcpy", "cudaDeviceSynchronize", "cudaStreamCreate",
                            "cudaGetLastError", "cudaMallocPitch", "cudaMemcpy2D", "cudaMallocManaged"},
             cublas_supported={"cublasCreate", "cublasSgemm"},
             cublas_known={"cublasCreate", "cublasSgemm", "cublasSgemv"},
             driver_known={"cuInit", "cuModuleLoad"})


def translate(source, path="k.cu"):
    return ct.translate(source, path, API)


def body(result):
    """The translation without its preamble (everything after `#line 1 "..."`)."""
    return result.text.split('#line 1 "k.cu"\n', 1)[1]


def lines_of_markers(text, preprocessed=False):
    """{marker: line} for every /*@name*/ marker; with preprocessed=True, lines follow #line."""
    found = {}
    line = 1
    for raw in text.split("\n"):
        m = re.match(r'\s*#line (\d+) "[^"]*"\s*$', raw) if preprocessed else None
        if m:
            line = int(m.group(1))
            continue
        for name in re.findall(r"/\*@(\w+)\*/", raw):
            found[name] = line
        line += 1
    return found


class Launches(unittest.TestCase):
    def test_two_to_four_configuration_arguments(self):
        r = translate("void f() {\n  k<<<g, b>>>(x, y);\n  k<<<g, b, s>>>(x);\n  k<<<g, b, s, st>>>();\n}\n")
        self.assertEqual(r.rejections, [])
        self.assertEqual(r.launches, 3)
        self.assertIn("::simt::launch(k, g, b, 0, 0, x, y);", body(r))
        self.assertIn("::simt::launch(k, g, b, s, 0, x);", body(r))
        self.assertIn("::simt::launch(k, g, b, s, st);", body(r))

    def test_template_kernels_nested_templates_and_qualified_names(self):
        r = translate("void f() {\n"
                      "  reduce<float, 128><<<n, 128, 128 * sizeof(float)>>>(in, out);\n"
                      "  ns::kernel<Vec<float, 4>, Tile<2>><<<dim3(2, 3), dim3(32, 4)>>>(p);\n"
                      "  ::top<(N > 2)><<<1, 1>>>();\n"
                      "  pick(mode)<<<1, 1>>>(q);\n"
                      "}\n")
        self.assertEqual(r.rejections, [])
        text = body(r)
        self.assertIn("::simt::launch(reduce<float, 128>, n, 128, 128 * sizeof(float), 0, in, out);", text)
        self.assertIn("::simt::launch(ns::kernel<Vec<float, 4>, Tile<2>>, dim3(2, 3), dim3(32, 4), 0, 0, p);", text)
        self.assertIn("::simt::launch(::top<(N > 2)>, 1, 1, 0, 0);", text)
        self.assertIn("::simt::launch(pick(mode), 1, 1, 0, 0, q);", text)

    def test_kernels_whose_arguments_choose_the_specialization(self):
        r = translate("template <typename T>\n__global__ void __launch_bounds__(256) fill(T* p, T v) {}\n"
                      "__global__ void twice(float* p);\n__global__ void twice(float* p) {}\n"
                      "__global__ void over(int* p) {}\n__global__ void over(float* p) {}\n"
                      "void f() {\n"
                      "  fill<<<1, 32>>>(p, 1.0f); /*@deduced*/\n"
                      "  fill<float><<<1, 32>>>(p, 1.0f);\n"
                      "  twice<<<1, 32>>>(p);\n"
                      "  over<<<1, 32>>>(q);\n"
                      "}\n")
        text = body(r)
        self.assertIn("::inferlab_cuda_run::launch_deduced([](auto&&... a_) { fill(a_...); }, [](auto t_) -> "
                      "decltype(static_cast<typename decltype(t_)::type>(fill)) { return static_cast<typename "
                      "decltype(t_)::type>(fill); }, 1, 32, 0, 0, p, 1.0f); /*@deduced*/", text)
        self.assertIn("::simt::launch(fill<float>, 1, 32, 0, 0, p, 1.0f);", text)
        self.assertIn("::simt::launch(twice, 1, 32, 0, 0, p);", text)
        self.assertIn("::inferlab_cuda_run::launch_deduced([](auto&&... a_) { over(a_...); }", text)
        self.assertEqual(lines_of_markers(text), {"deduced": 8})

    def test_template_closers_and_shifts_are_not_launches(self):
        source = ("std::vector<std::vector<std::vector<int>>> v;\n"
                  "int a = b >> 2, c = d << 3;\n"
                  "std::ostream& operator<<(std::ostream& o, X x) { return o << x.v; }\n")
        r = translate(source)
        self.assertEqual(body(r), source)
        self.assertEqual(r.launches, 0)

    def test_comments_and_strings_are_untouched(self):
        source = ('// k<<<1, 1>>>(x); extern __shared__ float a[]; asm("x");\n'
                  "/* k<<<1, 1>>>(x);\n   extern __shared__ float b[]; cooperative_groups */\n"
                  'const char* s = "k<<<1, 1>>>(x) extern __shared__ float c[]; asm";\n'
                  "const char* raw = R\"delim(k<<<1,1>>>(y) \" )\" extern __shared__ float d[];)delim\";\n"
                  "char q = '\\'', lt = '<';\n"
                  "// a line comment continued \\\n   k<<<1, 1>>>(z); asm\n"
                  'const wchar_t* w = L"asm"; auto u = u8"curand_init";\n')
        r = translate(source)
        self.assertEqual(body(r), source)
        self.assertEqual(r.rejections, [])
        self.assertEqual(r.launches, 0)

    def test_comments_inside_a_launch_are_kept(self):
        r = translate("void f() {\n  k<<<grid /* blocks */, block>>>(a, /* b */ c);\n}\n")
        self.assertIn("::simt::launch(k, grid /* blocks */, block, 0, 0, a, /* b */ c);", body(r))

    def test_launch_in_a_macro(self):
        r = translate("#define LAUNCH(kernel, ...) kernel<<<1, 32>>>(__VA_ARGS__)\nvoid f() { LAUNCH(k, p); }\n")
        self.assertIn("#define LAUNCH(kernel, ...) ::simt::launch(kernel, 1, 32, 0, 0, __VA_ARGS__)", body(r))

    def test_a_stream_argument_adds_a_note(self):
        r = translate("void f() { k<<<1, 1, 0, stream>>>(); }\n")
        self.assertEqual([n.construct for n in r.notes], ["streams"])

    def test_an_unreadable_launch_is_rejected_with_its_line(self):
        r = translate("void f() {\n\n  k<<<1>>>(x);\n}\n")
        self.assertEqual([(i.line, i.unsupported) for i in r.rejections], [(3, False)])
        self.assertIn("1 configuration arguments", r.rejections[0].construct)


class LineNumbers(unittest.TestCase):
    SOURCE = """#include <cuda_runtime.h>  /*@include*/
#include <cublas_v2.h>
extern __shared__ __align__(16)
    unsigned char raw[];  /*@after_namespace_shared*/
/*@before_kernel*/
template <typename T, int N>
__global__ void k(T* out) {
  extern __shared__ T
      tile[];  /*@after_block_shared*/
  tile[threadIdx.x] = out[threadIdx.x]; /*@body*/
}
int main() {
  k<float,
    4><<<dim3(1,
              1),
         32,
         32 * sizeof(float)>>>(
      nullptr);  /*@launch_end*/
  k<float, 4><<<1, 32>>>(nullptr); k<float, 4><<<1, 32>>>(nullptr); /*@two_launches*/
  return 0;  /*@last*/
}
"""

    def test_every_line_stays_in_place(self):
        r = translate(self.SOURCE)
        self.assertEqual(r.rejections, [])
        self.assertEqual(r.launches, 3)
        expected = lines_of_markers(self.SOURCE)
        self.assertEqual(lines_of_markers(body(r), preprocessed=True), expected)

    def test_block_scope_replacement_keeps_the_line_count(self):
        r = translate("__global__ void k() {\n  extern __shared__\n  float buf[];\n  buf[0] = 1; /*@use*/\n}\n")
        text = body(r)
        self.assertIn("float* const buf = ::inferlab_cuda_run::dynamic_shared<float>();", text)
        self.assertEqual(lines_of_markers(text), {"use": 4})
        self.assertNotIn("#line", text)


class ExternShared(unittest.TestCase):
    def test_block_scope_forms(self):
        r = translate("template <class T> __global__ void k() {\n"
                      "  extern __shared__ __align__(16) T a[];\n"
                      "  extern volatile __shared__ float b[];\n"
                      "  __shared__ extern alignas(8) unsigned char c[];\n"
                      "  extern __shared__ float4 d[], e[];\n"
                      "  if (true) { extern __shared__ int f[]; }\n"
                      "  auto lambda = [] { extern __shared__ short g[]; };\n"
                      "}\n")
        self.assertEqual(r.rejections, [])
        text = body(r)
        for declaration in ["T* const a = ::inferlab_cuda_run::dynamic_shared<T>();",
                            "volatile float* const b = ::inferlab_cuda_run::dynamic_shared<volatile float>();",
                            "unsigned char* const c = ::inferlab_cuda_run::dynamic_shared<unsigned char>();",
                            "float4* const d = ::inferlab_cuda_run::dynamic_shared<float4>(); "
                            "float4* const e = ::inferlab_cuda_run::dynamic_shared<float4>();",
                            "int* const f = ::inferlab_cuda_run::dynamic_shared<int>();",
                            "short* const g = ::inferlab_cuda_run::dynamic_shared<short>();"]:
            self.assertIn(declaration, text)
        self.assertNotIn("extern", text)

    def test_namespace_scope_becomes_a_macro(self):
        r = translate("namespace lab {\nextern __shared__ __align__(16) float buf[];\n"
                      "__global__ void k() { buf[threadIdx.x] = 0; }\n}\n")
        text = body(r)
        self.assertIn("\n#define buf (::inferlab_cuda_run::dynamic_shared<float>())\n", text)
        self.assertIn('#line 2 "k.cu"', text)

    def test_extern_c_and_plain_extern_are_left_alone(self):
        source = 'extern "C" __global__ void k(float* p) { p[0] = 1; }\nextern int count;\nextern "C" {\nint f();\n}\n'
        r = translate(source)
        self.assertEqual(body(r), source)


class Headers(unittest.TestCase):
    def test_provided_mapped_and_kept_headers(self):
        r = translate("#include <cuda_runtime.h>\n#include \"cuda_fp16.h\"\n#include <cublas_v2.h>\n"
                      "#include <mma.h>\n#include <cstdio>\n#include \"my_header.cuh\"\n")
        self.assertEqual(r.rejections, [])
        self.assertIn('#include "simt/cublas.h"', r.text.split("#line 1")[0])
        self.assertIn("namespace nvcuda { namespace wmma = ::simt::wmma; }", r.text.split("#line 1")[0])
        text = body(r)
        self.assertNotIn("#include <cuda_runtime.h>", text)
        self.assertNotIn("#include <cublas_v2.h>", text)
        self.assertIn("#include <cstdio>", text)
        self.assertIn('#include "my_header.cuh"', text)
        self.assertEqual(text.count("\n"), 6)

    def test_rejected_headers_name_their_line(self):
        r = translate("#include <cstdio>\n#include <thrust/device_vector.h>\n#include <cub/cub.cuh>\n"
                      "#include <curand.h>\n#include <cooperative_groups/reduce.h>\n")
        self.assertEqual([(i.line, i.construct.split(": ")[1]) for i in r.rejections],
                         [(2, "Thrust"), (3, "CUB"), (4, "cuRAND"), (5, "cooperative groups")])


class Rejections(unittest.TestCase):
    def rejected(self, source):
        return [(i.line, i.construct) for i in translate(source).rejections]

    def test_unsupported_constructs_with_their_lines(self):
        found = self.rejected("namespace cg = cooperative_groups;\n"
                              "__global__ void k(float* p) {\n"
                              "  asm volatile(\"bar.sync 0;\");\n"
                              "  __threadfence_system();\n"
                              "  atomicAdd_system(p, 1.0f);\n"
                              "  curandState state;\n"
                              "  float v = tex1Dfetch<float>(t, 0);\n"
                              "}\n"
                              "__managed__ int counter;\n"
                              "texture<float, 1> old_style;\n"
                              "cuda::std::atomic<int> a;\n")
        self.assertEqual([line for line, _ in found], [1, 3, 4, 5, 6, 7, 9, 10, 11])
        self.assertIn("cooperative groups", found[0][1])
        self.assertIn("inline assembly", found[1][1])

    def test_dynamic_parallelism_and_the_device_runtime(self):
        found = self.rejected("__global__ void child() {}\n"
                              "__global__ void parent() {\n"
                              "  if (threadIdx.x == 0) {\n"
                              "    child<<<1, 1>>>();\n"
                              "    cudaDeviceSynchronize();\n"
                              "  }\n"
                              "}\n"
                              "__host__ __device__ void both() { child<<<1, 1>>>(); }\n"
                              "int main() {\n"
                              "  auto go = [] { child<<<1, 1>>>(); };\n"
                              "  go();\n"
                              "  child<<<1, 1>>>();\n"
                              "  cudaDeviceSynchronize();\n"
                              "}\n")
        self.assertEqual([line for line, _ in found], [4, 5, 8])
        self.assertIn("dynamic parallelism", found[0][1])
        self.assertIn("device runtime", found[1][1])

    def test_runtime_calls_the_emulator_lacks(self):
        found = self.rejected("int cudaCheck(int e) { return e; }\n"
                              "int main() {\n"
                              "  void* p;\n"
                              "  cudaCheck(cudaMalloc(&p, 4));\n"
                              "  cudaMallocManaged(&p, 4);\n"
                              "  size_t pitch; cudaMallocPitch(&p, &pitch, 4, 4);\n"
                              "  cublasSgemv(h);\n"
                              "  cuInit(0);\n"
                              "  my.cudaMemcpy2D(p);\n"
                              "}\n")
        self.assertEqual([line for line, _ in found], [5, 6, 7, 8])
        self.assertIn("cudaMallocManaged", found[0][1])
        self.assertIn("cudaMallocPitch", found[1][1])
        self.assertIn("cublasSgemv", found[2][1])
        self.assertIn("driver API", found[3][1])

    def test_code_the_emulator_build_never_compiles_is_not_checked(self):
        found = self.rejected("#ifdef __CUDA_ARCH__\nasm(\"a\");\n#else\nasm(\"b\");\n#endif\n"
                              "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\nasm(\"c\");\n#elif 0\nasm(\"d\");\n"
                              "#elif SOMETHING\nasm(\"e\");\n#endif\n"
                              "#if 0\nasm(\"f\");\n#endif\n#ifndef __CUDACC__\nasm(\"g\");\n#endif\n"
                              "#if !defined(__CUDA_ARCH__) || FOO\nasm(\"h\");\n#endif\n")
        self.assertEqual([line for line, _ in found], [4, 11, 17, 20])

    def test_names_in_user_objects_are_not_cuda(self):
        self.assertEqual(self.rejected("struct S { void asm_like(); int texture; };\n"
                                       "void f(S s, int texture) { s.texture = texture; }\n"), [])

    def test_a_clean_file_has_no_rejections(self):
        r = translate("#include <cuda_runtime.h>\n#include <cstdio>\n"
                      "__global__ void k(float* p) { printf(\"%f\\n\", p[threadIdx.x]); }\n"
                      "int main() { float* p; cudaMalloc(&p, 4); k<<<1, 1>>>(p); cudaDeviceSynchronize(); "
                      "cudaFree(p); }\n")
        self.assertEqual(r.rejections, [])
        self.assertEqual(r.notes, [])


class Conditions(unittest.TestCase):
    def test_evaluation(self):
        def ev(text):
            return ct.evaluate_condition("if", ct._condition_words([t for t in ct.lex(text).tokens if t.significant]))
        self.assertIs(ev("0"), False)
        self.assertIs(ev("1"), True)
        self.assertIs(ev("defined(__CUDA_ARCH__)"), False)
        self.assertIs(ev("__CUDA_ARCH__ >= 800"), False)
        self.assertIs(ev("!defined __CUDACC__"), True)
        self.assertIsNone(ev("FOO"))
        self.assertIs(ev("FOO && defined(__CUDA_ARCH__)"), False)
        self.assertIs(ev("FOO || !defined(__CUDA_ARCH__)"), True)
        self.assertIsNone(ev("FOO(1) > 2"))


if __name__ == "__main__":
    unittest.main(verbosity=1)
