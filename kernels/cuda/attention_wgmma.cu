// attention_wgmma.cu — the fused attention forward on Hopper (FlashAttention-3's structure): TMA
// copies of Q, K and V tiles, warpgroup MMA (wgmma) for both products, a producer warpgroup and
// two (at D = 64 also three) consumer warpgroups. f16 / bf16 q, k, v with f32 accumulation, head dimensions 64 and 128.
// Same semantics as attention.cu's attn_fwd_<dt> and attention_mma.cu's kernels: strided q/k/v
// and out, dense lse [B, H, Nq] (f32), bottom-right aligned causal mask (query i sees
// key j iff j <= i + Nk - Nq), a row that sees no key gives out = 0 and lse = -inf.
//
// gen-ptx: archs=90a
// gen-ptx: options=-default-device
// (NVRTC compiles a lambda inside a __device__ function, the key tile's body, as a host function
// unless unannotated functions default to __device__; nothing in this file is host code.)
//
// Host contract (kernels/src/ops/attention.rs checks it before every launch):
//   * block AW_THREADS_NC(NC) exactly (384 threads; 512 for the d64_m192 kernels, NC = 3), any
//     grid >= 1 (a grid-stride loop over the B * H * ceil(Nq / AW_BM_NC(NC)) query tiles of 128,
//     or 192, rows), dynamic shared memory AW_SMEM_NC(D, NC) (the function's limit raised first);
//   * tmQ, tmK, tmV: 4-D tensor maps over q, k, v with dims {D, N, H, B} (N = Nq for q, Nk for k
//     and v), the views' row, head and batch strides (bytes, multiples of 16), box {64, 128, 1, 1},
//     128-byte swizzle, zero fill outside; q, k, v are passed too (the kernel reads only through
//     the maps) so that a launch orders their buffers;
//   * out the [B, H, Nq, D] view with element strides o_sb, o_sh, o_sr (unit last stride) and
//     4-byte aligned rows (the op asks for 16-byte aligned out and strides multiples of 8),
//     lse dense [B, H, Nq].
//
// Design (per CTA: 1 + NC warpgroups; a query tile of 64 NC rows of one (b, h); key tiles of 128):
//   * Warpgroup 0 produces: it gives its registers back (setmaxnreg) and one thread drives the
//     copy engine: the Q tile once per query tile (q_full / q_empty barriers), then every key
//     tile's K and V into a ring of AW_STAGES(D) stages (k_full, v_full: bytes; kv_empty: one arrival
//     per consumer warp once it has read the stage). K and V have their own barriers so that
//     S = Q K^T can start before V has landed.
//   * Warpgroups 1 .. NC consume: warpgroup c owns query rows 64 c .. 64 c + 63 of the tile.
//     S = Q K^T is wgmma m64n128k16 with both operands in shared memory (K-major), D / 16 of them
//     per key tile; the online softmax runs on the f32 accumulators in registers (the row max over
//     the 4 lanes of a row by shuffles; the scale times log2 e folded into ex2's argument); P is
//     rounded to f16 / bf16 in registers and is the A operand of O += P V (wgmma m64nDk16 with A
//     from registers: the S accumulator layout of two adjacent n8 blocks is exactly one k16 step
//     of A), V the B operand read N-major (transposed) from shared memory.
//   * Overlap: O += P V of key tile j is committed and not waited for; the warpgroup goes on to
//     wait for K of tile j + 1 and issue its S product, and waits for both groups together. The
//     other consumer warpgroups' softmax fills the tensor cores meanwhile. At D = 64 the
//     consumers take turns (FlashAttention-3's ping-pong, one named barrier each): a turn issues
//     O += P V of tile j and S of tile j + 1 (a query tile's first S is a turn of its own), then
//     passes, so one warpgroup's softmax runs while another's products do.
//   * Causal: key tiles past the last key any row of the CTA sees are never copied; a warpgroup
//     masks only tiles its rows see in part (or not at all: it never branches around a product).
//   * Persistent: a CTA walks query tiles blockIdx.x, + gridDim.x, ...; the producer loads the
//     next tile's Q as soon as every consumer's last S product of the present one is done
//     (q_empty), so copies overlap the epilogue. Full attention walks the tiles head by head (the
//     CTAs running together share K and V in L2); causal, heaviest first within sections of heads
//     whose K and V fit in L2 (attention_tile_order.cuh).
//   * Epilogue: O / l rounded once, stored straight from the accumulators (4-byte pairs at D = 64;
//     at D = 128 regrouped within each quad of lanes into 16-byte stores);
//     lse = (m + log2 l) ln 2.
// No atomics: deterministic.
#include "attention_tile_order.cuh"
#include "dtype.cuh"
#include "ex2.cuh"
#include "shared_address.cuh"
#include "tma.cuh"
#include "warpgroup_turns.cuh"
#include "wgmma_ops.cuh"

