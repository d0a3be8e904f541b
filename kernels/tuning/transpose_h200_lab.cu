// kernels/tuning/transpose_h200_lab.cu — issue 34 item 4: the odd-shape transposes (0.739x of the
// D2D copy on an H200) and sum(dim=0) of 16384 x 8191 (0.867x PyTorch on an H200).
//
// Build and run (GPU machine, from the repository root; no Rust there; ~1 minute on an H200):
//   nvcc -O3 -std=c++17 -arch=sm_90 -Xptxas -v -o /tmp/tlab kernels/tuning/transpose_h200_lab.cu 2>/tmp/ptxas.txt \
//     && python3 kernels/tuning/colsum_torch.py > /tmp/colsum_torch.txt; /tmp/tlab /tmp/colsum_torch.txt
// (`/tmp/tlab` alone also works: the column-sum rows then have no PyTorch ratio. Optional second
// argument: `t` = transposes only, `c` = column sums only.)
//
// Every candidate is checked before it is timed: transposes bit-exactly against a CPU transpose
// (uploaded, compared bit for bit on the GPU); column sums against a CPU sum in f64 with the sweep's tolerance |got - want| <=
// 1e-3 + 2e-7 rows + 1e-5 |want|. A candidate that fails prints FAIL and is not timed.
// Timing as kernels_bench's sweep: R back-to-back calls between two events (R so one trial is
// ~1 ms), median of 7 trials after a warm-up; the D2D row is cudaMemcpyAsync of the same bytes in
// the same run. TB/s counts 8 bytes per element (read + write); xD2D = D2D time / our time.
//
// WHY (what the SASS says; nvdisasm of the library's sm_90 build, not measured on a GPU yet):
// transpose_tiled_aligned's load loop `continue`s on rows outside the matrix, so the compiler
// cannot hoist the loads over the branches: the SASS is 9 x (3 LDG, 3 STS), i.e. each warp has
// ONE row (3 loads, <= 256 bytes) in flight at a time. 32 registers, 8 blocks of 256 threads per
// SM: 64 warps x ~256 B = 16 KB in flight per SM, ~2.1 MB on 132 SMs; at ~0.8 us loaded latency
// that is ~2.6 TB/s whatever the HBM: the issue's "2.5 TB/s on the H100, 2.6 on the H200".
// (transpose_tiled_padded issues its 16 loads before its first STS: 0.94x on an H200.)
// reduce_cols_sum_f32 (16384 x 8191 takes it: 8191 is not a multiple of 4): 59 registers -> 4
// blocks of 256 per SM = 528 slots; the library's plan launches 256 column blocks x 5 parts =
// 1280 blocks = 2.4 waves (the last 0.4 wave runs at a fifth of the GPU), and 8 loads per thread
// x 1024 threads = 32 KB in flight per SM (~4.2 MB: below the H200's ~4.8 TB/s x latency).
//
// Candidates (the library's kernels are #included as they are and run first, as `lib`):
//  transposes, tx<TR, TC, NW, MINB>: the library's sector-cut tile (output rows cut on 32-byte
//    sectors, lanes following 128-byte lines both ways, column-major tile order) with EVERY load of
//    the tile issued before the first shared store (predicated, no branch): TR x TC tile (TR input
//    rows = the length of each output segment, TC input columns), NW warps, __launch_bounds__
//    (32 NW, MINB). Bigger TR: fewer partial store lines per element and 8 / TR extra rows read
//    instead of 8 / 64; bigger TC: fewer partial load lines.
//    `tal` = the library's transpose_tiled_aligned forced on the aligned shapes (diagnostic: is the
//    cost its structure or the odd addresses?).
//  column sums, cs<U, NY, MINB> + a plan: U loads in flight per thread, block (32, NY), one live
//    64-bit address (the library's body keeps 8: 59 registers), parts of the reduced dimension
//    chosen as the library does (`lib`), as one full wave of the resident slots (`w1`: no tail),
//    or as >= 4 waves (`w4`: small tail); the [P, cols] partials finish with the library's
//    reduce_cols_sum_f32 (timed with it). `cols lib-kernel w1/w4`: the library kernel, only the
//    plan changed; `lb8`: the library body under __launch_bounds__(256, 8) (spills: a data point).
//
// Since the integration (kernels/TUNING.md, "H200 transposes and column sums"), `lib` runs the
// library's new kernels and plans: transpose_tiled_aligned_128x64 / _128x128 by its tile rule,
// reduce_cols_sum_f32 = cs<16, 8, 4>'s body, lib_col_parts = its plan; the recorded output in
// docs/results/session41/ is from before it.
// If a candidate wins, the library files that change: tx -> kernels/cuda/coalescing.cu
// (transpose_aligned_body: loads hoisted / tile shape; transpose_tiled_aligned_ld shares it) and
// kernels/src/ops/coalescing.rs (grid (ceil(rows / TR), ceil(cols / TC)), block 32 NW, dynamic
// smem above 48 KB, transpose_ld's 65535-tile limit); cs -> kernels/cuda/reduce.cu (reduce_cols
// body, all dtypes) and kernels/src/ops/reduce_dim.rs (col_parts from the resident blocks per SM
// instead of a fixed 8 per SM, its unit tests); the plan alone -> reduce_dim.rs only.
#include <cuda_runtime.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../cuda/coalescing.cu"
#include "../cuda/reduce.cu"

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

