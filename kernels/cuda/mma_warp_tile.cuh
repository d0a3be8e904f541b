// mma_warp_tile.cuh — one warp's 64 x 64 tile of C on the tensor cores through mma.sync
// (sm_80+): the block geometry, the fragment loads (ldmatrix from 128-byte-swizzled shared
// memory), the 4 x 8 MMAs of one k step of 16, and the store of the f32 accumulators to C.
// Used by gemm_mma.cu (tiles copied by cp.async) and by kernels/tuning/gemm_mma_tma.cu (a lab
// variant whose tiles the TMA engine copies).
#pragma once
#include "dtype.cuh"
#include "shared_address.cuh"

#ifndef MM_BM
#define MM_BM 128  // the block's m extent (256 with MM_BN 128: the lab's 256 x 128 variant)
#endif
#ifndef MM_BN
#define MM_BN 256  // the block's n extent: 256 (8 warps) or 128 (4 warps)
#endif
#ifndef MM_BK
#define MM_BK 64  // k per stage: 64 measured 10-20% faster than 32 on an H100 (kernels/TUNING.md); MmFragAddr needs 64
#endif
#define MM_WARPS_N (MM_BN / 64)  // each warp computes 64 x 64 of C
#define MM_COMPUTE_THREADS (MM_BM / 64 * MM_WARPS_N * 32)
#define MM_A_BYTES (MM_BM * MM_BK * 2)  // 16 KB
#define MM_B_BYTES (MM_BN * MM_BK * 2)  // 32 KB
#define MM_STAGE_BYTES (MM_A_BYTES + MM_B_BYTES)
#ifndef MM_GROUP_M
#define MM_GROUP_M 8  // tile rows a group of blocks walks together (16 measured the same)
#endif

// The block's tile of C: blocks walk MM_GROUP_M tile rows together, column by column, so the
// blocks running at once share B in L2.
__device__ __forceinline__ void mm_block_tile(int M, int N, int& m0, int& n0) {
    const int tiles_m = (M + MM_BM - 1) / MM_BM, tiles_n = (N + MM_BN - 1) / MM_BN;
    const int per_group = MM_GROUP_M * tiles_n;
    const int first_m = (blockIdx.x / per_group) * MM_GROUP_M;
    const int rows_here = min(tiles_m - first_m, MM_GROUP_M);
    const int in_group = blockIdx.x % per_group;
    m0 = (first_m + in_group % rows_here) * MM_BM;
    n0 = (in_group / rows_here) * MM_BN;
}

// Where 16-byte chunk `chunk` of row `row` of a tile lies.
//
// MmRowsLayout (cp.async): rows of W bytes one after another. Rows of 64 bytes (4 chunks) XOR
// the chunk with bits 1..2 of the row, wider rows with bits 0..2: either way 8 consecutive rows
// read at one logical chunk hit 8 different 16-byte bank groups.
struct MmRowsLayout {
    template <int W>
    static __device__ __forceinline__ unsigned at(int row, int chunk) {
        return W == 64 ? row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4) : row * W + ((chunk ^ (row & 7)) << 4);
    }
};

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

