// attention_mma.cu — the fused attention forward on the tensor cores (FlashAttention-2 style):
// f16 / bf16 q, k, v with f32 accumulation through mma.sync m16n8k16 (sm_80+), for head
// dimensions 64 and 128 (templates); other head dimensions and the backward pass run on
// attention.cu's SIMT kernels. Same semantics, layouts and signature as attention.cu's
// attn_fwd_<dt> (see there): strided q/k/v, dense out [B, H, Nq, D] and lse [B, H, Nq] (f32),
// bottom-right aligned causal mask, a row that sees no key gives out = 0 and lse = -inf.
//
// cuda-stack-build: archs=80
//
// Requirements checked by the Rust op before it picks these kernels: q, k, v, out 16-byte
// aligned and every stride of q, k, v a multiple of 8 elements (16-byte cp.async copies and
// 4-byte fragment loads stay aligned); D == 64 or 128.
//
// Design (per CTA of 4 warps = 128 threads, EXACTLY):
//   * The CTA owns 64 query rows of one (b, h); warp w owns rows 16 w .. 16 w + 15. Its Q
//     fragments (the mma A operand, 16 x D) are loaded once from global memory into registers.
//   * K and V stream through shared memory in tiles of 64 keys, rows padded by 16 bytes (so the 8
//     rows an ldmatrix phase reads fall in 8 different bank groups), copied with 16-byte
//     cp.async (rows past Nk zero-filled by the copy). One buffer each, overlapped: V_j is in
//     flight while S_j = Q K_j^T is computed, K_{j+1} while O += P_j V_j is.
//   * S (16 x 64 per warp, 32 f32 per thread) gets the scale (times log2 e, for exp2), the mask
//     (keys >= Nk, and the causal limit), then the online softmax: row max and sum across the
//     4 lanes that share a row (shuffles), the running max m, sum l and O rescaled by
//     exp2(m_old - m_new). P is rounded to f16/bf16 in registers and fed to the second mma as
//     its A operand (the S accumulator layout of two adjacent n-blocks is the A fragment of one
//     k step). V is the B operand through ldmatrix.trans.
//   * Causal CTAs stop at the last key tile any of their rows sees; CTAs are ordered so the
//     heaviest (last) query tiles of a head start first.
//   * Epilogue: O / l rounded once to f16/bf16, lse = (m + log2 l) ln 2.
// No atomics: deterministic. Grid: any >= 1 (a grid-stride loop over B * H * ceil(Nq / 64)
// tiles; the natural grid is one CTA per tile).
#include "dtype.cuh"
#include "mma_warp_tile.cuh"
#include "shared_address.cuh"

#define AM_BM 64        // query rows per CTA
#define AM_BN 64        // keys per K/V tile
#define AM_THREADS 128  // 4 warps
#define AM_PAD 8        // elements of padding per shared row (16 bytes)

