// classifier.cu — the fused classifier (as llm.c does it): logits [rows, V] and i32 targets
// [rows] give the per-row cross-entropy loss and the gradient of the losses with respect to the
// logits in one kernel, which reads each logits row twice (pass 1: online max and sum of
// exponentials; pass 2: the gradient) and never stores the softmax. f32, f64, f16 and bf16
// logits (f16/bf16 computed in f32); losses, the upstream gradient and the scale are S = float
// (double for f64).
//
// Exact semantics, per row x[0..V), t = targets[r] (exp: exp() for f64, and for the float
// kernels ex2.approx(v * log2(e)), see ex() below; m = max x, s = sum exp(x - m), merged
// online per thread in packet order, then across the block in a fixed butterfly order):
//   loss[r] = m + log(s) - x[t]                                 (t outside [0, V): NaN)
//   dlogits[r][c] = (exp(x[c] - m) * (1 / s) - (c == t)) * (g[0] * scale)   (bad t: a NaN row)
// where g (one element on the device) is the upstream gradient of the reduced loss and scale is
// e.g. 1 / rows for a mean. A row of all -inf gives NaN (as torch); -inf entries elsewhere are
// fine. classifier_loss_<dt> is pass 1 alone (no gradient): the loss rows only.
// fused_classifier_inplace_<dt> writes dlogits over the logits (each element is read by the
// thread that then writes it, and x[t] is read in pass 1, before any write of its row).
//
// Launch: block 512 EXACTLY (16 warps), any grid (rows blockIdx.x, + gridDim.x). 16-byte
// packets when the logits row can be aligned by a scalar head: rows of odd V (50257) take a
// head of up to 3 f32 (7 f16) elements, the aligned packets, then a scalar tail. Pass 1 splits
// the row by the logits' address alone, so the losses never depend on where dlogits is:
// classifier_loss_<dt> sums in the fused kernels' order (the same losses, up to how the compiler
// contracts the separately compiled instantiations). Pass 2 uses packets only
// when the dlogits row shares the logits row's offset modulo 16 bytes (else it is all scalar).
#include "dtype.cuh"
#include "ex2.cuh"

#define FULL_MASK 0xffffffffu
#define CLS_THREADS 512
// Packets (16 bytes) each thread loads before it uses the first: 4, except where 4 spilled
// under the 128 registers a 512-thread block allows (ptxas 12.4): f64 in both passes and f16's
// gradient pass (the in-place kernel), which take 2.
template <typename Tag> struct ClsUnroll {
    static const int PASS1 = sizeof(typename DType<Tag>::Storage) == 8 ? 2 : 4;
    static const int PASS2 = PASS1;
};
template <> struct ClsUnroll<F16> {
    static const int PASS1 = 4;
    static const int PASS2 = 2;
};

// exp for the float kernels (f32, f16, bf16) as torch.compile's Triton kernels compute it:
// ex2.approx of v * log2(e) — one FMUL and one MUFU.EX2, where expf spends about eight
// instructions around the same MUFU.EX2. A 16384 x 50304 loss pass issues ~1e9 exponentials,
// and with expf it ran at half the H200's bandwidth, bound by instruction issue. Relative error
// within about 2^-22 + |v| * 2^-24 (the rounding of v * log2(e)): ~1.3e-6 at |v| = 20, against the
// kernels' tolerances of 1e-5 relative. Specials as expf: -inf -> +0, +inf -> +inf, NaN -> NaN;
// results below 2^-126 flush to +0 (they vanish in every sum here).
__device__ __forceinline__ float ex(float v) { return ex2_approx(v * 1.4426950408889634f); }
__device__ __forceinline__ double ex(double v) { return exp(v); }
__device__ __forceinline__ float lg(float v) { return logf(v); }
__device__ __forceinline__ double lg(double v) { return log(v); }
__device__ __forceinline__ float neg_inf(float) { return __int_as_float(0xff800000); }
__device__ __forceinline__ double neg_inf(double) { return __longlong_as_double(0xfff0000000000000ULL); }
__device__ __forceinline__ float nan_of(float) { return __int_as_float(0x7fffffff); }
__device__ __forceinline__ double nan_of(double) { return __longlong_as_double(0x7ff8000000000000ULL); }

