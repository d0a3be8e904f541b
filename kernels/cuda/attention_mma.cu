// attention_mma.cu — the fused attention forward on the tensor cores (FlashAttention-2 style):
// f16 / bf16 q, k, v with f32 accumulation through mma.sync m16n8k16 (sm_80+), for head
// dimensions 64 and 128 (templates); other head dimensions and the backward pass run on
// attention.cu's SIMT kernels. Same semantics, layouts and signature as attention.cu's
// attn_fwd_<dt> (see there): strided q/k/v and out, dense lse [B, H, Nq] (f32),
// bottom-right aligned causal mask, a row that sees no key gives out = 0 and lse = -inf.
//
// cuda-stack-build: archs=80
//
// Requirements checked by the Rust op before it picks these kernels: q, k, v, out 16-byte
// aligned and every stride of q, k, v, out a multiple of 8 elements (16-byte cp.async copies and
// 4-byte fragment loads stay aligned); D == 64 or 128.
//
// Design (per CTA of 4 warps = 128 threads, EXACTLY, and AM_SMEM_BYTES(D, BN) of dynamic shared
// memory, which the Rust op raises the kernel's limit to: 54 KiB at D = 64, 68 KiB at D = 128):
//   * The CTA owns 128 query rows of one (b, h); warp w owns rows 32 w .. 32 w + 31 as two m16
//     blocks, so every K and V fragment it loads from shared memory feeds 2 mma (the 64-row,
//     16-rows-per-warp design before it fed 1: half the ldmatrix traffic per mma). The Q tile is
//     copied to shared memory with the first K/V tile; at D = 64 each warp then keeps its Q
//     fragments in registers (QREG), at D = 128 it reloads them per k step with ldmatrix (the
//     registers hold O, 128 f32 per thread, and S).
//   * K and V stream through shared memory in tiles of BN keys (64 at D = 64, 32 at D = 128, so
//     that S stays at 64 / 32 f32 registers per thread and nothing spills), two stages each,
//     rows padded by 16 bytes (the 8 rows an ldmatrix phase reads fall in 8 different bank
//     groups), copied with 16-byte cp.async (rows past Nk, and Q rows past Nq, zero-filled). One
//     barrier per key tile: wait for tile kt, __syncthreads, issue tile kt + 1 into the other
//     stage (which every warp finished with before the barrier), compute tile kt; the copy
//     overlaps the whole of S = Q K^T, the softmax and O += P V.
//   * Online softmax on S (32 rows x BN keys per warp): the max is taken on the raw scores and
//     the scale (times log2 e) folded into the exp2 argument, fma(s, scale log2 e, -m), when the
//     scale is positive (otherwise the scores are scaled first); ex2.approx.ftz. The row max
//     uses the 4 lanes that share a row (shuffles); the row sum stays per thread until the
//     epilogue. O and the sums are rescaled by exp2(m_old - m_new) once per tile. P is rounded to
//     f16/bf16 in registers and fed to the second mma as its A operand (the S accumulator layout
//     of two adjacent n blocks is the A fragment of one k step). V is the B operand through
//     ldmatrix.trans.
//   * Masking only where needed: per warp, key tiles that every row of it sees fully skip the
//     mask; causal tiles that no row of it sees are skipped (the warp still takes part in the
//     copies and barriers), and the CTA stops at the last key tile any of its rows sees. CTAs are
//     ordered so the heaviest (last) query tiles of a head start first.
//   * Epilogue: O / l rounded once to f16/bf16, staged through the warp's own rows of the Q tile
//     and written as whole 16-byte chunks of rows; lse = (m + log2 l) ln 2.
// No atomics: deterministic. Grid: any >= 1 (a grid-stride loop over B * H * ceil(Nq / 128)
// tiles; the natural grid is one CTA per tile). kernels/tools/attn_fwd_mma_emu.py emulates this
// kernel lane by lane (fragments, ldmatrix, cp.async timing, barriers) against an f64 reference.
#include "dtype.cuh"
#include "ex2.cuh"
#include "mma_warp_tile.cuh"
#include "shared_address.cuh"

#define AM_BM 128       // query rows per CTA
#define AM_WM 32        // query rows per warp (two m16 blocks)
#define AM_THREADS 128  // 4 warps
#define AM_PAD 8        // elements of padding per shared row (16 bytes)

// The dynamic shared memory of attn_fwd_mma<.., D, BN, ..>: the Q tile (AM_BM rows) and two
// stages of K and V tiles (BN rows each), rows of (D + AM_PAD) 16-bit elements. The Rust op
// (kernels/src/ops/attention.rs, attn_fwd_smem) computes the same number.
#define AM_SMEM_BYTES(D, BN) ((AM_BM + 4 * (BN)) * ((D) + AM_PAD) * 2)

