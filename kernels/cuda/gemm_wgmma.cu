// gemm_wgmma.cu — the Hopper step of the tensor-core ladder: C = op(A) @ op(B) on sm_90a with the
// bulk tensor copy engine (TMA) and warpgroup MMA (wgmma).
//
// gen-ptx: archs=90a
//
// What changes in the hardware's use, compared with gemm_mma.cu (mma.sync, sm_80):
//   * Operands are not loaded by threads at all. One thread of a producer warpgroup asks the TMA
//     engine for whole tiles (`cp.async.bulk.tensor`), described by a tensor map the host encoded
//     (cuTensorMapEncodeTiled); the engine writes them into shared memory already in the 128-byte
//     swizzled layout the tensor cores read without bank conflicts, zero-fills what lies outside the
//     matrix (edge tiles and the K tail need no code), and signals an mbarrier with the bytes it
//     delivered.
//   * The multiply is issued by a warpgroup (4 warps, 128 threads) as one asynchronous
//     `wgmma.mma_async` of 64 x 256 x 16 that reads both operands straight from shared memory
//     through 64-bit matrix descriptors: no ldmatrix, no register fragments of A or B.
//   * Warp specialisation: warpgroup 0 only produces (it gives registers back with setmaxnreg),
//     warpgroups 1 and 2 only consume (each owns 64 rows x 256 columns of C, 128 f32 accumulators
//     per thread). A ring of STAGES shared-memory stages with a `full` and an `empty` mbarrier
//     each lets the copies of tile k+1..k+3 overlap the multiplies of tile k.
//
// Layouts (row-major, as everywhere in this project; names as in sgemm.cu):
//   nn: A [M, K] (lda >= K),  B [K, N] (ldb >= N)     A is K-major, B is N-major
//   nt: A [M, K],             B stored [N, K]          both K-major
//   tn: A stored [K, M],      B [K, N]                 A is M-major, B is N-major
//   tt: A stored [K, M],      B stored [N, K]          A is M-major, B is K-major
// C is [M, N] with row stride ldc, written as the input type (f32 for tf32). C = A @ B exactly:
// f32 accumulation, one rounding at the store. TF32 (f32 inputs rounded to tf32 by the tensor
// cores) exists only as `nt`: wgmma reads 32-bit operands K-major only, so the host relays other
// layouts out first.
//
// Host contract (ops/gemm_tc.rs checks it before every launch):
//   * block 384 threads exactly, grid (ceil(M / 128) * ceil(N / 256)) blocks, dynamic shared
//     memory WG_SMEM_BYTES (set the function's limit first);
//   * tmA / tmB: tensor maps of A and B encoded as below, 128-byte swizzle, zero OOB fill, whose
//     global addresses are the `A` / `B` parameters (those are only passed so the launch orders
//     the buffers; the kernel reads through the maps):
//       K-major A : dims {K, M}, box {128 / elem bytes, 128};  M-major A : dims {M, K}, box {64, 64}
//       K-major B : dims {K, N}, box {128 / elem bytes, 256};  N-major B : dims {N, K}, box {64, 64}
//     TMA needs 16-byte aligned base addresses and row strides (lda, ldb multiples of 8 for
//     16-bit types, of 4 for f32);
//   * M, N >= 1, K >= 0 (K == 0 writes zeros).
#include "dtype.cuh"
#include "shared_address.cuh"
#include "tma.cuh"

#define WG_BM 128
#define WG_BN 256
#define WG_STAGES 4
#define WG_THREADS 384
#define WG_ROW_BYTES 128                          // every tile row (or column strip) is 128 bytes
#define WG_A_BYTES (WG_BM * WG_ROW_BYTES)         // 16 KB per stage
#define WG_B_BYTES (WG_BN * WG_ROW_BYTES)         // 32 KB per stage
#define WG_STAGE_BYTES (WG_A_BYTES + WG_B_BYTES)
#define WG_SMEM_BYTES (WG_STAGES * WG_STAGE_BYTES + 1024 + 2 * WG_STAGES * 8)
#define WG_GROUP_M 8                              // tile rows walked together (L2 reuse of B)

// ---- wgmma -----------------------------------------------------------------------------------

// A shared-memory matrix descriptor: start address, leading- and stride-dimension byte offsets
// (all in 16-byte units), 128-byte swizzle. Tiles start on 1024-byte boundaries, so the base
// offset field stays 0.
__device__ __forceinline__ unsigned long long wg_desc(unsigned addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16) |
           ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keeps the compiler from moving reads or writes of an accumulator across the asynchronous