#define AW_BN 128      // keys per tile
#define AW_ATOM 16384  // one 64-column (128-byte) swizzled box of 128 rows
// Consumer warpgroups NC: 2 (query tiles of 128 rows, 384 threads, the consumers at 240
// registers) for every kernel; at D = 64 also 3 (`attn_fwd_wgmma_d64_m192_*`: FlashAttention-3's
// 192-row tile, 512 threads, the consumers at 160 registers, the Q tile as two boxes of 128 rows
// of which the second is half used). The host picks per problem (kernels/src/ops/attention/
// fwd_wgmma.rs: 192-row tiles do ~16% more work a second on an H200 but pad and mask more).
#define AW_BM_NC(NC) (64 * (NC))                    // query rows per CTA
#define AW_THREADS_NC(NC) (128 * ((NC) + 1))        // producer + consumers
#define AW_QBOXES_NC(NC) ((AW_BM_NC(NC) + 127) / 128)  // 128-row boxes in the Q tile
// K/V stages: 3 at D = 128 (224 KiB with the Q tile, of the 227 an H100 or H200 block may use), 4
// at D = 64 (144 KiB).
#define AW_STAGES(D) ((D) == 128 ? 3 : 4)
// The consumers' turns (see Overlap above): at D = 64, measured 1-8.5% faster on an H200 (session
// 61: tuning/attn_fwd_pingpong.patch's lab builds, where turns of S alone were slower); at D = 128,
// whose timings sit under the power cap, both ways moved within their noise, so it keeps the free
// order (-DAW_TURNS_D128=1 builds it with turns, for the lab).
#ifndef AW_TURNS_D128
#define AW_TURNS_D128 0
#endif
#define AW_TURNS(D) ((D) == 64 || AW_TURNS_D128)
// AW_SKIP (1 shipped): at D = 64 a consumer stops at the last key tile its own rows see and runs
// no products for the CTA's later ones (rows of padding past Nq see none): it still waits for each
// of those stages to fill, releases it, and takes its turns, so the ring and the turns stay in
// step. With 192-row tiles that is the causal diagonal's masked third and the ragged last tile's
// padding (512 queries: 576 rows, the last consumer idle). Session 65 (kernels/TUNING.md): the
// 192-row causal forward 0.86-0.93x the time, the 128-row one's ragged last tile (4097 queries)
// 0.95x; at D = 128, where 128-row tiles leave a consumer nothing to skip unless Nq != Nk, it only
// cost 1% (-DAW_SKIP_D128=1 builds it there, for the lab; -DAW_SKIP=0 turns it off).
#ifndef AW_SKIP
#define AW_SKIP 1
#endif
#ifndef AW_SKIP_D128
#define AW_SKIP_D128 0
#endif
#define AW_SKIPS(D) (AW_SKIP && ((D) == 64 || AW_SKIP_D128))
// A compile-time flag as a value (the key tile's body takes its HALF as one).
template <bool B>
struct aw_bool {
    static constexpr bool value = B;
};
// Q tile (QBOXES boxes of 128 rows), then per stage a K tile and a V tile, each D / 64 atoms;
// then the barriers (and up to 1023 bytes to reach a 1024-byte boundary first).
#define AW_TILE_BYTES(D) ((D) / 64 * AW_ATOM)
#define AW_SMEM_NC(D, NC) ((AW_QBOXES_NC(NC) + 2 * AW_STAGES(D)) * AW_TILE_BYTES(D) + 1024 + 256)

// ---- wgmma (descriptors, fence / commit / wait and the register lists: wgmma_ops.cuh) ---------