__device__ __forceinline__ void am_cp16(unsigned dst, const void* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void am_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// All but the most recent committed group of this thread are complete.
__device__ __forceinline__ void am_wait_all_but_one() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
__device__ __forceinline__ void am_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

// Rows [n0, n0 + 64) of one head's [N, D] matrix (row stride sr elements) into a padded shared
// tile at `tile`; rows at or past N are zero-filled (no global read).
template <int D>
__device__ __forceinline__ void am_load_tile(unsigned tile, const unsigned short* base, long long sr, int n0, int N) {
    constexpr int CH = D / 8;  // 16-byte chunks per row
    constexpr int ROW_BYTES = (D + AM_PAD) * 2;
#pragma unroll
    for (int i = 0; i < AM_BN * CH / AM_THREADS; ++i) {
        const int c = threadIdx.x + i * AM_THREADS;
        const int r = c / CH, ch = c % CH;
        const int row = n0 + r;
        const bool in = row < N;
        const unsigned short* src = in ? base + (long long)row * sr + ch * 8 : base;
        am_cp16(tile + r * ROW_BYTES + ch * 16, src, in ? 16 : 0);
    }
}

template <class E, int D>
__device__ __forceinline__ void attn_fwd_mma(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                             const unsigned short* __restrict__ v, unsigned short* __restrict__ out,
                                             float* __restrict__ lse, int B, int H, int Nq, int Nk, long long q_sb,
                                             long long q_sh, long long q_sr, long long k_sb, long long k_sh,
                                             long long k_sr, long long v_sb, long long v_sh, long long v_sr,
                                             float scale, int causal) {
    constexpr int ROW_BYTES = (D + AM_PAD) * 2;
    constexpr int TILE_BYTES = AM_BN * ROW_BYTES;
    constexpr int KS = D / 16;  // k steps of S = Q K^T
    constexpr int ND = D / 8;   // n blocks of O
    __shared__ __align__(16) unsigned char smem[2 * TILE_BYTES];
    const unsigned k_tile = smem_u32(smem), v_tile = k_tile + TILE_BYTES;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int quad = lane % 4;
    const float NEG_INF = __int_as_float(0xff800000);
    const float sl2 = scale * 1.4426950408889634f;  // scale * log2(e)
    const int n_qt = (Nq + AM_BM - 1) / AM_BM;
    const long long tiles = (long long)B * H * n_qt;
    // The per-lane ldmatrix offsets (bytes within a tile): K (B operand of S, not transposed) and
    // V (B operand of O, transposed); see the fragment notes at the mma calls.
    const int mi = lane / 8, mr = lane % 8;
    const unsigned k_lane = ((mi >> 1) * 8 + mr) * ROW_BYTES + (mi & 1) * 16;
    const unsigned v_lane = ((mi & 1) * 8 + mr) * ROW_BYTES + (mi >> 1) * 16;

    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long bh = t / n_qt;
        const int qt = n_qt - 1 - (int)(t - bh * n_qt);  // the heaviest causal tiles first
        const int b = (int)(bh / H), h = (int)(bh - (long long)b * H);
        const int m0 = qt * AM_BM;
        const unsigned short* qb = q + b * q_sb + h * q_sh;
        const unsigned short* kb = k + b * k_sb + h * k_sh;
        const unsigned short* vb = v + b * v_sb + h * v_sh;
        int kv_end = Nk;  // keys any row of this tile sees: [0, kv_end)
        if (causal) {
            const long long e = (long long)m0 + AM_BM + Nk - Nq;  // last row m0 + 63 sees keys < m0 + 64 + Nk - Nq
            kv_end = e <= 0 ? 0 : (e >= Nk ? Nk : (int)e);
        }
        const int n_kt = (kv_end + AM_BN - 1) / AM_BN;

        __syncthreads();  // the previous tile's shared reads are done before new copies land
        if (n_kt > 0) am_load_tile<D>(k_tile, kb, k_sr, 0, Nk);
        am_commit();
        if (n_kt > 0) am_load_tile<D>(v_tile, vb, v_sr, 0, Nk);
        am_commit();

        // Q fragments: a[0] (row, k 0..7 of the step), a[1] (row + 8, k 0..7), a[2] (row,
        // k 8..15), a[3] (row + 8, k 8..15); this thread's columns 2 quad, 2 quad + 1.
        const int r0 = m0 + warp * 16 + lane / 4;
        unsigned qa[KS][4];
#pragma unroll
        for (int ks = 0; ks < KS; ++ks)
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                const int row = r0 + 8 * (x & 1);
                const int col = 16 * ks + 8 * (x >> 1) + 2 * quad;
                qa[ks][x] = row < Nq ? *reinterpret_cast<const unsigned*>(qb + (long long)row * q_sr + col) : 0u;
            }

        float o[ND][4];
#pragma unroll
        for (int n = 0; n < ND; ++n)
#pragma unroll
            for (int x = 0; x < 4; ++x) o[n][x] = 0.0f;
        float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};

        for (int kt = 0; kt < n_kt; ++kt) {
            const int n0 = kt * AM_BN;
            am_wait_all_but_one();  // K_kt (V_kt may still be in flight)
            __syncthreads();
            // S = Q K^T: 8 n-blocks of 8 keys. ldmatrix.x4 on K rows: matrix mi holds keys
            // 16 p + 8 (mi >> 1) .. + 7, d 16 ks + 8 (mi & 1) .. + 7, so r0, r1 are b0, b1 of
            // n-block 2 p and r2, r3 those of n-block 2 p + 1.
            float s[8][4];
#pragma unroll
            for (int n = 0; n < 8; ++n)
#pragma unroll
                for (int x = 0; x < 4; ++x) s[n][x] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ++ks)
#pragma unroll
                for (int p = 0; p < 4; ++p) {
                    unsigned b0, b1, b2, b3;
                    ldsm_x4(k_tile + k_lane + p * 16 * ROW_BYTES + ks * 32, b0, b1, b2, b3);
                    E::mma(s[2 * p], qa[ks], b0, b1);
                    E::mma(s[2 * p + 1], qa[ks], b2, b3);
                }
            __syncthreads();  // every warp is done with K_kt
            if (kt + 1 < n_kt) am_load_tile<D>(k_tile, kb, k_sr, n0 + AM_BN, Nk);
            am_commit();

            // Mask, scale, online softmax. s[n][2 rr + c] is row r0 + 8 rr, key n0 + 8 n + 2 quad + c.
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {
                const long long limit = causal ? (long long)(r0 + 8 * rr) + Nk - Nq : (long long)Nk;
                float mx = NEG_INF;
#pragma unroll
                for (int n = 0; n < 8; ++n)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const int key = n0 + 8 * n + 2 * quad + c;
                        const bool vis = key < Nk && (long long)key <= limit;
                        const float x = vis ? s[n][2 * rr + c] * sl2 : NEG_INF;
                        s[n][2 * rr + c] = x;
                        mx = fmaxf(mx, x);
                    }
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float m_new = fmaxf(m[rr], mx);
                const float m_use = m_new == NEG_INF ? 0.0f : m_new;  // no key seen yet: all p = 0
                const float corr = exp2f(m[rr] - m_use);
                float sum = 0.0f;
