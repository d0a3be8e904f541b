// gemm_wgmma_tiles.cu — the shape-specialised Hopper GEMMs of ops::gemm_half (issue 34): the same
// TMA + wgmma design as gemm_wgmma.cu, with other tile shapes, persistent blocks and split-K.
//
// gen-ptx: archs=90a
//
// gemm_wgmma.cu's kernel (128 x 256 tiles, one block per tile) is fast where there are many
// tiles and a long K. Elsewhere (kernels/TUNING.md, "Half-precision GEMM at every shape"):
//   * a skinny M or N (1..64) with a large K * N gives 16-32 blocks for 132 SMs, each streaming
//     its slab of the big operand: bandwidth-bound, at the rate of the few SMs that read;
//   * a small K (16..256) with a large M * N is bound by writing C; one block per tile pays a
//     pipeline fill per tile and its epilogue overlaps nothing;
//   * a large K with a small M * N has a handful of tiles;
//   * mid shapes (~1000^3) have 32 tiles of 128 x 256 for 132 SMs.
// These kernels answer all four with four changes:
//   1. Tile shapes BM x BN = 128 x 256, 128 x 192, 128 x 128, 64 x 128 (one consumer warpgroup,
//      m64n128), 128 x 64 (m64n64) and 64 x 64 (one consumer, m64n64): a skinny operand no longer
//      pads a 256-wide or 128-tall tile, and 128 x 192 evens out the waves where 128 x 256 and
//      128 x 128 leave the last one mostly idle.
//   2. Persistent blocks: grid = min(units, SMs); block b walks units b, b + grid, ... The
//      producer warpgroup runs ahead across unit boundaries (the stage ring and its phases carry
//      on), so the next unit's loads overlap this unit's epilogue.
//   3. C leaves through shared memory: each consumer rounds its fragment into a 64 x BN buffer,
//      then writes whole rows, 16 bytes per thread (wgx_store_c_staged), instead of 4-byte stores
//      that write every 32-byte sector of C in two halves.
//   4. Split-K: a unit is (tile, k slice z). With splits > 1 each unit writes its f32 partial
//      tile to slab z of a workspace [splits][M][N]; gemm_wgx_reduce_* then adds the slabs in a
//      fixed order (consecutive slabs in groups, groups in order) and rounds once
//      (deterministic: no atomics, an order fixed by splits). One launch instead (each tile's
//      last unit adding the slabs, found by a counter) was measured 1.7-3.4x slower on an H200:
//      one SM's loads in flight cannot read a few hundred KB at the rate of the reduce's whole
//      grid (kernels/TUNING.md).
//
// Units are numbered u = z * tiles + t (the tiles of one k slice run together and share their
// operand slabs in L2); tile t walks GROUP_M tile rows column by column, as gemm_wgmma.cu does.
//
// Layouts as in gemm_wgmma.cu (row-major; nn: A [M, K] K-major, B [K, N] N-major; nt: B stored
// [N, K] K-major; tn: A stored [K, M] M-major; tt: both transposed). f32 accumulation; with one
// slice each output is rounded once at the store; with several, slices are summed in f32 in
// slice order, then rounded once.
//
// Host contract (ops/gemm_tc.rs checks it before every launch):
//   * block 128 * (1 + BM / 64) threads exactly (384, or 256 for BM = 64), 1-D grid of at most
//     `units` = ceil(M / BM) * ceil(N / BN) * splits blocks, dynamic shared memory
//     GemmWgx<..>::SMEM bytes (the function's limit raised first);
//   * tmA / tmB encoded as for gemm_wgmma.cu with these boxes (128-byte swizzle, zero OOB fill):
//       K-major A : dims {K, M}, box {64, BM};   M-major A : dims {M, K}, box {64, 64}
//       K-major B : dims {K, N}, box {64, BN};   N-major B : dims {N, K}, box {64, 64}
//     (A and B are passed only so the launch orders their buffers);
//   * gemm_wgx_reduce_*: block (BX, ZL), BX a multiple of 32, BX * ZL <= 1024, any 1-D grid;
//   * every entry runs griddep_wait first (before any global access), so the host may launch
//     each with a programmatic dependency on the kernel before it (and does);
//   * M, N, K >= 1; kt_per >= 1 k tiles of 64 per slice and splits = ceil(ceil(K / 64) / kt_per)
//     (every slice holds at least one k tile);
//   * out: C (element type T, [M, N] with row stride ldc) when splits == 1, else the f32
//     workspace of splits * M * N floats (row stride N), 4-byte aligned;
//   * gemm_wgx_128x64x2_* (clusters of two, compiled in): the grid is even, at most
//     2 * ceil(M / 128) * ceil(ceil(N / 64) / 2) * splits blocks, and a K-major A's map has a box
//     of {64, 64} (each CTA loads half of the A tile), the rest as for 128 x 64.
#include "dtype.cuh"
#include "grid_dependency.cuh"
#include "shared_address.cuh"
#include "tma.cuh"
#include "wgmma_ops.cuh"
#include "wgmma_store.cuh"