// NaN-propagating max, as in log_softmax.cu.
template <typename F> __device__ __forceinline__ F max_nan(F a, F b) {
    return (b > a || b != b) ? b : a;
}

__device__ __forceinline__ float fmax_of(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double fmax_of(double a, double b) { return fmax(a, b); }

// (m, s) <- (m, s) merged with (m2, s2): s scaled to the new maximum. A state of (-inf, 0) is the
// identity; two -inf maxima stay (-inf, 0) (no exp(-inf - -inf) = NaN).
template <typename F> __device__ __forceinline__ void merge(F& m, F& s, F m2, F s2) {
    const F nm = max_nan(m, m2);
    if (nm == neg_inf((F)0)) return;  // both empty or all -inf so far: s == s2 == 0
    s = s * ex(m - nm) + s2 * ex(m2 - nm);
    m = nm;
}

// Adds one value to a thread's running (m, s).
template <typename F> __device__ __forceinline__ void push(F& m, F& s, F v) {
    merge(m, s, v, (F)1);
}

// The row layout: [0, head) scalar, [head, head + packs * N) packets, the rest scalar.
struct RowSplit {
    int head, packs;
};
template <typename S>
__device__ __forceinline__ RowSplit row_split(const S* xr, const S* dr, int V, bool want_vec) {
    RowSplit rs = {V, 0};
    const int N = Pack<S>::N;
    const unsigned mis = (unsigned)((u64)xr & 15u);
    if (!want_vec || (((u64)xr ^ (u64)dr) & 15u) != 0 || mis % sizeof(S) != 0) return rs;
    int head = mis == 0 ? 0 : (int)((16u - mis) / sizeof(S));
    if (head > V) head = V;
    rs.head = head;
    rs.packs = (V - head) / N;
    return rs;
}

// Merges one packet into a thread's running (m, s): the packet's maximum first, then one
// rescale of the running sum (one exponential per element, not two).
template <typename Tag>
__device__ __forceinline__ void merge_pack(typename DType<Tag>::Compute& m,
                                           typename DType<Tag>::Compute& s,
                                           const Pack<typename DType<Tag>::Storage>& pk) {
    typedef DType<Tag> D;
    typedef typename D::Compute F;
    const int N = Pack<typename D::Storage>::N;
    // The packet's maximum with fmax (one instruction, not max_nan's three): a NaN element is
    // skipped here but still reaches the sum through its exponential (NaN). Only where every
    // other element is -inf (so the sum below would be skipped) is a NaN made the maximum, in a
    // branch the finite rows never take. The same values as max_nan otherwise.
    F pm = D::load(pk.v[0]);
#pragma unroll
    for (int j = 1; j < N; ++j) pm = fmax_of(pm, D::load(pk.v[j]));
    if (pm == neg_inf((F)0)) {
#pragma unroll
        for (int j = 0; j < N; ++j) {
            const F v = D::load(pk.v[j]);
            if (v != v) pm = v;
        }
    }
    F ps = (F)0;
    if (pm != neg_inf((F)0)) {
#pragma unroll
        for (int j = 0; j < N; ++j) ps += ex(D::load(pk.v[j]) - pm);
    }
    merge(m, s, pm, ps);
}

// Pass 1 over a row: the block's (m, s) and x[t] (valid in every thread after the call).
template <typename Tag>
__device__ __forceinline__ void row_pass1(const typename DType<Tag>::Storage* xr, RowSplit rs,
                                          int V, typename DType<Tag>::Compute& m,
                                          typename DType<Tag>::Compute& s) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    typedef typename D::Compute F;
    __shared__ F sm[CLS_THREADS / 32], ss[CLS_THREADS / 32];
    const int N = Pack<S>::N;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    m = neg_inf((F)0);
    s = (F)0;
    for (int c = tid; c < rs.head; c += CLS_THREADS) push(m, s, D::load(xr[c]));
    const S* body = xr + rs.head;
    // A thread's packets in order p, p + T, p + 2T, ...: U (ClsUnroll) of them loaded before the
    // first is used (one 16-byte load in flight per thread left the H200's memory idle), then
    // merged in that same order, so the sums do not depend on the unrolling.
    const int U = ClsUnroll<Tag>::PASS1;
    int p = tid;
    for (; p + (U - 1) * CLS_THREADS < rs.packs; p += U * CLS_THREADS) {
        Pack<S> pk[U];
#pragma unroll
        for (int u = 0; u < U; ++u) pk[u] = load_pack(body + (u64)(p + u * CLS_THREADS) * N);
#pragma unroll
        for (int u = 0; u < U; ++u) merge_pack<Tag>(m, s, pk[u]);
    }
    for (; p < rs.packs; p += CLS_THREADS) merge_pack<Tag>(m, s, load_pack(body + (u64)p * N));
    for (int c = rs.head + rs.packs * N + tid; c < V; c += CLS_THREADS) push(m, s, D::load(xr[c]));
    // Warp butterfly, then warp 0 merges the 16 warp results; all threads read the result.
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const F m2 = __shfl_xor_sync(FULL_MASK, m, o), s2 = __shfl_xor_sync(FULL_MASK, s, o);
        merge(m, s, m2, s2);
    }
    if (lane == 0) {
        sm[warp] = m;
        ss[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < CLS_THREADS / 32 ? sm[lane] : neg_inf((F)0);
        s = lane < CLS_THREADS / 32 ? ss[lane] : (F)0;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const F m2 = __shfl_xor_sync(FULL_MASK, m, o), s2 = __shfl_xor_sync(FULL_MASK, s, o);
            merge(m, s, m2, s2);
        }
        if (lane == 0) {
            sm[0] = m;
            ss[0] = s;
        }
    }
    __syncthreads();
    m = sm[0];
    s = ss[0];
    __syncthreads();  // sm/ss are reused by the next row
}

