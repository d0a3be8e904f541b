// sgemm_lab.cu — issue 34 item 4 (FP32 SGEMM >= 0.90x cuBLAS at 4096): the library's sgemm_nn
// (compiled in from kernels/cuda/sgemm.cu) beside register-blocked candidates, and cuBLAS's
// cublasSgemm (default math: FP32 FMA, no TF32), in one process.
//
// Candidates: sgl<BM, BN, BK, WGM, WGN, LM, TM, TN, MINB, PF> (row-major NN, C = A B; the lab runs
// shapes whose M, N, K are multiples of the tile, so it has no edge code): a block of WGM x WGN
// warps computes a BM x BN tile, each thread TM x TN outputs as (TM / 4) x (TN / 4) strips of
// 4 x 4 (lanes LM (m) x 32 / LM (n); strips BM / (TM / 4) rows and BN / (TN / 4) columns apart, as
// the library's 8 x 8 layout); A transposed into shared memory (As[k][m], rows padded by 4), B as
// it is (Bs[k][n]); the next k tile's global loads held in registers during this tile's FMAs; one
// __syncthreads per k tile. PF = 1 also double-buffers the fragments (k + 1's shared-memory reads
// issued before k's FMAs). Global loads: A 16 rows x 32 bytes per warp instruction (one sector a
// row), B 128 contiguous floats.
//
// Every kernel's output is compared with cuBLAS's first (max |ours - cublas| / max |cublas|), then
// each side's LAB_REPS calls are captured in a CUDA graph and replayed, the sides in alternation,
// LAB_ROUNDS times; medians.
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o sgemm_lab kernels/tuning/sgemm_lab.cu -ldl
//        (-Xptxas -v for the registers)
// Run:   CUBLAS_LIB=/path/libcublas.so.13 ./sgemm_lab [M N K]...   (default 4096^3, 8192^3, 2048^3)
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../cuda/sgemm.cu"

#define RK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

