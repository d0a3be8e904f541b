// gemm_mma_tma.cu — the mma.sync step of the tensor-core ladder on Hopper (sm_90+): the same
// warp-level MMAs as gemm_mma.cu, with the tiles brought into shared memory by the TMA engine.
//
// A lab variant, not shipped (kernels/TUNING.md, "mma.sync, third round"): the hypothesis was that
// gemm_mma.cu's cp.async fills compete with ldmatrix for the shared-memory path (the kernel ran
// ~390 TFLOP/s at 8192^3 with its copies and ~534 with them taken out, mma_ablation.sh). Fed by
// the TMA engine instead, it ran no faster (nt: the same; nn / tn ~25% slower): the engine's writes
// cost the shared memory the same bytes. Built by kernels/tuning/mma_variants.sh with nvcc:
//   nvcc -ptx -arch=compute_90 -I kernels/cuda kernels/tuning/gemm_mma_tma.cu
// and timed by tc_lab beside the shipped kernels when its PTX is in the directory given.
//
// What changes in the hardware's use, compared with gemm_mma.cu:
//   * One thread asks the TMA engine for each stage's tiles (`cp.async.bulk.tensor` through the
//     tensor maps gemm_wgmma.cu uses), and the engine counts the bytes it delivered on that
//     stage's `full` mbarrier. Edge tiles and the K tail are zero-filled by the engine: no bounds
//     checks anywhere in the k loop. (A ninth, producer-only warp would leave one of the four
//     schedulers with 3 warps, whose register file then allows 168 registers per thread: ptxas
//     spilled ~600 bytes. So thread 0 of the compute warps doubles as the producer, refilling a
//     stage as soon as all 8 warps have arrived on its `empty` barrier.)
//   * The 8 compute warps never meet at a block-wide barrier: each waits for a stage's `full`
//     barrier and, once its last fragments of the stage are in registers, arrives on the stage's
//     `empty` barrier (8 arrivals free the stage for the producer). Four stages of 48 KB.
//   * Tiles arrive in the engine's 128-byte swizzle (boxes of 64 rows x 128 bytes): ldmatrix
//     addresses them through MmBoxLayout, still free of bank conflicts.
// The warp tile, the fragment double-buffering and the epilogue are gemm_mma.cu's
// (mma_warp_tile.cuh).
//
// Layouts (row-major, as everywhere in this project): nn: A [M, K], B [K, N]; nt: B stored [N, K];
// tn: A stored [K, M]; tt: both. C [M, N] row stride ldc, written as the input type after f32
// accumulation.
//
// Launch contract (tc_lab follows it):
//   * block MT_THREADS (256) threads exactly, grid ceil(M / 128) * ceil(N / 256) blocks (1-D),
//     dynamic shared memory MT_SMEM_BYTES (the function's limit raised first);
//   * tmA / tmB: the tensor maps gemm_wgmma.cu takes for the same layout (128-byte swizzle, zero
//     out-of-bounds fill); A and B are passed only so the launch orders their buffers;
//   * M, N >= 1, K >= 0 (K == 0 writes zeros).
#include "mma_warp_tile.cuh"
#include "tma.cuh"

// MmBoxLayout (TMA, 128-byte swizzle): a tile wider than 128 bytes arrives as boxes of 64 rows x
// 128 bytes one after another, each row's chunks XORed with bits 0..2 of the row (the engine's
// CU_TENSOR_MAP_SWIZZLE_128B pattern on 1024-byte aligned boxes). A tile 128 bytes wide is one
// box, and then this is MmRowsLayout's W = 128 exactly.
struct MmBoxLayout {
    template <int W>
    static __device__ __forceinline__ unsigned at(int row, int chunk) {
        return (chunk >> 3) * (64 * 128) + row * 128 + (((chunk & 7) ^ (row & 7)) << 4);
    }
};


