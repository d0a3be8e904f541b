// gemm_mma.cu — the Ampere step of the tensor-core ladder: f16 / bf16 GEMM with mma.sync (sm_80+).
//
// gen-ptx: archs=80
//
// What changes in the hardware's use, compared with sgemm.cu (FP32 FMA on the SIMT cores):
//   * The multiply runs on the tensor cores: one `mma.sync.m16n8k16` is a 16 x 8 x 16 product
//     (4096 FLOPs) issued by one warp, with its operands spread over the warp's registers in fixed
//     "fragments" and an f32 accumulator fragment of 4 values per thread.
//   * Fragments come from shared memory with `ldmatrix` (four 8 x 8 matrices of 16-bit values per
//     instruction; `.trans` transposes on the way, so both row- and column-major operands load).
//     Shared memory rows are XOR-swizzled in 16-byte chunks so the 8 rows an ldmatrix phase reads
//     fall in 8 different bank groups (no conflicts, no padding).
//   * Global -> shared copies are `cp.async` (16 bytes, no register round trip; short or outside
//     chunks are zero-filled by the copy itself), three stages deep, so the loads of tiles k+1, k+2
//     are in flight while tile k is multiplied. One __syncthreads per k tile of 64. Tiles wholly
//     inside the matrices copy without per-chunk bounds checks (see mm_load_tile).
//   * Fragments are double-buffered in registers: the ldmatrix of the next k step (of the next
//     tile, after its barrier, at a tile's last step) is issued before this step's mma.
//   * A block of 8 warps computes a 128 x 256 tile of C; each warp 64 x 64 (4 x 8 mma tiles, 128
//     f32 accumulators per thread), so every ldmatrix'd fragment feeds 4 or 8 mma.
//
// Layouts (row-major, names as in sgemm.cu): nn: A [M, K], B [K, N]; nt: B stored [N, K];
// tn: A stored [K, M]; tt: both. C [M, N] row stride ldc, written as the input type after f32
// accumulation (one rounding per element). C = A @ B (no alpha / beta).
// Host contract (ops/gemm_tc.rs checks it): block 256 threads exactly, grid
// ceil(M / 128) * ceil(N / 256) blocks (1-D), dynamic shared memory MM_SMEM_BYTES (the function's
// limit raised first); A and B 16-byte aligned with lda and ldb multiples of 8 (a 16-byte chunk never
// leaves its row); M, N >= 1, K >= 0. (MM_BN=128, MM_BK, MM_STAGES, MM_MIN_BLOCKS: other
// geometries for kernels/tuning/mma_variants.sh only; the crate ships the defaults.)
#include "dtype.cuh"

#define MM_BM 128
#ifndef MM_BN
#define MM_BN 256  // the block's n extent: 256 (8 warps) or 128 (4 warps)
#endif
#ifndef MM_BK
#define MM_BK 64  // k per stage: 64 measured 10-20% faster than 32 on an H100 (kernels/TUNING.md)
#endif
#ifndef MM_STAGES
#define MM_STAGES 3  // 3 x 48 KB: fits the 163 KB an A100 block can opt into
#endif
#define MM_WARPS_N (MM_BN / 64)  // each warp computes 64 x 64 of C
#define MM_THREADS (MM_BM / 64 * MM_WARPS_N * 32)
#ifndef MM_MIN_BLOCKS
#define MM_MIN_BLOCKS 1  // blocks per SM the register allocation must allow
#endif
#define MM_A_BYTES (MM_BM * MM_BK * 2)  // 16 KB
#define MM_B_BYTES (MM_BN * MM_BK * 2)  // 32 KB
#define MM_STAGE_BYTES (MM_A_BYTES + MM_B_BYTES)
#define MM_SMEM_BYTES (MM_STAGES * MM_STAGE_BYTES + 128)  // 144 KB + alignment slack
#define MM_GROUP_M 8

__device__ __forceinline__ unsigned mm_smem_u32(const void* p) {
    unsigned r;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile whose rows are W bytes. Rows of 64
// bytes (4 chunks) XOR the chunk with bits 1..2 of the row, wider rows with bits 0..2: either way
// 8 consecutive rows read at one logical chunk hit 8 different 16-byte bank groups.
template <int W>
__device__ __forceinline__ unsigned mm_swz(int row, int chunk) {
    return W == 64 ? row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4) : row * W + ((chunk ^ (row & 7)) << 4);
}

