// reduce.cu — sums and maxima: the tree reduction as taught, and a fast deterministic one.
//
// 1. reduce_sum_tree_*: Mark Harris's shared-memory tree reduction ("sequential addressing"
//    version): each thread loads ONE element into shared memory, then the block halves the number
//    of active threads each step (s = blockDim/2, /4, ..., 1), thread t adding sdata[t + s] into
//    sdata[t]. Active threads stay contiguous (no divergence inside warps until s < 32) and reads
//    are conflict-free. One partial sum per block; reduce the partials with another launch.
//    Launch: blockDim.x a power of two <= 1024 (designed for 256), grid ceil(n / blockDim.x).
//
// 2. reduce_{sum,max}_fast_*: what makes a reduction fast:
//    * few blocks, many elements per thread (grid-stride), 16-byte vector loads, 4 independent
//      loads in flight per thread per iteration (memory-level parallelism);
//    * the in-block reduction uses warp shuffles (__shfl_down_sync): registers, no shared memory
//      and no __syncthreads except one to combine the per-warp results;
//    * one partial per block, then reduce_finalize_* (one block) reduces the partials on the GPU:
//      two launches, no host round trip. Launch: block 256 (any multiple of 32 <= 1024), grid G
//      with 1 <= G (suggested min(ceil(n / 4096), 4 * SMs)); partial must hold G values; then
//      reduce_finalize_*: grid 1, block 256 (any multiple of 32 <= 1024), num_partials = G.
//
// 3. reduce_rows_{sum,max}_*: per-row reductions of a row-major [rows, cols] array, one warp per
//    row. Launch: blockDim.x a multiple of 32 (designed for 256 = 8 rows per block), grid
//    ceil(rows / (blockDim.x / 32)). Mean = sum / cols (on the host or a following scale).
//
// Determinism: there are no atomics. Every thread adds its elements in a fixed order, the shuffle
// and cross-warp trees have a fixed shape, and the finalize kernel reads the partials in a fixed
// order: the same input with the same grid and block sizes gives bit-identical results, run after
// run. (A different grid size changes the summation order and so, for floats, the rounding.)
// Accumulators: f32 -> f32, f64 -> f64, i32 -> i64 for sums (exact) and i32 for max,
// f16/bf16 -> f32 (partials and results are f32).
// Semantics: the sum of zero elements is 0; the max of zero elements is -inf (INT_MIN for i32);
// max propagates NaN (like torch.max): max(a, b) = (a > b || a != a) ? a : b.
#include "dtype.cuh"

#define MAX_BLOCK 1024

// ---------------------------------------------------------------------------------------------
// 1. The tree reduction as taught.
template <typename T>
__device__ __forceinline__ void reduce_sum_tree(const T* in, T* partial, u64 n) {
    __shared__ T sdata[MAX_BLOCK];
    const unsigned int tid = threadIdx.x;
    const u64 i = (u64)blockIdx.x * blockDim.x + tid;
    sdata[tid] = (i < n) ? in[i] : T(0);  // one element per thread
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) partial[blockIdx.x] = sdata[0];
}

extern "C" __global__ void reduce_sum_tree_f32(const float* in, float* partial, unsigned long long n) { reduce_sum_tree<float>(in, partial, n); }
extern "C" __global__ void reduce_sum_tree_f64(const double* in, double* partial, unsigned long long n) { reduce_sum_tree<double>(in, partial, n); }

// ---------------------------------------------------------------------------------------------
// Reduction operators: identity and combine, for each accumulator type.
template <typename A> struct SumOp {
    static __device__ __forceinline__ A identity() { return A(0); }
    static __device__ __forceinline__ A combine(A a, A b) { return a + b; }
};
template <typename A> struct MaxOp {
    static __device__ __forceinline__ A identity();
    static __device__ __forceinline__ A combine(A a, A b) { return (a > b || a != a) ? a : b; }
};
template <> __device__ __forceinline__ float MaxOp<float>::identity() { return __int_as_float(0xff800000); }
template <> __device__ __forceinline__ double MaxOp<double>::identity() { return __longlong_as_double(0xfff0000000000000ll); }
template <> __device__ __forceinline__ int MaxOp<int>::identity() { return (int)0x80000000; }