// GWX_DESC_ADD: each k step's wgmma descriptors by one add to the stage's (wgx_desc_add), as the
// attention kernels do since sessions 63-64, instead of from the address (48 instructions a k
// tile instead of 69 in the 128 x 128 nn kernel, ptxas 13.0). 0 (shipped): none; 1: every tile;
// 2: every tile but 128 x 256. Measured (kernels/TUNING.md, sessions 65-66, H200, CUDA-graph
// replays against cuBLAS in the same process, ptxas 13.0): the small tiles, whose m64n64 /
// m64n128 steps are 32-64 tensor cycles against the 20-40 instructions between them, 1-3% faster
// (1024^2 x 8192, 1000^3, 512^2 x 16384, 256^2 x 65536); 128 x 256 at 4096^3 1.5-2% slower.
// 2 is the candidate to ship, not yet run through the library's own (NVRTC 12.4) cubins.
#ifndef GWX_DESC_ADD
#define GWX_DESC_ADD 0
#endif
#define WGX_DESC_ADD(BN) (GWX_DESC_ADD == 1 || (GWX_DESC_ADD == 2 && (BN) != 256))

#define WGX_ROW_BYTES 128  // every tile row (K-major) or 64-wide strip row (M/N-major) is 128 bytes
#define WGX_BK 64          // k per stage (128 bytes of 16-bit elements)
#define WGX_GROUP_M 8      // tile rows walked together (L2 reuse of B)

// A tile shape: BM x BN outputs per unit, STAGES shared-memory stages (each (BM + BN) x 128 bytes),
// and per consumer an epilogue buffer of 64 rows x BN 16-bit results (rows padded by 16 bytes:
// the fragment stores hit 32 distinct banks). Shared memory, in order: the stages (1 KB aligned),
// the epilogue buffers, the mbarriers; as many stages as fit in 227 KB.
template <int BM_, int BN_, int STAGES_>
struct GemmWgx {
    enum {
        BM = BM_,
        BN = BN_,
        STAGES = STAGES_,
        CONSUMERS = BM_ / 64,
        THREADS = 128 * (1 + BM_ / 64),
        A_BYTES = BM_ * WGX_ROW_BYTES,
        B_BYTES = BN_ * WGX_ROW_BYTES,
        STAGE_BYTES = (BM_ + BN_) * WGX_ROW_BYTES,
        EPI_PITCH = BN_ * 2 + 16,        // bytes per row of an epilogue buffer
        EPI_BYTES = 64 * (BN_ * 2 + 16),  // one consumer's epilogue buffer
        SMEM = STAGES_ * (BM_ + BN_) * WGX_ROW_BYTES + (BM_ / 64) * 64 * (BN_ * 2 + 16) + 1024 + 2 * STAGES_ * 8,
        ACC = BN_ / 2,  // f32 accumulators per consumer thread
    };
};
typedef GemmWgx<128, 256, 3> Wgx128x256;
typedef GemmWgx<128, 192, 4> Wgx128x192;
typedef GemmWgx<128, 128, 5> Wgx128x128;
typedef GemmWgx<64, 128, 8> Wgx64x128;
typedef GemmWgx<128, 64, 8> Wgx128x64;
typedef GemmWgx<64, 64, 8> Wgx64x64;

// Where unit u lies: output tile origin (m0, n0), k slice z and its k tiles [kt0, kt1).
struct WgxUnit {
    int m0, n0, z, kt0, kt1;
};

