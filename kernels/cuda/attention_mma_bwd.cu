// attention_mma_bwd.cu — the fused attention backward on the tensor cores (FlashAttention-2's
// recomputation from the row log-sum-exp), f16 / bf16 with f32 accumulation through mma.sync
// m16n8k16 (sm_80+), head dimensions 64 and 128 (templates). Same semantics, layouts and
// signatures as attention.cu's attn_bwd_dq_<dt> / attn_bwd_dkdv_<dt> (delta = rowsum(dout * out)
// comes from attention.cu's attn_bwd_delta_<dt>); other head dimensions run on attention.cu.
//
// cuda-stack-build: archs=80
//
// Requirements checked by the Rust op: q, k, v, dout, dq, dk, dv (and dq_acc) 16-byte aligned,
// every stride of q, k, v, dout, dq, dk, dv a multiple of 8 elements (all are strided views:
// batch, head, row; unit last stride; dq_acc is dense; dv_at as in attention.cu); D == 64 or 128. attn_bwd_dkdv_mma_d128_<dt>
// and attn_bwd_fused_mma_d128_<dt> take AB_DKDV128_DYN_SMEM bytes of dynamic shared memory
// (above the 48 KiB default with their static: the op raises the kernel's limit).
//
// Two paths. The deterministic one: two kernels per head dimension, no atomics, each shaped like
// attention_mma.cu's first forward (4 warps, 128 threads EXACTLY, 16 rows per warp, 64 rows per
// CTA, tiles through padded shared memory with cp.async):
//   * dq: a CTA per 64 query rows; its Q and dO fragments (A operands) in registers; per K/V
//     tile of BN keys: S = Q K^T and dP = dO V^T (B operands: K and V rows, ldmatrix), P =
//     exp2(S * scale * log2 e - lse * log2 e) (0 where masked), dS = P (dP - delta), then
//     dQ += dS K (dS repacked in registers as the A operand, K through ldmatrix.trans).
//   * dkdv: a CTA per 64 key rows; per Q/dO tile of BM queries (from the first query that sees
//     the tile's first key): S^T = K Q^T, dP^T = V dO^T, P^T, dS^T = P^T (dP^T - delta), then
//     dV += P^T dO and dK += dS^T Q (dO and Q through ldmatrix.trans). lse and delta of the
//     tile's queries are staged in shared memory.
// D = 64: BN = BM = 64; dkdv keeps its K and V fragments in registers; one buffer per tile (wait
// for the tile, compute, barrier, issue the next tile's copies: the copies of tile j + 1 are not
// overlapped with tile j's math).
// D = 128: the dK and dV accumulators alone are 128 f32 per thread, so dkdv reads its K and V
// fragments from shared memory (the CTA's 64 key rows, copied once per CTA tile into dynamic
// shared memory) instead of holding them, and both kernels step over tiles of 32 rows (BN = BM =
// 32: S and dP are 16 f32 per thread each). Two buffers per tile: after the barrier that sees
// tile j, the copies of tile j + 1 go into the other buffer and overlap tile j's math.
// The fused one (attn_bwd_fused_mma_*, FlashAttention-2's backward; the dkdv kernel with FUSED):
// the dkdv pass also computes each (query tile, key block)'s dQ share dS K from the dS it already
// has (no recomputation: the dq kernel above repeats S, P and dP) and adds it into an f32 dq_acc
// with red.global.add.f32; attn_bwd_dq_convert_<dt> rounds dq_acc * scale into dq. dq is then not
// bitwise deterministic (the adds' order varies); dk and dv are the dkdv kernel's bits.
// Grid: any >= 1 (a grid-stride loop over B * H * ceil(N / 64) tiles).
#include "dtype.cuh"
#include "mma_warp_tile.cuh"
#include "shared_address.cuh"

#define AB_ROWS 64      // rows (queries or keys) a CTA owns
#define AB_THREADS 128  // 4 warps
// attn_bwd_dkdv_mma_d128's K and V tiles: 2 x 64 rows of (128 + 8) 16-bit elements.
#define AB_DKDV128_DYN_SMEM (2 * AB_ROWS * (128 + 8) * 2)

// The dynamic shared memory of the kernels that hold K and V there (attn_bwd_dkdv_mma_d128).
extern __shared__ __align__(16) unsigned char ab_kv_smem[];

