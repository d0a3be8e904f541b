// attention_tiled.cuh — what the tiled SIMT attention kernels share (attention_tiled.cu's forward,
// attention_tiled_bwd.cu's dq and dk/dv): a CTA of 256 threads, tiles of 64 rows of the head
// dimension padded to DP (64 or 128) in shared memory as f32 rows of DP + 4 floats (the pad puts 8
// consecutive rows' 16-byte reads in 8 different bank quads), and the staging of a tile.
#pragma once
#include "dtype.cuh"

#define AT_THREADS 256
#define AT_BM 64  // query rows per tile
#define AT_BN 64  // keys per tile
#define AT_LD(DP) ((DP) + 4)
#define AT_PLD (AT_BN + 4)

// Tile t of B * H heads of n_t tiles (32-bit arithmetic: 64-bit divisions cost registers the loops
// need, and the host runs these kernels only where B * H * n_t < 2^31): its head and tile index.
// Causal problems go heaviest first (`last`: a head's heaviest tile is its last one (the forward,
// dq), else its first (dk/dv)); full attention head by head.
__device__ __forceinline__ void at_tile(unsigned t, unsigned bhs, int n_t, int causal, bool last, unsigned& bh,
                                        int& tile) {
    if (causal) {
        const unsigned rank = t / bhs;
        bh = t - rank * bhs;
        tile = last ? n_t - 1 - (int)rank : (int)rank;
    } else {
        bh = t / (unsigned)n_t;
        tile = (int)(t - bh * (unsigned)n_t);
    }
}

// The keys [0, result) query row `row` sees: all Nk, or (causal) those <= row + shift, shift =
// Nk - Nq (bottom-right aligned); 0 when it sees none.
__device__ __forceinline__ int at_keys_seen(long long row, long long shift, int Nk, int causal) {
    if (!causal) return Nk;
    const long long e = row + shift + 1;
    return e <= 0 ? 0 : (e >= Nk ? Nk : (int)e);
}

// Query tile t of the forward's and the dq kernel's loop (heaviest first when causal): its head
// bh = b H + h, its first row m0, and the key tiles any of its rows sees (those of its last row).
struct AtQueryTile {
    unsigned bh;
    int b, h, m0, n_kt;
};
__device__ __forceinline__ AtQueryTile at_query_tile(unsigned t, unsigned bhs, int H, int n_qt, long long shift, int Nk,
                                                     int causal) {
    AtQueryTile w;
    int qt;
    at_tile(t, bhs, n_qt, causal, true, w.bh, qt);
    w.b = (int)(w.bh / (unsigned)H);
    w.h = (int)(w.bh - (unsigned)w.b * (unsigned)H);
    w.m0 = qt * AT_BM;
    w.n_kt = (at_keys_seen((long long)w.m0 + AT_BM - 1, shift, Nk, causal) + AT_BN - 1) / AT_BN;
    return w;
}

// Rows [r0, r0 + 64) x columns [0, DP) of a strided [N, D] matrix (row stride sr) into dst (rows of
// AT_LD(DP) floats), times mul; zeros past N rows or D columns. Each warp reads 32 consecutive
// columns of a row: coalesced.
template <typename Tag, typename S, int DP>
__device__ __forceinline__ void at_stage(float* dst, const S* __restrict__ src, long long sr, int r0, int N, int D,
                                         float mul) {
    constexpr int PER = AT_BM * DP / AT_THREADS, CH = 8;  // loads in flight a chunk (registers)
    const int col = threadIdx.x % DP, row0 = threadIdx.x / DP;
#pragma unroll
    for (int c0 = 0; c0 < PER; c0 += CH) {
        float v[CH];
#pragma unroll
        for (int it = 0; it < CH; ++it) {
            const int row = row0 + (c0 + it) * (AT_THREADS / DP);
            const bool ok = r0 + row < N && col < D;
            v[it] = ok ? DType<Tag>::load(src[(long long)(r0 + row) * sr + col]) * mul : 0.0f;
        }
#pragma unroll
        for (int it = 0; it < CH; ++it) dst[(row0 + (c0 + it) * (AT_THREADS / DP)) * AT_LD(DP) + col] = v[it];
    }
}


