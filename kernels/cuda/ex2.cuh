// ex2.cuh — 2^x with the hardware's approximation (ex2.approx.ftz.f32: 2 ulp, denormal results
// flushed to zero, ex2(-inf) = +0): the softmax exponent of the attention kernels and GELU's.
#pragma once

__device__ __forceinline__ float ex2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