// The element types of the warp tile: T (16-bit storage), the mma of one 16 x 8 x 16 step with
// f32 accumulators, pack (two f32 rounded into one 32-bit pair, lo in the low half) and one (a
// single f32 rounded). PTX names the type (bf16 / f16) inside the instruction strings.
#define MM_ELEMENT(NAME, STORAGE, PTX, ONE)                                                                        \
    struct NAME {                                                                                                  \
        typedef STORAGE T;                                                                                         \
        static __device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) { \
            asm("mma.sync.aligned.m16n8k16.row.col.f32." PTX "." PTX                                              \
                ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"                              \
                : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                   \
                : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));                                   \
        }                                                                                                          \
        static __device__ __forceinline__ unsigned pack(float lo, float hi) {                                      \
            unsigned v;                                                                                            \
            asm("cvt.rn." PTX "x2.f32 %0, %1, %2;" : "=r"(v) : "f"(hi), "f"(lo));                                  \
            return v;                                                                                              \
        }                                                                                                          \
        static __device__ __forceinline__ unsigned short one(float x) { return ONE(x); }                           \
    };
MM_ELEMENT(MmBF16, bf16_t, "bf16", f32_to_bf16)
MM_ELEMENT(MmF16, f16_t, "f16", f32_to_f16)
#undef MM_ELEMENT

// A value ptxas must keep in a register: an identity shuffle (every lane reads its own value),
// which ptxas cannot recompute later the way it recomputes arithmetic on threadIdx and kernel
// parameters. Without it ptxas rebuilt the ldmatrix and copy addresses at every k tile, ~50
// integer instructions per tile per warp (kernels/TUNING.md, sixth round). The whole warp must
// execute it together (full mask): call it where no lane has branched off.
__device__ __forceinline__ unsigned mm_pin(unsigned v) {
    unsigned r;
    asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"((unsigned)threadIdx.x % 32));
    return r;
}

// The fragment loads of a tile stored in MmRowsLayout, with the swizzle worked out once per thread.
// Every ldmatrix address is one of 8 per-thread registers plus a constant (the stage, and the k
// step or the 16-row block), which ptxas folds into the instruction: computing the XOR swizzle
// per load, as MmRowsLayout::at does, cost ~0.7 integer instructions per MMA (Nsight Compute,
// kernels/TUNING.md). For each operand the swizzle depends on the lane and on one index only —
// the k step for K-major tiles (A [m][k], B [n][k]), the 16-wide block for M/N-major ones — because
// the other index moves whole rows (8-row multiples) or whole 8-chunk groups, which the XOR of the
// row's low 3 bits leaves alone. TA: A stored [k][m]; TB: B stored [n][k].
template <bool TA, bool TB>
struct MmFragAddr {
    static_assert(MM_BK == 64, "the per-k-step registers cover 4 k steps of 16");
    unsigned a[4], b[4];
    // `tile` is the shared address of stage 0's A tile (B follows at MM_A_BYTES).
    __device__ __forceinline__ MmFragAddr(unsigned tile, int wm, int wn) {
        const int lane = threadIdx.x % 32, mat = lane / 8, mrow = lane % 8;
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            a[x] = TA ? tile + (((mat & 2) ? 8 : 0) + mrow) * (MM_BM * 2) + wm * 128 + (((2 * x + (mat & 1)) ^ mrow) << 4)
                      : tile + (wm * 64 + lane % 16) * (MM_BK * 2) + (((2 * x + lane / 16) ^ (lane & 7)) << 4);
            b[x] = TB ? tile + MM_A_BYTES + (wn * 64 + ((mat & 2) ? 8 : 0) + mrow) * (MM_BK * 2) +
                            (((2 * x + (mat & 1)) ^ mrow) << 4)
                      : tile + MM_A_BYTES + ((mat & 1) * 8 + mrow) * (MM_BN * 2) + wn * 128 +
                            (((2 * x + (mat >> 1)) ^ mrow) << 4);
            // Pinned: otherwise ptxas recomputes the 8 addresses from threadIdx at the top of
            // every k tile, ~30 integer instructions per tile per warp (kernels/TUNING.md).
            a[x] = mm_pin(a[x]);
            b[x] = mm_pin(b[x]);
        }
    }
    // Fragment i of A (rows 16 i..) and pair p of B (columns 16 p..) of k step ks, from the stage
    // `so` bytes after stage 0 (all constants once the loops are unrolled).
    __device__ __forceinline__ void load_a(unsigned so, int ks, int i, unsigned (&fa)[4][4]) const {
        if (TA) ldsm_x4_t(a[i] + so + ks * 16 * (MM_BM * 2), fa[i][0], fa[i][1], fa[i][2], fa[i][3]);
        else ldsm_x4(a[ks] + so + i * 16 * (MM_BK * 2), fa[i][0], fa[i][1], fa[i][2], fa[i][3]);
    }
    __device__ __forceinline__ void load_b(unsigned so, int ks, int p, unsigned (&fb)[8][2]) const {
        if (TB) ldsm_x4(b[ks] + so + p * 16 * (MM_BK * 2), fb[2 * p][0], fb[2 * p][1], fb[2 * p + 1][0], fb[2 * p + 1][1]);
        else ldsm_x4_t(b[p] + so + ks * 16 * (MM_BN * 2), fb[2 * p][0], fb[2 * p][1], fb[2 * p + 1][0], fb[2 * p + 1][1]);
    }
    // All fragments of k step ks.
    __device__ __forceinline__ void load(unsigned so, int ks, unsigned (&fa)[4][4], unsigned (&fb)[8][2]) const {
#pragma unroll
        for (int i = 0; i < 4; ++i) load_a(so, ks, i, fa);
#pragma unroll
        for (int p = 0; p < 4; ++p) load_b(so, ks, p, fb);
    }
};

// A warp tile's accumulators, zeroed.
__device__ __forceinline__ void mm_zero(float (&acc)[4][8][4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.0f;
}

// The 32 MMAs of one k step: acc[i][j] += A rows i (16) x B columns j (8).
template <class E>
__device__ __forceinline__ void mm_step(float (&acc)[4][8][4], const unsigned (&a)[4][4], const unsigned (&b)[8][2]) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) E::mma(acc[i][j], a[i], b[j][0], b[j][1]);
}

