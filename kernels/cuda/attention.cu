// attention.cu — fused scaled-dot-product attention, forward and backward, on the SIMT cores:
// the simple, obviously-correct path for every dtype (f32, f64, and f16/bf16 computed in f32) and
// every head dimension 1 <= D <= 256. The N x N score matrix is never written to memory.
//
// Semantics (per batch b, head h; q [Nq, D], k and v [Nk, D]):
//   S = scale * Q K^T; query i sees key j iff !causal || j <= i + (Nk - Nq) (the causal mask is
//   aligned bottom-right, FlashAttention's convention; with Nq == Nk the usual lower triangle);
//   P = softmax(S) over the keys a row sees; out = P V; lse[i] = log sum_j exp(S[i][j]).
//   A query row that sees no key (causal with Nq > Nk) gets out = 0 and lse = -inf.
// Backward, recomputing P from lse (FlashAttention-2): delta[i] = sum_d dO[i][d] * O[i][d];
//   dP = dO V^T; dS = P * (dP - delta); dQ = scale * dS K; dK = scale * dS^T Q; dV = P^T dO.
//
// Layouts: q, k, v, out, dout, dq, dk, dv are strided views (element strides per batch, head and
// row; the last dimension is contiguous), so q, k, v (and dq, dk, dv) can be slices of a packed
// [B, N, 3, H, D] projection (and its gradient) and out (dout) a [B, N, H, D] array. dv_at >= 0
// puts dv's view dv_at elements past dk's first element (dk's buffer holds both, as the packed
// gradient does; dv is then not accessed); dv_at < 0 puts it at dv. lse and
// delta are dense [B, H, N], in the compute type (f32 for f32/f16/bf16, f64 for f64).
//
// Design: one warp per query row (forward, dQ) or per key row (dK, dV); the warp's own row of q
// (or k and v) lives in shared memory in the compute type; keys (or queries) are taken 32 at a
// time, lane t computing the full dot products of the t-th one, then the 32 scores are folded
// into the row's running max and sum (online softmax, forward) and the row's accumulators, which
// are spread over the lanes (element d in lane d % 32, slot d / 32: at most 8 slots for D <= 256).
// No atomics and fixed summation orders: the results are deterministic run to run. dQ and
// dK/dV are separate kernels (each output row is owned by one warp).
//
// Launch: block 128 EXACTLY (4 warps), any grid >= 1: rows r = 4 * blockIdx.x + warp, then
//   + 4 * gridDim.x (grid-stride over B * H * N rows, so B * H may be anything).
#include "dtype.cuh"

#define ATT_FULL 0xffffffffu
#define ATT_WARPS 4
#define ATT_MAX_D 256
#define ATT_SLOTS (ATT_MAX_D / 32)

__device__ __forceinline__ float att_exp(float v) { return expf(v); }
__device__ __forceinline__ double att_exp(double v) { return exp(v); }
__device__ __forceinline__ float att_log(float v) { return logf(v); }
__device__ __forceinline__ double att_log(double v) { return log(v); }
__device__ __forceinline__ float att_neg_inf(float) { return __int_as_float(0xff800000); }
__device__ __forceinline__ double att_neg_inf(double) { return __longlong_as_double(0xfff0000000000000ULL); }

template <typename C> __device__ __forceinline__ C att_warp_sum(C v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(ATT_FULL, v, o);
    return v;
}
template <typename C> __device__ __forceinline__ C att_warp_max(C v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const C w = __shfl_xor_sync(ATT_FULL, v, o);
        v = w > v ? w : v;
    }
    return v;
}

// Keys [0, end) that query i sees (end may be 0).
__device__ __forceinline__ int att_key_end(int i, int Nq, int Nk, int causal) {
    if (!causal) return Nk;
    const long long e = (long long)i + (long long)Nk - (long long)Nq + 1;
    return e <= 0 ? 0 : (e >= Nk ? Nk : (int)e);
}
// Queries [start, Nq) that see key j (start may be Nq).
__device__ __forceinline__ int att_query_start(int j, int Nq, int Nk, int causal) {
    if (!causal) return 0;
    const long long s = (long long)j - ((long long)Nk - (long long)Nq);
    return s <= 0 ? 0 : (s >= Nq ? Nq : (int)s);
}