// acc[i][j] += sum_{d < DP} A[ra + i][d] * B[rb + 16 j][d] (i, j < 4): the 4 x 4 block of a
// product of two staged tiles' rows (S = Q K^T and its kin); per 4 columns of d, 4 + 4 16-byte
// reads (A's broadcast over a half-warp, B's 16 rows conflict-free) for 64 FMAs.
template <int DP>
__device__ __forceinline__ void at_rows_dot(float (&acc)[4][4], const float* A, int ra, const float* B, int rb) {
    constexpr int LD = AT_LD(DP);
#pragma unroll 4
    for (int d = 0; d < DP; d += 4) {
        float4 a[4], b[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) a[i] = *reinterpret_cast<const float4*>(A + (ra + i) * LD + d);
#pragma unroll
        for (int j = 0; j < 4; ++j) b[j] = *reinterpret_cast<const float4*>(B + (rb + 16 * j) * LD + d);
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                acc[i][j] = fmaf(a[i].x, b[j].x, acc[i][j]);
                acc[i][j] = fmaf(a[i].y, b[j].y, acc[i][j]);
                acc[i][j] = fmaf(a[i].z, b[j].z, acc[i][j]);
                acc[i][j] = fmaf(a[i].w, b[j].w, acc[i][j]);
            }
    }
}

// o[i][4 g + c] += sum_{k < 64} P[rp + i][k] * V[k][4 tx + 64 g + c] (P rows of AT_PLD floats, V a
// staged tile): O += P V and its kin (dQ += dS K, dV += P^T dO, dK += dS^T Q); per 4 k, 4 reads
// of P (broadcast) and 4 DP / 64 of V (16 consecutive 16-byte reads) for 16 DP / 16 FMAs.
template <int DP>
__device__ __forceinline__ void at_mul_acc(float (&o)[4][4 * (DP / 64)], const float* P, int rp, const float* V,
                                           int tx) {
    constexpr int LD = AT_LD(DP), G = DP / 64;
#pragma unroll 2
    for (int kk = 0; kk < AT_BN; kk += 4) {
        float4 p[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) p[i] = *reinterpret_cast<const float4*>(P + (rp + i) * AT_PLD + kk);
#pragma unroll
        for (int x = 0; x < 4; ++x) {
            float4 vv[G];
#pragma unroll
            for (int g = 0; g < G; ++g) vv[g] = *reinterpret_cast<const float4*>(V + (kk + x) * LD + 4 * tx + 64 * g);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float pi = x == 0 ? p[i].x : x == 1 ? p[i].y : x == 2 ? p[i].z : p[i].w;
#pragma unroll
                for (int g = 0; g < G; ++g) {
                    o[i][4 * g + 0] = fmaf(pi, vv[g].x, o[i][4 * g + 0]);
                    o[i][4 * g + 1] = fmaf(pi, vv[g].y, o[i][4 * g + 1]);
                    o[i][4 * g + 2] = fmaf(pi, vv[g].z, o[i][4 * g + 2]);
                    o[i][4 * g + 3] = fmaf(pi, vv[g].w, o[i][4 * g + 3]);
                }
            }
        }
    }
}

// Row i of the 4 x (4 DP / 64) block `o` scaled by mul into the row `dst` (its columns
// 4 tx + 64 g + c < D).
template <typename Tag, typename S, int DP>
__device__ __forceinline__ void at_store_row(S* __restrict__ dst, int D, const float (&o)[4][4 * (DP / 64)], int i,
                                             int tx, float mul) {
#pragma unroll
    for (int g = 0; g < DP / 64; ++g)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int col = 4 * tx + 64 * g + c;
            if (col < D) dst[col] = DType<Tag>::store(o[i][4 * g + c] * mul);
        }
}

// Rows 4 ty + i (i < 4) of the 4 x (4 DP / 64) block `o` scaled by mul into row r0 + 4 ty + i
// (< N) of a strided [N, D] matrix (columns 4 tx + 64 g + c < D).
template <typename Tag, typename S, int DP>
__device__ __forceinline__ void at_store_rows(S* __restrict__ dst, long long sr, int r0, int N, int D,
                                              const float (&o)[4][4 * (DP / 64)], int ty, int tx, float mul) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int row = r0 + 4 * ty + i;
        if (row < N) at_store_row<Tag, S, DP>(dst + (long long)row * sr, D, o, i, tx, mul);
    }
}
