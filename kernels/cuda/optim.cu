// optim.cu — the optimizer updates of cuda-nn (PyTorch's torch.optim.SGD and Adam, single-tensor
// form), in place: each thread reads its element of the parameter and state, and writes them
// back. In place is what lets a training step be captured into a CUDA graph and replayed (the
// graph reads and writes the same addresses every time); Adam's step count lives on the device
// for the same reason (PyTorch's `capturable=True`): `increment_i32` adds one to every
// parameter's counter, and the update reads its own. One thread per element, grid-stride,
// 64-bit indices.
//
// Exact semantics (PyTorch's documented algorithms; the CPU references in the tests match):
//   sgd:          d = g + wd * p;  p = p - lr * d
//   sgd_momentum: d = g + wd * p;  b = first ? d : momentum * b + (1 - dampening) * d;
//                 d = nesterov ? d + momentum * b : b;  p = p - lr * d   (b not read if first)
//   adam:         t = steps[index] (>= 1, already incremented for this step)
//                 (adamw == 0) g = g + wd * p;   (adamw == 1) p = p * (1 - lr * wd)
//                 m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g * g
//                 p = p - (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//   increment_i32: counters[i] += 1 for i < n
//
// Launch: block 256, any grid.
#include "dtype.cuh"

__device__ __forceinline__ float sq(float v) { return sqrtf(v); }
__device__ __forceinline__ double sq(double v) { return sqrt(v); }

__device__ __forceinline__ float pw(float b, int t) { return powf(b, (float)t); }
__device__ __forceinline__ double pw(double b, int t) { return pow(b, (double)t); }

template <typename T>
__device__ __forceinline__ void sgd(T* p, const T* g, u64 n, T lr, T wd) {
    for (u64 i = global_tid(); i < n; i += grid_threads()) p[i] = p[i] - lr * (g[i] + wd * p[i]);
}

template <typename T>
__device__ __forceinline__ void sgd_momentum(T* p, const T* g, T* b, u64 n, T lr, T momentum,
                                             T dampening, T wd, int nesterov, int first) {
    for (u64 i = global_tid(); i < n; i += grid_threads()) {
        T d = g[i] + wd * p[i];
        const T nb = first ? d : momentum * b[i] + ((T)1 - dampening) * d;
        b[i] = nb;
        d = nesterov ? d + momentum * nb : nb;
        p[i] = p[i] - lr * d;
    }
}

template <typename T>
__device__ __forceinline__ void adam(T* p, const T* g, T* m, T* v, const int* steps, int index,
                                     u64 n, T lr, T b1, T b2, T eps, T wd, int adamw) {
    const int t = steps[index];
    const T step = lr / ((T)1 - pw(b1, t)), root_bc2 = sq((T)1 - pw(b2, t));
    for (u64 i = global_tid(); i < n; i += grid_threads()) {
        T pi = p[i], gi = g[i];
        if (adamw) pi = pi * ((T)1 - lr * wd);
        else gi = gi + wd * pi;
        const T mi = b1 * m[i] + ((T)1 - b1) * gi;
        const T vi = b2 * v[i] + ((T)1 - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step * mi / (sq(vi) / root_bc2 + eps);
    }
}

extern "C" __global__ void sgd_f32(float* p, const float* g, unsigned long long n, float lr, float wd) {
    sgd<float>(p, g, n, lr, wd);
}
extern "C" __global__ void sgd_f64(double* p, const double* g, unsigned long long n, double lr,
                                   double wd) {
    sgd<double>(p, g, n, lr, wd);
}
extern "C" __global__ void sgd_momentum_f32(float* p, const float* g, float* b, unsigned long long n,
                                            float lr, float momentum, float dampening, float wd,
                                            int nesterov, int first) {
    sgd_momentum<float>(p, g, b, n, lr, momentum, dampening, wd, nesterov, first);
}
extern "C" __global__ void sgd_momentum_f64(double* p, const double* g, double* b,
                                            unsigned long long n, double lr, double momentum,
                                            double dampening, double wd, int nesterov, int first) {
    sgd_momentum<double>(p, g, b, n, lr, momentum, dampening, wd, nesterov, first);
}
extern "C" __global__ void adam_f32(float* p, const float* g, float* m, float* v, const int* steps,
                                    int index, unsigned long long n, float lr, float b1, float b2,
                                    float eps, float wd, int adamw) {
    adam<float>(p, g, m, v, steps, index, n, lr, b1, b2, eps, wd, adamw);
}
extern "C" __global__ void adam_f64(double* p, const double* g, double* m, double* v,
                                    const int* steps, int index, unsigned long long n, double lr,
                                    double b1, double b2, double eps, double wd, int adamw) {
    adam<double>(p, g, m, v, steps, index, n, lr, b1, b2, eps, wd, adamw);
}
extern "C" __global__ void increment_i32(int* counters, int n) {
    for (u64 i = global_tid(); i < (u64)n; i += grid_threads()) counters[i] += 1;
}
