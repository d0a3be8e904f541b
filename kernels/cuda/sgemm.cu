// sgemm.cu — a fast FP32 matrix multiply: C = alpha * op(A) @ op(B) + beta * C (row-major).
//
// What makes it fast, compared with matmul_tiled.cu's 16x16 tile (1 output per thread):
//   * register blocking: a block of 256 threads computes a 128x128 tile of C, each thread 8x8
//     outputs held in 64 registers. Per k step a thread loads 8 values of A and 8 of B from shared
//     memory and does 64 FMAs with them: 4 FMAs per shared-memory load instead of 1/2.
//   * warp tiling: a warp's 32 threads are arranged 4 (rows) x 8 (cols), each owning two 4-row and
//     two 4-column strips 64 apart, so the float4 shared-memory reads of a warp are broadcasts or
//     128 contiguous bytes: no bank conflicts.
//   * A is stored transposed in shared memory (As[k][m]), so a thread's 4 consecutive rows of A are
//     one float4 read, exactly like B's 4 consecutive columns. Rows are padded to 132 floats so the
//     transposing stores are conflict-free too.
//   * double buffering: while the block computes on one shared-memory tile, each thread already
//     has the next tile's global loads (two float4 of A, two of B) in flight in registers; one
//     __syncthreads per k tile of 16.
//   * float4 (16-byte) global loads and C stores.
// Correct for every M, N, K >= 0 (K == 0 gives C = beta * C): a thread whose 4 elements are not all
// inside the matrix (edge tiles, K % 8 tails) or whose operand is not 16-byte loadable uses guarded
// scalar loads that fill zeros; edge stores are guarded per element.
//
// Entries (separate entries per transpose, so no runtime branch in the inner loop):
//   sgemm_nn: op(A) = A,   A is [M, K] with row stride lda >= K;   op(B) = B,   B is [K, N], ldb >= N
//   sgemm_nt: op(B) = B^T, B is stored [N, K], ldb >= K
//   sgemm_tn: op(A) = A^T, A is stored [K, M], lda >= M
//   sgemm_tt: both transposed.
//   C is [M, N] with row stride ldc >= N. Each output is fmaf(beta, C_old, alpha * acc); if
//   beta == 0, C is not read at all (NaNs in C do not propagate), as in BLAS. Leading dimensions are in elements. Accumulation is fp32 FMA in increasing k order
//   per output element (deterministic).
// Fast path requirements (otherwise still correct, only slower): A and B 16-byte aligned with
//   lda % 4 == 0 and ldb % 4 == 0; for the vector C epilogue, C 16-byte aligned and ldc % 4 == 0.
// Launch: block 256 (1-D) EXACTLY, grid (ceil(N / 128), ceil(M / 128), S), no dynamic shared
// memory. S = 1: the product as above. S > 1 (split-K, when the tiles alone cannot fill the
// GPU): slice z sums its share of k (whole 16-wide k tiles) into the [M, ldc] slab
// C + z * M * ldc of a workspace the host passes as C (alpha 1, beta 0), and
// sgemm_splitk_reduce adds the S slabs in order z = 0, 1, ... into the real C.
//
// sgemm_strip_{nn,nt,tn,tt} (same signature, N = W <= 8 columns): the last W columns of a product
// whose N is just past a multiple of 128 (the host passes B and C already offset to the strip's
// first column). 128-wide tiles would spend a whole column of tiles (and, at 2047 x 2049, a second
// wave) on them. Each output is split-K with STRIP_S = 32 slices of whole 16-wide k tiles (slice z
// takes k tiles [z T, z T + T), T = ceil(ceil(K / 16) / 32)), an FMA chain from 0 in increasing k
// per slice, the slices added in order, then alpha * sum and fmaf(beta, C, .) unless beta == 0
// (C not read): reference::sgemm_dot with 32 slices. Block 256 = 8 rows of C (warp = row) x 32
// slices (lane = slice); per step every slice's next k tile of the block's 8 rows of op(A) and of
// op(B)'s strip is staged through shared memory with loads along A's contiguous dimension, the
// next step's loads in flight in registers during the FMAs. It reads op(A) once: about one pass
// over A. Launch: block 256 (1-D) EXACTLY, grid ceil(M / 8), no dynamic shared memory.
#include "dtype.cuh"

