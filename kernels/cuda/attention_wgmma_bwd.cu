// attention_wgmma_bwd.cu — the fused attention backward on Hopper (FlashAttention-3's building
// blocks: TMA copies, warpgroup MMA, a producer warpgroup and two consumer warpgroups), f16 / bf16
// with f32 accumulation, head dimensions 64 and 128. Same semantics as attention_mma_bwd.cu's
// attn_bwd_dq_mma_* and attn_bwd_dkdv_mma_* (and attention.cu's SIMT backward): P is recomputed
// from the forward's row log-sum-exp, delta = rowsum(dout * out) comes from attention.cu's
// attn_bwd_delta_<dt>; dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO with dS = P (dP - delta),
// dP = dO V^T; bottom-right aligned causal mask (query i sees key j iff j <= i + Nk - Nq); a query
// row that sees no key (lse = -inf) contributes nothing.
//
// gen-ptx: archs=90a
//
// Host contract (kernels/src/ops/attention/bwd_wgmma.rs checks it before every launch):
//   * block ABW_THREADS (384) exactly, any grid >= 1 (grid-stride loops over the tiles: dq over
//     B * H * ceil(Nq / 128) query tiles, dkdv over B * H * ceil(Nk / 128) key tiles), dynamic
//     shared memory ABW_DQ_SMEM_BYTES(D) / ABW_KV_SMEM_BYTES(D) (the function's limit raised);
//   * tmQ, tmK, tmV, tmdO: 4-D tensor maps over q, k, v and dout with dims {D, N, H, B} (N = Nq
//     for q and dout, Nk for k and v), the views' row, head and batch strides (bytes, multiples
//     of 16), box {64, 64, 1, 1}, 128-byte swizzle, zero fill outside; Nq >= 1 and Nk >= 1 (the
//     maps need extents of at least one: the op serves Nq == 0 or Nk == 0 elsewhere);
//   * lse, delta dense [B, H, Nq] (f32); dq the [B, H, Nq, D] view with element strides g_sb,
//     g_sh, g_sr, dk and dv [B, H, Nk, D] views with dk_s*, dv_s* (unit last strides; the op asks
//     for 16-byte aligned buffers and strides multiples of 8), so that they can be slices of a
//     packed [B, N, 3, H, D] gradient (dv_at >= 0: dv's view starts dv_at elements past dk's
//     first element and dv is not accessed; < 0: at dv); 4-byte aligned rows. q, k, v, dout are passed too (the kernels read only through the maps)
//     so that a launch orders their buffers.
//
// Two kernels, no atomics (the same bits every run; issue 33 wants bit-identical loss curves):
//   * attn_bwd_dkdv_wgmma_*: a CTA owns 128 keys of one (b, h); consumer warpgroup c (1, 2) owns
//     keys 64 (c - 1) .. + 63 (K and V rows in shared memory, loaded once per CTA tile). It walks
//     the query tiles of ABW_KV_BM(D) = 64 rows from the first that sees the CTA's first key; the
//     producer streams Q and dO tiles through a ring of ABW_KV_STAGES(D) stages (one thread drives
//     the copy engine; one warp copies that tile's lse (times log2 e; +inf past Nq or where it is
//     -inf, so P = 0 there) and delta into the stage). Per query tile: S^T = K Q^T and
//     dP^T = V dO^T (wgmma m64n64k16, both operands in shared memory, K-major), P^T =
//     exp2(S^T scale log2 e - lse log2 e), dS^T = P^T (dP^T - delta) on the accumulators in
//     registers; then dV += P^T dO and dK += dS^T Q (wgmma m64nDk16 with the A operand from
//     registers: the accumulator layout of two n8 blocks is one k16 step of A; dO and Q read
//     N-major, the transpose bit). dK (times scale) and dV are rounded once and stored from the
//     registers. At D = 64 (ABW_KV_OVERLAP) dV, dK += ... of one query tile stay in flight while
//     the next tile's S^T, dP^T are issued, and the two consumers take turns (ABW_KV_TURNS,
//     warpgroup_turns.cuh): a turn is one tile's dV, dK += ... then the next tile's S^T, dP^T.
//   * attn_bwd_dq_wgmma_*: a CTA owns 128 query rows (64 per consumer warpgroup; Q and dO tiles
//     in shared memory, loaded once per CTA tile); K and V tiles of ABW_DQ_BN = 64 keys stream
//     through a ring of ABW_DQ_STAGES(D) stages (separate K and V barriers, as the forward's).
//     Per key tile: S = Q K^T, dP = dO V^T (shared operands), P and dS in registers, then
//     dQ += dS K (A from registers, K N-major). dQ += dS K of tile j stays in flight while the
//     warpgroup issues tile j + 1's S and dP.
// Why two kernels and not FlashAttention-3's one pass with dQ added into an f32 buffer: the adds
// of the key tiles into one query row must come in a fixed order to be deterministic (FA3's
// deterministic mode makes each CTA wait on a per-query-tile counter), which serialises the key
// tiles of a head and needs a zeroed B*H*Nq*D f32 workspace plus a conversion pass; the mma.sync
// fused pass (atomics in any order) already lost to the two kernels on an H100 (kernels/TUNING.md).
// The dQ kernel repeats S, P and dP (7 GEMMs in all instead of 5) but needs no workspace, no
// ordering between CTAs, and keeps every wgmma on a CTA-uniform path.
//
// Rules learnt on the forward (kernels/TUNING.md, "Forward on Hopper"): every warpgroup runs every
// product of the CTA's tiles (a tile its rows see none of is masked, never skipped: wgmma under a
// data-dependent branch made the 12.4 ptxas build hang); accumulators are defined before the
// loops; barrier waits spin inside one asm statement. Whole tiles are skipped only on CTA-uniform
// conditions (the causal range of query or key tiles of the CTA).
#include "attention_wgmma_bwd.cuh"
#include "warpgroup_turns.cuh"

