// elementwise.cu — "vector add and friends" for every dtype, and the fused op of seed 004.
//
// What it teaches:
//   * one template per operation shape (map1: out = f(x), map2: out = f(a, b)) serves every dtype;
//     the extern "C" wrappers at the bottom give each instantiation an unmangled name, e.g. add_f32;
//   * f16 / bf16 are stored as 16-bit bit patterns and computed in f32 (see dtype.cuh). For
//     + - * / the f32 result rounded once to f16/bf16 is the correctly rounded result;
//   * fast memory-bound code: 16-byte vector loads/stores (4 f32, 2 f64, 4 i32, 8 f16/bf16 per
//     access) taken when every pointer is 16-byte aligned, or all the same number of elements short
//     of a 16-byte boundary (those first elements one per thread; checked at run time; otherwise a
//     scalar path is used), a grid-stride loop (any grid of at least 8 threads is correct: the
//     up to 7 elements before the first boundary go to threads 0..6), 64-bit indices;
//   * kernel fusion (seed 004): relu(x * scale + bias) reads x once and writes once, instead of
//     three kernels and two temporaries; its backward pass computes dL/dx and dL/dbias together,
//     with a deterministic column sum (no atomics: fixed summation order for a fixed grid).
//
// Exact semantics (the CPU references must match):
//   add/sub/mul/div: IEEE ops in the compute type. i32 wraps (two's complement); i32 division
//     truncates, x / 0 == 0 and INT_MIN / -1 == INT_MIN (Rust: if b == 0 {0} else {a.wrapping_div(b)}).
//   scale:  out = x * alpha              (alpha is f32 for f16/bf16, f64 for f64, i32 for i32)
//   axpy:   y = fma(alpha, x, y)         (one rounding: Rust f32::mul_add; i32: wrapping a*x+y)
//   relu:   out = x < 0 ? 0 : x          (NaN stays NaN, -0.0 stays -0.0)
//   tanh:   tanhf / tanh (CUDA libdevice, within 2 ulp; not bit-reproducible on a CPU)
//   fill:   out = value (value passed in the compute type; every f16/bf16 is exact in f32)
//   bias_relu_fwd: pre = fmaf(x, scale, bias[col]); out = pre > 0 ? pre : 0
//   bias_relu_bwd: g = pre > 0 ? grad_out : 0; grad_x = g * scale; grad_bias[col] = sum_rows g
//   <op>_bcast: out[r][c] = a[r·a_so + c·a_si] op b[r·b_so + c·b_si] over an [outer, inner] result
//     (dense, row-major): broadcasting without materialising the expanded operand. An operand
//     repeated along the rows has (so, si) = (0, 1); one constant along each row (a column
//     vector) (1, 0); a full one (inner, 1); a scalar (0, 0).
// In-place use (out == x, out == a, grad_x == grad_out) is allowed: each element is read and then
// written by the same thread. Partially overlapping buffers are not allowed.
//
// Launch: all 1-D kernels: block 256, any grid (ideal: min(ceil(n / (256 * 16/sizeof(T))), 8 * SMs)).
//   bias_relu_fwd_f32: block 256, grid (ceil(cols / 1024), min(rows, 65535)) — any grid is correct.
//   bias_relu_bwd_f32: block (32, 8) EXACTLY, grid (ceil(cols / 32), P) with 1 <= P <= 65535;
//     it writes grad_bias_partial[P][cols] (row chunk p's column sums); then
//   bias_relu_bwd_reduce_f32: block 256, grid ceil(cols / 256): grad_bias[c] = sum_p partial[p][c]
//     (in p order). With P == 1 the partial already is grad_bias and the reduce can be skipped.
#include "dtype.cuh"
#include "binary_ops.cuh"  // OpAdd, OpSub, OpMul, OpDiv

