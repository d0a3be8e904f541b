// attention_tiled.cu — the fused attention forward on the SIMT cores in tiles (FlashAttention's
// algorithm with f32 FMAs): the fast path for f32 (which has no tensor-core kernel), and for
// f16 / bf16 views the tensor-core kernels cannot take (unaligned, or a GPU before sm_80), at head
// dimensions D <= 128. Same semantics and arguments as attention.cu's attn_fwd_<dt> (strided q, k,
// v and out, dense lse [B, H, Nq] in f32, bottom-right aligned causal mask, a row that sees no key
// gives out = 0 and lse = -inf); attention.cu's warp-a-row kernel stays for f64 and D > 128.
//
// attention.cu's kernel gives a warp one query row and each lane whole dot products with keys read
// from global memory: about 0.9 TFLOP/s at 1 x 16 x 4096 x 64 on an H200. Here a CTA of 256
// threads owns 64 query rows of one (b, h) and streams the head's keys in tiles of 64 through
// shared memory:
//   * Q (scaled by scale * log2 e, so the softmax runs on exp2), K and V tiles as f32 rows of
//     DP + 4 floats (DP = 64 or 128, the head dimension padded with zeros): the 4-float pad puts
//     8 consecutive rows' 16-byte reads in 8 different bank quads (no conflicts);
//   * thread (ty, tx) = (tid / 16, tid % 16) computes S for rows 4 ty .. 4 ty + 3 and keys
//     tx + 16 j (j < 4): per 4 columns of d, 4 + 4 16-byte reads for 64 FMAs;
//   * the online softmax on those 16 scores (the 16 threads of a row group are one half-warp: the
//     row max by 4 shuffles), P written into the K tile's space (K is no longer needed), then
//     O += P V with thread (ty, tx) owning rows 4 ty .. + 3 and columns 4 tx + 64 g (+ 3): per 4
//     keys, 4 reads of P and 4 DP / 64 reads of V for 16 DP / 16 FMAs;
//   * the row sums stay per thread (each thread's share of its 4 rows) and are added across the
//     half-warp once, in the epilogue; out = O / l, lse = (m + log2 l) ln 2.
// Shared memory 3 x 64 x (DP + 4) floats: 101,376 B at DP = 128 (two CTAs an SM on sm_80+ and
// sm_90), 52,224 B at DP = 64 (four). The tiles of a causal problem go heaviest first (the last
// query tile of every head, then the one before, ...); full attention head by head.
// No atomics and fixed summation orders: deterministic run to run.
//
// Launch: block AT_THREADS (256) exactly, any grid >= 1 (a grid-stride loop over the
// B * H * ceil(Nq / 64) < 2^31 query tiles; Nq, Nk <= 2^31 - 129, as the row arithmetic is in
// int), dynamic shared memory AT_SMEM_BYTES(DP) (above the 48 KiB
// default: the host raises the function's limit). 1 <= D <= DP.
#include "attention_tiled.cuh"

#define AT_SMEM_BYTES(DP) (3 * AT_BM * AT_LD(DP) * 4)
// Blocks an SM the register budget is set for (the lab, kernels/tuning/attn_tiled_lab.cu, sets
// others).
#ifndef AT_MINB_D64
#define AT_MINB_D64 2
#endif
#ifndef AT_MINB_D128
#define AT_MINB_D128 2
#endif

template <typename Tag, typename S, int DP>
__device__ __forceinline__ void attn_fwd_tiled(const S* __restrict__ q, const S* __restrict__ k,
                                               const S* __restrict__ v, S* __restrict__ out,
                                               float* __restrict__ lse, int B, int H, int Nq, int Nk, int D,
                                               long long q_sb, long long q_sh, long long q_sr, long long k_sb,
                                               long long k_sh, long long k_sr, long long v_sb, long long v_sh,
                                               long long v_sr, long long o_sb, long long o_sh, long long o_sr,
                                               float scale, int causal) {
    constexpr int LD = AT_LD(DP), G = DP / 64;  // G: 16-byte column groups of O a thread owns
    extern __shared__ float4 at_smem4[];
    float* const Qs = reinterpret_cast<float*>(at_smem4);
    float* const Ks = Qs + AT_BM * LD;  // also P (rows of AT_PLD floats) once S is computed
    float* const Vs = Ks + AT_BN * LD;
    float* const Ps = Ks;
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const float NEG_INF = __int_as_float(0xff800000);
    const float sl2 = scale * 1.4426950408889634f;
    const long long shift = causal ? (long long)Nk - Nq : 0;
    const unsigned bhs = (unsigned)B * (unsigned)H;
    const int n_qt = (Nq + AT_BM - 1) / AT_BM;
    const unsigned tiles = bhs * (unsigned)n_qt;

    for (unsigned t = blockIdx.x; t < tiles; t += gridDim.x) {
        const AtQueryTile w = at_query_tile(t, bhs, H, n_qt, shift, Nk, causal);
        const unsigned bh = w.bh;
        const int b = w.b, h = w.h, m0 = w.m0, n_kt = w.n_kt;

        __syncthreads();  // the previous tile's epilogue and PV reads are done
        at_stage<Tag, S, DP>(Qs, q + b * q_sb + h * q_sh, q_sr, m0, Nq, D, sl2);

        // lim[i]: the keys row 4 ty + i sees are those < lim[i]; the tile's rows all see those < lim0.
        int lim[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) lim[i] = at_keys_seen((long long)m0 + 4 * ty + i, shift, Nk, causal);
        const int lim0 = at_keys_seen(m0, shift, Nk, causal);
        float o[4][4 * G], m[4], lp[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            m[i] = NEG_INF;
            lp[i] = 0.0f;
#pragma unroll
            for (int c = 0; c < 4 * G; ++c) o[i][c] = 0.0f;
        }
        for (int kt = 0; kt < n_kt; ++kt) {
            const int n0 = kt * AT_BN;
            if (kt > 0) __syncthreads();  // PV of the previous key tile is done with Ps and Vs
            at_stage<Tag, S, DP>(Ks, k + b * k_sb + h * k_sh, k_sr, n0, Nk, D, 1.0f);
            at_stage<Tag, S, DP>(Vs, v + b * v_sb + h * v_sh, v_sr, n0, Nk, D, 1.0f);
            __syncthreads();

            // S (log2 units) = (Q sl2) K^T for rows 4 ty + i, keys tx + 16 j.
            float s[4][4];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) s[i][j] = 0.0f;
            at_rows_dot<DP>(s, Qs, 4 * ty, Ks, tx);
            // Masked: keys past Nk, and (causal) keys later than a row sees.
            if (n0 + AT_BN > lim0) {
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        if (n0 + tx + 16 * j >= lim[i]) s[i][j] = NEG_INF;
            }
            // Online softmax per row (the row's 64 scores are on the 16 lanes of a half-warp).
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                float mx = fmaxf(fmaxf(s[i][0], s[i][1]), fmaxf(s[i][2], s[i][3]));
#pragma unroll
                for (int x = 1; x < 16; x <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, x));
                const float m_new = fmaxf(m[i], mx);
                const float m_use = m_new == NEG_INF ? 0.0f : m_new;
                const float corr = exp2f(m[i] - m_use);  // 0 while the row has seen nothing
                float sum = 0.0f;
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    s[i][j] = exp2f(s[i][j] - m_use);
                    sum += s[i][j];
                }
                lp[i] = lp[i] * corr + sum;
                m[i] = m_new;
