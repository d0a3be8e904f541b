// matmul_naive.cu — matrix multiply with one thread per output element (row-major).
//
// C[M, N] = A[M, K] @ B[K, N]. Thread (x, y) of the grid computes C[row = y][col = x] as a dot
// product of row `row` of A and column `col` of B, read straight from global memory.
// What it teaches: the 2-D thread grid maps onto the output; and why it is slow — every element
// of A and B is read from global memory N (resp. M) times, and there is only 1 FMA per 2 loads.
// (Adjacent threads share `row` and read consecutive `col`: B loads are coalesced, A loads are a
// broadcast.) matmul_tiled.cu fixes the reuse with shared memory; sgemm.cu with registers too.
// i32 arithmetic wraps (two's complement). f32/f64 accumulate in increasing k order with FMA.
// Launch: block (16, 16), grid (ceil(N / 16), ceil(M / 16)); any M, N, K >= 0.
#include "dtype.cuh"

__device__ __forceinline__ float mac(float acc, float a, float b) { return fmaf(a, b, acc); }
__device__ __forceinline__ double mac(double acc, double a, double b) { return fma(a, b, acc); }
__device__ __forceinline__ int mac(int acc, int a, int b) {
    return (int)((unsigned)acc + (unsigned)a * (unsigned)b);
}

template <typename T>
__device__ __forceinline__ void matmul_naive(const T* A, const T* B, T* C, int M, int N, int K) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        T sum = T(0);
        for (int k = 0; k < K; ++k)
            sum = mac(sum, A[(u64)row * K + k], B[(u64)k * N + col]);
        C[(u64)row * N + col] = sum;
    }
}

extern "C" __global__ void matmul_naive_f32(const float* A, const float* B, float* C, int M, int N, int K) { matmul_naive<float>(A, B, C, M, N, K); }
extern "C" __global__ void matmul_naive_f64(const double* A, const double* B, double* C, int M, int N, int K) { matmul_naive<double>(A, B, C, M, N, K); }
extern "C" __global__ void matmul_naive_i32(const int* A, const int* B, int* C, int M, int N, int K) { matmul_naive<int>(A, B, C, M, N, K); }