// ---------------------------------------------------------------------------------------------
// The other operations, written once for the compute type (i32 wraps, as in binary_ops.cuh).
template <typename C> struct OpScale {
    C alpha;
    __device__ C operator()(C x) const { return x * alpha; }
};
template <> struct OpScale<int> {
    int alpha;
    __device__ int operator()(int x) const { return (int)((unsigned)x * (unsigned)alpha); }
};
template <typename C> struct OpAxpy {  // (x, y) -> alpha * x + y, one rounding
    C alpha;
    __device__ C operator()(C x, C y) const { return fma(alpha, x, y); }
};
template <> struct OpAxpy<float> {
    float alpha;
    __device__ float operator()(float x, float y) const { return fmaf(alpha, x, y); }
};
template <> struct OpAxpy<int> {
    int alpha;
    __device__ int operator()(int x, int y) const {
        return (int)((unsigned)alpha * (unsigned)x + (unsigned)y);
    }
};
struct OpRelu {
    template <typename C> __device__ C operator()(C x) const { return x < C(0) ? C(0) : x; }
};
struct OpTanh {
    __device__ float operator()(float x) const { return tanhf(x); }
    __device__ double operator()(double x) const { return tanh(x); }
};

// ---------------------------------------------------------------------------------------------
// Elements of p before its first 16-byte boundary, at most n (0 when p is aligned; n when p is not
// a whole number of elements away from one). When every operand is the same number of elements
// short of a boundary (in-place ops on a view one element in), those first elements go one per
// thread and the rest in 16-byte packets. On an H200, relu of 2^24 f32 from x[1..] into out[1..]
// ran in 35.8 us this way, as fast as the scalar path (x[1..] into an aligned out, 35.8) and
// behind aligned operands (34.9); 16-bit types, whose scalar path moves 2 bytes per access, were
// not measured (kernels/TUNING.md).
template <typename S>
__device__ __forceinline__ u64 head16(const S* p, u64 n) {
    const u64 mis = (u64)p & 15u;
    const u64 h = mis == 0 ? 0 : (mis % sizeof(S) != 0 ? n : (16 - mis) / sizeof(S));
    return h < n ? h : n;
}

// out[i] = op(x[i])
template <typename Tag, typename Op>
__device__ __forceinline__ void map1(const typename DType<Tag>::Storage* x,
                                     typename DType<Tag>::Storage* out, u64 n, Op op) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    const u64 tid = global_tid(), stride = grid_threads();
    u64 done = 0;
    const u64 h = head16(x, n);
    if (h < n && aligned16(x + h, out + h)) {
        if (tid < h) out[tid] = D::store(op(D::load(x[tid])));
        const S* xa = x + h;
        S* oa = out + h;
        const u64 V = Pack<S>::N, packs = (n - h) / V;
        for (u64 p = tid; p < packs; p += stride) {
            Pack<S> v = load_pack(xa + p * V);
#pragma unroll
            for (int j = 0; j < (int)V; ++j) v.v[j] = D::store(op(D::load(v.v[j])));
            store_pack(oa + p * V, v);
        }
        done = h + packs * V;
    }
    // Scalar path (operands at different distances from a 16-byte boundary, or not a whole
    // number of elements away from one) and the tail: 4 independent loads in flight per thread
    // before any store (a plain grid-stride loop issues them one at a time), a block's 4 loads
    // in one chunk of 4 x blockDim elements: 4 loads a whole grid apart ran relu of 2^24 f32 one
    // element in at 0.95x PyTorch on an H200, the chunk at 0.995x (kernels/TUNING.md).
    const u64 chunk = 4 * (u64)blockDim.x;
    for (u64 c0 = done + blockIdx.x * chunk; c0 < n; c0 += (u64)gridDim.x * chunk) {
        const u64 i = c0 + threadIdx.x;
        S v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (i + u * blockDim.x < n) v[u] = x[i + u * blockDim.x];
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (i + u * blockDim.x < n) out[i + u * blockDim.x] = D::store(op(D::load(v[u])));
    }
}

