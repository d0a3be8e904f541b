// coalescing.cu — how the order of memory accesses decides bandwidth.
//
// A warp's 32 loads are served in 32-byte sectors. If the 32 threads read 32 consecutive floats
// (coalesced) that is 4 sectors for 128 useful bytes; if they read with a stride of 32 floats
// each thread needs its own sector: 32 sectors (1024 bytes moved) for the same 128 useful bytes.
//   * copy_coalesced: the bandwidth ceiling — float4 grid-stride copy (as vector_add_fast).
//   * copy_strided: dst[i] = src[i * stride]; reads waste (stride - 1) / stride of every sector
//     once the stride reaches 8 floats (32 bytes).
//   * transpose_naive: out[c][r] = in[r][c]; reads are coalesced but writes are strided by rows.
//   * transpose_tiled: a 64x64 tile goes through shared memory so both the global read and the
//     global write are coalesced. The column read of the tile (tile[tx + 32 rx][ty + j]) hits the
//     same bank for all 32 threads of a warp: a 32-way bank conflict, on purpose, to be measured.
//   * transpose_tiled_padded: the same with a 64x65 tile: the extra column shifts each row by one
//     bank, so the column read is conflict-free. Each thread moves 16 elements (block 32x8 for a
//     64x64 tile) from fully unrolled loops, so 16 loads are in flight per thread: on an H200 this
//     reached 0.94x the device-to-device copy, where a 32x32 tile (4 per thread) reached 0.83x
//     (kernels/TUNING.md).
// Transposes: in is [rows, cols] row-major, out is [cols, rows] row-major; any rows, cols.
// Launch: copy_*: block 256, any grid. transpose_naive: block (32, 8) EXACTLY,
//   grid (ceil(cols / 32), ceil(rows / 32)) (so rows <= 65535 * 32). transpose_tiled and
//   transpose_tiled_padded: block (32, 8) EXACTLY, grid (ceil(cols / 64), ceil(rows / 64)).
//   transpose_tiled_aligned_*: see there (block 512 or 1024, dynamic shared memory).
#include "dtype.cuh"

#define TILE_DIM 32    // transpose_naive: 32 x 32 outputs per block
#define BLOCK_ROWS 8   // threadIdx.y extent of every transpose block
#define TT 64          // transpose_tiled*: 64 x 64 tile, each thread 2 columns x 8 rows

extern "C" __global__ void copy_coalesced(const float* __restrict__ src, float* __restrict__ dst,
                                          unsigned long long n) {
    const u64 tid = global_tid(), stride = grid_threads();
    u64 done = 0;
    if (aligned16(src, dst)) {
        const u64 n4 = n / 4;
        const float4* s4 = reinterpret_cast<const float4*>(src);
        float4* d4 = reinterpret_cast<float4*>(dst);
        for (u64 i = tid; i < n4; i += stride) d4[i] = s4[i];
        done = n4 * 4;
    }
    for (u64 i = done + tid; i < n; i += stride) dst[i] = src[i];
}

extern "C" __global__ void copy_strided(const float* __restrict__ src, float* __restrict__ dst,
                                        unsigned long long n_out, unsigned long long stride) {
    for (u64 i = global_tid(); i < n_out; i += grid_threads()) dst[i] = src[i * stride];
}

extern "C" __global__ void __launch_bounds__(256)
transpose_naive(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    const int c = blockIdx.x * TILE_DIM + threadIdx.x;
    const int r = blockIdx.y * TILE_DIM + threadIdx.y;
    if (c >= cols) return;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (r + j < rows) out[(u64)c * rows + (r + j)] = in[(u64)(r + j) * cols + c];
}

