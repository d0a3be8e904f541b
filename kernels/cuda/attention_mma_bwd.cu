// attention_mma_bwd.cu — the fused attention backward on the tensor cores (FlashAttention-2's
// recomputation from the row log-sum-exp), f16 / bf16 with f32 accumulation through mma.sync
// m16n8k16 (sm_80+), head dimension 64. Same semantics, layouts and signatures as attention.cu's
// attn_bwd_dq_<dt> / attn_bwd_dkdv_<dt> (delta = rowsum(dout * out) comes from attention.cu's
// attn_bwd_delta_<dt>); other head dimensions run on attention.cu.
//
// cuda-stack-build: archs=80
//
// Requirements checked by the Rust op: q, k, v, dout, dq, dk, dv 16-byte aligned, every stride
// of q, k, v a multiple of 8 elements; D == 64.
//
// Two kernels, no atomics (deterministic), each shaped like attention_mma.cu's forward (4 warps,
// 128 threads EXACTLY, 16 rows per warp, tiles of 64 through padded shared memory with cp.async):
//   * dq: a CTA per 64 query rows; its Q and dO fragments (A operands) in registers; per K/V
//     tile of 64 keys: S = Q K^T and dP = dO V^T (B operands: K and V rows, ldmatrix), P =
//     exp2(S * scale * log2 e - lse * log2 e) (0 where masked), dS = P (dP - delta), then
//     dQ += dS K (dS repacked in registers as the A operand, K through ldmatrix.trans).
//   * dkdv: a CTA per 64 key rows; its K and V fragments in registers; per Q/dO tile of 64 queries
//     (from the first query that sees the tile's first key): S^T = K Q^T, dP^T = V dO^T, P^T,
//     dS^T = P^T (dP^T - delta), then dV += P^T dO and dK += dS^T Q (dO and Q through
//     ldmatrix.trans). lse and delta of the tile's queries are staged in shared memory.
// The pipeline is the plain one (wait for the tile, compute, barrier, issue the next tile's
// copies): simple to verify; the copies of tile j + 1 are not overlapped with tile j's math.
// Grid: any >= 1 (a grid-stride loop over B * H * ceil(N / 64) tiles).
#include "dtype.cuh"
#include "mma_warp_tile.cuh"
#include "shared_address.cuh"

#define AB_T 64         // rows per tile (queries or keys)
#define AB_THREADS 128  // 4 warps
#define AB_D 64         // the head dimension
#define AB_ROW_BYTES ((AB_D + 8) * 2)
#define AB_TILE_BYTES (AB_T * AB_ROW_BYTES)
#define AB_KS (AB_D / 16)  // k steps over D
#define AB_ND (AB_D / 8)   // n blocks over D

__device__ __forceinline__ void ab_cp16(unsigned dst, const void* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void ab_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void ab_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

// Rows [n0, n0 + 64) of a [N, 64] matrix (row stride sr) into a padded tile; rows >= N zero-filled.
__device__ __forceinline__ void ab_load_tile(unsigned tile, const unsigned short* base, long long sr, int n0, int N) {
#pragma unroll
    for (int i = 0; i < AB_T * (AB_D / 8) / AB_THREADS; ++i) {
        const int c = threadIdx.x + i * AB_THREADS;
        const int r = c / (AB_D / 8), ch = c % (AB_D / 8);
        const int row = n0 + r;
        const bool in = row < N;
        const unsigned short* src = in ? base + (long long)row * sr + ch * 8 : base;
        ab_cp16(tile + r * AB_ROW_BYTES + ch * 16, src, in ? 16 : 0);
    }
}

// A-operand fragments (16 rows x 64) of rows r0 and r0 + 8 of a [N, 64] matrix (row stride sr),
// read from global memory: f[ks][0] (row, k lo), [1] (row + 8, k lo), [2] (row, k hi), [3]
// (row + 8, k hi); rows >= N are 0.
__device__ __forceinline__ void ab_frag_a(unsigned (&f)[AB_KS][4], const unsigned short* base, long long sr, int r0,
                                          int N, int quad) {
#pragma unroll
    for (int ks = 0; ks < AB_KS; ++ks)
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            const int row = r0 + 8 * (x & 1);
            const int col = 16 * ks + 8 * (x >> 1) + 2 * quad;
            f[ks][x] = row < N ? *reinterpret_cast<const unsigned*>(base + (long long)row * sr + col) : 0u;
        }
}

