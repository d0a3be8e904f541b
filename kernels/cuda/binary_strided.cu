// binary_strided.cu — out = a op b over any broadcast of strided operands, without copies.
//
// What it teaches:
//   * broadcasting is just strides: an operand expanded along a dimension has stride 0 there,
//     a transposed or sliced one has other strides, and the kernel reads each where it lies
//     (PyTorch's TensorIterator + OffsetCalculator, in small): nothing is materialised;
//   * the host collapses the dimensions first (size-1 dimensions dropped, neighbours merged
//     where they are contiguous in both operands), so [B, H, N, N] + [B, 1, 1, N] is indexed
//     as 3 dimensions and a same-shape contiguous pair as 1;
//   * index arithmetic is the cost of a strided kernel: with 32-bit indices each dimension
//     divides with a multiply-high and a shift (a divisor's "magic number", computed on the
//     host: PyTorch's IntDivider) instead of a ~20-instruction division; 64-bit indices fall
//     back to plain division;
//   * 16-byte packets along the innermost dimension when it is contiguous (stride 1) or
//     broadcast (stride 0) in both operands, its extent is a multiple of the packet and every
//     address is 16-byte aligned: one division chain per packet, not per element.
//
// Semantics: out[i] = op(a[off_a(i)], b[off_b(i)]) for i < numel, out dense row-major over the
// broadcast shape; off_x(i) = x_offset + Σ_d idx_d(i)·x_strides[d] with idx(i) i unravelled over
// shape (last dimension fastest); ops and rounding as elementwise.cu's (binary_ops.cuh).
//
// BinaryStrides is passed BY VALUE (232 bytes, 8-byte aligned), C layout:
//     offset   0: int rank               1 ..= 6 collapsed dimensions (rank-1 is the innermost)
//     offset   4: int flags              bit 0: a is one value per packet (innermost stride 0);
//                                        bit 1: the same for b (only read when vec > 1)
//     offset   8: long long shape[6]     extents; shape[rank-1] counts packets when vec > 1
//     offset  56: long long a_strides[6] elements (signed); a_strides[rank-1] is per packet
//     offset 104: long long b_strides[6]
//     offset 152: long long a_offset, b_offset  (elements)
//     offset 168: unsigned magic[6], shift[6]   32-bit dividers of shape[d] (narrow only)
//     offset 216: unsigned long long units      Π shape: threads' work items (packets or elements)
//     offset 224: int vec                1, or 16 / sizeof(element) (packets)
//     offset 228: int narrow             1: units < 2^31 and every index and stride fits int
// Rust: cuda_stack_kernels::BinaryStrides (kernels/src/binary_strides.rs builds and checks it).
// The loops over dimensions are fully unrolled, so the struct stays in parameter space.
//
// Launch: block 256, any grid; the op uses ceil(units / (256 · U)) blocks, U = 1 with packets,
// 4 without (each thread then loads 4 elements a grid stride apart before computing any).
#include "dtype.cuh"
#include "binary_ops.cuh"

#define BS_MAX_DIMS 6

struct BinaryStrides {
    int rank;
    int flags;
    long long shape[BS_MAX_DIMS];
    long long a_strides[BS_MAX_DIMS];
    long long b_strides[BS_MAX_DIMS];
    long long a_offset;
    long long b_offset;
    unsigned int magic[BS_MAX_DIMS];
    unsigned int shift[BS_MAX_DIMS];
    unsigned long long units;
    int vec;
    int narrow;
};

// Offsets of work item i in a and b. NARROW: 32-bit arithmetic; the host guarantees that every
// index, every partial sum of them and i itself are below 2^31, and that the magic numbers
// divide exactly for those values.
template <bool NARROW>
__device__ __forceinline__ void offsets(const BinaryStrides& L, u64 i, long long& oa,
                                        long long& ob) {
    if (NARROW) {
        unsigned int rem = (unsigned int)i;
        int ra = (int)L.a_offset, rb = (int)L.b_offset;
#pragma unroll
        for (int d = BS_MAX_DIMS - 1; d >= 0; --d) {
            if (d < L.rank) {
                unsigned int c = rem;
                if (d > 0) {
                    const unsigned int q = (__umulhi(rem, L.magic[d]) + rem) >> L.shift[d];
                    c = rem - q * (unsigned int)L.shape[d];
                    rem = q;
                }
                ra += (int)c * (int)L.a_strides[d];
                rb += (int)c * (int)L.b_strides[d];
            }
        }
        oa = ra;
        ob = rb;
    } else {
        u64 rem = i;
        oa = L.a_offset;
        ob = L.b_offset;
#pragma unroll
        for (int d = BS_MAX_DIMS - 1; d >= 0; --d) {
            if (d < L.rank) {
                u64 c = rem;
                if (d > 0) {
                    const u64 q = rem / (u64)L.shape[d];
                    c = rem - q * (u64)L.shape[d];
                    rem = q;
                }
                oa += (long long)c * L.a_strides[d];
                ob += (long long)c * L.b_strides[d];
            }
        }
    }
}