// out[i] = op(a[i], b[i])
template <typename Tag, typename Op>
__device__ __forceinline__ void map2(const typename DType<Tag>::Storage* a,
                                     const typename DType<Tag>::Storage* b,
                                     typename DType<Tag>::Storage* out, u64 n, Op op) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    const u64 tid = global_tid(), stride = grid_threads();
    u64 done = 0;
    const u64 h = head16(a, n);
    if (h < n && aligned16(a + h, b + h, out + h)) {
        if (tid < h) out[tid] = D::store(op(D::load(a[tid]), D::load(b[tid])));
        const S* aa = a + h;
        const S* ba = b + h;
        S* oa = out + h;
        const u64 V = Pack<S>::N, packs = (n - h) / V;
        for (u64 p = tid; p < packs; p += stride) {
            Pack<S> va = load_pack(aa + p * V);
            Pack<S> vb = load_pack(ba + p * V);
#pragma unroll
            for (int j = 0; j < (int)V; ++j)
                va.v[j] = D::store(op(D::load(va.v[j]), D::load(vb.v[j])));
            store_pack(oa + p * V, va);
        }
        done = h + packs * V;
    }
    // Scalar path (operands at different distances from a 16-byte boundary) and the tail: 4
    // independent pairs of loads in flight, in one chunk of 4 x blockDim elements per block.
    const u64 chunk = 4 * (u64)blockDim.x;
    for (u64 c0 = done + blockIdx.x * chunk; c0 < n; c0 += (u64)gridDim.x * chunk) {
        const u64 i = c0 + threadIdx.x;
        S va[4], vb[4];
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (i + u * blockDim.x < n) {
                va[u] = a[i + u * blockDim.x];
                vb[u] = b[i + u * blockDim.x];
            }
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (i + u * blockDim.x < n)
                out[i + u * blockDim.x] = D::store(op(D::load(va[u]), D::load(vb[u])));
    }
}

// out[r][c] = op(a[r·a_so + c·a_si], b[r·b_so + c·b_si]) for r < outer, c < inner, with 16-byte
// packets along c when every pointer and row start is 16-byte aligned; one flat grid-stride loop
// over (row, packet) so narrow rows still fill the GPU (a 32-bit division per packet). Rows of an
// odd width go through 16-byte packets of the flat result instead (see below).
template <typename Tag, typename Op>
__device__ __forceinline__ void map2_bcast(const typename DType<Tag>::Storage* a,
                                           const typename DType<Tag>::Storage* b,
                                           typename DType<Tag>::Storage* out, u64 outer,
                                           u64 inner, u64 a_so, u64 a_si, u64 b_so, u64 b_si,
                                           Op op) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    const u64 V = Pack<S>::N;
    const bool vec = aligned16(a, b, out) && inner % V == 0 && (a_si == 0 || a_so % V == 0) &&
                     (b_si == 0 || b_so % V == 0);
    const u64 tid = global_tid(), stride = grid_threads();
    // Rows that are not whole packets (an odd width) but a result of packets all the same: 16-byte
    // packets of the flat result, a dense operand read as packets at the same flat offset, a
    // broadcast one gathered element by element (its few values stay in cache); the packet's first
    // (row, column) costs one division, the others step along and wrap at most once (inner >= V).
    const u64 n = outer * inner;
    const bool a_dense = a_si == 1 && a_so == inner, b_dense = b_si == 1 && b_so == inner;
    if (!vec && inner >= V && aligned16(out) && (!a_dense || aligned16(a)) &&
        (!b_dense || aligned16(b))) {
        const u64 packs = n / V;
        const bool narrow_n = n <= 0xffffffffull;
        for (u64 p = tid; p < packs; p += stride) {
            const u64 e = p * V;
            u64 r, c;
            if (narrow_n) {
                const unsigned q = (unsigned)e / (unsigned)inner;
                r = q;
                c = e - (u64)q * inner;
            } else {
                r = e / inner;
                c = e - r * inner;
            }
            Pack<S> va, vb;
            if (a_dense) va = load_pack(a + e);
            if (b_dense) vb = load_pack(b + e);
#pragma unroll
            for (int j = 0; j < (int)V; ++j) {
                if (!a_dense) va.v[j] = a[r * a_so + c * a_si];
                if (!b_dense) vb.v[j] = b[r * b_so + c * b_si];
                if (++c == inner) {
                    c = 0;
                    ++r;
                }
            }
#pragma unroll
            for (int j = 0; j < (int)V; ++j)
                va.v[j] = D::store(op(D::load(va.v[j]), D::load(vb.v[j])));
            store_pack(out + e, va);
        }
        for (u64 e = packs * V + tid; e < n; e += stride) {
            const u64 r = e / inner, c = e - r * inner;
            out[e] = D::store(op(D::load(a[r * a_so + c * a_si]), D::load(b[r * b_so + c * b_si])));
        }
        return;
    }
    const u64 units = vec ? inner / V : inner;  // per row
    const u64 total = outer * units;
    const bool narrow = total <= 0xffffffffull;
    for (u64 i = tid; i < total; i += stride) {
        u64 r, u;
        if (narrow) {
            const unsigned q = (unsigned)i / (unsigned)units;
            r = q;
            u = i - (u64)q * units;
        } else {
            r = i / units;
            u = i - r * units;
        }
        if (vec) {
            const u64 c = u * V;
            Pack<S> va, vb;
            if (a_si) {
                va = load_pack(a + r * a_so + c);
            } else {
                const S v = a[r * a_so];
#pragma unroll
                for (int j = 0; j < (int)V; ++j) va.v[j] = v;
            }
            if (b_si) {
                vb = load_pack(b + r * b_so + c);
            } else {
                const S v = b[r * b_so];
#pragma unroll
                for (int j = 0; j < (int)V; ++j) vb.v[j] = v;
            }
#pragma unroll
            for (int j = 0; j < (int)V; ++j)
                va.v[j] = D::store(op(D::load(va.v[j]), D::load(vb.v[j])));
            store_pack(out + r * inner + c, va);
        } else {
            out[r * inner + u] =
                D::store(op(D::load(a[r * a_so + u * a_si]), D::load(b[r * b_so + u * b_si])));
        }
    }
}