__device__ __forceinline__ void ab_cp16(unsigned dst, const void* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void ab_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void ab_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }
// A 32-bit shared store (the emulator, kernels/tuning/attn_emu, swaps it for a race-checked one).
__device__ __forceinline__ void ab_sts32(unsigned addr, unsigned v) { asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory"); }
// An f32 atomic add whose old value is not needed (relaxed, gpu scope: the kernels that read the
// sums run after this one on the stream).
__device__ __forceinline__ void ab_red_add(float* p, float v) { asm volatile("red.global.add.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory"); }

// Bytes per padded shared row of a [., D] tile: the 16-byte pad puts the 8 rows an ldmatrix
// phase reads into 8 different bank groups.
template <int D>
__host__ __device__ constexpr int ab_row_bytes() {
    return (D + 8) * 2;
}

// Rows [n0, n0 + R) of a [N, D] matrix (row stride sr) into a padded tile; rows >= N zero-filled.
template <int D, int R>
__device__ __forceinline__ void ab_load_tile(unsigned tile, const unsigned short* base, long long sr, int n0, int N) {
    static_assert(R * (D / 8) % AB_THREADS == 0, "whole copies per thread");
#pragma unroll
    for (int i = 0; i < R * (D / 8) / AB_THREADS; ++i) {
        const int c = threadIdx.x + i * AB_THREADS;
        const int r = c / (D / 8), ch = c % (D / 8);
        const int row = n0 + r;
        const bool in = row < N;
        const unsigned short* src = in ? base + (long long)row * sr + ch * 8 : base;
        ab_cp16(tile + r * ab_row_bytes<D>() + ch * 16, src, in ? 16 : 0);
    }
}

// A-operand fragments (16 rows x D) of rows r0 and r0 + 8 of a [N, D] matrix (row stride sr),
// read from global memory: f[ks][0] (row, k lo), [1] (row + 8, k lo), [2] (row, k hi), [3]
// (row + 8, k hi); rows >= N are 0.
template <int D>
__device__ __forceinline__ void ab_frag_a(unsigned (&f)[D / 16][4], const unsigned short* base, long long sr, int r0,
                                          int N, int quad) {
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            const int row = r0 + 8 * (x & 1);
            const int col = 16 * ks + 8 * (x >> 1) + 2 * quad;
            f[ks][x] = row < N ? *reinterpret_cast<const unsigned*>(base + (long long)row * sr + col) : 0u;
        }
}

// The A operand of one k step (16 rows x 16): from registers (fragments of ab_frag_a) ...
template <int KS>
struct AbRegA {
    const unsigned (&f)[KS][4];
    __device__ __forceinline__ void get(int ks, unsigned (&a)[4]) const {
#pragma unroll
        for (int x = 0; x < 4; ++x) a[x] = f[ks][x];
    }
};
// ... or from a padded shared tile [row][k] through ldmatrix: `addr` is the warp's first row
// plus ab_lane_off_t (matrix mi of the x4 holds rows 8 (mi & 1) .., k 8 (mi >> 1) ..: the
// registers come out in the A fragment's order).
struct AbSmemA {
    unsigned addr;
    __device__ __forceinline__ void get(int ks, unsigned (&a)[4]) const { ldsm_x4(addr + ks * 32, a[0], a[1], a[2], a[3]); }
};

// acc[NB][4] (16 rows x 8 NB columns) = A (16 x 16 KS) times the transpose of a tile's 8 NB rows
// (the tile stored [n][k], ldmatrix non-transposed): acc[n] covers columns 8 n .. 8 n + 7.
template <class E, int KS, int NB, int RB, class A>
__device__ __forceinline__ void ab_mul_bt(float (&acc)[NB][4], const A& a, unsigned tile, unsigned lane_off) {
#pragma unroll
    for (int n = 0; n < NB; ++n)
#pragma unroll
        for (int x = 0; x < 4; ++x) acc[n][x] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
        unsigned af[4];
        a.get(ks, af);
#pragma unroll
        for (int p = 0; p < NB / 2; ++p) {
            unsigned b0, b1, b2, b3;
            ldsm_x4(tile + lane_off + p * 16 * RB + ks * 32, b0, b1, b2, b3);
            E::mma(acc[2 * p], af, b0, b1);
            E::mma(acc[2 * p + 1], af, b2, b3);
        }
    }
}

// P (16 x 16 KB, as the f32 accumulator layout of ab_mul_bt) rounded into A-operand fragments:
// pa[kb][x] holds row 8 (x & 1) and columns 16 kb + 8 (x >> 1) + 2 quad, + 1.
template <class E, int KB>
__device__ __forceinline__ void ab_pack_a(unsigned (&pa)[KB][4], const float (&p)[2 * KB][4]) {
#pragma unroll
    for (int kb = 0; kb < KB; ++kb) {
        pa[kb][0] = E::pack(p[2 * kb][0], p[2 * kb][1]);
        pa[kb][1] = E::pack(p[2 * kb][2], p[2 * kb][3]);
        pa[kb][2] = E::pack(p[2 * kb + 1][0], p[2 * kb + 1][1]);
        pa[kb][3] = E::pack(p[2 * kb + 1][2], p[2 * kb + 1][3]);
    }
}

// acc[ND][4] (16 x 8 ND) += P (16 x 16 KB, packed by ab_pack_a) times a tile's 16 KB rows (stored
// [k][n], ldmatrix transposed).
template <class E, int KB, int ND, int RB>
__device__ __forceinline__ void ab_mul_acc_packed(float (&acc)[ND][4], const unsigned (&pa)[KB][4], unsigned tile,
                                                  unsigned lane_off_t) {
#pragma unroll
    for (int kb = 0; kb < KB; ++kb)
#pragma unroll
        for (int q = 0; q < ND / 2; ++q) {
            unsigned b0, b1, b2, b3;
            ldsm_x4_t(tile + lane_off_t + kb * 16 * RB + q * 32, b0, b1, b2, b3);
            E::mma(acc[2 * q], pa[kb], b0, b1);
            E::mma(acc[2 * q + 1], pa[kb], b2, b3);
        }
}