// Value of one stored element in the accumulator type.
template <typename Tag, typename A>
__device__ __forceinline__ A widen(typename DType<Tag>::Storage x) { return (A)DType<Tag>::load(x); }

// Warp-level tree with shuffles: lane 0 ends with the combination of all 32 lanes.
template <typename A, typename Op>
__device__ __forceinline__ A warp_reduce(A v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = Op::combine(v, __shfl_down_sync(0xffffffffu, v, off));
    return v;
}

// Block-level: shuffle inside each warp, then warp 0 combines the per-warp values (in warp order).
// The result is valid in thread 0. blockDim.x must be a multiple of 32, at most 1024.
template <typename A, typename Op>
__device__ __forceinline__ A block_reduce(A v) {
    __shared__ A warp_vals[32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_reduce<A, Op>(v);
    if (lane == 0) warp_vals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = (lane < (int)(blockDim.x / 32)) ? warp_vals[lane] : Op::identity();
        v = warp_reduce<A, Op>(v);
    }
    return v;
}

// ---------------------------------------------------------------------------------------------
// 2. Fast reduction: partial[blockIdx.x] = op over this block's grid-stride share of in[0..n).
template <typename Tag, typename A, typename Op>
__device__ __forceinline__ void reduce_fast(const typename DType<Tag>::Storage* in, A* partial, u64 n) {
    typedef typename DType<Tag>::Storage S;
    const u64 tid = global_tid(), stride = grid_threads();
    A acc = Op::identity();
    u64 done = 0;
    if (aligned16(in)) {
        const int V = Pack<S>::N;
        const u64 packs = n / V;
        u64 p = tid;
        // 4 independent 16-byte loads in flight per iteration, then combined in a fixed order.
        for (; p + 3 * stride < packs; p += 4 * stride) {
            Pack<S> v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) v[u] = load_pack(in + (p + u * stride) * V);
#pragma unroll
            for (int u = 0; u < 4; ++u)
#pragma unroll
                for (int j = 0; j < V; ++j) acc = Op::combine(acc, widen<Tag, A>(v[u].v[j]));
        }
        for (; p < packs; p += stride) {
            const Pack<S> v = load_pack(in + p * V);
#pragma unroll
            for (int j = 0; j < V; ++j) acc = Op::combine(acc, widen<Tag, A>(v.v[j]));
        }
        done = packs * V;
    }
    for (u64 i = done + tid; i < n; i += stride) acc = Op::combine(acc, widen<Tag, A>(in[i]));
    acc = block_reduce<A, Op>(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// One block: out[0] = op over partial[0..num), each thread reading a fixed strided subset.
template <typename A, typename Op>
__device__ __forceinline__ A finalize(const A* partial, unsigned int num) {
    A acc = Op::identity();
    for (unsigned int i = threadIdx.x; i < num; i += blockDim.x) acc = Op::combine(acc, partial[i]);
    return block_reduce<A, Op>(acc);
}

extern "C" __global__ void reduce_sum_fast_f32(const float* in, float* partial, unsigned long long n) { reduce_fast<float, float, SumOp<float> >(in, partial, n); }
extern "C" __global__ void reduce_sum_fast_f64(const double* in, double* partial, unsigned long long n) { reduce_fast<double, double, SumOp<double> >(in, partial, n); }
extern "C" __global__ void reduce_sum_fast_i32(const int* in, long long* partial, unsigned long long n) { reduce_fast<int, long long, SumOp<long long> >(in, partial, n); }
extern "C" __global__ void reduce_sum_fast_f16(const f16_t* in, float* partial, unsigned long long n) { reduce_fast<F16, float, SumOp<float> >(in, partial, n); }
extern "C" __global__ void reduce_sum_fast_bf16(const bf16_t* in, float* partial, unsigned long long n) { reduce_fast<BF16, float, SumOp<float> >(in, partial, n); }

extern "C" __global__ void reduce_max_fast_f32(const float* in, float* partial, unsigned long long n) { reduce_fast<float, float, MaxOp<float> >(in, partial, n); }
extern "C" __global__ void reduce_max_fast_f64(const double* in, double* partial, unsigned long long n) { reduce_fast<double, double, MaxOp<double> >(in, partial, n); }
extern "C" __global__ void reduce_max_fast_i32(const int* in, int* partial, unsigned long long n) { reduce_fast<int, int, MaxOp<int> >(in, partial, n); }
extern "C" __global__ void reduce_max_fast_f16(const f16_t* in, float* partial, unsigned long long n) { reduce_fast<F16, float, MaxOp<float> >(in, partial, n); }
extern "C" __global__ void reduce_max_fast_bf16(const bf16_t* in, float* partial, unsigned long long n) { reduce_fast<BF16, float, MaxOp<float> >(in, partial, n); }

extern "C" __global__ void reduce_finalize_sum_f32(const float* partial, float* out, unsigned int num_partials) { float r = finalize<float, SumOp<float> >(partial, num_partials); if (threadIdx.x == 0) out[0] = r; }
extern "C" __global__ void reduce_finalize_sum_f64(const double* partial, double* out, unsigned int num_partials) { double r = finalize<double, SumOp<double> >(partial, num_partials); if (threadIdx.x == 0) out[0] = r; }
extern "C" __global__ void reduce_finalize_sum_i64(const long long* partial, long long* out, unsigned int num_partials) { long long r = finalize<long long, SumOp<long long> >(partial, num_partials); if (threadIdx.x == 0) out[0] = r; }
extern "C" __global__ void reduce_finalize_max_f32(const float* partial, float* out, unsigned int num_partials) { float r = finalize<float, MaxOp<float> >(partial, num_partials); if (threadIdx.x == 0) out[0] = r; }
extern "C" __global__ void reduce_finalize_max_f64(const double* partial, double* out, unsigned int num_partials) { double r = finalize<double, MaxOp<double> >(partial, num_partials); if (threadIdx.x == 0) out[0] = r; }
extern "C" __global__ void reduce_finalize_max_i32(const int* partial, int* out, unsigned int num_partials) { int r = finalize<int, MaxOp<int> >(partial, num_partials); if (threadIdx.x == 0) out[0] = r; }
// mean: out[0] = (sum of partials) / count, rounded once (count == 0 gives NaN, like torch.mean).
extern "C" __global__ void reduce_finalize_mean_f32(const float* partial, float* out, unsigned int num_partials, unsigned long long count) { float r = finalize<float, SumOp<float> >(partial, num_partials); if (threadIdx.x == 0) out[0] = r / (float)count; }
extern "C" __global__ void reduce_finalize_mean_f64(const double* partial, double* out, unsigned int num_partials, unsigned long long count) { double r = finalize<double, SumOp<double> >(partial, num_partials); if (threadIdx.x == 0) out[0] = r / (double)count; }

// ---------------------------------------------------------------------------------------------
// 3. Row reductions: warp w of the grid reduces row w. Lanes read consecutive elements (coalesced),
// 16-byte packets when every row start is 16-byte aligned, then a shuffle tree.
template <typename Tag, typename A, typename Op>
__device__ __forceinline__ void reduce_rows(const typename DType<Tag>::Storage* in, A* out, int rows, int cols) {
    typedef typename DType<Tag>::Storage S;
    const int V = Pack<S>::N;
    const int lane = threadIdx.x % 32;
    const u64 row = (u64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= (u64)rows) return;  // whole warp leaves together
    const S* r = in + row * (u64)cols;
    A acc = Op::identity();
    int done = 0;
    if (cols % V == 0 && aligned16(in)) {
        for (int p = lane; p < cols / V; p += 32) {
            const Pack<S> v = load_pack(r + (u64)p * V);
#pragma unroll
            for (int j = 0; j < V; ++j) acc = Op::combine(acc, widen<Tag, A>(v.v[j]));
        }
        done = cols;
    }
    for (int c = done + lane; c < cols; c += 32) acc = Op::combine(acc, widen<Tag, A>(r[c]));
    acc = warp_reduce<A, Op>(acc);
    if (lane == 0) out[row] = acc;
}

extern "C" __global__ void reduce_rows_sum_f32(const float* in, float* out, int rows, int cols) { reduce_rows<float, float, SumOp<float> >(in, out, rows, cols); }
extern "C" __global__ void reduce_rows_sum_f64(const double* in, double* out, int rows, int cols) { reduce_rows<double, double, SumOp<double> >(in, out, rows, cols); }
extern "C" __global__ void reduce_rows_sum_f16(const f16_t* in, float* out, int rows, int cols) { reduce_rows<F16, float, SumOp<float> >(in, out, rows, cols); }
extern "C" __global__ void reduce_rows_sum_bf16(const bf16_t* in, float* out, int rows, int cols) { reduce_rows<BF16, float, SumOp<float> >(in, out, rows, cols); }
extern "C" __global__ void reduce_rows_max_f32(const float* in, float* out, int rows, int cols) { reduce_rows<float, float, MaxOp<float> >(in, out, rows, cols); }
extern "C" __global__ void reduce_rows_max_f64(const double* in, double* out, int rows, int cols) { reduce_rows<double, double, MaxOp<double> >(in, out, rows, cols); }
extern "C" __global__ void reduce_rows_max_f16(const f16_t* in, float* out, int rows, int cols) { reduce_rows<F16, float, MaxOp<float> >(in, out, rows, cols); }
extern "C" __global__ void reduce_rows_max_bf16(const bf16_t* in, float* out, int rows, int cols) { reduce_rows<BF16, float, MaxOp<float> >(in, out, rows, cols); }

// ---------------------------------------------------------------------------------------------
// 4. Long rows: reduce_rows_part_*. A warp per row leaves the GPU idle when rows are few or
// long (7 rows of a million columns: 7 warps). Here block (p, r) of a grid (P, rows) reduces the
// columns [p * chunk, min(cols, (p + 1) * chunk)) of row r with the whole block (4 loads in flight
// per thread) and writes partial[r * P + p]; reduce_rows_* over the [rows, P] partials finishes
// (with P == 1, partial is the output). chunk must be a multiple of 8 (whole 16-byte packets).
// Launch: block 256 (any multiple of 32 <= 1024), grid (P, rows) with rows <= 65535,
// chunk = ceil(cols / P) rounded up to a multiple of 8.
template <typename Tag, typename A, typename Op>
__device__ __forceinline__ void reduce_rows_part(const typename DType<Tag>::Storage* in, A* partial,
                                                 int rows, int cols, int chunk) {
    typedef typename DType<Tag>::Storage S;
    const int V = Pack<S>::N;
    const u64 row = blockIdx.y;
    if (row >= (u64)rows) return;  // whole block leaves together
    const int t = threadIdx.x, nt = blockDim.x;
    const long long c0 = (long long)blockIdx.x * chunk;
    const long long c1 = min((long long)cols, c0 + chunk);
    const S* r = in + row * (u64)cols;
    A acc = Op::identity();
    long long done = c0;
    if (cols % V == 0 && aligned16(in) && c0 < c1) {
        const long long q1 = c1 / V;  // c0 and c1 (when < cols) are multiples of 8 >= V
        long long q = c0 / V + t;
        for (; q + 3 * nt < q1; q += 4 * nt) {
            Pack<S> v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) v[u] = load_pack(r + (q + u * nt) * V);
#pragma unroll
            for (int u = 0; u < 4; ++u)
#pragma unroll
                for (int j = 0; j < V; ++j) acc = Op::combine(acc, widen<Tag, A>(v[u].v[j]));
        }
        for (; q < q1; q += nt) {
            const Pack<S> v = load_pack(r + q * V);
#pragma unroll
            for (int j = 0; j < V; ++j) acc = Op::combine(acc, widen<Tag, A>(v.v[j]));
        }
        done = c1;
    }
    long long c = done + t;
    for (; c + 3 * nt < c1; c += 4 * nt) {
        S v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) v[u] = r[c + u * nt];
#pragma unroll
        for (int u = 0; u < 4; ++u) acc = Op::combine(acc, widen<Tag, A>(v[u]));
    }
    for (; c < c1; c += nt) acc = Op::combine(acc, widen<Tag, A>(r[c]));
    acc = block_reduce<A, Op>(acc);
    if (threadIdx.x == 0) partial[row * gridDim.x + blockIdx.x] = acc;
}

