// attention_tile_order.cuh — the order in which the Hopper attention kernels
// (attention_wgmma.cu's forward, attention_wgmma_bwd.cu's dq and dk/dv; the one-pass
// attention_wgmma_bwd_fused.cu keeps one section of all heads, abw_tile_all_heads) walk their
// tiles: tile t = blockIdx.x, + gridDim.x, ... is head bh's tile of rank `rank`, where rank 0 is
// the head's heaviest tile (the caller maps ranks to its query or key tiles).
//
//   * Full attention: head by head, ranks in order. Every tile of a head does the same work, and
//     the CTAs running together share one or two heads' streamed operands in L2.
//   * Causal: tiles differ in work (a query tile sees as many key tiles as lie on or before the
//     diagonal), so a static stride over one head's tiles in order handed some CTAs twice the work
//     of others; they go heaviest first (the longest-processing-time order, which the stride
//     spreads evenly). Heaviest first across *all* heads put the 132 CTAs running together on 132
//     different heads, each streaming its own head's operands: at 4 x 16 x 4096 x 128 that is
//     132 x 2 MiB, past the L2, so every tile read its operands from DRAM. The heads are therefore
//     taken in sections of about as many heads as ATTN_L2_SECTION_BYTES of streamed operands
//     hold (`head_bytes` a head), heaviest first within a section (FlashAttention-3's LPT
//     scheduler does the same with 32 MiB sections), so the operands of a section stay in L2
//     while its tiles run. Where the tiles are long (a head's heaviest one streams 2048 rows or
//     more) the host launches one CTA per tile instead of a persistent grid
//     (ops/attention/fwd_wgmma.rs, `grid`): the block scheduler then hands each SM the next tile
//     in this order as it frees up, which balances the SMs whatever the sections.
#pragma once

// Streamed bytes of the heads of one causal section: a third of an H100's or H200's 50 MiB L2,
// each half of which sits nearer one half of the SMs and may hold its own copy of a line. Measured
// on an H200 (kernels/TUNING.md, session 50): 16 MiB ran the causal sweep 0-4% faster than
// 32 MiB in most cases, 8 MiB and one head per section lost up to 12% at 2 x 12 x 4097 x 64.
#define ATTN_L2_SECTION_BYTES (16ll << 20)

struct AttnTileOrder {
    long long bh;  // b * H + h
    int rank;      // 0: the head's heaviest tile
};

// Heads in a causal section (1 for full attention, which does not use sections): about as many
// as ATTN_L2_SECTION_BYTES hold at head_bytes a head (the bytes a tile of the head streams through
// its pipeline at most: the other operand's rows); on a persistent grid (fewer CTAs than tiles) at
// least four waves of the grid's tiles, which a static stride needs to balance the CTAs; at least
// 1; the heads spread evenly over the sections that takes (the last one at most sections - 1
// heads short, not a stub of a few heads whose heavy tiles would start last). Computed once per
// kernel, in 32 bits: the host keeps B * H * max(Nq, Nk) below 2^31 (see attn_tile_order).
__device__ __forceinline__ int attn_section_heads(int causal, long long bhs, int n_t, long long head_bytes) {
    if (!causal) return 1;
    const unsigned b = (unsigned)bhs, budget = (unsigned)ATTN_L2_SECTION_BYTES;
    unsigned g = head_bytes <= 0 ? b : (head_bytes >= budget ? 1u : budget / (unsigned)head_bytes);
    const unsigned tiles = b * (unsigned)n_t;
    if (gridDim.x < tiles) {
        const unsigned wave_heads = (4u * gridDim.x + n_t - 1) / n_t;
        g = g < wave_heads ? wave_heads : g;
    }
    g = g > b ? b : (g < 1u ? 1u : g);
    const unsigned sections = (b + g - 1) / g;
    return (int)((b + sections - 1) / sections);
}

// Tile t of bhs = B * H heads of n_t tiles each; g from attn_section_heads. Causal problems in
// 32-bit arithmetic (64-bit divisions cost the backward kernels' consumers spills): the host
// runs these kernels only where B * H * max(Nq, Nk) < 2^31 (ops/attention/fwd_wgmma.rs,
// `tiles_misfit`), so every tile index and every product below is below 2^31.
__device__ __forceinline__ AttnTileOrder attn_tile_order(long long t, int n_t, long long bhs, int causal, int g) {
    AttnTileOrder o;
    if (!causal) {
        o.bh = t / n_t;
        o.rank = (int)(t - o.bh * n_t);
        return o;
    }
    const unsigned tt = (unsigned)t, per = (unsigned)g * (unsigned)n_t;  // tiles of a full section
    const unsigned sec = tt / per;                                         // all but the last are full
    const unsigned first = sec * (unsigned)g;                              // its first head
    const unsigned left = (unsigned)bhs - first;
    const unsigned heads = left < (unsigned)g ? left : (unsigned)g;        // its heads
    const unsigned local = tt - sec * per;
    const unsigned rank = local / heads;
    o.bh = (long long)(first + (local - rank * heads));
    o.rank = (int)rank;
    return o;
}
