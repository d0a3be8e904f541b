// wgmma_store.cuh — a consumer warpgroup's 64 x BN wgmma accumulators to C through shared memory
// (whole rows, 16-byte stores): the epilogue of the persistent Hopper GEMMs, gemm_wgmma_tiles.cu
// (bf16 / f16) and gemm_wgmma_fp8.cu (bf16 output, scaled by alpha). sm_90a; needs
// dtype.cuh and wgmma_ops.cuh (WgxBF16 / WgxF16) first.
#pragma once

// Waits for the 128 threads of one consumer warpgroup (named barrier `id`, 1 + consumer).
__device__ __forceinline__ void wgx_bar(int id) { asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory"); }

// Two results rounded to E's type, packed (a in the low half).
template <class E>
__device__ __forceinline__ unsigned wgx_pack(float a, float b);
template <>
__device__ __forceinline__ unsigned wgx_pack<WgxBF16>(float a, float b) {
    unsigned v;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(v) : "f"(b), "f"(a));
    return v;
}
template <>
__device__ __forceinline__ unsigned wgx_pack<WgxF16>(float a, float b) {
    unsigned v;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(v) : "f"(b), "f"(a));
    return v;
}

// The consumer's 64 x BN accumulators (rows row0.., columns col0..) to C (times alpha when SCALE:
// the FP8 GEMM's per-tensor scales), rounded once, through
// its epilogue buffer `buf` (generic pointer into shared memory): the fragment (4 bytes per
// thread, 16 bytes per row per instruction) goes to shared memory, then whole rows go out, 16
// bytes per thread (a warp writes 512 contiguous bytes) when C's rows are 16-byte aligned, else
// 2 bytes per thread on consecutive columns. Stored straight from the fragment, every 32-byte
// sector of C was written in two halves by two instructions: at 8192 x 8192 x 64 that ran at
// 0.33x cuBLAS whether the blocks were persistent or not (kernels/TUNING.md).
template <class E, int BN, bool SCALE = false>
__device__ __forceinline__ void wgx_store_c_staged(const float (&d)[BN / 2], unsigned char* buf, typename E::T* __restrict__ C,
                                                   int M, int N, int ldc, int row0, int col0, int bar,
                                                   float alpha = 1.0f) {
    typedef typename E::T T;
    enum { PITCH = BN * 2 + 16, CHUNKS = BN / 8 };
    const int t = threadIdx.x % 128, lane = threadIdx.x % 32, warp = t / 32;
    wgx_bar(bar);  // the previous unit's reads of the buffer are done
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = 16 * warp + lane / 4 + 8 * h, col = 8 * i + 2 * (lane % 4);
            const float v0 = d[4 * i + 2 * h], v1 = d[4 * i + 2 * h + 1];
            *reinterpret_cast<unsigned*>(buf + row * PITCH + col * 2) =
                SCALE ? wgx_pack<E>(alpha * v0, alpha * v1) : wgx_pack<E>(v0, v1);
        }
    }
    wgx_bar(bar);
    const bool vec = (ldc % 8 == 0) && ((((u64)C) & 15) == 0);
    if (vec) {
        for (int q = t; q < 64 * CHUNKS; q += 128) {
            const int r = q / CHUNKS, ch = q % CHUNKS;
            const int grow = row0 + r, gcol = col0 + 8 * ch;
            if (grow >= M || gcol >= N) continue;
            const uint4 v = *reinterpret_cast<const uint4*>(buf + r * PITCH + ch * 16);
            T* p = C + (long long)grow * ldc + gcol;
            if (gcol + 8 <= N) {
                *reinterpret_cast<uint4*>(p) = v;
            } else {
                const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int j = 0; j < 8; ++j)
                    if (gcol + j < N) p[j] = (T)(w[j / 2] >> (16 * (j % 2)));
            }
        }
    } else {
        for (int q = t; q < 64 * BN; q += 128) {
            const int r = q / BN, col = q % BN;
            const int grow = row0 + r, gcol = col0 + col;
            if (grow < M && gcol < N)
                C[(long long)grow * ldc + gcol] = *reinterpret_cast<const T*>(buf + r * PITCH + col * 2);
        }
    }
}

