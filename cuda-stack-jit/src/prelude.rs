//! The CUDA helpers every generated kernel starts with. They are inlined into each source (no
//! `#include`), so a kernel's cache key covers exactly the helpers it was compiled with, and
//! NVRTC needs no headers at all (NVRTC 12.x ships no `cuda_fp16.h` as a built-in header).
//!
//! - `float16` / `bfloat16`: 16-bit storage with the bits of `half::f16` / `half::bf16`;
//!   arithmetic converts to `float` (so `y = x * x` is computed in f32 and rounded once to
//!   nearest even when stored), like CuPy's `float16`.
//! - `_Raw<T>`: a `raw` parameter: `x[j]` (bounds-checked: an index outside the tensor traps
//!   the kernel, which surfaces as a launch failure, instead of touching other memory) and
//!   `x.size()`.
//! - `_Ind`: `_ind.size()`, the number of elements of the call (CuPy's spelling).
//! - `_Dims<N>`: shapes and strides passed by value.
//! - `_shfl_down` and the warp/block combine of reductions.

/// The prelude's text.
pub(crate) const PRELUDE: &str = r#"// ---- cuda-stack-jit prelude ----
struct float16 {
    unsigned short __x;
    float16() = default;
    __device__ float16(float f) { asm("cvt.rn.f16.f32 %0, %1;" : "=h"(__x) : "f"(f)); }
    __device__ float16(double d) { asm("cvt.rn.f16.f64 %0, %1;" : "=h"(__x) : "d"(d)); }
    __device__ float16(int v) : float16((float)v) {}
    __device__ float16(unsigned int v) : float16((float)v) {}
    __device__ float16(long long v) : float16((float)v) {}
    __device__ float16(unsigned long long v) : float16((float)v) {}
    __device__ operator float() const { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(__x)); return f; }
    __device__ float16& operator+=(float v) { *this = float16((float)*this + v); return *this; }
    __device__ float16& operator-=(float v) { *this = float16((float)*this - v); return *this; }
    __device__ float16& operator*=(float v) { *this = float16((float)*this * v); return *this; }
    __device__ float16& operator/=(float v) { *this = float16((float)*this / v); return *this; }
};
struct bfloat16 {
    unsigned short __x;
    bfloat16() = default;
    __device__ bfloat16(float f) {
        unsigned int u = __float_as_uint(f);
        if ((u & 0x7fffffffu) > 0x7f800000u) { __x = (unsigned short)(((u >> 16) & 0x8000u) | 0x7fc0u); return; }
        u += 0x7fffu + ((u >> 16) & 1u);
        __x = (unsigned short)(u >> 16);
    }
    __device__ bfloat16(double d) : bfloat16((float)d) {}
    __device__ bfloat16(int v) : bfloat16((float)v) {}
    __device__ bfloat16(unsigned int v) : bfloat16((float)v) {}
    __device__ bfloat16(long long v) : bfloat16((float)v) {}
    __device__ bfloat16(unsigned long long v) : bfloat16((float)v) {}
    __device__ operator float() const { return __uint_as_float(((unsigned int)__x) << 16); }
    __device__ bfloat16& operator+=(float v) { *this = bfloat16((float)*this + v); return *this; }
    __device__ bfloat16& operator-=(float v) { *this = bfloat16((float)*this - v); return *this; }
    __device__ bfloat16& operator*=(float v) { *this = bfloat16((float)*this * v); return *this; }
    __device__ bfloat16& operator/=(float v) { *this = bfloat16((float)*this / v); return *this; }
};
template <typename T> struct _Raw {
    T* _p;
    long long _n;
    __device__ __forceinline__ T& operator[](long long j) const {
        if ((unsigned long long)j >= (unsigned long long)_n) __trap();
        return _p[j];
    }
    __device__ __forceinline__ long long size() const { return _n; }
};
struct _Ind {
    long long _n;
    __device__ __forceinline__ long long size() const { return _n; }
};
template <int N> struct _Dims { long long v[N]; };
template <typename T> __device__ __forceinline__ T _shfl_down(T v, int off) {
    static_assert(sizeof(T) <= 8, "reduce_type must be at most 8 bytes");
    if (sizeof(T) <= 4) {
        unsigned int u = 0;
        memcpy(&u, &v, sizeof(T));
        u = __shfl_down_sync(0xffffffffu, u, off);
        T r;
        memcpy(&r, &u, sizeof(T));
        return r;
    } else {
        unsigned long long u = 0;
        memcpy(&u, &v, sizeof(T));
        u = __shfl_down_sync(0xffffffffu, u, off);
        T r;
        memcpy(&r, &u, sizeof(T));
        return r;
    }
}
// ---- end of prelude ----
"#;
