// Device-side timing of the chapter-02 and chapter-05 CUDA prefill versions, of chapter 03's cuda/decode, and the GPU
// ceilings they are compared with (declared in cuda_timing.h). Compiled for sim and cuda like every kernel file; only
// the cuda build measures anything meaningful.
//
// How a version is timed (seconds_per_call):
//   1. allocate Q, K, V (as the version's element type), O and (unfused versions only) the H·L²
//      score scratch once, and fill
//      the inputs with uniform values in [-1, 1) on the device (no host data, no PCIe);
//   2. `warmup` calls (first-call costs: module loading, cuBLAS heuristics, cold L2), then wait;
//   3. record an event, queue `repetitions` calls back to back on one stream, record a second
//      event, wait for it: elapsed / repetitions. Events time the GPU's own clock, so the host's
//      launch overhead counts only where it keeps the GPU idle (tiny problems), as in real use.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/ceil_div.h"
#include "common/check.h"
#include "kernels/attention/cuda_prefill.cuh"
#include "kernels/timing/cuda_timing.h"
#include "kernels/kv/kv_factories.h"
#include "kernels/primitives/cublas_handle.cuh"
#include "kernels/decode/cuda_decode.cuh"
#include "kernels/fused/cuda_fused.cuh"
#include "kernels/quant/block_quant.h"
#include "kernels/quant/cuda_quant_matmul.cuh"

