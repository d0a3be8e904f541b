// ex2.cuh — 2^x with the hardware's approximation (ex2.approx.ftz.f32: 2 ulp, denormal results
// flushed to zero, ex2(-inf) = +0): the softmax exponent of the attention kernels and GELU's.
#pragma once

__device__ __forceinline__ float ex2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// 2^x on the FMA and integer pipes instead of the MUFU (FlashAttention-4's idea, for a softmax
// that waits for the MUFU: at D = 64 one key tile's exponentials take the MUFU, 16 a clock per
// SM, as long as its two products take the tensor cores). x rounded to the nearest integer n by
// adding 1.5 * 2^23, 2^(x - n) by a degree-4 polynomial (relative error 2.9e-6 on [-0.5, 0.5],
// exactly 1 at 0: a row's largest score keeps P = 1), n added to the exponent bits. For softmax
// arguments (x <= 0 up to rounding); x < -125 and -inf give +0, as ex2_approx's flush does, and
// NaN stays NaN. Lab only for now: the forward's AW_POLY_EXP switch (attention_wgmma.cu;
// kernels/TUNING.md, session 62).
__device__ __forceinline__ float ex2_poly(float x) {
    const float xc = fmaxf(x, -125.0f);
    const float t = __fadd_rn(xc, 12582912.0f);  // the low bits of t hold n (its ulp is 1)
    const float f = __fsub_rn(xc, __fsub_rn(t, 12582912.0f));
    const float p =
        fmaf(fmaf(fmaf(fmaf(0.00958290137f, f, 0.0559064187f), f, 0.240240976f), f, 0.693124175f), f, 1.0f);
    // t's bits are 0x4B400000 + n, whose low 9 bits shifted by 23 are n << 23 (mod 2^32).
    const unsigned e = (unsigned)__float_as_int(t) << 23;
    const float r = __int_as_float((int)((unsigned)__float_as_int(p) + e));
    return x >= -125.0f ? r : (x < -125.0f ? 0.0f : x);  // a NaN argument stays NaN, as in ex2_approx
}
