// strided_copy.cu — gather a strided N-d view into a contiguous buffer (tensor `.contiguous()`).
//
// A tensor view is (storage, shape, strides, offset): element (i0, ..., i{r-1}) lives at
// storage[offset + sum_d i_d * strides[d]]. Transposes, slices, permutes and broadcasts (stride 0)
// are all just different strides. This kernel writes the view's elements in row-major order:
//     dst[i] = src[offset + sum_d idx_d(i) * strides[d]],   i = 0 .. n-1,  n = prod(shape)
// where idx(i) is i unravelled over `shape` (last dimension fastest). Strides may be 0 or negative.
// It only moves bytes, so there is one entry per element size: b2 (f16, bf16), b4 (f32, i32),
// b8 (f64, i64), and b16 for views the op has widened to 16-byte units. Reads are as coalesced
// as the view's innermost stride allows; writes always are.
//
// StridedLayout is passed BY VALUE (144 bytes, 8-byte aligned), C layout:
//     offset  0: int       rank          (0 ..= 8; dimensions >= rank are ignored)
//     offset  4: 4 bytes padding
//     offset  8: long long shape[8]      (elements)
//     offset 72: long long strides[8]    (elements, signed)
//     offset136: long long offset        (elements)
// Rust: #[repr(C)] struct StridedLayout { rank: i32, shape: [i64; 8], strides: [i64; 8], offset: i64 }
// The loop over dimensions is fully unrolled so the struct stays in parameter space (no local
// memory). Rank 0 is a scalar: n = 1, dst[0] = src[offset].
// Launch: block 256, any grid (e.g. min(ceil(n / 256), 32 * SMs)); n = prod(shape[0..rank]).
#include "dtype.cuh"

struct StridedLayout {
    int rank;
    long long shape[8];
    long long strides[8];
    long long offset;
};

// Source offset of output element i (i unravelled over the shape, last dimension fastest).
__device__ __forceinline__ long long view_offset(const StridedLayout& L, u64 i) {
    u64 rem = i;
    long long off = L.offset;
#pragma unroll
    for (int d = 7; d >= 0; --d) {
        if (d < L.rank) {
            const u64 s = (u64)L.shape[d];
            u64 q;
            // 32-bit division is much cheaper than 64-bit; use it when the values fit.
            if ((rem >> 32) == 0 && (s >> 32) == 0) q = (unsigned int)rem / (unsigned int)s;
            else q = rem / s;
            off += (long long)(rem - q * s) * L.strides[d];
            rem = q;
        }
    }
    return off;
}

// Each thread copies 4 consecutive outputs: it unravels the first index once and steps along the
// last dimension for the others (unravelling again only when a step wraps past its end), so the
// divisions are paid once per 4 elements; the 4 loads are issued before the stores.
template <typename T>
__device__ __forceinline__ void strided_copy(const T* __restrict__ src, T* __restrict__ dst,
                                             const StridedLayout& L, u64 n) {
    const long long last = L.rank > 0 ? L.shape[L.rank - 1] : 1;
    const long long step = L.rank > 0 ? L.strides[L.rank - 1] : 0;
    for (u64 i = 4 * global_tid(); i < n; i += 4 * grid_threads()) {
        long long off = view_offset(L, i);
        long long j = L.rank > 0 ? (long long)(i % (u64)last) : 0;
        T v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            if (i + u < n) {
                if (u > 0) {
                    if (++j == last) {
                        j = 0;
                        off = view_offset(L, i + u);
                    } else {
                        off += step;
                    }
                }
                v[u] = src[off];
            }
        }
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (i + u < n) dst[i + u] = v[u];
    }
}

extern "C" __global__ void strided_copy_b1(const unsigned char* src, unsigned char* dst, StridedLayout layout, unsigned long long n) { strided_copy(src, dst, layout, n); }
extern "C" __global__ void strided_copy_b2(const unsigned short* src, unsigned short* dst, StridedLayout layout, unsigned long long n) { strided_copy(src, dst, layout, n); }
extern "C" __global__ void strided_copy_b4(const unsigned int* src, unsigned int* dst, StridedLayout layout, unsigned long long n) { strided_copy(src, dst, layout, n); }
extern "C" __global__ void strided_copy_b8(const unsigned long long* src, unsigned long long* dst, StridedLayout layout, unsigned long long n) { strided_copy(src, dst, layout, n); }
// 16-byte units: the op widens a view whose last dimension is contiguous (rows of a multiple of
// 16 bytes, 16-byte aligned row starts) to units of 16 bytes, so a permute such as
// [B, H, N, D] -> [B, N, H, D] moves whole 16-byte vectors instead of 2-byte elements.
struct alignas(16) U16B { unsigned int x, y, z, w; };
// The pointers are declared as u64 (for the typed handles) and hold 16-byte units; they must be
// 16-byte aligned (the op checks), and layout and n count 16-byte units.
extern "C" __global__ void strided_copy_b16(const unsigned long long* src, unsigned long long* dst, StridedLayout layout, unsigned long long n) {
    strided_copy(reinterpret_cast<const U16B*>(src), reinterpret_cast<U16B*>(dst), layout, n);
}