template <typename Tag, bool VEC, bool NARROW, typename Op>
__device__ __forceinline__ void strided_loop(const typename DType<Tag>::Storage* a,
                                             const typename DType<Tag>::Storage* b,
                                             typename DType<Tag>::Storage* out,
                                             const BinaryStrides& L, Op op) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    const u64 tid = global_tid(), stride = grid_threads(), units = L.units;
    if (VEC) {
        const int V = Pack<S>::N;
        const bool a_one = (L.flags & 1) != 0, b_one = (L.flags & 2) != 0;
        for (u64 i = tid; i < units; i += stride) {
            long long oa, ob;
            offsets<NARROW>(L, i, oa, ob);
            Pack<S> va, vb;
            if (a_one) {
                const S v = a[oa];
#pragma unroll
                for (int j = 0; j < V; ++j) va.v[j] = v;
            } else {
                va = load_pack(a + oa);
            }
            if (b_one) {
                const S v = b[ob];
#pragma unroll
                for (int j = 0; j < V; ++j) vb.v[j] = v;
            } else {
                vb = load_pack(b + ob);
            }
#pragma unroll
            for (int j = 0; j < V; ++j)
                va.v[j] = D::store(op(D::load(va.v[j]), D::load(vb.v[j])));
            store_pack(out + i * V, va);
        }
    } else {
        // 4 work items a grid stride apart per trip, all loads issued before any store.
        for (u64 i = tid; i < units; i += 4 * stride) {
            S va[4], vb[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const u64 j = i + u * stride;
                if (j < units) {
                    long long oa, ob;
                    offsets<NARROW>(L, j, oa, ob);
                    va[u] = a[oa];
                    vb[u] = b[ob];
                }
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const u64 j = i + u * stride;
                if (j < units) out[j] = D::store(op(D::load(va[u]), D::load(vb[u])));
            }
        }
    }
}

template <typename Tag, typename Op>
__device__ __forceinline__ void map2_strided(const typename DType<Tag>::Storage* a,
                                             const typename DType<Tag>::Storage* b,
                                             typename DType<Tag>::Storage* out,
                                             const BinaryStrides& L, Op op) {
    // Uniform branches: every thread takes the same one.
    if (L.vec > 1) {
        if (L.narrow) strided_loop<Tag, true, true>(a, b, out, L, op);
        else strided_loop<Tag, true, false>(a, b, out, L, op);
    } else {
        if (L.narrow) strided_loop<Tag, false, true>(a, b, out, L, op);
        else strided_loop<Tag, false, false>(a, b, out, L, op);
    }
}

// ---------------------------------------------------------------------------------------------
// Unmangled entry points, one per (operation, dtype).
extern "C" __global__ void add_strided_f32(const float* a, const float* b, float* out, BinaryStrides layout) { map2_strided<float>(a, b, out, layout, OpAdd()); }
extern "C" __global__ void add_strided_f64(const double* a, const double* b, double* out, BinaryStrides layout) { map2_strided<double>(a, b, out, layout, OpAdd()); }
extern "C" __global__ void add_strided_i32(const int* a, const int* b, int* out, BinaryStrides layout) { map2_strided<int>(a, b, out, layout, OpAdd()); }
extern "C" __global__ void add_strided_f16(const f16_t* a, const f16_t* b, f16_t* out, BinaryStrides layout) { map2_strided<F16>(a, b, out, layout, OpAdd()); }
extern "C" __global__ void add_strided_bf16(const bf16_t* a, const bf16_t* b, bf16_t* out, BinaryStrides layout) { map2_strided<BF16>(a, b, out, layout, OpAdd()); }

extern "C" __global__ void sub_strided_f32(const float* a, const float* b, float* out, BinaryStrides layout) { map2_strided<float>(a, b, out, layout, OpSub()); }
extern "C" __global__ void sub_strided_f64(const double* a, const double* b, double* out, BinaryStrides layout) { map2_strided<double>(a, b, out, layout, OpSub()); }
extern "C" __global__ void sub_strided_i32(const int* a, const int* b, int* out, BinaryStrides layout) { map2_strided<int>(a, b, out, layout, OpSub()); }
extern "C" __global__ void sub_strided_f16(const f16_t* a, const f16_t* b, f16_t* out, BinaryStrides layout) { map2_strided<F16>(a, b, out, layout, OpSub()); }
extern "C" __global__ void sub_strided_bf16(const bf16_t* a, const bf16_t* b, bf16_t* out, BinaryStrides layout) { map2_strided<BF16>(a, b, out, layout, OpSub()); }

extern "C" __global__ void mul_strided_f32(const float* a, const float* b, float* out, BinaryStrides layout) { map2_strided<float>(a, b, out, layout, OpMul()); }
extern "C" __global__ void mul_strided_f64(const double* a, const double* b, double* out, BinaryStrides layout) { map2_strided<double>(a, b, out, layout, OpMul()); }
extern "C" __global__ void mul_strided_i32(const int* a, const int* b, int* out, BinaryStrides layout) { map2_strided<int>(a, b, out, layout, OpMul()); }
extern "C" __global__ void mul_strided_f16(const f16_t* a, const f16_t* b, f16_t* out, BinaryStrides layout) { map2_strided<F16>(a, b, out, layout, OpMul()); }
extern "C" __global__ void mul_strided_bf16(const bf16_t* a, const bf16_t* b, bf16_t* out, BinaryStrides layout) { map2_strided<BF16>(a, b, out, layout, OpMul()); }

extern "C" __global__ void div_strided_f32(const float* a, const float* b, float* out, BinaryStrides layout) { map2_strided<float>(a, b, out, layout, OpDiv()); }
extern "C" __global__ void div_strided_f64(const double* a, const double* b, double* out, BinaryStrides layout) { map2_strided<double>(a, b, out, layout, OpDiv()); }
extern "C" __global__ void div_strided_i32(const int* a, const int* b, int* out, BinaryStrides layout) { map2_strided<int>(a, b, out, layout, OpDiv()); }
extern "C" __global__ void div_strided_f16(const f16_t* a, const f16_t* b, f16_t* out, BinaryStrides layout) { map2_strided<F16>(a, b, out, layout, OpDiv()); }
extern "C" __global__ void div_strided_bf16(const bf16_t* a, const bf16_t* b, bf16_t* out, BinaryStrides layout) { map2_strided<BF16>(a, b, out, layout, OpDiv()); }