// acc[ND][4] (16 x 8 ND) += P (16 x 16 KB, as the f32 accumulator layout of ab_mul_bt) times a
// tile's 16 KB rows (stored [k][n], ldmatrix transposed).
template <class E, int KB, int ND, int RB>
__device__ __forceinline__ void ab_mul_acc(float (&acc)[ND][4], const float (&p)[2 * KB][4], unsigned tile,
                                           unsigned lane_off_t) {
    unsigned pa[KB][4];
    ab_pack_a<E, KB>(pa, p);
    ab_mul_acc_packed<E, KB, ND, RB>(acc, pa, tile, lane_off_t);
}

// Rows r0, r0 + 8 (< N) of acc * mul, rounded, into the [.., D] rows at `base`, `sr` apart.
template <class E, int D>
__device__ __forceinline__ void ab_store(const float (&acc)[D / 8][4], unsigned short* base, long long sr, int r0,
                                         int N, float mul, int quad) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
        const int row = r0 + 8 * rr;
        if (row >= N) continue;
        unsigned short* p = base + row * sr;
#pragma unroll
        for (int n = 0; n < D / 8; ++n)
            *reinterpret_cast<unsigned*>(p + 8 * n + 2 * quad) = E::pack(acc[n][2 * rr] * mul, acc[n][2 * rr + 1] * mul);
    }
}

// The per-lane ldmatrix byte offsets in a tile of RB-byte rows: non-transposed (rows = n) and
// transposed (rows = k; also the A operand read from [row][k]).
template <int RB>
__device__ __forceinline__ unsigned ab_lane_off(int lane) {
    const int mi = lane / 8, mr = lane % 8;
    return ((mi >> 1) * 8 + mr) * RB + (mi & 1) * 16;
}
template <int RB>
__device__ __forceinline__ unsigned ab_lane_off_t(int lane) {
    const int mi = lane / 8, mr = lane % 8;
    return ((mi & 1) * 8 + mr) * RB + (mi >> 1) * 16;
}

// The fused backward's dQ step: acc[DC / 8][4] = dS (query rows 16 mb .. 16 mb + 15 of the tile, all
// AB_ROWS keys of the CTA) times K (those keys, columns c0 .. c0 + DC - 1). dS is read from the
// dS^T tile (stored [key][query], RBS-byte rows: ldmatrix transposed gives the A fragment, lane
// offsets as ab_lane_off: matrix mi holds keys 8 (mi >> 1) .., queries 8 (mi & 1) ..), K from the
// CTA's K tile (stored [key][d], RB-byte rows: the B operand through ldmatrix transposed).
template <class E, int DC, int RBS, int RB>
__device__ __forceinline__ void ab_dq_part(float (&acc)[DC / 8][4], unsigned ds_tile, unsigned k_tile, int mb, int c0,
                                           int lane) {
#pragma unroll
    for (int n = 0; n < DC / 8; ++n)
#pragma unroll
        for (int x = 0; x < 4; ++x) acc[n][x] = 0.0f;
    const unsigned a_lane = ds_tile + ab_lane_off<RBS>(lane) + mb * 32;
    const unsigned b_lane = k_tile + ab_lane_off_t<RB>(lane) + c0 * 2;
#pragma unroll
    for (int ks = 0; ks < AB_ROWS / 16; ++ks) {
        unsigned a[4];
        ldsm_x4_t(a_lane + ks * 16 * RBS, a[0], a[1], a[2], a[3]);
#pragma unroll
        for (int q = 0; q < DC / 16; ++q) {
            unsigned b0, b1, b2, b3;
            ldsm_x4_t(b_lane + ks * 16 * RB + q * 32, b0, b1, b2, b3);
            E::mma(acc[2 * q], a, b0, b1);
            E::mma(acc[2 * q + 1], a, b2, b3);
        }
    }
}

