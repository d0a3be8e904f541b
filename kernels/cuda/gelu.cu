// gelu.cu — GELU in the tanh form GPT-2 uses, forward and backward, in f32, f64, f16 and bf16
// (f16/bf16 computed in f32 and rounded once).
//
// Exact semantics (k = sqrt(2/pi), a = 0.044715):
//   u = k * (x + a * x^3),  t = tanh(u)
//   gelu_fwd:  y  = 0.5 * x * (1 + t)
//   gelu_bwd:  dx = dy * (0.5 * (1 + t) + 0.5 * x * (1 - t^2) * k * (1 + 3a * x^2))
// f64 computes exactly that with CUDA's tanh. f32 (and f16/bf16, computed in f32) use the same
// function through s = 0.5 (1 + t) = sigmoid(2u) = 1 / (1 + e), e = exp(-2u):
//   y = x * s,  dx = dy * (s + 2 x s (1 - s) k (1 + 3a x^2)),  1 - s = e s
// one ex2.approx and one rcp.approx instead of tanhf (the half-precision kernels are
// instruction-bound); and no cancellation in 1 + t where t -> -1, so the f32 results are within
// a few ulp of the exact function, plus the exponent's rounding (relative 2^-24 * |2u|) where s
// is small.
// In-place use (y == x, dx == dy) is allowed: each element is read, then written, by one thread.
//
// Launch: block 256, any grid (two 16-byte packets per thread cover the array in one step:
// ceil(n / (2 * 256 * 16 / sizeof(T))); with one packet per thread and its exponential after
// the load, the bf16 forward moved 2.7 TB/s on an H200 where PyTorch's moves 3.4). 16-byte
// packets when every pointer is 16-byte aligned, scalar otherwise and for the tail; 64-bit
// indices.
#include "dtype.cuh"
#include "ex2.cuh"

__device__ __forceinline__ double th(double v) { return tanh(v); }

template <typename F> __device__ __forceinline__ F gelu_k() { return (F)0.7978845608028654; }
template <typename F> __device__ __forceinline__ F gelu_a() { return (F)0.044715; }

template <typename F> __device__ __forceinline__ F gelu_y(F x) {
    const F u = gelu_k<F>() * (x + gelu_a<F>() * x * x * x);
    return (F)0.5 * x * ((F)1 + th(u));
}
template <typename F> __device__ __forceinline__ F gelu_dx(F x, F dy) {
    const F x2 = x * x;
    const F u = gelu_k<F>() * (x + gelu_a<F>() * x2 * x);
    const F t = th(u);
    const F du = gelu_k<F>() * ((F)1 + (F)3 * gelu_a<F>() * x2);
    return dy * ((F)0.5 * ((F)1 + t) + (F)0.5 * x * ((F)1 - t * t) * du);
}

// The f32 forms (see the header). e = exp(-2u) = 2^(-c (x + a x^3)) with c = 2 k log2(e) folded
// into one constant, through ex2.approx (2 ulp); 1 / (1 + e) through rcp.approx (1 ulp; 0 for
// e = inf). 1 - s as e * s where that avoids cancellation (e < 1), else 1 - s (s <= 1/2 there:
// no cancellation; also e = inf, s = 0). Half-precision GELU is instruction-bound, so every
// instruction here counts.
__device__ __forceinline__ float gelu_rcp(float v) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
}
#define GELU_C2 2.3022082f  // 2 * sqrt(2 / pi) * log2(e)
template <> __device__ __forceinline__ float gelu_y<float>(float x) {
    const float x2 = x * x;
    const float e = ex2_approx(-GELU_C2 * (x + gelu_a<float>() * x2 * x));
    return x * gelu_rcp(1.0f + e);
}
template <> __device__ __forceinline__ float gelu_dx<float>(float x, float dy) {
    const float x2 = x * x;
    const float e = ex2_approx(-GELU_C2 * (x + gelu_a<float>() * x2 * x));
    const float s = gelu_rcp(1.0f + e);
    const float one_minus_s = e < 1.0f ? e * s : 1.0f - s;
    const float du = gelu_k<float>() * (1.0f + 3.0f * gelu_a<float>() * x2);
    return dy * (s + 2.0f * x * s * one_minus_s * du);
}

