// binary_ops.cuh — the four binary operations of the elementwise kernels (elementwise.cu,
// binary_strided.cu), written once for the compute type. i32 arithmetic goes through unsigned so
// that overflow wraps (signed overflow is undefined behaviour in C++); i32 division truncates,
// x / 0 == 0 and INT_MIN / -1 == INT_MIN (Rust: if b == 0 {0} else {a.wrapping_div(b)}).
#pragma once

struct OpAdd {
    template <typename C> __device__ C operator()(C a, C b) const { return a + b; }
    __device__ int operator()(int a, int b) const { return (int)((unsigned)a + (unsigned)b); }
};
struct OpSub {
    template <typename C> __device__ C operator()(C a, C b) const { return a - b; }
    __device__ int operator()(int a, int b) const { return (int)((unsigned)a - (unsigned)b); }
};
struct OpMul {
    template <typename C> __device__ C operator()(C a, C b) const { return a * b; }
    __device__ int operator()(int a, int b) const { return (int)((unsigned)a * (unsigned)b); }
};
struct OpDiv {
    template <typename C> __device__ C operator()(C a, C b) const { return a / b; }
    __device__ int operator()(int a, int b) const {
        if (b == 0) return 0;
        if (b == -1) return (int)(0u - (unsigned)a);  // INT_MIN / -1 wraps to INT_MIN
        return a / b;
    }
};
