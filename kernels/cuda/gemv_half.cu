// gemv_half.cu — the half-precision GEMMs with one output row or one output column (M = 1 or
// N = 1: a matrix times a vector, as a batch-1 decoder step runs its projections), issue 34.
//
// A 1-wide side pads a tensor-core tile 64-fold and leaves the product bound by streaming the
// matrix; the tile kernels (gemm_wgmma_tiles.cu) then need split-K and a reduce launch to reach
// every SM (4096 x 1 x 4096: 13.0 us in CUDA-graph replays on an H200, where cuBLAS takes 10.0).
// These kernels read every byte of the matrix once with 16-byte loads on every SM, and add in
// f32 on the CUDA cores: no tensor cores, no workspace, one launch.
//
// Two forms (row-major; S = f16 or bf16 storage, f32 products and sums, each output rounded
// once, round to nearest even):
//   gemv_half_rows_*: y[r * incy] = sum_k mat[r * ld + k] * x[k * incx]   (rows contiguous in k)
//   gemv_half_cols_*: y[c * incy] = sum_k mat[k * ld + c] * x[k * incx]   (rows contiguous in c)
// ops::gemm_half maps op(A) op(B) with M = 1 or N = 1 onto one of them (ops/gemv_half.rs).
// Deterministic: each output's order of additions depends on (R or C, K, W) only.
//
// rows: W warps per matrix row (W in {1, 2, 4, 8}); lane l of part w takes the 16-byte packets
// p = 32 w + l, + 32 W, ... of the row (4 in flight), the k tail (K % 8 elements) goes to the
// first lanes of part 0; the 32 lanes add in a fixed butterfly, the W parts in order.
// cols: a block of 1024 threads owns 32 columns (four packets of 8): thread (q, p) with
// q = t / 4 takes rows k = q, q + 256, ... of packet p, in groups of 2 rows whose loads are
// issued before the previous group's products; the 256 partial sums of each column are added
// in a fixed tree in shared memory.
//
// Host contract (ops/gemv_half.rs checks it): mat 16-byte aligned with ld a multiple of 8
// elements (whole packets per row); x any alignment and stride incx >= 1 (packets when
// incx == 1 and x is 16-byte aligned); R or C >= 1, K >= 1; every index fits the slices:
// rows: mat spans (R - 1) ld + K elements; cols: (K - 1) ld + C; x (K - 1) incx + 1; y
// (outputs - 1) incy + 1.
//   rows: block 256 (8 warps), grid ceil(R / (8 / W));   cols: block 1024, grid ceil(C / 32).
#include "dtype.cuh"

#define GEMV_COLS_THREADS 1024
#define GEMV_COLS_WIDTH 32                                     // columns per block
#define GEMV_COLS_KLANES (GEMV_COLS_THREADS / (GEMV_COLS_WIDTH / 8))  // rows walked at once: 256

// acc + sum over e of a[e] * x[k0 + e], in e order.
template <class D>
__device__ __forceinline__ float gemv_dot8(const Pack<typename D::Storage>& a, const typename D::Storage* __restrict__ x,
                                           long long k0, int incx, bool xpack, float acc) {
    typedef typename D::Storage S;
    float xv[8];
    if (xpack) {
        const Pack<S> b = load_pack(x + k0);
#pragma unroll
        for (int e = 0; e < 8; ++e) xv[e] = D::load(b.v[e]);
    } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) xv[e] = D::load(x[(u64)(k0 + e) * (u64)incx]);
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) acc = fmaf(D::load(a.v[e]), xv[e], acc);
    return acc;
}

template <class D>
__device__ __forceinline__ void gemv_rows(const typename D::Storage* __restrict__ mat, int ld,
                                          const typename D::Storage* __restrict__ x, int incx,
                                          typename D::Storage* __restrict__ y, int incy, int R, int K, int W) {
    typedef typename D::Storage S;
    __shared__ float part[8];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int r = blockIdx.x * (8 / W) + warp / W, w = warp % W;
    float acc = 0.0f;
    if (r < R) {
        const S* row = mat + (u64)r * (u64)ld;
        const bool xpack = incx == 1 && aligned16(x);
        const int packs = K >> 3, stride = 32 * W;
        int p = 32 * w + lane;
        for (; p + 3 * stride < packs; p += 4 * stride) {
            Pack<S> a[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) a[u] = load_pack(row + 8 * (long long)(p + u * stride));
#pragma unroll
            for (int u = 0; u < 4; ++u) acc = gemv_dot8<D>(a[u], x, 8 * (long long)(p + u * stride), incx, xpack, acc);
        }
        for (; p < packs; p += stride) acc = gemv_dot8<D>(load_pack(row + 8 * (long long)p), x, 8 * (long long)p, incx, xpack, acc);
        const int k = 8 * packs + lane;  // the tail: fewer than 8 elements
        if (w == 0 && k < K) acc = fmaf(D::load(row[k]), D::load(x[(u64)k * (u64)incx]), acc);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (W > 1) {
        if (lane == 0) part[warp] = acc;
        __syncthreads();
        if (w == 0 && lane == 0) {
            acc = part[warp];
            for (int i = 1; i < W; ++i) acc += part[warp + i];
        }
    }
    if (w == 0 && lane == 0 && r < R) y[(u64)r * (u64)incy] = D::store(acc);
}

// Packet (k, c0) of the matrix (cw of its 8 columns inside it), and x[k].
template <class D>
__device__ __forceinline__ void gemv_cols_load(const typename D::Storage* __restrict__ mat, int ld,
                                               const typename D::Storage* __restrict__ x, int incx, int k, int c0,
                                               int cw, Pack<typename D::Storage>& a, float& xk) {
    typedef typename D::Storage S;
    const S* p = mat + (u64)k * (u64)ld + c0;
    if (cw == 8) {
        a = load_pack(p);
    } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) a.v[e] = e < cw ? p[e] : (S)0;
    }
    xk = D::load(x[(u64)k * (u64)incx]);
}