// ---- dK, dV --------------------------------------------------------------------------------------

template <class E, int D>
__device__ __forceinline__ void attn_bwd_dkdv_wgmma(const TensorMap* tmQ, const TensorMap* tmK, const TensorMap* tmV,
                                                    const TensorMap* tmdO, const float* __restrict__ lse,
                                                    const float* __restrict__ delta, unsigned short* __restrict__ dk,
                                                    unsigned short* __restrict__ dv, int B, int H, int Nq, int Nk,
                                                    long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb,
                                                    long long dv_sh, long long dv_sr, long long dv_at, float scale,
                                                    int causal) {
    constexpr int BN = ABW_KV_BN, BM = ABW_KV_BM(D), ST = ABW_KV_STAGES(D);
    constexpr int KVT = ABW_TILE(BN, D), QT = ABW_TILE(BM, D);
    constexpr int NA = D / 2, NS = BM / 2, KB = BM / 16;
    constexpr bool OVERLAP = ABW_KV_OVERLAP != 0 && D == 64 && BM == 64;
    constexpr bool TURNS = ABW_KV_TURNS != 0 && OVERLAP;
    extern __shared__ unsigned char abw_smem[];
    const unsigned base = (smem_u32(abw_smem) + 1023u) & ~1023u;
    const unsigned sK = base, sV = base + KVT, sQ = base + 2 * KVT;  // stage s: Q at sQ + 2 s QT, dO after it
    const unsigned sL = sQ + 2 * ST * QT;                            // stage s: lse at sL + 8 s BM, delta after it
    const unsigned bars = sL + 8 * ST * BM;
    const unsigned kv_full = bars, kv_empty = bars + 8, full = bars + 16, empty = full + 8 * ST;
    const float LOG2E = 1.4426950408889634f, sl2 = scale * LOG2E;
    const float INF = __int_as_float(0x7f800000);
    const long long shift = (long long)Nk - Nq;

    const int n_kt = (Nk + BN - 1) / BN, n_qt = (Nq + BM - 1) / BM;
    const long long tiles = (long long)B * H * n_kt;
    // A dK/dV tile streams the head's Q and dO rows (2 D bytes each) with their lse and delta.
    const int sec_g = attn_section_heads(causal, (long long)B * H, n_kt, (long long)Nq * (4 * D + 8));
    // The query tiles key tile kt's CTA walks: from the first that sees its first key.
    auto first_qt = [&](int kt) {
        if (!causal) return 0;
        const long long s0 = (long long)kt * BN - shift;
        return (int)((s0 <= 0 ? 0 : (s0 >= Nq ? Nq : s0)) / BM);
    };

    if (threadIdx.x == 0) {
        mbar_init(kv_full, 1);
        mbar_init(kv_empty, 8);
        for (int s = 0; s < ST; ++s) {
            mbar_init(full + 8 * s, 1 + 32);  // the copy thread's expect_tx, the lse warp's lanes
            mbar_init(empty + 8 * s, 256);  // every consumer thread (its own reads of lse, delta)
        }
        mbar_init_fence();
    }
    __syncthreads();

    // The warpgroup index through a shuffle, so that ptxas knows every branch on it to be uniform.
    const int wg = __shfl_sync(0xffffffffu, (int)(threadIdx.x / 128), 0);
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        if (warp > 1 || (warp == 0 && lane > 0)) return;
        int it = 0, nkv = 0;
        for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
            const AbwTile w = abw_tile(t, n_kt, B, H, causal, sec_g);
            const int qt0 = first_qt(w.tile);
            if (qt0 >= n_qt) continue;  // no query sees these keys: the consumers write zeros
            if (warp == 0) {
                if (nkv > 0) mbar_wait_spin(kv_empty, (nkv - 1) & 1);
                const int nb = abw_boxes<BN>(w.tile * BN, Nk);
                mbar_expect_tx(kv_full, 2 * nb * (D / 64) * ABW_BOX * 128);
                abw_load_tile<BN, D>(sK, tmK, w.tile * BN, nb, w.h, w.b, kv_full);
                abw_load_tile<BN, D>(sV, tmV, w.tile * BN, nb, w.h, w.b, kv_full);
            }
            ++nkv;
            for (int qt = qt0; qt < n_qt; ++qt, ++it) {
                const int s = it % ST;
                if (it >= ST) mbar_wait_spin(empty + 8 * s, ((it / ST) & 1) ^ 1);
                if (warp == 0) {
                    const unsigned q_dst = sQ + 2 * s * QT;
                    mbar_expect_tx(full + 8 * s, 2 * QT);
                    abw_load_tile<BM, D>(q_dst, tmQ, qt * BM, BM / ABW_BOX, w.h, w.b, full + 8 * s);
                    abw_load_tile<BM, D>(q_dst + QT, tmdO, qt * BM, BM / ABW_BOX, w.h, w.b, full + 8 * s);
                } else {
                    // lse times log2 e (+inf past Nq and for rows that see no key: P = 0 there) and
                    // delta (0 past Nq) of the tile's rows.
                    float* ls = reinterpret_cast<float*>(abw_smem + (sL - smem_u32(abw_smem))) + 2 * s * BM;
#pragma unroll
                    for (int x = 0; x < BM / 32; ++x) {
                        const int r = qt * BM + 32 * x + lane;
                        float l = INF, dl = 0.0f;
                        if (r < Nq) {
                            const float v = lse[w.bh * Nq + r];
                            l = v == -INF ? INF : v * LOG2E;
                            dl = delta[w.bh * Nq + r];
                        }
                        ls[32 * x + lane] = l;
                        ls[BM + 32 * x + lane] = dl;
                    }
                    mbar_arrive(full + 8 * s);
                }
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wg - 1;  // keys 64 c .. 64 c + 63 of each key tile
    if constexpr (TURNS)
        if (c == 1) wg_turn_pass(1);
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32, quad = lane % 4;
    const float* lsh = reinterpret_cast<const float*>(abw_smem + (sL - smem_u32(abw_smem)));
    float s[NS], dp[NS], gk[NA], gv[NA];
#pragma unroll
    for (int i = 0; i < NS; ++i) s[i] = dp[i] = 0.0f;
    unsigned pa[KB][4], pd[KB][4];
    int it = 0, nkv = 0;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const AbwTile w = abw_tile(t, n_kt, B, H, causal, sec_g);
        const int qt0 = first_qt(w.tile);
        const int k0 = w.tile * BN + 64 * c;          // the warpgroup's first key
        const int kr = k0 + 16 * warp + lane / 4;     // this thread's keys: kr, kr + 8
#pragma unroll
        for (int i = 0; i < NA; ++i) gk[i] = gv[i] = 0.0f;
        if (qt0 < n_qt) {
            mbar_wait_spin(kv_full, nkv & 1);
            ++nkv;
        }
        for (int qt = qt0; qt < n_qt; ++qt, ++it) {
            const int st = it % ST;
            const int m0 = qt * BM;
            const unsigned q_tile = sQ + 2 * st * QT, do_tile = q_tile + QT;
            mbar_wait_spin(full + 8 * st, (it / ST) & 1);
            // S^T = K Q^T, dP^T = V dO^T (the warpgroup's 64 keys against the tile's BM queries).
            if constexpr (TURNS)
                if (qt == qt0) wg_turn_wait(c);
            wgx_fence();
            abw_mul_ss<E, BM, BN, D, ABW_DESC_ADD_KV>(s, sK + c * 64 * 128, q_tile);
            wgx_commit();
            abw_mul_ss<E, BM, BN, D, ABW_DESC_ADD_KV>(dp, sV + c * 64 * 128, do_tile);
            wgx_commit();
            if constexpr (TURNS) wg_turn_pass(c);
            wgx_wait1();  // S^T (and, ABW_KV_OVERLAP, the previous step's dV, dK products)
            wgx_fence_acc(s);
            if (OVERLAP && qt > qt0) {  // the previous step's stage (Q, dO, lse, delta) has been read
                __syncwarp();
                mbar_arrive(empty + 8 * ((it - 1) % ST));
            }
            // P^T: s[4 i + 2 rr + x] is key kr + 8 rr, query m0 + 8 i + 2 quad + x. Only tiles
            // where some key of the warpgroup is later than some query sees are masked.
            const float* l2 = lsh + 2 * st * BM;
            const bool part = causal && (long long)k0 + 63 > (long long)m0 + shift;
#pragma unroll
            for (int i = 0; i < BM / 8; ++i) {
                const float2 l = *reinterpret_cast<const float2*>(l2 + 8 * i + 2 * quad);
#pragma unroll
                for (int rr = 0; rr < 2; ++rr) {
                    float p0 = ex2_approx(fmaf(s[4 * i + 2 * rr], sl2, -l.x));
                    float p1 = ex2_approx(fmaf(s[4 * i + 2 * rr + 1], sl2, -l.y));
                    if (part) {
                        const long long lim = (long long)(m0 + 8 * i + 2 * quad) + shift;  // keys <= lim seen
                        const long long key = kr + 8 * rr;
                        if (key > lim) p0 = 0.0f;
                        if (key > lim + 1) p1 = 0.0f;
                    }
                    s[4 * i + 2 * rr] = p0;
                    s[4 * i + 2 * rr + 1] = p1;
                }
            }
            wgx_wait0();
            wgx_fence_acc(dp);
            // dS^T = P^T (dP^T - delta[query]).
#pragma unroll
            for (int i = 0; i < BM / 8; ++i) {
                const float2 dl = *reinterpret_cast<const float2*>(l2 + BM + 8 * i + 2 * quad);
#pragma unroll
                for (int rr = 0; rr < 2; ++rr) {
                    dp[4 * i + 2 * rr] = s[4 * i + 2 * rr] * (dp[4 * i + 2 * rr] - dl.x);
                    dp[4 * i + 2 * rr + 1] = s[4 * i + 2 * rr + 1] * (dp[4 * i + 2 * rr + 1] - dl.y);
                }
            }
            abw_pack<E, KB>(pa, s);
            abw_pack<E, KB>(pd, dp);
            // dV += P^T dO, dK += dS^T Q (dO and Q N-major: k = the tile's queries).
            if constexpr (TURNS) wg_turn_wait(c);
            wgx_fence();
            abw_mul_rs<E, KB, BM, D, ABW_DESC_ADD_KV>(gv, pa, do_tile);
            abw_mul_rs<E, KB, BM, D, ABW_DESC_ADD_KV>(gk, pd, q_tile);
            wgx_commit();
            if constexpr (TURNS)
                if (qt == n_qt - 1) wg_turn_pass(c);
            if (!OVERLAP) {
                wgx_wait0();
                wgx_fence_acc(gv);
                wgx_fence_acc(gk);
                // Every thread arrives after its own reads of the stage's lse and delta (one lane
                // per warp after __syncwarp is ordered too, but compute-sanitizer's racecheck
                // credits only the arriving thread's reads: it reported the ring's reuse as a race).
                mbar_arrive(empty + 8 * st);
            }
        }
        wgx_wait0();  // nothing in flight; keeps the epilogue's reads after any product
        wgx_fence_acc(gv);
        wgx_fence_acc(gk);
        if (OVERLAP && qt0 < n_qt) {
            mbar_arrive(empty + 8 * ((it - 1) % ST));
        }
        if (qt0 < n_qt && lane == 0) mbar_arrive(kv_empty);  // every product that reads K and V is done

        unsigned short* dkb = dk + w.b * dk_sb + w.h * dk_sh;
        unsigned short* dvb = (dv_at >= 0 ? dk + dv_at : dv) + w.b * dv_sb + w.h * dv_sh;
        abw_store<E, D>(gk, dkb, dk_sr, kr, Nk, scale, quad);
        abw_store<E, D>(gv, dvb, dv_sr, kr, Nk, 1.0f, quad);
    }
    if constexpr (TURNS)
        if (c == 0) wg_turn_wait(0);  // consumer 1's first pass, never waited for
}

