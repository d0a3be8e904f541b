// activation_grad.cu — the backward passes of the pointwise activations autograd records, and
// seed 004's fused op in f64 (for gradcheck, which differentiates in double precision).
//
// Exact semantics (the CPU references in the tests must match):
//   relu_bwd:  dx = x > 0 ? dy : 0          (the subgradient 0 at x == 0, as PyTorch; NaN x -> 0)
//   tanh_bwd:  dx = dy * (1 - y * y)        (y = tanh(x), the forward's output)
//   f16 / bf16: computed in f32, rounded once (relu_bwd passes dy's bits through unchanged)
//   bias_relu_fwd_f64: pre = fma(x, scale, bias[col]); out = pre > 0 ? pre : 0
//   bias_relu_bwd_f64: g = pre > 0 ? dy : 0; grad_x = g * scale;
//                      grad_bias[col] = sum over rows of g, in row order (one thread per column)
// In-place use (dx == dy) is allowed: each element is read and then written by the same thread.
//
// Launch: relu_bwd / tanh_bwd / bias_relu_fwd_f64: block 256, any grid (grid-stride loop,
//   64-bit indices). bias_relu_bwd_f64: block 256, any grid; thread t of the grid owns columns
//   t, t + grid threads, ... and walks every row of them (f64 is for checking, not for speed).
#include "dtype.cuh"

template <typename Tag>
__device__ __forceinline__ void relu_bwd(const typename DType<Tag>::Storage* x,
                                         const typename DType<Tag>::Storage* dy,
                                         typename DType<Tag>::Storage* dx, u64 n) {
    typedef DType<Tag> D;
    typedef typename D::Compute C;
    for (u64 i = global_tid(); i < n; i += grid_threads())
        dx[i] = D::load(x[i]) > (C)0 ? dy[i] : D::store((C)0);
}

template <typename Tag>
__device__ __forceinline__ void tanh_bwd(const typename DType<Tag>::Storage* y,
                                         const typename DType<Tag>::Storage* dy,
                                         typename DType<Tag>::Storage* dx, u64 n) {
    typedef DType<Tag> D;
    typedef typename D::Compute C;
    for (u64 i = global_tid(); i < n; i += grid_threads()) {
        const C v = D::load(y[i]);
        dx[i] = D::store(D::load(dy[i]) * ((C)1 - v * v));
    }
}

extern "C" __global__ void relu_bwd_f32(const float* x, const float* dy, float* dx, unsigned long long n) {
    relu_bwd<float>(x, dy, dx, n);
}
extern "C" __global__ void relu_bwd_f64(const double* x, const double* dy, double* dx, unsigned long long n) {
    relu_bwd<double>(x, dy, dx, n);
}
extern "C" __global__ void relu_bwd_f16(const f16_t* x, const f16_t* dy, f16_t* dx, unsigned long long n) {
    relu_bwd<F16>(x, dy, dx, n);
}
extern "C" __global__ void relu_bwd_bf16(const bf16_t* x, const bf16_t* dy, bf16_t* dx, unsigned long long n) {
    relu_bwd<BF16>(x, dy, dx, n);
}
extern "C" __global__ void tanh_bwd_f32(const float* y, const float* dy, float* dx, unsigned long long n) {
    tanh_bwd<float>(y, dy, dx, n);
}
extern "C" __global__ void tanh_bwd_f64(const double* y, const double* dy, double* dx, unsigned long long n) {
    tanh_bwd<double>(y, dy, dx, n);
}
extern "C" __global__ void tanh_bwd_f16(const f16_t* y, const f16_t* dy, f16_t* dx, unsigned long long n) {
    tanh_bwd<F16>(y, dy, dx, n);
}
extern "C" __global__ void tanh_bwd_bf16(const bf16_t* y, const bf16_t* dy, bf16_t* dx, unsigned long long n) {
    tanh_bwd<BF16>(y, dy, dx, n);
}

extern "C" __global__ void bias_relu_fwd_f64(const double* x, const double* bias, double scale,
                                             double* out, int rows, int cols) {
    const u64 n = (u64)rows * (u64)cols;
    for (u64 i = global_tid(); i < n; i += grid_threads()) {
        const double pre = fma(x[i], scale, bias[i % (u64)cols]);
        out[i] = pre > 0.0 ? pre : 0.0;
    }
}

extern "C" __global__ void bias_relu_bwd_f64(const double* x, const double* bias, double scale,
                                             const double* grad_out, double* grad_x,
                                             double* grad_bias, int rows, int cols) {
    for (u64 c = global_tid(); c < (u64)cols; c += grid_threads()) {
        const double b = bias[c];
        double sum = 0.0;
        for (int r = 0; r < rows; ++r) {
            const u64 i = (u64)r * (u64)cols + c;
            const double g = fma(x[i], scale, b) > 0.0 ? grad_out[i] : 0.0;
            grad_x[i] = g * scale;
            sum += g;
        }
        grad_bias[c] = sum;
    }
}