// acc[8][4] (16 rows x 64 columns) = A (16 x 64, fragments a) times the transpose of a tile's
// 64 rows (the tile stored [n][k], ldmatrix non-transposed): acc[n] covers columns 8 n .. 8 n + 7.
template <class E>
__device__ __forceinline__ void ab_mul_bt(float (&acc)[8][4], const unsigned (&a)[AB_KS][4], unsigned tile,
                                          unsigned lane_off) {
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int x = 0; x < 4; ++x) acc[n][x] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < AB_KS; ++ks)
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            unsigned b0, b1, b2, b3;
            ldsm_x4(tile + lane_off + p * 16 * AB_ROW_BYTES + ks * 32, b0, b1, b2, b3);
            E::mma(acc[2 * p], a[ks], b0, b1);
            E::mma(acc[2 * p + 1], a[ks], b2, b3);
        }
}

// acc[ND][4] (16 x 64) += P (16 x 64, as the f32 accumulator layout of ab_mul_bt) times a tile's
// 64 rows (stored [k][n], ldmatrix transposed).
template <class E>
__device__ __forceinline__ void ab_mul_acc(float (&acc)[AB_ND][4], const float (&p)[8][4], unsigned tile,
                                           unsigned lane_off_t) {
    unsigned pa[4][4];
#pragma unroll
    for (int kb = 0; kb < 4; ++kb) {
        pa[kb][0] = E::pack(p[2 * kb][0], p[2 * kb][1]);
        pa[kb][1] = E::pack(p[2 * kb][2], p[2 * kb][3]);
        pa[kb][2] = E::pack(p[2 * kb + 1][0], p[2 * kb + 1][1]);
        pa[kb][3] = E::pack(p[2 * kb + 1][2], p[2 * kb + 1][3]);
    }
#pragma unroll
    for (int kb = 0; kb < 4; ++kb)
#pragma unroll
        for (int q = 0; q < AB_D / 16; ++q) {
            unsigned b0, b1, b2, b3;
            ldsm_x4_t(tile + lane_off_t + kb * 16 * AB_ROW_BYTES + q * 32, b0, b1, b2, b3);
            E::mma(acc[2 * q], pa[kb], b0, b1);
            E::mma(acc[2 * q + 1], pa[kb], b2, b3);
        }
}

// Rows r0, r0 + 8 (< N) of acc * mul, rounded, into the dense [.., 64] rows at `base`.
template <class E>
__device__ __forceinline__ void ab_store(const float (&acc)[AB_ND][4], unsigned short* base, int r0, int N, float mul,
                                         int quad) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
        const int row = r0 + 8 * rr;
        if (row >= N) continue;
        unsigned short* p = base + (long long)row * AB_D;
#pragma unroll
        for (int n = 0; n < AB_ND; ++n)
            *reinterpret_cast<unsigned*>(p + 8 * n + 2 * quad) = E::pack(acc[n][2 * rr] * mul, acc[n][2 * rr + 1] * mul);
    }
}

// The per-lane ldmatrix byte offsets: non-transposed (rows = n) and transposed (rows = k).
__device__ __forceinline__ unsigned ab_lane_off(int lane) {
    const int mi = lane / 8, mr = lane % 8;
    return ((mi >> 1) * 8 + mr) * AB_ROW_BYTES + (mi & 1) * 16;
}
__device__ __forceinline__ unsigned ab_lane_off_t(int lane) {
    const int mi = lane / 8, mr = lane % 8;
    return ((mi & 1) * 8 + mr) * AB_ROW_BYTES + (mi >> 1) * 16;
}

