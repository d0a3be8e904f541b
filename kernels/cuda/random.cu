// random.cu — counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11; as in Random123
// and cuRAND), so the value at index i depends only on (seed, i): any thread can compute any
// element, results do not depend on the launch configuration, and a CPU can reproduce them.
//
// Algorithm (everything u32 with wrapping arithmetic; mulhi/mullo = high/low 32 bits of a*b):
//   key   = (k0, k1) = (seed & 0xffffffff, seed >> 32)
//   For stream position e (u64) = offset + i:  block j = e / 4, word w = e % 4.
//   counter = (c0, c1, c2, c3) = (j & 0xffffffff, j >> 32, 0, 0)
//   repeat 10 times (bumping the key between rounds, i.e. 9 bumps):
//     hi0, lo0 = mulhi/mullo(0xD2511F53, c0);  hi1, lo1 = mulhi/mullo(0xCD9E8D57, c2)
//     (c0, c1, c2, c3) = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)
//     k0 += 0x9E3779B9;  k1 += 0xBB67AE85          (only between rounds)
//   words = (c0, c1, c2, c3); known answer: counter 0, key 0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8.
//   philox_u32:        out[i] = words[w]                                       (bit-exact on CPU)
//   fill_uniform_f32:  out[i] = (float)(words[w] >> 8) * 2^-24, in [0, 1)      (bit-exact on CPU)
//   fill_normal_f32:   Box–Muller on the pairs (words[0], words[1]) and (words[2], words[3]):
//       u1 = ((a >> 8) + 1) * 2^-24 in (0, 1],  u2 = (b >> 8) * 2^-24 in [0, 1)
//       r = sqrtf(-2 logf(u1));  sincospif(2 u2) -> (s, c)
//       word 0 -> r*c of pair 0, word 1 -> r*s of pair 0, word 2 -> r*c of pair 1, word 3 -> r*s
//     (standard normal; logf/sincospif are CUDA's accurate versions, so a CPU twin matches to a
//     few ulp, not bit for bit).
// Launch: block 256, any grid (e.g. min(ceil(n / 1024) + 1, 32 * SMs)). Each thread computes one
// Philox block (4 words) and writes the (up to 4) outputs whose positions fall in [offset, offset+n).
#include "dtype.cuh"
#include "philox.cuh"

#define TWO_POW_M24 5.9604644775390625e-08f  // 2^-24, exact

__device__ __forceinline__ float to_uniform(unsigned int w) { return (float)(w >> 8) * TWO_POW_M24; }

__device__ __forceinline__ void box_muller(unsigned int a, unsigned int b, float& n0, float& n1) {
    const float u1 = (float)((a >> 8) + 1u) * TWO_POW_M24;
    const float u2 = (float)(b >> 8) * TWO_POW_M24;
    const float r = sqrtf(-2.0f * logf(u1));
    float s, c;
    sincospif(2.0f * u2, &s, &c);
    n0 = r * c;
    n1 = r * s;
}

// MODE 0: raw u32 words, 1: uniform f32, 2: normal f32. T = unsigned int or float.
template <int MODE, typename T>
__device__ __forceinline__ void philox_fill(T* out, u64 n, u64 seed, u64 offset) {
    if (n == 0) return;
    const u64 j0 = offset / 4, j1 = (offset + n - 1) / 4;
    for (u64 jj = global_tid(); jj <= j1 - j0; jj += grid_threads()) {
        const u64 j = j0 + jj;
        const uint4 w = philox4x32_10(j, seed);
        T v[4];
        if (MODE == 0) {
            v[0] = (T)w.x; v[1] = (T)w.y; v[2] = (T)w.z; v[3] = (T)w.w;
        } else if (MODE == 1) {
            v[0] = (T)to_uniform(w.x); v[1] = (T)to_uniform(w.y);
            v[2] = (T)to_uniform(w.z); v[3] = (T)to_uniform(w.w);
        } else {
            float a, b, c, d;
            box_muller(w.x, w.y, a, b);
            box_muller(w.z, w.w, c, d);
            v[0] = (T)a; v[1] = (T)b; v[2] = (T)c; v[3] = (T)d;
        }
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const u64 e = 4 * j + k;
            if (e >= offset && e - offset < n) out[e - offset] = v[k];
        }
    }
}

extern "C" __global__ void philox_u32(unsigned int* out, unsigned long long n, unsigned long long seed, unsigned long long offset) { philox_fill<0>(out, n, seed, offset); }
extern "C" __global__ void fill_uniform_f32(float* out, unsigned long long n, unsigned long long seed, unsigned long long offset) { philox_fill<1>(out, n, seed, offset); }
extern "C" __global__ void fill_normal_f32(float* out, unsigned long long n, unsigned long long seed, unsigned long long offset) { philox_fill<2>(out, n, seed, offset); }
