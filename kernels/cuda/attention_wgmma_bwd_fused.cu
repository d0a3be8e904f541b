// attention_wgmma_bwd_fused.cu — the Hopper attention backward in one pass over the key tiles
// (FlashAttention-3's backward: 5 GEMMs where attention_wgmma_bwd.cu's two kernels run 7), f16 /
// bf16 with f32 accumulation, head dimensions 64 and 128. attn_bwd_fused_wgmma_* computes dK and
// dV exactly as attn_bwd_dkdv_wgmma_* does (same products, same order: the same bits) and, from
// the same dS, each (query tile, key tile)'s share of dQ, which it adds into an f32 workspace;
// attn_bwd_dq_convert_<dt> (attention_mma_bwd.cu) then rounds dq_acc * scale into dq. The adds
// of a query row's key tiles come in whatever order the CTAs reach them, so dq is **not**
// bitwise reproducible (the last bits vary run to run; dk and dv do not). The op runs it only
// when asked for (AttentionBwdDq::Atomic).
//
// attn_bwd_fused_ord_wgmma_* is the same pass with the adds in a fixed order, so that dq is
// bitwise reproducible: each (b, h, query tile) has a counter, and key tile kt adds its block
// only once the counter reads kt (key tiles 0 .. kt - 1 have added theirs), then raises it once
// its add has reached memory. The contributors of a query tile are always key tiles 0 .. K (full
// attention: every key tile; causal: those that are not wholly masked), so kt is also its turn.
// To wait only for work that is certain to run, a CTA takes its tiles from a counter
// (atomicAdd, in the tile order) instead of the static persistent stride: a tile that waits has
// every tile before it in the order already taken by a running CTA, whose own waits point at
// earlier tiles still, so the waits always end whatever the number of CTAs resident at once (a
// partial GPU, MPS limits, other work on the SMs).
//
// gen-ptx: archs=90a
//
// Host contract (kernels/src/ops/attention/bwd_wgmma.rs checks it before every launch): that of
// attn_bwd_dkdv_wgmma_* (attention_wgmma_bwd.cu) with ABF_SMEM_BYTES(D) of dynamic shared
// memory, plus dq_acc: the dense [B, H, Nq, D] f32 workspace, zeroed, 16-byte aligned; the
// ordered kernels also take `order_words`: 1 + B·H·ceil(Nq / ABF_BM(D)) 32-bit words, zeroed,
// 4-byte aligned (read as ints: the tile counter, then the counters of the (b, h, query tile)s;
// the op carves them from the tail of the same workspace), and kt_major (0 or 1).
//
// Per CTA (128 keys of one (b, h), consumer warpgroup c owning keys 64 (c - 1) ..) and query tile
// of ABF_BM(D) rows (64 at D = 128, 128 at D = 64, as FlashAttention-3's tiles):
//   * S^T, dP^T, P^T, dS^T, dV += P^T dO, dK += dS^T Q as in attn_bwd_dkdv_wgmma_* (no overlap of
//     the dV, dK products with the next tile's: this kernel's registers hold the dQ block too);
//   * dS^T, rounded, goes to a shared tile (128 keys x BM queries, the 128-byte swizzle of a TMA
//     box, so that it is the M-major A operand of a wgmma); once both warpgroups' halves are
//     written (mbarrier ds_full; each issues its dV, dK products first, and rewrites its half
//     only when both have read the last one: ds_free), each warpgroup computes a 64 x 64 block
//     of dQ = dS K over all 128 keys
//     (D = 128: the tile's 64 queries x its half of the columns; D = 64: its half of the 128
//     queries x all 64 columns) with both operands in shared memory (dS M-major, K N-major);
//   * the block goes to an f32 staging tile laid out as the tile's dense rows of dq_acc, and warp 2
//     of the producer warpgroup adds it into dq_acc with one cp.reduce.async.bulk (rows < Nq
//     only) while the consumers go on; the staging tile is reused when its reads are done
//     (dq_empty).
#include "attention_wgmma_bwd.cuh"