template <class E>
__device__ __forceinline__ void attn_bwd_dq_mma(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                                const unsigned short* __restrict__ v,
                                                const unsigned short* __restrict__ dout, const float* __restrict__ lse,
                                                const float* __restrict__ delta, unsigned short* __restrict__ dq, int B,
                                                int H, int Nq, int Nk, long long q_sb, long long q_sh, long long q_sr,
                                                long long k_sb, long long k_sh, long long k_sr, long long v_sb,
                                                long long v_sh, long long v_sr, float scale, int causal) {
    __shared__ __align__(16) unsigned char smem[2 * AB_TILE_BYTES];
    const unsigned k_tile = smem_u32(smem), v_tile = k_tile + AB_TILE_BYTES;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, quad = lane % 4;
    const float LOG2E = 1.4426950408889634f, sl2 = scale * LOG2E;
    const unsigned off = ab_lane_off(lane), off_t = ab_lane_off_t(lane);
    const int n_qt = (Nq + AB_T - 1) / AB_T;
    const long long tiles = (long long)B * H * n_qt;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long bh = t / n_qt;
        const int qt = n_qt - 1 - (int)(t - bh * n_qt);
        const int b = (int)(bh / H), h = (int)(bh - (long long)b * H);
        const int m0 = qt * AB_T;
        const unsigned short* qb = q + b * q_sb + h * q_sh;
        const unsigned short* kb = k + b * k_sb + h * k_sh;
        const unsigned short* vb = v + b * v_sb + h * v_sh;
        const unsigned short* dob = dout + bh * Nq * AB_D;
        int kv_end = Nk;
        if (causal) {
            const long long e = (long long)m0 + AB_T + Nk - Nq;
            kv_end = e <= 0 ? 0 : (e >= Nk ? Nk : (int)e);
        }
        const int n_kt = (kv_end + AB_T - 1) / AB_T;
        const int r0 = m0 + warp * 16 + lane / 4;
        unsigned qa[AB_KS][4], da[AB_KS][4];
        ab_frag_a(qa, qb, q_sr, r0, Nq, quad);
        ab_frag_a(da, dob, AB_D, r0, Nq, quad);
        float l2[2], dl[2];
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
            const int row = r0 + 8 * rr;
            l2[rr] = row < Nq ? lse[bh * Nq + row] * LOG2E : 0.0f;
            dl[rr] = row < Nq ? delta[bh * Nq + row] : 0.0f;
        }
        float acc[AB_ND][4];
#pragma unroll
        for (int n = 0; n < AB_ND; ++n)
#pragma unroll
            for (int x = 0; x < 4; ++x) acc[n][x] = 0.0f;

        __syncthreads();  // the previous tile's shared reads are done
        if (n_kt > 0) {
            ab_load_tile(k_tile, kb, k_sr, 0, Nk);
            ab_load_tile(v_tile, vb, v_sr, 0, Nk);
        }
        ab_commit();
        for (int kt = 0; kt < n_kt; ++kt) {
            const int n0 = kt * AB_T;
            ab_wait_all();
            __syncthreads();
            float s[8][4], dp[8][4];
            ab_mul_bt<E>(s, qa, k_tile, off);   // S = Q K^T
            ab_mul_bt<E>(dp, da, v_tile, off);  // dP = dO V^T
            // dS = P (dP - delta), P = exp2(S sl2 - lse log2 e) where key n0 + 8 n + 2 quad + c is
            // seen by row r0 + 8 rr (rows past Nq, and rows that see no key, get P = 0).
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {
                const int row = r0 + 8 * rr;
                const long long limit = causal ? (long long)row + Nk - Nq : (long long)Nk;
#pragma unroll
                for (int n = 0; n < 8; ++n)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const int key = n0 + 8 * n + 2 * quad + c;
                        const bool vis = row < Nq && key < Nk && (long long)key <= limit;
                        const float p = vis ? exp2f(s[n][2 * rr + c] * sl2 - l2[rr]) : 0.0f;
                        s[n][2 * rr + c] = p * (dp[n][2 * rr + c] - dl[rr]);
                    }
            }
            ab_mul_acc<E>(acc, s, k_tile, off_t);  // dQ += dS K
            __syncthreads();                        // every warp is done with K and V
            if (kt + 1 < n_kt) {
                ab_load_tile(k_tile, kb, k_sr, n0 + AB_T, Nk);
                ab_load_tile(v_tile, vb, v_sr, n0 + AB_T, Nk);
            }
            ab_commit();
        }
        ab_wait_all();
        ab_store<E>(acc, dq + bh * Nq * AB_D, r0, Nq, scale, quad);
    }
}

