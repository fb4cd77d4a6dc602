#pragma once
/// @file fallback_types.h
/// The CUDA types the emulator needs, for machines without the CUDA toolkit (used only when
/// `cuda_runtime_api.h` is not on the include path, or SIMT_NO_TOOLKIT_HEADERS is defined).
/// Values and layouts follow CUDA's; only the subset the lessons use is here. fp16 is g++'s
/// `_Float16`; bfloat16 rounds to nearest even like `__float2bfloat16`.

#include <cmath>
#include <cstdint>
#include <cstring>

/// @cond SIMT_DETAIL
// ---- runtime types ----------------------------------------------------------------------------
enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorMisalignedAddress = 716,
  cudaErrorLaunchFailure = 719,
  cudaErrorUnknown = 999,
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};

enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrL2CacheSize = 38,
  cudaDevAttrMaxThreadsPerMultiProcessor = 39,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};

struct CUstream_st;
struct CUevent_st;
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  size_t totalConstMem;
  int major;
  int minor;
  int multiProcessorCount;
  int l2CacheSize;
  int maxThreadsPerMultiProcessor;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor;
  size_t sharedMemPerBlockOptin;
  int memoryBusWidth;
};

// ---- vector types -----------------------------------------------------------------------------
#define SIMT_VECTOR2(T, name, align)  \
  struct alignas(align) name {        \
    T x, y;                           \
  };                                  \
  inline name make_##name(T x, T y) { \
    return name{x, y};                \
  }
#define SIMT_VECTOR3(T, name)              \
  struct name {                            \
    T x, y, z;                             \
  };                                       \
  inline name make_##name(T x, T y, T z) { \
    return name{x, y, z};                  \
  }
#define SIMT_VECTOR4(T, name, align)            \
  struct alignas(align) name {                  \
    T x, y, z, w;                               \
  };                                            \
  inline name make_##name(T x, T y, T z, T w) { \
    return name{x, y, z, w};                    \
  }
SIMT_VECTOR2(signed char, char2, 2)
SIMT_VECTOR4(signed char, char4, 4)
SIMT_VECTOR2(unsigned char, uchar2, 2)
SIMT_VECTOR4(unsigned char, uchar4, 4)
SIMT_VECTOR2(short, short2, 4)
SIMT_VECTOR4(short, short4, 8)
SIMT_VECTOR2(int, int2, 8)
SIMT_VECTOR3(int, int3)
SIMT_VECTOR4(int, int4, 16)
SIMT_VECTOR2(unsigned, uint2, 8)
SIMT_VECTOR3(unsigned, uint3)
SIMT_VECTOR4(unsigned, uint4, 16)
SIMT_VECTOR2(float, float2, 8)
SIMT_VECTOR3(float, float3)
SIMT_VECTOR4(float, float4, 16)
SIMT_VECTOR2(double, double2, 16)
#undef SIMT_VECTOR2
#undef SIMT_VECTOR3
#undef SIMT_VECTOR4

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

#define __align__(n) alignas(n)

// ---- fp16 -------------------------------------------------------------------------------------
struct __half {
  unsigned short bits_;
  __half() = default;
  __half(float value) {  // like cuda_fp16.h: implicit conversions from and to float
    const _Float16 h = static_cast<_Float16>(value);
    std::memcpy(&bits_, &h, 2);
  }
  operator float() const {
    _Float16 h;
    std::memcpy(&h, &bits_, 2);
    return static_cast<float>(h);
  }
};
inline __half __float2half(float f) {
  return __half(f);
}
inline __half __float2half_rn(float f) {
  return __half(f);
}
inline float __half2float(__half h) {
  return static_cast<float>(h);
}
inline __half __int2half_rn(int i) {
  return __half(static_cast<float>(i));
}
inline unsigned short __half_as_ushort(__half h) {
  return h.bits_;
}
inline __half __ushort_as_half(unsigned short bits) {
  __half h;
  h.bits_ = bits;
  return h;
}

struct __half2 {
  __half x, y;
};
inline __half2 __halves2half2(__half a, __half b) {
  return __half2{a, b};
}
inline __half2 __half2half2(__half a) {
  return __half2{a, a};
}
inline __half2 __floats2half2_rn(float a, float b) {
  return __half2{__half(a), __half(b)};
}
inline __half2 __float2half2_rn(float a) {
  return __half2{__half(a), __half(a)};
}
inline __half2 __float22half2_rn(float2 v) {
  return __half2{__half(v.x), __half(v.y)};
}
inline float2 __half22float2(__half2 h) {
  return float2{static_cast<float>(h.x), static_cast<float>(h.y)};
}
inline float __low2float(__half2 h) {
  return static_cast<float>(h.x);
}
inline float __high2float(__half2 h) {
  return static_cast<float>(h.y);
}
inline __half __low2half(__half2 h) {
  return h.x;
}
inline __half __high2half(__half2 h) {
  return h.y;
}