template <typename Tag>
__device__ __forceinline__ void gelu_fwd(const typename DType<Tag>::Storage* x,
                                         typename DType<Tag>::Storage* y, u64 n) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    const u64 tid = global_tid(), stride = grid_threads();
    u64 done = 0;
    if (aligned16(x, y)) {
        const u64 V = Pack<S>::N, packs = n / V;
        // Two packets per thread per step, both loaded before either is used.
        u64 p = tid;
        for (; p + stride < packs; p += 2 * stride) {
            Pack<S> v[2] = {load_pack(x + p * V), load_pack(x + (p + stride) * V)};
#pragma unroll
            for (int u = 0; u < 2; ++u)
#pragma unroll
                for (int j = 0; j < (int)V; ++j) v[u].v[j] = D::store(gelu_y(D::load(v[u].v[j])));
            store_pack(y + p * V, v[0]);
            store_pack(y + (p + stride) * V, v[1]);
        }
        if (p < packs) {
            Pack<S> v = load_pack(x + p * V);
#pragma unroll
            for (int j = 0; j < (int)V; ++j) v.v[j] = D::store(gelu_y(D::load(v.v[j])));
            store_pack(y + p * V, v);
        }
        done = packs * V;
    }
    for (u64 i = done + tid; i < n; i += stride) y[i] = D::store(gelu_y(D::load(x[i])));
}

template <typename Tag>
__device__ __forceinline__ void gelu_bwd(const typename DType<Tag>::Storage* x,
                                         const typename DType<Tag>::Storage* dy,
                                         typename DType<Tag>::Storage* dx, u64 n) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    const u64 tid = global_tid(), stride = grid_threads();
    u64 done = 0;
    if (aligned16(x, dy, dx)) {
        const u64 V = Pack<S>::N, packs = n / V;
        // Two packets of each input per thread per step, all four loaded before any is used.
        u64 p = tid;
        for (; p + stride < packs; p += 2 * stride) {
            const Pack<S> vx[2] = {load_pack(x + p * V), load_pack(x + (p + stride) * V)};
            Pack<S> vd[2] = {load_pack(dy + p * V), load_pack(dy + (p + stride) * V)};
#pragma unroll
            for (int u = 0; u < 2; ++u)
#pragma unroll
                for (int j = 0; j < (int)V; ++j)
                    vd[u].v[j] = D::store(gelu_dx(D::load(vx[u].v[j]), D::load(vd[u].v[j])));
            store_pack(dx + p * V, vd[0]);
            store_pack(dx + (p + stride) * V, vd[1]);
        }
        if (p < packs) {
            const Pack<S> vx = load_pack(x + p * V);
            Pack<S> vd = load_pack(dy + p * V);
#pragma unroll
            for (int j = 0; j < (int)V; ++j)
                vd.v[j] = D::store(gelu_dx(D::load(vx.v[j]), D::load(vd.v[j])));
            store_pack(dx + p * V, vd);
        }
        done = packs * V;
    }
    for (u64 i = done + tid; i < n; i += stride)
        dx[i] = D::store(gelu_dx(D::load(x[i]), D::load(dy[i])));
}

extern "C" __global__ void gelu_fwd_f32(const float* x, float* y, unsigned long long n) {
    gelu_fwd<float>(x, y, n);
}
extern "C" __global__ void gelu_fwd_f64(const double* x, double* y, unsigned long long n) {
    gelu_fwd<double>(x, y, n);
}
extern "C" __global__ void gelu_fwd_f16(const f16_t* x, f16_t* y, unsigned long long n) {
    gelu_fwd<F16>(x, y, n);
}
extern "C" __global__ void gelu_fwd_bf16(const bf16_t* x, bf16_t* y, unsigned long long n) {
    gelu_fwd<BF16>(x, y, n);
}
extern "C" __global__ void gelu_bwd_f32(const float* x, const float* dy, float* dx,
                                        unsigned long long n) {
    gelu_bwd<float>(x, dy, dx, n);
}
extern "C" __global__ void gelu_bwd_f64(const double* x, const double* dy, double* dx,
                                        unsigned long long n) {
    gelu_bwd<double>(x, dy, dx, n);
}
extern "C" __global__ void gelu_bwd_f16(const f16_t* x, const f16_t* dy, f16_t* dx,
                                        unsigned long long n) {
    gelu_bwd<F16>(x, dy, dx, n);
}
extern "C" __global__ void gelu_bwd_bf16(const bf16_t* x, const bf16_t* dy, bf16_t* dx,
                                         unsigned long long n) {
    gelu_bwd<BF16>(x, dy, dx, n);
}
