// attention_wgmma_bwd.cuh — what the Hopper attention backward's kernels share
// (attention_wgmma_bwd.cu: dq and dk/dv; attention_wgmma_bwd_fused.cu: dk/dv with dq added into an
// f32 workspace): the tile sizes and shared-memory budgets, the element types' register-operand
// products, the TMA tile loads, the products on shared tiles, the fragment packing, the stores
// and the tile order. The rules the kernels follow are in attention_wgmma_bwd.cu's header.
#pragma once

#include "attention_tile_order.cuh"
#include "dtype.cuh"
#include "ex2.cuh"
#include "shared_address.cuh"
#include "tma.cuh"
#include "wgmma_ops.cuh"

#define ABW_THREADS 384  // producer + 2 consumers
#define ABW_BOX 64       // rows of one TMA box (64 rows x 64 columns x 2 bytes = 8 KiB)
#define ABW_KV_BN 128    // keys per dK/dV CTA (2 consumer warpgroups of 64)
#define ABW_DQ_BM 128    // query rows per dQ CTA (2 consumer warpgroups of 64)
// Query rows per dK/dV step and keys per dQ step: 64. Lab builds may try 128 at D = 64
// (-DABW_KV_BM64=128 -DABW_KV_STAGES64=4, -DABW_DQ_BN64=128; D = 128 has no registers left for
// them): the op's Rust side assumes the defaults.
#ifndef ABW_KV_BM64
#define ABW_KV_BM64 64
#endif
#ifndef ABW_DQ_BN64
#define ABW_DQ_BN64 64
#endif
#ifndef ABW_KV_STAGES64
#define ABW_KV_STAGES64 6
#endif
// ABW_KV_OVERLAP (on; D = 64 with 64-row steps only: elsewhere ptxas serialises the wgmma for
// want of registers, C7512): dk/dv leaves dV += P^T dO, dK += dS^T Q of one query tile in flight
// while it issues the next tile's S^T and dP^T (as dq does with dQ += dS K). The dk/dv kernel
// 8-15% faster at D = 64 on an H200 (kernels/TUNING.md); -DABW_KV_OVERLAP=0 for lab comparisons.
#ifndef ABW_KV_OVERLAP
#define ABW_KV_OVERLAP 1
#endif
// ABW_KV_TURNS (on; 0 for lab comparisons): at D = 64 the two consumer warpgroups of the dk/dv
// kernel (with ABW_KV_OVERLAP) take turns issuing their products, as the forward's do at D = 64
// (warpgroup_turns.cuh): a turn is one query step's dV, dK += ... then the next step's S^T, dP^T;
// a key tile's first step is a turn of its own. On an H200 (kernels/TUNING.md, session 62) the
// dk/dv kernel runs 5-8% faster with them; the dq kernel ran 14-22% slower with the same turns
// (tuning/attn_bwd_dq_turns.patch, measured and dropped).
#ifndef ABW_KV_TURNS
#define ABW_KV_TURNS 1
#endif
#define ABW_KV_BM(D) ((D) == 128 ? 64 : ABW_KV_BM64)
#define ABW_DQ_BN(D) ((D) == 128 ? 64 : ABW_DQ_BN64)
// Ring depths: dK/dV 4 stages of Q + dO at D = 128 (K, V 64 KiB + 4 x 32 KiB = 192 KiB), 6 at
// D = 64 (32 + 6 x 16 = 128 KiB); dQ 4 stages of K + V at D = 128 (Q, dO 64 + 4 x 32 = 192
// KiB), 6 at D = 64 (32 + 6 x 16 = 128 KiB).
#define ABW_KV_STAGES(D) ((D) == 128 ? 4 : ABW_KV_STAGES64)
#define ABW_DQ_STAGES(D) ((D) == 128 ? 4 : 6)
// Bytes of an R-row tile of D columns: D / 64 column atoms of R rows of 128 bytes.
#define ABW_TILE(R, D) ((D) / 64 * (R) * 128)
// dK/dV: K, V tiles; per stage a Q and a dO tile; per stage lse and delta (BM floats each); then
// the barriers (and up to 1023 bytes to reach a 1024-byte boundary first).
#define ABW_KV_SMEM_BYTES(D)                                                                  \
    (2 * ABW_TILE(ABW_KV_BN, D) + ABW_KV_STAGES(D) * (2 * ABW_TILE(ABW_KV_BM(D), D) + 8 * ABW_KV_BM(D)) + \
     1024 + 256)
// dQ: Q, dO tiles; per stage a K and a V tile; then the barriers.
#define ABW_DQ_SMEM_BYTES(D) (2 * ABW_TILE(ABW_DQ_BM, D) + ABW_DQ_STAGES(D) * 2 * ABW_TILE(ABW_DQ_BN(D), D) + 1024 + 256)

