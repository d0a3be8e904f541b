// gemm_wgmma_fp8.cu — FP8 GEMM on Hopper's tensor cores: C = alpha · (A · B^T), A [M, K] and B
// stored [N, K] in FP8 (e4m3 or e5m2, any pairing), f32 accumulation, C in bf16 or f32.
//
// gen-ptx: archs=90a
//
// The structure is gemm_wgmma.cu's (read that file first): one producer warpgroup drives the TMA
// engine through a ring of shared-memory stages with `full` / `empty` mbarriers; two consumer
// warpgroups each own 64 rows x 256 columns of the 128 x 256 block tile and issue
// `wgmma.mma_async` reading both operands from shared memory (128-byte swizzle). As in
// gemm_wgmma_tiles.cu's gemm_wgx, the blocks are persistent (block b takes tiles b, b + grid, ...;
// the producer runs ahead into the next tile's stages while the consumers store this one) and a
// bf16 C leaves through shared memory in whole rows (wgmma_store.cuh); an f32 C is stored from
// the fragment (8-byte pairs: whole 32-byte sectors). What changes from the bf16 kernels:
//   * the multiply is `wgmma.mma_async.m64n256k32.f32.{e4m3,e5m2}.{e4m3,e5m2}`: k = 32 per
//     instruction, still 32 bytes of each operand row, so the descriptors advance exactly as for
//     16-bit types; one 128-byte tile row now holds 128 values of k (BK = 128 per stage);
//   * FP8 wgmma reads both operands K-major only (no transpose immediates, as for TF32), so the
//     only layout is "nt": A [M, K] (row stride lda >= K) and B stored [N, K] (ldb >= K) — what
//     cuBLASLt's FP8 matmul requires too. The host relays other layouts out first;
//   * the epilogue scales by alpha = a_inv_scale[0] · b_inv_scale[0] (the per-tensor FP8 scales,
//     read from device memory, so a step's scales never visit the host) and rounds once to C.
//
// Host contract (ops/gemm_fp8.rs checks it before every launch):
//   * block 384 threads exactly, a 1-D grid of at most ceil(M / 128) · ceil(N / 256) blocks (the
//     host launches min(tiles, SMs)), dynamic shared memory Fp8Out<T>::SMEM bytes (the function's
//     limit raised first): 216,112 for bf16 C (3 stages + two epilogue buffers), 197,696 for f32
//     C (4 stages);
//   * tmA: dims {K, M}, box {128, 128}; tmB: dims {K, N}, box {128, 256}; 1-byte elements
//     (CU_TENSOR_MAP_DATA_TYPE_UINT8), 128-byte swizzle, zero fill outside. TMA needs 16-byte
//     aligned bases and row strides: lda, ldb multiples of 16 (K itself any size >= 1: the engine
//     zero-fills the K tail, and zeros add nothing);
//   * M, N, K >= 1; a_inv_scale, b_inv_scale one f32 each.
#include "dtype.cuh"
#include "shared_address.cuh"
#include "tma.cuh"
#include "wgmma_ops.cuh"
#include "wgmma_store.cuh"

#define WG_BM 128
#define WG_BN 256
#define WG_BK 128                                 // fp8 values of k per stage (128 bytes)
#define WG_KSTEP 32                               // k per wgmma (32 bytes)
#define WG_THREADS 384
#define WG_ROW_BYTES 128
#define WG_A_BYTES (WG_BM * WG_ROW_BYTES)         // 16 KB per stage
#define WG_B_BYTES (WG_BN * WG_ROW_BYTES)         // 32 KB per stage
#define WG_STAGE_BYTES (WG_A_BYTES + WG_B_BYTES)
#define WG_EPI_BYTES (64 * (WG_BN * 2 + 16))      // one consumer's bf16 epilogue buffer (rows + 16 B)
#define WG_GROUP_M 8

// Per output type: stages, and whether C goes through shared memory (bf16) or straight from the
// fragment (f32). Shared memory, in order: the stages (1 KB aligned), the epilogue buffers, the
// mbarriers.
template <typename T>
struct Fp8Out;
template <>
struct Fp8Out<bf16_t> {
    enum { STAGES = 3, STAGED = 1, SMEM = 3 * WG_STAGE_BYTES + 2 * WG_EPI_BYTES + 1024 + 2 * 3 * 8 };
};
template <>
struct Fp8Out<float> {
    enum { STAGES = 4, STAGED = 0, SMEM = 4 * WG_STAGE_BYTES + 1024 + 2 * 4 * 8 };
};