// ---------------------------------------------------------------------------------------------
// Transpose candidate. in [rows, cols] -> out [cols, rows]; any rows, cols >= 1.
// Launch: block 32 NW, grid (ceil(rows / TR), ceil(cols / TC)), dynamic shared memory
// (TR + 8) (TC + 1) floats. tile[i][j] = in[r0 - 8 + i][c0 + j].
template <int TR, int TC, int NW>
__device__ __forceinline__ void tx_body(const float* __restrict__ in, float* __restrict__ out, int rows, int cols,
                                        int r0, int c0) {
    constexpr int IR = TR + 8, P = TC + 1;
    constexpr int RPW = (IR + NW - 1) / NW;  // input rows per warp
    constexpr int NLI = TC / 32 + 1;         // 128-byte lines per input segment (TC floats)
    constexpr int OPW = (TC + NW - 1) / NW;  // output rows per warp
    constexpr int NLO = TR / 32 + 1;         // lines per output segment (<= TR + 7 floats, sector start)
    extern __shared__ float tile[];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int cw = min(TC, cols - c0);
    float v[RPW][NLI];
    int mis[RPW];
    // every load first (predicated, no branch around them), then every shared store
#pragma unroll
    for (int j = 0; j < RPW; ++j) {
        const int i = w + NW * j, r = r0 - 8 + i;
        const bool ok = (IR % NW == 0 || i < IR) && r >= 0 && r < rows;
        const float* seg = in + (u64)(ok ? r : 0) * (u64)cols + c0;
        const int m = (int)(((u64)seg >> 2) & 31);  // floats past its line
        mis[j] = ok ? m : (1 << 20);                // a row outside: no lane stores
#pragma unroll
        for (int k = 0; k < NLI; ++k) {
            const int o = 32 * k + lane - m;
            v[j][k] = (ok && o >= 0 && o < cw) ? __ldg(seg + o) : 0.f;
        }
    }
#pragma unroll
    for (int j = 0; j < RPW; ++j) {
        const int i = w + NW * j;
#pragma unroll
        for (int k = 0; k < NLI; ++k) {
            const int o = 32 * k + lane - mis[j];
            if (o >= 0 && o < cw) tile[i * P + o] = v[j][k];
        }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < OPW; ++j) {
        const int i = w + NW * j;  // output row c0 + i
        if ((TC % NW == 0 || i < TC) && i < cw) {
            float* row = out + (u64)(c0 + i) * (u64)rows;
            const int s = (int)(((u64)(row + r0) >> 2) & 7);  // floats past a sector
            const int lo = r0 == 0 ? 0 : r0 - s;
            const int hi = r0 + TR >= rows ? rows : r0 + TR - s;
            float* seg = row + lo;
            const int m = (int)(((u64)seg >> 2) & 31);
            const int base = lo - (r0 - 8);
#pragma unroll
            for (int k = 0; k < NLO; ++k) {
                const int o = 32 * k + lane - m;
                if (o >= 0 && o < hi - lo) seg[o] = tile[(base + o) * P + i];
            }
        }
    }
}

template <int TR, int TC, int NW, int MINB>
__global__ void __launch_bounds__(NW * 32, MINB)
tx(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    tx_body<TR, TC, NW>(in, out, rows, cols, blockIdx.x * TR, blockIdx.y * TC);
}

// Session 58: tx's tile in a swizzled order. 1-D grid of one block per tile; the tiles go in
// groups of G tile columns, and within a group the tile column runs fastest: the blocks resident
// together (~264 of 128 x 64 on an H200) cover a G x (264 / G) patch of tiles, so each input row
// is read in runs of G x TC floats and each output row written in runs of (264 / G) x TR floats
// (tx's column-major order: runs of TC read, whole output rows written). G = 1 is tx's order.
// Question: is the large odd shapes' 0.82x of the D2D copy DRAM locality of the 256-byte reads?
template <int TR, int TC, int NW, int MINB, int G>
__global__ void __launch_bounds__(NW * 32, MINB)
txs(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    const int tiles_r = (rows + TR - 1) / TR, tiles_c = (cols + TC - 1) / TC;
    const int b = blockIdx.x, gsz = G * tiles_r;
    const int g = b / gsz, u = b - g * gsz;
    const int gw = min(G, tiles_c - g * G);  // the last group may be narrower
    const int tr = u / gw, tc = g * G + (u - tr * gw);
    tx_body<TR, TC, NW>(in, out, rows, cols, tr * TR, tc * TC);
}