template <int LBM, int LBN, int LBK, int WGM, int WGN, int LM, int TM, int TN, int MINB, int PF>
__global__ void __launch_bounds__(WGM * WGN * 32, MINB)
sgl(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    constexpr int NT = WGM * WGN * 32, NW = WGM * WGN, LN = 32 / LM;
    constexpr int SHM = WGM * LM * 4, SHN = WGN * LN * 4;  // strip spacing
    static_assert(SHM * (TM / 4) == LBM && SHN * (TN / 4) == LBN, "tile arithmetic");
    constexpr int PA = LBM + 4, PB = LBN + 4;
    constexpr int AI = (LBM / 16) * (LBK / 8) / NW;  // A float4 per thread per k tile
    constexpr int BI = LBK * (LBN / 128) / NW;       // B float4 per thread per k tile
    static_assert(AI * NW == (LBM / 16) * (LBK / 8) && BI * NW == LBK * (LBN / 128), "loader split");
    extern __shared__ __align__(16) float sm[];
    float* As = sm;                  // [2][LBK][PA]
    float* Bs = sm + 2 * LBK * PA;   // [2][LBK][PB]
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int m0 = blockIdx.y * LBM, n0 = blockIdx.x * LBN;

    // loader positions
    const float* ap[AI];
    int aso[AI];
#pragma unroll
    for (int i = 0; i < AI; ++i) {
        const int it = warp + NW * i, mb = it % (LBM / 16), kp = it / (LBM / 16);
        const int m = mb * 16 + lane % 16, kq = kp * 2 + lane / 16;
        ap[i] = A + (size_t)(m0 + m) * K + kq * 4;
        aso[i] = kq * 4 * PA + m;
    }
    const float* bp[BI];
    int bso[BI];
#pragma unroll
    for (int i = 0; i < BI; ++i) {
        const int it = warp + NW * i, k = it / (LBN / 128), nb = it % (LBN / 128);
        const int n = nb * 128 + lane * 4;
        bp[i] = B + (size_t)k * N + n0 + n;
        bso[i] = k * PB + n;
    }
    float4 ra[AI], rb[BI];
    auto gload = [&](int kt) {
#pragma unroll
        for (int i = 0; i < AI; ++i) ra[i] = *reinterpret_cast<const float4*>(ap[i] + (size_t)kt * LBK);
#pragma unroll
        for (int i = 0; i < BI; ++i) rb[i] = *reinterpret_cast<const float4*>(bp[i] + (size_t)kt * LBK * N);
    };
    auto sstore = [&](int buf) {
        float* a = As + buf * LBK * PA;
        float* b = Bs + buf * LBK * PB;
#pragma unroll
        for (int i = 0; i < AI; ++i) {
            a[aso[i]] = ra[i].x;
            a[aso[i] + PA] = ra[i].y;
            a[aso[i] + 2 * PA] = ra[i].z;
            a[aso[i] + 3 * PA] = ra[i].w;
        }
#pragma unroll
        for (int i = 0; i < BI; ++i) *reinterpret_cast<float4*>(b + bso[i]) = rb[i];
    };

    const int wm = warp / WGN, wn = warp % WGN, lm = lane / LN, ln = lane % LN;
    const int tm = (wm * LM + lm) * 4, tn = (wn * LN + ln) * 4;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    const int ktiles = K / LBK;
    gload(0);
    sstore(0);
    __syncthreads();
    for (int kt = 0; kt < ktiles; ++kt) {
        const int cur = kt & 1;
        const bool more = kt + 1 < ktiles;
        if (more) gload(kt + 1);
        const float* a = As + cur * LBK * PA;
        const float* b = Bs + cur * LBK * PB;
        if (PF) {
            float fa[2][TM], fb[2][TN];
            auto frag = [&](int k, float* xa, float* xb) {
#pragma unroll
                for (int s = 0; s < TM / 4; ++s) {
                    const float4 v = *reinterpret_cast<const float4*>(a + k * PA + s * SHM + tm);
                    xa[4 * s] = v.x; xa[4 * s + 1] = v.y; xa[4 * s + 2] = v.z; xa[4 * s + 3] = v.w;
                }
#pragma unroll
                for (int s = 0; s < TN / 4; ++s) {
                    const float4 v = *reinterpret_cast<const float4*>(b + k * PB + s * SHN + tn);
                    xb[4 * s] = v.x; xb[4 * s + 1] = v.y; xb[4 * s + 2] = v.z; xb[4 * s + 3] = v.w;
                }
            };
            frag(0, fa[0], fb[0]);
#pragma unroll
            for (int k = 0; k < LBK; ++k) {
                if (k + 1 < LBK) frag(k + 1, fa[(k + 1) & 1], fb[(k + 1) & 1]);
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(fa[k & 1][i], fb[k & 1][j], acc[i][j]);
            }
        } else {
#pragma unroll
            for (int k = 0; k < LBK; ++k) {
                float fa[TM], fb[TN];
#pragma unroll
                for (int s = 0; s < TM / 4; ++s) {
                    const float4 v = *reinterpret_cast<const float4*>(a + k * PA + s * SHM + tm);
                    fa[4 * s] = v.x; fa[4 * s + 1] = v.y; fa[4 * s + 2] = v.z; fa[4 * s + 3] = v.w;
                }
#pragma unroll
                for (int s = 0; s < TN / 4; ++s) {
                    const float4 v = *reinterpret_cast<const float4*>(b + k * PB + s * SHN + tn);
                    fb[4 * s] = v.x; fb[4 * s + 1] = v.y; fb[4 * s + 2] = v.z; fb[4 * s + 3] = v.w;
                }
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(fa[i], fb[j], acc[i][j]);
            }
        }
        if (more) sstore(cur ^ 1);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = m0 + (i / 4) * SHM + tm + i % 4;
#pragma unroll
        for (int s = 0; s < TN / 4; ++s) {
            const int col = n0 + s * SHN + tn;
            *reinterpret_cast<float4*>(C + (size_t)row * N + col) =
                make_float4(acc[i][4 * s], acc[i][4 * s + 1], acc[i][4 * s + 2], acc[i][4 * s + 3]);
        }
    }
}