// ---- wgmma (descriptors, fence / commit / wait, register lists: wgmma_ops.cuh) ----------------

// FP8 element tags: E5 = 1 for e5m2.
struct E4M3 {
    enum { E5 = 0 };
};
struct E5M2 {
    enum { E5 = 1 };
};

// d = A(64 x 32) @ B(32 x 256) (+ d when `accumulate` != 0), both K-major in shared memory.
template <int AE5, int BE5>
struct WgmmaFp8;

#define WG_FP8_MMA(AE5, BE5, TYPES)                                                                  \
    template <>                                                                                      \
    struct WgmmaFp8<AE5, BE5> {                                                                      \
        static __device__ __forceinline__ void run(float (&d)[128], unsigned long long da,          \
                                                   unsigned long long db, int accumulate) {         \
            asm volatile("{ .reg .pred p; setp.ne.b32 p, %130, 0;\n"                                 \
                         "wgmma.mma_async.sync.aligned.m64n256k32.f32." TYPES " " WGX_R128           \
                         ", %128, %129, p, 1, 1; }"                                                  \
                         : WGX_A128                                                                 \
                         : "l"(da), "l"(db), "r"(accumulate));                                       \
        }                                                                                            \
    };
WG_FP8_MMA(0, 0, "e4m3.e4m3")
WG_FP8_MMA(0, 1, "e4m3.e5m2")
WG_FP8_MMA(1, 0, "e5m2.e4m3")
WG_FP8_MMA(1, 1, "e5m2.e5m2")

// ---- the epilogue: alpha · accumulators to C ---------------------------------------------------

template <typename T>
struct WgStore;
template <>
struct WgStore<bf16_t> {
    static __device__ __forceinline__ void two(bf16_t* c, float a, float b) {
        unsigned v;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(v) : "f"(b), "f"(a));  // a in the low half
        *reinterpret_cast<unsigned*>(c) = v;
    }
    static __device__ __forceinline__ void one(bf16_t* c, float a) { *c = f32_to_bf16(a); }
};
template <>
struct WgStore<float> {
    static __device__ __forceinline__ void two(float* c, float a, float b) {
        *reinterpret_cast<float2*>(c) = make_float2(a, b);
    }
    static __device__ __forceinline__ void one(float* c, float a) { *c = a; }
};

// Thread t of a consumer warpgroup holds, for each of the 32 n8 column blocks i, rows
// 16 * warp + lane / 4 (+ 8) and columns 8 i + 2 (lane % 4) (+ 1): the wgmma D fragment.
template <typename T>
__device__ __forceinline__ void wg_epilogue(float (&d)[128], float alpha, T* __restrict__ C, int M, int N, int ldc,
                                            int row0, int col0) {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
    const int r = row0 + 16 * warp + lane / 4;
    const int cb = col0 + 2 * (lane % 4);
    const bool pairs = (ldc % 2 == 0) && ((((u64)C) & (2 * sizeof(T) - 1)) == 0);
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        const int col = cb + 8 * i;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = r + 8 * h;
            if (row < M && col < N) {
                T* p = C + (long long)row * ldc + col;
                const float v0 = alpha * d[4 * i + 2 * h], v1 = alpha * d[4 * i + 2 * h + 1];
                if (pairs && col + 1 < N) {
                    WgStore<T>::two(p, v0, v1);
                } else {
                    WgStore<T>::one(p, v0);
                    if (col + 1 < N) WgStore<T>::one(p + 1, v1);
                }
            }
        }
    }
}

// ---- the kernel ----------------------------------------------------------------------------------

// Where tile t lies: GROUP_M tile rows walked column by column (blocks running together share B
// in L2), as in gemm_wgmma.cu.
__device__ __forceinline__ void fp8_tile(int t, int tiles_m, int tiles_n, int& m0, int& n0) {
    const int per_group = WG_GROUP_M * tiles_n;
    const int first_m = (t / per_group) * WG_GROUP_M;
    const int rows_here = min(tiles_m - first_m, WG_GROUP_M);
    const int in_group = t % per_group;
    m0 = (first_m + in_group % rows_here) * WG_BM;
    n0 = (in_group / rows_here) * WG_BN;
}

