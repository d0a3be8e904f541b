// grad_norm.cu — global-norm gradient clipping without a host round trip (f32, f64):
//   1. sumsq_partial_<dt> per gradient tensor, each into its own range of one partial buffer;
//   2. clip_coef_<dt> (one block) adds all partials in index order: norm = sqrt(total),
//      scale = min(1, max_norm / (norm + 1e-6)), both written to the device;
//   3. scale_by_device_<dt> per tensor: x *= scale[0], in place.
// Every sum has a fixed order for a fixed grid (lane-strided partial sums, then a butterfly and
// the 8 warp sums in warp order), so the norm is bit-identical run to run; the op picks the grids
// from the tensor sizes alone. A NaN gradient gives a NaN norm and a NaN scale; an inf gradient
// gives an inf norm and the scale max_norm / inf = 0, so finite elements become 0 and inf ones
// NaN (as torch's clip_grad_norm_; the caller sees it in the returned norm).
//
// Launch: sumsq_partial: block 256 EXACTLY, grid G (block b writes partial[b]);
// clip_coef: block 256 EXACTLY, grid 1; scale_by_device: block 256, any grid.
#include "dtype.cuh"

#define FULL_MASK 0xffffffffu

template <typename T> __device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// The sum of v over a block of 256 threads, valid in thread 0.
template <typename T> __device__ __forceinline__ T block_sum(T v) {
    __shared__ T w[8];
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0) w[threadIdx.x / 32] = v;
    __syncthreads();
    T t = (T)0;
    if (threadIdx.x == 0) {
#pragma unroll
        for (int i = 0; i < 8; ++i) t += w[i];
    }
    return t;
}

template <typename T> __device__ __forceinline__ void sumsq_partial(const T* x, u64 n, T* partial) {
    T acc = (T)0;
    for (u64 i = global_tid(); i < n; i += grid_threads()) {
        const T v = x[i];
        acc += v * v;
    }
    const T t = block_sum(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = t;
}

__device__ __forceinline__ float sq_root(float v) { return sqrtf(v); }
__device__ __forceinline__ double sq_root(double v) { return sqrt(v); }

template <typename T>
__device__ __forceinline__ void clip_coef(const T* partial, unsigned int num, T max_norm, T* norm,
                                          T* scale) {
    T acc = (T)0;
    for (unsigned int i = threadIdx.x; i < num; i += 256) acc += partial[i];
    const T t = block_sum(acc);
    if (threadIdx.x == 0) {
        const T nrm = sq_root(t);
        const T c = max_norm / (nrm + (T)1e-6);
        norm[0] = nrm;
        scale[0] = c < (T)1 || c != c ? c : (T)1;  // a NaN norm gives a NaN scale (visible)
    }
}

template <typename T> __device__ __forceinline__ void scale_by_device(T* x, u64 n, const T* scale) {
    const T s = scale[0];
    const u64 tid = global_tid(), stride = grid_threads();
    u64 done = 0;
    if (aligned16(x)) {
        const u64 V = Pack<T>::N, packs = n / V;
        for (u64 p = tid; p < packs; p += stride) {
            Pack<T> v = load_pack(x + p * V);
#pragma unroll
            for (int j = 0; j < (int)V; ++j) v.v[j] *= s;
            store_pack(x + p * V, v);
        }
        done = packs * V;
    }
    for (u64 i = done + tid; i < n; i += stride) x[i] *= s;
}

extern "C" __global__ void sumsq_partial_f32(const float* x, unsigned long long n, float* partial) {
    sumsq_partial<float>(x, n, partial);
}
extern "C" __global__ void sumsq_partial_f64(const double* x, unsigned long long n, double* partial) {
    sumsq_partial<double>(x, n, partial);
}
extern "C" __global__ void clip_coef_f32(const float* partial, unsigned int num, float max_norm,
                                         float* norm, float* scale) {
    clip_coef<float>(partial, num, max_norm, norm, scale);
}
extern "C" __global__ void clip_coef_f64(const double* partial, unsigned int num, double max_norm,
                                         double* norm, double* scale) {
    clip_coef<double>(partial, num, max_norm, norm, scale);
}
extern "C" __global__ void scale_by_device_f32(float* x, unsigned long long n, const float* scale) {
    scale_by_device<float>(x, n, scale);
}
extern "C" __global__ void scale_by_device_f64(double* x, unsigned long long n, const double* scale) {
    scale_by_device<double>(x, n, scale);
}