__device__ __forceinline__ void am_cp16(unsigned dst, const void* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void am_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void am_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }
// A value the compiler must treat as new at this point, so that it cannot hoist products of it
// out of the key loop and keep them live: it did (one 64-bit address per copy), and spilled.
__device__ __forceinline__ long long am_opaque(long long x) {
    asm volatile("" : "+l"(x));
    return x;
}

// ROWS rows of one head's [N, D] matrix into a padded shared tile. Thread t copies chunk t % CH
// of rows t / CH + i * RPI: `dst` is its first chunk's shared address, `src` the global address
// of that chunk, `sr` the row stride (elements), `rows_left` = N - (the tile's first row + t / CH).
// Rows at or past N are zero-filled (no global read; `base`, a valid address, is named instead).
template <int D, int ROWS>
__device__ __forceinline__ void am_load_tile(unsigned dst, const unsigned short* src, long long sr, int rows_left,
                                             const unsigned short* base) {
    constexpr int CH = D / 8;             // 16-byte chunks per row
    constexpr int RPI = AM_THREADS / CH;  // rows per pass of the CTA
    constexpr int ROW_BYTES = (D + AM_PAD) * 2;
    const long long step = am_opaque(sr * RPI);
#pragma unroll
    for (int i = 0; i < ROWS / RPI; ++i) {
        const bool in = i * RPI < rows_left;
        am_cp16(dst + i * RPI * ROW_BYTES, in ? src : base, in ? 16 : 0);
        src += step;
    }
}