extern "C" __global__ void reduce_rows_part_sum_f32(const float* in, float* partial, int rows, int cols, int chunk) { reduce_rows_part<float, float, SumOp<float> >(in, partial, rows, cols, chunk); }
extern "C" __global__ void reduce_rows_part_sum_f64(const double* in, double* partial, int rows, int cols, int chunk) { reduce_rows_part<double, double, SumOp<double> >(in, partial, rows, cols, chunk); }
extern "C" __global__ void reduce_rows_part_sum_f16(const f16_t* in, float* partial, int rows, int cols, int chunk) { reduce_rows_part<F16, float, SumOp<float> >(in, partial, rows, cols, chunk); }
extern "C" __global__ void reduce_rows_part_sum_bf16(const bf16_t* in, float* partial, int rows, int cols, int chunk) { reduce_rows_part<BF16, float, SumOp<float> >(in, partial, rows, cols, chunk); }
extern "C" __global__ void reduce_rows_part_max_f32(const float* in, float* partial, int rows, int cols, int chunk) { reduce_rows_part<float, float, MaxOp<float> >(in, partial, rows, cols, chunk); }
extern "C" __global__ void reduce_rows_part_max_f64(const double* in, double* partial, int rows, int cols, int chunk) { reduce_rows_part<double, double, MaxOp<double> >(in, partial, rows, cols, chunk); }
extern "C" __global__ void reduce_rows_part_max_f16(const f16_t* in, float* partial, int rows, int cols, int chunk) { reduce_rows_part<F16, float, MaxOp<float> >(in, partial, rows, cols, chunk); }
extern "C" __global__ void reduce_rows_part_max_bf16(const bf16_t* in, float* partial, int rows, int cols, int chunk) { reduce_rows_part<BF16, float, MaxOp<float> >(in, partial, rows, cols, chunk); }