// The element types: the PTX type name, the pair rounding (lo in the low half).
#define AW_ELEMENT(NAME, STORAGE, PTX)                                                                          \
    struct NAME {                                                                                               \
        typedef STORAGE T;                                                                                      \
        /* d (64 x 128 f32) = A (64 x 16, shared, K-major) B (16 x 128, shared, K-major) (+ d) */               \
        static __device__ __forceinline__ void qk(float (&d)[64], unsigned long long da, unsigned long long db, \
                                                  int acc) {                                                    \
            asm volatile("{ .reg .pred p; setp.ne.b32 p, %66, 0;\n"                                             \
                         "wgmma.mma_async.sync.aligned.m64n128k16.f32." PTX "." PTX " " WGX_R64                  \
                         ", %64, %65, p, 1, 1, 0, 0; }"                                                         \
                         : WGX_A64                                                                               \
                         : "l"(da), "l"(db), "r"(acc));                                                         \
        }                                                                                                       \
        /* d (64 x 128) += A (64 x 16, registers) B (16 x 128, shared, N-major) */                              \
        static __device__ __forceinline__ void pv(float (&d)[64], const unsigned (&a)[4], unsigned long long db) { \
            asm volatile("{ .reg .pred p; setp.ne.b32 p, %69, 0;\n"                                             \
                         "wgmma.mma_async.sync.aligned.m64n128k16.f32." PTX "." PTX " " WGX_R64                  \
                         ", {%64, %65, %66, %67}, %68, p, 1, 1, 1; }"                                           \
                         : WGX_A64                                                                               \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));                        \
        }                                                                                                       \
        /* d (64 x 64) += A (64 x 16, registers) B (16 x 64, shared, N-major) */                                \
        static __device__ __forceinline__ void pv(float (&d)[32], const unsigned (&a)[4], unsigned long long db) { \
            asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0;\n"                                             \
                         "wgmma.mma_async.sync.aligned.m64n64k16.f32." PTX "." PTX " " WGX_R32                   \
                         ", {%32, %33, %34, %35}, %36, p, 1, 1, 1; }"                                           \
                         : WGX_A32                                                                               \
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));                        \
        }                                                                                                       \
        static __device__ __forceinline__ unsigned pack(float lo, float hi) {                                   \
            unsigned v;                                                                                         \
            asm("cvt.rn." PTX "x2.f32 %0, %1, %2;" : "=r"(v) : "f"(hi), "f"(lo));                               \
            return v;                                                                                           \
        }                                                                                                       \
    };
AW_ELEMENT(AwBF16, bf16_t, "bf16")
AW_ELEMENT(AwF16, f16_t, "f16")
#undef AW_ELEMENT

// One 4-D box {64, 128, 1, 1} at (c0, c1, c2, c3) into shared memory at dst.
__device__ __forceinline__ void aw_tma_4d(unsigned dst, const TensorMap* map, int c0, int c1, int c2, int c3,
                                          unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
        "[%6];" ::"r"(dst),
        "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
        : "memory");
}

// The work of query tile t: its (b, h), first row, and the key tiles any of its rows sees. The
// CTAs take tiles t = blockIdx.x, + gridDim.x, ... in attention_tile_order.cuh's order: full
// attention head by head (the CTAs running together share K and V in L2); causal heaviest first
// within sections of heads whose K and V fit in L2 (query tile qt sees qt + 1 key tiles when
// Nq = Nk, and a static stride over a head's tiles in order handed some CTAs twice the work of
// others).
struct AwTile {
    int b, h, m0, n_kt;
    long long bh;
};
template <int BM>
__device__ __forceinline__ AwTile aw_tile(long long t, int n_qt, int B, int H, int Nq, int Nk, int causal,
                                          int sec_g) {
    AwTile w;
    const AttnTileOrder o = attn_tile_order(t, n_qt, (long long)B * H, causal, sec_g);
    w.bh = o.bh;
    const int rank = o.rank;  // 0 for the last (heaviest) query tile of a head
    const int qt = n_qt - 1 - rank;
    w.b = (int)(w.bh / H);
    w.h = (int)(w.bh - (long long)w.b * H);
    w.m0 = qt * BM;
    int kv_end = Nk;
    if (causal) {
        const long long e = (long long)w.m0 + BM + (long long)Nk - Nq;
        kv_end = e <= 0 ? 0 : (e >= Nk ? Nk : (int)e);
    }
    w.n_kt = (kv_end + AW_BN - 1) / AW_BN;
    return w;
}