// ---- sgp: cuBLAS's structure (its sm80 FFMA kernel on an H200: 256 x 128 x 8 tiles in its
// column-major terms, 3 cp.async stages, 8 warps, 254 registers, one block per SM) ----------------
// Row-major NN again. Operands come by cp.async (16 bytes) straight into shared memory, S stages,
// one __syncthreads per k tile: A as it is, As[m][k] (pitch LBK + 4 floats: 8 consecutive rows
// land in 8 different 4-bank groups), B as it is, Bs[k][n]. A thread owns TM rows spaced LM apart
// (lane lm's rows wm * LM * TM + lm + LM * i: a float4 read of A gives 4 k of one row) and TN
// columns as strips of 4 (B's float4 reads give 4 columns of one k).
__device__ __forceinline__ void lab_cp16(float* dst, const float* src) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void lab_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N_> __device__ __forceinline__ void lab_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N_) : "memory"); }

template <int LBM, int LBN, int LBK, int S, int WGM, int WGN, int LM, int TM, int TN, int MINB, int ORD>
__global__ void __launch_bounds__(WGM * WGN * 32, MINB)
sgp(int M, int N, int K, const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    constexpr int NT = WGM * WGN * 32, LN = 32 / LM;
    constexpr int PA = LBK + 4, PB = LBN;
    constexpr int WM = LM * TM, WN = LN * TN;  // warp tile
    static_assert(WGM * WM == LBM && WGN * WN == LBN, "tile arithmetic");
    constexpr int ACH = LBM * LBK / 4 / NT, BCH = LBK * LBN / 4 / NT;  // 16-byte copies per thread
    static_assert(ACH * NT * 4 == LBM * LBK && BCH * NT * 4 == LBK * LBN, "copy split");
    constexpr int SA = LBM * PA, SB = LBK * PB;
    extern __shared__ __align__(16) float sm[];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int m0 = blockIdx.y * LBM, n0 = blockIdx.x * LBN;
    auto issue = [&](int kt, int st) {
        float* a = sm + st * (SA + SB);
        float* b = a + SA;
#pragma unroll
        for (int i = 0; i < ACH; ++i) {
            const int c = tid + NT * i, m = c / (LBK / 4), kq = c % (LBK / 4);
            lab_cp16(a + m * PA + kq * 4, A + (size_t)(m0 + m) * K + (size_t)kt * LBK + kq * 4);
        }
#pragma unroll
        for (int i = 0; i < BCH; ++i) {
            const int c = tid + NT * i, k = c / (LBN / 4), nq = c % (LBN / 4);
            lab_cp16(b + k * PB + nq * 4, B + (size_t)(kt * LBK + k) * N + n0 + nq * 4);
        }
    };
    const int wm = warp / WGN, wn = warp % WGN, lm = lane / LN, ln = lane % LN;
    const int rbase = wm * WM + lm;           // rows rbase + LM * i
    const int cbase = wn * WN + ln * 4;       // columns cbase + LN * 4 * s + j
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    const int ktiles = K / LBK;
#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
        if (s < ktiles) issue(s, s);
        lab_commit();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        lab_wait<S - 2>();
        __syncthreads();
        if (kt + S - 1 < ktiles) issue(kt + S - 1, (kt + S - 1) % S);
        lab_commit();
        const float* a = sm + (kt % S) * (SA + SB);
        const float* b = a + SA;
#pragma unroll
        for (int k4 = 0; k4 < LBK; k4 += 4) {
            float4 fa[TM];
#pragma unroll
            for (int i = 0; i < TM; ++i) fa[i] = *reinterpret_cast<const float4*>(a + (rbase + LM * i) * PA + k4);
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                float fb[TN];
#pragma unroll
                for (int s = 0; s < TN / 4; ++s) {
                    const float4 v = *reinterpret_cast<const float4*>(b + (k4 + kk) * PB + cbase + LN * 4 * s);
                    fb[4 * s] = v.x; fb[4 * s + 1] = v.y; fb[4 * s + 2] = v.z; fb[4 * s + 3] = v.w;
                }
                float av[TM];
#pragma unroll
                for (int i = 0; i < TM; ++i)
                    av[i] = kk == 0 ? fa[i].x : kk == 1 ? fa[i].y : kk == 2 ? fa[i].z : fa[i].w;
                if (ORD == 0) {  // rows outer
#pragma unroll
                    for (int i = 0; i < TM; ++i)
#pragma unroll
                        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], fb[j], acc[i][j]);
                } else if (ORD == 1) {  // columns outer
#pragma unroll
                    for (int j = 0; j < TN; ++j)
#pragma unroll
                        for (int i = 0; i < TM; ++i) acc[i][j] = fmaf(av[i], fb[j], acc[i][j]);
                } else {  // rows outer, columns in a zigzag (the last b of a row is the next row's first)
#pragma unroll
                    for (int i = 0; i < TM; ++i)
#pragma unroll
                        for (int jj = 0; jj < TN; ++jj) {
                            const int j = (i & 1) ? TN - 1 - jj : jj;
                            acc[i][j] = fmaf(av[i], fb[j], acc[i][j]);
                        }
                }
            }
        }
    }
    lab_wait<0>();
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = m0 + rbase + LM * i;
#pragma unroll
        for (int s = 0; s < TN / 4; ++s) {
            const int col = n0 + cbase + LN * 4 * s;
            *reinterpret_cast<float4*>(C + (size_t)row * N + col) =
                make_float4(acc[i][4 * s], acc[i][4 * s + 1], acc[i][4 * s + 2], acc[i][4 * s + 3]);
        }
    }
}