// Lab builds only (kernels/tuning/attn_wgmma_bwd_lab.cu; wrong dq, for timing where the time
// goes): ABF_LAB_SKIP 1 skips the bulk reductions, 2 also the dQ product, 3 also the
// two consumer barriers and the dS tile's stores.
#ifndef ABF_LAB_SKIP
#define ABF_LAB_SKIP 0
#endif
#define ABF_STAGES 3                       // Q + dO stages (the dS and dQ tiles take the rest)
#define ABF_BM(D) ((D) == 128 ? 64 : 128)  // query rows per step
// ABF_DQ_PAD (lab): bytes of padding per row of the f32 dQ staging tile. 0 (shipped) makes the
// tile the dense rows of dq_acc: one bulk reduction per tile (4-way bank conflicts on the
// stores); 32 spreads a half-warp's 8-byte stores over the 32 banks, and the reductions then go
// row by row (64 or 128 of them a step: 10-30% slower at D = 64 on an H200, kernels/TUNING.md).
#ifndef ABF_DQ_PAD
#define ABF_DQ_PAD 0
#endif
// ABF_MBAR_SYNC (lab): 1 (shipped) hands the dS tile between the consumer warpgroups with
// mbarriers (each waits only where it needs the other's half, and issues dV, dK before that); 0
// with two named barriers (both warpgroups in lock-step; 0-2% slower).
#ifndef ABF_MBAR_SYNC
#define ABF_MBAR_SYNC 1
#endif
// ABF_KT_MAJOR (lab): 1 hands full attention's tiles out key tile by key tile across every head
// (the causal order) in every kernel of the file (0, shipped: the ordered kernels' kt_major
// argument decides for them).
#ifndef ABF_KT_MAJOR
#define ABF_KT_MAJOR 0
#endif
#define ABF_DQ_ROW(D) ((D) * 4 + ABF_DQ_PAD)  // bytes per row of the f32 dQ staging tile
// K, V tiles; per stage a Q and a dO tile; the dS tile; the dQ staging tile; per stage lse and
// delta; then the barriers (and up to 1023 bytes to reach a 1024-byte boundary first):
// 210.81 KiB at D = 128, 196.31 KiB at D = 64.
#define ABF_SMEM_BYTES(D)                                                                                  \
    (2 * ABW_TILE(ABW_KV_BN, D) + ABF_STAGES * (2 * ABW_TILE(ABF_BM(D), D) + 8 * ABF_BM(D)) +             \
     ABW_KV_BN * ABF_BM(D) * 2 + ABF_BM(D) * ABF_DQ_ROW(D) + 1024 + 320)

// The consumer warpgroups' named barrier (ids 1 and 2; 0 is __syncthreads).
__device__ __forceinline__ void abf_consumers_sync(int id) {
    asm volatile("bar.sync %0, 256;" ::"r"(id) : "memory");
}
// Orders this thread's shared-memory writes before later reads by the async proxy (wgmma operand
// reads, bulk copies) that a barrier orders after them.
__device__ __forceinline__ void abf_fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// The ordered kernels' step records (16 bytes in shared memory: b·H + h, query tile, key tile, and
// the step's number + 1, negated after the last step), written by the producer's warp 0 when it
// loads the step's stage and read by its reducer once the record's barrier (one per slot of the
// ring, count 1) completes the phase of that step: an mbarrier rather than a polled flag, so that
// the stores happen before the loads in a way compute-sanitizer's racecheck follows too.
__device__ __forceinline__ void abf_put_record(unsigned rec, unsigned bar, int bh, int qt, int kt, int seq) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(rec), "r"(bh), "r"(qt), "r"(kt), "r"(seq)
                 : "memory");
    mbar_arrive(bar);  // release: the record's stores before the reducer's wait returns
}
// Waits for step `it`'s record (or the end's) in slot it % 8; returns the number it carries.
__device__ __forceinline__ int abf_get_record(unsigned rec, unsigned bar, int it, int& bh, int& qt, int& kt) {
    mbar_wait_spin(bar, (it / 8) & 1);
    int seq;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(bh), "=r"(qt), "=r"(kt), "=r"(seq) : "r"(rec)
                 : "memory");
    return seq;
}
// Waits until the counter at `turn_of` reads `turn`, then orders the bulk reduction that follows
// after what the wait observed.
__device__ __forceinline__ void abf_wait_turn(const int* turn_of, int turn) {
    int v;
    do {
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(turn_of) : "memory");
    } while (v != turn);
    asm volatile("fence.proxy.async.global;" ::: "memory");
}
// ... and hands the turn on once this thread's bulk reductions have reached global memory.
__device__ __forceinline__ void abf_pass_turn(int* turn_of) {
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    asm volatile("fence.proxy.async.global;" ::: "memory");
    asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(turn_of) : "memory");
}