// ---- bfloat16 ---------------------------------------------------------------------------------
struct __nv_bfloat16 {
  unsigned short bits_;
  __nv_bfloat16() = default;
  __nv_bfloat16(float value) {  // round to nearest even; NaN stays NaN
    uint32_t u;
    std::memcpy(&u, &value, 4);
    if (std::isnan(value))
      bits_ = static_cast<unsigned short>((u >> 16) | 0x40u);
    else
      bits_ = static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  operator float() const {
    const uint32_t u = static_cast<uint32_t>(bits_) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};
inline __nv_bfloat16 __float2bfloat16(float f) {
  return __nv_bfloat16(f);
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __nv_bfloat16(f);
}
inline float __bfloat162float(__nv_bfloat16 h) {
  return static_cast<float>(h);
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) {
  return h.bits_;
}

struct __nv_bfloat162 {
  __nv_bfloat16 x, y;
};
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162{a, b};
}
inline __nv_bfloat162 __float2bfloat162_rn(float a) {
  return __nv_bfloat162{a, a};
}
inline float2 __bfloat1622float2(__nv_bfloat162 h) {
  return float2{static_cast<float>(h.x), static_cast<float>(h.y)};
}
inline float __low2float(__nv_bfloat162 h) {
  return static_cast<float>(h.x);
}
inline float __high2float(__nv_bfloat162 h) {
  return static_cast<float>(h.y);
}

// Arithmetic, comparisons and the named intrinsics, computed in float and rounded once.
#define SIMT_16BIT_OPS(T, T2)                                          \
  inline T operator+(T a, T b) {                                       \
    return T(static_cast<float>(a) + static_cast<float>(b));           \
  }                                                                    \
  inline T operator-(T a, T b) {                                       \
    return T(static_cast<float>(a) - static_cast<float>(b));           \
  }                                                                    \
  inline T operator*(T a, T b) {                                       \
    return T(static_cast<float>(a) * static_cast<float>(b));           \
  }                                                                    \
  inline T operator/(T a, T b) {                                       \
    return T(static_cast<float>(a) / static_cast<float>(b));           \
  }                                                                    \
  inline T operator-(T a) {                                            \
    return T(-static_cast<float>(a));                                  \
  }                                                                    \
  inline T& operator+=(T& a, T b) {                                    \
    return a = a + b;                                                  \
  }                                                                    \
  inline T& operator-=(T& a, T b) {                                    \
    return a = a - b;                                                  \
  }                                                                    \
  inline T& operator*=(T& a, T b) {                                    \
    return a = a * b;                                                  \
  }                                                                    \
  inline T& operator/=(T& a, T b) {                                    \
    return a = a / b;                                                  \
  }                                                                    \
  inline bool operator==(T a, T b) {                                   \
    return static_cast<float>(a) == static_cast<float>(b);             \
  }                                                                    \
  inline bool operator!=(T a, T b) {                                   \
    return static_cast<float>(a) != static_cast<float>(b);             \
  }                                                                    \
  inline bool operator<(T a, T b) {                                    \
    return static_cast<float>(a) < static_cast<float>(b);              \
  }                                                                    \
  inline bool operator>(T a, T b) {                                    \
    return static_cast<float>(a) > static_cast<float>(b);              \
  }                                                                    \
  inline bool operator<=(T a, T b) {                                   \
    return static_cast<float>(a) <= static_cast<float>(b);             \
  }                                                                    \
  inline bool operator>=(T a, T b) {                                   \
    return static_cast<float>(a) >= static_cast<float>(b);             \
  }                                                                    \
  inline T __hadd(T a, T b) {                                          \
    return a + b;                                                      \
  }                                                                    \
  inline T __hsub(T a, T b) {                                          \
    return a - b;                                                      \
  }                                                                    \
  inline T __hmul(T a, T b) {                                          \
    return a * b;                                                      \
  }                                                                    \
  inline T __hdiv(T a, T b) {                                          \
    return a / b;                                                      \
  }                                                                    \
  inline T __hneg(T a) {                                               \
    return -a;                                                         \
  }                                                                    \
  inline T __habs(T a) {                                               \
    return T(std::fabs(static_cast<float>(a)));                        \
  }                                                                    \
  inline T __hmax(T a, T b) {                                          \
    return T(std::fmax(static_cast<float>(a), static_cast<float>(b))); \
  }                                                                    \
  inline T __hmin(T a, T b) {                                          \
    return T(std::fmin(static_cast<float>(a), static_cast<float>(b))); \
  }                                                                    \
  inline bool __hisnan(T a) {                                          \
    return std::isnan(static_cast<float>(a));                          \
  }                                                                    \
  inline T2 operator+(T2 a, T2 b) {                                    \
    return T2{a.x + b.x, a.y + b.y};                                   \
  }                                                                    \
  inline T2 operator-(T2 a, T2 b) {                                    \
    return T2{a.x - b.x, a.y - b.y};                                   \
  }                                                                    \
  inline T2 operator*(T2 a, T2 b) {                                    \
    return T2{a.x * b.x, a.y * b.y};                                   \
  }                                                                    \
  inline T2 operator/(T2 a, T2 b) {                                    \
    return T2{a.x / b.x, a.y / b.y};                                   \
  }                                                                    \
  inline T2 __hadd2(T2 a, T2 b) {                                      \
    return a + b;                                                      \
  }                                                                    \
  inline T2 __hsub2(T2 a, T2 b) {                                      \
    return a - b;                                                      \
  }                                                                    \
  inline T2 __hmul2(T2 a, T2 b) {                                      \
    return a * b;                                                      \
  }                                                                    \
  inline T2 __h2div(T2 a, T2 b) {                                      \
    return a / b;                                                      \
  }                                                                    \
  inline T2 __hmax2(T2 a, T2 b) {                                      \
    return T2{__hmax(a.x, b.x), __hmax(a.y, b.y)};                     \
  }                                                                    \
  inline T2 __hmin2(T2 a, T2 b) {                                      \
    return T2{__hmin(a.x, b.x), __hmin(a.y, b.y)};                     \
  }
SIMT_16BIT_OPS(__half, __half2)
SIMT_16BIT_OPS(__nv_bfloat16, __nv_bfloat162)
#undef SIMT_16BIT_OPS
/// @endcond