template <int LBM, int LBN, int LBK, int S, int WGM, int WGN, int LM, int TM, int TN, int MINB, int ORD = 0>
void launch_sgp(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
    auto k = sgp<LBM, LBN, LBK, S, WGM, WGN, LM, TM, TN, MINB, ORD>;
    const int smem = S * (LBM * (LBK + 4) + LBK * LBN) * 4;
    static bool once = false;
    if (!once) {
        RK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        cudaFuncAttributes fa;
        RK(cudaFuncGetAttributes(&fa, k));
        int blocks = 0;
        RK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, WGM * WGN * 32, smem));
        printf("    [sgp ord %d %dx%dx%d S%d %dx%d warps LM %d %dx%d minb %d: %d regs, %d local B, smem %d, %d blocks/SM]\n",
               ORD, LBM, LBN, LBK, S, WGM, WGN, LM, TM, TN, MINB, fa.numRegs, (int)fa.localSizeBytes, smem, blocks);
        once = true;
    }
    k<<<dim3(N / LBN, M / LBM), WGM * WGN * 32, smem, s>>>(M, N, K, A, B, C);
}

struct Variant {
    const char* name;
    void (*launch)(int, int, int, const float*, const float*, float*, cudaStream_t);
    int bm, bn;
};

template <int LBM, int LBN, int LBK, int WGM, int WGN, int LM, int TM, int TN, int MINB, int PF>
void launch_sgl(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
    auto k = sgl<LBM, LBN, LBK, WGM, WGN, LM, TM, TN, MINB, PF>;
    const int smem = 2 * LBK * (LBM + 4 + LBN + 4) * 4;
    static bool once = false;
    if (!once) {
        RK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        cudaFuncAttributes fa;
        RK(cudaFuncGetAttributes(&fa, k));
        int blocks = 0;
        RK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, WGM * WGN * 32, smem));
        printf("    [%dx%dx%d %dx%d warps LM %d %dx%d minb %d pf %d: %d regs, %d local B, smem %d, %d blocks/SM]\n",
               LBM, LBN, LBK, WGM, WGN, LM, TM, TN, MINB, PF, fa.numRegs, (int)fa.localSizeBytes, smem, blocks);
        once = true;
    }
    k<<<dim3(N / LBN, M / LBM), WGM * WGN * 32, smem, s>>>(M, N, K, A, B, C);
}
void launch_lib(int M, int N, int K, const float* A, const float* B, float* C, cudaStream_t s) {
    sgemm_nn<<<dim3((N + 127) / 128, (M + 127) / 128, 1), 256, 0, s>>>(M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
}

typedef int (*SgemmFn)(void*, int, int, int, int, int, const float*, const float*, int, const float*, int,
                       const float*, float*, int);
static SgemmFn sgemm_fn;
static void* cublas;

__global__ void diff_f32(const float* a, const float* b, size_t n, float* out) {
    float md = 0, mr = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        md = fmaxf(md, fabsf(a[i] - b[i]));
        mr = fmaxf(mr, fabsf(b[i]));
        if (a[i] != a[i]) md = INFINITY;
    }
    atomicMax((int*)&out[0], __float_as_int(md));
    atomicMax((int*)&out[1], __float_as_int(mr));
}