#pragma unroll
                for (int n = 0; n < 8; ++n)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const float p = exp2f(s[n][2 * rr + c] - m_use);
                        s[n][2 * rr + c] = p;
                        sum += p;
                    }
                sum += __shfl_xor_sync(0xffffffffu, sum, 1);
                sum += __shfl_xor_sync(0xffffffffu, sum, 2);
                l[rr] = l[rr] * corr + sum;
                m[rr] = m_new;
#pragma unroll
                for (int n = 0; n < ND; ++n) {
                    o[n][2 * rr] *= corr;
                    o[n][2 * rr + 1] *= corr;
                }
            }
            // P as A fragments: k step kb covers keys 16 kb .. + 15 = n-blocks 2 kb, 2 kb + 1.
            unsigned pa[4][4];
#pragma unroll
            for (int kb = 0; kb < 4; ++kb) {
                pa[kb][0] = E::pack(s[2 * kb][0], s[2 * kb][1]);
                pa[kb][1] = E::pack(s[2 * kb][2], s[2 * kb][3]);
                pa[kb][2] = E::pack(s[2 * kb + 1][0], s[2 * kb + 1][1]);
                pa[kb][3] = E::pack(s[2 * kb + 1][2], s[2 * kb + 1][3]);
            }

            am_wait_all_but_one();  // V_kt (K_{kt+1} may still be in flight)
            __syncthreads();
            // O += P V: ldmatrix.x4.trans on V rows: matrix mi holds keys 16 kb + 8 (mi & 1) .. + 7,
            // d 16 p + 8 (mi >> 1) .. + 7; transposed, r0, r1 are b0, b1 of d-block 2 p and r2,
            // r3 those of d-block 2 p + 1.
#pragma unroll
            for (int kb = 0; kb < 4; ++kb)
#pragma unroll
                for (int p = 0; p < D / 16; ++p) {
                    unsigned b0, b1, b2, b3;
                    ldsm_x4_t(v_tile + v_lane + kb * 16 * ROW_BYTES + p * 32, b0, b1, b2, b3);
                    E::mma(o[2 * p], pa[kb], b0, b1);
                    E::mma(o[2 * p + 1], pa[kb], b2, b3);
                }
            __syncthreads();  // every warp is done with V_kt
            if (kt + 1 < n_kt) am_load_tile<D>(v_tile, vb, v_sr, n0 + AM_BN, Nk);
            am_commit();
        }
        am_wait_all();

        // Epilogue: rows r0, r0 + 8; this thread's columns 8 n + 2 quad, + 1.
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
            const int row = r0 + 8 * rr;
            if (row >= Nq) continue;
            const float inv = l[rr] > 0.0f ? 1.0f / l[rr] : 0.0f;
            unsigned short* orow = out + (bh * Nq + row) * D;
#pragma unroll
            for (int n = 0; n < ND; ++n)
                *reinterpret_cast<unsigned*>(orow + 8 * n + 2 * quad) =
                    E::pack(o[n][2 * rr] * inv, o[n][2 * rr + 1] * inv);
            if (quad == 0) lse[bh * Nq + row] = l[rr] > 0.0f ? (m[rr] + log2f(l[rr])) * 0.6931471805599453f : NEG_INF;
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) attn_fwd_mma_d64_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, bf16_t* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr, long long v_sb,
    long long v_sh, long long v_sr, float scale, int causal) {
    attn_fwd_mma<MmBF16, 64>(q, k, v, out, lse, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr,
                             scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_fwd_mma_d128_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, bf16_t* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr, long long v_sb,
    long long v_sh, long long v_sr, float scale, int causal) {
    attn_fwd_mma<MmBF16, 128>(q, k, v, out, lse, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr,
                              scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_fwd_mma_d64_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, f16_t* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr, long long v_sb,
    long long v_sh, long long v_sr, float scale, int causal) {
    attn_fwd_mma<MmF16, 64>(q, k, v, out, lse, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr,
                            scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_fwd_mma_d128_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, f16_t* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr, long long v_sb,
    long long v_sh, long long v_sr, float scale, int causal) {
    attn_fwd_mma<MmF16, 128>(q, k, v, out, lse, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr,
                             scale, causal);
}