// With clusters of CL CTAs along N, a unit is CL adjacent tiles of one tile row and CTA `rank`
// takes tile column CL * c + rank (past the last column when tiles_n is not a multiple of CL: that
// CTA loads zeros and stores nothing).
template <class G, int CL>
__device__ __forceinline__ WgxUnit wgx_unit(int u, int tiles_m, int tiles_n, int ktiles, int kt_per, unsigned rank) {
    const int cols = (tiles_n + CL - 1) / CL;
    const int tiles = tiles_m * cols;
    const int z = u / tiles, t = u % tiles;
    const int per_group = WGX_GROUP_M * cols;
    const int group = t / per_group;
    const int first_m = group * WGX_GROUP_M;
    const int rows_here = min(tiles_m - first_m, WGX_GROUP_M);
    const int in_group = t % per_group;
    WgxUnit w;
    w.m0 = (first_m + in_group % rows_here) * G::BM;
    w.n0 = ((in_group / rows_here) * CL + (int)rank) * G::BN;
    w.z = z;
    w.kt0 = z * kt_per;
    w.kt1 = min(w.kt0 + kt_per, ktiles);
    return w;
}

// Rounded stores of one or two adjacent results.
template <class E>
struct WgxStore;
template <>
struct WgxStore<WgxBF16> {
    static __device__ __forceinline__ void two(bf16_t* c, float a, float b) {
        unsigned v;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(v) : "f"(b), "f"(a));  // a in the low half
        *reinterpret_cast<unsigned*>(c) = v;
    }
    static __device__ __forceinline__ void one(bf16_t* c, float a) { *c = f32_to_bf16(a); }
};
template <>
struct WgxStore<WgxF16> {
    static __device__ __forceinline__ void two(f16_t* c, float a, float b) {
        unsigned v;
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(v) : "f"(b), "f"(a));
        *reinterpret_cast<unsigned*>(c) = v;
    }
    static __device__ __forceinline__ void one(f16_t* c, float a) { *c = f32_to_f16(a); }
};

// The same accumulators, unrounded, to a dense f32 slab W [M, N] (8-byte stores when N is even).
template <int ACC>
__device__ __forceinline__ void wgx_store_slab(const float (&d)[ACC], float* __restrict__ W, int M, int N, int row0,
                                               int col0) {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
    const int r = row0 + 16 * warp + lane / 4;
    const int cb = col0 + 2 * (lane % 4);
    const bool pairs = (N % 2 == 0);
#pragma unroll
    for (int i = 0; i < ACC / 4; ++i) {
        const int col = cb + 8 * i;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = r + 8 * h;
            if (row < M && col < N) {
                float* p = W + (long long)row * N + col;
                if (pairs) {
                    *reinterpret_cast<float2*>(p) = make_float2(d[4 * i + 2 * h], d[4 * i + 2 * h + 1]);
                } else {
                    p[0] = d[4 * i + 2 * h];
                    if (col + 1 < N) p[1] = d[4 * i + 2 * h + 1];
                }
            }
        }
    }
}