// ---------------------------------------------------------------------------------------------
// Persistent, pipelined transpose candidate (session 56): tx's tile and sector cut, but a grid of
// resident blocks walking tiles t = blockIdx.x, + gridDim.x, ... (row tiles fastest: the tiles
// sharing output lines run together, as tx's column-major grid does), and the NEXT tile's loads
// issued into registers before this tile's output stores from shared memory, so a block always
// has loads in flight while it writes (tx: a block loads, waits, then writes; the overlap came
// only from other blocks). Launch: block 32 NW, any 1-D grid (resident blocks), dynamic shared
// memory (TR + 8) (TC + 1) floats.
template <int TR, int TC, int NW, int MINB>
__global__ void __launch_bounds__(NW * 32, MINB)
txp(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    constexpr int IR = TR + 8, P = TC + 1;
    constexpr int RPW = (IR + NW - 1) / NW;
    constexpr int NLI = TC / 32 + 1;
    constexpr int OPW = (TC + NW - 1) / NW;
    constexpr int NLO = TR / 32 + 1;
    extern __shared__ float tile[];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int tiles_r = (rows + TR - 1) / TR, tiles = tiles_r * ((cols + TC - 1) / TC);
    float v[RPW][NLI];
    int mis[RPW];
    int t = blockIdx.x;
    if (t >= tiles) return;
    auto load = [&](int tt) {
        const int r0 = (tt % tiles_r) * TR, c0 = (tt / tiles_r) * TC;
        const int cw = min(TC, cols - c0);
#pragma unroll
        for (int j = 0; j < RPW; ++j) {
            const int i = w + NW * j, r = r0 - 8 + i;
            const bool ok = (IR % NW == 0 || i < IR) && r >= 0 && r < rows;
            const float* seg = in + (u64)(ok ? r : 0) * (u64)cols + c0;
            const int m = (int)(((u64)seg >> 2) & 31);
            mis[j] = ok ? m : (1 << 20);
#pragma unroll
            for (int k = 0; k < NLI; ++k) {
                const int o = 32 * k + lane - m;
                v[j][k] = (ok && o >= 0 && o < cw) ? __ldg(seg + o) : 0.f;
            }
        }
    };
    load(t);
    for (;;) {
        const int r0 = (t % tiles_r) * TR, c0 = (t / tiles_r) * TC;
        const int cw = min(TC, cols - c0);
#pragma unroll
        for (int j = 0; j < RPW; ++j) {
            const int i = w + NW * j;
#pragma unroll
            for (int k = 0; k < NLI; ++k) {
                const int o = 32 * k + lane - mis[j];
                if (o >= 0 && o < cw) tile[i * P + o] = v[j][k];
            }
        }
        __syncthreads();
        const int tn = t + gridDim.x;
        if (tn < tiles) load(tn);  // in flight while this tile is written
#pragma unroll
        for (int j = 0; j < OPW; ++j) {
            const int i = w + NW * j;
            if ((TC % NW == 0 || i < TC) && i < cw) {
                float* row = out + (u64)(c0 + i) * (u64)rows;
                const int s = (int)(((u64)(row + r0) >> 2) & 7);
                const int lo = r0 == 0 ? 0 : r0 - s;
                const int hi = r0 + TR >= rows ? rows : r0 + TR - s;
                float* seg = row + lo;
                const int m = (int)(((u64)seg >> 2) & 31);
                const int base = lo - (r0 - 8);
#pragma unroll
                for (int k = 0; k < NLO; ++k) {
                    const int o = 32 * k + lane - m;
                    if (o >= 0 && o < hi - lo) seg[o] = tile[(base + o) * P + i];
                }
            }
        }
        if (tn >= tiles) break;
        __syncthreads();  // every read of the tile done before the next tile overwrites it
        t = tn;
    }
}

// ---------------------------------------------------------------------------------------------
// Column-sum candidate: out[p * cols + c] = sum of rows [p chunk, min(rows, (p + 1) chunk)) of
// column c; thread row ty takes rows r0 + ty, r0 + ty + NY, ... with U loads in flight, the NY
// thread rows combine in order. Launch: block (32, NY), grid (ceil(cols / 32), P).
template <int U, int NY, int MINB>
__global__ void __launch_bounds__(32 * NY, MINB)
cs(const float* __restrict__ in, float* __restrict__ out, int rows, int cols, int chunk) {
    __shared__ float vals[NY][33];
    const int tx_ = threadIdx.x, ty = threadIdx.y;
    const int c = blockIdx.x * 32 + tx_;
    const long long r0 = (long long)blockIdx.y * chunk;
    const long long r1 = min((long long)rows, r0 + chunk);
    float acc = 0.f;
    if (c < cols) {
        const u64 step = (u64)NY * (u64)cols;
        for (long long r = r0 + ty; r < r1; r += (long long)U * NY) {
            const float* p = in + (u64)r * (u64)cols + c;
            float v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {  // walk the pointer: one live 64-bit address, not U
                v[u] = (r + NY * u < r1) ? __ldg(p) : 0.f;
                p += step;
            }
#pragma unroll
            for (int u = 0; u < U; ++u) acc += v[u];
        }
    }
    vals[ty][tx_] = acc;
    __syncthreads();
    if (ty == 0 && c < cols) {
        float s = vals[0][tx_];
#pragma unroll
        for (int j = 1; j < NY; ++j) s += vals[j][tx_];
        out[(u64)blockIdx.y * cols + c] = s;
    }
}
// The library's own reduce_cols body under other launch bounds (registers capped for 8 blocks/SM).
__global__ void __launch_bounds__(256, 8)
lib_cols_lb8(const float* in, float* out, int rows, int cols, int chunk) {
    reduce_cols<float, float, SumOp<float> >(in, out, rows, cols, chunk);
}