#pragma unroll
                for (int c = 0; c < 4 * G; ++c) o[i][c] *= corr;
            }
            __syncthreads();  // every S read of the K tile is done: P takes its place
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) Ps[(4 * ty + i) * AT_PLD + tx + 16 * j] = s[i][j];
            __syncthreads();

            // O += P V: rows 4 ty + i, columns 4 tx + 64 g .. + 3.
            at_mul_acc<DP>(o, Ps, 4 * ty, Vs, tx);
        }

        // Epilogue: l over the half-warp, out = O / l, lse.
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float l = lp[i];
#pragma unroll
            for (int x = 1; x < 16; x <<= 1) l += __shfl_xor_sync(0xffffffffu, l, x);
            const int row = m0 + 4 * ty + i;
            if (row >= Nq) continue;
            const float inv = l > 0.0f ? 1.0f / l : 0.0f;
            at_store_row<Tag, S, DP>(out + b * o_sb + h * o_sh + row * o_sr, D, o, i, tx, inv);
            if (tx == 0) lse[(long long)bh * Nq + row] = l > 0.0f ? (m[i] + log2f(l)) * 0.6931471805599453f : NEG_INF;
        }
    }
}

// Entries: attn_fwd_tiled_d{64,128}_{f32,f16,bf16} (DP = 64 for D <= 64, 128 for 64 < D <= 128).
extern "C" __global__ void __launch_bounds__(AT_THREADS, AT_MINB_D64) attn_fwd_tiled_d64_f32(
    const float* q, const float* k, const float* v, float* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr, long long v_sb,
    long long v_sh, long long v_sr, long long o_sb, long long o_sh, long long o_sr, float scale, int causal) {
    attn_fwd_tiled<float, float, 64>(q, k, v, out, lse, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb,
                                  v_sh, v_sr, o_sb, o_sh, o_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, AT_MINB_D128) attn_fwd_tiled_d128_f32(
    const float* q, const float* k, const float* v, float* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr, long long v_sb,
    long long v_sh, long long v_sr, long long o_sb, long long o_sh, long long o_sr, float scale, int causal) {
    attn_fwd_tiled<float, float, 128>(q, k, v, out, lse, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb,
                                  v_sh, v_sr, o_sb, o_sh, o_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, AT_MINB_D64) attn_fwd_tiled_d64_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, f16_t* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr, long long v_sb,
    long long v_sh, long long v_sr, long long o_sb, long long o_sh, long long o_sr, float scale, int causal) {
    attn_fwd_tiled<F16, f16_t, 64>(q, k, v, out, lse, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb,
                                  v_sh, v_sr, o_sb, o_sh, o_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, AT_MINB_D128) attn_fwd_tiled_d128_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, f16_t* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr, long long v_sb,
    long long v_sh, long long v_sr, long long o_sb, long long o_sh, long long o_sr, float scale, int causal) {
    attn_fwd_tiled<F16, f16_t, 128>(q, k, v, out, lse, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb,
                                  v_sh, v_sr, o_sb, o_sh, o_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, AT_MINB_D64) attn_fwd_tiled_d64_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, bf16_t* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr, long long v_sb,
    long long v_sh, long long v_sr, long long o_sb, long long o_sh, long long o_sr, float scale, int causal) {
    attn_fwd_tiled<BF16, bf16_t, 64>(q, k, v, out, lse, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb,
                                  v_sh, v_sr, o_sb, o_sh, o_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(AT_THREADS, AT_MINB_D128) attn_fwd_tiled_d128_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, bf16_t* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr, long long v_sb,
    long long v_sh, long long v_sr, long long o_sb, long long o_sh, long long o_sr, float scale, int causal) {
    attn_fwd_tiled<BF16, bf16_t, 128>(q, k, v, out, lse, B, H, Nq, Nk, D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb,
                                  v_sh, v_sr, o_sb, o_sh, o_sr, scale, causal);
}
