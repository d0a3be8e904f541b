// optim.cu — the optimizer updates of cuda-stack-nn (PyTorch's torch.optim.SGD and Adam, single-tensor
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

// ---------------------------------------------------------------------------------------------
// Multi-tensor forms: four parameter tensors (with their gradients and state) updated by one
// launch, PyTorch's `foreach` / multi_tensor_apply idea. Thread e of the grid-stride loop over
// n0 + n1 + n2 + n3 elements finds its tensor by comparing with the running sums, then applies
// exactly the single-tensor rule above (same arithmetic, same results). Adam reads tensor j's
// step count from steps[j].
template <typename T>
__device__ __forceinline__ int segment(u64& e, u64 n0, u64 n1, u64 n2) {
    if (e < n0) return 0;
    e -= n0;
    if (e < n1) return 1;
    e -= n1;
    if (e < n2) return 2;
    e -= n2;
    return 3;
}

template <typename T>
__device__ __forceinline__ void sgd4(T* p0, const T* g0, T* p1, const T* g1, T* p2, const T* g2,
                                     T* p3, const T* g3, u64 n0, u64 n1, u64 n2, u64 n3, T lr,
                                     T wd) {
    const u64 total = n0 + n1 + n2 + n3;
    for (u64 i = global_tid(); i < total; i += grid_threads()) {
        u64 e = i;
        const int s = segment<T>(e, n0, n1, n2);
        T* p = s == 0 ? p0 : s == 1 ? p1 : s == 2 ? p2 : p3;
        const T* g = s == 0 ? g0 : s == 1 ? g1 : s == 2 ? g2 : g3;
        p[e] = p[e] - lr * (g[e] + wd * p[e]);
    }
}

template <typename T>
__device__ __forceinline__ void sgd_momentum4(T* p0, const T* g0, T* b0, T* p1, const T* g1, T* b1,
                                              T* p2, const T* g2, T* b2, T* p3, const T* g3,
                                              T* b3, u64 n0, u64 n1, u64 n2, u64 n3, T lr,
                                              T momentum, T dampening, T wd, int nesterov,
                                              int first) {
    const u64 total = n0 + n1 + n2 + n3;
    for (u64 i = global_tid(); i < total; i += grid_threads()) {
        u64 e = i;
        const int s = segment<T>(e, n0, n1, n2);
        T* p = s == 0 ? p0 : s == 1 ? p1 : s == 2 ? p2 : p3;
        const T* g = s == 0 ? g0 : s == 1 ? g1 : s == 2 ? g2 : g3;
        T* b = s == 0 ? b0 : s == 1 ? b1 : s == 2 ? b2 : b3;
        T d = g[e] + wd * p[e];
        const T nb = first ? d : momentum * b[e] + ((T)1 - dampening) * d;
        b[e] = nb;
        d = nesterov ? d + momentum * nb : nb;
        p[e] = p[e] - lr * d;
    }
}

template <typename T>
__device__ __forceinline__ void adam4(T* p0, const T* g0, T* m0, T* v0, T* p1, const T* g1, T* m1,
                                      T* v1, T* p2, const T* g2, T* m2, T* v2, T* p3, const T* g3,
                                      T* m3, T* v3, u64 n0, u64 n1, u64 n2, u64 n3,
                                      const int* steps, T lr, T b1, T b2, T eps, T wd, int adamw) {
    const u64 total = n0 + n1 + n2 + n3;
    for (u64 i = global_tid(); i < total; i += grid_threads()) {
        u64 e = i;
        const int s = segment<T>(e, n0, n1, n2);
        T* p = s == 0 ? p0 : s == 1 ? p1 : s == 2 ? p2 : p3;
        const T* g = s == 0 ? g0 : s == 1 ? g1 : s == 2 ? g2 : g3;
        T* m = s == 0 ? m0 : s == 1 ? m1 : s == 2 ? m2 : m3;
        T* v = s == 0 ? v0 : s == 1 ? v1 : s == 2 ? v2 : v3;
        const int t = steps[s];
        const T step = lr / ((T)1 - pw(b1, t)), root_bc2 = sq((T)1 - pw(b2, t));
        T pi = p[e], gi = g[e];
        if (adamw) pi = pi * ((T)1 - lr * wd);
        else gi = gi + wd * pi;
        const T mi = b1 * m[e] + ((T)1 - b1) * gi;
        const T vi = b2 * v[e] + ((T)1 - b2) * gi * gi;
        m[e] = mi;
        v[e] = vi;
        p[e] = pi - step * mi / (sq(vi) / root_bc2 + eps);
    }
}