template <class E, int D, bool ORD>
__device__ __forceinline__ void attn_bwd_fused_wgmma(const TensorMap* tmQ, const TensorMap* tmK, const TensorMap* tmV,
                                                     const TensorMap* tmdO, const float* __restrict__ lse,
                                                     const float* __restrict__ delta, float* __restrict__ dq_acc,
                                                     unsigned short* __restrict__ dk, unsigned short* __restrict__ dv,
                                                     int B, int H, int Nq, int Nk, long long dk_sb, long long dk_sh,
                                                     long long dk_sr, long long dv_sb, long long dv_sh,
                                                     long long dv_sr, long long dv_at, float scale, int causal,
                                                     int* __restrict__ order, int kt_major) {
    constexpr int BN = ABW_KV_BN, BM = ABF_BM(D), ST = ABF_STAGES;
    constexpr int KVT = ABW_TILE(BN, D), QT = ABW_TILE(BM, D), DST = BN * BM * 2, DQR = ABF_DQ_ROW(D);
    constexpr int NA = D / 2, NS = BM / 2, KB = BM / 16;
    extern __shared__ unsigned char abw_smem[];
    const unsigned base = (smem_u32(abw_smem) + 1023u) & ~1023u;
    const unsigned sK = base, sV = base + KVT, sQ = base + 2 * KVT;  // stage s: Q at sQ + 2 s QT, dO after it
    const unsigned sdS = sQ + 2 * ST * QT;                           // BM / 64 atoms of 128 keys x 64 queries
    const unsigned sdQ = sdS + DST;                                  // BM rows of DQR bytes
    const unsigned sL = sdQ + BM * DQR;                              // stage s: lse at sL + 8 s BM, delta after it
    const unsigned bars = sL + 8 * ST * BM;
    const unsigned kv_full = bars, kv_empty = bars + 8, dq_full = bars + 16, dq_empty = bars + 24;
    const unsigned ds_full = bars + 32, ds_free = bars + 40;  // the dS tile: both halves written / read
    const unsigned full = bars + 48, empty = full + 8 * ST;
    // The ordered kernels: the ring of tiles taken (2 x 8 bytes: the tile, -1 when none is left;
    // slot n is rewritten only once the consumers are done with tile n + 1, so warp 1 has read it),
    // and the ring of step records (8 x 16 bytes, abf_put_record) that warp 0 writes when it loads
    // a step's stage and the reducer reads when it adds the step's block.
    static_assert(48 + 16 * ST <= 96, "the barriers run into the tile ring");
    // The second reducer's staging-tile barrier (odd steps; dq_full serves the even ones), and
    // the records' barriers (one per slot of the ring).
    const unsigned ring = bars + 96, dq_full_odd = bars + 112, records = bars + 128, rec_full = bars + 256;
    auto rec_at = [&](int it) { return records + 16 * (it % 8); };
    auto rec_bar = [&](int it) { return rec_full + 8 * (it % 8); };
    // Tiles go out key tile by key tile across every head for causal attention and where kt_major
    // asks (the ordered kernels at D = 64: a head's query tiles then take their adds from key
    // tiles that run at once rather than in a chain), head by head for the rest (see
    // abw_tile_all_heads); within a head, key tiles ascend either way.
    const int tile_order = causal | kt_major | ABF_KT_MAJOR;
    const float LOG2E = 1.4426950408889634f, sl2 = scale * LOG2E;
    const float INF = __int_as_float(0x7f800000);
    const long long shift = (long long)Nk - Nq;

    const int n_kt = (Nk + BN - 1) / BN, n_qt = (Nq + BM - 1) / BM;
    const long long tiles = (long long)B * H * n_kt;
    auto first_qt = [&](int kt) {
        if (!causal) return 0;
        const long long s0 = (long long)kt * BN - shift;
        return (int)((s0 <= 0 ? 0 : (s0 >= Nq ? Nq : s0)) / BM);
    };

    if (threadIdx.x == 0) {
        mbar_init(kv_full, 1);
        mbar_init(kv_empty, 8);
        mbar_init(dq_full, 256);  // every consumer thread, after its writes of the staging tile
        if (ORD) mbar_init(dq_full_odd, 256);  // the same for odd steps (the ordered kernels)
        mbar_init(dq_empty, 1);   // the reducing warp's lane 0, once the bulk reads are done
        mbar_init(ds_full, 256);  // every consumer thread, after its stores of dS (and the fence)
        mbar_init(ds_free, 256);  // every consumer thread, once its dQ product is done
        // The ordered kernels' record barriers: warp 0's lane 0 arrives once per record.
        if (ORD)
            for (int r = 0; r < 8; ++r) mbar_init(rec_full + 8 * r, 1);
        for (int s = 0; s < ST; ++s) {
            mbar_init(full + 8 * s, 1 + 32);
            mbar_init(empty + 8 * s, 256);
        }
        mbar_init_fence();
    }
    __syncthreads();

    const int wg = __shfl_sync(0xffffffffu, (int)(threadIdx.x / 128), 0);
    if (wg == 0) {
        // 40 + 2 x 232 registers a thread: the 168 x 3 the launch allocated (more would leave
        // the consumers' setmaxnreg.inc waiting for registers the CTA never gets: a hang).
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
        if (ORD ? (warp > 3 || lane > 0 && warp != 1) : (warp > 2 || (warp == 0 && lane > 0))) return;
        // Step `it`'s stage (query tile qt of tile w): warp 0 loads its Q and dO rows, warp 1 its
        // lse (in log2 units; +inf for rows past Nq and fully masked rows) and delta.
        auto fill_stage = [&](const AbwTile& w, int qt, int it) {
            const int s = it % ST;
            if (it >= ST) mbar_wait_spin(empty + 8 * s, ((it / ST) & 1) ^ 1);
            if (warp == 0) {
                const unsigned q_dst = sQ + 2 * s * QT;
                if (ORD) abf_put_record(rec_at(it), rec_bar(it), (int)w.bh, qt, w.tile, it + 1);
                mbar_expect_tx(full + 8 * s, 2 * QT);
                abw_load_tile<BM, D>(q_dst, tmQ, qt * BM, BM / ABW_BOX, w.h, w.b, full + 8 * s);
                abw_load_tile<BM, D>(q_dst + QT, tmdO, qt * BM, BM / ABW_BOX, w.h, w.b, full + 8 * s);
            } else {
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
        };
        if constexpr (ORD) {
            if (warp >= 2) {
                // The reducers (lane 0 of warps 2 and 3, even and odd steps): each step's block
                // goes into dq_acc at its turn. The step's record is in the ring (of 8; warp 0
                // runs at most ST + 1 steps ahead of the reducers) before the consumers have the
                // block, so the turn is waited for while they compute it; it is handed on as soon
                // as the add has reached memory (while the other reducer adds the next step's),
                // and no turn is held while a reducer waits for another.
                for (int it = warp - 2;; it += 2) {
                    int bh, qt, kt;
                    if (abf_get_record(rec_at(it), rec_bar(it), it, bh, qt, kt) < 0) return;
                    const int rows = Nq - qt * BM < BM ? Nq - qt * BM : BM;
                    float* g = dq_acc + ((long long)bh * Nq + (long long)qt * BM) * D;
                    int* turn_of = order + 1 + (long long)bh * n_qt + qt;
                    abf_wait_turn(turn_of, kt);
                    // Each reducer waits on its own barrier (a parity wait on one shared by both
                    // would pass early for the reducer a step ahead).
                    mbar_wait_spin(warp == 2 ? dq_full : dq_full_odd, (it >> 1) & 1);
                    if (ABF_LAB_SKIP == 0)
                        asm volatile(
                            "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(g),
                            "r"(sdQ), "r"(rows * D * 4)
                            : "memory");
                    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
                    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
                    mbar_arrive(dq_empty);
                    abf_pass_turn(turn_of);
                }
            }
            // Warp 0 takes the tiles (every one, those with no query tile to visit too: their dk
            // and dv are zeros the consumers store) and publishes each in the ring before its K
            // and V load; warp 1 reads it there once the load is done.
            int it = 0;
            for (int nkv = 0;; ++nkv) {
                long long t;
                if (warp == 0) {
                    t = atomicAdd(order, 1);
                    if (t >= tiles) t = -1;
                    if (nkv > 0) mbar_wait_spin(kv_empty, (nkv - 1) & 1);
                    asm volatile("st.shared.b64 [%0], %1;" ::"r"(ring + 8 * (nkv % 2)), "l"(t) : "memory");
                    if (t < 0) {  // the end, for both reducers
                        abf_put_record(rec_at(it), rec_bar(it), 0, 0, 0, -(it + 1));
                        abf_put_record(rec_at(it + 1), rec_bar(it + 1), 0, 0, 0, -(it + 2));
                    }
                    const AbwTile w = abw_tile_all_heads(t < 0 ? 0 : t, n_kt, B, H, tile_order);
                    if (t < 0 || first_qt(w.tile) >= n_qt) {
                        mbar_arrive(kv_full);
                    } else {
                        mbar_expect_tx(kv_full, 2 * KVT);
                        abw_load_tile<BN, D>(sK, tmK, w.tile * BN, BN / ABW_BOX, w.h, w.b, kv_full);
                        abw_load_tile<BN, D>(sV, tmV, w.tile * BN, BN / ABW_BOX, w.h, w.b, kv_full);
                    }
                } else {
                    mbar_wait_spin(kv_full, nkv & 1);
                    asm volatile("ld.shared.b64 %0, [%1];" : "=l"(t) : "r"(ring + 8 * (nkv % 2)) : "memory");
                }
                if (t < 0) return;
                const AbwTile w = abw_tile_all_heads(t, n_kt, B, H, tile_order);
                for (int qt = first_qt(w.tile); qt < n_qt; ++qt, ++it) fill_stage(w, qt, it);
            }
        }
        int it = 0, nkv = 0;
        for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
            const AbwTile w = abw_tile_all_heads(t, n_kt, B, H, tile_order);
            const int qt0 = first_qt(w.tile);
            if (qt0 >= n_qt) continue;
            if (warp == 0) {
                // Every box, those wholly past Nk too (the copy engine fills them with zeros): dQ
                // = dS K reads all 128 key rows, and a stale row (NaN bits, say) times dS = 0
                // would not be 0.
                if (nkv > 0) mbar_wait_spin(kv_empty, (nkv - 1) & 1);
                mbar_expect_tx(kv_full, 2 * KVT);
                abw_load_tile<BN, D>(sK, tmK, w.tile * BN, BN / ABW_BOX, w.h, w.b, kv_full);
                abw_load_tile<BN, D>(sV, tmV, w.tile * BN, BN / ABW_BOX, w.h, w.b, kv_full);
            }
            ++nkv;
            for (int qt = qt0; qt < n_qt; ++qt, ++it) {
                if (warp == 2) {
                    // The staging tile of step `it` into dq_acc rows qt BM .. (< Nq) of (b, h).
                    mbar_wait_spin(dq_full, it & 1);
                    const int rows = Nq - qt * BM < BM ? Nq - qt * BM : BM;
                    float* g = dq_acc + ((long long)w.bh * Nq + (long long)qt * BM) * D;
                    if (ABF_DQ_PAD == 0) {
                        if (lane == 0 && ABF_LAB_SKIP == 0)
                            asm volatile(
                                "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(g),
                                "r"(sdQ), "r"(rows * D * 4)
                                : "memory");
                    } else {
                        for (int r = lane; r < rows && ABF_LAB_SKIP == 0; r += 32)
                            asm volatile(
                                "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(
                                    g + (long long)r * D),
                                "r"(sdQ + r * DQR), "n"(D * 4)
                                : "memory");
                    }
                    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
                    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
                    __syncwarp();
                    if (lane == 0) mbar_arrive(dq_empty);
                    continue;
                }
                fill_stage(w, qt, it);
            }
        }
        // The global writes of the last adds are done before the kernel ends (its results are
        // read by the next kernel on the stream).
        if (warp == 2) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wg - 1;
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32, quad = lane % 4;
    const float* lsh = reinterpret_cast<const float*>(abw_smem + (sL - smem_u32(abw_smem)));
    // This warpgroup's 64 x 64 block of dQ: D = 128, the tile's queries x columns 64 c ..; D = 64,
    // queries 64 c .. x every column. A = dS (queries M-major in atom qa of the dS tile), B = K
    // (columns N-major in atom ka of the K tile), k = the 128 keys.
    const int qa = D == 128 ? 0 : c, ka = D == 128 ? c : 0;
    float s[NS], dp[NS], gk[NA], gv[NA], gq[32];
#pragma unroll
    for (int i = 0; i < NS; ++i) s[i] = dp[i] = 0.0f;
    unsigned pa[KB][4], pd[KB][4];
    int it = 0, nkv = 0;
    // The ordered kernels' next tile: published in the ring before its K, V load (-1: none left).
    auto ring_tile = [&](int n) {
        mbar_wait_spin(kv_full, n & 1);
        long long x;
        asm volatile("ld.shared.b64 %0, [%1];" : "=l"(x) : "r"(ring + 8 * (n % 2)) : "memory");
        return x;
    };
    long long t = blockIdx.x;
    if constexpr (ORD) t = ring_tile(0);
    while (ORD ? t >= 0 : t < tiles) {
        const AbwTile w = abw_tile_all_heads(t, n_kt, B, H, tile_order);
        const int qt0 = first_qt(w.tile);
        const int k0 = w.tile * BN + 64 * c;
        const int kl = 64 * c + 16 * warp + lane / 4;  // this thread's keys within the tile: kl, kl + 8
        const int kr = w.tile * BN + kl;
        const bool ragged = (long long)w.tile * BN + BN > Nk;  // the tile holds keys past Nk
#pragma unroll
        for (int i = 0; i < NA; ++i) gk[i] = gv[i] = 0.0f;
        if constexpr (ORD) {
            ++nkv;  // (its K and V were waited for in ring_tile)
        } else if (qt0 < n_qt) {
            mbar_wait_spin(kv_full, nkv & 1);
            ++nkv;
        }
        for (int qt = qt0; qt < n_qt; ++qt, ++it) {
            const int st = it % ST;
            const int m0 = qt * BM;
            const unsigned q_tile = sQ + 2 * st * QT, do_tile = q_tile + QT;
            mbar_wait_spin(full + 8 * st, (it / ST) & 1);
            // S^T = K Q^T, dP^T = V dO^T.
            wgx_fence();
            abw_mul_ss<E, BM, BN, D, ABW_DESC_ADD_FUSED>(s, sK + c * 64 * 128, q_tile);
            wgx_commit();
            abw_mul_ss<E, BM, BN, D, ABW_DESC_ADD_FUSED>(dp, sV + c * 64 * 128, do_tile);
            wgx_commit();
            wgx_wait1();
            wgx_fence_acc(s);
            const float* l2 = lsh + 2 * st * BM;
            // Masked: keys later than a query sees (causal) and keys past Nk (zero rows of K and
            // V, whose P = exp(-lse) must not reach dS: dQ sums dS over every row of the tile).
            const bool part = ragged || (causal && (long long)k0 + 63 > (long long)m0 + shift);
#pragma unroll
            for (int i = 0; i < BM / 8; ++i) {
                const float2 l = *reinterpret_cast<const float2*>(l2 + 8 * i + 2 * quad);
#pragma unroll
                for (int rr = 0; rr < 2; ++rr) {
                    float p0 = ex2_approx(fmaf(s[4 * i + 2 * rr], sl2, -l.x));
                    float p1 = ex2_approx(fmaf(s[4 * i + 2 * rr + 1], sl2, -l.y));
                    if (part) {
                        // Keys <= lim0 (lim1) seen by query column 0 (1) of the pair.
                        const long long lq = causal ? (long long)(m0 + 8 * i + 2 * quad) + shift : (long long)Nk;
                        const long long lim0 = lq < Nk - 1 ? lq : Nk - 1, lim1 = lq + 1 < Nk - 1 ? lq + 1 : Nk - 1;
                        const long long key = kr + 8 * rr;
                        if (key > lim0) p0 = 0.0f;
                        if (key > lim1) p1 = 0.0f;
                    }
                    s[4 * i + 2 * rr] = p0;
                    s[4 * i + 2 * rr + 1] = p1;
                }
            }
            wgx_wait0();
            wgx_fence_acc(dp);
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
            // dS^T into the shared tile: key row kl (+ 8), queries 16 kb + 8 h + 2 quad (+ 1) in
            // atom (16 kb) / 64; both warpgroups' products of the previous step that read the
            // tile are done (each waited for its own before this barrier).
            if (ABF_MBAR_SYNC) {
                if (it > 0) mbar_wait_spin(ds_free, (it - 1) & 1);
            } else if (ABF_LAB_SKIP < 3) {
                abf_consumers_sync(1);
            }
#pragma unroll
            for (int kb = 0; kb < KB && ABF_LAB_SKIP < 3; ++kb)
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int rr = 0; rr < 2; ++rr) {
                        const int col = (16 * kb + 8 * h) % 64, row = kl + 8 * rr;
                        const unsigned addr = sdS + (16 * kb / 64) * (BN * 128) + row * 128 +
                                              ((((col * 2) >> 4) ^ (row & 7)) << 4) + 4 * quad;
                        asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(pd[kb][2 * h + rr]) : "memory");
                    }
            abf_fence_async_shared();
            if (ABF_MBAR_SYNC)
                mbar_arrive(ds_full);
            else if (ABF_LAB_SKIP < 3)
                abf_consumers_sync(2);
            // dV += P^T dO, dK += dS^T Q (registers), dQ block = dS K (shared, both transposed).
            // gq is defined here, not before the loop, so that its registers are free while S^T
            // and dP^T are live (its first product overwrites it).
#pragma unroll
            for (int i = 0; i < 32; ++i) gq[i] = 0.0f;
            wgx_fence();
            abw_mul_rs<E, KB, BM, D, ABW_DESC_ADD_FUSED>(gv, pa, do_tile);
            abw_mul_rs<E, KB, BM, D, ABW_DESC_ADD_FUSED>(gk, pd, q_tile);
            if (ABF_MBAR_SYNC) {  // the other warpgroup's half of dS, while dV and dK run
                wgx_commit();
                mbar_wait_spin(ds_full, it & 1);
                wgx_fence();
            }
#pragma unroll
            for (int kk = 0; kk < BN / 16 && ABF_LAB_SKIP < 2; ++kk)
                WgxMma<typename E::Tag, 64, 1, 1>::run(gq, wgx_desc(sdS + qa * (BN * 128) + kk * 16 * 128, BN * 128, 1024),
                                                       wgx_desc(sK + ka * (BN * 128) + kk * 16 * 128, BN * 128, 1024),
                                                       kk > 0);
            wgx_commit();
            wgx_wait0();
            wgx_fence_acc(gv);
            wgx_fence_acc(gk);
            wgx_fence_acc(gq);
            if (ABF_MBAR_SYNC) mbar_arrive(ds_free);
            mbar_arrive(empty + 8 * st);  // this thread's reads of the stage (Q, dO, lse, delta) are done
            // The dQ block into the staging tile once the previous step's bulk reads are done:
            // gq[4 i + 2 rr + x] is row 16 warp + lane / 4 + 8 rr of the block, column 8 i + 2 quad + x.
            if (it > 0) mbar_wait_spin(dq_empty, (it - 1) & 1);
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int rr = 0; rr < 2; ++rr) {
                    const int row = 64 * qa + 16 * warp + lane / 4 + 8 * rr, col = 64 * ka + 8 * i + 2 * quad;
                    asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(sdQ + row * DQR + col * 4),
                                 "f"(gq[4 * i + 2 * rr]), "f"(gq[4 * i + 2 * rr + 1])
                                 : "memory");
                }
            abf_fence_async_shared();
            mbar_arrive(ORD && (it & 1) ? dq_full_odd : dq_full);
        }
        // Every product that reads K and V is done (the ordered kernels: every tile's K, V barrier
        // phase, those with nothing loaded too).
        if ((ORD || qt0 < n_qt) && lane == 0) mbar_arrive(kv_empty);

        unsigned short* dkb = dk + w.b * dk_sb + w.h * dk_sh;
        unsigned short* dvb = (dv_at >= 0 ? dk + dv_at : dv) + w.b * dv_sb + w.h * dv_sh;
        abw_store<E, D>(gk, dkb, dk_sr, kr, Nk, scale, quad);
        abw_store<E, D>(gv, dvb, dv_sr, kr, Nk, 1.0f, quad);
        if constexpr (ORD)
            t = ring_tile(nkv);
        else
            t += gridDim.x;
    }
}