template <class EA, class EB, typename T>
__device__ __forceinline__ void gemm_wgmma_fp8(const TensorMap* tmA, const TensorMap* tmB, T* __restrict__ C, int M,
                                               int N, int K, int ldc, const float* __restrict__ a_inv_scale,
                                               const float* __restrict__ b_inv_scale) {
    typedef Fp8Out<T> O;
    extern __shared__ unsigned char wg_smem[];
    const unsigned base = (smem_u32(wg_smem) + 1023u) & ~1023u;  // 128-byte swizzle: 1 KB aligned tiles
    const unsigned epi = base + O::STAGES * WG_STAGE_BYTES;        // the consumers' epilogue buffers
    const unsigned bars = epi + O::STAGED * 2 * WG_EPI_BYTES;
    // full[s] = bars + 8 s; empty[s] = bars + 8 (STAGES + s) (one arrival per consumer warp).

    const int tiles_m = (M + WG_BM - 1) / WG_BM, tiles_n = (N + WG_BN - 1) / WG_BN;
    const int tiles = tiles_m * tiles_n;
    const int ktiles = (K + WG_BK - 1) / WG_BK;

    if (threadIdx.x == 0) {
        for (int s = 0; s < O::STAGES; ++s) {
            mbar_init(bars + 8 * s, 1);
            mbar_init(bars + 8 * (O::STAGES + s), 8);
        }
        mbar_init_fence();
    }
    __syncthreads();

    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (threadIdx.x == 0) {
            int it = 0;  // k tiles issued by this block so far (stage it % STAGES)
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int m0, n0;
                fp8_tile(t, tiles_m, tiles_n, m0, n0);
                for (int kt = 0; kt < ktiles; ++kt, ++it) {
                    const int s = it % O::STAGES;
                    if (it >= O::STAGES) mbar_wait(bars + 8 * (O::STAGES + s), ((it / O::STAGES) & 1) ^ 1);
                    const unsigned full = bars + 8 * s;
                    mbar_expect_tx(full, WG_STAGE_BYTES);
                    const unsigned sa = base + s * WG_STAGE_BYTES, sb = sa + WG_A_BYTES;
                    const int k0 = kt * WG_BK;
                    tma_load_2d(sa, tmA, k0, m0, full);
                    tma_load_2d(sb, tmB, k0, n0, full);
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        const int c = wg - 1;  // consumer c owns rows m0 + 64 c .. + 63 of each tile
        // Zeroed once, before any wgmma (as in gemm_wgx: left undefined, ptxas's allocation across
        // the tile loop made it serialise the wgmmas, C7515). Each tile's first wgmma overwrites
        // them (scale-d = 0); K >= 1 (host contract), so every tile has a k tile.
        float d[128];
#pragma unroll
        for (int i = 0; i < 128; ++i) d[i] = 0.0f;
        const float alpha = a_inv_scale[0] * b_inv_scale[0];
        const unsigned sbo = 8 * WG_ROW_BYTES;
        int it = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int m0, n0;
            fp8_tile(t, tiles_m, tiles_n, m0, n0);
            // do-while: a k loop the compiler must consider empty made ptxas serialise the
            // wgmmas (C7514, the epilogue's reads), as in gemm_wgx.
            int kt = 0;
            do {
                const int s = it % O::STAGES;
                mbar_wait(bars + 8 * s, (it / O::STAGES) & 1);
                const unsigned sa = base + s * WG_STAGE_BYTES + c * 64 * WG_ROW_BYTES;
                const unsigned sb = base + s * WG_STAGE_BYTES + WG_A_BYTES;
                wgx_fence();
#pragma unroll
                for (int kk = 0; kk < WG_BK / WG_KSTEP; ++kk) {
                    WgmmaFp8<EA::E5, EB::E5>::run(d, wgx_desc(sa + kk * 32, 16, sbo), wgx_desc(sb + kk * 32, 16, sbo),
                                                  kt > 0 || kk > 0);
                }
                wgx_commit();
                // As in gemm_wgmma.cu: wait for this tile's multiplies before handing the stage
                // back; the other consumer keeps the tensor cores busy meanwhile.
                wgx_wait0();
                if (threadIdx.x % 32 == 0) mbar_arrive(bars + 8 * (O::STAGES + s));
                ++it;
            } while (++kt < ktiles);
            wgx_fence_acc(d);
            if (O::STAGED) {
                unsigned char* buf = wg_smem + (epi - smem_u32(wg_smem)) + c * WG_EPI_BYTES;
                wgx_store_c_staged<WgxBF16, WG_BN, true>(d, buf, reinterpret_cast<bf16_t*>(C), M, N, ldc, m0 + 64 * c,
                                                          n0, 1 + c, alpha);
            } else {
                wg_epilogue<T>(d, alpha, C, M, N, ldc, m0 + 64 * c, n0);
            }
        }
    }
}

