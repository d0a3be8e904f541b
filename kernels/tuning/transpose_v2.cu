// kernels/tuning/transpose_v2.cu — lab candidates for the transposes still under 0.85x of the
// D2D copy (issue 9), compiled at run time by kernel_lab and checked against the library's output.
// out is [cols, rows] row-major, in is [rows, cols] row-major.
typedef unsigned long long u64;

// ---- skinny shapes, every load of a block in flight at once ---------------------------------
// The library's transpose_skinny stages a strip of up to 8192 floats through shared memory with a
// loop `for (q = t; q < n; q += 1024)` of 4 scalar loads each: the stores into shared memory wait
// for each iteration's loads, so a 6144-float strip ([2^20, 3]) takes 6 round trips to memory.
// Here each thread issues all its float4 loads (up to 8: 8192 floats per block) before any store,
// writes them into a tile kept in output order, and the block streams the tile out as float4.
// Tile index y -> y + 4 * (y / 32) (4 floats of padding per 32) keeps every 4-float group
// contiguous and 16-byte aligned for the float4 reads while spreading the scattered stores.
#define SV_TILE 8192
__device__ __forceinline__ int sv_floor_log2(unsigned v) { return 31 - __clz(v); }
__device__ __forceinline__ int sv_pad(int y) { return y + 4 * (y >> 5); }
// q / d for q < 2^13 and 1 <= d < 64, as (q * ceil(2^32 / d)) >> 32 (d = 1: q).
__device__ __forceinline__ int sv_div(int q, int d, unsigned magic) {
    return d == 1 ? q : (int)__umulhi((unsigned)q, magic);
}

// Tall: cols = S < 64 (the short side). Requires in and out 16-byte aligned and rows % 4 == 0.
// Block 256, grid ceil(rows / R), R = 2^floor(log2(8192 / S)) rows per block.
extern "C" __global__ void __launch_bounds__(256)
tsv_tall(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ __align__(16) float tile[SV_TILE + SV_TILE / 8];
    const int t = threadIdx.x, S = cols;
    const int lr = sv_floor_log2(SV_TILE / S), R = 1 << lr;
    const long long r0 = (long long)blockIdx.x * R;
    const int h = (int)min((long long)R, rows - r0);  // rows in this strip (a multiple of 4)
    const int n4 = h * S / 4;
    const float4* src = reinterpret_cast<const float4*>(in + r0 * S);
    const unsigned magic = 0xffffffffu / (unsigned)S + 1u;
    float4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u)
        if (u * 256 + t < n4) v[u] = src[u * 256 + t];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
        const int g = u * 256 + t;
        if (g < n4) {
            const int q = 4 * g;  // elements q .. q + 3 of the strip: (r, c) = (q / S, q % S)
            int r = sv_div(q, S, magic), c = q - r * S;
            const float e[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                tile[sv_pad(c * R + r)] = e[j];
                if (++c == S) { c = 0; ++r; }
            }
        }
    }
    __syncthreads();
    // out[c][r0 + r .. + 3] for c < S, r < h step 4: S * R / 4 <= 2048 groups, 8 per thread
    const int lq = lr - 2;  // groups per output row: R / 4
#pragma unroll
    for (int u = 0; u < 8; ++u) {
        const int g = u * 256 + t;
        const int c = g >> lq, r = 4 * (g & ((1 << lq) - 1));
        if (c < S && r < h) {
            const float4 x = *reinterpret_cast<const float4*>(&tile[sv_pad(c * R + r)]);
            *reinterpret_cast<float4*>(out + (u64)c * rows + r0 + r) = x;
        }
    }
}

// Wide: rows = S < 64. Requires in and out 16-byte aligned and cols % 4 == 0.
// Block 256, grid ceil(cols / Q), Q = 2^floor(log2(8192 / S)) columns per block. Here the tile
// keeps the input's order (tile[m * P + q], float4 stores), and the output side gathers: a tile
// in output order would take the float4 loads' 4 consecutive columns S floats apart (stores up to
// 8-way bank conflicts at S = 3..7); a row pitch P = Q + 4 keeps the gathers within 2-way for
// S <= 16.
extern "C" __global__ void __launch_bounds__(256)
tsv_wide(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ __align__(16) float tile[SV_TILE + 4 * 64];
    const int t = threadIdx.x, S = rows;
    const int lq = sv_floor_log2(SV_TILE / S), Q = 1 << lq, P = Q + 4;
    const long long q0 = (long long)blockIdx.x * Q;
    const int w = (int)min((long long)Q, cols - q0);  // columns in this block (a multiple of 4)
    const int lg = lq - 2;                            // float4 groups per input row: Q / 4
    float4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
        const int g = u * 256 + t, m = g >> lg, qv = 4 * (g & ((1 << lg) - 1));
        if (m < S && qv < w) v[u] = *reinterpret_cast<const float4*>(in + (u64)m * cols + q0 + qv);
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) {
        const int g = u * 256 + t, m = g >> lg, qv = 4 * (g & ((1 << lg) - 1));
        if (m < S && qv < w) *reinterpret_cast<float4*>(&tile[m * P + qv]) = v[u];
    }
    __syncthreads();
    const int n4 = w * S / 4;  // the block's output span out[q0 * S, (q0 + w) * S) as float4
    const unsigned magic = 0xffffffffu / (unsigned)S + 1u;
    float4* dst = reinterpret_cast<float4*>(out + q0 * S);