// ---- dQ ------------------------------------------------------------------------------------------

template <class E, int D>
__device__ __forceinline__ void attn_bwd_dq_wgmma(const TensorMap* tmQ, const TensorMap* tmK, const TensorMap* tmV,
                                                  const TensorMap* tmdO, const float* __restrict__ lse,
                                                  const float* __restrict__ delta, unsigned short* __restrict__ dq,
                                                  int B, int H, int Nq, int Nk, long long g_sb, long long g_sh,
                                                  long long g_sr, float scale, int causal) {
    constexpr int BM = ABW_DQ_BM, BN = ABW_DQ_BN(D), ST = ABW_DQ_STAGES(D);
    constexpr int QT = ABW_TILE(BM, D), KT = ABW_TILE(BN, D);
    constexpr int NA = D / 2, NS = BN / 2, KB = BN / 16;
    extern __shared__ unsigned char abw_smem[];
    const unsigned base = (smem_u32(abw_smem) + 1023u) & ~1023u;
    const unsigned sQ = base, sdO = base + QT, sK = base + 2 * QT;  // stage s: K at sK + 2 s KT, V after it
    const unsigned bars = sK + 2 * ST * KT;
    const unsigned q_full = bars, q_empty = bars + 8;
    const unsigned kfull = bars + 16, vfull = kfull + 8 * ST, kvempty = kfull + 16 * ST;
    const float LOG2E = 1.4426950408889634f, sl2 = scale * LOG2E;
    const float INF = __int_as_float(0x7f800000);
    const long long shift = causal ? (long long)Nk - Nq : 0;

    const int n_qt = (Nq + BM - 1) / BM;
    const long long tiles = (long long)B * H * n_qt;
    // A dQ tile streams the head's K and V rows (2 D bytes each).
    const int sec_g = attn_section_heads(causal, (long long)B * H, n_qt, (long long)Nk * 4 * D);
    // The key tiles query tile qt's CTA walks: those any of its rows sees.
    auto key_tiles = [&](int qt) {
        int kv_end = Nk;
        if (causal) {
            const long long e = (long long)qt * BM + BM + shift;
            kv_end = e <= 0 ? 0 : (e >= Nk ? Nk : (int)e);
        }
        return (kv_end + BN - 1) / BN;
    };

    if (threadIdx.x == 0) {
        mbar_init(q_full, 1);
        mbar_init(q_empty, 8);
        for (int s = 0; s < ST; ++s) {
            mbar_init(kfull + 8 * s, 1);
            mbar_init(vfull + 8 * s, 1);
            mbar_init(kvempty + 8 * s, 8);
        }
        mbar_init_fence();
    }
    __syncthreads();

    const int wg = __shfl_sync(0xffffffffu, (int)(threadIdx.x / 128), 0);
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
        if (threadIdx.x == 0) {
            int it = 0, nq = 0;
            for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
                const AbwTile w = abw_tile(t, n_qt, B, H, causal, sec_g);
                const int qt = n_qt - 1 - w.tile;
                const int n_kt = key_tiles(qt);
                if (n_kt == 0) continue;  // no key seen: the consumers write zeros
                if (nq > 0) mbar_wait_spin(q_empty, (nq - 1) & 1);
                const int nb = abw_boxes<BM>(qt * BM, Nq);
                mbar_expect_tx(q_full, 2 * nb * (D / 64) * ABW_BOX * 128);
                abw_load_tile<BM, D>(sQ, tmQ, qt * BM, nb, w.h, w.b, q_full);
                abw_load_tile<BM, D>(sdO, tmdO, qt * BM, nb, w.h, w.b, q_full);
                ++nq;
                for (int kt = 0; kt < n_kt; ++kt, ++it) {
                    const int s = it % ST;
                    if (it >= ST) mbar_wait_spin(kvempty + 8 * s, ((it / ST) & 1) ^ 1);
                    const unsigned k_dst = sK + 2 * s * KT;
                    mbar_expect_tx(kfull + 8 * s, KT);
                    abw_load_tile<BN, D>(k_dst, tmK, kt * BN, BN / ABW_BOX, w.h, w.b, kfull + 8 * s);
                    mbar_expect_tx(vfull + 8 * s, KT);
                    abw_load_tile<BN, D>(k_dst + KT, tmV, kt * BN, BN / ABW_BOX, w.h, w.b, vfull + 8 * s);
                }
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
    const int c = wg - 1;  // rows 64 c .. 64 c + 63 of each query tile
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32, quad = lane % 4;
    float s[NS], dp[NS], acc[NA];
#pragma unroll
    for (int i = 0; i < NS; ++i) s[i] = dp[i] = 0.0f;
    unsigned pa[KB][4];
    int it = 0, nq = 0;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const AbwTile w = abw_tile(t, n_qt, B, H, causal, sec_g);
        const int qt = n_qt - 1 - w.tile;
        const int n_kt = key_tiles(qt);
        const int w0 = qt * BM + 64 * c;             // the warpgroup's first row
        const int r0 = w0 + 16 * warp + lane / 4;    // this thread's rows: r0, r0 + 8
        float l2[2], dl[2];
        long long end[2];                            // row r0 + 8 rr sees keys < end[rr]
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
            const int row = r0 + 8 * rr;
            l2[rr] = INF;
            dl[rr] = 0.0f;
            if (row < Nq) {
                const float v = lse[w.bh * Nq + row];
                l2[rr] = v == -INF ? INF : v * LOG2E;
                dl[rr] = delta[w.bh * Nq + row];
            }
            long long e = causal ? (long long)row + shift + 1 : Nk;
            end[rr] = e > Nk ? Nk : e;
        }
        // Key tiles every row of the warpgroup sees whole (kt < full_nt: no mask). Key rows past
        // Nk are zero-filled, so they add nothing to dS K, but their P (exp2(-lse)) could overflow:
        // the last partial tile is masked too.
        int full_nt = Nk / BN;
        if (causal) {
            const long long f = (long long)w0 + 1 + shift;
            const long long fe = f <= 0 ? 0 : f / BN;
            full_nt = fe < full_nt ? (int)fe : full_nt;
        }
#pragma unroll
        for (int i = 0; i < NA; ++i) acc[i] = 0.0f;
        if (n_kt > 0) {
            mbar_wait_spin(q_full, nq & 1);
            ++nq;
        }
        for (int kt = 0; kt < n_kt; ++kt, ++it) {
            const int st = it % ST;
            const unsigned ph = (it / ST) & 1;
            const unsigned k_tile = sK + 2 * st * KT, v_tile = k_tile + KT;
            mbar_wait_spin(kfull + 8 * st, ph);
            wgx_fence();
            abw_mul_ss<E, BN, BM, D, ABW_DESC_ADD_DQ>(s, sQ + c * 64 * 128, k_tile);  // S = Q K^T
            wgx_commit();
            mbar_wait_spin(vfull + 8 * st, ph);
            wgx_fence();  // (a fence after the wait: ptxas injects one before dP's products otherwise, C7519)
            abw_mul_ss<E, BN, BM, D, ABW_DESC_ADD_DQ>(dp, sdO + c * 64 * 128, v_tile);  // dP = dO V^T
            wgx_commit();
            wgx_wait1();  // S, and the previous tile's dQ += dS K
            wgx_fence_acc(s);
            if (kt > 0 && lane == 0) mbar_arrive(kvempty + 8 * ((it - 1) % ST));
            // P: s[4 i + 2 rr + x] is row r0 + 8 rr, key kt BN + 8 i + 2 quad + x.
            const bool part = kt >= full_nt;
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {
                const int lim = part ? (int)(end[rr] - (long long)kt * BN) - 2 * quad : BN;  // keys 8 i + x < lim
#pragma unroll
                for (int i = 0; i < BN / 8; ++i)
#pragma unroll
                    for (int x = 0; x < 2; ++x) {
                        const float p = ex2_approx(fmaf(s[4 * i + 2 * rr + x], sl2, -l2[rr]));
                        s[4 * i + 2 * rr + x] = 8 * i + x < lim ? p : 0.0f;
                    }
            }
            wgx_wait0();
            wgx_fence_acc(dp);
            if (kt == n_kt - 1 && lane == 0) mbar_arrive(q_empty);  // every product that reads Q, dO is done
            // dS = P (dP - delta[row]).
#pragma unroll
            for (int i = 0; i < BN / 8; ++i)
#pragma unroll
                for (int rr = 0; rr < 2; ++rr)
#pragma unroll
                    for (int x = 0; x < 2; ++x)
                        dp[4 * i + 2 * rr + x] = s[4 * i + 2 * rr + x] * (dp[4 * i + 2 * rr + x] - dl[rr]);
            abw_pack<E, KB>(pa, dp);
            // dQ += dS K (K N-major: k = the tile's keys); left in flight.
            wgx_fence();
            abw_mul_rs<E, KB, BN, D, ABW_DESC_ADD_DQ>(acc, pa, k_tile);
            wgx_commit();
        }
        wgx_wait0();  // the last dQ += dS K (nothing in flight when the tile had no key tile)
        wgx_fence_acc(acc);
        if (n_kt > 0 && lane == 0) mbar_arrive(kvempty + 8 * ((it - 1) % ST));

        abw_store<E, D>(acc, dq + w.b * g_sb + w.h * g_sh, g_sr, r0, Nq, scale, quad);
    }
}

