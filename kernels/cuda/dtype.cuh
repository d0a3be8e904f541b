// dtype.cuh — the element types shared by the kernels, with no CUDA headers at all.
//
// NVRTC 12.4 does not ship cuda_fp16.h / cuda_bf16.h as built-in headers, and these kernels must
// compile with NVRTC alone, so half precision is spelled out by hand:
//   * f16_t  = unsigned short holding IEEE 754 binary16 bits  (Rust: half::f16)
//   * bf16_t = unsigned short holding bfloat16 bits           (Rust: half::bf16)
// Arithmetic on them is done in f32: load -> convert to float -> compute -> round back (RNE).
// gen-ptx serves this header to NVRTC from memory (no include path is involved).
#pragma once

typedef unsigned short f16_t;
typedef unsigned short bf16_t;
typedef unsigned long long u64;

// binary16 <-> binary32 with the hardware conversion instructions (sm_53+).
__device__ __forceinline__ float f16_to_f32(f16_t h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ f16_t f32_to_f16(float f) {  // round to nearest even
    f16_t h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// bfloat16 is the top half of a binary32: widening is a shift, narrowing rounds to nearest even
// (the same bits as cvt.rn.bf16.f32 on sm_80; NaN becomes the quiet NaN 0x7fc0 with its sign).
__device__ __forceinline__ float bf16_to_f32(bf16_t h) {
    return __uint_as_float(((unsigned int)h) << 16);
}
__device__ __forceinline__ bf16_t f32_to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16_t)(u >> 16);
}

// Tag types let one template serve f16 and bf16 although both are stored as unsigned short.
struct F16 {};
struct BF16 {};

// Traits: Storage = what lives in memory, Compute = what arithmetic uses.
template <typename Tag> struct DType;
template <> struct DType<float> {
    typedef float Storage; typedef float Compute;
    static __device__ __forceinline__ float load(float x) { return x; }
    static __device__ __forceinline__ float store(float x) { return x; }
};
template <> struct DType<double> {
    typedef double Storage; typedef double Compute;
    static __device__ __forceinline__ double load(double x) { return x; }
    static __device__ __forceinline__ double store(double x) { return x; }
};
template <> struct DType<int> {
    typedef int Storage; typedef int Compute;
    static __device__ __forceinline__ int load(int x) { return x; }
    static __device__ __forceinline__ int store(int x) { return x; }
};
template <> struct DType<F16> {
    typedef f16_t Storage; typedef float Compute;
    static __device__ __forceinline__ float load(f16_t x) { return f16_to_f32(x); }
    static __device__ __forceinline__ f16_t store(float x) { return f32_to_f16(x); }
};
template <> struct DType<BF16> {
    typedef bf16_t Storage; typedef float Compute;
    static __device__ __forceinline__ float load(bf16_t x) { return bf16_to_f32(x); }
    static __device__ __forceinline__ bf16_t store(float x) { return f32_to_bf16(x); }
};

// True when every pointer given is 16-byte aligned (so 16-byte vector loads/stores are legal).
__device__ __forceinline__ bool aligned16(const void* a) {
    return ((u64)a & 15u) == 0;
}
__device__ __forceinline__ bool aligned16(const void* a, const void* b) {
    return (((u64)a | (u64)b) & 15u) == 0;
}
__device__ __forceinline__ bool aligned16(const void* a, const void* b, const void* c) {
    return (((u64)a | (u64)b | (u64)c) & 15u) == 0;
}

// A 16-byte packet of elements, moved with one 128-bit load or store.
template <typename S> struct Pack {
    enum { N = 16 / sizeof(S) };
    S v[N];
};
template <typename S> union PackBits {  // reinterpretation of the same 16 bytes
    uint4 raw;
    Pack<S> pack;
};
template <typename S>
__device__ __forceinline__ Pack<S> load_pack(const S* p) {  // p must be 16-byte aligned
    PackBits<S> u;
    u.raw = *reinterpret_cast<const uint4*>(p);
    return u.pack;
}
template <typename S>
__device__ __forceinline__ void store_pack(S* p, const Pack<S>& r) {  // p 16-byte aligned
    PackBits<S> u;
    u.pack = r;
    *reinterpret_cast<uint4*>(p) = u.raw;
}

// Grid-stride bookkeeping in 64 bits, so n up to 2^63 never overflows an index.
__device__ __forceinline__ u64 global_tid() { return (u64)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ u64 grid_threads() { return (u64)gridDim.x * blockDim.x; }
