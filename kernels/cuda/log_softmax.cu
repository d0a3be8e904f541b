// log_softmax.cu — softmax and log-softmax along rows, their backward passes, and the fused
// cross-entropy loss (log-softmax + negative log-likelihood of integer targets), in f32 and f64,
// and in f16/bf16 (stored as such, computed in f32, each result rounded once):
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

// m and log(s) of one row, reduced over the warp (every lane gets both), in the compute type
// (f32 for f16/bf16).
template <typename Tag>
__device__ __forceinline__ void row_stats(const typename DType<Tag>::Storage* x, int cols, int lane,
                                          typename DType<Tag>::Compute& m,
                                          typename DType<Tag>::Compute& s) {
    typedef DType<Tag> D;
    typedef typename D::Compute C;
    m = neg_inf((C)0);
    for (int c = lane; c < cols; c += 32) {
        const C v = D::load(x[c]);
        m = (v > m || v != v) ? v : m;
    }
    m = warp_max(m);
    s = (C)0;
    for (int c = lane; c < cols; c += 32) s += ex(D::load(x[c]) - m);
    s = warp_sum(s);
}

template <typename Tag>
__device__ __forceinline__ void row_softmax(const typename DType<Tag>::Storage* x,
                                            typename DType<Tag>::Storage* y, int rows, int cols,
                                            int log_out) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    typedef typename D::Compute C;
    const int lane = threadIdx.x % 32;
    for (int r = blockIdx.x * 8 + threadIdx.x / 32; r < rows; r += gridDim.x * 8) {
        const S* xr = x + (u64)r * (u64)cols;
        S* yr = y + (u64)r * (u64)cols;
        C m, s;
        row_stats<Tag>(xr, cols, lane, m, s);
        if (log_out) {
            const C shift = m + lg(s);
            for (int c = lane; c < cols; c += 32) yr[c] = D::store(D::load(xr[c]) - shift);
        } else {
            const C inv = (C)1 / s;
            for (int c = lane; c < cols; c += 32) yr[c] = D::store(ex(D::load(xr[c]) - m) * inv);
        }
    }
}

template <typename Tag>
__device__ __forceinline__ void row_softmax_bwd(const typename DType<Tag>::Storage* y,
                                                const typename DType<Tag>::Storage* dy,
                                                typename DType<Tag>::Storage* dx, int rows,
                                                int cols, int log_out) {
    typedef DType<Tag> D;
    typedef typename D::Compute C;
    const int lane = threadIdx.x % 32;
    for (int r = blockIdx.x * 8 + threadIdx.x / 32; r < rows; r += gridDim.x * 8) {
        const u64 base = (u64)r * (u64)cols;
        C dot = (C)0;
        for (int c = lane; c < cols; c += 32) {
            const C g = D::load(dy[base + c]);
            dot += log_out ? g : g * D::load(y[base + c]);
        }
        dot = warp_sum(dot);
        for (int c = lane; c < cols; c += 32) {
            const u64 i = base + c;
            const C g = D::load(dy[i]), v = D::load(y[i]);
            dx[i] = D::store(log_out ? g - ex(v) * dot : v * (g - dot));
        }
    }
}

extern "C" __global__ void row_softmax_f32(const float* x, float* y, int rows, int cols, int log_out) {
    row_softmax<float>(x, y, rows, cols, log_out);
}
extern "C" __global__ void row_softmax_f64(const double* x, double* y, int rows, int cols, int log_out) {
    row_softmax<double>(x, y, rows, cols, log_out);
}
extern "C" __global__ void row_softmax_f16(const f16_t* x, f16_t* y, int rows, int cols, int log_out) {
    row_softmax<F16>(x, y, rows, cols, log_out);
}
extern "C" __global__ void row_softmax_bf16(const bf16_t* x, bf16_t* y, int rows, int cols, int log_out) {
    row_softmax<BF16>(x, y, rows, cols, log_out);
}
extern "C" __global__ void row_softmax_bwd_f32(const float* y, const float* dy, float* dx, int rows,
                                               int cols, int log_out) {
    row_softmax_bwd<float>(y, dy, dx, rows, cols, log_out);
}
extern "C" __global__ void row_softmax_bwd_f64(const double* y, const double* dy, double* dx, int rows,
                                               int cols, int log_out) {
    row_softmax_bwd<double>(y, dy, dx, rows, cols, log_out);
}
extern "C" __global__ void row_softmax_bwd_f16(const f16_t* y, const f16_t* dy, f16_t* dx, int rows,
                                               int cols, int log_out) {
    row_softmax_bwd<F16>(y, dy, dx, rows, cols, log_out);
}
extern "C" __global__ void row_softmax_bwd_bf16(const bf16_t* y, const bf16_t* dy, bf16_t* dx, int rows,
                                               int cols, int log_out) {
    row_softmax_bwd<BF16>(y, dy, dx, rows, cols, log_out);
}