template <class E, int D, int BN, bool QREG>
__device__ __forceinline__ void attn_fwd_mma(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                             const unsigned short* __restrict__ v, unsigned short* __restrict__ out,
                                             float* __restrict__ lse, int B, int H, int Nq, int Nk, long long q_sb,
                                             long long q_sh, long long q_sr, long long k_sb, long long k_sh,
                                             long long k_sr, long long v_sb, long long v_sh, long long v_sr,
                                             long long o_sb, long long o_sh, long long o_sr,
                                             float scale, int causal) {
    constexpr int RB = (D + AM_PAD) * 2;      // bytes per shared row
    constexpr int KS = D / 16;                // k steps of S = Q K^T
    constexpr int ND = D / 8;                 // n blocks of O
    constexpr int NB = BN / 8;                // n blocks of S
    constexpr int KB = BN / 16;               // k steps of O += P V
    constexpr int CH = D / 8;                 // 16-byte chunks per row
    constexpr int STAGE = 2 * BN * RB;        // one stage: K tile, then V tile
    static_assert(BN % 16 == 0 && BN % (AM_THREADS / CH) == 0, "tile shape");
    extern __shared__ __align__(16) unsigned char am_smem[];
    const unsigned q_tile = smem_u32(am_smem), kv_tile = q_tile + AM_BM * RB;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int quad = lane % 4;
    const float NEG_INF = __int_as_float(0xff800000);
    // The exp2 arguments are fma(s, mul, -m) on the raw scores s, with mul = scale * log2(e) when
    // that is positive (the max of the raw scores is then that of the scaled ones); otherwise
    // (`pre`) the scores are multiplied first and mul = 1. m is in the scaled (log2) domain.
    const float sl2 = scale * 1.4426950408889634f;
    const bool pre = !(sl2 > 0.0f);
    const float mul = pre ? 1.0f : sl2;
    const int n_qt = (Nq + AM_BM - 1) / AM_BM;
    const long long tiles = (long long)B * H * n_qt;
    // Per-lane ldmatrix addresses (stage 0): Q (A operand: row lane % 16 of an m block, k chunk
    // lane / 16), K (B operand of S) and V (B operand of O, transposed); see the mma calls.
    const int mi = lane / 8, mr = lane % 8;
    const unsigned q_lane = q_tile + (warp * AM_WM + lane % 16) * RB + (lane / 16) * 16;
    const unsigned k_lane = kv_tile + ((mi >> 1) * 8 + mr) * RB + (mi & 1) * 16;
    const unsigned v_lane = kv_tile + BN * RB + ((mi & 1) * 8 + mr) * RB + (mi >> 1) * 16;
    const int cr = threadIdx.x / CH, cc = threadIdx.x % CH;  // the tile copies' first row and chunk
    const unsigned cp_off = cr * RB + cc * 16;

    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long bh = t / n_qt;
        const int qt = n_qt - 1 - (int)(t - bh * n_qt);  // the heaviest causal tiles first
        const int b = (int)(bh / H), h = (int)(bh - (long long)b * H);
        const int m0 = qt * AM_BM;
        const int w0 = m0 + warp * AM_WM;  // this warp's first row
        const unsigned short* qb = q + b * q_sb + h * q_sh;
        const unsigned short* kb = k + b * k_sb + h * k_sh;
        const unsigned short* vb = v + b * v_sb + h * v_sh;
        const long long shift = causal ? (long long)Nk - Nq : 0;  // causal: row r sees keys <= r + shift
        int kv_end = Nk;  // keys any row of this tile sees: [0, kv_end)
        if (causal) {
            const long long e = (long long)m0 + AM_BM + shift;
            kv_end = e <= 0 ? 0 : (e >= Nk ? Nk : (int)e);
        }
        const int n_kt = (kv_end + BN - 1) / BN;
        // Key tiles kt < act_nt are seen by some row of this warp (it skips the others: exactly
        // what their all-zero probabilities would give); tiles kt < full_nt by every row of it
        // (no mask to apply).
        int act_nt = w0 < Nq ? n_kt : 0, full_nt = Nk / BN;
        if (causal) {
            const long long e = (long long)w0 + AM_WM + shift;  // the warp's last row sees keys < e
            const long long ae = e <= 0 ? 0 : (e + BN - 1) / BN;
            act_nt = ae < act_nt ? (int)ae : act_nt;
            const long long f = (long long)w0 + 1 + shift;  // its first row sees keys < f
            const long long fe = f <= 0 ? 0 : f / BN;
            full_nt = fe < full_nt ? (int)fe : full_nt;
        }
        // This thread's copies: chunk cc of rows cr + i * (128 / CH) of each tile; kp and vp
        // follow row cr of key tile kt + 1.
        const unsigned short* kp = kb + cr * k_sr + cc * 8;
        const unsigned short* vp = vb + cr * v_sr + cc * 8;

        __syncthreads();  // the previous tile's shared reads are done before new copies land
        am_load_tile<D, AM_BM>(q_tile + cp_off, qb + (m0 + cr) * q_sr + cc * 8, q_sr, Nq - m0 - cr, q);
        if (n_kt > 0) {
            am_load_tile<D, BN>(kv_tile + cp_off, kp, k_sr, Nk - cr, k);
            am_load_tile<D, BN>(kv_tile + BN * RB + cp_off, vp, v_sr, Nk - cr, v);
        }
        am_commit();

        // Q fragments in registers (QREG): qa[i][ks] is the A operand of m block i, k step ks:
        // a[0] (row, k 0..7), a[1] (row + 8, k 0..7), a[2] (row, k 8..15), a[3] (row + 8,
        // k 8..15) -- what ldmatrix.x4 gives from rows lane % 16, chunk lane / 16.
        unsigned qa[QREG ? 2 : 1][QREG ? KS : 1][4];
        if (QREG) {
            am_wait_all();
            __syncthreads();
#pragma unroll
            for (int i = 0; i < (QREG ? 2 : 1); ++i)
#pragma unroll
                for (int ks = 0; ks < (QREG ? KS : 1); ++ks)
                    ldsm_x4(q_lane + i * 16 * RB + ks * 32, qa[i][ks][0], qa[i][ks][1], qa[i][ks][2], qa[i][ks][3]);
        }

        float o[2][ND][4];
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int n = 0; n < ND; ++n)
#pragma unroll
                for (int x = 0; x < 4; ++x) o[i][n][x] = 0.0f;
        // Running max (scaled, log2 domain) and this thread's part of the running sum of rows
        // w0 + 16 i + lane / 4 + 8 rr; the 4 lanes of a row add their parts at the end.
        float m[2][2] = {{NEG_INF, NEG_INF}, {NEG_INF, NEG_INF}}, l[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};

        for (int kt = 0; kt < n_kt; ++kt) {
            const int n0 = kt * BN;
            const unsigned so = (kt & 1) * STAGE;  // this tile's stage
            am_wait_all();    // this thread's copies of tile kt
            __syncthreads();  // everyone's; and every warp is done with tile kt - 1 (the other stage)
            if (kt + 1 < n_kt) {
                kp += am_opaque(BN * k_sr);
                vp += am_opaque(BN * v_sr);
                const unsigned dst = kv_tile + (STAGE - so) + cp_off;
                am_load_tile<D, BN>(dst, kp, k_sr, Nk - n0 - BN - cr, k);
                am_load_tile<D, BN>(dst + BN * RB, vp, v_sr, Nk - n0 - BN - cr, v);
            }
            am_commit();
            if (kt >= act_nt) continue;  // warp-uniform

            // S = Q K^T. Per k step, ldmatrix.x4 on K rows: matrix mi holds keys 16 p + 8 (mi >> 1)
            // .. + 7, d 16 ks + 8 (mi & 1) .. + 7, so b0, b1 are the B operand of n block 2 p and
            // b2, b3 that of n block 2 p + 1; each serves both m blocks.
            float s[2][NB][4];
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int n = 0; n < NB; ++n)
#pragma unroll
                    for (int x = 0; x < 4; ++x) s[i][n][x] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
                unsigned a[2][4];
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    if (QREG) {
#pragma unroll
                        for (int x = 0; x < 4; ++x) a[i][x] = qa[QREG ? i : 0][QREG ? ks : 0][x];
                    } else {
                        ldsm_x4(q_lane + i * 16 * RB + ks * 32, a[i][0], a[i][1], a[i][2], a[i][3]);
                    }
                }