template <typename Tag, bool GRAD>
__device__ __forceinline__ void classifier(const typename DType<Tag>::Storage* x,
                                           const int* targets,
                                           const typename DType<Tag>::Compute* g,
                                           typename DType<Tag>::Compute* loss,
                                           typename DType<Tag>::Storage* dx, int rows, int V,
                                           typename DType<Tag>::Compute scale,
                                           typename DType<Tag>::Compute* lse_out) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    typedef typename D::Compute F;
    const int N = Pack<S>::N;
    const F gs = GRAD ? g[0] * scale : (F)0;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const S* xr = x + (u64)r * (u64)V;
        S* dr = GRAD ? dx + (u64)r * (u64)V : (S*)0;
        // Pass 1 (the loss) splits on x alone; pass 2 on both rows (all scalar when their
        // 16-byte phases differ). Same split, same sums: the loss never depends on dr.
        const RowSplit rs1 = row_split(xr, xr, V, true);
        const RowSplit rs = GRAD ? row_split(xr, (const S*)dr, V, true) : rs1;
        const int t = targets[r];
        const bool ok = t >= 0 && t < V;
        // x[t] is read before pass 1's barriers, so an in-place pass 2 cannot have changed it.
        const F xt = ok ? D::load(xr[t]) : (F)0;
        F m, s;
        row_pass1<Tag>(xr, rs1, V, m, s);
        if (threadIdx.x == 0) {
            loss[r] = ok ? m + lg(s) - xt : nan_of((F)0);
            if (lse_out) lse_out[r] = m + lg(s);
        }
        if (!GRAD) continue;
        const F inv = (F)1 / s;
        for (int c = threadIdx.x; c < rs.head; c += CLS_THREADS) {
            const F p = ex(D::load(xr[c]) - m) * inv;
            dr[c] = D::store(ok ? (p - (c == t ? (F)1 : (F)0)) * gs : nan_of((F)0));
        }
        const S* xb = xr + rs.head;
        S* db = dr + rs.head;
        // Each packet's gradient: (softmax - onehot) * g * scale.
        auto grad = [&](Pack<S>& pk, int p) {
            const int c0 = rs.head + p * N;
#pragma unroll
            for (int j = 0; j < N; ++j) {
                const F q = ex(D::load(pk.v[j]) - m) * inv;
                pk.v[j] = D::store(ok ? (q - (c0 + j == t ? (F)1 : (F)0)) * gs : nan_of((F)0));
            }
        };
        // U packets in flight per thread, as in pass 1. In place (db == xb) each packet is
        // read before it is written, by the same thread.
        const int U = ClsUnroll<Tag>::PASS2;
        int p = threadIdx.x;
        for (; p + (U - 1) * CLS_THREADS < rs.packs; p += U * CLS_THREADS) {
            Pack<S> pk[U];
#pragma unroll
            for (int u = 0; u < U; ++u) pk[u] = load_pack(xb + (u64)(p + u * CLS_THREADS) * N);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                grad(pk[u], p + u * CLS_THREADS);
                store_pack(db + (u64)(p + u * CLS_THREADS) * N, pk[u]);
            }
        }
        for (; p < rs.packs; p += CLS_THREADS) {
            Pack<S> pk = load_pack(xb + (u64)p * N);
            grad(pk, p);
            store_pack(db + (u64)p * N, pk);
        }
        for (int c = rs.head + rs.packs * N + threadIdx.x; c < V; c += CLS_THREADS) {
            const F p = ex(D::load(xr[c]) - m) * inv;
            dr[c] = D::store(ok ? (p - (c == t ? (F)1 : (F)0)) * gs : nan_of((F)0));
        }
    }
}

