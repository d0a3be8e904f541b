// dropout.cu — inverted dropout with a Philox mask that is never stored: the backward pass
// regenerates it from (seed, offset), so dx = dropout(dy) with the same seed and offset is the
// whole backward. f32, f64, f16 and bf16 (f16/bf16 computed in f32, rounded once).
//
// Exact semantics, element i (e = offset + i; word = Philox4x32-10 word e of key seed, exactly
// as random.cu's philox_u32; u = (word >> 8) * 2^-24 in [0, 1), as fill_uniform_f32):
//   out[i] = u >= p ? x[i] * scale : 0          (scale = 1 / (1 - p), passed by the caller)
// so p = 0 keeps everything (scale 1: the identity) and p = 1 drops everything (zeros, the
// infinite scale is never used). In place (out == x) is allowed.
//
// Launch: block 256, any grid (e.g. ceil(n / 1024) + 1): each thread computes one Philox block
// (4 words) and handles the (up to 4) elements whose positions fall in [offset, offset + n).
#include "dtype.cuh"
#include "philox.cuh"

template <typename Tag>
__device__ __forceinline__ void dropout(const typename DType<Tag>::Storage* x,
                                        typename DType<Tag>::Storage* out, u64 n, float p,
                                        typename DType<Tag>::Compute scale, u64 seed, u64 offset) {
    typedef DType<Tag> D;
    typedef typename D::Compute F;
    if (n == 0) return;
    const u64 j0 = offset / 4, j1 = (offset + n - 1) / 4;
    for (u64 jj = global_tid(); jj <= j1 - j0; jj += grid_threads()) {
        const u64 j = j0 + jj;
        const uint4 w = philox4x32_10(j, seed);
        const unsigned int words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const u64 e = 4 * j + k;
            if (e >= offset && e - offset < n) {
                const u64 i = e - offset;
                const float u = (float)(words[k] >> 8) * 5.9604644775390625e-08f;
                out[i] = u >= p ? D::store(D::load(x[i]) * scale) : D::store((F)0);
            }
        }
    }
}

extern "C" __global__ void dropout_f32(const float* x, float* out, unsigned long long n, float p,
                                       float scale, unsigned long long seed,
                                       unsigned long long offset) {
    dropout<float>(x, out, n, p, scale, seed, offset);
}
extern "C" __global__ void dropout_f64(const double* x, double* out, unsigned long long n, float p,
                                       double scale, unsigned long long seed,
                                       unsigned long long offset) {
    dropout<double>(x, out, n, p, scale, seed, offset);
}
extern "C" __global__ void dropout_f16(const f16_t* x, f16_t* out, unsigned long long n, float p,
                                       float scale, unsigned long long seed,
                                       unsigned long long offset) {
    dropout<F16>(x, out, n, p, scale, seed, offset);
}
extern "C" __global__ void dropout_bf16(const bf16_t* x, bf16_t* out, unsigned long long n, float p,
                                        float scale, unsigned long long seed,
                                        unsigned long long offset) {
    dropout<BF16>(x, out, n, p, scale, seed, offset);
}
