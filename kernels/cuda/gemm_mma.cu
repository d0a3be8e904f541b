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
//     chunks are zero-filled by the copy itself), three stages deep, so the loads of the next
//     tiles are in flight while tile k is multiplied. One __syncthreads per k tile of 64. Tiles
//     wholly inside the matrices copy without per-chunk bounds checks, from per-thread pointers
//     set up once per block and advanced one k tile at a time (MmTileCopy); the others through
//     mm_load_tile's checked path.
//   * Fragments are double-buffered in registers: the ldmatrix of the next k step (at a tile's
//     last step, of the next tile) is issued before this step's mma. The copies and the barrier
//     are issued after a step's mma, behind queued tensor-core work (CUTLASS's order).
//   * Every ldmatrix address is one of 8 per-thread registers plus a constant (MmFragAddr in
//     mma_warp_tile.cuh; the k tiles are unrolled by stage), so no swizzle arithmetic runs in the
//     k loop. Those registers and the copy pointers are pinned (mm_pin) so ptxas keeps them
//     rather than rebuild them from threadIdx at every k tile.
//   * A block of 8 warps computes a 128 x 256 tile of C; each warp 64 x 64 (4 x 8 mma tiles, 128
//     f32 accumulators per thread), so every ldmatrix'd fragment feeds 4 or 8 mma.
//   * C leaves through shared memory (mm_store_staged) when its rows allow 16-byte stores: the
//     accumulator fragments hold 2 adjacent columns per thread, and storing them directly
//     leaves every 32-byte sector half written by each instruction.
//
// Layouts (row-major, names as in sgemm.cu): nn: A [M, K], B [K, N]; nt: B stored [N, K];
// tn: A stored [K, M]; tt: both. C [M, N] row stride ldc, written as the input type after f32
// accumulation (one rounding per element). C = A @ B (no alpha / beta).
// Host contract (ops/gemm_tc.rs checks it): block 256 threads exactly, grid
// ceil(M / 128) * ceil(N / 256) blocks (1-D), dynamic shared memory MM_SMEM_BYTES (the function's
// limit raised first); A and B 16-byte aligned with lda and ldb multiples of 8 (a 16-byte chunk never
// leaves its row); M, N >= 1, K >= 0. (MM_BN=128, MM_STAGES, MM_MIN_BLOCKS: other
// geometries for kernels/tuning/mma_variants.sh only; the crate ships the defaults.)
#include "mma_warp_tile.cuh"

#ifndef MM_STAGES
#define MM_STAGES 3  // 3 x 48 KB: fits the 163 KB an A100 block can opt into
#endif
#define MM_THREADS MM_COMPUTE_THREADS
#ifndef MM_MIN_BLOCKS
#define MM_MIN_BLOCKS 1  // blocks per SM the register allocation must allow
#endif
#define MM_SMEM_BYTES (MM_STAGES * MM_STAGE_BYTES + 128)  // 144 KB + alignment slack

// A thread's share of the 16-byte cp.async chunks of a TR x TC (16-bit elements) tile stored in
// MmRowsLayout: thread t copies chunk t % CPR of rows t / CPR + i * RSTEP (i < PER_THREAD). RSTEP
// is a multiple of 8, so every one of its rows has the same swizzle and its chunks sit RSTEP rows
// apart in both memories.
//
// For a tile wholly inside the matrix that is one address computation and PER_THREAD copies at
// fixed strides. gemm_mma sets one up per operand per block (pinned, mma_warp_tile.cuh) and
// advances it one k tile at a time with next(): each copy is then a 64-bit add and a cp.async at
// a constant shared offset. The global address is held as an integer: for blocks not wholly
// inside it may point past the matrix, and is then never used.
template <int TR, int TC>
struct MmTileCopy {
    static constexpr int CPR = TC / 8, PER_THREAD = TR * CPR / MM_THREADS, RSTEP = MM_THREADS / CPR;
    static_assert(MM_THREADS % CPR == 0 && RSTEP % 8 == 0, "a thread's rows must share their swizzle");
    u64 src;                // global byte address of the thread's first chunk of the current k tile
    long long step, kstep;  // bytes between a thread's chunks (RSTEP rows), and between k tiles
    unsigned dst;           // shared address of that chunk in stage 0
    // The tile's top-left is (r0, c0) of a matrix with row stride ld; its shared tile at `base`;
    // `k_rows`: k runs down the rows (A [K, M], B [K, N]), for next().
    __device__ __forceinline__ MmTileCopy(unsigned base, const unsigned short* P, int ld, int r0, int c0,
                                          bool k_rows) {
        const int row = threadIdx.x / CPR, ch = threadIdx.x % CPR;
        src = (u64)P + 2 * ((long long)(r0 + row) * ld + (c0 + ch * 8));
        step = 2LL * RSTEP * ld;
        kstep = k_rows ? 2LL * MM_BK * ld : 2 * MM_BK;
        dst = base + MmRowsLayout::at<TC * 2>(row, ch);
    }
    // Keeps the addresses in registers across the k loop (mm_pin). The whole warp must call it.
    __device__ __forceinline__ void pin() {
        src = ((u64)mm_pin((unsigned)(src >> 32)) << 32) | mm_pin((unsigned)src);
        dst = mm_pin(dst);
    }
    // Copies the current k tile into the stage `so` bytes after `base` (a constant).
    __device__ __forceinline__ void copy(unsigned so) const {
#pragma unroll
        for (int i = 0; i < PER_THREAD; ++i)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst + so + i * RSTEP * TC * 2), "l"(src + i * step)
                         : "memory");
    }
    __device__ __forceinline__ void next() { src += kstep; }
};