__global__ void fill_bits(float* x, u64 n, unsigned seed) {  // random floats in +-[0.5, 1)
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ (unsigned)(i >> 32) * 0x9E3779B9u ^ seed;
        h ^= h >> 15; h *= 0x2c1b3c6du; h ^= h >> 12; h *= 0x297a2d39u; h ^= h >> 15;
        x[i] = __uint_as_float((h & 0x807FFFFFu) | 0x3F000000u);
    }
}
__global__ void fill_unif(float* x, u64 n, unsigned seed) {  // uniform [-1, 1)
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ (unsigned)(i >> 32) * 0x9E3779B9u ^ seed;
        h ^= h >> 15; h *= 0x2c1b3c6du; h ^= h >> 12; h *= 0x297a2d39u; h ^= h >> 15;
        x[i] = (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
}

// first[0] = the smallest i with a[i] != b[i] (bits), or stays ~0.
__global__ void first_diff(const unsigned* a, const unsigned* b, u64 n, unsigned long long* first) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        if (a[i] != b[i]) atomicMin(first, (unsigned long long)i);
}

// ---------------------------------------------------------------------------------------------
// Host side.
static int g_sms = 132;
static cudaEvent_t g_e0, g_e1;

// Median µs per call: warm-up, then R calls between events (R so a trial is ~1 ms), 7 trials.
static double time_us(const std::function<void()>& f) {
    for (int i = 0; i < 3; ++i) f();
    CK(cudaEventRecord(g_e0));
    f();
    CK(cudaEventRecord(g_e1));
    CK(cudaEventSynchronize(g_e1));
    float one = 0;
    CK(cudaEventElapsedTime(&one, g_e0, g_e1));
    const int R = std::max(1, std::min(200, (int)(1.0 / std::max(one, 1e-3f))));
    std::vector<double> t;
    for (int trial = 0; trial < 7; ++trial) {
        CK(cudaEventRecord(g_e0));
        for (int i = 0; i < R; ++i) f();
        CK(cudaEventRecord(g_e1));
        CK(cudaEventSynchronize(g_e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, g_e0, g_e1));
        t.push_back(1000.0 * ms / R);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

static void parallel_for(long long n, const std::function<void(long long, long long)>& f) {
    const int nt = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    std::vector<std::thread> th;
    for (int k = 0; k < nt; ++k)
        th.emplace_back([&, k] { f(n * k / nt, n * (k + 1) / nt); });
    for (auto& t : th) t.join();
}

static void cpu_transpose(const float* in, float* out, long long rows, long long cols) {
    parallel_for((cols + 31) / 32, [&](long long b0, long long b1) {
        for (long long cb = b0 * 32; cb < std::min(cols, b1 * 32); cb += 32)
            for (long long rb = 0; rb < rows; rb += 32)
                for (long long c = cb; c < std::min(cols, cb + 32); ++c)
                    for (long long r = rb; r < std::min(rows, rb + 32); ++r) out[c * rows + r] = in[r * cols + c];
    });
}

struct TxCand {
    const char* name;
    void (*kern)(const float*, float*, int, int);
    int tr, tc, threads;
    size_t smem;
};
#define TXC(TR, TC, NW, MB) \
    TxCand { "tx<" #TR "," #TC "," #NW "," #MB ">", tx<TR, TC, NW, MB>, TR, TC, 32 * NW, (size_t)(TR + 8) * (TC + 1) * 4 }

static const TxCand kTx[] = {
    TXC(64, 64, 8, 1),     // the library's tile, all 27 loads in flight (the one-line fix)
    TXC(64, 64, 8, 4),     // ... capped at 64 registers (4+ blocks/SM)
    TXC(128, 64, 16, 1),   // output segments of 128: 5 lines / 128 floats, 136 rows read per 128
    TXC(64, 128, 16, 1),   // input segments of 128: 5 lines / 128 floats
    TXC(128, 128, 32, 1),  // both (1024 threads, 70 KB smem)
    TXC(256, 64, 32, 1),   // output segments of 256, 264 rows read per 256
    TXC(128, 64, 8, 1),    // 8 warps, 17 rows (51 loads) each: fewer threads, more work
};

struct TxsCand {
    const char* name;
    void (*kern)(const float*, float*, int, int);
    int tr, tc, threads;
    size_t smem;
};
#define TXS(TR, TC, NW, MB, G) \
    TxsCand { "txs<" #TR "," #TC "," #NW "," #MB "," #G ">", txs<TR, TC, NW, MB, G>, TR, TC, 32 * NW, (size_t)(TR + 8) * (TC + 1) * 4 }
static const TxsCand kTxs[] = {
    TXS(128, 64, 16, 1, 1),  // the library's 128 x 64 kernel's order through the 1-D mapping (control)
    TXS(128, 64, 16, 1, 2),
    TXS(128, 64, 16, 1, 4),
    TXS(128, 64, 16, 1, 8),
    TXS(128, 64, 16, 1, 16),
    TXS(128, 64, 16, 1, 32),
    TXS(128, 128, 32, 1, 4),
    TXS(128, 128, 32, 1, 8),
    TXS(128, 128, 32, 1, 16),
};

struct TxpCand {
    const char* name;
    void (*kern)(const float*, float*, int, int);
    int threads;
    size_t smem;
};
#define TXP(TR, TC, NW, MB) \
    TxpCand { "txp<" #TR "," #TC "," #NW "," #MB ">", txp<TR, TC, NW, MB>, 32 * NW, (size_t)(TR + 8) * (TC + 1) * 4 }
static const TxpCand kTxp[] = {
    TXP(128, 64, 16, 2),   // the library's 128 x 64 tile, persistent
    TXP(128, 128, 32, 1),  // the library's 128 x 128 tile, persistent
    TXP(64, 64, 8, 4),
    TXP(128, 64, 8, 2),
};

struct Shape { int rows, cols; };
// kernels_bench --sweep's transpose shapes (examples/src/kernels_bench/sweep/cases.rs).
static const Shape kTrShapes[] = {{512, 512},     {1024, 1024},   {1000, 4097},   {4099, 1023},
                                  {8192, 8192},   {16384, 8192},  {16383, 8191},  {8191, 16385},
                                  {12345, 6789},  {16384, 16384}, {1 << 20, 3},   {3, 1 << 20}};
// The sweep's sum(dim=0) shapes with a reduced dimension > 32 and > 1 column (the rest take the
// row or thin kernels, untouched here).
static const Shape kCsShapes[] = {{4096, 33}, {65536, 128}, {4096, 4096}, {1024, 50257}, {16384, 8191}};

static int skinny_strip(int s) { int f = 8192 / std::max(1, std::min(s, 63)); int l = 0; while ((2 << l) <= f) ++l; return 1 << l; }

static void run_transposes() {
    printf("\n== transposes (f32): us per call, TB/s (8 B per element), x of the same-run D2D copy ==\n");
    printf("%-14s %-18s %10s %8s %7s\n", "shape", "kernel", "us", "TB/s", "xD2D");
    size_t maxn = 0;
    for (auto s : kTrShapes) maxn = std::max(maxn, (size_t)s.rows * s.cols);
    float *d_in, *d_out, *d_cp, *d_ref, *h_in, *h_ref;
    unsigned long long* d_first;
    CK(cudaMalloc(&d_in, maxn * 4));
    CK(cudaMalloc(&d_out, maxn * 4));
    CK(cudaMalloc(&d_cp, maxn * 4));
    CK(cudaMalloc(&d_ref, maxn * 4));  // the CPU transpose, uploaded; candidates compared on the GPU
    CK(cudaMalloc(&d_first, 8));
    CK(cudaMallocHost(&h_in, maxn * 4));
    CK(cudaMallocHost(&h_ref, maxn * 4));
    for (const auto& c : kTx)
        if (c.smem > 48 * 1024) CK(cudaFuncSetAttribute(c.kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c.smem));
    for (const auto& c : kTxp)
        if (c.smem > 48 * 1024) CK(cudaFuncSetAttribute(c.kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c.smem));
    for (const auto& c : kTxs)
        if (c.smem > 48 * 1024) CK(cudaFuncSetAttribute(c.kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c.smem));
    const size_t NTX = sizeof(kTx) / sizeof(kTx[0]), NTXP = sizeof(kTxp) / sizeof(kTxp[0]);
    const size_t NTXS = sizeof(kTxs) / sizeof(kTxs[0]);
    std::vector<double> worst(NTX + NTXP + NTXS + 1, 1e9);  // min xD2D over odd shapes
    for (auto sh : kTrShapes) {
        const int rows = sh.rows, cols = sh.cols;
        const size_t n = (size_t)rows * cols;
        fill_bits<<<4 * g_sms, 256>>>(d_in, n, 7u + rows);
        CK(cudaGetLastError());
        CK(cudaMemcpy(h_in, d_in, n * 4, cudaMemcpyDeviceToHost));
        cpu_transpose(h_in, h_ref, rows, cols);
        CK(cudaMemcpy(d_ref, h_ref, n * 4, cudaMemcpyHostToDevice));
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%d", rows, cols);
        const double d2d = time_us([&] { cudaMemcpyAsync(d_cp, d_in, n * 4, cudaMemcpyDeviceToDevice); });
        printf("%-14s %-18s %10.2f %8.3f %7.3f\n", shape, "D2D", d2d, 8.0 * n / d2d * 1e-6, 1.0);
        const bool odd = rows % 32 != 0 || cols % 32 != 0;
        auto row = [&](const char* name, const std::function<void()>& f, int slot) {
            CK(cudaMemset(d_out, 0xff, n * 4));
            f();
            cudaError_t e = cudaDeviceSynchronize();
            if (e == cudaSuccess) e = cudaGetLastError();
            if (e != cudaSuccess) {
                printf("%-14s %-18s FAIL (launch: %s)\n", shape, name, cudaGetErrorString(e));
                exit(1);  // a faulting kernel leaves the context unusable
            }
            unsigned long long i = ~0ull;
            CK(cudaMemcpy(d_first, &i, 8, cudaMemcpyHostToDevice));
            first_diff<<<8 * g_sms, 256>>>((const unsigned*)d_out, (const unsigned*)d_ref, n, d_first);
            CK(cudaMemcpy(&i, d_first, 8, cudaMemcpyDeviceToHost));
            if (i != ~0ull) {
                printf("%-14s %-18s FAIL (first wrong output %llu: out[%llu][%llu])\n", shape, name, i, i / rows, i % rows);
                return;
            }
            const double us = time_us(f);
            printf("%-14s %-18s %10.2f %8.3f %7.3f\n", shape, name, us, 8.0 * n / us * 1e-6, d2d / us);
            if (odd && slot >= 0) worst[slot] = std::min(worst[slot], d2d / us);
        };
        // lib: TransposeAlgo::Auto (kernels/src/ops/coalescing.rs), cudaMalloc'd (256-byte aligned) buffers
        if (rows < 64 || cols < 64) {
            const bool v4 = (cols < 64 ? rows : cols) % 4 == 0;
            const int g = cols < 64 ? (rows + skinny_strip(cols) - 1) / skinny_strip(cols)
                                    : (v4 ? (cols + skinny_strip(rows) - 1) / skinny_strip(rows)
                                          : (int)((n + 1023) / 1024));
            row(v4 ? "lib skinny_v4" : "lib skinny", [&] {
                if (v4) transpose_skinny_v4<<<g, 256>>>(d_in, d_out, rows, cols);
                else transpose_skinny<<<g, 256>>>(d_in, d_out, rows, cols);
            }, -1);
            continue;  // the candidates are for tiles of 64 and more
        }
        const dim3 gp((cols + 63) / 64, (rows + 63) / 64);
        // The library's aligned transpose since its integration: ops::transpose_aligned_tile's
        // rule (128 x 128 for one to four waves of 128 x 128 tiles, else 128 x 64).
        const long long t128 = (long long)((rows + 127) / 128) * ((cols + 127) / 128);
        const bool big = t128 >= g_sms && t128 <= 4LL * g_sms;
        const dim3 ga((rows + 127) / 128, (cols + (big ? 127 : 63)) / (big ? 128 : 64));
        auto lib_aligned = [&] {
            if (big) transpose_tiled_aligned_128x128<<<ga, 1024, 136 * 129 * 4>>>(d_in, d_out, rows, cols);
            else transpose_tiled_aligned_128x64<<<ga, 512, 136 * 65 * 4>>>(d_in, d_out, rows, cols);
        };
        const char* lib_name = big ? "lib aligned 128^2" : "lib aligned 128x64";
        if (odd) {
            row(lib_name, lib_aligned, (int)worst.size() - 1);
            // The library's 128 x 128 kernel since session 56 walks tiles: its op's grid.
            if (big) row("lib walk 128^2", [&] {
                transpose_tiled_aligned_128x128<<<(unsigned)std::min<long long>(t128, g_sms), 1024, 136 * 129 * 4>>>(d_in, d_out, rows, cols);
            }, -1);
        } else {
            row("lib padded", [&] { transpose_tiled_padded<<<gp, dim3(32, 8)>>>(d_in, d_out, rows, cols); }, -1);
            row("tal (forced)", lib_aligned, -1);
        }
        for (size_t k = 0; k < sizeof(kTx) / sizeof(kTx[0]); ++k) {
            const TxCand& c = kTx[k];
            const dim3 g((rows + c.tr - 1) / c.tr, (cols + c.tc - 1) / c.tc);
            row(c.name, [&] { c.kern<<<g, c.threads, c.smem>>>(d_in, d_out, rows, cols); }, (int)k);
        }
        for (size_t k = 0; k < NTXP; ++k) {
            const TxpCand& c = kTxp[k];
            int per_sm = 0;
            CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, c.kern, c.threads, c.smem));
            row(c.name, [&] { c.kern<<<per_sm * g_sms, c.threads, c.smem>>>(d_in, d_out, rows, cols); }, (int)(NTX + k));
        }
        for (size_t k = 0; k < NTXS; ++k) {
            const TxsCand& c = kTxs[k];
            const unsigned g = (unsigned)(((rows + c.tr - 1) / c.tr) * ((cols + c.tc - 1) / c.tc));
            row(c.name, [&] { c.kern<<<g, c.threads, c.smem>>>(d_in, d_out, rows, cols); }, (int)(NTX + NTXP + k));
        }
    }
    printf("\nmin xD2D over the odd shapes (target >= 0.85 on H100 and H200):\n");
    printf("  %-18s %.3f\n", "lib aligned", worst.back());
    for (size_t k = 0; k < NTX; ++k) printf("  %-18s %.3f\n", kTx[k].name, worst[k]);
    for (size_t k = 0; k < NTXP; ++k) printf("  %-18s %.3f\n", kTxp[k].name, worst[NTX + k]);
    for (size_t k = 0; k < NTXS; ++k) printf("  %-18s %.3f\n", kTxs[k].name, worst[NTX + NTXP + k]);
    CK(cudaFree(d_in));
    CK(cudaFree(d_out));
    CK(cudaFree(d_cp));
    CK(cudaFree(d_ref));
    CK(cudaFree(d_first));
    CK(cudaFreeHost(h_in));
    CK(cudaFreeHost(h_ref));
}

// ---- column sums ------------------------------------------------------------------------------
typedef void (*ColsK)(const float*, float*, int, int, int);
struct CsCand {
    const char* name;
    ColsK kern;
    int ny;
    int plan;  // 0: the library's col_parts; 1: one full wave of resident blocks; 2: >= 4 waves
};
static const CsCand kCs[] = {
    {"cols lib-kernel w1", reduce_cols_sum_f32, 8, 1},  // the plan alone: 4/SM -> 4 parts, 1024 blocks
    {"cols lib-kernel w4", reduce_cols_sum_f32, 8, 2},
    {"lb8 w1 (spills)", lib_cols_lb8, 8, 1},            // the register cap alone (spills in its loop)
    {"cs<8,8,8> w1", cs<8, 8, 8>, 8, 1},                // 8 loads, pointer walk: 32 regs, 8/SM
    {"cs<8,8,8> w4", cs<8, 8, 8>, 8, 2},
    {"cs<8,8,6> w1", cs<8, 8, 6>, 8, 1},
    {"cs<16,8,4> w1", cs<16, 8, 4>, 8, 1},              // 16 loads in flight: 39 regs, 6/SM
    {"cs<16,8,4> w4", cs<16, 8, 4>, 8, 2},
    {"cs<8,16,4> w1", cs<8, 16, 4>, 16, 1},             // 512 threads, 16 thread rows
};

// The library's ops::reduce_dim plan for (1, size, inner) f32 since the integration: col16_parts
// (8 blocks per SM) where inner % 4 == 0, else col_parts (no split when the column blocks fill
// COLS_BLOCKS_PER_SM = 6 per SM once, else parts for four waves).
static int lib_col_parts(int size, int inner) {
    const long long colb = std::max(1, (inner + 31) / 32);
    long long want;
    if (inner % 4 == 0) {
        want = (8LL * g_sms + colb - 1) / colb;
    } else {
        const long long slots = 6LL * g_sms;
        want = colb >= slots ? 1 : (4 * slots + colb - 1) / colb;
    }
    return (int)std::max(1LL, std::min(std::min(want, (long long)(size + 63) / 64), 65535LL));
}

static void run_colsums(const char* torch_file) {
    std::vector<std::pair<Shape, double>> torch_us;
    if (torch_file) {
        if (FILE* f = fopen(torch_file, "r")) {
            int r, c;
            double us;
            char line[256];
            while (fgets(line, sizeof line, f))
                if (sscanf(line, "%d %d %lf", &r, &c, &us) == 3) torch_us.push_back({{r, c}, us});
            fclose(f);
        }
    }
    printf("\n== sum(dim=0) (f32): us per call (first pass + the finishing pass), GB/s (4 B in per element) ==\n");
    printf("check: |got - want| <= 1e-3 + 2e-7 rows + 1e-5 |want| against a CPU f64 sum\n");
    printf("%-14s %-20s %6s %10s %8s %8s\n", "shape", "kernel", "parts", "us", "GB/s", "xTorch");
    size_t maxn = 0;
    for (auto s : kCsShapes) maxn = std::max(maxn, (size_t)s.rows * s.cols);
    float *d_x, *d_out, *d_part;
    CK(cudaMalloc(&d_x, maxn * 4));
    CK(cudaMalloc(&d_out, 65536 * 4 * 4));
    CK(cudaMalloc(&d_part, (size_t)64 << 20));
    std::vector<float> h_x(maxn), h_out;
    for (auto sh : kCsShapes) {
        const int rows = sh.rows, cols = sh.cols;
        const size_t n = (size_t)rows * cols;
        fill_unif<<<4 * g_sms, 256>>>(d_x, n, 6u + cols);
        CK(cudaMemcpy(h_x.data(), d_x, n * 4, cudaMemcpyDeviceToHost));
        std::vector<double> want(cols, 0.0);
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < cols; ++c) want[c] += h_x[(size_t)r * cols + c];
        h_out.assign(cols, 0.f);
        double tus = 0;
        for (auto& t : torch_us)
            if (t.first.rows == rows && t.first.cols == cols) tus = t.second;
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%d", rows, cols);
        const int colb = (cols + 31) / 32;
        auto launch = [&](ColsK k, int ny, int parts, bool wide) {
            const int chunk = (rows + parts - 1) / parts, P = (rows + chunk - 1) / chunk;
            const dim3 g(wide ? (cols + 127) / 128 : colb, P);
            if (P == 1) {
                k<<<g, dim3(32, ny)>>>(d_x, d_out, rows, cols, chunk);
            } else {
                k<<<g, dim3(32, ny)>>>(d_x, d_part, rows, cols, chunk);
                reduce_cols_sum_f32<<<dim3(colb, 1, 1), dim3(32, 8)>>>(d_part, d_out, P, cols, P);
            }
        };
        auto row = [&](const char* name, ColsK k, int ny, int parts, bool wide) {
            const int chunk = (rows + parts - 1) / parts, P = (rows + chunk - 1) / chunk;
            CK(cudaMemset(d_out, 0xff, cols * 4));
            launch(k, ny, parts, wide);
            CK(cudaDeviceSynchronize());
            CK(cudaGetLastError());
            CK(cudaMemcpy(h_out.data(), d_out, cols * 4, cudaMemcpyDeviceToHost));
            for (int c = 0; c < cols; ++c) {
                const double g = h_out[c], w = (double)(float)want[c];
                if (!(std::fabs(g - w) <= 1e-3 + 2e-7 * rows + 1e-5 * std::fabs(w))) {
                    printf("%-14s %-20s %6d FAIL (column %d: %g vs %g)\n", shape, name, P, c, g, w);
                    return;
                }
            }
            const double us = time_us([&] { launch(k, ny, parts, wide); });
            const double gbs = (4.0 * n + 4.0 * cols) / us * 1e-3;
            if (tus > 0) printf("%-14s %-20s %6d %10.2f %8.1f %8.3f\n", shape, name, P, us, gbs, tus / us);
            else printf("%-14s %-20s %6d %10.2f %8.1f %8s\n", shape, name, P, us, gbs, "-");
        };
        if (tus > 0) printf("%-14s %-20s %6s %10.2f %8.1f %8.3f\n", shape, "torch.sum(x, 0)", "", tus, (4.0 * n + 4.0 * cols) / tus * 1e-3, 1.0);
        // lib: ops::reduce_dim::cols: reduce_cols16 where cols % 4 == 0 (cudaMalloc'd x is aligned)
        const bool wide = cols % 4 == 0;
        row(wide ? "lib (cols16)" : "lib (cols)", wide ? reduce_cols16_sum_f32 : reduce_cols_sum_f32, 8,
            lib_col_parts(rows, cols), wide);
        for (const auto& c : kCs) {
            int per_sm = 0;
            CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, c.kern, 32 * c.ny, 0));
            const long long slots = (long long)per_sm * g_sms;
            int parts = lib_col_parts(rows, cols);
            if (c.plan == 1) parts = (int)std::max(1LL, slots / colb);
            if (c.plan == 2) parts = (int)((4 * slots + colb - 1) / colb);
            parts = std::max(1, std::min(parts, std::max(1, rows / 64)));
            row(c.name, c.kern, c.ny, parts, false);
        }
    }
    CK(cudaFree(d_x));
    CK(cudaFree(d_out));
    CK(cudaFree(d_part));
}