// CL = 2: clusters of two CTAs on horizontally adjacent tiles (same m0) share A: each loads half
// of the A tile (64 rows) by TMA multicast into both CTAs' stage, and a stage is refilled only
// once the consumers of both CTAs have released it (each consumer warp arrives on both CTAs'
// `empty` barrier). The L2 -> SM bytes per k tile of a 128 x 64 unit fall from 24 KB to 16 KB.
template <class E, class G, int TA, int TB, int CL = 1>
__device__ __forceinline__ void gemm_wgx(const TensorMap* tmA, const TensorMap* tmB, unsigned char* __restrict__ out,
                                         int M, int N, int K, int ldc, int splits, int kt_per) {
    static_assert(CL == 1 || (CL == 2 && G::BM == 128), "clusters: two CTAs of 128-row tiles");
    extern __shared__ unsigned char wgx_smem[];
    const unsigned base = (smem_u32(wgx_smem) + 1023u) & ~1023u;  // 128-byte swizzle: 1 KB aligned tiles
    const unsigned epi = base + G::STAGES * G::STAGE_BYTES;  // the consumers' epilogue buffers
    const unsigned bars = epi + G::CONSUMERS * G::EPI_BYTES;
    // full[s] = bars + 8 s (the producer's expect_tx + the copies' bytes); empty[s] =
    // bars + 8 (STAGES + s) (one arrival per consumer warp once its wgmmas have read the stage).
    const int tiles_m = (M + G::BM - 1) / G::BM, tiles_n = (N + G::BN - 1) / G::BN;
    const int ktiles = (K + WGX_BK - 1) / WGX_BK;
    const int units = tiles_m * ((tiles_n + CL - 1) / CL) * splits;
    // Cluster c (blocks CL c .. CL c + CL - 1) walks units c, c + clusters, ...
    unsigned rank = 0;
    if constexpr (CL > 1) rank = cluster_ctarank();
    const int first_unit = blockIdx.x / CL, unit_step = gridDim.x / CL;

    if (threadIdx.x == 0) {
        for (int s = 0; s < G::STAGES; ++s) {
            mbar_init(bars + 8 * s, 1);
            mbar_init(bars + 8 * (G::STAGES + s), 4 * G::CONSUMERS * CL);
        }
        mbar_init_fence();
    }
    if constexpr (CL > 1) {
        cluster_sync_all();
    } else {
        __syncthreads();
    }
    // The host may launch these with a programmatic dependency: nothing above touches global
    // memory (the barriers are in shared memory), so the set-up overlaps the previous kernel's
    // tail; A and B are read, and C or the workspace written, only after the wait.
    griddep_wait();

    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        // Producer: one thread drives the copy engine through every unit of this block.
        if (G::CONSUMERS == 2) asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (threadIdx.x == 0) {
            int it = 0;  // k tiles issued by this block so far (stage it % STAGES)
            for (int u = first_unit; u < units; u += unit_step) {
                const WgxUnit w = wgx_unit<G, CL>(u, tiles_m, tiles_n, ktiles, kt_per, rank);
                for (int kt = w.kt0; kt < w.kt1; ++kt, ++it) {
                    const int s = it % G::STAGES;
                    if (it >= G::STAGES) mbar_wait(bars + 8 * (G::STAGES + s), ((it / G::STAGES) & 1) ^ 1);
                    const unsigned full = bars + 8 * s;
                    mbar_expect_tx(full, G::STAGE_BYTES);
                    const unsigned sa = base + s * G::STAGE_BYTES, sb = sa + G::A_BYTES;
                    const int k0 = kt * WGX_BK;
                    if constexpr (CL > 1) {
                        // Rows 64 rank .. + 63 of the A tile, into both CTAs (tmA's box is 64
                        // rows for K-major A; M-major A is loaded as 64-row boxes anyway).
                        const unsigned half = sa + rank * 64 * WGX_ROW_BYTES;
                        if (TA) {
                            tma_load_2d_multicast(half, tmA, w.m0 + 64 * (int)rank, k0, full, 3);
                        } else {
                            tma_load_2d_multicast(half, tmA, k0, w.m0 + 64 * (int)rank, full, 3);
                        }
                    } else if (TA) {
#pragma unroll
                        for (int j = 0; j < G::BM / 64; ++j)
                            tma_load_2d(sa + j * 64 * WGX_ROW_BYTES, tmA, w.m0 + 64 * j, k0, full);
                    } else {
                        tma_load_2d(sa, tmA, k0, w.m0, full);
                    }
                    if (TB) {
#pragma unroll
                        for (int j = 0; j < G::BN / 64; ++j)
                            tma_load_2d(sb + j * 64 * WGX_ROW_BYTES, tmB, w.n0 + 64 * j, k0, full);
                    } else {
                        tma_load_2d(sb, tmB, k0, w.n0, full);
                    }
                }
            }
        }
    } else {
        if (G::CONSUMERS == 2) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        const int c = wg - 1;  // consumer c owns rows m0 + 64 c .. + 63 of each unit's tile
        // Byte offsets of one k step (16) inside a stage: K-major rows advance 32 bytes; M/N-major
        // strips advance 16 k rows of 128 bytes. M/N-major atoms of 64 columns are 64 rows apart
        // (the leading byte offset); 8-row groups are 1 KB apart (the stride byte offset).
        const unsigned a_step = TA ? 16 * WGX_ROW_BYTES : 32, b_step = TB ? 16 * WGX_ROW_BYTES : 32;
        const unsigned lbo = 64 * WGX_ROW_BYTES, sbo = 8 * WGX_ROW_BYTES;
        // Zeroed once, before any wgmma: left undefined, ptxas's allocation across the unit loop
        // made it serialise the wgmmas (C7515). Each unit's first wgmma overwrites them (scale-d =
        // 0); every slice holds at least one k tile (host contract).
        float d[G::ACC];
#pragma unroll
        for (int i = 0; i < G::ACC; ++i) d[i] = 0.0f;
        int it = 0;
        for (int u = first_unit; u < units; u += unit_step) {
            const WgxUnit w = wgx_unit<G, CL>(u, tiles_m, tiles_n, ktiles, kt_per, rank);
            // A consumer whose 64 rows all lie past M (M <= 64 under a 128-row tile: 64^2 x
            // 131072's units) multiplies nothing and stores nothing; it still waits for each
            // stage and hands it back, so the ring's phases stay in step.
            // (Not for the 128 x 256 tile: the branch changed the main loop's code of the large
            // squares' kernel; at M <= 64 that tile's idle consumer multiplies zeros, as before.)
            const bool rows_here = G::BN == 256 || w.m0 + 64 * c < M;
            // do-while: a k loop the compiler must consider empty made ptxas serialise the
            // wgmmas of the bf16 kernels (C7514, the epilogue's reads).
            int kt = w.kt0;
            do {
                const int s = it % G::STAGES;
                mbar_wait(bars + 8 * s, (it / G::STAGES) & 1);
                if (rows_here) {
                    const unsigned sa = base + s * G::STAGE_BYTES + c * 64 * WGX_ROW_BYTES;
                    const unsigned sb = base + s * G::STAGE_BYTES + G::A_BYTES;
                    wgx_fence();
                    if constexpr (WGX_DESC_ADD(G::BN)) {
                        const unsigned long long da = wgx_desc(sa, TA ? lbo : 16, sbo);
                        const unsigned long long db = wgx_desc(sb, TB ? lbo : 16, sbo);
#pragma unroll
                        for (int kk = 0; kk < WGX_BK / 16; ++kk)
                            WgxMma<E, G::BN, TA, TB>::run(d, wgx_desc_add(da, kk * a_step),
                                                          wgx_desc_add(db, kk * b_step), kt > w.kt0 || kk > 0);
                    } else {
#pragma unroll
                        for (int kk = 0; kk < WGX_BK / 16; ++kk) {
                            WgxMma<E, G::BN, TA, TB>::run(d, wgx_desc(sa + kk * a_step, TA ? lbo : 16, sbo),
                                                          wgx_desc(sb + kk * b_step, TB ? lbo : 16, sbo),
                                                          kt > w.kt0 || kk > 0);
                        }
                    }
                    wgx_commit();
                    // All of this stage's multiplies done before it is handed back (wait_group 1
                    // across k tiles makes ptxas serialise the wgmmas: C7515, as in gemm_wgmma.cu).
                    wgx_wait0();
                }
                if (threadIdx.x % 32 == 0) {
                    if constexpr (CL > 1) {
#pragma unroll
                        for (int p = 0; p < CL; ++p) mbar_arrive_cluster(bars + 8 * (G::STAGES + s), p);
                    } else {
                        mbar_arrive(bars + 8 * (G::STAGES + s));
                    }
                }
                ++it;
            } while (++kt < w.kt1);
            // The next kernel (a split's reduce, or whatever follows) may be scheduled once
            // every block is in its last epilogue: not earlier, so that a reduce's blocks, which
            // can only wait for this grid, are not placed beside the main loop.
            if (u + unit_step >= units) griddep_launch_dependents();
            if (!rows_here) continue;
            wgx_fence_acc(d);
            if (splits == 1) {
                unsigned char* buf = wgx_smem + (epi - smem_u32(wgx_smem)) + c * G::EPI_BYTES;
                wgx_store_c_staged<E, G::BN>(d, buf, reinterpret_cast<typename E::T*>(out), M, N, ldc, w.m0 + 64 * c,
                                             w.n0, 1 + c);
            } else {
                float* W = reinterpret_cast<float*>(out) + (long long)w.z * M * N;
                wgx_store_slab(d, W, M, N, w.m0 + 64 * c, w.n0);
            }
        }
    }
    // No CTA leaves while its peer may still multicast into it or arrive on its barriers.
    if constexpr (CL > 1) cluster_sync_all();
}