extern "C" __global__ void sgd4_f32(float* p0, const float* g0, float* p1, const float* g1, float* p2, const float* g2, float* p3, const float* g3, unsigned long long n0, unsigned long long n1, unsigned long long n2, unsigned long long n3, float lr, float wd) {
    sgd4<float>(p0, g0, p1, g1, p2, g2, p3, g3, n0, n1, n2, n3, lr, wd);
}
extern "C" __global__ void sgd4_f64(double* p0, const double* g0, double* p1, const double* g1, double* p2, const double* g2, double* p3, const double* g3, unsigned long long n0, unsigned long long n1, unsigned long long n2, unsigned long long n3, double lr, double wd) {
    sgd4<double>(p0, g0, p1, g1, p2, g2, p3, g3, n0, n1, n2, n3, lr, wd);
}
extern "C" __global__ void sgd_momentum4_f32(float* p0, const float* g0, float* b0, float* p1, const float* g1, float* b1, float* p2, const float* g2, float* b2, float* p3, const float* g3, float* b3, unsigned long long n0, unsigned long long n1, unsigned long long n2, unsigned long long n3, float lr, float momentum, float dampening, float wd, int nesterov, int first) {
    sgd_momentum4<float>(p0, g0, b0, p1, g1, b1, p2, g2, b2, p3, g3, b3, n0, n1, n2, n3, lr, momentum, dampening, wd, nesterov, first);
}
extern "C" __global__ void sgd_momentum4_f64(double* p0, const double* g0, double* b0, double* p1, const double* g1, double* b1, double* p2, const double* g2, double* b2, double* p3, const double* g3, double* b3, unsigned long long n0, unsigned long long n1, unsigned long long n2, unsigned long long n3, double lr, double momentum, double dampening, double wd, int nesterov, int first) {
    sgd_momentum4<double>(p0, g0, b0, p1, g1, b1, p2, g2, b2, p3, g3, b3, n0, n1, n2, n3, lr, momentum, dampening, wd, nesterov, first);
}
extern "C" __global__ void adam4_f32(float* p0, const float* g0, float* m0, float* v0, float* p1, const float* g1, float* m1, float* v1, float* p2, const float* g2, float* m2, float* v2, float* p3, const float* g3, float* m3, float* v3, unsigned long long n0, unsigned long long n1, unsigned long long n2, unsigned long long n3, const int* steps, float lr, float b1, float b2, float eps, float wd, int adamw) {
    adam4<float>(p0, g0, m0, v0, p1, g1, m1, v1, p2, g2, m2, v2, p3, g3, m3, v3, n0, n1, n2, n3, steps, lr, b1, b2, eps, wd, adamw);
}
extern "C" __global__ void adam4_f64(double* p0, const double* g0, double* m0, double* v0, double* p1, const double* g1, double* m1, double* v1, double* p2, const double* g2, double* m2, double* v2, double* p3, const double* g3, double* m3, double* v3, unsigned long long n0, unsigned long long n1, unsigned long long n2, unsigned long long n3, const int* steps, double lr, double b1, double b2, double eps, double wd, int adamw) {
    adam4<double>(p0, g0, m0, v0, p1, g1, m1, v1, p2, g2, m2, v2, p3, g3, m3, v3, n0, n1, n2, n3, steps, lr, b1, b2, eps, wd, adamw);
}