// The fragments of k step ks (16 of the stage's MM_BK) for warp (wm, wn), from the stage whose A
// tile starts at `sa` and B tile at `sb`. TA: A stored [k][m] (M-major, transposed while loading);
// TB: B stored [n][k] (K-major). L: how the tiles lie in shared memory.
template <bool TA, bool TB, class L>
__device__ __forceinline__ void mm_load_frags(unsigned sa, unsigned sb, int ks, int wm, int wn, unsigned (&a)[4][4],
                                              unsigned (&b)[8][2]) {
    // Lane -> which 8 x 8 matrix it addresses (l / 8) and which row of it (l % 8).
    const int lane = threadIdx.x % 32, mat = lane / 8, mrow = lane % 8;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int m = wm * 64 + i * 16;
        if (TA) {  // smem [k][m], MM_BM * 2-byte rows: transpose while loading
            const int krow = ks * 16 + ((mat & 2) ? 8 : 0) + mrow;
            const int chunk = (m + ((mat & 1) ? 8 : 0)) / 8;
            ldsm_x4_t(sa + L::template at<MM_BM * 2>(krow, chunk), a[i][0], a[i][1], a[i][2], a[i][3]);
        } else {  // smem [m][k], MM_BK * 2-byte rows
            const int row = m + (lane % 16), chunk = ks * 2 + lane / 16;
            ldsm_x4(sa + L::template at<MM_BK * 2>(row, chunk), a[i][0], a[i][1], a[i][2], a[i][3]);
        }
    }
#pragma unroll
    for (int p = 0; p < 4; ++p) {
        const int n = wn * 64 + p * 16;
        if (TB) {  // smem [n][k], MM_BK * 2-byte rows
            const int nrow = n + ((mat & 2) ? 8 : 0) + mrow, chunk = ks * 2 + (mat & 1);
            ldsm_x4(sb + L::template at<MM_BK * 2>(nrow, chunk), b[2 * p][0], b[2 * p][1], b[2 * p + 1][0],
                    b[2 * p + 1][1]);
        } else {  // smem [k][n], MM_BN * 2-byte rows: transpose while loading
            const int krow = ks * 16 + ((mat & 1) ? 8 : 0) + mrow;
            const int chunk = (n + ((mat & 2) ? 8 : 0)) / 8;
            ldsm_x4_t(sb + L::template at<MM_BN * 2>(krow, chunk), b[2 * p][0], b[2 * p][1], b[2 * p + 1][0],
                      b[2 * p + 1][1]);
        }
    }
}


#define MT_STAGES 4  // 4 x 48 KB
#define MT_WARPS (MM_COMPUTE_THREADS / 32)
#define MT_THREADS MM_COMPUTE_THREADS
#define MT_SMEM_BYTES (MT_STAGES * MM_STAGE_BYTES + 1024 + 2 * MT_STAGES * 8)