// dQ for the CTA's 64 query rows, stepping over K/V tiles of BN keys held in NBUF buffers (1: the
// plain pipeline; 2: tile j + 1 in flight during tile j's math).
template <class E, int D, int BN, int NBUF>
__device__ __forceinline__ void attn_bwd_dq_mma(const unsigned short* __restrict__ q, const unsigned short* __restrict__ k,
                                                const unsigned short* __restrict__ v,
                                                const unsigned short* __restrict__ dout, const float* __restrict__ lse,
                                                const float* __restrict__ delta, unsigned short* __restrict__ dq, int B,
                                                int H, int Nq, int Nk, long long q_sb, long long q_sh, long long q_sr,
                                                long long k_sb, long long k_sh, long long k_sr, long long v_sb,
                                                long long v_sh, long long v_sr, long long do_sb, long long do_sh,
                                                long long do_sr, long long g_sb, long long g_sh, long long g_sr,
                                                float scale, int causal) {
    constexpr int RB = ab_row_bytes<D>(), TILE = BN * RB, KS = D / 16, ND = D / 8, NB = BN / 8;
    static_assert(NBUF == 1 || NBUF == 2, "one or two buffers");
    // Buffer i: K at 2 i TILE, V after it.
    __shared__ __align__(16) unsigned char smem[NBUF * 2 * TILE];
    const unsigned base = smem_u32(smem);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, quad = lane % 4;
    const float LOG2E = 1.4426950408889634f, sl2 = scale * LOG2E;
    const unsigned off = ab_lane_off<RB>(lane), off_t = ab_lane_off_t<RB>(lane);
    const int n_qt = (Nq + AB_ROWS - 1) / AB_ROWS;
    const long long tiles = (long long)B * H * n_qt;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long bh = t / n_qt;
        const int qt = n_qt - 1 - (int)(t - bh * n_qt);
        const int b = (int)(bh / H), h = (int)(bh - (long long)b * H);
        const int m0 = qt * AB_ROWS;
        const unsigned short* qb = q + b * q_sb + h * q_sh;
        const unsigned short* kb = k + b * k_sb + h * k_sh;
        const unsigned short* vb = v + b * v_sb + h * v_sh;
        const unsigned short* dob = dout + b * do_sb + h * do_sh;
        int kv_end = Nk;
        if (causal) {
            const long long e = (long long)m0 + AB_ROWS + Nk - Nq;
            kv_end = e <= 0 ? 0 : (e >= Nk ? Nk : (int)e);
        }
        const int n_kt = (kv_end + BN - 1) / BN;
        const int r0 = m0 + warp * 16 + lane / 4;
        unsigned qa[KS][4], da[KS][4];
        ab_frag_a<D>(qa, qb, q_sr, r0, Nq, quad);
        ab_frag_a<D>(da, dob, do_sr, r0, Nq, quad);
        float l2[2], dl[2];
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
            const int row = r0 + 8 * rr;
            l2[rr] = row < Nq ? lse[bh * Nq + row] * LOG2E : 0.0f;
            dl[rr] = row < Nq ? delta[bh * Nq + row] : 0.0f;
        }
        float acc[ND][4];
#pragma unroll
        for (int n = 0; n < ND; ++n)
#pragma unroll
            for (int x = 0; x < 4; ++x) acc[n][x] = 0.0f;

        __syncthreads();  // the previous tile's shared reads are done
        if (n_kt > 0) {
            ab_load_tile<D, BN>(base, kb, k_sr, 0, Nk);
            ab_load_tile<D, BN>(base + TILE, vb, v_sr, 0, Nk);
        }
        ab_commit();
        for (int kt = 0; kt < n_kt; ++kt) {
            const int n0 = kt * BN;
            const unsigned k_tile = base + (kt % NBUF) * 2 * TILE, v_tile = k_tile + TILE;
            ab_wait_all();
            __syncthreads();  // tile kt is visible; with 2 buffers, every warp is done with tile kt - 1
            if (NBUF == 2) {
                if (kt + 1 < n_kt) {
                    const unsigned nk = base + ((kt + 1) % NBUF) * 2 * TILE;
                    ab_load_tile<D, BN>(nk, kb, k_sr, n0 + BN, Nk);
                    ab_load_tile<D, BN>(nk + TILE, vb, v_sr, n0 + BN, Nk);
                }
                ab_commit();
            }
            float s[NB][4], dp[NB][4];
            ab_mul_bt<E, KS, NB, RB>(s, AbRegA<KS>{qa}, k_tile, off);   // S = Q K^T
            ab_mul_bt<E, KS, NB, RB>(dp, AbRegA<KS>{da}, v_tile, off);  // dP = dO V^T
            // dS = P (dP - delta), P = exp2(S sl2 - lse log2 e) where key n0 + 8 n + 2 quad + c is
            // seen by row r0 + 8 rr (rows past Nq, and rows that see no key, get P = 0).
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {
                const int row = r0 + 8 * rr;
                const long long limit = causal ? (long long)row + Nk - Nq : (long long)Nk;
#pragma unroll
                for (int n = 0; n < NB; ++n)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const int key = n0 + 8 * n + 2 * quad + c;
                        const bool vis = row < Nq && key < Nk && (long long)key <= limit;
                        const float p = vis ? exp2f(s[n][2 * rr + c] * sl2 - l2[rr]) : 0.0f;
                        s[n][2 * rr + c] = p * (dp[n][2 * rr + c] - dl[rr]);
                    }
            }
            ab_mul_acc<E, BN / 16, ND, RB>(acc, s, k_tile, off_t);  // dQ += dS K
            if (NBUF == 1) {
                __syncthreads();  // every warp is done with K and V
                if (kt + 1 < n_kt) {
                    ab_load_tile<D, BN>(base, kb, k_sr, n0 + BN, Nk);
                    ab_load_tile<D, BN>(base + TILE, vb, v_sr, n0 + BN, Nk);
                }
                ab_commit();
            }
        }
        ab_wait_all();
        ab_store<E, D>(acc, dq + b * g_sb + h * g_sh, g_sr, r0, Nq, scale, quad);
    }
}

