// log_softmax.cu — softmax and log-softmax along rows, their backward passes, and the fused
// cross-entropy loss (log-softmax + negative log-likelihood of integer targets), in f32 and f64:
// the row ops autograd needs beyond softmax.cu's fast f32 forward (which stays the f32 softmax).
//
// One warp per row, 8 rows per block of 256: the row's maximum and its sum of exponentials are
// warp-shuffle reductions (no shared memory, no __syncthreads), so narrow rows such as a
// classifier's 10 logits keep 8 rows in flight per block, and any width is correct.
//
// Exact semantics, per row x[0..cols) (m = max x, s = sum exp(x - m)):
//   row_softmax (log = 0): y = exp(x - m) / s        (log = 1): y = x - m - log(s)
//   row_softmax_bwd, given the forward's output y and dy:
//     log = 0: dx = y * (dy - sum(dy * y))            log = 1: dx = dy - exp(y) * sum(dy)
//   cross_entropy_fwd: loss[r] = m + log(s) - x[t]  (t = targets[r]; t outside [0, cols) -> NaN)
//   cross_entropy_bwd: dx[r][c] = (exp(x - m) / s - (c == t)) * (g[0] * scale), where g is the
//     gradient of the caller's reduced loss (one device element, so no host round trip) and
//     scale is 1 / rows for a mean (1 for a sum); t outside [0, cols) -> a NaN row.
// A row of all -inf gives NaN (as torch). Reductions run in a fixed order (lane-strided partial
// sums, then a butterfly), so results are deterministic run to run.
//
// Launch: block 256 EXACTLY (8 warps), any grid: rows r = 8 * blockIdx.x + warp, then
//   + 8 * gridDim.x (grid-stride over rows).
#include "dtype.cuh"

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ float ex(float v) { return expf(v); }
__device__ __forceinline__ double ex(double v) { return exp(v); }
__device__ __forceinline__ float lg(float v) { return logf(v); }
__device__ __forceinline__ double lg(double v) { return log(v); }
__device__ __forceinline__ float neg_inf(float) { return __int_as_float(0xff800000); }
__device__ __forceinline__ double neg_inf(double) { return __longlong_as_double(0xfff0000000000000ULL); }

template <typename T> __device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}
template <typename T> __device__ __forceinline__ T warp_max(T v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const T w = __shfl_xor_sync(FULL_MASK, v, o);
        v = (w > v || w != w) ? w : v;  // NaN wins, so a NaN row stays NaN
    }
    return v;
}

// m and log(s) of one row, reduced over the warp (every lane gets both).
template <typename T>
__device__ __forceinline__ void row_stats(const T* x, int cols, int lane, T& m, T& s) {
    m = neg_inf((T)0);
    for (int c = lane; c < cols; c += 32) {
        const T v = x[c];
        m = (v > m || v != v) ? v : m;
    }
    m = warp_max(m);
    s = (T)0;
    for (int c = lane; c < cols; c += 32) s += ex(x[c] - m);
    s = warp_sum(s);
}

template <typename T>
__device__ __forceinline__ void row_softmax(const T* x, T* y, int rows, int cols, int log_out) {
    const int lane = threadIdx.x % 32;
    for (int r = blockIdx.x * 8 + threadIdx.x / 32; r < rows; r += gridDim.x * 8) {
        const T* xr = x + (u64)r * (u64)cols;
        T* yr = y + (u64)r * (u64)cols;
        T m, s;
        row_stats(xr, cols, lane, m, s);
        if (log_out) {
            const T shift = m + lg(s);
            for (int c = lane; c < cols; c += 32) yr[c] = xr[c] - shift;
        } else {
            const T inv = (T)1 / s;
            for (int c = lane; c < cols; c += 32) yr[c] = ex(xr[c] - m) * inv;
        }
    }
}