template <class E, int D, int NC>
__device__ __forceinline__ void attn_fwd_wgmma(const TensorMap* tmQ, const TensorMap* tmK, const TensorMap* tmV,
                                               unsigned short* __restrict__ out, float* __restrict__ lse, int B, int H,
                                               int Nq, int Nk, long long o_sb, long long o_sh, long long o_sr,
                                               float scale, int causal) {
    constexpr int TILE = AW_TILE_BYTES(D);
    constexpr int ATOMS = D / 64;
    constexpr int NO = D / 2;  // O accumulators per thread (64 x D over 128 threads)
    constexpr int ST = AW_STAGES(D);
    static_assert(NC == 2 || (NC == 3 && D == 64), "3 consumers only at D = 64 (registers)");
    constexpr int BM = AW_BM_NC(NC), QB = AW_QBOXES_NC(NC);
    static_assert(QB == 1 || ATOMS == 1, "a Q tile of two boxes is laid out for one 64-column atom");
    extern __shared__ unsigned char aw_smem[];
    const unsigned base = (smem_u32(aw_smem) + 1023u) & ~1023u;
    const unsigned sQ = base;
    const unsigned sK = base + QB * TILE;                 // stage s: sK + 2 s TILE
    const unsigned bars = base + (QB + 2 * ST) * TILE;
    const unsigned q_full = bars, q_empty = bars + 8;
    // k_full[s] = bars + 16 + 8 s, v_full[s] = bars + 16 + 8 (STAGES + s), kv_empty[s] = bars + 16 + 8 (2 STAGES + s)
    const unsigned kfull = bars + 16, vfull = kfull + 8 * ST, kvempty = kfull + 16 * ST;

    const int n_qt = (Nq + BM - 1) / BM;
    const long long tiles = (long long)B * H * n_qt;
    // A query tile streams the head's K and V rows (2 D bytes each).
    const int sec_g = attn_section_heads(causal, (long long)B * H, n_qt, (long long)Nk * 4 * D);

    if (threadIdx.x == 0) {
        mbar_init(q_full, 1);
        mbar_init(q_empty, 4 * NC);
        for (int s = 0; s < ST; ++s) {
            mbar_init(kfull + 8 * s, 1);
            mbar_init(vfull + 8 * s, 1);
            mbar_init(kvempty + 8 * s, 4 * NC);
        }
        mbar_init_fence();
    }
    __syncthreads();

    // The warpgroup index through a shuffle, so that ptxas knows it (and every branch derived from
    // it) to be warp-uniform: with threadIdx.x / 128 it treated the branches around the wgmma
    // instructions as divergent, and the 12.4 ptxas build hung where a warpgroup skipped key tiles.
    const int wg = __shfl_sync(0xffffffffu, (int)(threadIdx.x / 128), 0);
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
        if (threadIdx.x == 0) {
            int it = 0, nq = 0;  // key tiles and query tiles issued so far
            for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
                const AwTile w = aw_tile<BM>(t, n_qt, B, H, Nq, Nk, causal, sec_g);
                if (w.n_kt == 0) continue;  // no key seen: the consumers write zeros
                if (nq > 0) mbar_wait_spin(q_empty, (nq - 1) & 1);
                mbar_expect_tx(q_full, QB * TILE);
#pragma unroll
                for (int a = 0; a < ATOMS; ++a)
#pragma unroll
                    for (int x = 0; x < QB; ++x)
                        aw_tma_4d(sQ + (a + x) * AW_ATOM, tmQ, 64 * a, w.m0 + 128 * x, w.h, w.b, q_full);
                ++nq;
                for (int kt = 0; kt < w.n_kt; ++kt, ++it) {
                    const int s = it % ST;
                    if (it >= ST) mbar_wait_spin(kvempty + 8 * s, ((it / ST) & 1) ^ 1);
                    const unsigned k_dst = sK + 2 * s * TILE, v_dst = k_dst + TILE;
                    mbar_expect_tx(kfull + 8 * s, TILE);
#pragma unroll
                    for (int a = 0; a < ATOMS; ++a)
                        aw_tma_4d(k_dst + a * AW_ATOM, tmK, 64 * a, kt * AW_BN, w.h, w.b, kfull + 8 * s);
                    mbar_expect_tx(vfull + 8 * s, TILE);
#pragma unroll
                    for (int a = 0; a < ATOMS; ++a)
                        aw_tma_4d(v_dst + a * AW_ATOM, tmV, 64 * a, kt * AW_BN, w.h, w.b, vfull + 8 * s);
                }
            }
        }
        return;
    }

    if constexpr (NC == 3)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 160;");
    else
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
    const int c = wg - 1;  // rows 64 c .. 64 c + 63 of each query tile
    // Consumer 0 takes the first turn: the last consumer passes once before its first wait.
    if constexpr (AW_TURNS(D))
        if (c == NC - 1) wg_turn_pass<NC>(NC - 1);
    const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32, quad = lane % 4;
    const float NEG_INF = __int_as_float(0xff800000);
    // exp2 arguments are fma(s, mul, -m) on the raw scores when scale log2 e > 0 (the max of the raw
    // scores is then that of the scaled ones); otherwise the scores are scaled first and mul = 1.
    const float sl2 = scale * 1.4426950408889634f;
    const bool pre = !(sl2 > 0.0f);
    const float mul = pre ? 1.0f : sl2;
    const long long shift = causal ? (long long)Nk - Nq : 0;
    int it = 0, nq = 0;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        const AwTile w = aw_tile<BM>(t, n_qt, B, H, Nq, Nk, causal, sec_g);
        const int w0 = w.m0 + 64 * c;  // the warpgroup's first row
        const int r0 = w0 + 16 * warp + lane / 4;  // this thread's rows: r0, r0 + 8
        // Key tiles every row of the warpgroup sees whole (kt < full_nt: no mask to apply). At
        // D = 128 every warpgroup runs the products of every key tile of the CTA, masked where
        // its rows see none of it (with 128-row query and key tiles only Nq != Nk and the ragged
        // last query tile have such a tile); at D = 64 AW_SKIP ends its loop at its own last key
        // tile. Skipping per warpgroup once compiled into a hang under ptxas 12.4 (kernels/
        // TUNING.md), when the warpgroup index was not yet known to be warp-uniform.
        int full_nt = Nk / AW_BN;
        if (causal) {
            const long long f = (long long)w0 + 1 + shift;
            const long long fe = f <= 0 ? 0 : f / AW_BN;
            full_nt = fe < full_nt ? (int)fe : full_nt;
        }
        // Key tiles this warpgroup multiplies: all of the CTA's, or (AW_SKIPS) those up to the
        // last key its last real row sees.
        int my_nkt = w.n_kt;
        if constexpr (AW_SKIPS(D)) {
            const int last = w0 + 63 < Nq - 1 ? w0 + 63 : Nq - 1;  // < w0: padding only
            long long e = causal ? (long long)last + 1 + shift : (long long)Nk;
            e = e > Nk ? Nk : e;
            const long long n = last < w0 || e <= 0 ? 0 : (e + AW_BN - 1) / AW_BN;
            my_nkt = n < my_nkt ? (int)n : my_nkt;
        }
        float o[NO];