// PAD = 0: transpose_tiled (bank conflicts); PAD = 1: transpose_tiled_padded.
template <int PAD>
__device__ __forceinline__ void transpose_tiled_body(const float* __restrict__ in,
                                                     float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[TT][TT + PAD];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c0 = blockIdx.x * TT, r0 = blockIdx.y * TT;
    // read a 64x64 tile of `in`: rows r0 + ty + j, columns c0 + tx + 32 cx (coalesced along tx);
    // the loops have constant trip counts, so all 16 loads are issued before any is used
#pragma unroll
    for (int j = 0; j < TT; j += BLOCK_ROWS)
#pragma unroll
        for (int cx = 0; cx < TT / 32; ++cx) {
            const int r = r0 + ty + j, c = c0 + tx + 32 * cx;
            if (r < rows && c < cols) tile[ty + j][tx + 32 * cx] = in[(u64)r * cols + c];
        }
    __syncthreads();
    // write it transposed: out row = in column c0 + ty + j, out column = in row r0 + tx + 32 rx
#pragma unroll
    for (int j = 0; j < TT; j += BLOCK_ROWS)
#pragma unroll
        for (int rx = 0; rx < TT / 32; ++rx) {
            const int orow = c0 + ty + j, ocol = r0 + tx + 32 * rx;
            if (orow < cols && ocol < rows) out[(u64)orow * rows + ocol] = tile[tx + 32 * rx][ty + j];
        }
}

