// attention_tiled_bwd.cu — the attention backward on the SIMT cores in tiles, the partner of
// attention_tiled.cu's forward: f32, and f16 / bf16 views the tensor-core kernels cannot take, at
// head dimensions D <= 128. Same semantics and arguments as attention.cu's attn_bwd_dq_<dt> and
// attn_bwd_dkdv_<dt> (strided q, k, v, dout, dq, dk, dv; dense lse and delta in f32, delta from
// attn_bwd_delta_<dt>; dv_at >= 0 puts dv dv_at elements past dk's first element), computing
// (FlashAttention-2's backward, P recomputed from lse):
//   P = exp(scale q k^T - lse), dP = dO V^T, dS = P (dP - delta),
//   dq = scale dS K, dk = scale dS^T Q, dv = P^T dO.
// Two kernels, each owning its output rows (no atomics, fixed summation orders: deterministic),
// both built as attention_tiled.cuh's CTA of 256 threads over tiles of 64 rows:
//   * attn_bwd_dq_tiled_d{64,128}_<dt>: 64 query rows (Q scaled by scale log2 e, and dO staged
//     once), key tiles of 64 streamed: S and dP for rows 4 ty + i and keys tx + 16 j, dS into the V
//     tile's space, dQ += dS K (rows 4 ty + i, columns 4 tx + 64 g). Shared memory 4 tiles:
//     135,168 B at DP = 128 (one CTA an SM), 69,632 B at DP = 64.
//   * attn_bwd_dkdv_tiled_d{64,128}_<dt>: 64 key rows (K scaled by scale log2 e, and V staged once),
//     query tiles of 64 streamed: S^T and dP^T for keys 4 ty + i and queries tx + 16 j, P^T into a
//     tile of its own for dV += P^T dO, then dS^T in its place for dK += dS^T Q. Shared memory 4
//     tiles and one of 64 x 68 floats: 152,576 B at DP = 128 (an A100 allows a block 163 KB),
//     87,040 B at DP = 64 (an sm_86 / sm_89 GPU 99 KB).
// Masking: the causal mask (query i sees key j iff j <= i + Nk - Nq) and rows that see no key
// (lse = -inf) by P = 0; key rows past Nk and query rows past Nq are staged as zeros (K, V, Q, dO
// rows of 0 add nothing to dq, and queries past Nq get lse = +inf and delta = 0, so P = dS = 0).
// Causal tiles go heaviest first (dq: the last query tile of every head first; dk/dv: the first key
// tile first); full attention head by head.
//
// Launch: block AT_THREADS (256) exactly, any grid >= 1 (a grid-stride loop over the
// B * H * ceil(N / 64) < 2^31 tiles, N = Nq for dq, Nk for dk/dv; Nq, Nk <= 2^31 - 129, as the row
// arithmetic is in int), dynamic shared memory
// ATB_DQ_SMEM(DP) / ATB_DKDV_SMEM(DP) (the host raises the functions' limits). 1 <= D <= DP.
#include "attention_tiled.cuh"

#define ATB_TILE(DP) (AT_BM * AT_LD(DP))  // floats of a staged tile
#define ATB_DQ_SMEM(DP) (4 * ATB_TILE(DP) * 4)
#define ATB_DKDV_SMEM(DP) ((4 * ATB_TILE(DP) + AT_BM * AT_PLD) * 4)
// Blocks an SM the register budget is set for: the shared memory allows one CTA at DP = 128.
#ifndef ATB_MINB_D64
#define ATB_MINB_D64 2
#endif
#ifndef ATB_MINB_D128
#define ATB_MINB_D128 1
#endif