// out[i] = value
template <typename Tag>
__device__ __forceinline__ void fill(typename DType<Tag>::Storage* out,
                                     typename DType<Tag>::Compute value, u64 n) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    const S s = D::store(value);
    const u64 tid = global_tid(), stride = grid_threads();
    u64 done = 0;
    if (aligned16(out)) {
        const u64 V = Pack<S>::N, packs = n / V;
        Pack<S> v;
#pragma unroll
        for (int j = 0; j < (int)V; ++j) v.v[j] = s;
        for (u64 p = tid; p < packs; p += stride) store_pack(out + p * V, v);
        done = packs * V;
    }
    for (u64 i = done + tid; i < n; i += stride) out[i] = s;
}

// ---------------------------------------------------------------------------------------------
// pre > 0 ? pre : +0 (NaN and -0.0 give +0), exactly as documented for the CPU reference.
__device__ __forceinline__ float relu0(float pre) { return pre > 0.0f ? pre : 0.0f; }

// Seed 004's fused op: out = relu(x * scale + bias[col]) on a row-major [rows, cols] array.
// blockIdx.y walks rows, blockIdx.x/threadIdx.x walk columns (float4 packets when possible),
// so no thread ever divides an index to find its column.
extern "C" __global__ void bias_relu_fwd_f32(const float* x, const float* bias, float scale,
                                             float* out, int rows, int cols) {
    const bool vec = (cols % 4 == 0) && aligned16(x, bias, out);
    const int per_row = vec ? cols / 4 : cols;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const u64 base = (u64)r * (u64)cols;
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < per_row;
             c += gridDim.x * blockDim.x) {
            if (vec) {
                float4 v = reinterpret_cast<const float4*>(x + base)[c];
                float4 b = reinterpret_cast<const float4*>(bias)[c];
                float4 o;
                o.x = relu0(fmaf(v.x, scale, b.x));
                o.y = relu0(fmaf(v.y, scale, b.y));
                o.z = relu0(fmaf(v.z, scale, b.z));
                o.w = relu0(fmaf(v.w, scale, b.w));
                reinterpret_cast<float4*>(out + base)[c] = o;
            } else {
                out[base + c] = relu0(fmaf(x[base + c], scale, bias[c]));
            }
        }
    }
}