namespace inferlab::INFERLAB_BACKEND_NS {

namespace {

__device__ inline void store_value(float* at, float x) {
  *at = x;
}
__device__ inline void store_value(__half* at, float x) {
  *at = __float2half(x);
}
__device__ inline void store_value(__nv_bfloat16* at, float x) {
  *at = __float2bfloat16(x);
}
__device__ inline void store_value(int8_t* at, float x) {
  *at = static_cast<int8_t>(x * 127.0f);  // x in [-1, 1): a random int8 in [-127, 126]
}

// data[i] = a uniform value in [-1, 1) hashed from (i, seed): one thread per element.
template <class T>
__global__ void fill_uniform(T* data, size_t count, uint32_t seed) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  uint32_t x = uint32_t(i) * 0x9e3779b9u ^ uint32_t(i >> 32) ^ seed;  // a 32-bit integer hash
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  store_value(data + i, float(x) * (2.0f / 4294967296.0f) - 1.0f);
}

template <class T>
void fill_random(DeviceBuffer<T>& buffer, uint32_t seed, cudaStream_t stream) {
  const size_t blocks = (buffer.size() + 255) / 256;
  check_cuda(
      simt::launch(fill_uniform<T>, dim3(unsigned(blocks)), dim3(256), 0, stream, buffer.data(), buffer.size(), seed),
      "fill_uniform");
}

class Stream {
 public:
  Stream() { check_cuda(cudaStreamCreate(&stream_), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  Event() { check_cuda(cudaEventCreate(&event_), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(event_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// Mean seconds per call of @p call (which queues work on @p stream): @p warmup calls, then
// @p repetitions calls between two events.
template <class Call>
double time_on_stream(const Call& call, cudaStream_t stream, int warmup, int repetitions) {
  for (int i = 0; i < warmup; ++i) call();
  check_cuda(cudaStreamSynchronize(stream), "warm-up calls");
  const Event start, stop;
  check_cuda(cudaEventRecord(start.get(), stream), "cudaEventRecord");
  for (int i = 0; i < repetitions; ++i) call();
  check_cuda(cudaEventRecord(stop.get(), stream), "cudaEventRecord");
  check_cuda(cudaEventSynchronize(stop.get()), "timed calls");
  float milliseconds = 0.0f;
  check_cuda(cudaEventElapsedTime(&milliseconds, start.get(), stop.get()), "cudaEventElapsedTime");
  return double(milliseconds) * 1e-3 / repetitions;
}

// Times @p call for about @p seconds: one warm-up call, one timed call to size the batch, then a
// batch of at least 3 calls.
template <class Call>
double time_for(const Call& call, cudaStream_t stream, double seconds) {
  const double first = time_on_stream(call, stream, 1, 1);
  const double wanted = first > 0.0 ? seconds / first : 1000.0;
  const int repetitions = wanted < 3.0 ? 3 : wanted > 1000.0 ? 1000 : int(wanted);
  return time_on_stream(call, stream, 0, repetitions);
}

// Whether a timed problem allocates the H·L² score scratch of the unfused versions.
enum class Scratch { scores, none };

// One timed problem: random device inputs stored as T, the fp32 output and (Scratch::scores)
// the fp32 scores; a fused version gets none — at long L they would not even fit.
template <class T>
struct TimedProblem {
  TimedProblem(const AttentionShape& shape, cudaStream_t stream, Scratch scratch = Scratch::scores)
      : shape(shape),
        q(size_t(shape.num_heads * shape.seq_len * shape.head_dim)),
        k(size_t(shape.num_kv_heads * shape.seq_len * shape.head_dim)),
        v(k.size()),
        out(q.size()),
        scores(scratch == Scratch::scores ? score_elements(shape) : 0) {
    fill_random(q, 1, stream);
    fill_random(k, 2, stream);
    fill_random(v, 3, stream);
  }
  DeviceAttentionOf<T> view() const { return {q.data(), k.data(), v.data(), out.data(), shape}; }

  AttentionShape shape;
  DeviceBuffer<T> q, k, v;
  DeviceBuffer<float> out, scores;
};

template <class T>
double time_cublas(const AttentionShape& shape, int warmup, int repetitions) {
  const Stream stream;
  const TimedProblem<T> problem(shape, stream.get());
  DeviceBuffer<T> probs(score_elements(shape));
  const CublasHandle handle;
  return time_on_stream(
      [&] {
        attention_cublas_device<T>(problem.view(), problem.scores.data(), probs.data(), handle.get(), stream.get());
      },
      stream.get(), warmup, repetitions);
}

double time_fp32(void (*device_level)(const DeviceAttention&, float*, cudaStream_t), const AttentionShape& shape,
                 int warmup, int repetitions) {
  const Stream stream;
  const TimedProblem<float> problem(shape, stream.get());
  return time_on_stream([&] { device_level(problem.view(), problem.scores.data(), stream.get()); }, stream.get(),
                        warmup, repetitions);
}

// A fused version (chapter 05): no scratch.
template <class T>
double time_fused(void (*device_level)(const DeviceAttentionOf<T>&, cudaStream_t), const AttentionShape& shape,
                  int warmup, int repetitions) {
  const Stream stream;
  const TimedProblem<T> problem(shape, stream.get(), Scratch::none);
  return time_on_stream([&] { device_level(problem.view(), stream.get()); }, stream.get(), warmup, repetitions);
}

// One decode step in device memory (cuda/decode): random q and cache (every slot below
// max_seq_len filled: no poison needed, the kernel reads only the first seq_len), uniform lengths.
template <class T>
double time_decode(const DecodeShape& shape, int64_t seq_len, int64_t block_size, int warmup, int repetitions) {
  const Stream stream;
  const KvCacheShape cache_shape{shape.batch, shape.num_kv_heads, shape.max_seq_len, shape.head_dim};
  // Paged (block_size > 0): a pool of exactly the blocks the batch needs, handed out in
  // scattered order (no block after its logical predecessor), as chapter 06's tests and CPU
  // benchmark use. Same element count as the contiguous cache when block_size divides max_seq_len.
  const int64_t blocks_per_seq = block_size > 0 ? ceil_div(shape.max_seq_len, block_size) : 0;
  const size_t elements = block_size > 0 ? size_t(shape.batch * blocks_per_seq * block_size * shape.num_kv_heads *
                                                  shape.head_dim)
                                         : size_t(cache_shape.elements());
  DeviceBuffer<float> q(size_t(shape.batch * shape.num_heads * shape.head_dim)), out(q.size());
  DeviceBuffer<T> k(elements), v(k.size());
  DeviceBuffer<int> lengths(size_t(shape.batch));
  fill_random(q, 11, stream.get());
  fill_random(k, 12, stream.get());
  fill_random(v, 13, stream.get());
  const std::vector<int> host_lengths(size_t(shape.batch), int(seq_len));
  lengths.upload(host_lengths.data());
  const std::vector<int32_t> table = block_size > 0 ? scattered_block_order(shape.batch * blocks_per_seq, 6)
                                                    : std::vector<int32_t>{};
  DeviceBuffer<int> block_table(table.size());
  if (!table.empty()) block_table.upload(reinterpret_cast<const int*>(table.data()));
  check_cuda(cudaStreamSynchronize(stream.get()), "filling the decode inputs");
  const auto run = [&](auto layout) {
    using Layout = decltype(layout);
    DeviceDecode<T, float, Layout> problem;
    problem.q = q.data();
    problem.cache.k = k.data();
    problem.cache.v = v.data();
    problem.cache.lengths = lengths.data();
    problem.cache.layout = layout;
    problem.cache.head_dim = cache_shape.head_dim;
    problem.out = out.data();
    problem.shape = shape;
    problem.max_length = int(seq_len);
    return time_on_stream([&] { decode_device<T, Layout>(problem, stream.get()); }, stream.get(), warmup, repetitions);
  };
  if (block_size > 0)
    return run(PagedLayout{reinterpret_cast<const int32_t*>(block_table.data()), blocks_per_seq, block_size,
                           shape.num_kv_heads});
  return run(ContiguousLayout{cache_shape.num_kv_heads, cache_shape.max_seq_len});
}

// One INT8 decode step in device memory (cuda/decode_int8): random int8 rows, fp32 scales.
double time_decode_int8(KeyScaling key_scaling, const DecodeShape& shape, int64_t seq_len, int warmup,
                        int repetitions) {
  const Stream stream;
  const KvCacheShape cache_shape{shape.batch, shape.num_kv_heads, shape.max_seq_len, shape.head_dim};
  const bool per_channel = key_scaling == KeyScaling::per_channel;
  const size_t token_scales = size_t(shape.batch * shape.num_kv_heads * shape.max_seq_len);
  DeviceBuffer<float> q(size_t(shape.batch * shape.num_heads * shape.head_dim)), out(q.size());
  DeviceBuffer<int8_t> k(size_t(cache_shape.elements())), v(k.size());
  DeviceBuffer<float> k_scales(per_channel ? size_t(shape.batch * shape.num_kv_heads * shape.head_dim) : token_scales);
  DeviceBuffer<float> v_scales(token_scales);
  DeviceBuffer<int> lengths(size_t(shape.batch));
  fill_random(q, 11, stream.get());
  fill_random(k, 12, stream.get());
  fill_random(v, 13, stream.get());
  fill_random(k_scales, 14, stream.get());
  fill_random(v_scales, 15, stream.get());
  const std::vector<int> host_lengths(size_t(shape.batch), int(seq_len));
  lengths.upload(host_lengths.data());
  check_cuda(cudaStreamSynchronize(stream.get()), "filling the INT8 decode inputs");
  DeviceDecode<int8_t> problem;
  problem.q = q.data();
  problem.cache.k = k.data();
  problem.cache.v = v.data();
  problem.cache.k_scales = k_scales.data();
  problem.cache.v_scales = v_scales.data();
  problem.cache.lengths = lengths.data();
  problem.cache.layout = {cache_shape.num_kv_heads, cache_shape.max_seq_len};
  problem.cache.head_dim = cache_shape.head_dim;
  problem.cache.per_channel = per_channel;
  problem.out = out.data();
  problem.shape = shape;
  problem.max_length = int(seq_len);
  return time_on_stream([&] { decode_int8_device<float>(problem, stream.get()); }, stream.get(), warmup, repetitions);
}

void check_shape(const AttentionShape& shape) {
  require_positive("num_heads", shape.num_heads);
  require_positive("num_kv_heads", shape.num_kv_heads);
  require_positive("seq_len", shape.seq_len);
  require_positive("head_dim", shape.head_dim);
  require(shape.num_heads % shape.num_kv_heads == 0, "num_heads", shape.num_heads,
          "must be a multiple of num_kv_heads = " + std::to_string(shape.num_kv_heads));
}

}  // namespace

double seconds_per_call(std::string_view version, const AttentionShape& shape, int warmup, int repetitions) {
  require(warmup >= 0, "warmup", warmup, "must be >= 0");
  require_positive("repetitions", repetitions);
  check_shape(shape);
  if (version == "cuda/naive") return time_fp32(attention_naive_device, shape, warmup, repetitions);
  if (version == "cuda/tiled") return time_fp32(attention_tiled_device, shape, warmup, repetitions);
  if (version == "cuda/cublas") return time_cublas<float>(shape, warmup, repetitions);
  if (version == "cuda/cublas_fp16") return time_cublas<__half>(shape, warmup, repetitions);
  if (version == "cuda/cublas_bf16") return time_cublas<__nv_bfloat16>(shape, warmup, repetitions);
  if (version == "cuda/flash") return time_fused<float>(attention_flash_device, shape, warmup, repetitions);
  if (version == "cuda/flash_tc")
    return time_fused<__half>(attention_flash_tc_device<__half>, shape, warmup, repetitions);
  if (version == "cuda/flash_tc_bf16")
    return time_fused<__nv_bfloat16>(attention_flash_tc_device<__nv_bfloat16>, shape, warmup, repetitions);
  throw std::invalid_argument("version = " + std::string(version) +
                              ": has no device-level function to time; known: cuda/naive, cuda/tiled, cuda/cublas, "
                              "cuda/cublas_fp16, cuda/cublas_bf16, cuda/flash, cuda/flash_tc, cuda/flash_tc_bf16");
}

namespace {

// The checks of decode_seconds_per_call() and decode_int8_seconds_per_call().
void check_decode_timing(const DecodeShape& shape, int64_t seq_len, int warmup, int repetitions) {
  require(warmup >= 0, "warmup", warmup, "must be >= 0");
  require_positive("repetitions", repetitions);
  require_positive("batch", shape.batch);
  require_positive("num_heads", shape.num_heads);
  require_positive("num_kv_heads", shape.num_kv_heads);
  require_positive("max_seq_len", shape.max_seq_len);
  require_positive("head_dim", shape.head_dim);
  require(shape.num_heads % shape.num_kv_heads == 0, "num_heads", shape.num_heads,
          "must be a multiple of num_kv_heads = " + std::to_string(shape.num_kv_heads));
  require(seq_len >= 1 && seq_len <= shape.max_seq_len, "seq_len", seq_len,
          "must be in [1, max_seq_len = " + std::to_string(shape.max_seq_len) + "]");
}

}  // namespace

double decode_seconds_per_call(KvDtype cache_dtype, const DecodeShape& shape, int64_t seq_len, int warmup,
                               int repetitions) {
  check_decode_timing(shape, seq_len, warmup, repetitions);
  return cache_dtype == KvDtype::fp16 ? time_decode<__half>(shape, seq_len, 0, warmup, repetitions)
                                      : time_decode<float>(shape, seq_len, 0, warmup, repetitions);
}

double paged_decode_seconds_per_call(KvDtype cache_dtype, const DecodeShape& shape, int64_t seq_len,
                                     int64_t block_size, int warmup, int repetitions) {
  check_decode_timing(shape, seq_len, warmup, repetitions);
  require_positive("block_size", block_size);
  return cache_dtype == KvDtype::fp16 ? time_decode<__half>(shape, seq_len, block_size, warmup, repetitions)
                                      : time_decode<float>(shape, seq_len, block_size, warmup, repetitions);
}

double decode_int8_seconds_per_call(KeyScaling key_scaling, const DecodeShape& shape, int64_t seq_len, int warmup,
                                    int repetitions) {
  check_decode_timing(shape, seq_len, warmup, repetitions);
  return time_decode_int8(key_scaling, shape, seq_len, warmup, repetitions);
}

double quant_matmul_seconds_per_call(quant::GgmlType type, int64_t rows, int64_t out, int64_t in,
                                     quant::QuantMatmulKernel kernel, int warmup, int repetitions) {
  require(warmup >= 0, "warmup", warmup, "must be >= 0");
  require_positive("repetitions", repetitions);
  require_positive("rows", rows);
  require_positive("out", out);
  require(in > 0 && in % 32 == 0, "in", in, "must be a positive multiple of 32 (whole blocks)");
  // Random weights quantized on the host (the GGUF bytes a model would upload), x on the device.
  const int64_t row_bytes = quant::row_bytes(type, in);  // throws for a type without blocks
  std::vector<float> row(static_cast<size_t>(in));
  std::vector<uint8_t> host_w(static_cast<size_t>(out * row_bytes));
  uint32_t state = 12345;
  for (int64_t o = 0; o < out; ++o) {
    for (float& v : row) {
      state = state * 1664525u + 1013904223u;
      v = float(state >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
    quant::quantize_row(type, row, std::span(host_w.data() + o * row_bytes, size_t(row_bytes)));
  }
  DeviceBuffer<uint8_t> w(host_w.size());
  w.upload(host_w.data());
  DeviceBuffer<float> x(size_t(rows * in)), y(size_t(rows * out));
  DeviceBuffer<uint8_t> scratch(size_t(quant_activation_bytes(type, rows, in)));
  fill_random(x, 21, nullptr);
  const DeviceBlockMatrix matrix{type, out, in, w.data()};
  // quant_matmul_device queues on the default stream: the events go there too.
  return time_on_stream([&] { quant_matmul_device(x.data(), rows, matrix, scratch.data(), y.data(), kernel); }, nullptr,
                        warmup, repetitions);
}

DeviceCeilings measure_device_ceilings(int gemm_size, double copy_mib, double seconds_per_test) {
  require_positive("gemm_size", gemm_size);
  require(copy_mib > 0.0, "copy_mib", copy_mib, "must be > 0");
  require(seconds_per_test > 0.0, "seconds_per_test", seconds_per_test, "must be > 0");
  DeviceCeilings ceilings;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  ceilings.device = properties.name;
  const Stream stream;

  // Bandwidth: one buffer copied to another; each byte is read once and written once.
  const size_t copy_bytes = size_t(copy_mib * 1024.0 * 1024.0) / 16 * 16;
  ceilings.copy_mib = double(copy_bytes) / (1024.0 * 1024.0);
  {
    DeviceBuffer<float> source(copy_bytes / sizeof(float)), destination(copy_bytes / sizeof(float));
    fill_random(source, 4, stream.get());
    const double seconds = time_for(
        [&] {
          check_cuda(
              cudaMemcpyAsync(destination.data(), source.data(), copy_bytes, cudaMemcpyDeviceToDevice, stream.get()),
              "cudaMemcpyAsync (device to device)");
        },
        stream.get(), seconds_per_test);
    ceilings.copy_gbs = 2.0 * double(copy_bytes) / seconds / 1e9;
  }

  // Compute: C = A·B, n×n×n, random operands (zeros would draw less power and flatter the clock).
  const int n = gemm_size;
  const double gemm_flops = 2.0 * double(n) * double(n) * double(n);
  ceilings.gemm_size = n;
  const CublasHandle handle;
  check_cublas(cublasSetStream(handle.get(), stream.get()), "cublasSetStream");
  const float one = 1.0f, zero = 0.0f;
  DeviceBuffer<float> c(size_t(n) * n);
  {
    DeviceBuffer<float> a(size_t(n) * n), b(size_t(n) * n);
    fill_random(a, 5, stream.get());
    fill_random(b, 6, stream.get());
    const double seconds = time_for(
        [&] {
          check_cublas(cublasSgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), n, b.data(), n,
                                   &zero, c.data(), n),
                       "cublasSgemm");
        },
        stream.get(), seconds_per_test);
    ceilings.sgemm_gflops = gemm_flops / seconds / 1e9;
  }
  {
    DeviceBuffer<__half> a(size_t(n) * n), b(size_t(n) * n);
    fill_random(a, 7, stream.get());
    fill_random(b, 8, stream.get());
    const double seconds = time_for(
        [&] {
          check_cublas(
              cublasGemmEx(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), CUDA_R_16F, n, b.data(),
                           CUDA_R_16F, n, &zero, c.data(), CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx (fp16)");
        },
        stream.get(), seconds_per_test);
    ceilings.hgemm_gflops = gemm_flops / seconds / 1e9;
  }
  return ceilings;
}

}  // namespace inferlab::INFERLAB_BACKEND_NS