// dK and dV for the CTA's 64 key rows, stepping over Q/dO tiles of BM queries held in NBUF
// buffers (as the dq kernel's). KV_SMEM: the K and V rows (A operands of S^T and dP^T) are read
// from ab_kv_smem (copied once per CTA tile) instead of held in registers.
// FUSED (FlashAttention-2's backward in one pass): also dQ, without recomputing anything. Each Q
// tile's dS^T (64 keys x BM queries, rounded as for dK) goes to a shared tile; after a barrier
// every warp multiplies its share of dS (BM queries x 64 keys) by the CTA's K rows (in shared
// memory: ab_kv_smem at D = 128, a static tile otherwise, where K is then read from it for S^T too)
// and adds the result into dq_acc (f32, dense [B, H, Nq, D], zeroed before the launch; unscaled:
// attn_bwd_dq_convert multiplies by `scale` and rounds) with red.global.add.f32. The CTAs of
// one (b, h) add into the same rows in an order that varies run to run: dq_acc (and dq) is not
// bitwise deterministic; dk and dv still are.
template <class E, int D, int BM, int NBUF, bool KV_SMEM, bool FUSED>
__device__ __forceinline__ void attn_bwd_dkdv_mma(
    const unsigned short* __restrict__ q, const unsigned short* __restrict__ k, const unsigned short* __restrict__ v,
    const unsigned short* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ delta,
    float* __restrict__ dq_acc, unsigned short* __restrict__ dk, unsigned short* __restrict__ dv, int B, int H, int Nq,
    int Nk, long long q_sb, long long q_sh, long long q_sr, long long k_sb, long long k_sh, long long k_sr,
    long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh, long long do_sr, long long dk_sb,
    long long dk_sh, long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr, long long dv_at, float scale,
    int causal) {
    constexpr int RB = ab_row_bytes<D>(), TILE = BM * RB, KV_TILE = AB_ROWS * RB;
    constexpr int KS = D / 16, ND = D / 8, NB = BM / 8;
    static_assert(NBUF == 1 || NBUF == 2, "one or two buffers");
    static_assert(!KV_SMEM || 2 * KV_TILE == AB_DKDV128_DYN_SMEM, "the size the op launches with");
    // FUSED: the dS^T tile (AB_ROWS keys x BM queries, RBS-byte rows: the 16-byte pad spreads an
    // ldmatrix phase's 8 rows over 8 bank groups), and (!KV_SMEM) the K tile.
    constexpr int RBS = (BM + 8) * 2, DS_BYTES = FUSED ? AB_ROWS * RBS : 0;
    constexpr int KS_BYTES = FUSED && !KV_SMEM ? KV_TILE : 0;
    constexpr bool K_SMEM = KV_SMEM || FUSED;  // K's A operand read from shared memory
    // Buffer i: Q at 2 i TILE, dO after it; lse (times log2 e) and delta of its queries. Then
    // (FUSED) the dS^T tile and (FUSED, !KV_SMEM) the K tile.
    __shared__ __align__(16) unsigned char smem[NBUF * 2 * TILE + DS_BYTES + KS_BYTES];
    __shared__ float lse_s[NBUF][BM], delta_s[NBUF][BM];
    const unsigned base = smem_u32(smem);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, quad = lane % 4;
    const float LOG2E = 1.4426950408889634f, sl2 = scale * LOG2E;
    const unsigned off = ab_lane_off<RB>(lane), off_t = ab_lane_off_t<RB>(lane);
    // KV_SMEM: the K and V tiles in ab_kv_smem (V KV_TILE after K); else (FUSED) K in `smem`.
    const unsigned kv_tile = KV_SMEM ? smem_u32(ab_kv_smem) : 0u;
    const unsigned ds_tile = base + NBUF * 2 * TILE;
    const unsigned k_tile = KV_SMEM ? kv_tile : ds_tile + DS_BYTES;
    // K_SMEM: this warp's K rows (KV_SMEM: V rows KV_TILE after) as ldmatrix A-operand addresses.
    const unsigned ka_s = k_tile + warp * 16 * RB + off_t;
    const int n_kt = (Nk + AB_ROWS - 1) / AB_ROWS;
    const long long tiles = (long long)B * H * n_kt;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const long long bh = t / n_kt;
        const int kt = (int)(t - bh * n_kt);  // causal: the first key tiles see the most queries
        const int b = (int)(bh / H), h = (int)(bh - (long long)b * H);
        const int n0 = kt * AB_ROWS;
        const unsigned short* qb = q + b * q_sb + h * q_sh;
        const unsigned short* kb = k + b * k_sb + h * k_sh;
        const unsigned short* vb = v + b * v_sb + h * v_sh;
        const unsigned short* dob = dout + b * do_sb + h * do_sh;
        const float* lb = lse + bh * Nq;
        const float* db = delta + bh * Nq;
        int q_start = 0;  // the first query that sees key n0
        if (causal) {
            const long long s0 = (long long)n0 - ((long long)Nk - Nq);
            q_start = s0 <= 0 ? 0 : (s0 >= Nq ? Nq : (int)s0);
        }
        const int qt0 = q_start / BM, n_qt = (Nq + BM - 1) / BM;
        const int c0 = n0 + warp * 16 + lane / 4;  // this thread's key rows c0, c0 + 8
        unsigned ka[KS][4], va[KS][4];  // !K_SMEM, !KV_SMEM: the K, V fragments of rows c0, c0 + 8
        if constexpr (!K_SMEM) ab_frag_a<D>(ka, kb, k_sr, c0, Nk, quad);
        if constexpr (!KV_SMEM) ab_frag_a<D>(va, vb, v_sr, c0, Nk, quad);
        float gk[ND][4], gv[ND][4];
#pragma unroll
        for (int n = 0; n < ND; ++n)
#pragma unroll
            for (int x = 0; x < 4; ++x) gk[n][x] = gv[n][x] = 0.0f;

        // Q/dO tile `qt` (with its lse and delta) into buffer `buf`.
        auto load_q = [&](int qt, int buf) {
            const int m0 = qt * BM;
            ab_load_tile<D, BM>(base + buf * 2 * TILE, qb, q_sr, m0, Nq);
            ab_load_tile<D, BM>(base + buf * 2 * TILE + TILE, dob, do_sr, m0, Nq);
            if (threadIdx.x < BM) {
                const int row = m0 + threadIdx.x;
                lse_s[buf][threadIdx.x] = row < Nq ? lb[row] * LOG2E : 0.0f;
                delta_s[buf][threadIdx.x] = row < Nq ? db[row] : 0.0f;
            }
        };
        __syncthreads();  // the previous tile's shared reads are done
        if (K_SMEM && qt0 < n_qt) ab_load_tile<D, AB_ROWS>(k_tile, kb, k_sr, n0, Nk);
        if (KV_SMEM && qt0 < n_qt) ab_load_tile<D, AB_ROWS>(kv_tile + KV_TILE, vb, v_sr, n0, Nk);
        if (qt0 < n_qt) load_q(qt0, 0);
        ab_commit();
        for (int qt = qt0; qt < n_qt; ++qt) {
            const int m0 = qt * BM, buf = (qt - qt0) % NBUF;
            const unsigned q_tile = base + buf * 2 * TILE, do_tile = q_tile + TILE;
            ab_wait_all();
            __syncthreads();  // tile qt is visible; with 2 buffers, every warp is done with tile qt - 1
            if (NBUF == 2) {
                if (qt + 1 < n_qt) load_q(qt + 1, (qt + 1 - qt0) % NBUF);
                ab_commit();
            }
            float s[NB][4], dp[NB][4];
            if constexpr (K_SMEM) ab_mul_bt<E, KS, NB, RB>(s, AbSmemA{ka_s}, q_tile, off);  // S^T = K Q^T
            else ab_mul_bt<E, KS, NB, RB>(s, AbRegA<KS>{ka}, q_tile, off);
            if constexpr (KV_SMEM) ab_mul_bt<E, KS, NB, RB>(dp, AbSmemA{ka_s + KV_TILE}, do_tile, off);  // dP^T = V dO^T
            else ab_mul_bt<E, KS, NB, RB>(dp, AbRegA<KS>{va}, do_tile, off);
            // s[n][2 rr + c]: key c0 + 8 rr, query m0 + 8 n + 2 quad + c. P^T where the query sees
            // the key (and both exist), else 0; dS^T = P^T (dP^T - delta[query]).
#pragma unroll
            for (int n = 0; n < NB; ++n)
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const int qi = 8 * n + 2 * quad + c;
                    const int query = m0 + qi;
                    const float l2 = lse_s[buf][qi], dl = delta_s[buf][qi];
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
            if constexpr (FUSED) {
                // dS^T, rounded once, into the shared tile (this warp's 16 key rows; pa[kb][x]: key
                // row 8 (x & 1), queries 16 kb + 8 (x >> 1) + 2 quad, + 1) and into dK += dS^T Q.
                unsigned pa[BM / 16][4];
                ab_pack_a<E, BM / 16>(pa, dp);
                const unsigned ds_row = ds_tile + (warp * 16 + lane / 4) * RBS + quad * 4;
#pragma unroll
                for (int kb = 0; kb < BM / 16; ++kb)
#pragma unroll
                    for (int x = 0; x < 4; ++x) ab_sts32(ds_row + 8 * (x & 1) * RBS + (16 * kb + 8 * (x >> 1)) * 2, pa[kb][x]);
                ab_mul_acc<E, BM / 16, ND, RB>(gv, s, do_tile, off_t);         // dV += P^T dO
                ab_mul_acc_packed<E, BM / 16, ND, RB>(gk, pa, q_tile, off_t);  // dK += dS^T Q
                __syncthreads();  // the whole dS^T tile is visible
                // dQ (BM x D) += dS K: warp w takes query rows 16 (w % MB) .. + 15 and columns
                // DC (w / MB) .. + DC - 1. Warps whose rows are all past Nq, or (causal) see none
                // of the CTA's keys (dS = 0 there), skip it; the whole warp decides alike.
                constexpr int MB = BM / 16, DC = D * MB / 4;
                static_assert(4 % MB == 0 && DC % 16 == 0, "the warps split the dQ tile evenly");
                const int mb = warp % MB, dc0 = (warp / MB) * DC, r_first = m0 + 16 * mb;
                const bool some = r_first < Nq && (!causal || (long long)r_first + 15 + Nk - Nq >= (long long)n0);
                if (some) {
                    float acc[DC / 8][4];
                    ab_dq_part<E, DC, RBS, RB>(acc, ds_tile, k_tile, mb, dc0, lane);
#pragma unroll
                    for (int rr = 0; rr < 2; ++rr) {
                        const int row = r_first + lane / 4 + 8 * rr;
                        if (row >= Nq) continue;
                        float* p = dq_acc + (bh * Nq + row) * D + dc0 + 2 * quad;
#pragma unroll
                        for (int n = 0; n < DC / 8; ++n) {
                            ab_red_add(p + 8 * n, acc[n][2 * rr]);
                            ab_red_add(p + 8 * n + 1, acc[n][2 * rr + 1]);
                        }
                    }
                }
                // The next writes of the dS^T tile follow the barrier at the top of the next
                // tile (or, one buffer, the one below), which every warp reaches after its reads.
            } else {
                ab_mul_acc<E, BM / 16, ND, RB>(gv, s, do_tile, off_t);  // dV += P^T dO
                ab_mul_acc<E, BM / 16, ND, RB>(gk, dp, q_tile, off_t);  // dK += dS^T Q
            }
            if (NBUF == 1) {
                __syncthreads();  // every warp is done with the tiles
                if (qt + 1 < n_qt) load_q(qt + 1, 0);
                ab_commit();
            }
        }
        ab_wait_all();
        ab_store<E, D>(gk, dk + b * dk_sb + h * dk_sh, dk_sr, c0, Nk, scale, quad);
        ab_store<E, D>(gv, (dv_at >= 0 ? dk + dv_at : dv) + b * dv_sb + h * dv_sh, dv_sr, c0, Nk, 1.0f, quad);
    }
}