// q, k, v, dout are not read here (the tensor maps address them); they are parameters so that a
// launch orders their buffers like any other kernel argument.
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_fused_wgmma_d64_bf16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const bf16_t* __restrict__ q, const bf16_t* __restrict__ k, const bf16_t* __restrict__ v,
                            const bf16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, float* __restrict__ dq_acc, bf16_t* __restrict__ dk,
                            bf16_t* __restrict__ dv, int B, int H, int Nq, int Nk, long long dk_sb, long long dk_sh,
                            long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr, long long dv_at,
                            float scale, int causal) {
    attn_bwd_fused_wgmma<AbwBF16, 64, false>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dq_acc, dk, dv, B, H, Nq, Nk, dk_sb, dk_sh,
                                     dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal, nullptr, 0);
}
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_fused_wgmma_d128_bf16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const bf16_t* __restrict__ q, const bf16_t* __restrict__ k, const bf16_t* __restrict__ v,
                            const bf16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, float* __restrict__ dq_acc, bf16_t* __restrict__ dk,
                            bf16_t* __restrict__ dv, int B, int H, int Nq, int Nk, long long dk_sb, long long dk_sh,
                            long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr, long long dv_at,
                            float scale, int causal) {
    attn_bwd_fused_wgmma<AbwBF16, 128, false>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dq_acc, dk, dv, B, H, Nq, Nk, dk_sb, dk_sh,
                                     dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal, nullptr, 0);
}
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_fused_wgmma_d64_f16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const f16_t* __restrict__ q, const f16_t* __restrict__ k, const f16_t* __restrict__ v,
                            const f16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, float* __restrict__ dq_acc, f16_t* __restrict__ dk,
                            f16_t* __restrict__ dv, int B, int H, int Nq, int Nk, long long dk_sb, long long dk_sh,
                            long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr, long long dv_at,
                            float scale, int causal) {
    attn_bwd_fused_wgmma<AbwF16, 64, false>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dq_acc, dk, dv, B, H, Nq, Nk, dk_sb, dk_sh,
                                     dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal, nullptr, 0);
}
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_fused_wgmma_d128_f16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const f16_t* __restrict__ q, const f16_t* __restrict__ k, const f16_t* __restrict__ v,
                            const f16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, float* __restrict__ dq_acc, f16_t* __restrict__ dk,
                            f16_t* __restrict__ dv, int B, int H, int Nq, int Nk, long long dk_sb, long long dk_sh,
                            long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr, long long dv_at,
                            float scale, int causal) {
    attn_bwd_fused_wgmma<AbwF16, 128, false>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dq_acc, dk, dv, B, H, Nq, Nk, dk_sb, dk_sh,
                                     dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal, nullptr, 0);
}

