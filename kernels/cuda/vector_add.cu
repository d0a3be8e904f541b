// vector_add.cu — the first kernel of seed 000, and the step that makes it fast.
//
// `vector_add` is exactly the seed's kernel: one thread per element, `int` indices, a bounds check.
// It teaches the thread hierarchy (blockIdx * blockDim + threadIdx) and nothing else.
//
// `vector_add_fast` is what a memory-bound kernel looks like when it is tuned:
//   * float4 (16-byte) loads and stores: a warp moves 512 bytes per instruction instead of 128,
//     so fewer instructions keep the same number of bytes in flight;
//   * a grid-stride loop: any grid size is correct, so the launch can use "a few blocks per SM"
//     instead of one thread per element, and each thread issues several independent loads;
//   * 64-bit indices, so n may exceed 2^31;
//   * a runtime alignment check: if any pointer is not 16-byte aligned it falls back to scalar
//     accesses (still correct, just slower). The n % 4 leftover elements are done in a scalar tail.
// Launch: vector_add: block 256, grid ceil(N/256).
//         vector_add_fast: block 256, any grid (e.g. min(ceil(n/1024), 4 * SMs * 8)).
#include "dtype.cuh"

// @readonly: A, B
extern "C" __global__ void vector_add(float* A, float* B, float* C, int N) {
    // Calculate thread index
    int idx = blockIdx.x * blockDim.x + threadIdx.x;

    // Bounds checking
    if (idx < N) {
        C[idx] = A[idx] + B[idx];
    }
}

extern "C" __global__ void vector_add_fast(const float* __restrict__ a, const float* __restrict__ b,
                                           float* __restrict__ c, unsigned long long n) {
    const u64 tid = global_tid();
    const u64 stride = grid_threads();
    if (aligned16(a, b, c)) {
        const u64 n4 = n / 4;  // number of whole float4 packets
        const float4* a4 = reinterpret_cast<const float4*>(a);
        const float4* b4 = reinterpret_cast<const float4*>(b);
        float4* c4 = reinterpret_cast<float4*>(c);
        for (u64 i = tid; i < n4; i += stride) {
            float4 x = a4[i], y = b4[i];
            c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
        }
        // scalar tail: the last n % 4 elements (at most 3), one thread each
        const u64 i = n4 * 4 + tid;
        if (i < n) c[i] = a[i] + b[i];
    } else {  // 4 independent pairs of loads in flight per thread, then the stores
        for (u64 i = tid; i < n; i += 4 * stride) {
            float x[4], y[4];
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (i + u * stride < n) {
                    x[u] = a[i + u * stride];
                    y[u] = b[i + u * stride];
                }
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (i + u * stride < n) c[i + u * stride] = x[u] + y[u];
        }
    }
}