#define BM 128          // rows of C per block
#define BN 128          // columns of C per block
#ifndef BK
#define BK 16           // k per shared-memory tile, a multiple of 8: 16 measured 5% faster than 8
#endif                  // on an H200 (half the __syncthreads per FMA; kernels/TUNING.md)
#define KPARTS (BK / 8) // float4 loads per thread per operand tile
#ifndef SGEMM_MIN_BLOCKS
#define SGEMM_MIN_BLOCKS 2  // blocks per SM the register budget is sized for
#endif
#define SPAD 4          // padding of each shared-memory row (floats)
#define NTHREADS 256

// One operand tile: 128 (m or n) x 8 (k) values, brought from global memory to registers by
// load(), and from registers to shared memory S[k][mn] by store().
// KCONTIG: element (mn, k) is at P[mn * ld + k] (k contiguous: A untransposed, B transposed);
// otherwise at P[k * ld + mn] (mn contiguous: A transposed, B untransposed).
template <bool KCONTIG>
struct TileLoader {
    const float* p;   // this thread's first element in the current tile
    int ld;           // leading dimension (elements)
    int mn_rem;       // MN - (this thread's first mn): how many of its mn positions exist
    int k_rem;        // K - (this thread's first k in the current tile)
    int soff;         // where its values go in the shared-memory tile (float index)
    bool vec_mn;      // 16-byte loads allowed and all 4 elements exist along mn
    float r[KPARTS][4];  // part q holds k rows (or columns) 8q .. 8q + 7 of the tile

    __device__ __forceinline__ void init(const float* P, int ld_, int mn0, int MN, int K, int tid) {
        ld = ld_;
        const bool vec_ok = aligned16(P) && (ld % 4 == 0);
        int mn, k;
        if (KCONTIG) {  // 128 rows x 2 float4 per 8 k: thread -> (mn tid/2, k 0 or 4)
            mn = mn0 + tid / 2;
            k = (tid % 2) * 4;
            mn_rem = MN - mn;
            vec_mn = vec_ok && mn_rem > 0;
            // rows past the edge are never read; clamp so the pointer stays inside the matrix
            p = P + (u64)min(mn, MN - 1) * (u64)ld + k;
            soff = k * (BM + SPAD) + tid / 2;
        } else {        // 8 rows of k x 32 float4: thread -> (k tid/32, mn 4 * (tid%32))
            mn = mn0 + (tid % 32) * 4;
            k = tid / 32;
            mn_rem = MN - mn;
            vec_mn = vec_ok && mn_rem >= 4;
            p = P + (u64)k * (u64)ld + min(mn, MN - 1);
            soff = k * (BM + SPAD) + (tid % 32) * 4;
        }
        k_rem = K - k;
    }

    __device__ __forceinline__ void load() {
#pragma unroll
        for (int q = 0; q < KPARTS; ++q) {
            const int kr = k_rem - 8 * q;  // k positions left from this part's first one
            if (KCONTIG) {  // elements (mn, k + j), j = 0..3, at pq[j]
                const float* pq = p + 8 * q;
                if (vec_mn && kr >= 4) {
                    const float4 v = *reinterpret_cast<const float4*>(pq);
                    r[q][0] = v.x; r[q][1] = v.y; r[q][2] = v.z; r[q][3] = v.w;
                } else {
#pragma unroll
                    for (int j = 0; j < 4; ++j) r[q][j] = (mn_rem > 0 && j < kr) ? pq[j] : 0.0f;
                }
            } else {        // elements (mn + j, k), j = 0..3, at pq[j]
                const float* pq = p + (u64)(8 * q) * (u64)ld;
                if (vec_mn && kr > 0) {
                    const float4 v = *reinterpret_cast<const float4*>(pq);
                    r[q][0] = v.x; r[q][1] = v.y; r[q][2] = v.z; r[q][3] = v.w;
                } else {
#pragma unroll
                    for (int j = 0; j < 4; ++j) r[q][j] = (kr > 0 && j < mn_rem) ? pq[j] : 0.0f;
                }
            }
        }
    }
    __device__ __forceinline__ void advance() {  // to the next k tile
        p += KCONTIG ? (u64)BK : (u64)BK * (u64)ld;
        k_rem -= BK;
    }
    // S points at a [BK][BM + SPAD] tile.
    __device__ __forceinline__ void store(float* S) const {
#pragma unroll
        for (int q = 0; q < KPARTS; ++q) {
            float* Sq = S + 8 * q * (BM + SPAD);
            if (KCONTIG) {  // transposing store: 4 k rows, one mn column
#pragma unroll
                for (int j = 0; j < 4; ++j) Sq[soff + j * (BM + SPAD)] = r[q][j];
            } else {
                *reinterpret_cast<float4*>(Sq + soff) = make_float4(r[q][0], r[q][1], r[q][2], r[q][3]);
            }
        }
    }
};