template <typename Tag, typename S, int DP>
__device__ __forceinline__ void attn_bwd_dq_tiled(const S* __restrict__ q, const S* __restrict__ k,
                                                  const S* __restrict__ v, const S* __restrict__ dout,
                                                  const float* __restrict__ lse, const float* __restrict__ delta,
                                                  S* __restrict__ dq, int B, int H, int Nq, int Nk, int D,
                                                  long long q_sb, long long q_sh, long long q_sr, long long k_sb,
                                                  long long k_sh, long long k_sr, long long v_sb, long long v_sh,
                                                  long long v_sr, long long do_sb, long long do_sh, long long do_sr,
                                                  long long g_sb, long long g_sh, long long g_sr, float scale,
                                                  int causal) {
    constexpr int G = DP / 64;
    extern __shared__ float4 atb_smem4[];
    float* const Qs = reinterpret_cast<float*>(atb_smem4);
    float* const dOs = Qs + ATB_TILE(DP);
    float* const Ks = dOs + ATB_TILE(DP);
    float* const Vs = Ks + ATB_TILE(DP);  // dS (rows of AT_PLD floats) once dP is computed
    float* const dSs = Vs;
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const float LOG2E = 1.4426950408889634f, INF = __int_as_float(0x7f800000);
    const float sl2 = scale * LOG2E;
    const long long shift = causal ? (long long)Nk - Nq : 0;
    const unsigned bhs = (unsigned)B * (unsigned)H;
    const int n_qt = (Nq + AT_BM - 1) / AT_BM;
    const unsigned tiles = bhs * (unsigned)n_qt;

    for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {
        const AtQueryTile w = at_query_tile(t, bhs, H, n_qt, shift, Nk, causal);
        const unsigned bh = w.bh;
        const int b = w.b, h = w.h, m0 = w.m0, n_kt = w.n_kt;
        // This thread's rows: lse in log2 units (+inf where the row sees no key or is past Nq:
        // P = 0), delta, and the keys each sees (< lim).
        float l2[4], dl[4];
        int lim[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = m0 + 4 * ty + i;
            const float lv = r < Nq ? lse[(long long)bh * Nq + r] : -INF;
            l2[i] = lv == -INF ? INF : lv * LOG2E;
            dl[i] = r < Nq ? delta[(long long)bh * Nq + r] : 0.0f;
            lim[i] = at_keys_seen(r, shift, Nk, causal);
        }
        const int lim0 = at_keys_seen(m0, shift, Nk, causal);  // keys every row of the tile sees

        __syncthreads();  // the previous tile's reads are done
        at_stage<Tag, S, DP>(Qs, q + b * q_sb + h * q_sh, q_sr, m0, Nq, D, sl2);
        at_stage<Tag, S, DP>(dOs, dout + b * do_sb + h * do_sh, do_sr, m0, Nq, D, 1.0f);
        float acc[4][4 * G];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int c = 0; c < 4 * G; ++c) acc[i][c] = 0.0f;
        for (int kt = 0; kt < n_kt; ++kt) {
            const int n0 = kt * AT_BN;
            if (kt > 0) __syncthreads();  // dQ += dS K of the previous key tile is done
            at_stage<Tag, S, DP>(Ks, k + b * k_sb + h * k_sh, k_sr, n0, Nk, D, 1.0f);
            at_stage<Tag, S, DP>(Vs, v + b * v_sb + h * v_sh, v_sr, n0, Nk, D, 1.0f);
            __syncthreads();
            float s[4][4], dp[4][4];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) s[i][j] = dp[i][j] = 0.0f;
            at_rows_dot<DP>(s, Qs, 4 * ty, Ks, tx);
            at_rows_dot<DP>(dp, dOs, 4 * ty, Vs, tx);
            const bool part = n0 + AT_BN > lim0;
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    float p = exp2f(s[i][j] - l2[i]);
                    if (part && n0 + tx + 16 * j >= lim[i]) p = 0.0f;
                    s[i][j] = p * (dp[i][j] - dl[i]);  // dS
                }
            __syncthreads();  // every read of the V tile is done: dS takes its place
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) dSs[(4 * ty + i) * AT_PLD + tx + 16 * j] = s[i][j];
            __syncthreads();
            at_mul_acc<DP>(acc, dSs, 4 * ty, Ks, tx);  // dQ += dS K
        }
        at_store_rows<Tag, S, DP>(dq + b * g_sb + h * g_sh, g_sr, m0, Nq, D, acc, ty, tx, scale);
    }
}