// wgmma boundary (the asm "modifies" the register, in program order with the volatile asms).
__device__ __forceinline__ void wg_fence_acc(float (&d)[128]) {
#pragma unroll
    for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define WG_DREGS                                                                                  \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                     \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "            \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "            \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "            \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "            \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "            \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define WG_ACC8(i)                                                                                 \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
        "+f"(d[i + 6]), "+f"(d[i + 7])
#define WG_ACC128                                                                                     \
    WG_ACC8(0), WG_ACC8(8), WG_ACC8(16), WG_ACC8(24), WG_ACC8(32), WG_ACC8(40), WG_ACC8(48),        \
        WG_ACC8(56), WG_ACC8(64), WG_ACC8(72), WG_ACC8(80), WG_ACC8(88), WG_ACC8(96), WG_ACC8(104), \
        WG_ACC8(112), WG_ACC8(120)

// Element types of the ladder. KSTEP: k per wgmma (32 bytes of each operand row).
struct WgBF16 {
    typedef bf16_t T;
    enum { BYTES = 2, KSTEP = 16, BK = 64 };
};
struct WgF16 {
    typedef f16_t T;
    enum { BYTES = 2, KSTEP = 16, BK = 64 };
};
struct WgTF32 {
    typedef float T;
    enum { BYTES = 4, KSTEP = 8, BK = 32 };
};

// d = A(64 x KSTEP) @ B(KSTEP x 256) (+ d when `accumulate` != 0), both operands from shared
// memory. TA / TB: 1 = M- / N-major.
template <class E, int TA, int TB>
struct Wgmma;

template <int TA, int TB>
struct Wgmma<WgBF16, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[128], unsigned long long da, unsigned long long db,
                                               int accumulate) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " WG_DREGS
                     ", %128, %129, p, 1, 1, %131, %132; }"
                     : WG_ACC128
                     : "l"(da), "l"(db), "r"(accumulate), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB>
struct Wgmma<WgF16, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[128], unsigned long long da, unsigned long long db,
                                               int accumulate) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " WG_DREGS
                     ", %128, %129, p, 1, 1, %131, %132; }"
                     : WG_ACC128
                     : "l"(da), "l"(db), "r"(accumulate), "n"(TA), "n"(TB));
    }
};
template <>
struct Wgmma<WgTF32, 0, 0> {
    static __device__ __forceinline__ void run(float (&d)[128], unsigned long long da, unsigned long long db,
                                               int accumulate) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 " WG_DREGS ", %128, %129, p, 1, 1; }"
                     : WG_ACC128
                     : "l"(da), "l"(db), "r"(accumulate));
    }
};

// ---- the epilogue: accumulators to C ------------------------------------------------------------

// Stores of one or two adjacent results, per element type (f16_t and bf16_t are both unsigned
// short, so the element tag picks the rounding).
template <class E>
struct WgStore;
template <>
struct WgStore<WgBF16> {
    static __device__ __forceinline__ void two(bf16_t* c, float a, float b) {
        unsigned v;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(v) : "f"(b), "f"(a));  // a in the low half
        *reinterpret_cast<unsigned*>(c) = v;
    }
    static __device__ __forceinline__ void one(bf16_t* c, float a) { *c = f32_to_bf16(a); }
};
template <>
struct WgStore<WgF16> {
    static __device__ __forceinline__ void two(f16_t* c, float a, float b) {
        unsigned v;
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(v) : "f"(b), "f"(a));
        *reinterpret_cast<unsigned*>(c) = v;
    }
    static __device__ __forceinline__ void one(f16_t* c, float a) { *c = f32_to_f16(a); }
};
template <>
struct WgStore<WgTF32> {
    static __device__ __forceinline__ void two(float* c, float a, float b) {
        *reinterpret_cast<float2*>(c) = make_float2(a, b);
    }
    static __device__ __forceinline__ void one(float* c, float a) { *c = a; }
};