// Backward of bias_relu_fwd. Block (32, 8): threadIdx.x picks a column, threadIdx.y one of 8
// interleaved row lanes; blockIdx.y picks a chunk of rows. Each thread sums its rows in increasing
// order, then the 8 row lanes are added in order 0..7, then (in bias_relu_bwd_reduce_f32) the
// chunks in order 0..P-1: a fixed order, hence bit-identical results for a fixed grid.
extern "C" __global__ void __launch_bounds__(256)
bias_relu_bwd_f32(const float* x, const float* bias, float scale, const float* grad_out,
                  float* grad_x, float* grad_bias_partial, int rows, int cols) {
    __shared__ float part[8][33];  // 33: no bank conflicts when row lane 0 reads a column
    const int c = blockIdx.x * 32 + threadIdx.x;
    const int chunk = (rows + gridDim.y - 1) / gridDim.y;
    const int r0 = blockIdx.y * chunk;
    const int r1 = min(rows, r0 + chunk);
    float acc = 0.0f;
    if (c < cols) {
        const float b = bias[c];
        for (int r = r0 + threadIdx.y; r < r1; r += 8) {
            const u64 i = (u64)r * (u64)cols + c;
            const float pre = fmaf(x[i], scale, b);
            const float g = pre > 0.0f ? grad_out[i] : 0.0f;
            grad_x[i] = g * scale;
            acc += g;
        }
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float s = part[0][threadIdx.x];
#pragma unroll
        for (int k = 1; k < 8; ++k) s += part[k][threadIdx.x];
        grad_bias_partial[(u64)blockIdx.y * (u64)cols + c] = s;
    }
}

// grad_bias[c] = partial[0][c] + partial[1][c] + ... + partial[parts-1][c], in that order.
extern "C" __global__ void bias_relu_bwd_reduce_f32(const float* partial, float* grad_bias,
                                                    int parts, int cols) {
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int p = 0; p < parts; ++p) s += partial[(u64)p * (u64)cols + c];
        grad_bias[c] = s;
    }
}

// ---------------------------------------------------------------------------------------------
// Unmangled entry points, one per (operation, dtype).
extern "C" __global__ void add_f32(const float* a, const float* b, float* out, unsigned long long n) { map2<float>(a, b, out, n, OpAdd()); }
extern "C" __global__ void add_f64(const double* a, const double* b, double* out, unsigned long long n) { map2<double>(a, b, out, n, OpAdd()); }
extern "C" __global__ void add_i32(const int* a, const int* b, int* out, unsigned long long n) { map2<int>(a, b, out, n, OpAdd()); }
extern "C" __global__ void add_f16(const f16_t* a, const f16_t* b, f16_t* out, unsigned long long n) { map2<F16>(a, b, out, n, OpAdd()); }
extern "C" __global__ void add_bf16(const bf16_t* a, const bf16_t* b, bf16_t* out, unsigned long long n) { map2<BF16>(a, b, out, n, OpAdd()); }

extern "C" __global__ void sub_f32(const float* a, const float* b, float* out, unsigned long long n) { map2<float>(a, b, out, n, OpSub()); }
extern "C" __global__ void sub_f64(const double* a, const double* b, double* out, unsigned long long n) { map2<double>(a, b, out, n, OpSub()); }
extern "C" __global__ void sub_i32(const int* a, const int* b, int* out, unsigned long long n) { map2<int>(a, b, out, n, OpSub()); }
extern "C" __global__ void sub_f16(const f16_t* a, const f16_t* b, f16_t* out, unsigned long long n) { map2<F16>(a, b, out, n, OpSub()); }
extern "C" __global__ void sub_bf16(const bf16_t* a, const bf16_t* b, bf16_t* out, unsigned long long n) { map2<BF16>(a, b, out, n, OpSub()); }