// Copies a TR x TC tile whose top-left is (r0, c0) of a matrix with GR rows, GC columns and row
// stride ld into shared memory at `dst`, the same chunks per thread as MmTileCopy, zero-filling
// chunks past the matrix. A tile wholly inside copies unchecked (one MmTileCopy); otherwise every
// chunk is checked, which costs ~250 integer instructions per k tile per warp beside its 128 mma
// (kernels/TUNING.md). gemm_mma calls this only for the k tiles its pinned copies do not cover
// (the blocks on the matrices' last row or column of tiles, and a short last k tile), where one
// operand's tile is often still wholly inside.
template <int TR, int TC>
__device__ __forceinline__ void mm_load_tile(unsigned dst, const unsigned short* __restrict__ P, int ld, int GR,
                                             int GC, int r0, int c0) {
    typedef MmTileCopy<TR, TC> Map;
    if (r0 + TR <= GR && c0 + TC <= GC) {
        Map(dst, P, ld, r0, c0, false).copy(0);
        return;
    }
#pragma unroll 1
    for (int i = 0; i < Map::PER_THREAD; ++i) {
        const int q = threadIdx.x + i * MM_THREADS;
        const int row = q / Map::CPR, ch = q % Map::CPR;
        const int gr = r0 + row, gc = c0 + ch * 8;
        int bytes = 0;
        const unsigned short* src = P;
        if (gr < GR && gc < GC) {
            bytes = min(16, (GC - gc) * 2);
            src = P + (long long)gr * ld + gc;
        }
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst + MmRowsLayout::at<TC * 2>(row, ch)), "l"(src),
                     "r"(bytes)
                     : "memory");
    }
}