#pragma unroll
        for (int i = 0; i < NO; ++i) o[i] = 0.0f;
        float m[2] = {NEG_INF, NEG_INF}, l[2] = {0.0f, 0.0f};
        if (w.n_kt > 0) {
            mbar_wait_spin(q_full, nq & 1);
            ++nq;
        }
        float s[64];
        unsigned pa[AW_BN / 16][4];
        const unsigned long long dq0 = wgx_desc(sQ + c * 64 * 128, 16, 1024);
        // The half key tile: where the warpgroup's rows see at most the first 64 keys of its last
        // key tile (the causal diagonal's first consumer, a ragged last tile of at most 64 keys),
        // that tile's O += P V takes 4 k steps of 16 instead of 8 (the rest of P is zeros). A key
        // tile's body is a lambda with HALF a compile-time constant, and the half tile runs once
        // after the loop: a branch around the products inside the loop made ptxas fence every key
        // tile (4-9% slower at D = 128 full). Measured in session 66: D = 64 causal 1-3% faster,
        // the rest within 1% (kernels/TUNING.md).
        bool half_last = false;
        {
            const int last = w0 + 63 < Nq - 1 ? w0 + 63 : Nq - 1;
            long long e = causal ? (long long)last + 1 + shift : (long long)Nk;
            e = e > Nk ? Nk : e;
            half_last = my_nkt > 0 && e - (long long)(my_nkt - 1) * AW_BN <= 64;
        }
        auto key_tile = [&](const int kt, auto half_c) {
            constexpr bool HALF = decltype(half_c)::value;
            const int st = it % ST;
            const unsigned ph = (it / ST) & 1;
            const unsigned k_tile = sK + 2 * st * TILE, v_tile = k_tile + TILE;
            mbar_wait_spin(kfull + 8 * st, ph);
            // A later tile's S goes in the turn taken for the last tile's O += P V.
            if constexpr (AW_TURNS(D))
                if (kt == 0) wg_turn_wait<NC>(c);
            // S = Q K^T: k steps of 16 (32 bytes) within each 64-column atom.
            wgx_fence();
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) {
                const unsigned off = (kk / 4) * AW_ATOM + (kk % 4) * 32;
                E::qk(s, wgx_desc_add(dq0, off), wgx_desc_add(wgx_desc(k_tile, 16, 1024), off), kk > 0);
            }
            wgx_commit();
            if constexpr (AW_TURNS(D)) wg_turn_pass<NC>(c);
            wgx_wait0();  // S, and the previous tile's O += P V
            wgx_fence_acc(s);
            wgx_fence_acc(o);
            // Every S product that reads Q is done after the last tile's; the previous tile's
            // stage has been read by its O += P V.
            if (kt == my_nkt - 1 && lane == 0) mbar_arrive(q_empty);
            if (kt > 0 && lane == 0) mbar_arrive(kvempty + 8 * ((it - 1) % ST));

            // Online softmax. s[4 i + 2 rr + x]: row r0 + 8 rr, key kt * 128 + 8 i + 2 quad + x.
            if (pre) {
#pragma unroll
                for (int i = 0; i < 64; ++i) s[i] *= sl2;
            }
            if (kt >= full_nt) {
                const int n0 = kt * AW_BN;
#pragma unroll
                for (int rr = 0; rr < 2; ++rr) {
                    long long e = causal ? (long long)(r0 + 8 * rr) + shift + 1 : Nk;
                    e = e > Nk ? Nk : e;  // this row sees keys < e
                    const int end = e <= n0 ? -AW_BN : (int)(e - n0) - 2 * quad;
#pragma unroll
                    for (int i = 0; i < 16; ++i)
#pragma unroll
                        for (int x = 0; x < 2; ++x)
                            if (8 * i + x >= end) s[4 * i + 2 * rr + x] = NEG_INF;
                }
            }