int main(int argc, char** argv) {
    RK(cudaFree(0));
    const char* lib = getenv("CUBLAS_LIB");
    void* h = lib ? dlopen(lib, RTLD_NOW) : nullptr;
    if (!h) {
        fprintf(stderr, "set CUBLAS_LIB to libcublas.so (%s)\n", dlerror());
        return 1;
    }
    cudaStream_t st;
    RK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    ((int (*)(void**))dlsym(h, "cublasCreate_v2"))(&cublas);
    ((int (*)(void*, cudaStream_t))dlsym(h, "cublasSetStream_v2"))(cublas, st);
    sgemm_fn = (SgemmFn)dlsym(h, "cublasSgemm_v2");
    cudaDeviceProp prop;
    RK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);

    std::vector<Variant> vs = {
        {"library", launch_lib, 128, 128},
        {"p 128x256x16 s3", launch_sgp<128, 256, 16, 3, 2, 4, 8, 8, 16, 1>, 128, 256},
        {"p 128x256x16 s3 o1", launch_sgp<128, 256, 16, 3, 2, 4, 8, 8, 16, 1, 1>, 128, 256},
        {"p 128x256x16 s3 o2", launch_sgp<128, 256, 16, 3, 2, 4, 8, 8, 16, 1, 2>, 128, 256},
        {"p 128x256x8 s3 o1", launch_sgp<128, 256, 8, 3, 2, 4, 8, 8, 16, 1, 1>, 128, 256},
        {"p 128x256x8 s3 o2", launch_sgp<128, 256, 8, 3, 2, 4, 8, 8, 16, 1, 2>, 128, 256},
        {"p 256x128x8 s3 lm4 o1", launch_sgp<256, 128, 8, 3, 4, 2, 4, 16, 8, 1, 1>, 256, 128},
        {"p 256x128x8 s3 lm4 o2", launch_sgp<256, 128, 8, 3, 4, 2, 4, 16, 8, 1, 2>, 256, 128},
        {"p 128x128x16 s3 t128", launch_sgp<128, 128, 16, 3, 2, 2, 8, 8, 16, 2>, 128, 128},
        {"p 128x128x16 s3 t128 o1", launch_sgp<128, 128, 16, 3, 2, 2, 8, 8, 16, 2, 1>, 128, 128},
        {"p 128x128x16 s3 t128 o2", launch_sgp<128, 128, 16, 3, 2, 2, 8, 8, 16, 2, 2>, 128, 128},
        {"p 128x128x16 s4 t128 o2", launch_sgp<128, 128, 16, 4, 2, 2, 8, 8, 16, 2, 2>, 128, 128},
        {"p 128x128x8 s4 t256 o1", launch_sgp<128, 128, 8, 4, 4, 2, 4, 8, 8, 2, 1>, 128, 128},
        {"p 128x128x8 s4 t256 o2", launch_sgp<128, 128, 8, 4, 4, 2, 4, 8, 8, 2, 2>, 128, 128},
    };

    if (const char* only = getenv("LAB_ONLY")) {
        std::vector<Variant> keep;
        for (auto& v : vs)
            if (strstr(only, v.name)) keep.push_back(v);
        vs = keep;
    }
    struct Shape { int M, N, K; };
    std::vector<Shape> shapes;
    for (int i = 1; i + 2 < argc; i += 3) shapes.push_back({atoi(argv[i]), atoi(argv[i + 1]), atoi(argv[i + 2])});
    if (shapes.empty()) shapes = {{4096, 4096, 4096}, {8192, 8192, 8192}, {2048, 2048, 2048}};
    const int reps = getenv("LAB_REPS") ? atoi(getenv("LAB_REPS")) : 10;
    const int rounds = getenv("LAB_ROUNDS") ? atoi(getenv("LAB_ROUNDS")) : 7;
    cudaEvent_t e0, e1;
    RK(cudaEventCreate(&e0));
    RK(cudaEventCreate(&e1));
    float* dd;
    RK(cudaMalloc(&dd, 8));
    for (auto sh : shapes) {
        const int M = sh.M, N = sh.N, K = sh.K;
        printf("M N K = %d %d %d\n", M, N, K);
        float *A, *B, *C, *R;
        RK(cudaMalloc(&A, (size_t)M * K * 4));
        RK(cudaMalloc(&B, (size_t)K * N * 4));
        RK(cudaMalloc(&C, (size_t)M * N * 4));
        RK(cudaMalloc(&R, (size_t)M * N * 4));
        {
            std::mt19937 g(7);
            std::uniform_real_distribution<float> u(-1, 1);
            std::vector<float> h((size_t)std::max(M, N) * K);
            for (auto& x : h) x = u(g);
            RK(cudaMemcpy(A, h.data(), (size_t)M * K * 4, cudaMemcpyHostToDevice));
            RK(cudaMemcpy(B, h.data(), (size_t)K * N * 4, cudaMemcpyHostToDevice));
        }
        const float one = 1, zero = 0;
        auto run_cublas = [&](float* out) {  // row-major C = A B as column-major C^T = B^T A^T
            sgemm_fn(cublas, 0, 0, N, M, K, &one, B, N, A, K, &zero, out, N);
        };
        run_cublas(R);
        RK(cudaStreamSynchronize(st));
        std::vector<Variant> ok;
        for (auto& v : vs) {
            if (M % v.bm || N % v.bn || K % 16) continue;
            RK(cudaMemset(C, 0xff, (size_t)M * N * 4));
            RK(cudaDeviceSynchronize());
            v.launch(M, N, K, A, B, C, st);
            RK(cudaStreamSynchronize(st));
            RK(cudaMemset(dd, 0, 8));
            diff_f32<<<1024, 256>>>(C, R, (size_t)M * N, dd);
            float hd[2];
            RK(cudaMemcpy(hd, dd, 8, cudaMemcpyDeviceToHost));
            const float rel = hd[0] / hd[1];
            printf("  check %-22s max|d|/max|ref| = %.2e %s\n", v.name, rel, rel < 1e-5 ? "ok" : "FAIL");
            ok.push_back(v);
        }
        const double flop = 2.0 * M * N * K;
        std::vector<cudaGraphExec_t> execs(ok.size() + 1);
        for (size_t i = 0; i <= ok.size(); ++i) {
            cudaGraph_t g;
            RK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
            for (int r = 0; r < reps; ++r) i == 0 ? run_cublas(C) : ok[i - 1].launch(M, N, K, A, B, C, st);
            RK(cudaStreamEndCapture(st, &g));
            RK(cudaGraphInstantiate(&execs[i], g, 0));
            RK(cudaGraphDestroy(g));
        }
        std::vector<std::vector<float>> t(ok.size() + 1);
        for (int r = 0; r < rounds; ++r)
            for (size_t i = 0; i <= ok.size(); ++i) {
                RK(cudaEventRecord(e0, st));
                RK(cudaGraphLaunch(execs[i], st));
                RK(cudaEventRecord(e1, st));
                RK(cudaEventSynchronize(e1));
                float ms;
                RK(cudaEventElapsedTime(&ms, e0, e1));
                if (r > 0) t[i].push_back(ms * 1000 / reps);
            }
        for (auto e : execs) RK(cudaGraphExecDestroy(e));
        std::vector<float> med(t.size());
        for (size_t i = 0; i < t.size(); ++i) {
            std::sort(t[i].begin(), t[i].end());
            med[i] = t[i][t[i].size() / 2];
        }
        for (size_t i = 0; i < t.size(); ++i)
            printf("  %-22s %9.1f us  %6.2f TFLOP/s  x cuBLAS %.3f\n", i == 0 ? "cuBLAS" : ok[i - 1].name, med[i],
                   flop / med[i] / 1e6, med[0] / med[i]);
        RK(cudaFree(A));
        RK(cudaFree(B));
        RK(cudaFree(C));
        RK(cudaFree(R));
    }
    return 0;
}