template <bool TA, bool TB>
__device__ __forceinline__ void sgemm_body(int M, int N, int K, float alpha,
                                           const float* __restrict__ A, int lda,
                                           const float* __restrict__ B, int ldb, float beta,
                                           float* __restrict__ C, int ldc) {
    // (A, B, C and K are adjusted below for split-K slices.)
    __shared__ __align__(16) float As[2][BK][BM + SPAD];
    __shared__ __align__(16) float Bs[2][BK][BN + SPAD];

    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * BM;
    const int n0 = blockIdx.x * BN;

    // Split-K: slice z = blockIdx.z of gridDim.z takes the k range [k0, k0 + kn) (whole BK
    // tiles, the last slice the rest) and writes its own [M, ldc] slab C + z * M * ldc.
    if (gridDim.z > 1) {
        const int ktiles_all = (K + BK - 1) / BK;
        const int per = (ktiles_all + gridDim.z - 1) / gridDim.z;
        const int k0 = min(K, (int)blockIdx.z * per * BK);
        const int kn = min(K - k0, per * BK);
        A += TA ? (u64)k0 * (u64)lda : (u64)k0;
        B += TB ? (u64)k0 : (u64)k0 * (u64)ldb;
        K = kn;  // (C moves to the slice's slab in the epilogue)
    }

    TileLoader<!TA> la;  // A untransposed is k-contiguous
    TileLoader<TB> lb;   // B transposed is k-contiguous
    la.init(A, lda, m0, M, K, tid);
    lb.init(B, ldb, n0, N, K, tid);

    // Warp tiling: warps 4 (m) x 2 (n), lanes 4 (m) x 8 (n); each thread owns rows
    // {tm .. tm+3, tm+64 .. tm+67} and columns {tn .. tn+3, tn+64 .. tn+67} of the block tile.
    const int warp = tid / 32, lane = tid % 32;
    const int tm = (warp / 2) * 16 + (lane / 8) * 4;
    const int tn = (warp % 2) * 32 + (lane % 8) * 4;

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    const int ktiles = (K + BK - 1) / BK;
    if (ktiles > 0) {
        la.load();
        lb.load();
        la.store(&As[0][0][0]);
        lb.store(&Bs[0][0][0]);
        __syncthreads();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        const int cur = kt & 1;
        const bool more = kt + 1 < ktiles;
        if (more) {  // next tile's global loads are in flight during this tile's math
            la.advance();
            lb.advance();
            la.load();
            lb.load();
        }
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][k][tm]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][k][tm + 64]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][k][tn]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][k][tn + 64]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (more) {  // the other buffer was last read before the previous __syncthreads
            la.store(&As[cur ^ 1][0][0]);
            lb.store(&Bs[cur ^ 1][0][0]);
        }
        __syncthreads();
    }

    // Epilogue: C = alpha * acc + beta * C, float4 where possible.
    C += (u64)blockIdx.z * (u64)M * (u64)ldc;  // split-K slab (0 without a split)
    const bool cvec = aligned16(C) && (ldc % 4 == 0);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = m0 + tm + (i < 4 ? i : 60 + i);  // i >= 4: rows tm + 64 + (i - 4)
        if (row >= M) continue;
        float* crow = C + (u64)row * (u64)ldc;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int col = n0 + tn + h * 64;
            float v[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) v[j] = alpha * acc[i][h * 4 + j];
            if (cvec && col + 4 <= N) {
                float4* cp = reinterpret_cast<float4*>(crow + col);
                if (beta != 0.0f) {
                    const float4 o = *cp;
                    v[0] = fmaf(beta, o.x, v[0]);
                    v[1] = fmaf(beta, o.y, v[1]);
                    v[2] = fmaf(beta, o.z, v[2]);
                    v[3] = fmaf(beta, o.w, v[3]);
                }
                *cp = make_float4(v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (col + j < N) {
                        float o = v[j];
                        if (beta != 0.0f) o = fmaf(beta, crow[col + j], o);
                        crow[col + j] = o;
                    }
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(NTHREADS, SGEMM_MIN_BLOCKS)
sgemm_nn(int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
         float beta, float* C, int ldc) {
    sgemm_body<false, false>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
extern "C" __global__ void __launch_bounds__(NTHREADS, SGEMM_MIN_BLOCKS)
sgemm_nt(int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
         float beta, float* C, int ldc) {
    sgemm_body<false, true>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
extern "C" __global__ void __launch_bounds__(NTHREADS, SGEMM_MIN_BLOCKS)
sgemm_tn(int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
         float beta, float* C, int ldc) {
    sgemm_body<true, false>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
extern "C" __global__ void __launch_bounds__(NTHREADS, SGEMM_MIN_BLOCKS)
sgemm_tt(int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
         float beta, float* C, int ldc) {
    sgemm_body<true, true>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// C[i][j] = alpha * (ws[0][i][j] + ws[1][i][j] + ... + ws[S-1][i][j]) (+ beta * C[i][j], not read
// when beta == 0), in that order: deterministic. ws is S dense [M, N] slabs. Launch: block 256,
// any grid (grid-stride over M * N).
extern "C" __global__ void sgemm_splitk_reduce(const float* __restrict__ ws, int splits, int M, int N,
                                               float alpha, float beta, float* __restrict__ C, int ldc) {
    const u64 total = (u64)M * (u64)N, slab = total;
    for (u64 e = global_tid(); e < total; e += grid_threads()) {
        float acc = ws[e];
        for (int z = 1; z < splits; ++z) acc += ws[(u64)z * slab + e];
        float v = alpha * acc;
        const u64 i = e / (u64)N, j = e % (u64)N;
        float* c = C + i * (u64)ldc + j;
        if (beta != 0.0f) v = fmaf(beta, *c, v);
        *c = v;
    }
}

// ---- sgemm_strip_*: the last W <= 8 columns (see the top of the file) ----------------------------
#define STRIP_S 32   // k slices per output
#define STRIP_RB 8   // rows of C per block
#define STRIP_W 8    // most strip columns

// Shared-memory pitches, chosen so both the staging stores (lanes as the loads run) and the
// compute reads (lanes = slices) are free of bank conflicts.
template <bool TA> struct StripAPitch { static constexpr int v = TA ? 548 : 560; };  // 32 x 17 + pad
template <bool TB> struct StripBPitch { static constexpr int j = TB ? 16 : 20, z = 8 * j + 1; };

template <bool TA, bool TB>
__device__ __forceinline__ void strip_body(int M, int W, int K, float alpha, const float* __restrict__ A,
                                           int lda, const float* __restrict__ B, int ldb, float beta,
                                           float* __restrict__ C, int ldc) {
    constexpr int AP = StripAPitch<TA>::v, BJ = StripBPitch<TB>::j, BZ = StripBPitch<TB>::z;
    __shared__ float As[STRIP_RB * 560];  // [r][z][kk]: r * AP + z * 17 + kk
    __shared__ float Bs[STRIP_S * 161];   // [z][j][kk]: z * BZ + j * BJ + kk
    const int t = threadIdx.x;
    const int i0 = blockIdx.x * STRIP_RB;
    const int ktiles = (int)(((long long)K + 15) / 16);
    const int T = (ktiles + STRIP_S - 1) / STRIP_S;  // k tiles per slice
    // Staging: element u (0..15) of this thread is slice z = 2u + t / 128 at one (row, kk) of A
    // and one (column, kk) of B given by t % 128, so its k is k0 + 32 T u + 16 s in step s.
    //   A k-contiguous (TA false): kk = t % 16, r = (t % 128) / 16 (2 rows x 16 k per warp load);
    //   A row-contiguous (TA true): r = t % 8, kk = (t % 128) / 8 (8 rows x 4 k).
    //   B column-contiguous (TB false): j = t % 8, kk = (t % 128) / 8 (4 k x 8 columns);
    //   B k-contiguous (TB true): kk = t % 16, j = (t % 128) / 16 (2 columns x 16 k).
    const int tl = t % 128, zb = t / 128;
    const int ar = TA ? t % 8 : tl / 16, akk = TA ? tl / 8 : t % 16;
    const int bj = TB ? tl / 16 : t % 8, bkk = TB ? t % 16 : tl / 8;
    const long long ak0 = (long long)zb * T * 16 + akk, bk0 = (long long)zb * T * 16 + bkk;
    const long long kstep = 32LL * T;  // k distance between u and u + 1
    const bool arow = i0 + ar < M, bcol = bj < W;
    // rows / columns past the edge are never read; clamp so the pointers stay inside the matrices
    const float* ap = TA ? A + (arow ? i0 + ar : 0) : A + (u64)(arow ? i0 + ar : 0) * lda;
    const float* bp = TB ? B + (u64)(bcol ? bj : 0) * ldb : B + (bcol ? bj : 0);
    const long long astride = TA ? kstep * lda : kstep, bstride = TB ? kstep : kstep * ldb;
    float ra[16], rb[16];
    auto load = [&](int s) {
        const long long ka = ak0 + 16LL * s, kb = bk0 + 16LL * s;
        const float* pa = ap + (TA ? ka * lda : ka);
        const float* pb = bp + (TB ? kb : kb * ldb);
#pragma unroll
        for (int u = 0; u < 16; ++u) ra[u] = (arow && ka + u * kstep < K) ? pa[u * astride] : 0.0f;
#pragma unroll
        for (int u = 0; u < 16; ++u) rb[u] = (bcol && kb + u * kstep < K) ? pb[u * bstride] : 0.0f;
    };

    const int r = t / 32, z = t % 32;  // compute role: warp = row, lane = slice
    float acc[STRIP_W];
#pragma unroll
    for (int j = 0; j < STRIP_W; ++j) acc[j] = 0.0f;
    if (T > 0) load(0);
    for (int s = 0; s < T; ++s) {
        __syncthreads();  // the previous step's FMAs are done with As / Bs
#pragma unroll
        for (int u = 0; u < 16; ++u) {
            As[ar * AP + (2 * u + zb) * 17 + akk] = ra[u];
            Bs[(2 * u + zb) * BZ + bj * BJ + bkk] = rb[u];
        }
        __syncthreads();
        if (s + 1 < T) load(s + 1);  // in flight during this step's FMAs
        const float* a = &As[r * AP + z * 17];
        const float* b = &Bs[z * BZ];
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
            const float av = a[kk];
#pragma unroll
            for (int j = 0; j < STRIP_W; ++j)
                if (j < W) acc[j] = fmaf(av, b[j * BJ + kk], acc[j]);
        }
    }
    // The 32 slice sums of each output, added in slice order by one thread.
    __syncthreads();
    float* P = As;  // [r][j][z], pitch 33
#pragma unroll
    for (int j = 0; j < STRIP_W; ++j)
        if (j < W) P[(r * STRIP_W + j) * 33 + z] = acc[j];
    __syncthreads();
    if (t < STRIP_RB * STRIP_W) {
        const int rr = t / STRIP_W, j = t % STRIP_W, i = i0 + rr;
        if (j < W && i < M) {
            const float* p = &P[(rr * STRIP_W + j) * 33];
            float sum = p[0];
            for (int zz = 1; zz < STRIP_S; ++zz) sum += p[zz];
            float v = alpha * sum;
            float* c = C + (u64)i * ldc + j;
            if (beta != 0.0f) v = fmaf(beta, *c, v);
            *c = v;
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
sgemm_strip_nn(int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
               float beta, float* C, int ldc) {
    strip_body<false, false>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
extern "C" __global__ void __launch_bounds__(256)
sgemm_strip_nt(int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
               float beta, float* C, int ldc) {
    strip_body<false, true>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
extern "C" __global__ void __launch_bounds__(256)
sgemm_strip_tn(int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
               float beta, float* C, int ldc) {
    strip_body<true, false>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
extern "C" __global__ void __launch_bounds__(256)
sgemm_strip_tt(int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
               float beta, float* C, int ldc) {
    strip_body<true, true>(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
