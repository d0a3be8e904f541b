// multi_tensor.cu — multi-tensor ("foreach") kernels: one launch processes up to a table's
// capacity of tensors (PyTorch's multi_tensor_apply idea), so an optimizer step, a gradient
// clip or the f32 -> bf16 casts of all of a model's weights cost one or a few launches instead
// of one per tensor.
//
// The table is a kernel PARAMETER, passed by value (__grid_constant__): the driver copies it
// into the launch's constant bank, so it needs no device allocation, no upload and no host
// synchronisation, and a CUDA graph captures it with the launch. Its layout (C, 8-byte aligned,
// no padding; the Rust twins in kernels/src/ops/multi_tensor/table.rs assert the sizes):
//   MtTable1    (depth 1: fill, scale, sum of squares)  capacity 192, 3848 bytes
//     addr[192] (device addresses), len[192] (elements), block_start[193], count
//   MtTable2    (depth 2: casts)                         capacity 136, 3816 bytes
//     src[136], dst[136], len[136], block_start[137], count
//   MtAdamTable (depth 4: Adam/AdamW)                    capacity 64, 3600 bytes
//     p[64], g[64], m[64], v[64], len[64], wd[64] (double), scale (0: none),
//     block_start[65], step[64] (index into the step counters), count
// Each table plus its kernel's other parameters stays under the classic 4 KiB parameter limit.
//
// Tensor j of a table owns blocks block_start[j] .. block_start[j+1] (block_start[0] = 0,
// non-decreasing, block_start[count] = the launch's blocks); a block finds its tensor by a
// binary search (uniform across the block) and walks the tensor grid-stride over that tensor's
// blocks only: local thread i = (b - block_start[j])·blockDim + threadIdx, stride =
// (block_start[j+1] - block_start[j])·blockDim. Blocks past block_start[count] do nothing, so
// any grid is correct. The host (kernels/src/ops/multi_tensor/plan.rs) picks every tensor's
// block count from its length alone: results never depend on the GPU.
//
// Exact semantics (the single-tensor kernels' per element; the CPU references match):
//   mt_fill:   x[i] = value
//   mt_scale:  x[i] = x[i] * scale[0]                       (scale_by_device)
//   mt_sumsq:  partial[b] = Σ x[i]² over block b's elements, in the order of sumsq_partial
//              (lane-strided partial sums, a butterfly, the 8 warp sums in order): with the
//              host's block counts (sumsq_parts(n), >= 1 per tensor, an empty tensor writing
//              one 0) the partial buffer is bit-identical to the per-tensor kernels', so
//              clip_coef's norm is too.
//   mt_cast:   dst[i] = src[i] converted (each element rounded once, as cast.cu); 16-byte
//              packets where both tensors are 16-byte aligned
//   mt_adam:   optim.cu's adam with t = steps[step[j]], wd = (T)wd[j] and, when scale != 0,
//              g = g * scale[0] rounded once (__fmul_rn: the bits an in-place scale_by_device
//              before the update would have stored).
//
// Launch: block 256 EXACTLY for mt_sumsq (block_sum), 256 for the others; any grid (the host
// launches block_start[count] blocks).
#include "dtype.cuh"

#define MT1_CAP 192
#define MT2_CAP 136
#define MTA_CAP 64
#define FULL_MASK 0xffffffffu

struct MtTable1 {
    unsigned long long addr[MT1_CAP];
    unsigned long long len[MT1_CAP];
    unsigned int block_start[MT1_CAP + 1];
    unsigned int count;
};

struct MtTable2 {
    unsigned long long src[MT2_CAP];
    unsigned long long dst[MT2_CAP];
    unsigned long long len[MT2_CAP];
    unsigned int block_start[MT2_CAP + 1];
    unsigned int count;
};

struct MtAdamTable {
    unsigned long long p[MTA_CAP];
    unsigned long long g[MTA_CAP];
    unsigned long long m[MTA_CAP];
    unsigned long long v[MTA_CAP];
    unsigned long long len[MTA_CAP];
    double wd[MTA_CAP];
    unsigned long long scale;
    unsigned int block_start[MTA_CAP + 1];
    int step[MTA_CAP];
    unsigned int count;
};

// This block's share of a table's tensor: which tensor, the first local index and the stride.
struct MtRange {
    int j;
    u64 start, stride, n;
};

