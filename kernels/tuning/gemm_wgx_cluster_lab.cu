// gemm_wgx_cluster_lab.cu — issue 34 items 1 and 2 (half-precision GEMM at every shape; wgmma bf16
// >= 1.0x cuBLAS at 4096^3 and 8192^3): the library's persistent Hopper GEMMs beside candidates,
// and cuBLAS, in one process (kernels/TUNING.md, session 48).
//
// Candidates (gemm_wgxc<E, TA, TB, CL, PIPE, ST, STAGED, BN, CA>, below): gemm_wgx's persistent
// 128 x BN kernel (1 producer + 2 consumer warpgroups, an ST-stage TMA ring, C through shared
// memory) with
//   CL = 2:   clusters of two CTAs. CA = 0: vertically adjacent tiles (same n0), each CTA loading
//             its own A and half of the shared B tile by TMA multicast into both CTAs' stages;
//             CA = 1: horizontally adjacent tiles sharing A the same way (what the library's
//             gemm_wgx_128x64x2_* became). A stage is refilled only when the consumers of both
//             CTAs have released it (each consumer warp arrives on both CTAs' empty barrier).
//   PIPE = 1, 2: the consumers keep one (two) k tiles of wgmmas in flight (wait_group PIPE) and
//             hand back the stage PIPE k tiles back, instead of waiting for each k tile's products
//             (wait_group 0).
//   STAGED = 0: C from the fragment (4 stages fit without the epilogue buffers).
//   DA = 1:   each k step's wgmma descriptors by one add to the stage's (GWX_DESC_ADD's form).
// The library's kernels (gemm_wgmma_bf16_*, gemm_wgx_*_bf16_*) are compiled in from kernels/cuda.
// cuBLAS (cublasGemmEx, bf16, f32 compute, default algorithm) is loaded at run time from
// $CUBLAS_LIB. Every kernel's output is compared with cuBLAS's first (max |ours - cublas| / max
// |cublas|); then each side's LAB_REPS calls are captured in a CUDA graph and replayed, the sides
// in alternation, LAB_ROUNDS times (LAB_GRAPH=0: launched from the host instead). LAB_SMALL=1:
// the 128 x 64 / 128 x 128 / 128 x 256 tiles and their pairs at mid shapes (nn); LAB_NO_CL=1:
// no cluster candidates.
//
// Build (nvcc 12.4+; no libcuda needed at link time: the tensor-map encoder comes from
// cudaGetDriverEntryPoint):
//   nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o gemm_wgx_cluster_lab \
//        kernels/tuning/gemm_wgx_cluster_lab.cu -ldl
// Run:  CUBLAS_LIB=/path/libcublas.so.13 ./gemm_wgx_cluster_lab [M N K layout]...   (layout nn|nt)
#include <cuda_runtime.h>
#include <cuda.h>
#include <dlfcn.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../cuda/gemm_wgmma.cu"
#include "../cuda/gemm_wgmma_tiles.cu"

// ---- cluster helpers (tma.cuh's, which the library's pair tile uses; LAB_PLAIN=0 swaps in the
// fenced cluster-scope arrive and wait that the first cluster build measured) ----------------------

template <int CL>
__device__ __forceinline__ unsigned lab_cluster_rank() {
    return CL == 1 ? 0 : cluster_ctarank();
}
// LAB_PLAIN = 1 (default): the arrive and the producer's wait with their default semantics
// (release / acquire at CTA scope; the stage's reads were wgmma's, complete at wait_group); 0:
// release.cluster / acquire.cluster: a MEMBAR.ALL.GPU before every arrive, a CCTL.IVALL after
// every wait.
#ifndef LAB_PLAIN
#define LAB_PLAIN 1
#endif
#if LAB_PLAIN
__device__ __forceinline__ void lab_arrive_cluster(unsigned bar, unsigned cta) { mbar_arrive_cluster(bar, cta); }
__device__ __forceinline__ void lab_wait_cluster(unsigned bar, unsigned parity) { mbar_wait(bar, parity); }
#else
__device__ __forceinline__ void lab_arrive_cluster(unsigned bar, unsigned cta) {
    asm volatile(
        "{ .reg .b32 ra; mapa.shared::cluster.u32 ra, %0, %1;\n"
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra]; }" ::"r"(bar),
        "r"(cta)
        : "memory");
}
__device__ __forceinline__ void lab_wait_cluster(unsigned bar, unsigned parity) {
    asm volatile(
        "{ .reg .pred p;\n"
        "LAB_WAIT_CL:\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra LAB_WAIT_CL;\n"
        "}" ::"r"(bar),
        "r"(parity)
        : "memory");
}
#endif