#pragma unroll
            for (int rr = 0; rr < 2; ++rr) {
                float mx = NEG_INF;
#pragma unroll
                for (int i = 0; i < 16; ++i) mx = fmaxf(mx, fmaxf(s[4 * i + 2 * rr], s[4 * i + 2 * rr + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float m_new = fmaxf(m[rr], mx * mul);
                const float m_use = m_new == NEG_INF ? 0.0f : m_new;
                const float corr = ex2_approx(m[rr] - m_use);
                const float nm = -m_use;
                float sum = 0.0f;
#pragma unroll
                for (int i = 0; i < 16; ++i)
#pragma unroll
                    for (int x = 0; x < 2; ++x) {
                        const float a = fmaf(s[4 * i + 2 * rr + x], mul, nm);
                        const float p = ex2_approx(a);
                        s[4 * i + 2 * rr + x] = p;
                        sum += p;
                    }
                l[rr] = l[rr] * corr + sum;
                m[rr] = m_new;
#pragma unroll
                for (int i = 0; i < D / 8; ++i) {
                    o[4 * i + 2 * rr] *= corr;
                    o[4 * i + 2 * rr + 1] *= corr;
                }
            }
#pragma unroll
            for (int kb = 0; kb < AW_BN / 16; ++kb) {
                pa[kb][0] = E::pack(s[8 * kb + 0], s[8 * kb + 1]);
                pa[kb][1] = E::pack(s[8 * kb + 2], s[8 * kb + 3]);
                pa[kb][2] = E::pack(s[8 * kb + 4], s[8 * kb + 5]);
                pa[kb][3] = E::pack(s[8 * kb + 6], s[8 * kb + 7]);
            }

            // O += P V: k step kb = keys 16 kb .. + 15 = 16 rows of 128 bytes of the V tile; the
            // D columns are ATOMS atoms of 64, AW_ATOM apart (the leading byte offset).
            mbar_wait_spin(vfull + 8 * st, ph);
            if constexpr (AW_TURNS(D)) wg_turn_wait<NC>(c);  // O += P V, then the next tile's S
            wgx_fence();
#pragma unroll
            for (int kb = 0; kb < (HALF ? AW_BN / 32 : AW_BN / 16); ++kb)
                E::pv(o, pa[kb], wgx_desc_add(wgx_desc(v_tile, AW_ATOM, 1024), kb * 16 * 128));
            wgx_commit();
            if constexpr (AW_TURNS(D))
                if (kt == my_nkt - 1) wg_turn_pass<NC>(c);
        };
        const int n_main = half_last ? my_nkt - 1 : my_nkt;
        for (int kt = 0; kt < n_main; ++kt, ++it) key_tile(kt, aw_bool<false>{});
        if (half_last) {
            key_tile(my_nkt - 1, aw_bool<true>{});
            ++it;
        }
        wgx_wait0();  // the last O += P V (nothing is in flight when the tile had no key tile)
        wgx_fence_acc(o);
        if (my_nkt > 0 && lane == 0) mbar_arrive(kvempty + 8 * ((it - 1) % ST));
        if constexpr (AW_SKIPS(D)) {
            // The key tiles this warpgroup skips: each stage waited for (so that the release counts
            // toward this fill's phase) and released, and one turn each; with no key tile at all,
            // also the query tile's first turn and its release of Q.
            if (my_nkt == 0 && w.n_kt > 0) {
                if (lane == 0) mbar_arrive(q_empty);
                if constexpr (AW_TURNS(D)) {
                    wg_turn_wait<NC>(c);
                    wg_turn_pass<NC>(c);
                }
            }
            for (int kt = my_nkt; kt < w.n_kt; ++kt, ++it) {
                const int st = it % ST;
                mbar_wait_spin(kfull + 8 * st, (it / ST) & 1);
                if (lane == 0) mbar_arrive(kvempty + 8 * st);
                if constexpr (AW_TURNS(D)) {
                    wg_turn_wait<NC>(c);
                    wg_turn_pass<NC>(c);
                }
            }
        }

        // Epilogue: O / l, lse.
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
            float x = l[rr];
            x += __shfl_xor_sync(0xffffffffu, x, 1);
            x += __shfl_xor_sync(0xffffffffu, x, 2);
            const int row = r0 + 8 * rr;
            const float inv = x > 0.0f ? 1.0f / x : 0.0f;
            unsigned short* p = out + w.b * o_sb + w.h * o_sh + row * o_sr;
            if constexpr (D == 128) {
                // The four lanes of a row hold columns 8 i + 2 quad (+1) for every i: a 4 x 4
                // transpose within the quad (3 shuffles per 32 columns) leaves each lane 8
                // consecutive columns, stored as one 16-byte write (the host checks out 16-byte
                // aligned with strides of multiples of 8). A quarter of the store instructions,
                // whole sectors: +3 to +9% at D = 128 (kernels/TUNING.md); at D = 64 it was slower.
#pragma unroll
                for (int g = 0; g < D / 32; ++g) {
                    unsigned v[4], r[4];
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        v[j] = E::pack(o[4 * (4 * g + j) + 2 * rr] * inv, o[4 * (4 * g + j) + 2 * rr + 1] * inv);
#pragma unroll
                    for (int j = 0; j < 4; ++j) r[j] = v[j];  // r[quad] stays this lane's own pair
#pragma unroll
                    for (int k = 1; k < 4; ++k) {
                        // Lane quad ^ k gets our pair of its block 4 g + (quad ^ k) and gives us
                        // its pair of block 4 g + quad (columns 2 (quad ^ k), + 1 of that block).
                        const int to = quad ^ k;
                        const unsigned send = to == 0 ? v[0] : to == 1 ? v[1] : to == 2 ? v[2] : v[3];
                        const unsigned got = __shfl_xor_sync(0xffffffffu, send, k);
#pragma unroll
                        for (int j = 0; j < 4; ++j) r[j] = j == to ? got : r[j];
                    }
                    if (row < Nq) *reinterpret_cast<uint4*>(p + 8 * (4 * g + quad)) = make_uint4(r[0], r[1], r[2], r[3]);
                }
            } else {
                if (row < Nq) {
#pragma unroll
                    for (int i = 0; i < D / 8; ++i)
                        *reinterpret_cast<unsigned*>(p + 8 * i + 2 * quad) =
                            E::pack(o[4 * i + 2 * rr] * inv, o[4 * i + 2 * rr + 1] * inv);
                }
            }
            if (row < Nq && quad == 0) lse[w.bh * Nq + row] = x > 0.0f ? (m[rr] + log2f(x)) * 0.6931471805599453f : NEG_INF;
        }
    }
    // Consumer 1 passed once more than it waited: consumer 0 takes that last pass, so that no
    // barrier phase is left open when the CTA exits.
    if constexpr (AW_TURNS(D))
        if (c == 0) wg_turn_wait<NC>(0);
}