// Thread t of a consumer warpgroup holds, for each of the 32 n8 column blocks i, rows
// 16 * warp + lane / 4 (+ 8) and columns 8 i + 2 (lane % 4) (+ 1): the wgmma D fragment.
template <class E>
__device__ __forceinline__ void wg_epilogue(float (&d)[128], typename E::T* __restrict__ C, int M, int N, int ldc, int row0,
                                            int col0) {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
    const int r = row0 + 16 * warp + lane / 4;
    const int cb = col0 + 2 * (lane % 4);
    // Pairs are stored as one 4-byte (8-byte for f32) word when every row start is so aligned.
    typedef typename E::T T;
    const bool pairs = (ldc % 2 == 0) && ((((u64)C) & (2 * sizeof(T) - 1)) == 0);
#pragma unroll
    for (int i = 0; i < 32; ++i) {
        const int col = cb + 8 * i;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = r + 8 * h;
            if (row < M && col < N) {
                T* p = C + (long long)row * ldc + col;
                if (pairs && col + 1 < N) {
                    WgStore<E>::two(p, d[4 * i + 2 * h], d[4 * i + 2 * h + 1]);
                } else {
                    WgStore<E>::one(p, d[4 * i + 2 * h]);
                    if (col + 1 < N) WgStore<E>::one(p + 1, d[4 * i + 2 * h + 1]);
                }
            }
        }
    }
}

// ---- the kernel ----------------------------------------------------------------------------------

