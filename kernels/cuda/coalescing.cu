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

// transpose_tiled_aligned: the 64 x 64 padded tile for rows that do not start on a 128-byte
// line (odd widths). A warp reading 32 floats that straddle two lines costs two L1 wavefronts;
// the tiled kernel spent four on each 64-float row segment. Here the lanes of a warp follow the
// memory lines instead of the tile: for each row segment, 3 instructions cover the 3 lines it
// touches (lane l of instruction k takes the float at line_start + 32 k + l, if it belongs to
// the segment), so a segment costs 3 wavefronts, on the reads and on the writes alike.
// Launch: block (32, 8), grid (ceil(cols / 64), ceil(rows / 64)).
extern "C" __global__ void __launch_bounds__(256)
transpose_tiled_aligned(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[TT][TT + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c0 = blockIdx.x * TT, r0 = blockIdx.y * TT;
    const int cw = min(TT, cols - c0), rh = min(TT, rows - r0);  // this tile's extent
#pragma unroll
    for (int j = 0; j < TT; j += BLOCK_ROWS) {
        const int i = ty + j;
        const float* seg = in + (u64)(r0 + i) * cols + c0;
        const int mis = (int)(((unsigned long long)seg >> 2) & 31);  // floats past its line
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            const int o = 32 * k + tx - mis;  // tile column this lane takes
            if (i < rh && o >= 0 && o < cw) tile[i][o] = seg[o];
        }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < TT; j += BLOCK_ROWS) {
        const int i = ty + j;  // output row c0 + i, columns r0 .. r0 + rh
        float* seg = out + (u64)(c0 + i) * rows + r0;
        const int mis = (int)(((unsigned long long)seg >> 2) & 31);
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            const int o = 32 * k + tx - mis;
            if (i < cw && o >= 0 && o < rh) seg[o] = tile[o][i];
        }
    }
}

// transpose_skinny: shapes with fewer than 64 rows or fewer than 64 columns, where a 64 x 64
// tile would leave most of its threads idle (a [2^20, 3] transpose was 16384 tiles of 3 columns).
// Tall (cols < 64): grid (ceil(rows / 1024), cols), block 256: block (bx, c) writes the output
// row c, columns bx * 1024 .. + 1024 (4 per thread, coalesced), reading column c of the input
// (stride cols: the short rows keep those reads within few lines, shared by the other c).
// Wide (rows < 64, cols >= 64): grid ceil(rows * cols / 1024), block 256: outputs in order
// (coalesced), each at in[(e % rows) * cols + e / rows] with 32-bit division.
// Both: 4 independent loads in flight per thread.
extern "C" __global__ void __launch_bounds__(256)
transpose_skinny(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    if (cols < 64) {
        const int c = blockIdx.y;
        const long long r = (long long)blockIdx.x * 1024 + threadIdx.x;
        float v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (r + 256 * u < rows) v[u] = in[(u64)(r + 256 * u) * cols + c];
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (r + 256 * u < rows) out[(u64)c * rows + r + 256 * u] = v[u];
    } else {  // rows < 64, so rows * cols < 2^37; e < 2^32 while cols < 2^26
        const u64 total = (u64)rows * (u64)cols;
        const u64 e0 = (u64)blockIdx.x * 1024 + threadIdx.x;
        float v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const u64 e = e0 + 256 * u;
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
