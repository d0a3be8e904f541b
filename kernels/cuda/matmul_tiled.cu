// matmul_tiled.cu — seed 003's 16x16 shared-memory tiled matrix multiply (row-major).
//
// C[M, N] = A[M, K] @ B[K, N]. A block of 16x16 threads computes a 16x16 tile of C. It walks k in
// phases of 16: in the load phase every thread copies one element of A's tile and one of B's tile
// into shared memory, __syncthreads(), then in the compute phase every thread does 16 FMAs reading
// only shared memory, __syncthreads() again before the next load overwrites the tiles.
// Each global element is now read M/16 (N/16) times instead of M (N) times: 16x less traffic.
// Unlike the seed's version, loads outside the matrix store 0 into the tile (so any M, N, K works,
// not only multiples of 16) and the final store is bounds-checked.
// i32 arithmetic wraps (two's complement); f32/f64 accumulate in increasing k order with FMA
// (the same order as matmul_naive, so both give the same values; only the sign of a zero result
// may differ, because the zero padding adds +0).
// Launch: block (16, 16) EXACTLY, grid (ceil(N / 16), ceil(M / 16)).
#include "dtype.cuh"

#define TILE 16

__device__ __forceinline__ float mac(float acc, float a, float b) { return fmaf(a, b, acc); }
__device__ __forceinline__ double mac(double acc, double a, double b) { return fma(a, b, acc); }
__device__ __forceinline__ int mac(int acc, int a, int b) {
    return (int)((unsigned)acc + (unsigned)a * (unsigned)b);
}

template <typename T>
__device__ __forceinline__ void matmul_tiled16(const T* A, const T* B, T* C, int M, int N, int K) {
    __shared__ T tile_A[TILE][TILE];
    __shared__ T tile_B[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    T sum = T(0);
    for (int phase = 0; phase < (K + TILE - 1) / TILE; ++phase) {
        // load phase (0 outside the matrix, so the compute phase needs no checks)
        const int a_col = phase * TILE + tx;
        const int b_row = phase * TILE + ty;
        tile_A[ty][tx] = (row < M && a_col < K) ? A[(u64)row * K + a_col] : T(0);
        tile_B[ty][tx] = (b_row < K && col < N) ? B[(u64)b_row * N + col] : T(0);
        __syncthreads();
        // compute phase
        for (int k = 0; k < TILE; ++k)
            sum = mac(sum, tile_A[ty][k], tile_B[k][tx]);
        __syncthreads();
    }
    if (row < M && col < N) C[(u64)row * N + col] = sum;
}

extern "C" __global__ void __launch_bounds__(256) matmul_tiled16_f32(const float* A, const float* B, float* C, int M, int N, int K) { matmul_tiled16<float>(A, B, C, M, N, K); }
extern "C" __global__ void __launch_bounds__(256) matmul_tiled16_f64(const double* A, const double* B, double* C, int M, int N, int K) { matmul_tiled16<double>(A, B, C, M, N, K); }
extern "C" __global__ void __launch_bounds__(256) matmul_tiled16_i32(const int* A, const int* B, int* C, int M, int N, int K) { matmul_tiled16<int>(A, B, C, M, N, K); }