// TA: A stored [K, M] (M-major); TB: B stored [N, K] (K-major). Untransposed: A [M, K], B [K, N].
template <class E, bool TA, bool TB>
__device__ __forceinline__ void gemm_mma(const unsigned short* __restrict__ A, const unsigned short* __restrict__ B,
                                         unsigned short* __restrict__ C, int M, int N, int K, int lda, int ldb,
                                         int ldc) {
    extern __shared__ unsigned char mm_smem[];
    const unsigned base = (smem_u32(mm_smem) + 127u) & ~127u;
    int m0, n0;
    mm_block_tile(M, N, m0, n0);
    const int ktiles = (K + MM_BK - 1) / MM_BK;
    const int warp = threadIdx.x / 32;
    const int wm = warp / MM_WARPS_N, wn = warp % MM_WARPS_N;  // the warp's 64 x 64 sub-tile

    // Tiles wholly inside both matrices (every k tile but a short last one, in every block but
    // the last row or column of blocks) copy through ca / cb; the others through mm_load_tile's
    // checked path. Stage `st` (a constant once unrolled) receives tile kt.
    MmTileCopy<TA ? MM_BK : MM_BM, TA ? MM_BM : MM_BK> ca(base, A, lda, TA ? 0 : m0, TA ? m0 : 0, TA);
    MmTileCopy<TB ? MM_BN : MM_BK, TB ? MM_BK : MM_BN> cb(base + MM_A_BYTES, B, ldb, TB ? n0 : 0, TB ? 0 : n0, !TB);
    ca.pin();
    cb.pin();
    const bool inside = m0 + MM_BM <= M && n0 + MM_BN <= N;
    const int kfull = K / MM_BK;
    auto load_stage = [&](int kt, int st) {
        if (inside && kt < kfull) {
            ca.copy(st * MM_STAGE_BYTES);
            cb.copy(st * MM_STAGE_BYTES);
        } else {
            const unsigned sa = base + st * MM_STAGE_BYTES, sb = sa + MM_A_BYTES;
            const int k0 = kt * MM_BK;
            if (TA) mm_load_tile<MM_BK, MM_BM>(sa, A, lda, K, M, k0, m0);  // rows k, columns m
            else mm_load_tile<MM_BM, MM_BK>(sa, A, lda, M, K, m0, k0);     // rows m, columns k
            if (TB) mm_load_tile<MM_BN, MM_BK>(sb, B, ldb, N, K, n0, k0);  // rows n, columns k
            else mm_load_tile<MM_BK, MM_BN>(sb, B, ldb, K, N, k0, n0);     // rows k, columns n
        }
        ca.next();
        cb.next();
    };
    const MmFragAddr<TA, TB> frag(base, wm, wn);

    float acc[4][8][4];
    mm_zero(acc);

#pragma unroll
    for (int s = 0; s < MM_STAGES - 1; ++s) {
        if (s < ktiles) load_stage(s, s);
        asm volatile("cp.async.commit_group;" ::: "memory");
    }

    // The k loop in the order CUTLASS's multistage mainloop uses (kernels/TUNING.md, "mma.sync,
    // fourth round"). In each tile kt, at every k step: the ldmatrix of the next step (at the
    // last step: of tile kt + 1's first step), then this step's 32 mma; after the first step's
    // mma, every copy of tile kt + MM_STAGES - 1, into the stage tile kt - 1 used; after the
    // second-to-last step's mma, the wait for tile kt + 1 and one barrier. Every ldmatrix of a
    // tile is issued before its barrier, so that barrier frees the tile's stage for the copies
    // of the next tile, and both the copies and the barrier come behind queued tensor-core work
    // instead of in front of it. The k tiles are unrolled by MM_STAGES so every stage's address
    // is a constant (MmFragAddr).
    constexpr int KS = MM_BK / 16;
    static_assert(KS % 2 == 0 && KS >= 2, "the fragment buffers alternate per k step");
    unsigned a[2][4][4], b[2][8][2];
    asm volatile("cp.async.wait_group %0;" ::"n"(MM_STAGES - 2) : "memory");
    __syncthreads();  // tile 0 is in shared memory
    if (ktiles > 0) frag.load(0, 0, a[0], b[0]);
    for (int kt0 = 0; kt0 < ktiles; kt0 += MM_STAGES) {
#pragma unroll
        for (int st = 0; st < MM_STAGES; ++st) {
            const int kt = kt0 + st;  // in stage st
            if (kt >= ktiles) break;
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
                const int cur = ks % 2, nxt = 1 - cur;
                if (ks < KS - 1) frag.load(st * MM_STAGE_BYTES, ks + 1, a[nxt], b[nxt]);
                else if (kt + 1 < ktiles) frag.load((st + 1) % MM_STAGES * MM_STAGE_BYTES, 0, a[nxt], b[nxt]);
                mm_step<E>(acc, a[cur], b[cur]);
                if (ks == 0 && kt + MM_STAGES - 1 < ktiles) load_stage(kt + MM_STAGES - 1, (st + MM_STAGES - 1) % MM_STAGES);
                if (ks == KS - 2) {
                    asm volatile("cp.async.commit_group;" ::: "memory");
                    asm volatile("cp.async.wait_group %0;" ::"n"(MM_STAGES - 2) : "memory");
                    __syncthreads();  // tile kt + 1 is in shared memory; every warp is past tile kt's ldmatrix
                }
            }
        }
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    static_assert(MM_COMPUTE_THREADS / 32 * MM_STAGED_WARP_BYTES <= MM_STAGES * MM_STAGE_BYTES, "staging fits the stages");
    if (ldc % 8 == 0 && (((u64)C) & 15) == 0) {  // the same for every thread of the block
        __syncthreads();  // every warp is past its last ldmatrix: the stages become the staging area
        mm_store_staged<E>(acc, C, M, N, ldc, m0, n0, wm, wn, base + warp * MM_STAGED_WARP_BYTES);
    } else {
        mm_store<E>(acc, C, M, N, ldc, m0, n0, wm, wn);
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