// ---- the candidate --------------------------------------------------------------------------------

// wgmma.wait_group N: at most N committed groups of this warpgroup still in flight.
template <int N>
__device__ __forceinline__ void lab_wait_group() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// ST stages; STAGED = 1: C through shared memory (wgmma_store.cuh), 0: from the fragment
// (gemm_wgmma.cu's wg_epilogue), which frees the epilogue buffers for a 4th stage.
// Where cluster unit u puts this CTA: CA = 0 (clusters along M, sharing B): rows of CL tiles;
// CA = 1 (along N, sharing A): columns of CL tiles. Tile rows are walked `group` at a time.
template <int CL, int CA>
__device__ __forceinline__ void lab_unit(int u, int tiles_m, int tiles_n, int group, unsigned rank, int bm, int bn,
                                         int& m0, int& n0) {
    const int rows = CA == 0 ? (tiles_m + CL - 1) / CL : tiles_m;
    const int cols = CA == 1 ? (tiles_n + CL - 1) / CL : tiles_n;
    const int group_rows = max(CA == 0 ? group / CL : group, 1);
    const int per_group = group_rows * cols, g = u / per_group;
    const int first = g * group_rows, here = min(rows - first, group_rows), in = u % per_group;
    const int r = first + in % here, c = in / here;
    m0 = (CA == 0 ? r * CL + (int)rank : r) * bm;
    n0 = (CA == 1 ? c * CL + (int)rank : c) * bn;
}

template <class E, int TA, int TB, int CL, int PIPE, int ST = 3, int STAGED = 1, int BN = 256, int CA = 0,
          int DA = 0>