// q, k, v, dout are not read here (the tensor maps address them); they are parameters so that a
// launch orders their buffers like any other kernel argument.
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_dq_wgmma_d64_bf16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const bf16_t* __restrict__ q, const bf16_t* __restrict__ k, const bf16_t* __restrict__ v,
                            const bf16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, bf16_t* __restrict__ dq, int B, int H, int Nq, int Nk,
                            long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq_wgmma<AbwBF16, 64>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dq, B, H, Nq, Nk, g_sb, g_sh, g_sr, scale, causal);
}
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_dkdv_wgmma_d64_bf16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const bf16_t* __restrict__ q, const bf16_t* __restrict__ k, const bf16_t* __restrict__ v,
                            const bf16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, bf16_t* __restrict__ dk, bf16_t* __restrict__ dv, int B,
                            int H, int Nq, int Nk, long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb,
                            long long dv_sh, long long dv_sr, long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_wgmma<AbwBF16, 64>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dk, dv, B, H, Nq, Nk, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr,
                                      dv_at, scale, causal);
}
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_dq_wgmma_d128_bf16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const bf16_t* __restrict__ q, const bf16_t* __restrict__ k, const bf16_t* __restrict__ v,
                            const bf16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, bf16_t* __restrict__ dq, int B, int H, int Nq, int Nk,
                            long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq_wgmma<AbwBF16, 128>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dq, B, H, Nq, Nk, g_sb, g_sh, g_sr, scale, causal);
}
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_dkdv_wgmma_d128_bf16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const bf16_t* __restrict__ q, const bf16_t* __restrict__ k, const bf16_t* __restrict__ v,
                            const bf16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, bf16_t* __restrict__ dk, bf16_t* __restrict__ dv, int B,
                            int H, int Nq, int Nk, long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb,
                            long long dv_sh, long long dv_sr, long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_wgmma<AbwBF16, 128>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dk, dv, B, H, Nq, Nk, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr,
                                      dv_at, scale, causal);
}
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_dq_wgmma_d64_f16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const f16_t* __restrict__ q, const f16_t* __restrict__ k, const f16_t* __restrict__ v,
                            const f16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, f16_t* __restrict__ dq, int B, int H, int Nq, int Nk,
                            long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq_wgmma<AbwF16, 64>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dq, B, H, Nq, Nk, g_sb, g_sh, g_sr, scale, causal);
}
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_dkdv_wgmma_d64_f16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const f16_t* __restrict__ q, const f16_t* __restrict__ k, const f16_t* __restrict__ v,
                            const f16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, f16_t* __restrict__ dk, f16_t* __restrict__ dv, int B,
                            int H, int Nq, int Nk, long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb,
                            long long dv_sh, long long dv_sr, long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_wgmma<AbwF16, 64>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dk, dv, B, H, Nq, Nk, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr,
                                      dv_at, scale, causal);
}
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_dq_wgmma_d128_f16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const f16_t* __restrict__ q, const f16_t* __restrict__ k, const f16_t* __restrict__ v,
                            const f16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, f16_t* __restrict__ dq, int B, int H, int Nq, int Nk,
                            long long g_sb, long long g_sh, long long g_sr, float scale, int causal) {
    attn_bwd_dq_wgmma<AbwF16, 128>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dq, B, H, Nq, Nk, g_sb, g_sh, g_sr, scale, causal);
}
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_dkdv_wgmma_d128_f16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const f16_t* __restrict__ q, const f16_t* __restrict__ k, const f16_t* __restrict__ v,
                            const f16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, f16_t* __restrict__ dk, f16_t* __restrict__ dv, int B,
                            int H, int Nq, int Nk, long long dk_sb, long long dk_sh, long long dk_sr, long long dv_sb,
                            long long dv_sh, long long dv_sr, long long dv_at, float scale, int causal) {
    attn_bwd_dkdv_wgmma<AbwF16, 128>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dk, dv, B, H, Nq, Nk, dk_sb, dk_sh, dk_sr, dv_sb, dv_sh, dv_sr,
                                      dv_at, scale, causal);
}