#pragma unroll
                for (int p = 0; p < BN / 16; ++p) {
                    unsigned b0, b1, b2, b3;
                    ldsm_x4(k_lane + so + p * 16 * RB + ks * 32, b0, b1, b2, b3);
#pragma unroll
                    for (int i = 0; i < 2; ++i) {
                        E::mma(s[i][2 * p], a[i], b0, b1);
                        E::mma(s[i][2 * p + 1], a[i], b2, b3);
                    }
                }
            }

            // Online softmax. s[i][n][2 rr + c] is row w0 + 16 i + lane / 4 + 8 rr, key
            // n0 + 8 n + 2 quad + c.
            if (pre) {
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int n = 0; n < NB; ++n)
#pragma unroll
                        for (int x = 0; x < 4; ++x) s[i][n][x] *= sl2;
            }
            if (kt >= full_nt) {  // mask keys >= Nk, and those past the causal limit
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int rr = 0; rr < 2; ++rr) {
                        long long e = causal ? (long long)(w0 + 16 * i + lane / 4 + 8 * rr) + shift + 1 : Nk;
                        e = e > Nk ? Nk : e;  // this row sees keys < e
                        const int end = e <= n0 ? -BN : (int)(e - n0) - 2 * quad;  // relative to this lane's first key
#pragma unroll
                        for (int n = 0; n < NB; ++n)
#pragma unroll
                            for (int c = 0; c < 2; ++c)
                                if (8 * n + c >= end) s[i][n][2 * rr + c] = NEG_INF;
                    }
            }
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int rr = 0; rr < 2; ++rr) {
                    float mx = NEG_INF;
#pragma unroll
                    for (int n = 0; n < NB; ++n) mx = fmaxf(mx, fmaxf(s[i][n][2 * rr], s[i][n][2 * rr + 1]));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                    const float m_new = fmaxf(m[i][rr], mx * mul);
                    const float m_use = m_new == NEG_INF ? 0.0f : m_new;  // no key seen yet: all p = 0
                    const float corr = ex2_approx(m[i][rr] - m_use);
                    const float nm = -m_use;
                    float sum = 0.0f;
#pragma unroll
                    for (int n = 0; n < NB; ++n)
#pragma unroll
                        for (int c = 0; c < 2; ++c) {
                            const float p = ex2_approx(fmaf(s[i][n][2 * rr + c], mul, nm));
                            s[i][n][2 * rr + c] = p;
                            sum += p;
                        }
                    l[i][rr] = l[i][rr] * corr + sum;
                    m[i][rr] = m_new;
#pragma unroll
                    for (int n = 0; n < ND; ++n) {
                        o[i][n][2 * rr] *= corr;
                        o[i][n][2 * rr + 1] *= corr;
                    }
                }

            // O += P V. P as A fragments: k step kb covers keys 16 kb .. + 15 = n blocks 2 kb,
            // 2 kb + 1 of S. ldmatrix.x4.trans on V rows: matrix mi holds keys 16 kb + 8 (mi & 1)
            // .. + 7, d 16 p + 8 (mi >> 1) .. + 7; transposed, b0, b1 are the B operand of d block
            // 2 p and b2, b3 that of d block 2 p + 1; each serves both m blocks.