extern "C" __global__ void mul_f32(const float* a, const float* b, float* out, unsigned long long n) { map2<float>(a, b, out, n, OpMul()); }
extern "C" __global__ void mul_f64(const double* a, const double* b, double* out, unsigned long long n) { map2<double>(a, b, out, n, OpMul()); }
extern "C" __global__ void mul_i32(const int* a, const int* b, int* out, unsigned long long n) { map2<int>(a, b, out, n, OpMul()); }
extern "C" __global__ void mul_f16(const f16_t* a, const f16_t* b, f16_t* out, unsigned long long n) { map2<F16>(a, b, out, n, OpMul()); }
extern "C" __global__ void mul_bf16(const bf16_t* a, const bf16_t* b, bf16_t* out, unsigned long long n) { map2<BF16>(a, b, out, n, OpMul()); }

extern "C" __global__ void div_f32(const float* a, const float* b, float* out, unsigned long long n) { map2<float>(a, b, out, n, OpDiv()); }
extern "C" __global__ void div_f64(const double* a, const double* b, double* out, unsigned long long n) { map2<double>(a, b, out, n, OpDiv()); }
extern "C" __global__ void div_i32(const int* a, const int* b, int* out, unsigned long long n) { map2<int>(a, b, out, n, OpDiv()); }
extern "C" __global__ void div_f16(const f16_t* a, const f16_t* b, f16_t* out, unsigned long long n) { map2<F16>(a, b, out, n, OpDiv()); }
extern "C" __global__ void div_bf16(const bf16_t* a, const bf16_t* b, bf16_t* out, unsigned long long n) { map2<BF16>(a, b, out, n, OpDiv()); }

extern "C" __global__ void scale_f32(const float* x, float* out, float alpha, unsigned long long n) { map1<float>(x, out, n, OpScale<float>{alpha}); }
extern "C" __global__ void scale_f64(const double* x, double* out, double alpha, unsigned long long n) { map1<double>(x, out, n, OpScale<double>{alpha}); }
extern "C" __global__ void scale_i32(const int* x, int* out, int alpha, unsigned long long n) { map1<int>(x, out, n, OpScale<int>{alpha}); }
extern "C" __global__ void scale_f16(const f16_t* x, f16_t* out, float alpha, unsigned long long n) { map1<F16>(x, out, n, OpScale<float>{alpha}); }
extern "C" __global__ void scale_bf16(const bf16_t* x, bf16_t* out, float alpha, unsigned long long n) { map1<BF16>(x, out, n, OpScale<float>{alpha}); }

extern "C" __global__ void axpy_f32(float alpha, const float* x, float* y, unsigned long long n) { map2<float>(x, y, y, n, OpAxpy<float>{alpha}); }
extern "C" __global__ void axpy_f64(double alpha, const double* x, double* y, unsigned long long n) { map2<double>(x, y, y, n, OpAxpy<double>{alpha}); }
extern "C" __global__ void axpy_i32(int alpha, const int* x, int* y, unsigned long long n) { map2<int>(x, y, y, n, OpAxpy<int>{alpha}); }
extern "C" __global__ void axpy_f16(float alpha, const f16_t* x, f16_t* y, unsigned long long n) { map2<F16>(x, y, y, n, OpAxpy<float>{alpha}); }
extern "C" __global__ void axpy_bf16(float alpha, const bf16_t* x, bf16_t* y, unsigned long long n) { map2<BF16>(x, y, y, n, OpAxpy<float>{alpha}); }

extern "C" __global__ void relu_f32(const float* x, float* out, unsigned long long n) { map1<float>(x, out, n, OpRelu()); }
extern "C" __global__ void relu_f64(const double* x, double* out, unsigned long long n) { map1<double>(x, out, n, OpRelu()); }
extern "C" __global__ void relu_i32(const int* x, int* out, unsigned long long n) { map1<int>(x, out, n, OpRelu()); }
extern "C" __global__ void relu_f16(const f16_t* x, f16_t* out, unsigned long long n) { map1<F16>(x, out, n, OpRelu()); }
extern "C" __global__ void relu_bf16(const bf16_t* x, bf16_t* out, unsigned long long n) { map1<BF16>(x, out, n, OpRelu()); }

