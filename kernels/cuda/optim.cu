// optim.cu — the optimizer updates of cuda-nn (PyTorch's torch.optim.SGD and Adam, single-tensor
// form), out of place: tensors are immutable, so each step writes new parameter and state
// buffers (from the caching allocator, so no cudaMalloc in the loop) and the old ones return to
// the pool. One thread per element, grid-stride, 64-bit indices.
//
// Exact semantics (PyTorch's documented algorithms; the CPU references in the tests match):
//   sgd:          d = g + wd * p;  p' = p - lr * d
//   sgd_momentum: d = g + wd * p;  b' = first ? d : momentum * b + (1 - dampening) * d;
//                 d = nesterov ? d + momentum * b' : b';  p' = p - lr * d   (b not read if first)
//   adam:         (adamw == 0) g = g + wd * p;   (adamw == 1) p = p * (1 - lr * wd)
//                 m' = b1 * m + (1 - b1) * g;  v' = b2 * v + (1 - b2) * g * g
//                 p' = p - (lr / bc1) * m' / (sqrt(v') / sqrt(bc2) + eps)
//                 with bc1 = 1 - b1^t, bc2 = 1 - b2^t for step t >= 1 (passed by the host).
// In-place use (p_out == p, ...) would be correct (each element is read, then written by the
// same thread), but the Rust API never aliases them.
//
// Launch: block 256, any grid.
#include "dtype.cuh"

__device__ __forceinline__ float sq(float v) { return sqrtf(v); }
__device__ __forceinline__ double sq(double v) { return sqrt(v); }

template <typename T>
__device__ __forceinline__ void sgd(const T* p, const T* g, T* p_out, u64 n, T lr, T wd) {
    for (u64 i = global_tid(); i < n; i += grid_threads()) p_out[i] = p[i] - lr * (g[i] + wd * p[i]);
}

template <typename T>
__device__ __forceinline__ void sgd_momentum(const T* p, const T* g, const T* b, T* p_out, T* b_out,
                                             u64 n, T lr, T momentum, T dampening, T wd,
                                             int nesterov, int first) {
    for (u64 i = global_tid(); i < n; i += grid_threads()) {
        T d = g[i] + wd * p[i];
        const T nb = first ? d : momentum * b[i] + ((T)1 - dampening) * d;
        b_out[i] = nb;
        d = nesterov ? d + momentum * nb : nb;
        p_out[i] = p[i] - lr * d;
    }
}

template <typename T>
__device__ __forceinline__ void adam(const T* p, const T* g, const T* m, const T* v, T* p_out,
                                     T* m_out, T* v_out, u64 n, T lr, T b1, T b2, T eps, T wd,
                                     T bc1, T bc2, int adamw) {
    const T step = lr / bc1, root_bc2 = sq(bc2);
    for (u64 i = global_tid(); i < n; i += grid_threads()) {
        T pi = p[i], gi = g[i];
        if (adamw) pi = pi * ((T)1 - lr * wd);
        else gi = gi + wd * pi;
        const T mi = b1 * m[i] + ((T)1 - b1) * gi;
        const T vi = b2 * v[i] + ((T)1 - b2) * gi * gi;
        m_out[i] = mi;
        v_out[i] = vi;
        p_out[i] = pi - step * mi / (sq(vi) / root_bc2 + eps);
    }
}

extern "C" __global__ void sgd_f32(const float* p, const float* g, float* p_out, unsigned long long n, float lr,
                                   float wd) {
    sgd<float>(p, g, p_out, n, lr, wd);
}
extern "C" __global__ void sgd_f64(const double* p, const double* g, double* p_out, unsigned long long n,
                                   double lr, double wd) {
    sgd<double>(p, g, p_out, n, lr, wd);
}
extern "C" __global__ void sgd_momentum_f32(const float* p, const float* g, const float* b,
                                            float* p_out, float* b_out, unsigned long long n, float lr,
                                            float momentum, float dampening, float wd,
                                            int nesterov, int first) {
    sgd_momentum<float>(p, g, b, p_out, b_out, n, lr, momentum, dampening, wd, nesterov, first);
}
extern "C" __global__ void sgd_momentum_f64(const double* p, const double* g, const double* b,
                                            double* p_out, double* b_out, unsigned long long n, double lr,
                                            double momentum, double dampening, double wd,
                                            int nesterov, int first) {
    sgd_momentum<double>(p, g, b, p_out, b_out, n, lr, momentum, dampening, wd, nesterov, first);
}
extern "C" __global__ void adam_f32(const float* p, const float* g, const float* m, const float* v,
                                    float* p_out, float* m_out, float* v_out, unsigned long long n, float lr,
                                    float b1, float b2, float eps, float wd, float bc1, float bc2,
                                    int adamw) {
    adam<float>(p, g, m, v, p_out, m_out, v_out, n, lr, b1, b2, eps, wd, bc1, bc2, adamw);
}
extern "C" __global__ void adam_f64(const double* p, const double* g, const double* m,
                                    const double* v, double* p_out, double* m_out, double* v_out,
                                    unsigned long long n, double lr, double b1, double b2, double eps, double wd,
                                    double bc1, double bc2, int adamw) {
    adam<double>(p, g, m, v, p_out, m_out, v_out, n, lr, b1, b2, eps, wd, bc1, bc2, adamw);
}