// The ordered one pass (ORD: dq's adds in key-tile order, bitwise reproducible; AttentionBwdDq::Ordered).
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_fused_ord_wgmma_d64_bf16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const bf16_t* __restrict__ q, const bf16_t* __restrict__ k, const bf16_t* __restrict__ v,
                            const bf16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, float* __restrict__ dq_acc, bf16_t* __restrict__ dk,
                            bf16_t* __restrict__ dv, int B, int H, int Nq, int Nk, long long dk_sb, long long dk_sh,
                            long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr, long long dv_at,
                            float scale, int causal, float* __restrict__ order_words, int kt_major) {
    attn_bwd_fused_wgmma<AbwBF16, 64, true>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dq_acc, dk, dv, B, H, Nq, Nk, dk_sb,
                                     dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal,
                                     reinterpret_cast<int*>(order_words), kt_major);
}
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_fused_ord_wgmma_d128_bf16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const bf16_t* __restrict__ q, const bf16_t* __restrict__ k, const bf16_t* __restrict__ v,
                            const bf16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, float* __restrict__ dq_acc, bf16_t* __restrict__ dk,
                            bf16_t* __restrict__ dv, int B, int H, int Nq, int Nk, long long dk_sb, long long dk_sh,
                            long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr, long long dv_at,
                            float scale, int causal, float* __restrict__ order_words, int kt_major) {
    attn_bwd_fused_wgmma<AbwBF16, 128, true>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dq_acc, dk, dv, B, H, Nq, Nk, dk_sb,
                                     dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal,
                                     reinterpret_cast<int*>(order_words), kt_major);
}
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_fused_ord_wgmma_d64_f16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const f16_t* __restrict__ q, const f16_t* __restrict__ k, const f16_t* __restrict__ v,
                            const f16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, float* __restrict__ dq_acc, f16_t* __restrict__ dk,
                            f16_t* __restrict__ dv, int B, int H, int Nq, int Nk, long long dk_sb, long long dk_sh,
                            long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr, long long dv_at,
                            float scale, int causal, float* __restrict__ order_words, int kt_major) {
    attn_bwd_fused_wgmma<AbwF16, 64, true>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dq_acc, dk, dv, B, H, Nq, Nk, dk_sb,
                                     dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal,
                                     reinterpret_cast<int*>(order_words), kt_major);
}
// @readonly: q, k, v, dout
extern "C" __global__ void __launch_bounds__(ABW_THREADS, 1)
    attn_bwd_fused_ord_wgmma_d128_f16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const __grid_constant__ TensorMap tmdO,
                            const f16_t* __restrict__ q, const f16_t* __restrict__ k, const f16_t* __restrict__ v,
                            const f16_t* __restrict__ dout, const float* __restrict__ lse,
                            const float* __restrict__ delta, float* __restrict__ dq_acc, f16_t* __restrict__ dk,
                            f16_t* __restrict__ dv, int B, int H, int Nq, int Nk, long long dk_sb, long long dk_sh,
                            long long dk_sr, long long dv_sb, long long dv_sh, long long dv_sr, long long dv_at,
                            float scale, int causal, float* __restrict__ order_words, int kt_major) {
    attn_bwd_fused_wgmma<AbwF16, 128, true>(&tmQ, &tmK, &tmV, &tmdO, lse, delta, dq_acc, dk, dv, B, H, Nq, Nk, dk_sb,
                                     dk_sh, dk_sr, dv_sb, dv_sh, dv_sr, dv_at, scale, causal,
                                     reinterpret_cast<int*>(order_words), kt_major);
}