template <typename T>
__device__ __forceinline__ void row_softmax_bwd(const T* y, const T* dy, T* dx, int rows, int cols,
                                                int log_out) {
    const int lane = threadIdx.x % 32;
    for (int r = blockIdx.x * 8 + threadIdx.x / 32; r < rows; r += gridDim.x * 8) {
        const u64 base = (u64)r * (u64)cols;
        T dot = (T)0;
        for (int c = lane; c < cols; c += 32)
            dot += log_out ? dy[base + c] : dy[base + c] * y[base + c];
        dot = warp_sum(dot);
        for (int c = lane; c < cols; c += 32) {
            const u64 i = base + c;
            dx[i] = log_out ? dy[i] - ex(y[i]) * dot : y[i] * (dy[i] - dot);
        }
    }
}

extern "C" __global__ void row_softmax_f32(const float* x, float* y, int rows, int cols, int log_out) {
    row_softmax<float>(x, y, rows, cols, log_out);
}
extern "C" __global__ void row_softmax_f64(const double* x, double* y, int rows, int cols, int log_out) {
    row_softmax<double>(x, y, rows, cols, log_out);
}
extern "C" __global__ void row_softmax_bwd_f32(const float* y, const float* dy, float* dx, int rows,
                                               int cols, int log_out) {
    row_softmax_bwd<float>(y, dy, dx, rows, cols, log_out);
}
extern "C" __global__ void row_softmax_bwd_f64(const double* y, const double* dy, double* dx,
                                               int rows, int cols, int log_out) {
    row_softmax_bwd<double>(y, dy, dx, rows, cols, log_out);
}

__device__ __forceinline__ float nan_of(float) { return __int_as_float(0x7fffffff); }
__device__ __forceinline__ double nan_of(double) { return __longlong_as_double(0x7ff8000000000000ULL); }

template <typename T>
__device__ __forceinline__ void cross_entropy_fwd(const T* x, const int* targets, T* loss, int rows,
                                                  int cols) {
    const int lane = threadIdx.x % 32;
    for (int r = blockIdx.x * 8 + threadIdx.x / 32; r < rows; r += gridDim.x * 8) {
        const T* xr = x + (u64)r * (u64)cols;
        T m, s;
        row_stats(xr, cols, lane, m, s);
        if (lane == 0) {
            const int t = targets[r];
            loss[r] = (t >= 0 && t < cols) ? m + lg(s) - xr[t] : nan_of((T)0);
        }
    }
}

template <typename T>
__device__ __forceinline__ void cross_entropy_bwd(const T* x, const int* targets, const T* g, T* dx,
                                                  int rows, int cols, T scale) {
    const int lane = threadIdx.x % 32;
    const T gs = g[0] * scale;
    for (int r = blockIdx.x * 8 + threadIdx.x / 32; r < rows; r += gridDim.x * 8) {
        const T* xr = x + (u64)r * (u64)cols;
        T* dr = dx + (u64)r * (u64)cols;
        T m, s;
        row_stats(xr, cols, lane, m, s);
        const int t = targets[r];
        const bool ok = t >= 0 && t < cols;
        const T inv = (T)1 / s;
        for (int c = lane; c < cols; c += 32) {
            const T p = ex(xr[c] - m) * inv;
            dr[c] = ok ? (p - (c == t ? (T)1 : (T)0)) * gs : nan_of((T)0);
        }
    }
}

extern "C" __global__ void cross_entropy_fwd_f32(const float* x, const int* targets, float* loss,
                                                 int rows, int cols) {
    cross_entropy_fwd<float>(x, targets, loss, rows, cols);
}
extern "C" __global__ void cross_entropy_fwd_f64(const double* x, const int* targets, double* loss,
                                                 int rows, int cols) {
    cross_entropy_fwd<double>(x, targets, loss, rows, cols);
}
extern "C" __global__ void cross_entropy_bwd_f32(const float* x, const int* targets, const float* g,
                                                 float* dx, int rows, int cols, float scale) {
    cross_entropy_bwd<float>(x, targets, g, dx, rows, cols, scale);
}
extern "C" __global__ void cross_entropy_bwd_f64(const double* x, const int* targets, const double* g,
                                                 double* dx, int rows, int cols, double scale) {
    cross_entropy_bwd<double>(x, targets, g, dx, rows, cols, scale);
}
