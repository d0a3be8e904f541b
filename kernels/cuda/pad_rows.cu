// pad_rows.cu — copy a row-major matrix into one with another row stride (e.g. a tensor-core GEMM
// operand whose rows are not 16-byte aligned, into a buffer whose rows are).
//
// dst[r * ldd + c] = src[r * lds + c] for r < rows, c < cols; dst's other elements are not
// touched. Any grid (grid-stride over rows in y, over columns in x); block 256.
#include "dtype.cuh"

// When dst's rows start on 16-byte boundaries (the padded operands: ldd a multiple of 16 bytes,
// a fresh buffer), each thread moves 16 bytes: V = 16 / sizeof(T) elements read one by one
// (consecutive lanes 16 bytes apart: each line is fetched once and the other reads hit L1),
// written as one 16-byte store (a warp writes 512 contiguous bytes). Element by element, a warp
// moved 64 bytes per instruction: the copy of a 509 x 8191 bf16 operand was most of a 127 x 8191
// x 509 GEMM (kernels/TUNING.md, issue 34). Otherwise one element per thread-step.
template <typename T>
__device__ __forceinline__ void copy_rows(const T* __restrict__ src, long long lds, T* __restrict__ dst,
                                          long long ldd, int rows, int cols) {
    enum { V = 16 / sizeof(T) };
    const bool vec = ((ldd * (long long)sizeof(T)) % 16 == 0) && ((((u64)dst) & 15) == 0);
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const T* s = src + (long long)r * lds;
        T* d = dst + (long long)r * ldd;
        if (vec) {
            for (int c = V * (blockIdx.x * blockDim.x + threadIdx.x); c < cols; c += V * blockDim.x * gridDim.x) {
                if (c + V <= cols) {
                    T v[V];
#pragma unroll
                    for (int j = 0; j < V; ++j) v[j] = s[c + j];
                    uint4 w;
                    memcpy(&w, v, 16);
                    *reinterpret_cast<uint4*>(d + c) = w;
                } else {
                    for (int j = c; j < cols; ++j) d[j] = s[j];
                }
            }
        } else {
            for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += blockDim.x * gridDim.x) d[c] = s[c];
        }
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