extern "C" __global__ void __launch_bounds__(256)
transpose_tiled(const float* in, float* out, int rows, int cols) { transpose_tiled_body<0>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(256)
transpose_tiled_padded(const float* in, float* out, int rows, int cols) { transpose_tiled_body<1>(in, out, rows, cols); }

// transpose_tiled_aligned_*: the tiles for matrices whose rows do not start on a 128-byte line
// (widths or heights not a multiple of 32). There every row segment a tile writes starts and ends
// inside a 32-byte sector shared with the neighbouring tile, and a sector written in two halves
// by two blocks costs the L2 and DRAM far more than a whole one (measured: 0.66x of the D2D copy
// against 0.95x for aligned shapes). So here each tile of TR input rows writes, for output row c,
// the range [r0 - s_c, r0 + TR - s_c) where s_c (0..7) puts its start on a sector boundary: the
// tiles of one output row partition it into whole sectors (the first tile starts at 0, the last
// ends at rows; TR is a multiple of 8, so every tile of a row has the same s_c). The block
// therefore reads input rows r0 - 8 .. r0 + TR - 1 (TR + 8 rows of TC columns). Lanes follow the
// 128-byte lines on both sides (lane l of instruction k takes the float at line_start + 32 k + l,
// if it belongs to the segment), so a row segment costs only the lines it touches. Tiles run in
// column-major order (blockIdx.x walks down the rows of tiles), so the tiles sharing output lines
// run together.
// Every load of the tile is issued before the first shared store (predicated, no branch around
// them; kernels/tuning/transpose_h200_lab.cu): the earlier 64 x 64 body `continue`d on rows
// outside the matrix, so each warp had one row (<= 256 bytes) in flight at a time and the
// kernel stopped near 2.6 TB/s on an H100 and an H200 alike (0.745x of an H200's D2D copy).
// Two tiles, NW warps each (block 32 NW, one dimension):
//   * 128 x 64, 16 warps: 9 input rows (27 loads) per warp in flight; dynamic shared memory
//     136 x 65 floats (35,360 B); 2 blocks per SM (59 registers on sm_90). 0.85-0.86x of an
//     H200's D2D copy at 12345 x 6789, 16383 x 8191 and 8191 x 16385 (lab figures);
//   * 128 x 128, 32 warps: 5 input rows (25 loads) per warp; 136 x 129 floats (70,176 B: above
//     the 48 KB default, so the host raises the kernel's limit); 1 block per SM. 0.89x / 0.83x at
//     1000 x 4097 / 4099 x 1023, where the 128 x 64 tile gives 0.83x / 0.79x, but 0.69-0.70x on
//     the large odd shapes. Its blocks walk the tiles (transpose_aligned_walk: one block per SM,
//     the next tile's loads in flight while this one is written): 1000 x 4097 / 4099 x 1023
//     10.57 / 10.71 -> 10.10 / 10.28 us on an H200 (session 56, both launches in one run).
// ops::transpose_aligned_tile picks between them (kernels/src/ops/coalescing.rs).
// transpose_tiled_aligned_*_ld: the same, writing output rows ldo >= rows floats apart (out is
// [cols, ldo]; columns rows .. ldo - 1 are not touched): the SGEMM's relayout of a transposed B
// into rows that start on 16-byte boundaries (ldo a multiple of 4), so the product reads them
// with float4 loads.
// Any rows, cols >= 1. Launch: block 32 NW EXACTLY (512 for 128 x 64, 1024 for 128 x 128), grid
// (ceil(rows / TR), ceil(cols / TC)) (note: rows first; so cols <= 65535 TC), dynamic shared
// memory (TR + 8) (TC + 1) 4 bytes. The 128 x 128 entries take any grid (x, y) instead, its
// blocks walking the tiles (the op launches min(tiles, SMs) x 1).
template <int TR, int TC, int NW>
struct AlignedTileRegs {
    static constexpr int IR = TR + 8, P = TC + 1;   // tile[i * P + j] = in[r0 - 8 + i][c0 + j]
    static constexpr int RPW = (IR + NW - 1) / NW;  // input rows per warp
    static constexpr int NLI = TC / 32 + 1;         // 128-byte lines per input segment (<= TC floats)
    static constexpr int OPW = (TC + NW - 1) / NW;  // output rows per warp
    static constexpr int NLO = TR / 32 + 1;         // lines per output segment (<= TR + 7 floats)
    static_assert(TR % 32 == 0 && TC % 32 == 0, "tiles of whole lines");
    float v[RPW][NLI];
    int mis[RPW];

    // Every load of tile (r0, c0) first: input row r0 - 8 + i for i = w, w + NW, ... (a row
    // outside the matrix loads nothing and stores nothing).
    __device__ __forceinline__ void load(const float* __restrict__ in, int rows, int cols, int r0, int c0) {
        const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
        const int cw = min(TC, cols - c0);  // this tile's columns
#pragma unroll
        for (int j = 0; j < RPW; ++j) {
            const int i = w + NW * j, r = r0 - 8 + i;
            const bool ok = (IR % NW == 0 || i < IR) && r >= 0 && r < rows;
            const float* seg = in + (u64)(ok ? r : 0) * (u64)cols + c0;
            const int m = (int)(((u64)seg >> 2) & 31);  // floats past its line
            mis[j] = ok ? m : (1 << 20);                // no lane's offset lands in [0, cw)
#pragma unroll
            for (int k = 0; k < NLI; ++k) {
                const int o = 32 * k + lane - m;  // tile column this lane takes
                v[j][k] = (ok && o >= 0 && o < cw) ? __ldg(seg + o) : 0.f;
            }
        }
    }

    // The loaded rows into the shared tile (cw: the tile's columns).
    __device__ __forceinline__ void stage(float* tile, int cw) const {
        const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
        for (int j = 0; j < RPW; ++j) {
            const int i = w + NW * j;
#pragma unroll
            for (int k = 0; k < NLI; ++k) {
                const int o = 32 * k + lane - mis[j];
                if (o >= 0 && o < cw) tile[i * P + o] = v[j][k];
            }
        }
    }

    // Output rows c0 .. c0 + cw - 1 of tile (r0, c0) from the shared tile, cut on sectors.
    static __device__ __forceinline__ void write(const float* tile, float* __restrict__ out, int rows, int ldo,
                                                 int r0, int c0, int cw) {
        const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
#pragma unroll
        for (int j = 0; j < OPW; ++j) {
            const int i = w + NW * j;  // output row c0 + i
            if ((TC % NW == 0 || i < TC) && i < cw) {
                float* row = out + (u64)(c0 + i) * (u64)ldo;
                const int s = (int)(((u64)(row + r0) >> 2) & 7);  // floats past a sector
                const int lo = r0 == 0 ? 0 : r0 - s;
                const int hi = r0 + TR >= rows ? rows : r0 + TR - s;
                float* seg = row + lo;
                const int m = (int)(((u64)seg >> 2) & 31);
                const int base = lo - (r0 - 8);  // tile row of output lo
#pragma unroll
                for (int k = 0; k < NLO; ++k) {
                    const int o = 32 * k + lane - m;  // offset in [lo, hi)
                    if (o >= 0 && o < hi - lo) seg[o] = tile[(base + o) * P + i];
                }
            }
        }
    }
};

// One tile per block: tile (blockIdx.x, blockIdx.y).
template <int TR, int TC, int NW>
__device__ __forceinline__ void transpose_aligned_body(const float* __restrict__ in, float* __restrict__ out,
                                                       int rows, int cols, int ldo) {
    extern __shared__ float tile[];
    const int r0 = blockIdx.x * TR, c0 = blockIdx.y * TC;
    const int cw = min(TC, cols - c0);
    AlignedTileRegs<TR, TC, NW> t;
    t.load(in, rows, cols, r0, c0);
    t.stage(tile, cw);
    __syncthreads();
    AlignedTileRegs<TR, TC, NW>::write(tile, out, rows, ldo, r0, c0, cw);
}

// Blocks walking tiles (session 56, kernels/tuning/transpose_h200_lab.cu's txp): block b takes
// tiles b, b + blocks, ... of the column-major order (t = tile row + tile rows * tile column; b =
// blockIdx.x + gridDim.x * blockIdx.y, blocks = gridDim.x * gridDim.y), and issues the NEXT
// tile's loads before it writes this one from shared memory, so it has loads in flight while it
// writes. With the 2-D grid of one block per tile (ceil(rows / TR), ceil(cols / TC)) that is
// transpose_aligned_body's walk; the op launches one block per SM instead.
template <int TR, int TC, int NW>
__device__ __forceinline__ void transpose_aligned_walk(const float* __restrict__ in, float* __restrict__ out,
                                                       int rows, int cols, int ldo) {
    extern __shared__ float tile[];
    // 32-bit tile numbers: rows x cols floats exist in memory, so there are fewer than 2^31 / 4
    // tiles of TR x TC >= 2^12 (64-bit division here cost registers the loads need).
    const int tiles_r = (rows + TR - 1) / TR;
    const int tiles = tiles_r * ((cols + TC - 1) / TC);
    const int step = gridDim.x * gridDim.y;
    int t = blockIdx.x + gridDim.x * blockIdx.y;
    if (t >= tiles) return;
    AlignedTileRegs<TR, TC, NW> regs;
    regs.load(in, rows, cols, (t % tiles_r) * TR, (t / tiles_r) * TC);
    for (;;) {
        const int r0 = (t % tiles_r) * TR, c0 = (t / tiles_r) * TC;
        const int cw = min(TC, cols - c0);
        regs.stage(tile, cw);
        __syncthreads();
        const int next = t + step;
        if (next < tiles) regs.load(in, rows, cols, (next % tiles_r) * TR, (next / tiles_r) * TC);
        AlignedTileRegs<TR, TC, NW>::write(tile, out, rows, ldo, r0, c0, cw);
        if (next >= tiles) break;
        __syncthreads();  // every read of the tile done before the next tile is staged
        t = next;
    }
}
extern "C" __global__ void __launch_bounds__(512, 1)
transpose_tiled_aligned_128x64(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    transpose_aligned_body<128, 64, 16>(in, out, rows, cols, rows);
}
extern "C" __global__ void __launch_bounds__(1024, 1)
transpose_tiled_aligned_128x128(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    transpose_aligned_walk<128, 128, 32>(in, out, rows, cols, rows);
}
extern "C" __global__ void __launch_bounds__(512, 1)
transpose_tiled_aligned_128x64_ld(const float* __restrict__ in, float* __restrict__ out, int rows, int cols, int ldo) {
    transpose_aligned_body<128, 64, 16>(in, out, rows, cols, ldo);
}
extern "C" __global__ void __launch_bounds__(1024, 1)
transpose_tiled_aligned_128x128_ld(const float* __restrict__ in, float* __restrict__ out, int rows, int cols, int ldo) {
    transpose_aligned_walk<128, 128, 32>(in, out, rows, cols, ldo);
}

// transpose_skinny: shapes with fewer than 64 rows or fewer than 64 columns, where a 64 x 64
// tile would leave most of its threads idle (a [2^20, 3] transpose was 16384 tiles of 3 columns).
//   tall (cols < 64): a block moves a strip of R rows (8192 / cols rounded down to a power of
//     two) through shared memory, so that its read is one contiguous span
//     in[r0 * cols, (r0 + R) * cols) and its write cols runs out[c * rows + r0, + R), without
//     integer division (element q of the write: c = q >> log2 R, r = q & (R - 1)). One float of
//     padding per 32 keeps the column-wise shared reads free of bank conflicts. Strips of 8192
//     measured faster than of 1024 or 4096 (kernels/TUNING.md, round 3).
//   wide (rows < 64, cols >= 64): no staging: each thread writes 4 outputs in order (coalesced)
//     from in[(e % rows) * cols + e / rows] (32-bit division; the few rows keep the reads within
//     few lines). Staged strips measured slower here.
// 4 or more loads in flight per thread.
// Launch: block 256, grid ceil(rows / R) (tall; the host computes R alike) or
// ceil(rows * cols / 1024) (wide).
#define SKINNY_TILE 8192
__device__ __forceinline__ int floor_log2(unsigned v) { return 31 - __clz(v); }
// Strip length for a short side of `short_side` (< 64): SKINNY_TILE / short_side rounded down to
// a power of two (at least 128).
__device__ __forceinline__ int strip_log2(int short_side) { return floor_log2(SKINNY_TILE / short_side); }

extern "C" __global__ void __launch_bounds__(256)
transpose_skinny(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    // + 256: the tall layout pads one float per 32 (index q + q / 32), so the column-wise reads of
    // the second phase are free of bank conflicts.
    __shared__ float tile[SKINNY_TILE + 256];
    const int t = threadIdx.x;
    if (cols < 64) {
        const int lr = strip_log2(cols), R = 1 << lr;
        const long long r0 = (long long)blockIdx.x * R;
        const int h = (int)min((long long)R, rows - r0);  // rows in this strip
        const int n = h * cols;
        const float* src = in + (u64)r0 * cols;  // tile[q] = src[q]: element (q / cols, q % cols)
        for (int q = t; q < n; q += 1024) {
            float v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (q + 256 * u < n) v[u] = src[q + 256 * u];
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (q + 256 * u < n) tile[(q + 256 * u) + ((q + 256 * u) >> 5)] = v[u];
        }
        __syncthreads();
        for (int q = t; q < cols * R; q += 1024) {
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int e = q + 256 * u, c = e >> lr, r = e & (R - 1);
                const int x = r * cols + c;
                if (c < cols && r < h) out[(u64)c * rows + r0 + r] = tile[x + (x >> 5)];
            }
        }
    } else {  // rows < 64 (so rows * cols < 2^37): outputs in order, 4 loads in flight
        const u64 total = (u64)rows * (u64)cols;
        const u64 e0 = (u64)blockIdx.x * 1024 + t;
        float v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const u64 e = e0 + 256 * u;  // out[e]: column q = e / rows, row m = e % rows
            if (e < total) {
                u64 q, m;
                if ((e >> 32) == 0) {
                    q = (unsigned)e / (unsigned)rows;
                    m = (unsigned)e - (unsigned)q * (unsigned)rows;
                } else {
                    q = e / (u64)rows;
                    m = e - q * (u64)rows;
                }
                v[u] = in[m * (u64)cols + q];
            }
        }
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (e0 + 256 * u < total) out[e0 + 256 * u] = v[u];
    }
}

