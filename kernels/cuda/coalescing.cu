// coalescing.cu — how the order of memory accesses decides bandwidth.
//
// A warp's 32 loads are served in 32-byte sectors. If the 32 threads read 32 consecutive floats
// (coalesced) that is 4 sectors for 128 useful bytes; if they read with a stride of 32 floats
// each thread needs its own sector: 32 sectors (1024 bytes moved) for the same 128 useful bytes.
//   * copy_coalesced: the bandwidth ceiling — float4 grid-stride copy (as vector_add_fast).
//   * copy_strided: dst[i] = src[i * stride]; reads waste (stride - 1) / stride of every sector
//     once the stride reaches 8 floats (32 bytes).
//   * transpose_naive: out[c][r] = in[r][c]; reads are coalesced but writes are strided by rows.
//   * transpose_tiled: a 32x32 tile goes through shared memory so both the global read and the
//     global write are coalesced. The column read of the tile (tile[tx][ty + j]) hits the same
//     bank for all 32 threads of a warp: a 32-way bank conflict, on purpose, to be measured.
//   * transpose_tiled_padded: the same with a 32x33 tile: the extra column shifts each row by one
//     bank, so the column read is conflict-free. Each thread moves 4 elements (block 32x8 for a
//     32x32 tile), which keeps enough loads in flight to reach ~copy bandwidth.
// Transposes: in is [rows, cols] row-major, out is [cols, rows] row-major; any rows, cols.
// Launch: copy_*: block 256, any grid. transpose_*: block (32, 8) EXACTLY,
//   grid (ceil(cols / 32), ceil(rows / 32)) (so rows <= 65535 * 32).
#include "dtype.cuh"

#define TILE_DIM 32
#define BLOCK_ROWS 8

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
    __shared__ float tile[TILE_DIM][TILE_DIM + PAD];
    const int tx = threadIdx.x, ty = threadIdx.y;
    // read a 32x32 tile of `in`: row r0 + ty + j, column c0 + tx (coalesced along tx)
    int c = blockIdx.x * TILE_DIM + tx;
    int r = blockIdx.y * TILE_DIM + ty;
#pragma unroll
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (c < cols && r + j < rows) tile[ty + j][tx] = in[(u64)(r + j) * cols + c];
    __syncthreads();
    // write it transposed: out row = in column c0 + ty + j, out column = in row r0 + tx
    c = blockIdx.y * TILE_DIM + tx;   // column of out (= row of in)
    r = blockIdx.x * TILE_DIM + ty;   // row of out (= column of in)
#pragma unroll
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (c < rows && r + j < cols) out[(u64)(r + j) * rows + c] = tile[tx][ty + j];
}

extern "C" __global__ void __launch_bounds__(256)
transpose_tiled(const float* in, float* out, int rows, int cols) { transpose_tiled_body<0>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(256)
transpose_tiled_padded(const float* in, float* out, int rows, int cols) { transpose_tiled_body<1>(in, out, rows, cols); }