__device__ __forceinline__ float nan_of(float) { return __int_as_float(0x7fffffff); }
__device__ __forceinline__ double nan_of(double) { return __longlong_as_double(0x7ff8000000000000ULL); }

template <typename Tag>
__device__ __forceinline__ void cross_entropy_fwd(const typename DType<Tag>::Storage* x,
                                                  const int* targets,
                                                  typename DType<Tag>::Storage* loss, int rows,
                                                  int cols) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    typedef typename D::Compute C;
    const int lane = threadIdx.x % 32;
    for (int r = blockIdx.x * 8 + threadIdx.x / 32; r < rows; r += gridDim.x * 8) {
        const S* xr = x + (u64)r * (u64)cols;
        C m, s;
        row_stats<Tag>(xr, cols, lane, m, s);
        if (lane == 0) {
            const int t = targets[r];
            loss[r] = D::store((t >= 0 && t < cols) ? m + lg(s) - D::load(xr[t]) : nan_of((C)0));
        }
    }
}

template <typename Tag>
__device__ __forceinline__ void cross_entropy_bwd(const typename DType<Tag>::Storage* x,
                                                  const int* targets,
                                                  const typename DType<Tag>::Storage* g,
                                                  typename DType<Tag>::Storage* dx, int rows,
                                                  int cols, typename DType<Tag>::Compute scale) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    typedef typename D::Compute C;
    const int lane = threadIdx.x % 32;
    const C gs = D::load(g[0]) * scale;
    for (int r = blockIdx.x * 8 + threadIdx.x / 32; r < rows; r += gridDim.x * 8) {
        const S* xr = x + (u64)r * (u64)cols;
        S* dr = dx + (u64)r * (u64)cols;
        C m, s;
        row_stats<Tag>(xr, cols, lane, m, s);
        const int t = targets[r];
        const bool ok = t >= 0 && t < cols;
        const C inv = (C)1 / s;
        for (int c = lane; c < cols; c += 32) {
            const C p = ex(D::load(xr[c]) - m) * inv;
            dr[c] = D::store(ok ? (p - (c == t ? (C)1 : (C)0)) * gs : nan_of((C)0));
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
extern "C" __global__ void cross_entropy_fwd_f16(const f16_t* x, const int* targets, f16_t* loss,
                                                 int rows, int cols) {
    cross_entropy_fwd<F16>(x, targets, loss, rows, cols);
}
extern "C" __global__ void cross_entropy_fwd_bf16(const bf16_t* x, const int* targets, bf16_t* loss,
                                                 int rows, int cols) {
    cross_entropy_fwd<BF16>(x, targets, loss, rows, cols);
}
extern "C" __global__ void cross_entropy_bwd_f32(const float* x, const int* targets, const float* g,
                                                 float* dx, int rows, int cols, float scale) {
    cross_entropy_bwd<float>(x, targets, g, dx, rows, cols, scale);
}
extern "C" __global__ void cross_entropy_bwd_f64(const double* x, const int* targets, const double* g,
                                                 double* dx, int rows, int cols, double scale) {
    cross_entropy_bwd<double>(x, targets, g, dx, rows, cols, scale);
}
extern "C" __global__ void cross_entropy_bwd_f16(const f16_t* x, const int* targets, const f16_t* g,
                                                 f16_t* dx, int rows, int cols, float scale) {
    cross_entropy_bwd<F16>(x, targets, g, dx, rows, cols, scale);
}
extern "C" __global__ void cross_entropy_bwd_bf16(const bf16_t* x, const int* targets, const bf16_t* g,
                                                 bf16_t* dx, int rows, int cols, float scale) {
    cross_entropy_bwd<BF16>(x, targets, g, dx, rows, cols, scale);
}