// transpose_skinny_v4: the skinny shapes again, for aligned data whose long side is a multiple of
// 4 (in and out 16-byte aligned): the strip loop of transpose_skinny waits for each iteration's 4
// scalar loads before the next (a 6144-float strip of [2^20, 3] is 6 round trips to memory);
// here every thread issues all its float4 loads (up to 8: 8192 floats per block) before any
// store, and the block writes its output as float4.
//   tall (cols = S < 64; rows % 4 == 0): a strip of R rows (R as transpose_skinny's) is read as
//     one contiguous span and scattered into a tile kept in output order (y = c R + r), padded
//     4 floats per 32 (y + 4 (y / 32): 4-float groups stay contiguous and 16-byte aligned, the
//     scattered stores within 2-way bank conflicts); then out[c][r0 + r .. + 3] from it.
//   wide (rows = S < 64, cols >= 64; cols % 4 == 0): Q columns per block (Q = 2^floor(log2(8192
//     / S))), each input row's run read as float4 into a tile kept in input order (row pitch
//     Q + 4: the gathers of the output side within 2-way conflicts for S <= 16), then the
//     block's output span out[q0 S, (q0 + w) S) as float4, element y = (q, m) = (y / S, y % S).
// q / S for q < 2^13 is (q * ceil(2^32 / S)) >> 32, exact for S < 64.
// Launch: block 256, grid ceil(rows / R) (tall) or ceil(cols / Q) (wide).
__device__ __forceinline__ int sv_pad(int y) { return y + 4 * (y >> 5); }
__device__ __forceinline__ int sv_div(int q, int d, unsigned magic) {
    return d == 1 ? q : (int)__umulhi((unsigned)q, magic);
}