// Copies a TR x TC (16-bit elements) tile whose top-left is (r0, c0) of a matrix with GR rows, GC
// columns and row stride ld into shared memory at `dst`, swizzled; each thread issues its share of
// 16-byte cp.async chunks (zero-filled past the matrix).
//
// Thread t copies chunk t % CPR of rows t / CPR + i * RSTEP (i < PER_THREAD). RSTEP is a multiple
// of 8, so every one of its rows has the same swizzle and its chunks sit RSTEP rows apart in both
// memories: a tile wholly inside the matrix (every tile but the last row / column / k of tiles)
// takes one address computation and PER_THREAD copies at fixed strides, with no bounds checks.
// The per-chunk checks of the general path cost ~250 integer instructions per k tile per warp
// beside its 128 mma (kernels/TUNING.md).
template <int TR, int TC>
__device__ __forceinline__ void mm_load_tile(unsigned dst, const unsigned short* __restrict__ P, int ld, int GR,
                                             int GC, int r0, int c0) {
    constexpr int CPR = TC / 8;                         // chunks per row
    constexpr int PER_THREAD = TR * CPR / MM_THREADS;
    constexpr int RSTEP = MM_THREADS / CPR;
    static_assert(MM_THREADS % CPR == 0 && RSTEP % 8 == 0, "a thread's rows must share their swizzle");
    if (r0 + TR <= GR && c0 + TC <= GC) {
        const int row = threadIdx.x / CPR, ch = threadIdx.x % CPR;
        const unsigned short* src = P + (long long)(r0 + row) * ld + (c0 + ch * 8);
        const long long step = (long long)RSTEP * ld;
        const unsigned d = dst + mm_swz<TC * 2>(row, ch);
#pragma unroll
        for (int i = 0; i < PER_THREAD; ++i)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d + i * RSTEP * TC * 2), "l"(src + i * step)
                         : "memory");
        return;
    }
#pragma unroll 1
    for (int i = 0; i < PER_THREAD; ++i) {
        const int q = threadIdx.x + i * MM_THREADS;
        const int row = q / CPR, ch = q % CPR;
        const int gr = r0 + row, gc = c0 + ch * 8;
        int bytes = 0;
        const unsigned short* src = P;
        if (gr < GR && gc < GC) {
            bytes = min(16, (GC - gc) * 2);
            src = P + (long long)gr * ld + gc;
        }
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst + mm_swz<TC * 2>(row, ch)), "l"(src),
                     "r"(bytes)
                     : "memory");
    }
}