// TA: A stored [K, M] (M-major); TB: B stored [N, K] (K-major).
template <class E, bool TA, bool TB>
__device__ __forceinline__ void gemm_mma_tma(const TensorMap* tmA, const TensorMap* tmB,
                                             unsigned short* __restrict__ C, int M, int N, int K, int ldc) {
    extern __shared__ unsigned char mt_smem[];
    const unsigned base = (smem_u32(mt_smem) + 1023u) & ~1023u;  // 128-byte swizzle: 1 KB aligned boxes
    // full[s] = bars + 8 s (the producer's expect_tx + the copies' bytes); empty[s] =
    // bars + 8 (STAGES + s) (one arrival per warp once it has read the stage).
    const unsigned bars = base + MT_STAGES * MM_STAGE_BYTES;
    auto full = [&](int kt) { return bars + 8 * (kt % MT_STAGES); };
    auto empty = [&](int kt) { return bars + 8 * (MT_STAGES + kt % MT_STAGES); };
    auto stage = [&](int kt) { return base + (kt % MT_STAGES) * MM_STAGE_BYTES; };
    int m0, n0;
    mm_block_tile(M, N, m0, n0);
    const int ktiles = (K + MM_BK - 1) / MM_BK;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    // Tile kt's copies. Boxes are 128 bytes wide: a K-major tile is one box (128 or 256 rows), an
    // M- or N-major one 2 or 4 boxes of 64 (k) rows, 8 KB apart (MmBoxLayout).
    auto issue = [&](int kt) {
        const unsigned bar = full(kt), sa = stage(kt), sb = sa + MM_A_BYTES;
        mbar_expect_tx(bar, MM_STAGE_BYTES);
        const int k0 = kt * MM_BK;
        if (TA) {
#pragma unroll
            for (int j = 0; j < MM_BM / 64; ++j) tma_load_2d(sa + j * 64 * 128, tmA, m0 + 64 * j, k0, bar);
        } else {
            tma_load_2d(sa, tmA, k0, m0, bar);
        }
        if (TB) {
            tma_load_2d(sb, tmB, k0, n0, bar);
        } else {
#pragma unroll
            for (int j = 0; j < MM_BN / 64; ++j) tma_load_2d(sb + j * 64 * 128, tmB, n0 + 64 * j, k0, bar);
        }
    };
    // Thread 0 also drives the copy engine: `next` is the first tile not yet asked for. Tile t
    // goes into the stage of tile t - STAGES once every warp has arrived on that stage's `empty`
    // barrier (phase (t / STAGES - 1) & 1).
    const bool producer = threadIdx.x == 0;
    int next = 0;
    auto stage_free = [&](int t) { return mbar_try_wait(empty(t), ((t / MT_STAGES) & 1) ^ 1); };
    if (producer) {
        for (int s = 0; s < MT_STAGES; ++s) {
            mbar_init(bars + 8 * s, 1);
            mbar_init(bars + 8 * (MT_STAGES + s), MT_WARPS);
        }
        mbar_init_fence();
        for (; next < min(MT_STAGES, ktiles); ++next) issue(next);
    }
    __syncthreads();  // the barriers are initialised

    const int wm = warp / MM_WARPS_N, wn = warp % MM_WARPS_N;  // the warp's 64 x 64 sub-tile
    float acc[4][8][4];
    mm_zero(acc);
    auto load_frags = [&](unsigned sa, int ks, unsigned (&a)[4][4], unsigned (&b)[8][2]) {
        mm_load_frags<TA, TB, MmBoxLayout>(sa, sa + MM_A_BYTES, ks, wm, wn, a, b);
    };

    // Fragments double-buffered as in gemm_mma.cu: step ks + 1's ldmatrix (the next tile's first
    // step, after waiting for it, at a tile's last step) is issued before step ks's MMAs.
    constexpr int KS = MM_BK / 16;
    static_assert(KS % 2 == 0, "the fragment buffers alternate per k step");
    unsigned a[2][4][4], b[2][8][2];
    if (ktiles > 0) {
        mbar_wait(full(0), 0);
        load_frags(stage(0), 0, a[0], b[0]);
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        const unsigned sa = stage(kt);
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
            const int cur = ks % 2, nxt = 1 - cur;
            // The producer refills a stage as soon as it is free, without waiting for it.
            if (producer && next < ktiles && stage_free(next)) issue(next++);
            if (ks < KS - 1) {
                load_frags(sa, ks + 1, a[nxt], b[nxt]);
            } else if (kt + 1 < ktiles) {
                // Tile kt + 1 must have been asked for: its stage held tile kt + 1 - STAGES, which
                // every warp has finished or will without waiting for anything not yet asked for.
                if (producer)
                    while (next <= kt + 1) {
                        while (!stage_free(next)) {
                        }
                        issue(next++);
                    }
                mbar_wait(full(kt + 1), ((kt + 1) / MT_STAGES) & 1);
                load_frags(stage(kt + 1), 0, a[nxt], b[nxt]);
            }
            mm_step<E>(acc, a[cur], b[cur]);
        }
        // Every fragment of tile kt has been consumed by an MMA, so its ldmatrix reads are done:
        // hand the stage back (mbarrier.arrive releases this warp's earlier shared-memory reads).
        __syncwarp();
        if (lane == 0) mbar_arrive(empty(kt));
    }
    mm_store<E>(acc, C, M, N, ldc, m0, n0, wm, wn);
}

// A and B are not read here (the tensor maps address them); they are parameters so that a launch
// orders their buffers like any other kernel argument.
// (A lab file: gen-ptx never reads it, so the entry points can come from a macro.)
#define MT_ENTRY(name, T, E, TA, TB)                                                                  \
    extern "C" __global__ void __launch_bounds__(MT_THREADS, 1)                                       \
        name(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,            \
             const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N, int K, \
             int ldc) {                                                                               \
        gemm_mma_tma<E, TA, TB>(&tmA, &tmB, C, M, N, K, ldc);                                        \
    }
MT_ENTRY(gemm_mma_tma_bf16_nn, bf16_t, MmBF16, false, false)
MT_ENTRY(gemm_mma_tma_bf16_nt, bf16_t, MmBF16, false, true)
MT_ENTRY(gemm_mma_tma_bf16_tn, bf16_t, MmBF16, true, false)
MT_ENTRY(gemm_mma_tma_bf16_tt, bf16_t, MmBF16, true, true)
MT_ENTRY(gemm_mma_tma_f16_nn, f16_t, MmF16, false, false)
MT_ENTRY(gemm_mma_tma_f16_nt, f16_t, MmF16, false, true)
MT_ENTRY(gemm_mma_tma_f16_tn, f16_t, MmF16, true, false)
MT_ENTRY(gemm_mma_tma_f16_tt, f16_t, MmF16, true, true)