// A and B are not read here (the tensor maps address them); they are parameters so that a launch
// orders their buffers like any other kernel argument.
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_fp8_e4m3_e4m3_bf16(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                             const unsigned char* __restrict__ A, const unsigned char* __restrict__ B,
                             bf16_t* __restrict__ C, int M, int N, int K, int ldc,
                             const float* __restrict__ a_inv_scale, const float* __restrict__ b_inv_scale) {
    gemm_wgmma_fp8<E4M3, E4M3, bf16_t>(&tmA, &tmB, C, M, N, K, ldc, a_inv_scale, b_inv_scale);
}
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_fp8_e4m3_e4m3_f32(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                             const unsigned char* __restrict__ A, const unsigned char* __restrict__ B,
                             float* __restrict__ C, int M, int N, int K, int ldc,
                             const float* __restrict__ a_inv_scale, const float* __restrict__ b_inv_scale) {
    gemm_wgmma_fp8<E4M3, E4M3, float>(&tmA, &tmB, C, M, N, K, ldc, a_inv_scale, b_inv_scale);
}
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_fp8_e4m3_e5m2_bf16(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                             const unsigned char* __restrict__ A, const unsigned char* __restrict__ B,
                             bf16_t* __restrict__ C, int M, int N, int K, int ldc,
                             const float* __restrict__ a_inv_scale, const float* __restrict__ b_inv_scale) {
    gemm_wgmma_fp8<E4M3, E5M2, bf16_t>(&tmA, &tmB, C, M, N, K, ldc, a_inv_scale, b_inv_scale);
}
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_fp8_e4m3_e5m2_f32(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                             const unsigned char* __restrict__ A, const unsigned char* __restrict__ B,
                             float* __restrict__ C, int M, int N, int K, int ldc,
                             const float* __restrict__ a_inv_scale, const float* __restrict__ b_inv_scale) {
    gemm_wgmma_fp8<E4M3, E5M2, float>(&tmA, &tmB, C, M, N, K, ldc, a_inv_scale, b_inv_scale);
}
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_fp8_e5m2_e4m3_bf16(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                             const unsigned char* __restrict__ A, const unsigned char* __restrict__ B,
                             bf16_t* __restrict__ C, int M, int N, int K, int ldc,
                             const float* __restrict__ a_inv_scale, const float* __restrict__ b_inv_scale) {
    gemm_wgmma_fp8<E5M2, E4M3, bf16_t>(&tmA, &tmB, C, M, N, K, ldc, a_inv_scale, b_inv_scale);
}
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_fp8_e5m2_e4m3_f32(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                             const unsigned char* __restrict__ A, const unsigned char* __restrict__ B,
                             float* __restrict__ C, int M, int N, int K, int ldc,
                             const float* __restrict__ a_inv_scale, const float* __restrict__ b_inv_scale) {
    gemm_wgmma_fp8<E5M2, E4M3, float>(&tmA, &tmB, C, M, N, K, ldc, a_inv_scale, b_inv_scale);
}
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_fp8_e5m2_e5m2_bf16(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                             const unsigned char* __restrict__ A, const unsigned char* __restrict__ B,
                             bf16_t* __restrict__ C, int M, int N, int K, int ldc,
                             const float* __restrict__ a_inv_scale, const float* __restrict__ b_inv_scale) {
    gemm_wgmma_fp8<E5M2, E5M2, bf16_t>(&tmA, &tmB, C, M, N, K, ldc, a_inv_scale, b_inv_scale);
}
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_fp8_e5m2_e5m2_f32(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                             const unsigned char* __restrict__ A, const unsigned char* __restrict__ B,
                             float* __restrict__ C, int M, int N, int K, int ldc,
                             const float* __restrict__ a_inv_scale, const float* __restrict__ b_inv_scale) {
    gemm_wgmma_fp8<E5M2, E5M2, float>(&tmA, &tmB, C, M, N, K, ldc, a_inv_scale, b_inv_scale);
}