#pragma unroll
    for (int u = 0; u < 8; ++u) {
        const int g = u * 256 + t;
        if (g < n4) {
            int q = sv_div(4 * g, S, magic), m = 4 * g - q * S;  // output 4g = (q, m)
            float e[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                e[j] = tile[m * P + q];
                if (++m == S) { m = 0; ++q; }
            }
            dst[g] = make_float4(e[0], e[1], e[2], e[3]);
        }
    }
}

// ---- odd shapes: output rows cut on CUT-float boundaries -----------------------------------
// The library's transpose_tiled_aligned with the cut as a parameter: CUT = 8 floats (32-byte
// sectors) is the library kernel; 16 (64 bytes) and 32 (128-byte lines) ask whether writes whose
// ends share a 64-byte or 128-byte unit with the neighbouring tile still cost extra (DRAM and L2
// work on 64-byte / 128-byte units too). The block reads 64 + CUT input rows.
// tal_ld: the library's cut (8) writing output rows ldo floats apart (ldo >= rows), for an SGEMM
// relayout of a transposed B into a buffer whose rows are 16-byte aligned (ldo % 4 == 0).
// Launch: block (32, 8), grid (ceil(rows / 64), ceil(cols / 64)).
template <int CUT>
__device__ __forceinline__ void tal_body(const float* __restrict__ in, float* __restrict__ out, int rows,
                                         int cols, int ldo) {
    constexpr int TT = 64, RWS = TT + CUT;
    __shared__ float tile[RWS][TT + 1];  // tile[i][j] = in[r0 - CUT + i][c0 + j]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c0 = blockIdx.y * TT, r0 = blockIdx.x * TT;
    const int cw = min(TT, cols - c0);
#pragma unroll
    for (int j = 0; j < RWS; j += 8) {
        const int i = ty + j, r = r0 - CUT + i;
        if (r < 0 || r >= rows) continue;
        const float* seg = in + (u64)r * cols + c0;
        const int mis = (int)(((unsigned long long)seg >> 2) & 31);
#pragma unroll
        for (int k = 0; k < 3; ++k) {
            const int o = 32 * k + tx - mis;
            if (o >= 0 && o < cw) tile[i][o] = seg[o];
        }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < TT; j += 8) {
        const int i = ty + j;
        if (i >= cw) continue;
        float* row = out + (u64)(c0 + i) * ldo;
        const int s = (int)(((unsigned long long)(row + r0) >> 2) & (CUT - 1));
        const int lo = r0 == 0 ? 0 : r0 - s;
        const int hi = r0 + TT >= rows ? rows : r0 + TT - s;
        float* seg = row + lo;
        const int mis = (int)(((unsigned long long)seg >> 2) & 31);
#pragma unroll
        for (int k = 0; k < 4; ++k) {  // up to 64 + CUT - 1 + 31 < 128 floats: at most 4 lines
            const int o = 32 * k + tx - mis;
            if (o >= 0 && o < hi - lo) seg[o] = tile[lo + o - (r0 - CUT)][i];
        }
    }
}
extern "C" __global__ void __launch_bounds__(256)
tal_cut8(const float* in, float* out, int rows, int cols) { tal_body<8>(in, out, rows, cols, rows); }
extern "C" __global__ void __launch_bounds__(256)
tal_cut16(const float* in, float* out, int rows, int cols) { tal_body<16>(in, out, rows, cols, rows); }
extern "C" __global__ void __launch_bounds__(256)
tal_cut32(const float* in, float* out, int rows, int cols) { tal_body<32>(in, out, rows, cols, rows); }
extern "C" __global__ void __launch_bounds__(256)
tal_ld(const float* in, float* out, int rows, int cols, int ldo) { tal_body<8>(in, out, rows, cols, ldo); }