// Finds block blockIdx.x's tensor: the largest j < count with block_start[j] <= b. False for a
// block past the last tensor's blocks (or a bad count), which then does nothing.
__device__ __forceinline__ bool mt_range(const unsigned int* bs, const unsigned long long* len,
                                         unsigned int count, unsigned int cap, MtRange& r) {
    const unsigned int b = blockIdx.x;
    if (count == 0 || count > cap || b >= bs[count]) return false;
    int lo = 0, hi = (int)count - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (bs[mid] <= b) lo = mid;
        else hi = mid - 1;
    }
    const unsigned int nb = bs[lo + 1] - bs[lo];
    r.j = lo;
    r.start = (u64)(b - bs[lo]) * blockDim.x + threadIdx.x;
    r.stride = (u64)nb * blockDim.x;
    r.n = len[lo];
    return true;
}

// ---------------------------------------------------------------------------------------------
// fill, scale

template <typename T> __device__ __forceinline__ void mt_fill(const MtTable1& t, T value) {
    MtRange r;
    if (!mt_range(t.block_start, t.len, t.count, MT1_CAP, r)) return;
    T* x = (T*)t.addr[r.j];
    for (u64 i = r.start; i < r.n; i += r.stride) x[i] = value;
}

template <typename T> __device__ __forceinline__ void mt_scale(const MtTable1& t, const T* scale) {
    MtRange r;
    if (!mt_range(t.block_start, t.len, t.count, MT1_CAP, r)) return;
    T* x = (T*)t.addr[r.j];
    const T s = scale[0];
    for (u64 i = r.start; i < r.n; i += r.stride) x[i] *= s;
}

// ---------------------------------------------------------------------------------------------
// sum of squares (grad_norm.cu's sumsq_partial, one tensor's blocks at a time)