extern "C" __global__ void tanh_f32(const float* x, float* out, unsigned long long n) { map1<float>(x, out, n, OpTanh()); }
extern "C" __global__ void tanh_f64(const double* x, double* out, unsigned long long n) { map1<double>(x, out, n, OpTanh()); }
extern "C" __global__ void tanh_f16(const f16_t* x, f16_t* out, unsigned long long n) { map1<F16>(x, out, n, OpTanh()); }
extern "C" __global__ void tanh_bf16(const bf16_t* x, bf16_t* out, unsigned long long n) { map1<BF16>(x, out, n, OpTanh()); }

extern "C" __global__ void fill_f32(float* out, float value, unsigned long long n) { fill<float>(out, value, n); }
extern "C" __global__ void fill_f64(double* out, double value, unsigned long long n) { fill<double>(out, value, n); }
extern "C" __global__ void fill_i32(int* out, int value, unsigned long long n) { fill<int>(out, value, n); }
extern "C" __global__ void fill_f16(f16_t* out, float value, unsigned long long n) { fill<F16>(out, value, n); }
extern "C" __global__ void fill_bf16(bf16_t* out, float value, unsigned long long n) { fill<BF16>(out, value, n); }

extern "C" __global__ void add_bcast_f32(const float* a, const float* b, float* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<float>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpAdd()); }
extern "C" __global__ void add_bcast_f64(const double* a, const double* b, double* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<double>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpAdd()); }
extern "C" __global__ void add_bcast_i32(const int* a, const int* b, int* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<int>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpAdd()); }
extern "C" __global__ void add_bcast_f16(const f16_t* a, const f16_t* b, f16_t* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<F16>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpAdd()); }
extern "C" __global__ void add_bcast_bf16(const bf16_t* a, const bf16_t* b, bf16_t* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<BF16>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpAdd()); }

extern "C" __global__ void sub_bcast_f32(const float* a, const float* b, float* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<float>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpSub()); }
extern "C" __global__ void sub_bcast_f64(const double* a, const double* b, double* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<double>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpSub()); }
extern "C" __global__ void sub_bcast_i32(const int* a, const int* b, int* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<int>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpSub()); }
extern "C" __global__ void sub_bcast_f16(const f16_t* a, const f16_t* b, f16_t* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<F16>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpSub()); }
extern "C" __global__ void sub_bcast_bf16(const bf16_t* a, const bf16_t* b, bf16_t* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<BF16>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpSub()); }

extern "C" __global__ void mul_bcast_f32(const float* a, const float* b, float* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<float>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpMul()); }
extern "C" __global__ void mul_bcast_f64(const double* a, const double* b, double* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<double>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpMul()); }
extern "C" __global__ void mul_bcast_i32(const int* a, const int* b, int* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<int>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpMul()); }
extern "C" __global__ void mul_bcast_f16(const f16_t* a, const f16_t* b, f16_t* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<F16>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpMul()); }
extern "C" __global__ void mul_bcast_bf16(const bf16_t* a, const bf16_t* b, bf16_t* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<BF16>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpMul()); }

extern "C" __global__ void div_bcast_f32(const float* a, const float* b, float* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<float>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpDiv()); }
extern "C" __global__ void div_bcast_f64(const double* a, const double* b, double* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<double>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpDiv()); }
extern "C" __global__ void div_bcast_i32(const int* a, const int* b, int* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<int>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpDiv()); }
extern "C" __global__ void div_bcast_f16(const f16_t* a, const f16_t* b, f16_t* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<F16>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpDiv()); }
extern "C" __global__ void div_bcast_bf16(const bf16_t* a, const bf16_t* b, bf16_t* out, unsigned long long outer, unsigned long long inner, unsigned long long a_so, unsigned long long a_si, unsigned long long b_so, unsigned long long b_si) { map2_bcast<BF16>(a, b, out, outer, inner, a_so, a_si, b_so, b_si, OpDiv()); }