// ---------------------------------------------------------------------------------------------
// 5. Column reductions: reduce the middle dimension of a contiguous [outer, rows, cols] array
// (a reduction over any dimension but the last, without moving data first). Block (32, 8) of
// grid (ceil(cols / 32), P, outer): the 32 lanes take 32 adjacent columns (each row's read is one
// coalesced 128-byte line), the 8 thread rows take rows ty, ty + 8, ... of part p =
// [p * chunk, min(rows, (p + 1) * chunk)) with COLS_U = 16 loads in flight per step (one live
// 64-bit address, advanced 8 rows per load: the earlier body kept 8 addresses for 8 loads, 59
// registers and 4 blocks per SM on sm_90; this one 39 registers and 6 blocks for f32 in
// kernels/tuning/transpose_h200_lab.cu's `cs<16, 8, 4>`), and the 8 values of a column combine
// in ty order through shared memory. Writes out[(z * P + p) * cols + c]: with P == 1 that is the
// [outer, cols] result; else a [outer, P, cols] array that one more launch with P == 1 reduces
// (fixed order: deterministic). Order of a column's sum: thread row ty combines its rows
// r0 + ty, r0 + ty + 8, ... in increasing order, then the 8 thread rows in ty order: the same
// for any COLS_U, and the same as reduce_cols16's, so both give bit-identical results for the
// same P (ops::reduce_dim picks P by shape alone, so the two agree on one tensor).
// Launch: block (32, 8) exactly, grid (ceil(cols / 32), P <= 65535, outer <= 65535), chunk =
// ceil(rows / P) (ops::reduce_dim's col_parts: P from COLS_BLOCKS_PER_SM resident blocks).
#define COLS_U 16
template <typename Tag, typename A, typename Op>
__device__ __forceinline__ void reduce_cols(const typename DType<Tag>::Storage* __restrict__ in, A* __restrict__ out,
                                            int rows, int cols, int chunk) {
    typedef typename DType<Tag>::Storage S;
    __shared__ A vals[8][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c = blockIdx.x * 32 + tx;
    const u64 z = blockIdx.z;
    const long long r0 = (long long)blockIdx.y * chunk;
    const long long r1 = min((long long)rows, r0 + chunk);
    A acc = Op::identity();
    if (c < cols) {
        const u64 step = 8 * (u64)cols;  // 8 rows
        const S* col = in + z * (u64)rows * (u64)cols + c;
        // COLS_U loads in flight per step (predicated at the end, so a short part is one step),
        // then combined in row order. A row past the part stands in as the identity and is
        // combined unconditionally (predicated combines cost the f32 sum 63 registers instead of
        // 39); that is exact: x + 0 == x for every x the sum can hold (acc starts at +0 and round
        // to nearest never makes -0 from it) and max(x, -inf) == x, NaN included.
        for (long long r = r0 + ty; r < r1; r += 8 * COLS_U) {
            const S* p = col + (u64)r * (u64)cols;
            A v[COLS_U];
#pragma unroll
            for (int u = 0; u < COLS_U; ++u) {  // walk the pointer: one live address, not COLS_U
                v[u] = (r + 8 * u < r1) ? widen<Tag, A>(__ldg(p)) : Op::identity();
                p += step;
            }
#pragma unroll
            for (int u = 0; u < COLS_U; ++u) acc = Op::combine(acc, v[u]);
        }
    }
    vals[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && c < cols) {
        A v = vals[0][tx];
#pragma unroll
        for (int j = 1; j < 8; ++j) v = Op::combine(v, vals[j][tx]);
        out[(z * gridDim.y + blockIdx.y) * (u64)cols + c] = v;
    }
}

// 5b. The same column reduction with 16-byte rows: each lane reads V = 16 / sizeof(S) adjacent
// columns with one 16-byte load (a warp covers 32 V columns: 512 bytes of a row instead of
// 32 elements), which a half-precision column sum needs to reach the memory's bandwidth. Each
// column's values combine in exactly reduce_cols's order (thread row ty takes rows r0 + ty,
// r0 + ty + 8, ... in order; the 8 thread rows combine in ty order), so the results are
// bit-identical to it. Requires cols % V == 0 and a 16-byte aligned `in` (the op checks).
// Launch: block (32, 8) exactly, grid (ceil(cols / (32 V)), P <= 65535, outer <= 65535).
template <typename Tag, typename A, typename Op>
__device__ __forceinline__ void reduce_cols16(const typename DType<Tag>::Storage* in, A* out,
                                              int rows, int cols, int chunk) {
    typedef typename DType<Tag>::Storage S;
    constexpr int V = Pack<S>::N;
    __shared__ A vals[8][32 * V];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c0 = (blockIdx.x * 32 + tx) * V;
    const u64 z = blockIdx.z;
    const long long r0 = (long long)blockIdx.y * chunk;
    const long long r1 = min((long long)rows, r0 + chunk);
    A acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = Op::identity();
    if (c0 < cols) {
        const S* col = in + z * (u64)rows * (u64)cols + c0;
        // 4 loads (4 V values) in flight per step, combined in row order.
        for (long long r = r0 + ty; r < r1; r += 4 * 8) {
            Pack<S> v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (r + 8 * u < r1) v[u] = load_pack(col + (u64)(r + 8 * u) * (u64)cols);
#pragma unroll
            for (int u = 0; u < 4; ++u)
                if (r + 8 * u < r1) {
#pragma unroll
                    for (int j = 0; j < V; ++j) acc[j] = Op::combine(acc[j], widen<Tag, A>(v[u].v[j]));
                }
        }
    }
#pragma unroll
    for (int j = 0; j < V; ++j) vals[ty][tx * V + j] = acc[j];
    __syncthreads();
    // Thread (tx, ty) finishes column tx * V + ty of the block's 32 V when ty < V, and so on:
    // every thread takes columns t, t + 256, ... of the 32 V (t = ty * 32 + tx).
    const u64 o = (z * gridDim.y + blockIdx.y) * (u64)cols + (u64)blockIdx.x * 32 * V;
    for (int t = ty * 32 + tx; t < 32 * V; t += 256) {
        if ((long long)blockIdx.x * 32 * V + t < cols) {
            A v = vals[0][t];
#pragma unroll
            for (int k = 1; k < 8; ++k) v = Op::combine(v, vals[k][t]);
            out[o + t] = v;
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) reduce_cols16_sum_f32(const float* in, float* out, int rows, int cols, int chunk) { reduce_cols16<float, float, SumOp<float> >(in, out, rows, cols, chunk); }
extern "C" __global__ void __launch_bounds__(256) reduce_cols16_sum_f64(const double* in, double* out, int rows, int cols, int chunk) { reduce_cols16<double, double, SumOp<double> >(in, out, rows, cols, chunk); }
extern "C" __global__ void __launch_bounds__(256) reduce_cols16_sum_f16(const f16_t* in, float* out, int rows, int cols, int chunk) { reduce_cols16<F16, float, SumOp<float> >(in, out, rows, cols, chunk); }
extern "C" __global__ void __launch_bounds__(256) reduce_cols16_sum_bf16(const bf16_t* in, float* out, int rows, int cols, int chunk) { reduce_cols16<BF16, float, SumOp<float> >(in, out, rows, cols, chunk); }
extern "C" __global__ void __launch_bounds__(256) reduce_cols16_max_f32(const float* in, float* out, int rows, int cols, int chunk) { reduce_cols16<float, float, MaxOp<float> >(in, out, rows, cols, chunk); }
extern "C" __global__ void __launch_bounds__(256) reduce_cols16_max_f64(const double* in, double* out, int rows, int cols, int chunk) { reduce_cols16<double, double, MaxOp<double> >(in, out, rows, cols, chunk); }
extern "C" __global__ void __launch_bounds__(256) reduce_cols16_max_f16(const f16_t* in, float* out, int rows, int cols, int chunk) { reduce_cols16<F16, float, MaxOp<float> >(in, out, rows, cols, chunk); }
extern "C" __global__ void __launch_bounds__(256) reduce_cols16_max_bf16(const bf16_t* in, float* out, int rows, int cols, int chunk) { reduce_cols16<BF16, float, MaxOp<float> >(in, out, rows, cols, chunk); }

extern "C" __global__ void __launch_bounds__(256, 4) reduce_cols_sum_f32(const float* in, float* out, int rows, int cols, int chunk) { reduce_cols<float, float, SumOp<float> >(in, out, rows, cols, chunk); }
extern "C" __global__ void __launch_bounds__(256, 4) reduce_cols_sum_f64(const double* in, double* out, int rows, int cols, int chunk) { reduce_cols<double, double, SumOp<double> >(in, out, rows, cols, chunk); }
extern "C" __global__ void __launch_bounds__(256, 4) reduce_cols_sum_f16(const f16_t* in, float* out, int rows, int cols, int chunk) { reduce_cols<F16, float, SumOp<float> >(in, out, rows, cols, chunk); }
extern "C" __global__ void __launch_bounds__(256, 4) reduce_cols_sum_bf16(const bf16_t* in, float* out, int rows, int cols, int chunk) { reduce_cols<BF16, float, SumOp<float> >(in, out, rows, cols, chunk); }
extern "C" __global__ void __launch_bounds__(256, 4) reduce_cols_max_f32(const float* in, float* out, int rows, int cols, int chunk) { reduce_cols<float, float, MaxOp<float> >(in, out, rows, cols, chunk); }
extern "C" __global__ void __launch_bounds__(256, 4) reduce_cols_max_f64(const double* in, double* out, int rows, int cols, int chunk) { reduce_cols<double, double, MaxOp<double> >(in, out, rows, cols, chunk); }
extern "C" __global__ void __launch_bounds__(256, 4) reduce_cols_max_f16(const f16_t* in, float* out, int rows, int cols, int chunk) { reduce_cols<F16, float, MaxOp<float> >(in, out, rows, cols, chunk); }
extern "C" __global__ void __launch_bounds__(256, 4) reduce_cols_max_bf16(const bf16_t* in, float* out, int rows, int cols, int chunk) { reduce_cols<BF16, float, MaxOp<float> >(in, out, rows, cols, chunk); }

// ---------------------------------------------------------------------------------------------
// 6. Thin columns: a short reduced dimension (at most 32 rows) of many columns, [outer, rows,
// cols] -> [outer, cols]. Each thread takes THIN_COLS columns 256 apart and issues all their
// rows' loads (up to 4 x 32) before combining any, rows combined in order (deterministic).
// A separate kernel so that its registers do not weigh on the general column kernel.
// Launch: block 256, grid (ceil(cols / 1024), 1, outer <= 65535), rows <= 32.
#define THIN_COLS 4
template <typename Tag, typename A, typename Op>
__device__ __forceinline__ void reduce_cols_thin(const typename DType<Tag>::Storage* in, A* out,
                                                 int rows, int cols) {
    typedef typename DType<Tag>::Storage S;
    const u64 z = blockIdx.z;
    const long long c0 = (long long)blockIdx.x * blockDim.x * THIN_COLS + threadIdx.x;
    const S* base = in + z * (u64)rows * (u64)cols;
    A acc[THIN_COLS];
#pragma unroll
    for (int h = 0; h < THIN_COLS; ++h) acc[h] = Op::identity();
    for (int r = 0; r < rows; r += 8) {
        S v[THIN_COLS][8];
#pragma unroll
        for (int h = 0; h < THIN_COLS; ++h)
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                const long long c = c0 + (long long)h * blockDim.x;
                if (c < cols && r + u < rows) v[h][u] = base[(u64)(r + u) * (u64)cols + c];
            }
#pragma unroll
        for (int h = 0; h < THIN_COLS; ++h)
#pragma unroll
            for (int u = 0; u < 8; ++u)
                if (r + u < rows) acc[h] = Op::combine(acc[h], widen<Tag, A>(v[h][u]));
    }
#pragma unroll
    for (int h = 0; h < THIN_COLS; ++h) {
        const long long c = c0 + (long long)h * blockDim.x;
        if (c < cols) out[z * (u64)cols + c] = acc[h];
    }
}

extern "C" __global__ void __launch_bounds__(256) reduce_cols_thin_sum_f32(const float* in, float* out, int rows, int cols) { reduce_cols_thin<float, float, SumOp<float> >(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(256) reduce_cols_thin_sum_f64(const double* in, double* out, int rows, int cols) { reduce_cols_thin<double, double, SumOp<double> >(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(256) reduce_cols_thin_sum_f16(const f16_t* in, float* out, int rows, int cols) { reduce_cols_thin<F16, float, SumOp<float> >(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(256) reduce_cols_thin_sum_bf16(const bf16_t* in, float* out, int rows, int cols) { reduce_cols_thin<BF16, float, SumOp<float> >(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(256) reduce_cols_thin_max_f32(const float* in, float* out, int rows, int cols) { reduce_cols_thin<float, float, MaxOp<float> >(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(256) reduce_cols_thin_max_f64(const double* in, double* out, int rows, int cols) { reduce_cols_thin<double, double, MaxOp<double> >(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(256) reduce_cols_thin_max_f16(const f16_t* in, float* out, int rows, int cols) { reduce_cols_thin<F16, float, MaxOp<float> >(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(256) reduce_cols_thin_max_bf16(const bf16_t* in, float* out, int rows, int cols) { reduce_cols_thin<BF16, float, MaxOp<float> >(in, out, rows, cols); }
