// fp8.cu — FP8 (OCP e4m3 / e5m2) casts with per-tensor scales, and the amax they are computed from.
//
// gen-ptx: archs=89
//
// The conversions are the hardware's (sm_89+, PTX ISA 7.8): `cvt.rn.satfinite.{e4m3,e5m2}x2.f32`
// rounds to nearest even and saturates to the largest finite value (e4m3 ±448, e5m2 ±57344; ±inf
// saturates too); NaN stays NaN. `cvt.rn.f16x2.{e4m3,e5m2}x2` widens exactly. So this file is
// compiled for compute_89 only: the host refuses older GPUs with a typed error before loading it.
//
// Scale convention (Transformer Engine's): a tensor x is stored as q = fp8(x * scale) and read
// back as x ≈ f32(q) * inv_scale with inv_scale = 1 / scale. Both scales are one f32 in device
// memory, so a step can compute them on the GPU (no host round trip, capturable in a graph):
//   * current scaling: amax = max |x| (fp8_amax_*), then scale = fp8_max / amax;
//   * delayed scaling (TE's default): the cast records amax of what it converts (fp8_quant_* does
//     it in the same pass) into a history; the next step's scale comes from the history's maximum
//     (fp8_scale_update).
//
// amax is accumulated with an atomic max on the bit pattern of |x| (for non-negative floats the
// unsigned order is the float order, and every NaN is above +inf): a NaN anywhere makes amax NaN.
// amax buffers are max-accumulated: zero them to start a fresh maximum.
//
// Launch (all kernels but fp8_scale_update): block 256 threads exactly (the block reduction), any
// grid (grid-stride loops). Each thread converts 4 consecutive elements per step with one vector
// load and one 4-byte store when both pointers are so aligned, one element at a time otherwise.
#include "dtype.cuh"

#define FP8_THREADS 256

// Two floats to two fp8 bytes, `lo` in the low byte.
template <int E5>
__device__ __forceinline__ unsigned short fp8x2_from_f32(float lo, float hi) {
    unsigned short r;
    if (E5) {
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    } else {
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    }
    return r;
}

// Two fp8 bytes (low byte first) to two floats, exactly.
template <int E5>
__device__ __forceinline__ float2 fp8x2_to_f32(unsigned short v) {
    unsigned h2;
    if (E5) {
        asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h2) : "h"(v));
    } else {
        asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(v));
    }
    return make_float2(f16_to_f32((f16_t)(h2 & 0xffffu)), f16_to_f32((f16_t)(h2 >> 16)));
}

// The bits of |x|: ordered like |x| as unsigned integers, NaN above everything.
__device__ __forceinline__ unsigned abs_bits(float x) {
    return __float_as_uint(x) & 0x7fffffffu;
}

// Folds each thread's `m` into amax[0] (one atomic per block). Block FP8_THREADS.
__device__ __forceinline__ void block_amax(unsigned m, float* amax) {
    __shared__ unsigned warp_max[FP8_THREADS / 32];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned b = warp_max[0];
#pragma unroll
        for (int w = 1; w < FP8_THREADS / 32; ++w) b = max(b, warp_max[w]);
        atomicMax(reinterpret_cast<unsigned*>(amax), b);
    }
}

// Four consecutive source elements as floats (p aligned to 4 elements).
template <typename S>
__device__ __forceinline__ float4 load4(const typename DType<S>::Storage* p);
template <>
__device__ __forceinline__ float4 load4<float>(const float* p) {
    return *reinterpret_cast<const float4*>(p);
}
template <typename S>
__device__ __forceinline__ float4 load4(const typename DType<S>::Storage* p) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    return make_float4(DType<S>::load((unsigned short)(u.x & 0xffffu)), DType<S>::load((unsigned short)(u.x >> 16)),
                       DType<S>::load((unsigned short)(u.y & 0xffffu)), DType<S>::load((unsigned short)(u.y >> 16)));
}

// Four floats stored as four consecutive destination elements (p aligned to 4 elements).
template <typename D>
__device__ __forceinline__ void store4(typename DType<D>::Storage* p, float a, float b, float c, float d);
template <>
__device__ __forceinline__ void store4<float>(float* p, float a, float b, float c, float d) {
    *reinterpret_cast<float4*>(p) = make_float4(a, b, c, d);
}
template <typename D>
__device__ __forceinline__ void store4(typename DType<D>::Storage* p, float a, float b, float c, float d) {
    uint2 u;
    u.x = (unsigned)DType<D>::store(a) | ((unsigned)DType<D>::store(b) << 16);
    u.y = (unsigned)DType<D>::store(c) | ((unsigned)DType<D>::store(d) << 16);
    *reinterpret_cast<uint2*>(p) = u;
}