// sum_d a[d] * x[d] with a in shared memory (compute type) and x a global row of storage type.
template <typename Tag, typename S, typename C>
__device__ __forceinline__ C att_dot(const C* a, const S* x, int D) {
    C dot = (C)0;
    for (int d = 0; d < D; ++d) dot += a[d] * DType<Tag>::load(x[d]);
    return dot;
}

template <typename Tag, typename S, typename C>
__device__ __forceinline__ void attn_fwd(const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v,
                                         S* __restrict__ out, C* __restrict__ lse, int B, int H, int Nq, int Nk,
                                         int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb,
                                         long long k_sh, long long k_sr, long long v_sb, long long v_sh,
                                         long long v_sr, long long o_sb, long long o_sh, long long o_sr, C scale,
                                         int causal) {
    __shared__ C qs[ATT_WARPS][ATT_MAX_D];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long rows = (long long)B * H * Nq;
    for (long long r = (long long)blockIdx.x * ATT_WARPS + warp; r < rows; r += (long long)gridDim.x * ATT_WARPS) {
        const long long bh = r / Nq;
        const int i = (int)(r - bh * Nq), b = (int)(bh / H), h = (int)(bh - (long long)b * H);
        const S* qr = q + b * q_sb + h * q_sh + i * q_sr;
        const S* kb = k + b * k_sb + h * k_sh;
        const S* vb = v + b * v_sb + h * v_sh;
        __syncwarp();  // every lane is done with the previous row's qs
        for (int d = lane; d < D; d += 32) qs[warp][d] = DType<Tag>::load(qr[d]);
        __syncwarp();
        const int end = att_key_end(i, Nq, Nk, causal);
        C acc[ATT_SLOTS];
#pragma unroll
        for (int e = 0; e < ATT_SLOTS; ++e) acc[e] = (C)0;
        C m = att_neg_inf((C)0), l = (C)0;
        for (int j0 = 0; j0 < end; j0 += 32) {
            const int j = j0 + lane;
            C s = att_neg_inf((C)0);
            if (j < end) s = scale * att_dot<Tag>(qs[warp], kb + j * k_sr, D);
            const C cmax = att_warp_max(s);  // finite: lane 0 has a key
            const C m_new = cmax > m ? cmax : m;
            const C corr = att_exp(m - m_new);                             // 0 on the first chunk
            const C p = j < end ? att_exp(s - m_new) : (C)0;
            l = l * corr + att_warp_sum(p);
#pragma unroll
            for (int e = 0; e < ATT_SLOTS; ++e) acc[e] *= corr;
            const int cnt = min(32, end - j0);
            for (int t = 0; t < cnt; ++t) {
                const C pt = __shfl_sync(ATT_FULL, p, t);
                const S* vr = vb + (j0 + t) * v_sr;
#pragma unroll
                for (int e = 0; e < ATT_SLOTS; ++e) {
                    const int d = lane + 32 * e;
                    if (d < D) acc[e] += pt * DType<Tag>::load(vr[d]);
                }
            }
            m = m_new;
        }
        const C inv = end > 0 ? (C)1 / l : (C)0;
        S* orow = out + b * o_sb + h * o_sh + i * o_sr;
#pragma unroll
        for (int e = 0; e < ATT_SLOTS; ++e) {
            const int d = lane + 32 * e;
            if (d < D) orow[d] = DType<Tag>::store(acc[e] * inv);
        }
        if (lane == 0) lse[r] = end > 0 ? m + att_log(l) : att_neg_inf((C)0);
    }
}