template <typename Tag, typename S, int DP>
__device__ __forceinline__ void attn_bwd_dkdv_tiled(
    const S* __restrict__ q, const S* __restrict__ k, const S* __restrict__ v, const S* __restrict__ dout,
    const float* __restrict__ lse, const float* __restrict__ delta, S* __restrict__ dk, S* __restrict__ dv, int B,
    int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb, long long dv_sh,
    long long dv_sr, long long dv_at, float scale, int causal) {
    constexpr int G = DP / 64;
    extern __shared__ float4 atb_smem4[];
    float* const Ks = reinterpret_cast<float*>(atb_smem4);
    float* const Vs = Ks + ATB_TILE(DP);
    float* const Qs = Vs + ATB_TILE(DP);
    float* const dOs = Qs + ATB_TILE(DP);
    float* const Pt = dOs + ATB_TILE(DP);  // P^T (keys x queries, rows of AT_PLD floats), then dS^T
    float* const dSt = Pt;
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const float LOG2E = 1.4426950408889634f, INF = __int_as_float(0x7f800000);
    const float sl2 = scale * LOG2E;
    const long long shift = causal ? (long long)Nk - Nq : 0;
    const unsigned bhs = (unsigned)B * (unsigned)H;
    const int n_kt = (Nk + AT_BN - 1) / AT_BN, n_qt = (Nq + AT_BM - 1) / AT_BM;
    const unsigned tiles = bhs * (unsigned)n_kt;

    for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {
        unsigned bh;
        int kt;
        at_tile(t, bhs, n_kt, causal, false, bh, kt);
        const int b = (int)(bh / (unsigned)H), h = (int)(bh - (unsigned)b * (unsigned)H);
        const int n0 = kt * AT_BN;
        // Query tiles that see a key of this tile: causal, queries >= n0 - shift.
        int qt0 = 0;
        if (causal) {
            const long long s0 = (long long)n0 - shift;
            qt0 = (int)((s0 <= 0 ? 0 : (s0 >= Nq ? Nq : s0)) / AT_BM);
        }
        const float* lb = lse + (long long)bh * Nq;
        const float* db = delta + (long long)bh * Nq;

        __syncthreads();  // the previous tile's reads are done
        at_stage<Tag, S, DP>(Ks, k + b * k_sb + h * k_sh, k_sr, n0, Nk, D, sl2);
        at_stage<Tag, S, DP>(Vs, v + b * v_sb + h * v_sh, v_sr, n0, Nk, D, 1.0f);
        float gk[4][4 * G], gv[4][4 * G];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int c = 0; c < 4 * G; ++c) gk[i][c] = gv[i][c] = 0.0f;
        for (int qt = qt0; qt < n_qt; ++qt) {
            const int m0 = qt * AT_BM;
            if (qt > qt0) __syncthreads();  // dV, dK of the previous query tile are done
            at_stage<Tag, S, DP>(Qs, q + b * q_sb + h * q_sh, q_sr, m0, Nq, D, 1.0f);
            at_stage<Tag, S, DP>(dOs, dout + b * do_sb + h * do_sh, do_sr, m0, Nq, D, 1.0f);
            // Queries tx + 16 j: lse in log2 units (+inf past Nq or for a row that sees no key:
            // P = 0), delta (0 past Nq).
            float l2[4], dl[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int r = m0 + tx + 16 * j;
                const float lv = r < Nq ? lb[r] : -INF;
                l2[j] = lv == -INF ? INF : lv * LOG2E;
                dl[j] = r < Nq ? db[r] : 0.0f;
            }
            __syncthreads();
            float s[4][4], dp[4][4];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) s[i][j] = dp[i][j] = 0.0f;
            at_rows_dot<DP>(s, Ks, 4 * ty, Qs, tx);   // S^T (log2 units)
            at_rows_dot<DP>(dp, Vs, 4 * ty, dOs, tx);  // dP^T
            // Causal: key n0 + 4 ty + i is seen by query m0 + tx + 16 j iff key <= query + shift.
            const bool part = causal && (long long)n0 + AT_BN - 1 > (long long)m0 + shift;
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    float p = exp2f(s[i][j] - l2[j]);
                    if (part && (long long)(n0 + 4 * ty + i) > (long long)(m0 + tx + 16 * j) + shift) p = 0.0f;
                    s[i][j] = p;
                    dp[i][j] = p * (dp[i][j] - dl[j]);  // dS^T
                    Pt[(4 * ty + i) * AT_PLD + tx + 16 * j] = p;
                }
            __syncthreads();
            at_mul_acc<DP>(gv, Pt, 4 * ty, dOs, tx);  // dV += P^T dO
            __syncthreads();  // every read of P^T is done: dS^T takes its place
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) dSt[(4 * ty + i) * AT_PLD + tx + 16 * j] = dp[i][j];
            __syncthreads();
            at_mul_acc<DP>(gk, dSt, 4 * ty, Qs, tx);  // dK += dS^T Q
        }
        at_store_rows<Tag, S, DP>(dk + b * dk_sb + h * dk_sh, dk_sr, n0, Nk, D, gk, ty, tx, scale);
        at_store_rows<Tag, S, DP>((dv_at >= 0 ? dk + dv_at : dv) + b * dv_sb + h * dv_sh, dv_sr, n0, Nk, D, gv, ty, tx,
                                  1.0f);
    }
}