// The element types: the wgmma_ops.cuh tag (for the shared-memory products), the products with A
// from registers, the pair rounding (lo in the low half).
#define ABW_ELEMENT(NAME, TAG, PTX)                                                                            \
    struct NAME {                                                                                              \
        typedef TAG Tag;                                                                                       \
        /* d (64 x 128) += A (64 x 16, registers) B (16 x 128, shared, N-major) */                             \
        static __device__ __forceinline__ void rs(float (&d)[64], const unsigned (&a)[4], unsigned long long db) { \
            asm volatile("{ .reg .pred p; setp.ne.b32 p, %69, 0;\n"                                            \
                         "wgmma.mma_async.sync.aligned.m64n128k16.f32." PTX "." PTX " " WGX_R64                 \
                         ", {%64, %65, %66, %67}, %68, p, 1, 1, 1; }"                                          \
                         : WGX_A64                                                                              \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));                       \
        }                                                                                                      \
        /* d (64 x 64) += A (64 x 16, registers) B (16 x 64, shared, N-major) */                               \
        static __device__ __forceinline__ void rs(float (&d)[32], const unsigned (&a)[4], unsigned long long db) { \
            asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0;\n"                                            \
                         "wgmma.mma_async.sync.aligned.m64n64k16.f32." PTX "." PTX " " WGX_R32                  \
                         ", {%32, %33, %34, %35}, %36, p, 1, 1, 1; }"                                          \
                         : WGX_A32                                                                              \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));                       \
        }                                                                                                      \
        static __device__ __forceinline__ unsigned pack(float lo, float hi) {                                  \
            unsigned v;                                                                                        \
            asm("cvt.rn." PTX "x2.f32 %0, %1, %2;" : "=r"(v) : "f"(hi), "f"(lo));                              \
            return v;                                                                                          \
        }                                                                                                      \
    };
ABW_ELEMENT(AbwBF16, WgxBF16, "bf16")
ABW_ELEMENT(AbwF16, WgxF16, "f16")
#undef ABW_ELEMENT

// The 64-row boxes of an R-row tile starting at row r0 of an N-row operand that hold any row:
// boxes wholly past N are not copied (their rows of the tile then hold stale data, which only
// ever reaches rows of the results that are not stored: rows past Nq of dQ, past Nk of dK, dV).
template <int R>
__device__ __forceinline__ int abw_boxes(int r0, int N) {
    const int left = N - r0;  // >= 1: every tile starts inside the operand
    const int n = (left + ABW_BOX - 1) / ABW_BOX;
    return n < R / ABW_BOX ? n : R / ABW_BOX;
}

// The first `boxes` 64-row boxes of rows r0 .. r0 + R - 1 of (b, h) of a [B, H, N, D] map into
// the tile at dst (D / 64 column atoms of R rows of 128 bytes, swizzled), completing on bar.
template <int R, int D>
__device__ __forceinline__ void abw_load_tile(unsigned dst, const TensorMap* map, int r0, int boxes, int h, int b,
                                              unsigned bar) {
#pragma unroll
    for (int a = 0; a < D / 64; ++a)
#pragma unroll
        for (int x = 0; x < R / ABW_BOX; ++x)
            if (x < boxes)
                asm volatile(
                    "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, "
                    "%4, %5}], [%6];" ::"r"(dst + a * R * 128 + x * ABW_BOX * 128),
                    "l"((unsigned long long)map), "r"(64 * a), "r"(r0 + ABW_BOX * x), "r"(h), "r"(b), "r"(bar)
                    : "memory");
}

// ABW_DESC_ADD_KV, _DQ, _FUSED: the dk/dv, dq and one-pass kernels build each k step's
// descriptors by one add to the tile's (wgx_desc_add), as the forward does since session 63, or
// (0) each from its address. Session 63's lab run (H200, D = 64): dk/dv 4.8-5.1% faster, dq
// 2.9-3.1% slower, the one pass 1.3-3.0% faster (the ordered one at D = 128 6%); kernels/
// TUNING.md. Shipped: 1 for dk/dv and the one pass, 0 for dq. ABW_DESC_ADD sets all three (lab).
#ifdef ABW_DESC_ADD
#define ABW_DESC_ADD_KV ABW_DESC_ADD
#define ABW_DESC_ADD_DQ ABW_DESC_ADD
#define ABW_DESC_ADD_FUSED ABW_DESC_ADD
#endif
#ifndef ABW_DESC_ADD_KV
#define ABW_DESC_ADD_KV 1
#endif
#ifndef ABW_DESC_ADD_DQ
#define ABW_DESC_ADD_DQ 0
#endif
#ifndef ABW_DESC_ADD_FUSED
#define ABW_DESC_ADD_FUSED 1
#endif