template <class E, int TA, int TB>
__device__ __forceinline__ void gemm_wgmma(const TensorMap* tmA, const TensorMap* tmB, typename E::T* __restrict__ C,
                                           int M, int N, int K, int ldc) {
    extern __shared__ unsigned char wg_smem[];
    const unsigned base = (smem_u32(wg_smem) + 1023u) & ~1023u;  // 128-byte swizzle: 1 KB aligned tiles
    const unsigned bars = base + WG_STAGES * WG_STAGE_BYTES;
    // full[s] = bars + 8 s (the producer's expect_tx + the copies' bytes); empty[s] = bars + 8 (STAGES + s)
    // (one arrival per consumer warp once its wgmmas have read the stage).

    const int tiles_m = (M + WG_BM - 1) / WG_BM, tiles_n = (N + WG_BN - 1) / WG_BN;
    // Walk WG_GROUP_M tile rows together, column by column, so blocks running at once share B in L2.
    const int per_group = WG_GROUP_M * tiles_n;
    const int group = blockIdx.x / per_group;
    const int first_m = group * WG_GROUP_M;
    const int rows_here = min(tiles_m - first_m, WG_GROUP_M);
    const int in_group = blockIdx.x % per_group;
    const int tm = first_m + in_group % rows_here, tn = in_group / rows_here;
    const int m0 = tm * WG_BM, n0 = tn * WG_BN;
    const int ktiles = (K + E::BK - 1) / E::BK;

    if (threadIdx.x == 0) {
        for (int s = 0; s < WG_STAGES; ++s) {
            mbar_init(bars + 8 * s, 1);
            mbar_init(bars + 8 * (WG_STAGES + s), 8);
        }
        mbar_init_fence();
    }
    __syncthreads();

    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        // Producer: give registers to the consumers; one thread drives the copy engine.
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (threadIdx.x == 0) {
            for (int kt = 0; kt < ktiles; ++kt) {
                const int s = kt % WG_STAGES;
                if (kt >= WG_STAGES) mbar_wait(bars + 8 * (WG_STAGES + s), ((kt / WG_STAGES) & 1) ^ 1);
                const unsigned full = bars + 8 * s;
                mbar_expect_tx(full, WG_STAGE_BYTES);
                const unsigned sa = base + s * WG_STAGE_BYTES, sb = sa + WG_A_BYTES;
                const int k0 = kt * E::BK;
                if (TA) {
                    tma_load_2d(sa, tmA, m0, k0, full);
                    tma_load_2d(sa + 64 * WG_ROW_BYTES, tmA, m0 + 64, k0, full);
                } else {
                    tma_load_2d(sa, tmA, k0, m0, full);
                }
                if (TB) {
#pragma unroll
                    for (int j = 0; j < WG_BN / 64; ++j) tma_load_2d(sb + j * 64 * WG_ROW_BYTES, tmB, n0 + 64 * j, k0, full);
                } else {
                    tma_load_2d(sb, tmB, k0, n0, full);
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        const int c = wg - 1;  // consumer c owns rows m0 + 64 c .. + 63
        // The first wgmma overwrites the accumulators (scale-d = 0): initialising them with ordinary
        // instructions would make ptxas serialise the wgmma pipeline (its warning C7515).
        float d[128];
        if (ktiles == 0) {
#pragma unroll
            for (int i = 0; i < 128; ++i) d[i] = 0.0f;
        }
        // Byte offsets of one k step inside a stage: K-major rows advance 32 bytes; M/N-major
        // tiles advance 16 (k) rows of 128 bytes. M/N-major atoms of 64 columns are 64 rows apart
        // (the leading byte offset); 8-row groups are 1 KB apart (the stride byte offset).
        const unsigned a_step = TA ? 16 * WG_ROW_BYTES : 32, b_step = TB ? 16 * WG_ROW_BYTES : 32;
        const unsigned lbo = 64 * WG_ROW_BYTES, sbo = 8 * WG_ROW_BYTES;
        for (int kt = 0; kt < ktiles; ++kt) {
            const int s = kt % WG_STAGES;
            mbar_wait(bars + 8 * s, (kt / WG_STAGES) & 1);
            const unsigned sa = base + s * WG_STAGE_BYTES + c * 64 * WG_ROW_BYTES;
            const unsigned sb = base + s * WG_STAGE_BYTES + WG_A_BYTES;
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < E::BK / E::KSTEP; ++kk) {
                Wgmma<E, TA, TB>::run(d, wg_desc(sa + kk * a_step, TA ? lbo : 16, sbo),
                                      wg_desc(sb + kk * b_step, TB ? lbo : 16, sbo), kt > 0 || kk > 0);
            }
            wgmma_commit();
            // Wait for this tile's multiplies before handing the stage back. Keeping one group in
            // flight (wait_group 1) made ptxas serialise the wgmmas of consecutive tiles (C7515);
            // with two consumer warpgroups, the other one keeps the tensor cores busy meanwhile.
            wgmma_wait<0>();
            if (threadIdx.x % 32 == 0) mbar_arrive(bars + 8 * (WG_STAGES + s));
        }
        wg_fence_acc(d);
        wg_epilogue<E>(d, C, M, N, ldc, m0 + 64 * c, n0);
    }
}

// A and B are not read here (the tensor maps address them); they are parameters so that a launch
// orders their buffers like any other kernel argument.
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_bf16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                       const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, bf16_t* __restrict__ C, int M, int N,
                       int K, int ldc) {
    gemm_wgmma<WgBF16, 0, 1>(&tmA, &tmB, C, M, N, K, ldc);
}
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_bf16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                       const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, bf16_t* __restrict__ C, int M, int N,
                       int K, int ldc) {
    gemm_wgmma<WgBF16, 0, 0>(&tmA, &tmB, C, M, N, K, ldc);
}
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_bf16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                       const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, bf16_t* __restrict__ C, int M, int N,
                       int K, int ldc) {
    gemm_wgmma<WgBF16, 1, 1>(&tmA, &tmB, C, M, N, K, ldc);
}
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_bf16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                       const bf16_t* __restrict__ A, const bf16_t* __restrict__ B, bf16_t* __restrict__ C, int M, int N,
                       int K, int ldc) {
    gemm_wgmma<WgBF16, 1, 0>(&tmA, &tmB, C, M, N, K, ldc);
}
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_f16_nn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                       const f16_t* __restrict__ A, const f16_t* __restrict__ B, f16_t* __restrict__ C, int M, int N,
                       int K, int ldc) {
    gemm_wgmma<WgF16, 0, 1>(&tmA, &tmB, C, M, N, K, ldc);
}
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_f16_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                       const f16_t* __restrict__ A, const f16_t* __restrict__ B, f16_t* __restrict__ C, int M, int N,
                       int K, int ldc) {
    gemm_wgmma<WgF16, 0, 0>(&tmA, &tmB, C, M, N, K, ldc);
}
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_f16_tn(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                       const f16_t* __restrict__ A, const f16_t* __restrict__ B, f16_t* __restrict__ C, int M, int N,
                       int K, int ldc) {
    gemm_wgmma<WgF16, 1, 1>(&tmA, &tmB, C, M, N, K, ldc);
}
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_f16_tt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                       const f16_t* __restrict__ A, const f16_t* __restrict__ B, f16_t* __restrict__ C, int M, int N,
                       int K, int ldc) {
    gemm_wgmma<WgF16, 1, 0>(&tmA, &tmB, C, M, N, K, ldc);
}
extern "C" __global__ void __launch_bounds__(WG_THREADS, 1)
    gemm_wgmma_tf32_nt(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB,
                       const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N,
                       int K, int ldc) {
    gemm_wgmma<WgTF32, 0, 0>(&tmA, &tmB, C, M, N, K, ldc);
}