// acc[i][j] holds rows r, r + 8 and columns c, c + 1 of one 16 x 8 mma tile: written to C as the
// input type (one rounding per element), pairs as one 4-byte store where C's rows allow it.
template <class E>
__device__ __forceinline__ void mm_store(const float (&acc)[4][8][4], unsigned short* __restrict__ C, int M, int N,
                                         int ldc, int m0, int n0, int wm, int wn) {
    const int lane = threadIdx.x % 32;
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

// The bytes mm_store_staged needs per warp: its 64 x 64 tile as 16-bit values.
#define MM_STAGED_WARP_BYTES (64 * 64 * 2)

// mm_store through shared memory: the warp writes its tile, rounded to the input type, into its
// own MM_STAGED_WARP_BYTES at shared address `stage` (rows of 128 bytes, 16-byte chunks XORed with
// the row's low 3 bits so neither side conflicts), then reads it back in 16-byte chunks and
// stores whole 128-byte rows to C. Direct 4-byte stores from the fragments (mm_store) left each
// 32-byte sector half written per instruction and cost ~10% of a 4096³ GEMM (kernels/TUNING.md,
// fourth round). Needs C 16-byte aligned and ldc % 8 == 0 (a chunk never leaves its row); chunks
// that reach past N are written element by element. The caller makes sure nothing else uses
// `stage` (a block barrier after the k loop) and that every warp has its own.
template <class E>
__device__ __forceinline__ void mm_store_staged(const float (&acc)[4][8][4], unsigned short* __restrict__ C, int M,
                                                int N, int ldc, int m0, int n0, int wm, int wn, unsigned stage) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = i * 16 + lane / 4 + 8 * h;  // row in the warp's tile
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const unsigned v = E::pack(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
                const unsigned a = stage + r * 128 + ((j ^ (r & 7)) << 4) + 4 * (lane % 4);
                asm volatile("st.shared.b32 [%0], %1;" ::"r"(a), "r"(v) : "memory");
            }
        }
    __syncwarp();
    const int row0 = m0 + wm * 64, col0 = n0 + wn * 64;
#pragma unroll 4
    for (int t = 0; t < 16; ++t) {
        const int q = lane + 32 * t, r = q / 8, ch = q % 8;
        const int row = row0 + r, col = col0 + ch * 8;
        if (row >= M || col >= N) continue;
        unsigned x0, x1, x2, x3;
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(x0), "=r"(x1), "=r"(x2), "=r"(x3)
                     : "r"(stage + r * 128 + ((ch ^ (r & 7)) << 4)));
        unsigned short* p = C + (long long)row * ldc + col;
        if (col + 8 <= N) {
            asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(x0), "r"(x1), "r"(x2), "r"(x3)
                         : "memory");
        } else {
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const unsigned w = e < 2 ? x0 : e < 4 ? x1 : e < 6 ? x2 : x3;
                if (col + e < N) p[e] = (unsigned short)(w >> (16 * (e % 2)));
            }
        }
    }
}