// d (64 x N) = A (64 x 16 k, rows a_row0 .. of tile `ta` of TA rows) B^T (B: N rows of tile `tb`
// of N rows), k = 16 * (D / 16): both K-major in shared memory. Replaces d (first step unscaled).
template <class E, int N, int TA, int D, bool ADD>
__device__ __forceinline__ void abw_mul_ss(float (&d)[N / 2], unsigned ta, unsigned tb) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        const unsigned ka = (kk / 4) * TA * 128 + (kk % 4) * 32, kb = (kk / 4) * N * 128 + (kk % 4) * 32;
        if constexpr (ADD)
            WgxMma<typename E::Tag, N, 0, 0>::run(d, wgx_desc_add(wgx_desc(ta, 16, 1024), ka),
                                                  wgx_desc_add(wgx_desc(tb, 16, 1024), kb), kk > 0);
        else
            WgxMma<typename E::Tag, N, 0, 0>::run(d, wgx_desc(ta + ka, 16, 1024), wgx_desc(tb + kb, 16, 1024),
                                                  kk > 0);
    }
}

// d (64 x D) += A (64 x 16 KB, registers) B (the 16 KB rows of tile tb of R rows, N-major).
template <class E, int KB, int R, int D, bool ADD>
__device__ __forceinline__ void abw_mul_rs(float (&d)[D / 2], const unsigned (&a)[KB][4], unsigned tb) {
#pragma unroll
    for (int kb = 0; kb < KB; ++kb) {
        if constexpr (ADD)
            E::rs(d, a[kb], wgx_desc_add(wgx_desc(tb, R * 128, 1024), kb * 16 * 128));
        else
            E::rs(d, a[kb], wgx_desc(tb + kb * 16 * 128, R * 128, 1024));
    }
}

// The accumulator layout of 64 x 16 KB (f32) rounded into A-operand fragments: for the k16 step
// kb, the 8-column blocks 2 kb and 2 kb + 1.
template <class E, int KB>
__device__ __forceinline__ void abw_pack(unsigned (&a)[KB][4], const float (&s)[8 * KB]) {
#pragma unroll
    for (int kb = 0; kb < KB; ++kb) {
        a[kb][0] = E::pack(s[8 * kb + 0], s[8 * kb + 1]);
        a[kb][1] = E::pack(s[8 * kb + 2], s[8 * kb + 3]);
        a[kb][2] = E::pack(s[8 * kb + 4], s[8 * kb + 5]);
        a[kb][3] = E::pack(s[8 * kb + 6], s[8 * kb + 7]);
    }
}

// Rows row0 and row0 + 8 (those < N) of a 64 x D accumulator times mul, rounded, into the
// [.., D] rows at base, sr elements apart (thread t of the warpgroup holds columns 8 i + 2 (t % 4),
// + 1).
template <class E, int D>
__device__ __forceinline__ void abw_store(const float (&acc)[D / 2], unsigned short* base, long long sr,
                                          long long row0, long long N, float mul, int quad) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
        const long long row = row0 + 8 * rr;
        if (row >= N) continue;
        unsigned short* p = base + row * sr + 2 * quad;
#pragma unroll
        for (int i = 0; i < D / 8; ++i)
            *reinterpret_cast<unsigned*>(p + 8 * i) = E::pack(acc[4 * i + 2 * rr] * mul, acc[4 * i + 2 * rr + 1] * mul);
    }
}

// The (b, h) and rank of tile t (attention_tile_order.cuh: causal problems heaviest tile first
// within sections of g heads, from attn_section_heads; full ones head by head). `tile` is 0 for
// the heaviest.
struct AbwTile {
    int b, h, tile;
    long long bh;
};
__device__ __forceinline__ AbwTile abw_tile(long long t, int n_t, int B, int H, int causal, int g) {
    AbwTile w;
    const AttnTileOrder o = attn_tile_order(t, n_t, (long long)B * H, causal, g);
    w.bh = o.bh;
    w.tile = o.rank;
    w.b = (int)(w.bh / H);
    w.h = (int)(w.bh - (long long)w.b * H);
    return w;
}

// abw_tile's order with one section of all B * H heads (heaviest first across all heads), in the
// 64-bit arithmetic it had before the sections: the one-pass kernel (attention_wgmma_bwd_fused.cu)
// keeps it, since the section arithmetic costs its D = 128 consumers (232 registers, all but
// spent) a spill in every arrangement tried (kernels/TUNING.md, session 50).
__device__ __forceinline__ AbwTile abw_tile_all_heads(long long t, int n_t, int B, int H, int causal) {
    AbwTile w;
    long long rank;
    if (causal) {
        const long long bhs = (long long)B * H;
        rank = t / bhs;
        w.bh = t - rank * bhs;
    } else {
        w.bh = t / n_t;
        rank = t - w.bh * n_t;
    }
    w.tile = (int)rank;
    w.b = (int)(w.bh / H);
    w.h = (int)(w.bh - (long long)w.b * H);
    return w;
}