// The entry points (signatures as attention.cu's attn_bwd_dq_<dt> / attn_bwd_dkdv_<dt>; D is
// the kernel's own). Template arguments: <element, D, rows per tile, buffers[, K/V in shared, fused dQ]>.
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_mma_d64_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, const bf16_t* dout, const float* lse, const float* delta,
    bf16_t* dq, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb,
    long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq_mma<MmBF16, 64, 64, 1>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh,
                                      k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, g_sb, g_sh, g_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_mma_d64_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, const f16_t* dout, const float* lse, const float* delta,
    f16_t* dq, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb,
    long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq_mma<MmF16, 64, 64, 1>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh,
                                      k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, g_sb, g_sh, g_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv_mma_d64_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, const bf16_t* dout, const float* lse, const float* delta,
    bf16_t* dk, bf16_t* dv, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr,
    long long k_sb, long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh, long long do_sr,
    long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr,
    long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_mma<MmBF16, 64, 64, 1, false, false>(q, k, v, dout, lse, delta, nullptr, dk, dv, B, H, Nq, Nk, q_sb, q_sh, q_sr,
                                                k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv_mma_d64_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, const f16_t* dout, const float* lse, const float* delta,
    f16_t* dk, f16_t* dv, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr,
    long long k_sb, long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh, long long do_sr,
    long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr,
    long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_mma<MmF16, 64, 64, 1, false, false>(q, k, v, dout, lse, delta, nullptr, dk, dv, B, H, Nq, Nk, q_sb, q_sh, q_sr,
                                                k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_mma_d128_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, const bf16_t* dout, const float* lse, const float* delta,
    bf16_t* dq, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb,
    long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq_mma<MmBF16, 128, 32, 2>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh,
                                      k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, g_sb, g_sh, g_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dq_mma_d128_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, const f16_t* dout, const float* lse, const float* delta,
    f16_t* dq, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr, long long k_sb,
    long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh,
    long long do_sr, long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq_mma<MmF16, 128, 32, 2>(q, k, v, dout, lse, delta, dq, B, H, Nq, Nk, q_sb, q_sh, q_sr, k_sb, k_sh,
                                      k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, g_sb, g_sh, g_sr, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv_mma_d128_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, const bf16_t* dout, const float* lse, const float* delta,
    bf16_t* dk, bf16_t* dv, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr,
    long long k_sb, long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh, long long do_sr,
    long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr,
    long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_mma<MmBF16, 128, 32, 2, true, false>(q, k, v, dout, lse, delta, nullptr, dk, dv, B, H, Nq, Nk, q_sb, q_sh, q_sr,
                                                k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_dkdv_mma_d128_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, const f16_t* dout, const float* lse, const float* delta,
    f16_t* dk, f16_t* dv, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr,
    long long k_sb, long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh, long long do_sr,
    long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr,
    long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_mma<MmF16, 128, 32, 2, true, false>(q, k, v, dout, lse, delta, nullptr, dk, dv, B, H, Nq, Nk, q_sb, q_sh, q_sr,
                                                k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal);
}

// The fused backward (attn_bwd_dkdv_mma's FUSED): dk and dv as attn_bwd_dkdv_mma_*, and dQ added
// into dq_acc (f32, dense [B, H, Nq, D], zero before the launch, unscaled) with f32 atomics;
// attn_bwd_dq_convert_<dt> then writes dq. Same tiles and shared memory as the dk/dv kernel of
// the head dimension, plus the dS^T tile (and, D = 64, a K tile): static shared memory
// 37,376 B at D = 64; 40,448 B + AB_DKDV128_DYN_SMEM dynamic at D = 128.
extern "C" __global__ void __launch_bounds__(128) attn_bwd_fused_mma_d64_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, const bf16_t* dout, const float* lse, const float* delta, float* dq_acc,
    bf16_t* dk, bf16_t* dv, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr,
    long long k_sb, long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh, long long do_sr,
    long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr,
    long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_mma<MmBF16, 64, 64, 1, false, true>(q, k, v, dout, lse, delta, dq_acc, dk, dv, B, H, Nq, Nk, q_sb,
                                                   q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_fused_mma_d64_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, const f16_t* dout, const float* lse, const float* delta, float* dq_acc,
    f16_t* dk, f16_t* dv, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr,
    long long k_sb, long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh, long long do_sr,
    long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr,
    long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_mma<MmF16, 64, 64, 1, false, true>(q, k, v, dout, lse, delta, dq_acc, dk, dv, B, H, Nq, Nk, q_sb,
                                                   q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_fused_mma_d128_bf16(
    const bf16_t* q, const bf16_t* k, const bf16_t* v, const bf16_t* dout, const float* lse, const float* delta, float* dq_acc,
    bf16_t* dk, bf16_t* dv, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr,
    long long k_sb, long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh, long long do_sr,
    long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr,
    long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_mma<MmBF16, 128, 32, 2, true, true>(q, k, v, dout, lse, delta, dq_acc, dk, dv, B, H, Nq, Nk, q_sb,
                                                   q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal);
}
extern "C" __global__ void __launch_bounds__(128) attn_bwd_fused_mma_d128_f16(
    const f16_t* q, const f16_t* k, const f16_t* v, const f16_t* dout, const float* lse, const float* delta, float* dq_acc,
    f16_t* dk, f16_t* dv, int B, int H, int Nq, int Nk, int D, long long q_sb, long long q_sh, long long q_sr,
    long long k_sb, long long k_sh, long long k_sr, long long v_sb, long long v_sh, long long v_sr, long long do_sb, long long do_sh, long long do_sr,
    long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr,
    long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_mma<MmF16, 128, 32, 2, true, true>(q, k, v, dout, lse, delta, dq_acc, dk, dv, B, H, Nq, Nk, q_sb,
                                                   q_sh, q_sr, k_sb, k_sh, k_sr, v_sb, v_sh, v_sr, do_sb, do_sh, do_sr, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal);
}

// dq = round(acc * scale), 4 elements at a time (f32 in, 4 x 16-bit out): the fused backward's
// last step. acc is dense [B, H, Nq, D] (16-byte aligned), dq the [B, H, Nq, D] view with
// strides (g_sb, g_sh, g_sr; unit last) whose groups of 4 are 8-byte aligned (D and the strides
// multiples of 4, dq 8-byte aligned); any block size and grid (grid-stride over the
// B * H * Nq * D / 4 groups).
template <class E>
__device__ __forceinline__ void attn_bwd_dq_convert(const float* __restrict__ acc, unsigned short* __restrict__ dq,
                                                    int B, int H, int Nq, int D, long long g_sb, long long g_sh,
                                                    long long g_sr, float scale) {
    const long long step = (long long)gridDim.x * blockDim.x;
    const int d4 = D / 4;
    const long long n4 = (long long)B * H * Nq * d4;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += step) {
        const float4 a = reinterpret_cast<const float4*>(acc)[i];
        const long long r = i / d4;
        const int c = (int)(i - r * d4) * 4;
        const long long bh = r / Nq;
        const int row = (int)(r - bh * Nq), b = (int)(bh / H), h = (int)(bh - (long long)b * H);
        uint2 o;
        o.x = E::pack(a.x * scale, a.y * scale);
        o.y = E::pack(a.z * scale, a.w * scale);
        *reinterpret_cast<uint2*>(dq + b * g_sb + h * g_sh + row * g_sr + c) = o;
    }
}
extern "C" __global__ void attn_bwd_dq_convert_bf16(const float* acc, bf16_t* dq, int B, int H, int Nq, int D,
                                                    long long g_sb, long long g_sh, long long g_sr, float scale) {
    attn_bwd_dq_convert<MmBF16>(acc, dq, B, H, Nq, D, g_sb, g_sh, g_sr, scale);
}
extern "C" __global__ void attn_bwd_dq_convert_f16(const float* acc, f16_t* dq, int B, int H, int Nq, int D,
                                                   long long g_sb, long long g_sh, long long g_sr, float scale) {
    attn_bwd_dq_convert<MmF16>(acc, dq, B, H, Nq, D, g_sb, g_sh, g_sr, scale);
}