template <typename T> __device__ __forceinline__ T mt_warp_sum(T v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// The sum of v over a block of 256 threads, valid in thread 0 (grad_norm.cu's block_sum).
template <typename T> __device__ __forceinline__ T mt_block_sum(T v) {
    __shared__ T w[8];
    v = mt_warp_sum(v);
    if (threadIdx.x % 32 == 0) w[threadIdx.x / 32] = v;
    __syncthreads();
    T t = (T)0;
    if (threadIdx.x == 0) {
#pragma unroll
        for (int i = 0; i < 8; ++i) t += w[i];
    }
    return t;
}

template <typename T> __device__ __forceinline__ void mt_sumsq(const MtTable1& t, T* partial) {
    MtRange r;
    if (!mt_range(t.block_start, t.len, t.count, MT1_CAP, r)) return;  // uniform per block
    const T* x = (const T*)t.addr[r.j];
    T acc = (T)0;
    for (u64 i = r.start; i < r.n; i += r.stride) {
        const T v = x[i];
        acc += v * v;
    }
    const T s = mt_block_sum(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// ---------------------------------------------------------------------------------------------
// casts

// Where both tensors are 16-byte aligned, groups of G elements (a 16-byte packet of the narrower
// type, two of the wider: 8 elements for f32 <-> 16-bit), group g by local thread g of the
// tensor's grid-stride walk, then the last n % G elements one by one; otherwise every element one
// by one. Each element is converted alone, so the path changes no value.
template <typename From, typename To> __device__ __forceinline__ void mt_cast(const MtTable2& t) {
    typedef typename DType<From>::Storage SF;
    typedef typename DType<To>::Storage ST;
    enum { NF = Pack<SF>::N, NT = Pack<ST>::N, G = NF > NT ? NF : NT };
    MtRange r;
    if (!mt_range(t.block_start, t.len, t.count, MT2_CAP, r)) return;
    const SF* x = (const SF*)t.src[r.j];
    ST* out = (ST*)t.dst[r.j];
    u64 done = 0;
    if (aligned16(x, out)) {
        const u64 groups = r.n / G;
        for (u64 g = r.start; g < groups; g += r.stride) {
            SF a[G];
#pragma unroll
            for (int k = 0; k < G / NF; ++k) {
                const Pack<SF> pk = load_pack(x + g * G + k * NF);
#pragma unroll
                for (int j = 0; j < NF; ++j) a[k * NF + j] = pk.v[j];
            }
#pragma unroll
            for (int k = 0; k < G / NT; ++k) {
                Pack<ST> o;
#pragma unroll
                for (int j = 0; j < NT; ++j)
                    o.v[j] = DType<To>::store((typename DType<To>::Compute)DType<From>::load(a[k * NT + j]));
                store_pack(out + g * G + k * NT, o);
            }
        }
        done = groups * G;
    }
    for (u64 i = done + r.start; i < r.n; i += r.stride)
        out[i] = DType<To>::store((typename DType<To>::Compute)DType<From>::load(x[i]));
}

// ---------------------------------------------------------------------------------------------
// Adam / AdamW (optim.cu's adam, per element the same arithmetic)

__device__ __forceinline__ float mt_sqrt(float v) { return sqrtf(v); }
__device__ __forceinline__ double mt_sqrt(double v) { return sqrt(v); }
__device__ __forceinline__ float mt_pow(float b, int t) { return powf(b, (float)t); }
__device__ __forceinline__ double mt_pow(double b, int t) { return pow(b, (double)t); }
__device__ __forceinline__ float mt_mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mt_mul_rn(double a, double b) { return __dmul_rn(a, b); }

template <typename T>
__device__ __forceinline__ void mt_adam(const MtAdamTable& tb, const int* steps, T lr, T b1, T b2,
                                        T eps, int adamw) {
    MtRange r;
    if (!mt_range(tb.block_start, tb.len, tb.count, MTA_CAP, r)) return;
    T* p = (T*)tb.p[r.j];
    const T* g = (const T*)tb.g[r.j];
    T* m = (T*)tb.m[r.j];
    T* v = (T*)tb.v[r.j];
    const T wd = (T)tb.wd[r.j];
    const int t = steps[tb.step[r.j]];
    const T step = lr / ((T)1 - mt_pow(b1, t)), root_bc2 = mt_sqrt((T)1 - mt_pow(b2, t));
    const T* sp = (const T*)tb.scale;
    const bool scaled = sp != 0;
    const T s = scaled ? sp[0] : (T)1;
    for (u64 e = r.start; e < r.n; e += r.stride) {
        T pi = p[e], gi = g[e];
        if (scaled) gi = mt_mul_rn(gi, s);
        if (adamw) pi = pi * ((T)1 - lr * wd);
        else gi = gi + wd * pi;
        const T mi = b1 * m[e] + ((T)1 - b1) * gi;
        const T vi = b2 * v[e] + ((T)1 - b2) * gi * gi;
        m[e] = mi;
        v[e] = vi;
        p[e] = pi - step * mi / (mt_sqrt(vi) / root_bc2 + eps);
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points. The tables are read-only parameters (__grid_constant__: no per-thread copy).

extern "C" __global__ void mt_fill_f32(const __grid_constant__ MtTable1 t, float value) {
    mt_fill<float>(t, value);
}
extern "C" __global__ void mt_fill_f64(const __grid_constant__ MtTable1 t, double value) {
    mt_fill<double>(t, value);
}
extern "C" __global__ void mt_scale_f32(const __grid_constant__ MtTable1 t, const float* scale) {
    mt_scale<float>(t, scale);
}
extern "C" __global__ void mt_scale_f64(const __grid_constant__ MtTable1 t, const double* scale) {
    mt_scale<double>(t, scale);
}
extern "C" __global__ void mt_sumsq_f32(const __grid_constant__ MtTable1 t, float* partial) {
    mt_sumsq<float>(t, partial);
}
extern "C" __global__ void mt_sumsq_f64(const __grid_constant__ MtTable1 t, double* partial) {
    mt_sumsq<double>(t, partial);
}
extern "C" __global__ void mt_cast_f32_bf16(const __grid_constant__ MtTable2 t) {
    mt_cast<float, BF16>(t);
}
extern "C" __global__ void mt_cast_bf16_f32(const __grid_constant__ MtTable2 t) {
    mt_cast<BF16, float>(t);
}
extern "C" __global__ void mt_cast_f32_f16(const __grid_constant__ MtTable2 t) {
    mt_cast<float, F16>(t);
}
extern "C" __global__ void mt_cast_f16_f32(const __grid_constant__ MtTable2 t) {
    mt_cast<F16, float>(t);
}
extern "C" __global__ void mt_adam_f32(const __grid_constant__ MtAdamTable t, const int* steps,
                                       float lr, float b1, float b2, float eps, int adamw) {
    mt_adam<float>(t, steps, lr, b1, b2, eps, adamw);
}
extern "C" __global__ void mt_adam_f64(const __grid_constant__ MtAdamTable t, const int* steps,
                                       double lr, double b1, double b2, double eps, int adamw) {
    mt_adam<double>(t, steps, lr, b1, b2, eps, adamw);
}