// q[i] = fp8(x[i] * scale[0]); amax[0] = max(amax[0], max_i |x[i]|).
template <typename S, int E5>
__device__ __forceinline__ void quant(const typename DType<S>::Storage* __restrict__ x, unsigned char* __restrict__ q,
                                      const float* __restrict__ scale, float* amax, u64 n) {
    typedef typename DType<S>::Storage T;
    const float s = *scale;
    unsigned m = 0;
    const bool vec = (((u64)x) % (4 * sizeof(T)) == 0) && (((u64)q) % 4 == 0);
    u64 done = 0;
    if (vec) {
        const u64 n4 = n / 4;
        for (u64 i = global_tid(); i < n4; i += grid_threads()) {
            const float4 v = load4<S>(x + 4 * i);
            m = max(max(m, abs_bits(v.x)), max(abs_bits(v.y), max(abs_bits(v.z), abs_bits(v.w))));
            const unsigned lo = fp8x2_from_f32<E5>(__fmul_rn(v.x, s), __fmul_rn(v.y, s));
            const unsigned hi = fp8x2_from_f32<E5>(__fmul_rn(v.z, s), __fmul_rn(v.w, s));
            reinterpret_cast<unsigned*>(q)[i] = lo | (hi << 16);
        }
        done = 4 * n4;
    }
    for (u64 i = done + global_tid(); i < n; i += grid_threads()) {
        const float v = DType<S>::load(x[i]);
        m = max(m, abs_bits(v));
        q[i] = (unsigned char)(fp8x2_from_f32<E5>(__fmul_rn(v, s), 0.0f) & 0xffu);
    }
    block_amax(m, amax);
}

// out[i] = f32(q[i]) * inv_scale[0], rounded once to the destination type.
template <int E5, typename D>
__device__ __forceinline__ void dequant(const unsigned char* __restrict__ q, typename DType<D>::Storage* __restrict__ out,
                                        const float* __restrict__ inv_scale, u64 n) {
    typedef typename DType<D>::Storage T;
    const float r = *inv_scale;
    const bool vec = (((u64)out) % (4 * sizeof(T)) == 0) && (((u64)q) % 4 == 0);
    u64 done = 0;
    if (vec) {
        const u64 n4 = n / 4;
        for (u64 i = global_tid(); i < n4; i += grid_threads()) {
            const unsigned w = reinterpret_cast<const unsigned*>(q)[i];
            const float2 a = fp8x2_to_f32<E5>((unsigned short)(w & 0xffffu));
            const float2 b = fp8x2_to_f32<E5>((unsigned short)(w >> 16));
            store4<D>(out + 4 * i, __fmul_rn(a.x, r), __fmul_rn(a.y, r), __fmul_rn(b.x, r), __fmul_rn(b.y, r));
        }
        done = 4 * n4;
    }
    for (u64 i = done + global_tid(); i < n; i += grid_threads()) {
        out[i] = DType<D>::store(__fmul_rn(fp8x2_to_f32<E5>((unsigned short)q[i]).x, r));
    }
}

// amax[0] = max(amax[0], max_i |x[i]|).
template <typename S>
__device__ __forceinline__ void amax_of(const typename DType<S>::Storage* __restrict__ x, float* amax, u64 n) {
    typedef typename DType<S>::Storage T;
    unsigned m = 0;
    u64 done = 0;
    if (((u64)x) % (4 * sizeof(T)) == 0) {
        const u64 n4 = n / 4;
        for (u64 i = global_tid(); i < n4; i += grid_threads()) {
            const float4 v = load4<S>(x + 4 * i);
            m = max(max(m, abs_bits(v.x)), max(abs_bits(v.y), max(abs_bits(v.z), abs_bits(v.w))));
        }
        done = 4 * n4;
    }
    for (u64 i = done + global_tid(); i < n; i += grid_threads()) m = max(m, abs_bits(DType<S>::load(x[i])));
    block_amax(m, amax);
}

