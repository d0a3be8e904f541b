// cast.cu — dtype conversions (`tensor.to(dtype)`): one thread per element, grid-stride, 64-bit
// indices. Each conversion rounds once, like Rust's `as` and PyTorch:
//   float -> narrower float: round to nearest even (f32 -> f16 with cvt.rn; f32 -> bf16 as in
//     dtype.cuh; f64 -> f32 by the hardware conversion);
//   wider or exact: f16/bf16 -> f32, f32 -> f64, i32 -> f64 are exact; f16 <-> bf16 goes
//     through f32 exactly once rounded; i32 -> f32 rounds to nearest even;
//   float -> i32: toward zero, saturating at INT_MIN / INT_MAX, NaN -> 0 (Rust's `as`).
// Pairs that would round twice (f64 <-> f16/bf16, i32 <-> f16/bf16) have no kernel: cast through
// f32 explicitly. Launch: block 256, any grid.
#include "dtype.cuh"

// Saturating, truncating float -> int (NaN -> 0), as Rust's `as`.
__device__ __forceinline__ int to_i32_sat(double v) {
    if (v != v) return 0;
    if (v >= 2147483647.0) return 2147483647;
    if (v <= -2147483648.0) return (int)0x80000000;
    return (int)v;
}

template <typename From, typename To>
struct Conv {
    static __device__ __forceinline__ typename DType<To>::Storage apply(typename DType<From>::Storage x) {
        return DType<To>::store((typename DType<To>::Compute)DType<From>::load(x));
    }
};
template <> struct Conv<float, int> {
    static __device__ __forceinline__ int apply(float x) { return to_i32_sat((double)x); }
};
template <> struct Conv<double, int> {
    static __device__ __forceinline__ int apply(double x) { return to_i32_sat(x); }
};

template <typename From, typename To>
__device__ __forceinline__ void cast(const typename DType<From>::Storage* x,
                                     typename DType<To>::Storage* out, u64 n) {
    for (u64 i = global_tid(); i < n; i += grid_threads()) out[i] = Conv<From, To>::apply(x[i]);
}

extern "C" __global__ void cast_f32_f64(const float* x, double* out, unsigned long long n) {
    cast<float, double>(x, out, n);
}
extern "C" __global__ void cast_f64_f32(const double* x, float* out, unsigned long long n) {
    cast<double, float>(x, out, n);
}
extern "C" __global__ void cast_f32_f16(const float* x, f16_t* out, unsigned long long n) {
    cast<float, F16>(x, out, n);
}
extern "C" __global__ void cast_f16_f32(const f16_t* x, float* out, unsigned long long n) {
    cast<F16, float>(x, out, n);
}
extern "C" __global__ void cast_f32_bf16(const float* x, bf16_t* out, unsigned long long n) {
    cast<float, BF16>(x, out, n);
}
extern "C" __global__ void cast_bf16_f32(const bf16_t* x, float* out, unsigned long long n) {
    cast<BF16, float>(x, out, n);
}
extern "C" __global__ void cast_f16_bf16(const f16_t* x, bf16_t* out, unsigned long long n) {
    cast<F16, BF16>(x, out, n);
}
extern "C" __global__ void cast_bf16_f16(const bf16_t* x, f16_t* out, unsigned long long n) {
    cast<BF16, F16>(x, out, n);
}
extern "C" __global__ void cast_f32_i32(const float* x, int* out, unsigned long long n) {
    cast<float, int>(x, out, n);
}
extern "C" __global__ void cast_i32_f32(const int* x, float* out, unsigned long long n) {
    cast<int, float>(x, out, n);
}
extern "C" __global__ void cast_f64_i32(const double* x, int* out, unsigned long long n) {
    cast<double, int>(x, out, n);
}
extern "C" __global__ void cast_i32_f64(const int* x, double* out, unsigned long long n) {
    cast<int, double>(x, out, n);
}
