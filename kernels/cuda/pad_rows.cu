// pad_rows.cu — copy a row-major matrix into one with another row stride (e.g. a tensor-core GEMM
// operand whose rows are not 16-byte aligned, into a buffer whose rows are).
//
// dst[r * ldd + c] = src[r * lds + c] for r < rows, c < cols; dst's other elements are not
// touched. Any grid (grid-stride over rows in y, over columns in x); block 256.
#include "dtype.cuh"

template <typename T>
__device__ __forceinline__ void copy_rows(const T* __restrict__ src, long long lds, T* __restrict__ dst,
                                          long long ldd, int rows, int cols) {
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const T* s = src + (long long)r * lds;
        T* d = dst + (long long)r * ldd;
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += blockDim.x * gridDim.x) d[c] = s[c];
    }
}

extern "C" __global__ void copy_rows_b2(const unsigned short* __restrict__ src, long long lds,
                                        unsigned short* __restrict__ dst, long long ldd, int rows, int cols) {
    copy_rows(src, lds, dst, ldd, rows, cols);
}
extern "C" __global__ void copy_rows_b4(const unsigned int* __restrict__ src, long long lds,
                                        unsigned int* __restrict__ dst, long long ldd, int rows, int cols) {
    copy_rows(src, lds, dst, ldd, rows, cols);
}