extern "C" __global__ void __launch_bounds__(FP8_THREADS)
    fp8_quant_f32_e4m3(const float* x, unsigned char* q, const float* scale, float* amax, unsigned long long n) {
    quant<float, 0>(x, q, scale, amax, n);
}
extern "C" __global__ void __launch_bounds__(FP8_THREADS)
    fp8_quant_f32_e5m2(const float* x, unsigned char* q, const float* scale, float* amax, unsigned long long n) {
    quant<float, 1>(x, q, scale, amax, n);
}
extern "C" __global__ void __launch_bounds__(FP8_THREADS)
    fp8_quant_f16_e4m3(const f16_t* x, unsigned char* q, const float* scale, float* amax, unsigned long long n) {
    quant<F16, 0>(x, q, scale, amax, n);
}
extern "C" __global__ void __launch_bounds__(FP8_THREADS)
    fp8_quant_f16_e5m2(const f16_t* x, unsigned char* q, const float* scale, float* amax, unsigned long long n) {
    quant<F16, 1>(x, q, scale, amax, n);
}
extern "C" __global__ void __launch_bounds__(FP8_THREADS)
    fp8_quant_bf16_e4m3(const bf16_t* x, unsigned char* q, const float* scale, float* amax, unsigned long long n) {
    quant<BF16, 0>(x, q, scale, amax, n);
}
extern "C" __global__ void __launch_bounds__(FP8_THREADS)
    fp8_quant_bf16_e5m2(const bf16_t* x, unsigned char* q, const float* scale, float* amax, unsigned long long n) {
    quant<BF16, 1>(x, q, scale, amax, n);
}

extern "C" __global__ void __launch_bounds__(FP8_THREADS)
    fp8_dequant_e4m3_f32(const unsigned char* q, float* out, const float* inv_scale, unsigned long long n) {
    dequant<0, float>(q, out, inv_scale, n);
}
extern "C" __global__ void __launch_bounds__(FP8_THREADS)
    fp8_dequant_e5m2_f32(const unsigned char* q, float* out, const float* inv_scale, unsigned long long n) {
    dequant<1, float>(q, out, inv_scale, n);
}
extern "C" __global__ void __launch_bounds__(FP8_THREADS)
    fp8_dequant_e4m3_f16(const unsigned char* q, f16_t* out, const float* inv_scale, unsigned long long n) {
    dequant<0, F16>(q, out, inv_scale, n);
}
extern "C" __global__ void __launch_bounds__(FP8_THREADS)
    fp8_dequant_e5m2_f16(const unsigned char* q, f16_t* out, const float* inv_scale, unsigned long long n) {
    dequant<1, F16>(q, out, inv_scale, n);
}
extern "C" __global__ void __launch_bounds__(FP8_THREADS)
    fp8_dequant_e4m3_bf16(const unsigned char* q, bf16_t* out, const float* inv_scale, unsigned long long n) {
    dequant<0, BF16>(q, out, inv_scale, n);
}
extern "C" __global__ void __launch_bounds__(FP8_THREADS)
    fp8_dequant_e5m2_bf16(const unsigned char* q, bf16_t* out, const float* inv_scale, unsigned long long n) {
    dequant<1, BF16>(q, out, inv_scale, n);
}

extern "C" __global__ void __launch_bounds__(FP8_THREADS)
    fp8_amax_f32(const float* x, float* amax, unsigned long long n) {
    amax_of<float>(x, amax, n);
}
extern "C" __global__ void __launch_bounds__(FP8_THREADS)
    fp8_amax_f16(const f16_t* x, float* amax, unsigned long long n) {
    amax_of<F16>(x, amax, n);
}
extern "C" __global__ void __launch_bounds__(FP8_THREADS)
    fp8_amax_bf16(const bf16_t* x, float* amax, unsigned long long n) {
    amax_of<BF16>(x, amax, n);
}

// Delayed scaling's update (Transformer Engine's rule), one thread: a = max of history[0..len)
// (NaN ignored); when a is finite and > 0, scale = fp8_max / a / 2^margin, else scale keeps its
// value; inv_scale = 1 / scale. Launch one block of one thread (or more: thread 0 works).
extern "C" __global__ void fp8_scale_update(const float* history, int len, float* scale, float* inv_scale, float fp8_max,
                                            int margin) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    float a = 0.0f;
    for (int i = 0; i < len; ++i) a = fmaxf(a, fabsf(history[i]));  // fmaxf drops NaN
    float s = *scale;
    if (a > 0.0f && a <= 3.402823466e38f) s = ldexpf(fp8_max / a, -margin);
    *scale = s;
    *inv_scale = 1.0f / s;
}