// q, k, v are not read here (the tensor maps address them); they are parameters so that a launch
// orders their buffers like any other kernel argument.
// @readonly: q, k, v
extern "C" __global__ void __launch_bounds__(AW_THREADS_NC(2), 1)
    attn_fwd_wgmma_d64_bf16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const bf16_t* __restrict__ q,
                            const bf16_t* __restrict__ k, const bf16_t* __restrict__ v, bf16_t* __restrict__ out,
                            float* __restrict__ lse, int B, int H, int Nq, int Nk, long long o_sb, long long o_sh,
                            long long o_sr, float scale, int causal) {
    attn_fwd_wgmma<AwBF16, 64, 2>(&tmQ, &tmK, &tmV, out, lse, B, H, Nq, Nk, o_sb, o_sh, o_sr, scale, causal);
}
// @readonly: q, k, v
extern "C" __global__ void __launch_bounds__(AW_THREADS_NC(2), 1)
    attn_fwd_wgmma_d128_bf16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const bf16_t* __restrict__ q,
                            const bf16_t* __restrict__ k, const bf16_t* __restrict__ v, bf16_t* __restrict__ out,
                            float* __restrict__ lse, int B, int H, int Nq, int Nk, long long o_sb, long long o_sh,
                            long long o_sr, float scale, int causal) {
    attn_fwd_wgmma<AwBF16, 128, 2>(&tmQ, &tmK, &tmV, out, lse, B, H, Nq, Nk, o_sb, o_sh, o_sr, scale, causal);
}
// @readonly: q, k, v
extern "C" __global__ void __launch_bounds__(AW_THREADS_NC(2), 1)
    attn_fwd_wgmma_d64_f16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const f16_t* __restrict__ q,
                            const f16_t* __restrict__ k, const f16_t* __restrict__ v, f16_t* __restrict__ out,
                            float* __restrict__ lse, int B, int H, int Nq, int Nk, long long o_sb, long long o_sh,
                            long long o_sr, float scale, int causal) {
    attn_fwd_wgmma<AwF16, 64, 2>(&tmQ, &tmK, &tmV, out, lse, B, H, Nq, Nk, o_sb, o_sh, o_sr, scale, causal);
}
// @readonly: q, k, v
extern "C" __global__ void __launch_bounds__(AW_THREADS_NC(2), 1)
    attn_fwd_wgmma_d128_f16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const f16_t* __restrict__ q,
                            const f16_t* __restrict__ k, const f16_t* __restrict__ v, f16_t* __restrict__ out,
                            float* __restrict__ lse, int B, int H, int Nq, int Nk, long long o_sb, long long o_sh,
                            long long o_sr, float scale, int causal) {
    attn_fwd_wgmma<AwF16, 128, 2>(&tmQ, &tmK, &tmV, out, lse, B, H, Nq, Nk, o_sb, o_sh, o_sr, scale, causal);
}
// @readonly: q, k, v
extern "C" __global__ void __launch_bounds__(AW_THREADS_NC(3), 1)
    attn_fwd_wgmma_d64_m192_bf16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const bf16_t* __restrict__ q,
                            const bf16_t* __restrict__ k, const bf16_t* __restrict__ v, bf16_t* __restrict__ out,
                            float* __restrict__ lse, int B, int H, int Nq, int Nk, long long o_sb, long long o_sh,
                            long long o_sr, float scale, int causal) {
    attn_fwd_wgmma<AwBF16, 64, 3>(&tmQ, &tmK, &tmV, out, lse, B, H, Nq, Nk, o_sb, o_sh, o_sr, scale, causal);
}
// @readonly: q, k, v
extern "C" __global__ void __launch_bounds__(AW_THREADS_NC(3), 1)
    attn_fwd_wgmma_d64_m192_f16(const __grid_constant__ TensorMap tmQ, const __grid_constant__ TensorMap tmK,
                            const __grid_constant__ TensorMap tmV, const f16_t* __restrict__ q,
                            const f16_t* __restrict__ k, const f16_t* __restrict__ v, f16_t* __restrict__ out,
                            float* __restrict__ lse, int B, int H, int Nq, int Nk, long long o_sb, long long o_sh,
                            long long o_sr, float scale, int causal) {
    attn_fwd_wgmma<AwF16, 64, 3>(&tmQ, &tmK, &tmV, out, lse, B, H, Nq, Nk, o_sb, o_sh, o_sr, scale, causal);
}