// The sum of slabs [z0, z1) of ws at element e (V: float2 for pairs of columns, else float),
// added in order z0, z0 + 1, ..; 8 slabs' loads in flight at a time (the same sums as one at a
// time: with few outputs and many slabs the chain of dependent loads was the reduce's time).
__device__ __forceinline__ void wgx_add(float& a, float b) { a += b; }
__device__ __forceinline__ void wgx_add(float2& a, float2 b) {
    a.x += b.x;
    a.y += b.y;
}
template <class V>
__device__ __forceinline__ V wgx_slab_sum(const float* __restrict__ ws, u64 slab, u64 e, int z0, int z1) {
    // slab is a multiple of the vector width when V is float2 (N even).
    const V* w = reinterpret_cast<const V*>(ws);
    const u64 stride = slab * sizeof(float) / sizeof(V);
    V acc = w[(u64)z0 * stride + e];
    int z = z0 + 1;
    for (; z + 8 <= z1; z += 8) {
        V v[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = w[(u64)(z + j) * stride + e];
#pragma unroll
        for (int j = 0; j < 8; ++j) wgx_add(acc, v[j]);
    }
    for (; z < z1; ++z) wgx_add(acc, w[(u64)z * stride + e]);
    return acc;
}

// C[i ldc + j] = round(sum over the slabs z = 0 .. splits - 1 of ws[z][i][j]), in a fixed order:
// the slabs fall into blockDim.y groups of ceil(splits / blockDim.y) consecutive slabs; thread
// row y adds group y's slabs in order, then row 0 adds the groups' sums in order y = 0, 1, ...
// (one group: the plain ordered sum). The order depends on splits and blockDim.y only, which the
// host derives from splits: deterministic for a given plan. A few outputs over many slabs (64^2 x
// 131072 in 128 slices) now spread over blockDim.y times the threads, each with one round of
// loads in flight.
// Block (BX, ZL) with BX * ZL <= 1024 and BX a multiple of 32; any 1-D grid (grid-stride over
// blocks of BX elements); each element is a pair of columns when N is even.
template <class E>
__device__ __forceinline__ void gemm_wgx_reduce(const float* __restrict__ ws, int splits, int M, int N,
                                                typename E::T* __restrict__ C, int ldc) {
    __shared__ float2 part[1024];
    // Launched with a programmatic dependency on the product that wrote ws (see gemm_wgx).
    griddep_wait();
    griddep_launch_dependents();
    const u64 slab = (u64)M * (u64)N;
    typedef typename E::T T;
    const bool pairs = (N % 2 == 0) && (ldc % 2 == 0) && ((((u64)C) & (2 * sizeof(T) - 1)) == 0);
    const int bx = blockDim.x, zl = blockDim.y, x = threadIdx.x, y = threadIdx.y;
    const int per = (splits + zl - 1) / zl;
    const int z0 = y * per, z1 = min(z0 + per, splits);
    const u64 total = pairs ? slab / 2 : slab;
    // The loop bounds are the block's, so every thread reaches each __syncthreads.
    for (u64 first = (u64)blockIdx.x * bx; first < total; first += (u64)gridDim.x * bx) {
        const u64 e = first + x;
        if (e < total && z0 < z1) {
            if (pairs) {
                part[y * bx + x] = wgx_slab_sum<float2>(ws, slab, e, z0, z1);
            } else {
                part[y * bx + x].x = wgx_slab_sum<float>(ws, slab, e, z0, z1);
            }
        }
        if (zl > 1) __syncthreads();
        if (y == 0 && e < total) {
            float2 acc = part[x];
            for (int g = 1; g < zl && g * per < splits; ++g) wgx_add(acc, part[g * bx + x]);
            if (pairs) {
                const u64 i = (2 * e) / (u64)N, j = (2 * e) % (u64)N;
                WgxStore<E>::two(C + i * (u64)ldc + j, acc.x, acc.y);
            } else {
                const u64 i = e / (u64)N, j = e % (u64)N;
                WgxStore<E>::one(C + i * (u64)ldc + j, acc.x);
            }
        }
        if (zl > 1) __syncthreads();
    }
}

extern "C" __global__ void gemm_wgx_reduce_bf16(const float* __restrict__ ws, int splits, int M, int N,
                                                bf16_t* __restrict__ C, int ldc) {
    gemm_wgx_reduce<WgxBF16>(ws, splits, M, N, C, ldc);
}
extern "C" __global__ void gemm_wgx_reduce_f16(const float* __restrict__ ws, int splits, int M, int N,
                                               f16_t* __restrict__ C, int ldc) {
    gemm_wgx_reduce<WgxF16>(ws, splits, M, N, C, ldc);
}

// The entries: gemm_wgx_<BM>x<BN>_<dtype>_<layout>. A and B are not read here (the tensor maps
// address them); they are parameters so that a launch orders their buffers like any other.
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x256_bf16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x256, 0, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x256_bf16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x256, 0, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x256_bf16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x256, 1, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x256_bf16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x256, 1, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x256_f16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x256, 0, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x256_f16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x256, 0, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x256_f16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x256, 1, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x256_f16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x256, 1, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x128_bf16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x128, 0, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x128_bf16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x128, 0, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x128_bf16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x128, 1, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x128_bf16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x128, 1, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x128_f16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x128, 0, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x128_f16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x128, 0, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x128_f16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x128, 1, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x128_f16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x128, 1, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x128_bf16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx64x128, 0, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x128_bf16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx64x128, 0, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x128_bf16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx64x128, 1, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x128_bf16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx64x128, 1, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x128_f16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx64x128, 0, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x128_f16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx64x128, 0, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x128_f16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx64x128, 1, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x128_f16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx64x128, 1, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x64_bf16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x64, 0, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x64_bf16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x64, 0, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x64_bf16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x64, 1, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x64_bf16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x64, 1, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x64_f16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x64, 0, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x64_f16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x64, 0, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x64_f16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x64, 1, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x64_f16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x64, 1, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}

extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x64_bf16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx64x64, 0, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x64_bf16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx64x64, 0, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x64_bf16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx64x64, 1, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x64_bf16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx64x64, 1, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x64_f16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx64x64, 0, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x64_f16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx64x64, 0, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x64_f16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx64x64, 1, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_wgx_64x64_f16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx64x64, 1, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}

// 128 x 192 tiles (m64n192 per consumer, 4 stages): a wave count the 128 x 256 and 128 x 128 tiles
// round badly (8192 x 768: 192 or 384 tiles for 132 SMs, 256 of 128 x 192).
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x192_bf16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x192, 0, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x192_bf16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x192, 0, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x192_bf16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x192, 1, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x192_bf16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x192, 1, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x192_f16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x192, 0, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x192_f16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x192, 0, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x192_f16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x192, 1, 1>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1)
    gemm_wgx_128x192_f16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x192, 1, 0>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
// 128 x 64 tiles in clusters of two along N sharing A (CL = 2): one unit per cluster, grid even.
extern "C" __global__ void __launch_bounds__(384, 1) __cluster_dims__(2, 1, 1)
    gemm_wgx_128x64x2_bf16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x64, 0, 1, 2>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1) __cluster_dims__(2, 1, 1)
    gemm_wgx_128x64x2_bf16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x64, 0, 0, 2>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1) __cluster_dims__(2, 1, 1)
    gemm_wgx_128x64x2_bf16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x64, 1, 1, 2>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1) __cluster_dims__(2, 1, 1)
    gemm_wgx_128x64x2_bf16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxBF16, Wgx128x64, 1, 0, 2>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1) __cluster_dims__(2, 1, 1)
    gemm_wgx_128x64x2_f16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x64, 0, 1, 2>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1) __cluster_dims__(2, 1, 1)
    gemm_wgx_128x64x2_f16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x64, 0, 0, 2>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1) __cluster_dims__(2, 1, 1)
    gemm_wgx_128x64x2_f16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x64, 1, 1, 2>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
extern "C" __global__ void __launch_bounds__(384, 1) __cluster_dims__(2, 1, 1)
    gemm_wgx_128x64x2_f16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
        const f16_t* __restrict__ A, const f16_t* __restrict__ B, unsigned char* __restrict__ out, int M, int N,
        int K, int ldc, int splits, int kt_per) {
    gemm_wgx<WgxF16, Wgx128x64, 1, 0, 2>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);
}