#pragma unroll
            for (int kb = 0; kb < KB; ++kb) {
                unsigned pa[2][4];
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    pa[i][0] = E::pack(s[i][2 * kb][0], s[i][2 * kb][1]);
                    pa[i][1] = E::pack(s[i][2 * kb][2], s[i][2 * kb][3]);
                    pa[i][2] = E::pack(s[i][2 * kb + 1][0], s[i][2 * kb + 1][1]);
                    pa[i][3] = E::pack(s[i][2 * kb + 1][2], s[i][2 * kb + 1][3]);
                }
#pragma unroll
                for (int p = 0; p < D / 16; ++p) {
                    unsigned b0, b1, b2, b3;
                    ldsm_x4_t(v_lane + so + kb * 16 * RB + p * 32, b0, b1, b2, b3);
#pragma unroll
                    for (int i = 0; i < 2; ++i) {
                        E::mma(o[i][2 * p], pa[i], b0, b1);
                        E::mma(o[i][2 * p + 1], pa[i], b2, b3);
                    }
                }
            }
        }
        am_wait_all();
        __syncthreads();  // every copy has landed (the Q tile's too) and every warp is done reading

        // Epilogue. The warp stages O / l, rounded, in its own 32 rows of the Q tile, then
        // writes whole 16-byte chunks of rows (two 4-byte halves of a 32-byte sector per store
        // otherwise); lse = (m + log2 l) ln 2.
        const unsigned stage = q_tile + warp * AM_WM * RB;
        float lt[2][2];
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {
                float x = l[i][rr];
                x += __shfl_xor_sync(0xffffffffu, x, 1);
                x += __shfl_xor_sync(0xffffffffu, x, 2);
                lt[i][rr] = x;
                const float inv = x > 0.0f ? 1.0f / x : 0.0f;
                const int r = 16 * i + lane / 4 + 8 * rr;  // row in the warp's 32
#pragma unroll
                for (int n = 0; n < ND; ++n) {
                    const unsigned w = E::pack(o[i][n][2 * rr] * inv, o[i][n][2 * rr + 1] * inv);
                    asm volatile("st.shared.b32 [%0], %1;" ::"r"(stage + r * RB + n * 16 + quad * 4), "r"(w) : "memory");
                }
            }
        __syncwarp();
#pragma unroll
        for (int it = 0; it < CH; ++it) {
            const int c = lane + 32 * it, r = c / CH, ch = c % CH;
            const int row = w0 + r;
            if (row < Nq) {
                unsigned x0, x1, x2, x3;
                asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(x0), "=r"(x1), "=r"(x2), "=r"(x3)
                             : "r"(stage + r * RB + ch * 16));
                unsigned short* p = out + b * o_sb + h * o_sh + row * o_sr + ch * 8;
                asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(x0), "r"(x1), "r"(x2), "r"(x3)
                             : "memory");
            }
        }
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {
                const int row = w0 + 16 * i + lane / 4 + 8 * rr;
                if (quad == 0 && row < Nq)
                    lse[bh * Nq + row] =
                        lt[i][rr] > 0.0f ? (m[i][rr] + log2f(lt[i][rr])) * 0.6931471805599453f : NEG_INF;
            }
    }
}

extern "C" __global__ void __launch_bounds__(128) attn_fwd_mma_d64_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, bf16_t* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr, long long v_sb,
    long long v_sh, long long v_sr, long long o_sb, long long o_sh, long long o_sr, float scale, int causal) {
    attn_fwd_mma<MmBF16, 64, 64, true>(q, k, v, out, lse, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb,
                                        v_sh, v_sr, o_sb, o_sh, o_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_fwd_mma_d128_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, bf16_t* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr, long long v_sb,
    long long v_sh, long long v_sr, long long o_sb, long long o_sh, long long o_sr, float scale, int causal) {
    attn_fwd_mma<MmBF16, 128, 32, false>(q, k, v, out, lse, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb,
                                        v_sh, v_sr, o_sb, o_sh, o_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_fwd_mma_d64_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, f16_t* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr, long long v_sb,
    long long v_sh, long long v_sr, long long o_sb, long long o_sh, long long o_sr, float scale, int causal) {
    attn_fwd_mma<MmF16, 64, 64, true>(q, k, v, out, lse, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb,
                                        v_sh, v_sr, o_sb, o_sh, o_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_fwd_mma_d128_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, f16_t* out, float* lse, int B, int H, int Nq, int Nk, int D,
    long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr, long long v_sb,
    long long v_sh, long long v_sr, long long o_sb, long long o_sh, long long o_sr, float scale, int causal) {
    attn_fwd_mma<MmF16, 128, 32, false>(q, k, v, out, lse, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb,
                                        v_sh, v_sr, o_sb, o_sh, o_sr, scale, causal);
}