// delta[r] = sum_d dout[r][d] * out[r][d] for the rows r < B * H * N of the [B, H, N, D] views
// out and dout (strided: batch, head, row; unit last stride); delta dense [B, H, N].
// 16-bit types whose rows are 16-byte packets (D in {8, 16, 32, 64, 128, 256}, 16-byte aligned
// views with strides multiples of 8, fewer than 2^31 rows: every Hopper and tensor-core case) take
// G = D / 8 lanes a row, 32 / G rows a warp at a time, each lane one 16-byte load of out and of
// dout (the summation order fixed by D: deterministic). The general path is a warp a row, lane
// d % 32 summing elements d, d + 32, ... (at D = 64 it moved 2-byte loads at about half the DRAM
// rate: 75 us against 40 for the bytes at 4 x 16 x 4096 x 128 on an H200, kernels/TUNING.md).
template <typename Tag, typename S, typename C>
__device__ __forceinline__ bool attn_bwd_delta_packets(const S* __restrict__ out, const S* __restrict__ dout,
                                                       C* __restrict__ delta, int B, int H, int N, int D,
                                                       long long o_sb, long long o_sh, long long o_sr,
                                                       long long do_sb, long long do_sh, long long do_sr) {
    if constexpr (sizeof(S) != 2) {
        return false;
    } else {
        const long long rows = (long long)B * H * N;
        const bool fits = (D == 8 || D == 16 || D == 32 || D == 64 || D == 128 || D == 256) && rows < (1ll << 31) &&
                          aligned16(out, dout) && ((o_sb | o_sh | o_sr | do_sb | do_sh | do_sr) & 7) == 0;
        if (!fits) return false;
        const unsigned G = (unsigned)D / 8, per_warp = 32u / G;
        const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, sub = lane / G, col = (lane % G) * 8;
        const unsigned n = (unsigned)N, h_ = (unsigned)H, total = (unsigned)rows;
        const unsigned stride = gridDim.x * ATT_WARPS * per_warp;
        for (unsigned r0 = (blockIdx.x * ATT_WARPS + warp) * per_warp; r0 < total; r0 += stride) {
            const unsigned r = r0 + sub;
            float sum = 0.0f;
            if (r < total) {
                const unsigned bh = r / n, i = r - bh * n, b = bh / h_, h = bh - b * h_;
                const Pack<S> o = load_pack(out + b * o_sb + h * o_sh + i * o_sr + col);
                const Pack<S> g = load_pack(dout + b * do_sb + h * do_sh + i * do_sr + col);
#pragma unroll
                for (int e = 0; e < 8; ++e) sum += DType<Tag>::load(o.v[e]) * DType<Tag>::load(g.v[e]);
            }
            for (unsigned off = G / 2; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
            if (r < total && lane % G == 0) delta[r] = sum;
        }
        return true;
    }
}

template <typename Tag, typename S, typename C>
__device__ __forceinline__ void attn_bwd_delta(const S* __restrict__ out, const S* __restrict__ dout,
                                               C* __restrict__ delta, int B, int H, int N, int D, long long o_sb,
                                               long long o_sh, long long o_sr, long long do_sb, long long do_sh,
                                               long long do_sr) {
    if (attn_bwd_delta_packets<Tag, S, C>(out, dout, delta, B, H, N, D, o_sb, o_sh, o_sr, do_sb, do_sh, do_sr))
        return;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long rows = (long long)B * H * N;
    for (long long r = (long long)blockIdx.x * ATT_WARPS + warp; r < rows; r += (long long)gridDim.x * ATT_WARPS) {
        const long long bh = r / N;
        const int i = (int)(r - bh * N), b = (int)(bh / H), h = (int)(bh - (long long)b * H);
        const S* orow = out + b * o_sb + h * o_sh + i * o_sr;
        const S* dorow = dout + b * do_sb + h * do_sh + i * do_sr;
        C sum = (C)0;
        for (int d = lane; d < D; d += 32) sum += DType<Tag>::load(orow[d]) * DType<Tag>::load(dorow[d]);
        sum = att_warp_sum(sum);
        if (lane == 0) delta[r] = sum;
    }
}

// dq (dense [B, H, Nq, D]), one warp per query row.
template <typename Tag, typename S, typename C>
__device__ __forceinline__ void attn_bwd_dq(const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v,
                                            const S* __restrict__ dout, const C* __restrict__ lse,
                                            const C* __restrict__ delta, S* __restrict__ dq, int B, int H, int Nq,
                                            int Nk, int D, long long q_sb, long long q_sh, long long q_sr,
                                            long long k_sb, long long k_sh, long long k_sr, long long v_sb,
                                            long long v_sh, long long v_sr, long long do_sb, long long do_sh,
                                            long long do_sr, long long g_sb, long long g_sh, long long g_sr, C scale,
                                            int causal) {
    __shared__ C qs[ATT_WARPS][ATT_MAX_D];
    __shared__ C dos[ATT_WARPS][ATT_MAX_D];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long rows = (long long)B * H * Nq;
    for (long long r = (long long)blockIdx.x * ATT_WARPS + warp; r < rows; r += (long long)gridDim.x * ATT_WARPS) {
        const long long bh = r / Nq;
        const int i = (int)(r - bh * Nq), b = (int)(bh / H), h = (int)(bh - (long long)b * H);
        const S* qr = q + b * q_sb + h * q_sh + i * q_sr;
        const S* kb = k + b * k_sb + h * k_sh;
        const S* vb = v + b * v_sb + h * v_sh;
        const S* dor = dout + b * do_sb + h * do_sh + i * do_sr;
        S* grow = dq + b * g_sb + h * g_sh + i * g_sr;
        __syncwarp();
        for (int d = lane; d < D; d += 32) {
            qs[warp][d] = DType<Tag>::load(qr[d]);
            dos[warp][d] = DType<Tag>::load(dor[d]);
        }
        __syncwarp();
        const int end = att_key_end(i, Nq, Nk, causal);
        const C li = lse[r], di = delta[r];
        C acc[ATT_SLOTS];
#pragma unroll
        for (int e = 0; e < ATT_SLOTS; ++e) acc[e] = (C)0;
        for (int j0 = 0; j0 < end; j0 += 32) {
            const int j = j0 + lane;
            C ds = (C)0;
            if (j < end) {
                const C s = scale * att_dot<Tag>(qs[warp], kb + j * k_sr, D);
                const C dp = att_dot<Tag>(dos[warp], vb + j * v_sr, D);
                ds = att_exp(s - li) * (dp - di);
            }
            const int cnt = min(32, end - j0);
            for (int t = 0; t < cnt; ++t) {
                const C dst = __shfl_sync(ATT_FULL, ds, t);
                const S* kr = kb + (j0 + t) * k_sr;
#pragma unroll
                for (int e = 0; e < ATT_SLOTS; ++e) {
                    const int d = lane + 32 * e;
                    if (d < D) acc[e] += dst * DType<Tag>::load(kr[d]);
                }
            }
        }
#pragma unroll
        for (int e = 0; e < ATT_SLOTS; ++e) {
            const int d = lane + 32 * e;
            if (d < D) grow[d] = DType<Tag>::store(acc[e] * scale);
        }
    }
}

// dk, dv (dense [B, H, Nk, D]), one warp per key row.
template <typename Tag, typename S, typename C>
__device__ __forceinline__ void attn_bwd_dkdv(const S* __restrict__ q, const S* __restrict__ k,
                                              const S* __restrict__ v, const S* __restrict__ dout,
                                              const C* __restrict__ lse, const C* __restrict__ delta,
                                              S* __restrict__ dk, S* __restrict__ dv, int B, int H, int Nq, int Nk,
                                              int D, long long q_sb, long long q_sh, long long q_sr,
                                              long long k_sb, long long k_sh, long long k_sr, long long v_sb,
                                              long long v_sh, long long v_sr, long long do_sb, long long do_sh,
                                              long long do_sr, long long dk_sb, long long dk_sh, long long dk_sr,
                                              long long dv_sb, long long dv_sh, long long dv_sr, long long dv_at,
                                              C scale, int causal) {
    __shared__ C ks[ATT_WARPS][ATT_MAX_D];
    __shared__ C vs[ATT_WARPS][ATT_MAX_D];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const long long rows = (long long)B * H * Nk;
    for (long long r = (long long)blockIdx.x * ATT_WARPS + warp; r < rows; r += (long long)gridDim.x * ATT_WARPS) {
        const long long bh = r / Nk;
        const int j = (int)(r - bh * Nk), b = (int)(bh / H), h = (int)(bh - (long long)b * H);
        const S* kr = k + b * k_sb + h * k_sh + j * k_sr;
        const S* vr = v + b * v_sb + h * v_sh + j * v_sr;
        const S* qb = q + b * q_sb + h * q_sh;
        const S* dob = dout + b * do_sb + h * do_sh;  // the [Nq, D] rows of this (b, h), do_sr apart
        const C* lb = lse + bh * Nq;
        const C* db = delta + bh * Nq;
        __syncwarp();
        for (int d = lane; d < D; d += 32) {
            ks[warp][d] = DType<Tag>::load(kr[d]);
            vs[warp][d] = DType<Tag>::load(vr[d]);
        }
        __syncwarp();
        const int start = att_query_start(j, Nq, Nk, causal);
        C gk[ATT_SLOTS], gv[ATT_SLOTS];
#pragma unroll
        for (int e = 0; e < ATT_SLOTS; ++e) gk[e] = gv[e] = (C)0;
        for (int i0 = start; i0 < Nq; i0 += 32) {
            const int i = i0 + lane;
            C p = (C)0, ds = (C)0;
            if (i < Nq) {  // query i sees key j (i >= start), so lse[i] is finite
                const C s = scale * att_dot<Tag>(ks[warp], qb + i * q_sr, D);
                const C dp = att_dot<Tag>(vs[warp], dob + i * do_sr, D);
                p = att_exp(s - lb[i]);
                ds = p * (dp - db[i]);
            }
            const int cnt = min(32, Nq - i0);
            for (int t = 0; t < cnt; ++t) {
                const C pt = __shfl_sync(ATT_FULL, p, t);
                const C dst = __shfl_sync(ATT_FULL, ds, t);
                const S* qi = qb + (i0 + t) * q_sr;
                const S* doi = dob + (i0 + t) * do_sr;
#pragma unroll
                for (int e = 0; e < ATT_SLOTS; ++e) {
                    const int d = lane + 32 * e;
                    if (d < D) {
                        gv[e] += pt * DType<Tag>::load(doi[d]);
                        gk[e] += dst * DType<Tag>::load(qi[d]);
                    }
                }
            }
        }
        S* dkr = dk + b * dk_sb + h * dk_sh + j * dk_sr;
        S* dvr = (dv_at >= 0 ? dk + dv_at : dv) + b * dv_sb + h * dv_sh + j * dv_sr;
#pragma unroll
        for (int e = 0; e < ATT_SLOTS; ++e) {
            const int d = lane + 32 * e;
            if (d < D) {
                dkr[d] = DType<Tag>::store(gk[e] * scale);
                dvr[d] = DType<Tag>::store(gv[e]);
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) attn_fwd_f32(
    const float* q, const float* k, const float* v, float* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long o_sb, long long o_sh,
    long long o_sr, float scale, int causal) {
    attn_fwd<float, float, float>(q, k, v, out, lse, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, o_sb, o_sh, o_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_delta_f32(const float* out, const float* dout, float* delta,
    int B, int H, int N, int D, long long o_sb, long long o_sh, long long o_sr, long long do_sb, long long do_sh,
    long long do_sr) {
    attn_bwd_delta<float, float, float>(out, dout, delta, B, H, N, D, o_sb, o_sh, o_sr, do_sb, do_sh, do_sr);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_f32(
    const float* q, const float* k, const float* v, const float* dout, const float* lse, const float* delta, float* dq, int B,
    int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq<float, float, float>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, g_sb, g_sh, g_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv_f32(
    const float* q, const float* k, const float* v, const float* dout, const float* lse, const float* delta, float* dk, float* dv,
    int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb, long long dv_sh,
    long long dv_sr, long long dv_at, float scale, int causal) {
    attn_bwd_dkdv<float, float, float>(q, k, v, dout, lse, delta, dk, dv, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal);
}

extern "C" __global__ void __launch_bounds__(128) attn_fwd_f64(
    const double* q, const double* k, const double* v, double* out, double* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long o_sb, long long o_sh,
    long long o_sr, double scale, int causal) {
    attn_fwd<double, double, double>(q, k, v, out, lse, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, o_sb, o_sh, o_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_delta_f64(const double* out, const double* dout, double* delta,
    int B, int H, int N, int D, long long o_sb, long long o_sh, long long o_sr, long long do_sb, long long do_sh,
    long long do_sr) {
    attn_bwd_delta<double, double, double>(out, dout, delta, B, H, N, D, o_sb, o_sh, o_sr, do_sb, do_sh, do_sr);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_f64(
    const double* q, const double* k, const double* v, const double* dout, const double* lse, const double* delta, double* dq, int B,
    int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long g_sb, long long g_sh, long long g_sr, double scale, int causal) {
    attn_bwd_dq<double, double, double>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, g_sb, g_sh, g_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv_f64(
    const double* q, const double* k, const double* v, const double* dout, const double* lse, const double* delta, double* dk, double* dv,
    int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb, long long dv_sh,
    long long dv_sr, long long dv_at, double scale, int causal) {
    attn_bwd_dkdv<double, double, double>(q, k, v, dout, lse, delta, dk, dv, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal);
}

extern "C" __global__ void __launch_bounds__(128) attn_fwd_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, f16_t* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long o_sb, long long o_sh,
    long long o_sr, float scale, int causal) {
    attn_fwd<F16, f16_t, float>(q, k, v, out, lse, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, o_sb, o_sh, o_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_delta_f16(const f16_t* out, const f16_t* dout, float* delta,
    int B, int H, int N, int D, long long o_sb, long long o_sh, long long o_sr, long long do_sb, long long do_sh,
    long long do_sr) {
    attn_bwd_delta<F16, f16_t, float>(out, dout, delta, B, H, N, D, o_sb, o_sh, o_sr, do_sb, do_sh, do_sr);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, const f16_t* dout, const float* lse, const float* delta, f16_t* dq, int B,
    int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq<F16, f16_t, float>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, g_sb, g_sh, g_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, const f16_t* dout, const float* lse, const float* delta, f16_t* dk, f16_t* dv,
    int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb, long long dv_sh,
    long long dv_sr, long long dv_at, float scale, int causal) {
    attn_bwd_dkdv<F16, f16_t, float>(q, k, v, dout, lse, delta, dk, dv, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal);
}

extern "C" __global__ void __launch_bounds__(128) attn_fwd_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, bf16_t* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long o_sb, long long o_sh,
    long long o_sr, float scale, int causal) {
    attn_fwd<BF16, bf16_t, float>(q, k, v, out, lse, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, o_sb, o_sh, o_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_delta_bf16(const bf16_t* out, const bf16_t* dout, float* delta,
    int B, int H, int N, int D, long long o_sb, long long o_sh, long long o_sr, long long do_sb, long long do_sh,
    long long do_sr) {
    attn_bwd_delta<BF16, bf16_t, float>(out, dout, delta, B, H, N, D, o_sb, o_sh, o_sr, do_sb, do_sh, do_sr);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, const bf16_t* dout, const float* lse, const float* delta, bf16_t* dq, int B,
    int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq<BF16, bf16_t, float>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, g_sb, g_sh, g_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, const bf16_t* dout, const float* lse, const float* delta, bf16_t* dk, bf16_t* dv,
    int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb, long long dv_sh,
    long long dv_sr, long long dv_at, float scale, int causal) {
    attn_bwd_dkdv<BF16, bf16_t, float>(q, k, v, dout, lse, delta, dk, dv, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal);
}