template <class D>
__device__ __forceinline__ void gemv_cols(const typename D::Storage* __restrict__ mat, int ld,
                                          const typename D::Storage* __restrict__ x, int incx,
                                          typename D::Storage* __restrict__ y, int incy, int C, int K) {
    typedef typename D::Storage S;
    constexpr int KL = GEMV_COLS_KLANES, WIDTH = GEMV_COLS_WIDTH;
    constexpr int U = 2;  // rows per group (groups of 4 or 8, prefetched or not, measured no faster)
    __shared__ float part[KL][WIDTH + 1];
    const int t = threadIdx.x, q = t / (WIDTH / 8), pk = t % (WIDTH / 8);
    const int c0 = blockIdx.x * WIDTH + 8 * pk;  // this thread's packet of columns
    const int cw = min(8, C - c0);               // its columns inside the matrix (<= 0: none)
    float acc[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = 0.0f;
    if (cw > 0) {
        // Groups of U rows KL apart; the next group's loads are issued before this group's
        // products, so a thread always has loads in flight.
        const int groups = K > q ? (K - q + U * KL - 1) / (U * KL) : 0;
        Pack<S> a[U], an[U];
        float xs[U], xn[U];
        int k = q;
        if (groups > 0) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (k + u * KL < K) gemv_cols_load<D>(mat, ld, x, incx, k + u * KL, c0, cw, a[u], xs[u]);
                else xs[u] = 0.0f;
            }
        }
        for (int g = 0; g < groups; ++g, k += U * KL) {
            const int kn = k + U * KL;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (kn + u * KL < K) gemv_cols_load<D>(mat, ld, x, incx, kn + u * KL, c0, cw, an[u], xn[u]);
                else xn[u] = 0.0f;
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (k + u * KL < K) {
#pragma unroll
                    for (int e = 0; e < 8; ++e) acc[e] = fmaf(D::load(a[u].v[e]), xs[u], acc[e]);
                }
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                a[u] = an[u];
                xs[u] = xn[u];
            }
        }
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) part[q][8 * pk + e] = acc[e];
    // The KL partials of each column in a fixed tree: level s adds row q + s into row q.
#pragma unroll
    for (int s = KL / 2; s >= 1; s >>= 1) {
        __syncthreads();
        for (int i = t; i < s * WIDTH; i += GEMV_COLS_THREADS) {
            const int qq = i / WIDTH, c = i % WIDTH;
            part[qq][c] += part[qq + s][c];
        }
    }
    __syncthreads();
    if (t < WIDTH) {
        const int c = blockIdx.x * WIDTH + t;
        if (c < C) y[(u64)c * (u64)incy] = D::store(part[0][t]);
    }
}

extern "C" __global__ void __launch_bounds__(256) gemv_half_rows_bf16(const bf16_t* __restrict__ mat, int ld,
    const bf16_t* __restrict__ x, int incx, bf16_t* __restrict__ y, int incy, int R, int K, int W) {
    gemv_rows<DType<BF16>>(mat, ld, x, incx, y, incy, R, K, W);
}
extern "C" __global__ void __launch_bounds__(256) gemv_half_rows_f16(const f16_t* __restrict__ mat, int ld,
    const f16_t* __restrict__ x, int incx, f16_t* __restrict__ y, int incy, int R, int K, int W) {
    gemv_rows<DType<F16>>(mat, ld, x, incx, y, incy, R, K, W);
}
extern "C" __global__ void __launch_bounds__(GEMV_COLS_THREADS) gemv_half_cols_bf16(const bf16_t* __restrict__ mat,
    int ld, const bf16_t* __restrict__ x, int incx, bf16_t* __restrict__ y, int incy, int C, int K) {
    gemv_cols<DType<BF16>>(mat, ld, x, incx, y, incy, C, K);
}
extern "C" __global__ void __launch_bounds__(GEMV_COLS_THREADS) gemv_half_cols_f16(const f16_t* __restrict__ mat,
    int ld, const f16_t* __restrict__ x, int incx, f16_t* __restrict__ y, int incy, int C, int K) {
    gemv_cols<DType<F16>>(mat, ld, x, incx, y, incy, C, K);
}