__device__ __forceinline__ void gemm_wgxc(const TensorMap* tmA, const TensorMap* tmB, typename E::T* __restrict__ C,
                                          int M, int N, int K, int ldc, int group) {
    typedef GemmWgx<128, BN, ST> G;
    extern __shared__ unsigned char lab_smem[];
    const unsigned base = (smem_u32(lab_smem) + 1023u) & ~1023u;
    const unsigned epi = base + G::STAGES * G::STAGE_BYTES;
    const unsigned bars = epi + STAGED * G::CONSUMERS * G::EPI_BYTES;
    const unsigned rank = lab_cluster_rank<CL>();
    const int tiles_m = (M + G::BM - 1) / G::BM, tiles_n = (N + G::BN - 1) / G::BN;
    const int units = (CA == 0 ? (tiles_m + CL - 1) / CL : tiles_m) * (CA == 1 ? (tiles_n + CL - 1) / CL : tiles_n);
    const int cid = blockIdx.x / CL, ncl = gridDim.x / CL;
    const int ktiles = (K + WGX_BK - 1) / WGX_BK;

    if (threadIdx.x == 0) {
        for (int s = 0; s < G::STAGES; ++s) {
            mbar_init(bars + 8 * s, 1);
            mbar_init(bars + 8 * (G::STAGES + s), 4 * G::CONSUMERS * CL);
        }
        mbar_init_fence();
    }
    if (CL > 1) cluster_sync_all(); else __syncthreads();

    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (threadIdx.x == 0) {
            int it = 0;
            for (int u = cid; u < units; u += ncl) {
                int m0, n0;
                lab_unit<CL, CA>(u, tiles_m, tiles_n, group, rank, G::BM, G::BN, m0, n0);
                for (int kt = 0; kt < ktiles; ++kt, ++it) {
                    const int s = it % G::STAGES;
                    if (it >= G::STAGES) {
                        if (CL > 1) lab_wait_cluster(bars + 8 * (G::STAGES + s), ((it / G::STAGES) & 1) ^ 1);
                        else mbar_wait(bars + 8 * (G::STAGES + s), ((it / G::STAGES) & 1) ^ 1);
                    }
                    const unsigned full = bars + 8 * s;
                    mbar_expect_tx(full, G::STAGE_BYTES);
                    const unsigned sa = base + s * G::STAGE_BYTES, sb = sa + G::A_BYTES;
                    const int k0 = kt * WGX_BK;
                    if constexpr (CL == 2 && CA == 1) {
                        // Half of A (64 rows; tmA's box is {64, 64}) each, multicast to both.
                        static_assert(TA == 0, "clusters along N: K-major A only");
                        tma_load_2d_multicast(sa + rank * 64 * WGX_ROW_BYTES, tmA, k0, m0 + 64 * (int)rank, full, 3);
                    } else if (TA) {
                        tma_load_2d(sa, tmA, m0, k0, full);
                        tma_load_2d(sa + 64 * WGX_ROW_BYTES, tmA, m0 + 64, k0, full);
                    } else {
                        tma_load_2d(sa, tmA, k0, m0, full);
                    }
                    if constexpr (CL == 1 || CA == 1) {
                        if (TB) {
#pragma unroll
                            for (int j = 0; j < BN / 64; ++j)
                                tma_load_2d(sb + j * 64 * WGX_ROW_BYTES, tmB, n0 + 64 * j, k0, full);
                        } else {
                            tma_load_2d(sb, tmB, k0, n0, full);
                        }
                    } else {
                        static_assert(BN >= 128, "clusters along M: 128 x 128 or 128 x 256 tiles");
                        if (TB) {
#pragma unroll
                            for (int j = 0; j < BN / 128; ++j) {
                                const int jj = (BN / 128) * (int)rank + j;
                                tma_load_2d_multicast(sb + jj * 64 * WGX_ROW_BYTES, tmB, n0 + 64 * jj, k0, full, 3);
                            }
                        } else {
                            tma_load_2d_multicast(sb + rank * (BN / 2) * WGX_ROW_BYTES, tmB, k0, n0 + (BN / 2) * (int)rank, full, 3);
                        }
                    }
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        const int c = wg - 1;
        const unsigned a_step = TA ? 16 * WGX_ROW_BYTES : 32, b_step = TB ? 16 * WGX_ROW_BYTES : 32;
        const unsigned lbo = 64 * WGX_ROW_BYTES, sbo = 8 * WGX_ROW_BYTES;
        float d[G::ACC];
#pragma unroll
        for (int i = 0; i < G::ACC; ++i) d[i] = 0.0f;
        int it = 0;
        for (int u = cid; u < units; u += ncl) {
            int m0, n0;
            lab_unit<CL, CA>(u, tiles_m, tiles_n, group, rank, G::BM, G::BN, m0, n0);
            int kt = 0;
            do {
                const int s = it % G::STAGES;
                mbar_wait(bars + 8 * s, (it / G::STAGES) & 1);
                const unsigned sa = base + s * G::STAGE_BYTES + c * 64 * WGX_ROW_BYTES;
                const unsigned sb = base + s * G::STAGE_BYTES + G::A_BYTES;
                wgx_fence();
                if constexpr (DA) {
                    // Each k step's descriptors by one add to the stage's (GWX_DESC_ADD's form).
                    const unsigned long long da = wgx_desc(sa, TA ? lbo : 16, sbo);
                    const unsigned long long db = wgx_desc(sb, TB ? lbo : 16, sbo);
#pragma unroll
                    for (int kk = 0; kk < WGX_BK / 16; ++kk)
                        WgxMma<E, BN, TA, TB>::run(d, wgx_desc_add(da, kk * a_step), wgx_desc_add(db, kk * b_step),
                                                    kt > 0 || kk > 0);
                } else {
#pragma unroll
                    for (int kk = 0; kk < WGX_BK / 16; ++kk) {
                        WgxMma<E, BN, TA, TB>::run(d, wgx_desc(sa + kk * a_step, TA ? lbo : 16, sbo),
                                                    wgx_desc(sb + kk * b_step, TB ? lbo : 16, sbo), kt > 0 || kk > 0);
                    }
                }
                wgx_commit();
                int rel = s;
                if (PIPE) {
                    lab_wait_group<PIPE>();
                    rel = kt >= PIPE ? (it + G::STAGES - PIPE) % G::STAGES : -1;
                } else {
                    wgx_wait0();
                }
                if (rel >= 0 && threadIdx.x % 32 == 0) {
#pragma unroll
                    for (int p = 0; p < CL; ++p) {
                        if (CL > 1) lab_arrive_cluster(bars + 8 * (G::STAGES + rel), p);
                        else mbar_arrive(bars + 8 * (G::STAGES + rel));
                    }
                }
                ++it;
            } while (++kt < ktiles);
            if (PIPE) {
                wgx_wait0();
                // The stages of the last min(PIPE, ktiles) k tiles are still held.
                for (int j = 1; j <= PIPE && j <= ktiles; ++j) {
                    const int rel = (it - j) % G::STAGES;
                    if (threadIdx.x % 32 == 0) {
#pragma unroll
                        for (int p = 0; p < CL; ++p) {
                            if (CL > 1) lab_arrive_cluster(bars + 8 * (G::STAGES + rel), p);
                            else mbar_arrive(bars + 8 * (G::STAGES + rel));
                        }
                    }
                }
            }
            wgx_fence_acc(d);
            if constexpr (STAGED) {
                unsigned char* buf = lab_smem + (epi - smem_u32(lab_smem)) + c * G::EPI_BYTES;
                wgx_store_c_staged<E, BN>(d, buf, C, M, N, ldc, m0 + 64 * c, n0, 1 + c);
            } else {
                static_assert(BN == 256, "fragment stores: 128 x 256 tiles only");
                wg_epilogue<WgBF16>(d, C, M, N, ldc, m0 + 64 * c, n0);
            }
        }
    }
    // No CTA leaves while its peer may still multicast into it or arrive on its barriers.
    if (CL > 1) cluster_sync_all();
}

#define LAB_ENTRY(name, CLV, PIPEV, TA, TB, EXTRA, ...)                                                          \
    extern "C" __global__ void __launch_bounds__(384, 1) EXTRA name(const __grid_constant__ TensorMap tmA,        \
                                                                    const __grid_constant__ TensorMap tmB,        \
                                                                    bf16_t* __restrict__ C, int M, int N, int K, \
                                                                    int ldc, int group) {                        \
        gemm_wgxc<WgxBF16, TA, TB, CLV, PIPEV __VA_ARGS__>(&tmA, &tmB, C, M, N, K, ldc, group);                                     \
    }
LAB_ENTRY(c1p0_nn, 1, 0, 0, 1, )
LAB_ENTRY(c1p1_nn, 1, 1, 0, 1, )
LAB_ENTRY(c2p0_nn, 2, 0, 0, 1, __cluster_dims__(2, 1, 1))
LAB_ENTRY(c2p1_nn, 2, 1, 0, 1, __cluster_dims__(2, 1, 1))
LAB_ENTRY(c1p0_nt, 1, 0, 0, 0, )
LAB_ENTRY(c1p1_nt, 1, 1, 0, 0, )
LAB_ENTRY(c2p0_nt, 2, 0, 0, 0, __cluster_dims__(2, 1, 1))
LAB_ENTRY(c2p1_nt, 2, 1, 0, 0, __cluster_dims__(2, 1, 1))
LAB_ENTRY(s4d0_nn, 1, 0, 0, 1, , , 4, 0)
LAB_ENTRY(s4d1_nn, 1, 1, 0, 1, , , 4, 0)
LAB_ENTRY(s4d0_nt, 1, 0, 0, 0, , , 4, 0)
LAB_ENTRY(s4d1_nt, 1, 1, 0, 0, , , 4, 0)
// Smaller tiles (issue 34 item 1's mid shapes): 128 x 64 (8 stages) and 128 x 128 (5 stages), nn.
LAB_ENTRY(w64p0_nn, 1, 0, 0, 1, , , 8, 1, 64)
LAB_ENTRY(w64p1_nn, 1, 1, 0, 1, , , 8, 1, 64)
LAB_ENTRY(w128p0_nn, 1, 0, 0, 1, , , 5, 1, 128)
LAB_ENTRY(w128p1_nn, 1, 1, 0, 1, , , 5, 1, 128)
// Two k tiles' products in flight (PIPE = 2; session 66: the small tiles' tensor pipe is 46% busy
// where cuBLAS's same decomposition reaches 77%, kernels/TUNING.md).
LAB_ENTRY(w64p2_nn, 1, 2, 0, 1, , , 8, 1, 64)
LAB_ENTRY(w128p2_nn, 1, 2, 0, 1, , , 5, 1, 128)
// The same with each k step's descriptors by one add (DA = 1; GWX_DESC_ADD=2's form).
LAB_ENTRY(w64p0d_nn, 1, 0, 0, 1, , , 8, 1, 64, 0, 1)
LAB_ENTRY(w64p2d_nn, 1, 2, 0, 1, , , 8, 1, 64, 0, 1)
LAB_ENTRY(w128p2d_nn, 1, 2, 0, 1, , , 5, 1, 128, 0, 1)
// The same tiles in clusters of two: along N sharing A (CA = 1), along M sharing B (CA = 0).
LAB_ENTRY(w64cn_nn, 2, 0, 0, 1, __cluster_dims__(2, 1, 1), , 8, 1, 64, 1)
LAB_ENTRY(w128cn_nn, 2, 0, 0, 1, __cluster_dims__(2, 1, 1), , 5, 1, 128, 1)
LAB_ENTRY(w128cm_nn, 2, 0, 0, 1, __cluster_dims__(2, 1, 1), , 5, 1, 128, 0)
LAB_ENTRY(w256cn_nn, 2, 0, 0, 1, __cluster_dims__(2, 1, 1), , 3, 1, 256, 1)

// ---- host ------------------------------------------------------------------------------------------

#include "gemm_lab_host.cuh"

struct Variant {
    const char* name;
    const void* fn;
    int cl;       // cluster size (0: the library's non-persistent gemm_wgmma)
    int lib_wgx;  // 1: the library's gemm_wgx (its own signature)
    int group;    // candidates: tile rows walked together
    int smem;     // candidates: dynamic shared memory (0: gemm_wgx_128x256's)
    int bn = 256;  // tile columns
    int ca = 0;    // clusters: 0 along M (sharing B), 1 along N (sharing A)
    int maxcl = 0;  // clusters: how many fit at once (set at start)
};

int main(int argc, char** argv) {
    lab_host_init();
    int dev = 0, sms = 0;
    RK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaDeviceProp prop;
    RK(cudaGetDeviceProperties(&prop, dev));
    printf("device %s, %d SMs\n", prop.name, sms);

    struct Shape { int M, N, K; bool nt; };
    std::vector<Shape> shapes;
    for (int i = 1; i + 3 < argc; i += 4) shapes.push_back({atoi(argv[i]), atoi(argv[i + 1]), atoi(argv[i + 2]), !strcmp(argv[i + 3], "nt")});
    if (shapes.empty()) shapes = {{4096, 4096, 4096, false}, {8192, 8192, 8192, false}, {4096, 4096, 4096, true},
                                  {8192, 8192, 8192, true}, {6144, 6144, 6144, false}, {4096, 4104, 4096, false}};
    const int reps = getenv("LAB_REPS") ? atoi(getenv("LAB_REPS")) : 20;
    const int rounds = getenv("LAB_ROUNDS") ? atoi(getenv("LAB_ROUNDS")) : 5;

    const int wgx_smem = Wgx128x256::SMEM;
    const int S4D_SMEM = 4 * GemmWgx<128, 256, 4>::STAGE_BYTES + 1024 + 2 * 4 * 8;
    std::vector<Variant> vs_nn = {{"lib gemm_wgmma", (const void*)gemm_wgmma_bf16_nn, 0, 0, 0},
                                  {"lib wgx128x256", (const void*)gemm_wgx_128x256_bf16_nn, 1, 1, 0},
                                  {"c1p0 g8", (const void*)c1p0_nn, 1, 0, 8},
                                  {"c1p1 g8", (const void*)c1p1_nn, 1, 0, 8},
                                  {"c1p1 g16", (const void*)c1p1_nn, 1, 0, 16},
                                  {"c2p0 g8", (const void*)c2p0_nn, 2, 0, 8},
                                  {"c2p1 g8", (const void*)c2p1_nn, 2, 0, 8},
                                  {"c2p1 g16", (const void*)c2p1_nn, 2, 0, 16},
                                  {"s4 direct p0", (const void*)s4d0_nn, 1, 0, 8, S4D_SMEM},
                                  {"s4 direct p1", (const void*)s4d1_nn, 1, 0, 8, S4D_SMEM}};
    std::vector<Variant> vs_nt = {{"lib gemm_wgmma", (const void*)gemm_wgmma_bf16_nt, 0, 0, 0},
                                  {"lib wgx128x256", (const void*)gemm_wgx_128x256_bf16_nt, 1, 1, 0},
                                  {"c1p0 g8", (const void*)c1p0_nt, 1, 0, 8},
                                  {"c1p1 g8", (const void*)c1p1_nt, 1, 0, 8},
                                  {"c1p1 g16", (const void*)c1p1_nt, 1, 0, 16},
                                  {"c2p0 g8", (const void*)c2p0_nt, 2, 0, 8},
                                  {"c2p1 g8", (const void*)c2p1_nt, 2, 0, 8},
                                  {"c2p1 g16", (const void*)c2p1_nt, 2, 0, 16},
                                  {"s4 direct p0", (const void*)s4d0_nt, 1, 0, 8, S4D_SMEM},
                                  {"s4 direct p1", (const void*)s4d1_nt, 1, 0, 8, S4D_SMEM}};
    // LAB_SMALL=1: the smaller tiles at mid shapes (nn only).
    const bool small = getenv("LAB_SMALL") != nullptr;
    if (small) {
        const int s64 = GemmWgx<128, 64, 8>::SMEM, s128 = GemmWgx<128, 128, 5>::SMEM;
        vs_nn = {{"lib wgx128x64", (const void*)gemm_wgx_128x64_bf16_nn, 1, 1, 0, s64, 64},
                 {"lib wgx128x128", (const void*)gemm_wgx_128x128_bf16_nn, 1, 1, 0, s128, 128},
                 {"lib wgx128x256", (const void*)gemm_wgx_128x256_bf16_nn, 1, 1, 0, 0, 256},
                 {"128x64 p0", (const void*)w64p0_nn, 1, 0, 8, s64, 64},
                 {"128x64 p1", (const void*)w64p1_nn, 1, 0, 8, s64, 64},
                 {"128x128 p0", (const void*)w128p0_nn, 1, 0, 8, s128, 128},
                 {"128x128 p1", (const void*)w128p1_nn, 1, 0, 8, s128, 128},
                 {"128x64 p2", (const void*)w64p2_nn, 1, 0, 8, s64, 64},
                 {"128x128 p2", (const void*)w128p2_nn, 1, 0, 8, s128, 128},
                 {"128x64 p0 da", (const void*)w64p0d_nn, 1, 0, 8, s64, 64},
                 {"128x64 p2 da", (const void*)w64p2d_nn, 1, 0, 8, s64, 64},
                 {"128x128 p2 da", (const void*)w128p2d_nn, 1, 0, 8, s128, 128},
                 {"128x256 p0", (const void*)c1p0_nn, 1, 0, 8, 0, 256},
                 {"128x256 p1", (const void*)c1p1_nn, 1, 0, 8, 0, 256},
                 {"128x64 cl2 N", (const void*)w64cn_nn, 2, 0, 8, s64, 64, 1},
                 {"128x128 cl2 N", (const void*)w128cn_nn, 2, 0, 8, s128, 128, 1},
                 {"128x128 cl2 M", (const void*)w128cm_nn, 2, 0, 8, s128, 128, 0},
                 {"128x256 cl2 N", (const void*)w256cn_nn, 2, 0, 8, 0, 256, 1},
                 {"128x256 cl2 M", (const void*)c2p0_nn, 2, 0, 8, 0, 256, 0}};
        if (shapes.empty() || argc < 5)
            shapes = {{1000, 1000, 1000, false}, {2048, 2048, 512, false}, {1024, 4096, 1024, false},
                      {4096, 4096, 256, false}, {2048, 2048, 2048, false}, {8192, 768, 3072, false}};
    }
    // LAB_NO_CL=1: leave the cluster candidates out.
    if (getenv("LAB_NO_CL"))
        for (auto* vs : {&vs_nn, &vs_nt})
            vs->erase(std::remove_if(vs->begin(), vs->end(), [](const Variant& v) { return v.cl == 2; }), vs->end());
    for (auto* vs : {&vs_nn, &vs_nt})
        for (auto& v : *vs)
            RK(cudaFuncSetAttribute(v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    v.cl == 0 ? WG_SMEM_BYTES : v.smem ? v.smem : wgx_smem));
    // How many clusters of two fit at once (a GPC with an odd number of free SMs leaves one idle).
    int max_cl2 = 0;
    {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(2 * sms);
        cfg.blockDim = dim3(384);
        cfg.dynamicSmemBytes = wgx_smem;
        RK(cudaOccupancyMaxActiveClusters(&max_cl2, (void*)c2p0_nn, &cfg));
    }
    printf("max active clusters of 2: %d\n", max_cl2);
    for (auto* vs : {&vs_nn, &vs_nt})
        for (auto& v : *vs)
            if (v.cl == 2) {
                cudaLaunchConfig_t cfg = {};
                cfg.gridDim = dim3(2 * sms);
                cfg.blockDim = dim3(384);
                cfg.dynamicSmemBytes = v.smem ? v.smem : wgx_smem;
                RK(cudaOccupancyMaxActiveClusters(&v.maxcl, v.fn, &cfg));
            }

    for (const Shape& sh : shapes) {
        const int M = sh.M, N = sh.N, K = sh.K;
        LabOperands ops = lab_operands(M, N, K, sh.nt);
        bf16_t *A = ops.A, *B = ops.B, *C = ops.C, *R = ops.R;
        auto& vs = sh.nt ? vs_nt : vs_nn;
        const TensorMap mA = tmap(A, M, K, 64, 128);
        const TensorMap mB_wg = sh.nt ? tmap(B, N, K, 64, 256) : tmap(B, K, N, 64, 64);
        const TensorMap mB_c2 = sh.nt ? tmap(B, N, K, 64, 128) : tmap(B, K, N, 64, 64);
        const TensorMap mA_half = tmap(A, M, K, 64, 64);  // clusters along N: half of A each
        const int tiles_m = (M + 127) / 128, tiles_n = (N + 255) / 256;
        auto launch = [&](const Variant& v) {
            int ldc = N, splits = 1, kt_per = (K + 63) / 64;
            unsigned char* out = (unsigned char*)C;
            if (v.cl == 0) {
                void* args[] = {(void*)&mA, (void*)&mB_wg, &A, &B, &C, (void*)&M, (void*)&N, (void*)&K, &ldc};
                RK(cudaLaunchKernel(v.fn, dim3(tiles_m * tiles_n), dim3(384), args, WG_SMEM_BYTES, lab_stream));
            } else if (v.lib_wgx) {
                void* args[] = {(void*)&mA, (void*)&mB_wg, &A, &B, &out, (void*)&M, (void*)&N, (void*)&K, &ldc, &splits, &kt_per};
                const int tn = (N + v.bn - 1) / v.bn;
                RK(cudaLaunchKernel(v.fn, dim3(std::min(tiles_m * tn, sms)), dim3(384), args, v.smem ? v.smem : wgx_smem, lab_stream));
            } else {
                const TensorMap& mb = v.cl == 2 && v.ca == 0 ? mB_c2 : mB_wg;
                const TensorMap& ma = v.cl == 2 && v.ca == 1 ? mA_half : mA;
                int group = v.group;
                void* args[] = {(void*)&ma, (void*)&mb, &C, (void*)&M, (void*)&N, (void*)&K, &ldc, &group};
                const int tn = (N + v.bn - 1) / v.bn;
                const int units = v.ca == 1 ? tiles_m * ((tn + v.cl - 1) / v.cl) : ((tiles_m + v.cl - 1) / v.cl) * tn;
                const int grid = v.cl == 2 ? 2 * std::min(units, v.maxcl) : std::min(units, sms);
                RK(cudaLaunchKernel(v.fn, dim3(grid), dim3(384), args, v.smem ? v.smem : wgx_smem, lab_stream));
            }
        };
        printf("\n%d x %d x %d %s\n", M, N, K, sh.nt ? "nt" : "nn");
        bool ok = true;
        for (auto& v : vs) {
            const float rel = lab_check(ops, M, N, [&] { launch(v); });
            printf("  check %-16s max|d|/max|ref| = %.2e %s\n", v.name, rel, rel < 1e-2 ? "ok" : "FAIL");
            if (!(rel < 1e-2)) ok = false;
        }
        if (!ok) printf("  (timing anyway)\n");
        const double flop = 2.0 * M * N * K;
        // Each side's `reps` calls captured once into a CUDA graph and replayed (LAB_GRAPH=0: launched
        // from the host each time): at 10 us products the host's launch rate, not the GPU, is what
        // a stream of launches measures.
        const bool graph = !getenv("LAB_GRAPH") || atoi(getenv("LAB_GRAPH")) != 0;
        std::vector<cudaGraphExec_t> execs(vs.size() + 1, nullptr);
        auto calls = [&](size_t i) {
            for (int k = 0; k < reps; ++k) i == 0 ? run_cublas(A, B, C, M, N, K, sh.nt) : launch(vs[i - 1]);
        };
        if (graph) {
            for (size_t i = 0; i <= vs.size(); ++i) {
                cudaGraph_t g;
                RK(cudaStreamBeginCapture(lab_stream, cudaStreamCaptureModeThreadLocal));
                calls(i);
                RK(cudaStreamEndCapture(lab_stream, &g));
                RK(cudaGraphInstantiate(&execs[i], g, 0));
                RK(cudaGraphDestroy(g));
            }
        }
        auto t = lab_time_rounds(vs.size() + 1, rounds, reps, [&](size_t i) {
            if (graph) RK(cudaGraphLaunch(execs[i], lab_stream)); else calls(i);
        });
        for (auto e : execs)
            if (e) RK(cudaGraphExecDestroy(e));
        std::vector<float> med(t.size());
        for (size_t i = 0; i < t.size(); ++i) med[i] = t[i][t[i].size() / 2];
        for (size_t i = 0; i < t.size(); ++i)
            printf("  %-16s %9.1f us  %6.1f TFLOP/s  x cuBLAS %.3f\n", i == 0 ? "cuBLAS" : vs[i - 1].name, med[i],
                   flop / med[i] / 1e6, med[0] / med[i]);
        lab_free(ops);
    }
    return 0;
}