extern "C" __global__ void __launch_bounds__(256)
transpose_skinny_v4(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ __align__(16) float tile[SKINNY_TILE + SKINNY_TILE / 8];
    const int t = threadIdx.x;
    if (cols < 64) {  // tall
        const int S = cols, lr = strip_log2(S), R = 1 << lr;
        const long long r0 = (long long)blockIdx.x * R;
        const int h = (int)min((long long)R, rows - r0);  // rows in this strip (a multiple of 4)
        const int n4 = h * S / 4;
        const float4* src = reinterpret_cast<const float4*>(in + (u64)r0 * S);
        const unsigned magic = 0xffffffffu / (unsigned)S + 1u;
        float4 v[8];
#pragma unroll
        for (int u = 0; u < 8; ++u)
            if (u * 256 + t < n4) v[u] = src[u * 256 + t];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const int g = u * 256 + t;
            if (g < n4) {
                int r = sv_div(4 * g, S, magic), c = 4 * g - r * S;  // strip element 4g = (r, c)
                const float e[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    tile[sv_pad(c * R + r)] = e[j];
                    if (++c == S) { c = 0; ++r; }
                }
            }
        }
        __syncthreads();
        const int lq = lr - 2;  // float4 groups per output row: R / 4
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const int g = u * 256 + t;
            const int c = g >> lq, r = 4 * (g & ((1 << lq) - 1));
            if (c < S && r < h)
                *reinterpret_cast<float4*>(out + (u64)c * rows + r0 + r) =
                    *reinterpret_cast<const float4*>(&tile[sv_pad(c * R + r)]);
        }
    } else {  // wide
        const int S = rows, lq = strip_log2(S), Q = 1 << lq, P = Q + 4;
        const long long q0 = (long long)blockIdx.x * Q;
        const int w = (int)min((long long)Q, cols - q0);  // columns in this block (a multiple of 4)
        const int lg = lq - 2;                            // float4 groups per input row: Q / 4
        float4 v[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const int g = u * 256 + t, m = g >> lg, qv = 4 * (g & ((1 << lg) - 1));
            if (m < S && qv < w) v[u] = *reinterpret_cast<const float4*>(in + (u64)m * cols + q0 + qv);
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const int g = u * 256 + t, m = g >> lg, qv = 4 * (g & ((1 << lg) - 1));
            if (m < S && qv < w) *reinterpret_cast<float4*>(&tile[m * P + qv]) = v[u];
        }
        __syncthreads();
        const int n4 = w * S / 4;
        const unsigned magic = 0xffffffffu / (unsigned)S + 1u;
        float4* dst = reinterpret_cast<float4*>(out + (u64)q0 * S);
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const int g = u * 256 + t;
            if (g < n4) {
                int q = sv_div(4 * g, S, magic), m = 4 * g - q * S;  // output 4g = (q, m)
                float e[4];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    e[j] = tile[m * P + q];
                    if (++m == S) { m = 0; ++q; }
                }
                dst[g] = make_float4(e[0], e[1], e[2], e[3]);
            }
        }
    }
}