extern "C" __global__ void __launch_bounds__(CLS_THREADS)
classifier_loss_f32(const float* logits, const int* targets, float* loss, int rows, int V) {
    classifier<float, false>(logits, targets, (float*)0, loss, (float*)0, rows, V, (float)0, (float*)0);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
fused_classifier_f32(const float* logits, const int* targets, const float* g, float* loss,
                        float* dlogits, int rows, int V, float scale) {
    classifier<float, true>(logits, targets, g, loss, dlogits, rows, V, scale, (float*)0);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
fused_classifier_inplace_f32(float* logits, const int* targets, const float* g, float* loss, int rows,
                                int V, float scale) {
    classifier<float, true>(logits, targets, g, loss, logits, rows, V, scale, (float*)0);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
classifier_loss_f64(const double* logits, const int* targets, double* loss, int rows, int V) {
    classifier<double, false>(logits, targets, (double*)0, loss, (double*)0, rows, V, (double)0, (double*)0);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
fused_classifier_f64(const double* logits, const int* targets, const double* g, double* loss,
                        double* dlogits, int rows, int V, double scale) {
    classifier<double, true>(logits, targets, g, loss, dlogits, rows, V, scale, (double*)0);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
fused_classifier_inplace_f64(double* logits, const int* targets, const double* g, double* loss, int rows,
                                int V, double scale) {
    classifier<double, true>(logits, targets, g, loss, logits, rows, V, scale, (double*)0);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
classifier_loss_f16(const f16_t* logits, const int* targets, float* loss, int rows, int V) {
    classifier<F16, false>(logits, targets, (float*)0, loss, (f16_t*)0, rows, V, (float)0, (float*)0);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
fused_classifier_f16(const f16_t* logits, const int* targets, const float* g, float* loss,
                        f16_t* dlogits, int rows, int V, float scale) {
    classifier<F16, true>(logits, targets, g, loss, dlogits, rows, V, scale, (float*)0);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
fused_classifier_inplace_f16(f16_t* logits, const int* targets, const float* g, float* loss, int rows,
                                int V, float scale) {
    classifier<F16, true>(logits, targets, g, loss, logits, rows, V, scale, (float*)0);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
classifier_loss_bf16(const bf16_t* logits, const int* targets, float* loss, int rows, int V) {
    classifier<BF16, false>(logits, targets, (float*)0, loss, (bf16_t*)0, rows, V, (float)0, (float*)0);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
fused_classifier_bf16(const bf16_t* logits, const int* targets, const float* g, float* loss,
                        bf16_t* dlogits, int rows, int V, float scale) {
    classifier<BF16, true>(logits, targets, g, loss, dlogits, rows, V, scale, (float*)0);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
fused_classifier_inplace_bf16(bf16_t* logits, const int* targets, const float* g, float* loss, int rows,
                                int V, float scale) {
    classifier<BF16, true>(logits, targets, g, loss, logits, rows, V, scale, (float*)0);
}

// The loss pass saving each row's log-sum-exp, and the gradient from it: the backward of a
// cross-entropy whose forward already made the losses reads each logits row once (one
// exponential per element) instead of repeating the loss pass.
//   classifier_loss_lse_<dt>: classifier_loss_<dt> (the same losses) plus lse[r] = m + log(s).
//   classifier_grad_lse_inplace_<dt>: over the logits, dlogits[r][c] =
//     (exp(x[c] - lse[r]) - (c == t)) * (g[0] * scale); a bad target gives a NaN row.
// Launch: block 512 EXACTLY, any grid (rows blockIdx.x, + gridDim.x).
template <typename Tag>
__device__ __forceinline__ void classifier_grad_lse(typename DType<Tag>::Storage* x,
                                                    const int* targets,
                                                    const typename DType<Tag>::Compute* lse,
                                                    const typename DType<Tag>::Compute* g,
                                                    int rows, int V,
                                                    typename DType<Tag>::Compute scale) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    typedef typename D::Compute F;
    const int N = Pack<S>::N;
    const F gs = g[0] * scale;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        S* xr = x + (u64)r * (u64)V;
        const RowSplit rs = row_split((const S*)xr, (const S*)xr, V, true);
        const int t = targets[r];
        const bool ok = t >= 0 && t < V;
        const F L = lse[r];
        auto one = [&](F v, int c) -> S {
            return D::store(ok ? (ex(v - L) - (c == t ? (F)1 : (F)0)) * gs : nan_of((F)0));
        };
        for (int c = threadIdx.x; c < rs.head; c += CLS_THREADS) xr[c] = one(D::load(xr[c]), c);
        S* xb = xr + rs.head;
        const int U = ClsUnroll<Tag>::PASS2;
        int p = threadIdx.x;
        for (; p + (U - 1) * CLS_THREADS < rs.packs; p += U * CLS_THREADS) {
            Pack<S> pk[U];
#pragma unroll
            for (int u = 0; u < U; ++u) pk[u] = load_pack(xb + (u64)(p + u * CLS_THREADS) * N);
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int c0 = rs.head + (p + u * CLS_THREADS) * N;
#pragma unroll
                for (int j = 0; j < N; ++j) pk[u].v[j] = one(D::load(pk[u].v[j]), c0 + j);
                store_pack(xb + (u64)(p + u * CLS_THREADS) * N, pk[u]);
            }
        }
        for (; p < rs.packs; p += CLS_THREADS) {
            Pack<S> pk = load_pack(xb + (u64)p * N);
            const int c0 = rs.head + p * N;
#pragma unroll
            for (int j = 0; j < N; ++j) pk.v[j] = one(D::load(pk.v[j]), c0 + j);
            store_pack(xb + (u64)p * N, pk);
        }
        for (int c = rs.head + rs.packs * N + threadIdx.x; c < V; c += CLS_THREADS)
            xr[c] = one(D::load(xr[c]), c);
    }
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
classifier_loss_lse_f32(const float* logits, const int* targets, float* loss, float* lse, int rows, int V) {
    classifier<float, false>(logits, targets, (float*)0, loss, (float*)0, rows, V, (float)0, lse);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
classifier_grad_lse_inplace_f32(float* logits, const int* targets, const float* lse, const float* g,
                                 int rows, int V, float scale) {
    classifier_grad_lse<float>(logits, targets, lse, g, rows, V, scale);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
classifier_loss_lse_f64(const double* logits, const int* targets, double* loss, double* lse, int rows, int V) {
    classifier<double, false>(logits, targets, (double*)0, loss, (double*)0, rows, V, (double)0, lse);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
classifier_grad_lse_inplace_f64(double* logits, const int* targets, const double* lse, const double* g,
                                 int rows, int V, double scale) {
    classifier_grad_lse<double>(logits, targets, lse, g, rows, V, scale);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
classifier_loss_lse_f16(const f16_t* logits, const int* targets, float* loss, float* lse, int rows, int V) {
    classifier<F16, false>(logits, targets, (float*)0, loss, (f16_t*)0, rows, V, (float)0, lse);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
classifier_grad_lse_inplace_f16(f16_t* logits, const int* targets, const float* lse, const float* g,
                                 int rows, int V, float scale) {
    classifier_grad_lse<F16>(logits, targets, lse, g, rows, V, scale);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
classifier_loss_lse_bf16(const bf16_t* logits, const int* targets, float* loss, float* lse, int rows, int V) {
    classifier<BF16, false>(logits, targets, (float*)0, loss, (bf16_t*)0, rows, V, (float)0, lse);
}
extern "C" __global__ void __launch_bounds__(CLS_THREADS)
classifier_grad_lse_inplace_bf16(bf16_t* logits, const int* targets, const float* lse, const float* g,
                                 int rows, int V, float scale) {
    classifier_grad_lse<BF16>(logits, targets, lse, g, rows, V, scale);
}