// Entries: attn_bwd_{dq,dkdv}_tiled_d{64,128}_{f32,f16,bf16} (DP = 64 for D <= 64, 128 for 64 < D <= 128).
extern "C" __global__ void __launch_bounds__(AT_THREADS, ATB_MINB_D64) attn_bwd_dq_tiled_d64_f32(
    const float* q, const float* k, const float* v, const float* dout, const float* lse, const float* delta, float* dq, int B,
    int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq_tiled<float, float, 64>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh,
                                     k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, g_sb, g_sh, g_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, ATB_MINB_D64) attn_bwd_dkdv_tiled_d64_f32(
    const float* q, const float* k, const float* v, const float* dout, const float* lse, const float* delta, float* dk, float* dv,
    int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb,
    long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb,
    long long do_sh, long long do_sr, long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb,
    long long dv_sh, long long dv_sr, long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_tiled<float, float, 64>(q, k, v, dout, lse, delta, dk, dv, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb,
                                       k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb,
                                       dv_sh, dv_sr, dv_at, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, ATB_MINB_D128) attn_bwd_dq_tiled_d128_f32(
    const float* q, const float* k, const float* v, const float* dout, const float* lse, const float* delta, float* dq, int B,
    int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq_tiled<float, float, 128>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh,
                                     k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, g_sb, g_sh, g_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, ATB_MINB_D128) attn_bwd_dkdv_tiled_d128_f32(
    const float* q, const float* k, const float* v, const float* dout, const float* lse, const float* delta, float* dk, float* dv,
    int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb,
    long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb,
    long long do_sh, long long do_sr, long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb,
    long long dv_sh, long long dv_sr, long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_tiled<float, float, 128>(q, k, v, dout, lse, delta, dk, dv, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb,
                                       k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb,
                                       dv_sh, dv_sr, dv_at, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, ATB_MINB_D64) attn_bwd_dq_tiled_d64_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, const f16_t* dout, const float* lse, const float* delta, f16_t* dq, int B,
    int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq_tiled<F16, f16_t, 64>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh,
                                     k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, g_sb, g_sh, g_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, ATB_MINB_D64) attn_bwd_dkdv_tiled_d64_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, const f16_t* dout, const float* lse, const float* delta, f16_t* dk, f16_t* dv,
    int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb,
    long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb,
    long long do_sh, long long do_sr, long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb,
    long long dv_sh, long long dv_sr, long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_tiled<F16, f16_t, 64>(q, k, v, dout, lse, delta, dk, dv, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb,
                                       k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb,
                                       dv_sh, dv_sr, dv_at, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, ATB_MINB_D128) attn_bwd_dq_tiled_d128_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, const f16_t* dout, const float* lse, const float* delta, f16_t* dq, int B,
    int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq_tiled<F16, f16_t, 128>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh,
                                     k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, g_sb, g_sh, g_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, ATB_MINB_D128) attn_bwd_dkdv_tiled_d128_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, const f16_t* dout, const float* lse, const float* delta, f16_t* dk, f16_t* dv,
    int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb,
    long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb,
    long long do_sh, long long do_sr, long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb,
    long long dv_sh, long long dv_sr, long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_tiled<F16, f16_t, 128>(q, k, v, dout, lse, delta, dk, dv, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb,
                                       k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb,
                                       dv_sh, dv_sr, dv_at, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, ATB_MINB_D64) attn_bwd_dq_tiled_d64_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, const bf16_t* dout, const float* lse, const float* delta, bf16_t* dq, int B,
    int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq_tiled<BF16, bf16_t, 64>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh,
                                     k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, g_sb, g_sh, g_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, ATB_MINB_D64) attn_bwd_dkdv_tiled_d64_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, const bf16_t* dout, const float* lse, const float* delta, bf16_t* dk, bf16_t* dv,
    int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb,
    long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb,
    long long do_sh, long long do_sr, long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb,
    long long dv_sh, long long dv_sr, long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_tiled<BF16, bf16_t, 64>(q, k, v, dout, lse, delta, dk, dv, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb,
                                       k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb,
                                       dv_sh, dv_sr, dv_at, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, ATB_MINB_D128) attn_bwd_dq_tiled_d128_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, const bf16_t* dout, const float* lse, const float* delta, bf16_t* dq, int B,
    int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh,
    long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq_tiled<BF16, bf16_t, 128>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh,
                                     k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, g_sb, g_sh, g_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, ATB_MINB_D128) attn_bwd_dkdv_tiled_d128_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, const bf16_t* dout, const float* lse, const float* delta, bf16_t* dk, bf16_t* dv,
    int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb,
    long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb,
    long long do_sh, long long do_sr, long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb,
    long long dv_sh, long long dv_sr, long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_tiled<BF16, bf16_t, 128>(q, k, v, dout, lse, delta, dk, dv, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb,
                                       k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb,
                                       dv_sh, dv_sr, dv_at, scale, causal);
}