template <class E>
__device__ __forceinline__ void attn_bwd_dkdv_mma(
    const unsigned short* __restrict__ q, const unsigned short* __restrict__ k, const unsigned short* __restrict__ v,
    const unsigned short* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ delta,
    unsigned short* __restrict__ dk, unsigned short* __restrict__ dv, int B, int H, int Nq, int Nk, long long q_sb,
    long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr, long long v_sb, long long v_sh,
    long long v_sr, float scale, int causal) {
    __shared__ __align__(16) unsigned char smem[2 * AB_TILE_BYTES];
    __shared__ float lse_s[AB_T], delta_s[AB_T];
    const unsigned q_tile = smem_u32(smem), do_tile = q_tile + AB_TILE_BYTES;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, quad = lane % 4;
    const float LOG2E = 1.4426950408889634f, sl2 = scale * LOG2E;
    const unsigned off = ab_lane_off(lane), off_t = ab_lane_off_t(lane);
    const int n_kt = (Nk + AB_T - 1) / AB_T;
    const long long tiles = (long long)B * H * n_kt;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long bh = t / n_kt;
        const int kt = (int)(t - bh * n_kt);  // causal: the first key tiles see the most queries
        const int b = (int)(bh / H), h = (int)(bh - (long long)b * H);
        const int n0 = kt * AB_T;
        const unsigned short* qb = q + b * q_sb + h * q_sh;
        const unsigned short* kb = k + b * k_sb + h * k_sh;
        const unsigned short* vb = v + b * v_sb + h * v_sh;
        const unsigned short* dob = dout + bh * Nq * AB_D;
        const float* lb = lse + bh * Nq;
        const float* db = delta + bh * Nq;
        int q_start = 0;  // the first query that sees key n0
        if (causal) {
            const long long s0 = (long long)n0 - ((long long)Nk - Nq);
            q_start = s0 <= 0 ? 0 : (s0 >= Nq ? Nq : (int)s0);
        }
        const int qt0 = q_start / AB_T, n_qt = (Nq + AB_T - 1) / AB_T;
        const int c0 = n0 + warp * 16 + lane / 4;  // this thread's key rows c0, c0 + 8
        unsigned ka[AB_KS][4], va[AB_KS][4];
        ab_frag_a(ka, kb, k_sr, c0, Nk, quad);
        ab_frag_a(va, vb, v_sr, c0, Nk, quad);
        float gk[AB_ND][4], gv[AB_ND][4];
#pragma unroll
        for (int n = 0; n < AB_ND; ++n)
#pragma unroll
            for (int x = 0; x < 4; ++x) gk[n][x] = gv[n][x] = 0.0f;

        __syncthreads();  // the previous tile's shared reads are done
        if (qt0 < n_qt) {
            const int m0 = qt0 * AB_T;
            ab_load_tile(q_tile, qb, q_sr, m0, Nq);
            ab_load_tile(do_tile, dob, AB_D, m0, Nq);
            if (threadIdx.x < AB_T) {
                const int row = m0 + threadIdx.x;
                lse_s[threadIdx.x] = row < Nq ? lb[row] * LOG2E : 0.0f;
                delta_s[threadIdx.x] = row < Nq ? db[row] : 0.0f;
            }
        }
        ab_commit();
        for (int qt = qt0; qt < n_qt; ++qt) {
            const int m0 = qt * AB_T;
            ab_wait_all();
            __syncthreads();
            float s[8][4], dp[8][4];
            ab_mul_bt<E>(s, ka, q_tile, off);    // S^T = K Q^T
            ab_mul_bt<E>(dp, va, do_tile, off);  // dP^T = V dO^T
            // s[n][2 rr + c]: key c0 + 8 rr, query m0 + 8 n + 2 quad + c. P^T where the query sees
            // the key (and both exist), else 0; dS^T = P^T (dP^T - delta[query]).
#pragma unroll
            for (int n = 0; n < 8; ++n)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const int qi = 8 * n + 2 * quad + c;
                    const int query = m0 + qi;
                    const float l2 = lse_s[qi], dl = delta_s[qi];
#pragma unroll
                    for (int rr = 0; rr < 2; ++rr) {
                        const int key = c0 + 8 * rr;
                        const bool vis = query < Nq && key < Nk &&
                                         (!causal || (long long)key <= (long long)query + Nk - Nq);
                        const float p = vis ? exp2f(s[n][2 * rr + c] * sl2 - l2) : 0.0f;
                        s[n][2 * rr + c] = p;
                        dp[n][2 * rr + c] = p * (dp[n][2 * rr + c] - dl);
                    }
                }
            ab_mul_acc<E>(gv, s, do_tile, off_t);  // dV += P^T dO
            ab_mul_acc<E>(gk, dp, q_tile, off_t);  // dK += dS^T Q
            __syncthreads();                        // every warp is done with the tiles
            if (qt + 1 < n_qt) {
                ab_load_tile(q_tile, qb, q_sr, m0 + AB_T, Nq);
                ab_load_tile(do_tile, dob, AB_D, m0 + AB_T, Nq);
                if (threadIdx.x < AB_T) {
                    const int row = m0 + AB_T + threadIdx.x;
                    lse_s[threadIdx.x] = row < Nq ? lb[row] * LOG2E : 0.0f;
                    delta_s[threadIdx.x] = row < Nq ? db[row] : 0.0f;
                }
            }
            ab_commit();
        }
        ab_wait_all();
        ab_store<E>(gk, dk + bh * Nk * AB_D, c0, Nk, scale, quad);
        ab_store<E>(gv, dv + bh * Nk * AB_D, c0, Nk, 1.0f, quad);
    }
}

extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_mma_d64_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, const bf16_t* dout, const float* lse, const float* delta,
    bf16_t* dq, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb,
    long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, float scale, int causal) {
    attn_bwd_dq_mma<MmBF16>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb,
                            v_sh, v_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_mma_d64_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, const f16_t* dout, const float* lse, const float* delta,
    f16_t* dq, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb,
    long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, float scale, int causal) {
    attn_bwd_dq_mma<MmF16>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, v_sb,
                           v_sh, v_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv_mma_d64_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, const bf16_t* dout, const float* lse, const float* delta,
    bf16_t* dk, bf16_t* dv, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr,
    long long k_sb, long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, float scale,
    int causal) {
    attn_bwd_dkdv_mma<MmBF16>(q, k, v, dout, lse, delta, dk, dv, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr,
                              v_sb, v_sh, v_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv_mma_d64_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, const f16_t* dout, const float* lse, const float* delta,
    f16_t* dk, f16_t* dv, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr,
    long long k_sb, long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, float scale,
    int causal) {
    attn_bwd_dkdv_mma<MmF16>(q, k, v, dout, lse, delta, dk, dv, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr,
                             v_sb, v_sh, v_sr, scale, causal);
}