__device__ __forceinline__ void ldsm_x4(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned addr, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

struct MmBF16 {
    typedef bf16_t T;
    static __device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
        asm(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    static __device__ __forceinline__ unsigned pack(float lo, float hi) {
        unsigned v;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(v) : "f"(hi), "f"(lo));
        return v;
    }
    static __device__ __forceinline__ unsigned short one(float x) { return f32_to_bf16(x); }
};
struct MmF16 {
    typedef f16_t T;
    static __device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
        asm(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    static __device__ __forceinline__ unsigned pack(float lo, float hi) {
        unsigned v;
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(v) : "f"(hi), "f"(lo));
        return v;
    }
    static __device__ __forceinline__ unsigned short one(float x) { return f32_to_f16(x); }
};

// TA: A stored [K, M] (M-major); TB: B stored [N, K] (K-major). Untransposed: A [M, K], B [K, N].
template <class E, bool TA, bool TB>
__device__ __forceinline__ void gemm_mma(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                                         unsigned short* __restrict__ C, int M, int N, int K, int lda, int ldb,
                                         int ldc) {
    extern __shared__ unsigned char mm_smem[];
    const unsigned base = (mm_smem_u32(mm_smem) + 127u) & ~127u;

    const int tiles_m = (M + MM_BM - 1) / MM_BM, tiles_n = (N + MM_BN - 1) / MM_BN;
    const int per_group = MM_GROUP_M * tiles_n;
    const int first_m = (blockIdx.x / per_group) * MM_GROUP_M;
    const int rows_here = min(tiles_m - first_m, MM_GROUP_M);
    const int in_group = blockIdx.x % per_group;
    const int m0 = (first_m + in_group % rows_here) * MM_BM, n0 = (in_group / rows_here) * MM_BN;
    const int ktiles = (K + MM_BK - 1) / MM_BK;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = warp / MM_WARPS_N, wn = warp % MM_WARPS_N;  // the warp's 64 x 64 sub-tile

    auto load_stage = [&](int kt) {
        const unsigned sa = base + (kt % MM_STAGES) * MM_STAGE_BYTES, sb = sa + MM_A_BYTES;
        const int k0 = kt * MM_BK;
        if (TA) mm_load_tile<MM_BK, MM_BM>(sa, A, lda, K, M, k0, m0);  // rows k, columns m
        else mm_load_tile<MM_BM, MM_BK>(sa, A, lda, M, K, m0, k0);     // rows m, columns k
        if (TB) mm_load_tile<MM_BN, MM_BK>(sb, B, ldb, N, K, n0, k0);  // rows n, columns k
        else mm_load_tile<MM_BK, MM_BN>(sb, B, ldb, K, N, k0, n0);     // rows k, columns n
    };

    float acc[4][8][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;

#pragma unroll
    for (int s = 0; s < MM_STAGES - 1; ++s) {
        if (s < ktiles) load_stage(s);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }

    // Lane -> which 8 x 8 matrix it addresses (l / 8) and which row of it (l % 8).
    const int mat = lane / 8, mrow = lane % 8;
    // The fragments of k step ks of the tile in stage buffer `st`.
    auto load_frags = [&](int st, int ks, unsigned (&a)[4][4], unsigned (&b)[8][2]) {
        const unsigned sa = base + st * MM_STAGE_BYTES, sb = sa + MM_A_BYTES;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int m = wm * 64 + i * 16;
            if (TA) {  // smem [k][m], 256-byte rows: transpose while loading
                const int krow = ks * 16 + ((mat & 2) ? 8 : 0) + mrow;
                const int chunk = (m + ((mat & 1) ? 8 : 0)) / 8;
                ldsm_x4_t(sa + mm_swz<MM_BM * 2>(krow, chunk), a[i][0], a[i][1], a[i][2], a[i][3]);
            } else {  // smem [m][k], 128-byte rows
                const int row = m + (lane % 16), chunk = ks * 2 + lane / 16;
                ldsm_x4(sa + mm_swz<MM_BK * 2>(row, chunk), a[i][0], a[i][1], a[i][2], a[i][3]);
            }
        }
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const int n = wn * 64 + p * 16;
            if (TB) {  // smem [n][k], 128-byte rows
                const int nrow = n + ((mat & 2) ? 8 : 0) + mrow, chunk = ks * 2 + (mat & 1);
                ldsm_x4(sb + mm_swz<MM_BK * 2>(nrow, chunk), b[2 * p][0], b[2 * p][1], b[2 * p + 1][0],
                        b[2 * p + 1][1]);
            } else {  // smem [k][n], 512-byte rows: transpose while loading
                const int krow = ks * 16 + ((mat & 1) ? 8 : 0) + mrow;
                const int chunk = (n + ((mat & 2) ? 8 : 0)) / 8;
                ldsm_x4_t(sb + mm_swz<MM_BN * 2>(krow, chunk), b[2 * p][0], b[2 * p][1], b[2 * p + 1][0],
                          b[2 * p + 1][1]);
            }
        }
    };

    // Fragments are double-buffered: the ldmatrix of step ks + 1 is issued before the mma of
    // step ks, and across tiles the wait and barrier for tile kt + 1 come before the last step of
    // tile kt (whose fragments are already in registers), so ldmatrix latency hides behind mma
    // everywhere. The barrier also frees tile kt's stage, which the next copy then refills.
    constexpr int KS = MM_BK / 16;
    static_assert(KS % 2 == 0, "the fragment buffers alternate per k step");
    unsigned a[2][4][4], b[2][8][2];
    asm volatile("cp.async.wait_group %0;" ::"n"(MM_STAGES - 2) : "memory");
    __syncthreads();  // tile 0 is in shared memory
    if (MM_STAGES - 1 < ktiles) load_stage(MM_STAGES - 1);
    asm volatile("cp.async.commit_group;" ::: "memory");
    if (ktiles > 0) load_frags(0, 0, a[0], b[0]);
    for (int kt = 0; kt < ktiles; ++kt) {
        const int st = kt % MM_STAGES;
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
            const int cur = ks % 2, nxt = 1 - cur;
            if (ks < KS - 1) {
                load_frags(st, ks + 1, a[nxt], b[nxt]);
            } else if (kt + 1 < ktiles) {
                asm volatile("cp.async.wait_group %0;" ::"n"(MM_STAGES - 2) : "memory");
                __syncthreads();  // tile kt + 1 is in shared memory; every warp is past tile kt's ldmatrix
                if (kt + MM_STAGES < ktiles) load_stage(kt + MM_STAGES);
                asm volatile("cp.async.commit_group;" ::: "memory");
                load_frags((kt + 1) % MM_STAGES, 0, a[nxt], b[nxt]);
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) E::mma(acc[i][j], a[cur][i], b[cur][j][0], b[cur][j][1]);
        }
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");

    // Epilogue: acc[i][j] holds rows r, r + 8 and columns c, c + 1 of one 16 x 8 mma tile.
    const bool pairs = (ldc % 2 == 0) && ((((u64)C) & 3) == 0);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = m0 + wm * 64 + i * 16 + lane / 4 + 8 * h;
            if (row >= M) continue;
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const int col = n0 + wn * 64 + j * 8 + 2 * (lane % 4);
                unsigned short* p = C + (long long)row * ldc + col;
                const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                if (pairs && col + 1 < N) {
                    *reinterpret_cast<unsigned*>(p) = E::pack(v0, v1);
                } else {
                    if (col < N) p[0] = E::one(v0);
                    if (col + 1 < N) p[1] = E::one(v1);
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(MM_THREADS, MM_MIN_BLOCKS)
    gemm_mma_bf16_nn(const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, bf16_t* __restrict__ C, int M,
                     int N, int K, int lda, int ldb, int ldc) {
    gemm_mma<MmBF16, false, false>(A, B, C, M, N, K, lda, ldb, ldc);
}
extern "C" __global__ void __launch_bounds__(MM_THREADS, MM_MIN_BLOCKS)
    gemm_mma_bf16_nt(const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, bf16_t* __restrict__ C, int M,
                     int N, int K, int lda, int ldb, int ldc) {
    gemm_mma<MmBF16, false, true>(A, B, C, M, N, K, lda, ldb, ldc);
}
extern "C" __global__ void __launch_bounds__(MM_THREADS, MM_MIN_BLOCKS)
    gemm_mma_bf16_tn(const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, bf16_t* __restrict__ C, int M,
                     int N, int K, int lda, int ldb, int ldc) {
    gemm_mma<MmBF16, true, false>(A, B, C, M, N, K, lda, ldb, ldc);
}
extern "C" __global__ void __launch_bounds__(MM_THREADS, MM_MIN_BLOCKS)
    gemm_mma_bf16_tt(const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, bf16_t* __restrict__ C, int M,
                     int N, int K, int lda, int ldb, int ldc) {
    gemm_mma<MmBF16, true, true>(A, B, C, M, N, K, lda, ldb, ldc);
}
extern "C" __global__ void __launch_bounds__(MM_THREADS, MM_MIN_BLOCKS)
    gemm_mma_f16_nn(const f16_t* __restrict__ A, const f16_t* __restrict__ B, f16_t* __restrict__ C, int M, int N,
                    int K, int lda, int ldb, int ldc) {
    gemm_mma<MmF16, false, false>(A, B, C, M, N, K, lda, ldb, ldc);
}
extern "C" __global__ void __launch_bounds__(MM_THREADS, MM_MIN_BLOCKS)
    gemm_mma_f16_nt(const f16_t* __restrict__ A, const f16_t* __restrict__ B, f16_t* __restrict__ C, int M, int N,
                    int K, int lda, int ldb, int ldc) {
    gemm_mma<MmF16, false, true>(A, B, C, M, N, K, lda, ldb, ldc);
}
extern "C" __global__ void __launch_bounds__(MM_THREADS, MM_MIN_BLOCKS)
    gemm_mma_f16_tn(const f16_t* __restrict__ A, const f16_t* __restrict__ B, f16_t* __restrict__ C, int M, int N,
                    int K, int lda, int ldb, int ldc) {
    gemm_mma<MmF16, true, false>(A, B, C, M, N, K, lda, ldb, ldc);
}
extern "C" __global__ void __launch_bounds__(MM_THREADS, MM_MIN_BLOCKS)
    gemm_mma_f16_tt(const f16_t* __restrict__ A, const f16_t* __restrict__ B, f16_t* __restrict__ C, int M, int N,
                    int K, int lda, int ldb, int ldc) {
    gemm_mma<MmF16, true, true>(A, B, C, M, N, K, lda, ldb, ldc);
}
