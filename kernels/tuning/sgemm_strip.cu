// kernels/tuning/sgemm_strip.cu — lab candidate (issue 9): the last few columns of an SGEMM whose
// n is just past a multiple of the 128-wide tile (2049 = 16 * 128 + 1, 1025 = 8 * 128 + 1).
//
// Why: with 128 x 128 tiles such an n costs a whole extra column of tiles that computes 1 useful
// column in 128 (1023 x 1025 x 1027: 72 tiles instead of 64, so split-K takes 3 slices of 22 k
// tiles instead of 4 of 17; 2047 x 2049 x 2051: 272 tiles for 264 slots, a second wave). Here the
// main product runs on n' = n - W columns (whole tiles) and this kernel computes the strip
// C[:, n' : n) (W <= 8 columns): it reads op(A) once, so it costs about one pass over A.
//
// Result: every output is the split-K sum with STRIP_S = 32 slices, exactly as
// `reference::sgemm_dot(.., splits = 32)` computes it: slice z takes the whole 16-wide k tiles
// [z T, z T + T) (T = ceil(ceil(K / 16) / 32)), an FMA chain from 0 in increasing k; the slices
// are added in order z = 0, 1, ..; then alpha * sum and fmaf(beta, C, .) unless beta == 0 (C not
// read). Out-of-range k and rows are zero-filled like the tile kernel's edges.
//
// Threads: block 256 = 8 rows (warp = row) x 32 slices (lane = slice). Per step every slice's
// next k tile of the block's 8 rows of op(A) (16 x 8 x 32 floats) and of op(B)'s strip
// (16 x W x 32) is staged through shared memory with coalesced loads (lanes along A's contiguous
// dimension), the next step's loads in flight in registers while the current one is computed.
// Launch: block 256, grid ceil(M / 8); pointers already offset to the strip: B at column n'
// (B + n' untransposed, B + n' * ldb transposed), C at C + n'.
typedef unsigned long long u64;

#define STRIP_S 32   // k slices per output
#define STRIP_RB 8   // rows of C per block
#define STRIP_W 8    // most strip columns

// Shared-memory pitches, chosen so both the staging stores (lanes as the loads run) and the
// compute reads (lanes = slices) are free of bank conflicts.
template <bool TA> struct APitch { static constexpr int v = TA ? 548 : 560; };  // per row: 32 x 17 + pad
template <bool TB> struct BPitch { static constexpr int j = TB ? 16 : 20, z = 8 * j + 1; };

template <bool TA, bool TB>
__device__ __forceinline__ void strip_body(int M, int W, int K, float alpha, const float* __restrict__ A,
                                           int lda, const float* __restrict__ B, int ldb, float beta,
                                           float* __restrict__ C, int ldc) {
    constexpr int AP = APitch<TA>::v, BJ = BPitch<TB>::j, BZ = BPitch<TB>::z;
    __shared__ float As[STRIP_RB * 560];   // [r][z][kk]: r * AP + z * 17 + kk
    __shared__ float Bs[STRIP_S * 161];    // [z][j][kk]: z * BZ + j * BJ + kk
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
    const float* ap = TA ? A + (arow ? i0 + ar : 0) : A + (u64)(arow ? i0 + ar : 0) * lda;
    const float* bp = TB ? B + (u64)(bcol ? bj : 0) * ldb : B + (bcol ? bj : 0);
    const long long astride = TA ? kstep * lda : kstep, bstride = TB ? kstep : kstep * ldb;
    float ra[16], rb[16];
    auto load = [&](int s) {
        const long long ka = ak0 + 16LL * s, kb = bk0 + 16LL * s;
        const float* pa = ap + (TA ? ka * lda : ka);
        const float* pb = bp + (TB ? kb : kb * ldb);
#pragma unroll
        for (int u = 0; u < 16; ++u)
            ra[u] = (arow && ka + u * kstep < K) ? pa[u * astride] : 0.0f;
#pragma unroll
        for (int u = 0; u < 16; ++u)
            rb[u] = (bcol && kb + u * kstep < K) ? pb[u * bstride] : 0.0f;
    };

    const int r = t / 32, z = t % 32;  // compute role: warp = row, lane = slice
    float acc[STRIP_W];
#pragma unroll
    for (int j = 0; j < STRIP_W; ++j) acc[j] = 0.0f;
    if (T > 0) load(0);
    for (int s = 0; s < T; ++s) {
        __syncthreads();  // the previous step's compute is done with As / Bs
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
sgemm_strip_nn(int M, int W, int K, float alpha, const float* A, int lda, const float* B, int ldb,
               float beta, float* C, int ldc) {
    strip_body<false, false>(M, W, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
extern "C" __global__ void __launch_bounds__(256)
sgemm_strip_nt(int M, int W, int K, float alpha, const float* A, int lda, const float* B, int ldb,
               float beta, float* C, int ldc) {
    strip_body<false, true>(M, W, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
extern "C" __global__ void __launch_bounds__(256)
sgemm_strip_tn(int M, int W, int K, float alpha, const float* A, int lda, const float* B, int ldb,
               float beta, float* C, int ldc) {
    strip_body<true, false>(M, W, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
extern "C" __global__ void __launch_bounds__(256)
sgemm_strip_tt(int M, int W, int K, float alpha, const float* A, int lda, const float* B, int ldb,
               float beta, float* C, int ldc) {
    strip_body<true, true>(M, W, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