int main(int argc, char** argv) {
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    g_sms = p.multiProcessorCount;
    printf("%s, %d SMs, L2 %d MB, compute %d.%d\n", p.name, g_sms, p.l2CacheSize >> 20, p.major, p.minor);
    CK(cudaEventCreate(&g_e0));
    CK(cudaEventCreate(&g_e1));
    auto regs = [](const void* f, const char* name) {
        cudaFuncAttributes a;
        CK(cudaFuncGetAttributes(&a, f));
        printf("  %-22s %3d registers, %6zu B static smem, %zu B local\n", name, a.numRegs, a.sharedSizeBytes, a.localSizeBytes);
    };
    printf("kernels:\n");
    CK(cudaFuncSetAttribute(transpose_tiled_aligned_128x128, cudaFuncAttributeMaxDynamicSharedMemorySize, 136 * 129 * 4));
    regs((const void*)transpose_tiled_aligned_128x64, "transpose_tiled_aligned_128x64");
    regs((const void*)transpose_tiled_aligned_128x128, "transpose_tiled_aligned_128x128");
    regs((const void*)transpose_tiled_padded, "transpose_tiled_padded");
    for (const auto& c : kTx) {
        int per_sm = 0;
        if (c.smem > 48 * 1024) CK(cudaFuncSetAttribute(c.kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c.smem));
        CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, c.kern, c.threads, c.smem));
        regs((const void*)c.kern, c.name);
        printf("  %-22s %d blocks/SM (%zu B dynamic smem)\n", "", per_sm, c.smem);
    }
    regs((const void*)reduce_cols_sum_f32, "reduce_cols_sum_f32");
    for (const auto& c : kCs) regs((const void*)c.kern, c.name);
    const char* torch_file = argc > 1 && strlen(argv[1]) > 1 ? argv[1] : nullptr;
    const char* only = argc > 2 ? argv[2] : (argc > 1 && strlen(argv[1]) == 1 ? argv[1] : "");
    if (strcmp(only, "c") != 0) run_transposes();
    if (strcmp(only, "t") != 0) run_colsums(torch_file);
    return 0;
}
