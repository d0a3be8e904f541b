// softmax.cu — numerically stable row-wise softmax of a row-major [rows, cols] f32 array.
//
//     y[r][c] = exp(x[r][c] - m_r) / d_r,   m_r = max_c x[r][c],   d_r = sum_c exp(x[r][c] - m_r)
//
// Subtracting the row max keeps exp() from overflowing. Instead of one pass for the max and another
// for the sum, each thread keeps the "online softmax" pair (m, d) — running max and running sum of
// exp(x - m) — and updates it per element:
//     x > m:  d = d * exp(m - x) + 1;  m = x        (rescale the old sum to the new max)
//     else:   d = d + exp(x - m)
// Two partial pairs merge exactly the same way: m = max(m1, m2), d = d1 e^(m1-m) + d2 e^(m2-m).
// So one read of the row gives (m, d) (lanes merge with warp shuffles, warps through shared
// memory), and a second read writes y = exp(x - m) * (1 / d).
// What makes it fast: 16-byte loads when cols % 4 == 0 and both pointers are 16-byte aligned; the
// first 8 float4 packets of each thread stay in registers between the two passes, so rows up to
// 32 * 32 = 1024 (warp kernel) or 256 * 32 = 8192 (block kernel, 256 threads) floats are read from
// global memory once; longer rows are re-read (mostly from L2).
//   softmax_warp_f32:  one warp per row — for short rows (cols <= ~1024).
//       Launch: blockDim.x a multiple of 32 (designed for 128), grid ceil(rows / (blockDim.x / 32)).
//   softmax_rows_regs_f32 (at the end of this file): one block per row with the row held in
//       registers — for rows of up to 16384 floats (cols % 4 == 0, aligned); the fastest.
//   softmax_block_f32: one block per row — for long rows.
//       Launch: blockDim.x a multiple of 32, <= 1024 (designed for 256), grid rows.
// Exactness: expf is CUDA's accurate expf (no fast-math), final scaling multiplies by the
// reciprocal 1/d (one rounding more than a division). Rows of all -inf give NaN (as torch);
// NaN anywhere in a row gives a row of NaN. cols == 0 writes nothing. out may not alias in.
#include "dtype.cuh"

#define NEG_INF __int_as_float(0xff800000)  // -inf (no math.h in NVRTC)
#define CACHE 8  // float4 packets per thread kept in registers between the passes

struct MD {
    float m;  // running max
    float d;  // running sum of exp(x - m)
};

__device__ __forceinline__ void md_add(MD& s, float x) {
    if (x > s.m) {
        s.d = s.d * expf(s.m - x) + 1.0f;  // s.m == -inf: 0 * 0 + 1
        s.m = x;
    } else if (x != NEG_INF) {           // exp(-inf - m) == 0; skipping also avoids -inf - -inf
        s.d += expf(x - s.m);
    }
}

__device__ __forceinline__ MD md_merge(MD a, MD b) {
    MD r;
    r.m = fmaxf(a.m, b.m);
    const float da = (a.m == NEG_INF) ? 0.0f : a.d * expf(a.m - r.m);
    const float db = (b.m == NEG_INF) ? 0.0f : b.d * expf(b.m - r.m);
    r.d = da + db;
    return r;
}

__device__ __forceinline__ MD warp_merge(MD s) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        MD o;
        o.m = __shfl_xor_sync(0xffffffffu, s.m, off);
        o.d = __shfl_xor_sync(0xffffffffu, s.d, off);
        s = md_merge(s, o);
    }
    return s;  // every lane holds the warp's result
}

// Softmax of one row by `nt` cooperating threads, this one being number `t`.
// BLOCK: the threads are a whole block (merge through shared memory); else one warp.
template <bool BLOCK>
__device__ __forceinline__ void softmax_row(const float* __restrict__ x, float* __restrict__ y,
                                            int cols, int t, int nt, bool vec) {
    MD s;
    s.m = NEG_INF;
    s.d = 0.0f;
    float4 cache[CACHE];
    const int packs = vec ? cols / 4 : 0;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    // pass 1: (m, d) over this thread's elements
#pragma unroll
    for (int u = 0; u < CACHE; ++u) {
        const int p = t + u * nt;
        if (p < packs) {
            cache[u] = x4[p];
            md_add(s, cache[u].x); md_add(s, cache[u].y); md_add(s, cache[u].z); md_add(s, cache[u].w);
        }
    }
    for (int p = t + CACHE * nt; p < packs; p += nt) {
        const float4 v = x4[p];
        md_add(s, v.x); md_add(s, v.y); md_add(s, v.z); md_add(s, v.w);
    }
    for (int c = packs * 4 + t; c < cols; c += nt) md_add(s, x[c]);

    s = warp_merge(s);
    if (BLOCK) {
        __shared__ MD warp_md[32];
        const int lane = t % 32, warp = t / 32;
        if (lane == 0) warp_md[warp] = s;
        __syncthreads();
        s = warp_md[0];
        for (int w = 1; w < nt / 32; ++w) s = md_merge(s, warp_md[w]);  // same order in every thread
    }
    const float m = s.m, inv = 1.0f / s.d;

    // pass 2: write exp(x - m) / d
    float4* y4 = reinterpret_cast<float4*>(y);
#pragma unroll
    for (int u = 0; u < CACHE; ++u) {
        const int p = t + u * nt;
        if (p < packs) {
            const float4 v = cache[u];
            y4[p] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv,
                                expf(v.w - m) * inv);
        }
    }
    for (int p = t + CACHE * nt; p < packs; p += nt) {
        const float4 v = x4[p];
        y4[p] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv,
                            expf(v.w - m) * inv);
    }
    for (int c = packs * 4 + t; c < cols; c += nt) y[c] = expf(x[c] - m) * inv;
}

extern "C" __global__ void softmax_warp_f32(const float* in, float* out, int rows, int cols) {
    const u64 row = (u64)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= (u64)rows) return;  // whole warp leaves together
    const bool vec = (cols % 4 == 0) && aligned16(in, out);
    softmax_row<false>(in + row * cols, out + row * cols, cols, threadIdx.x % 32, 32, vec);
}

extern "C" __global__ void __launch_bounds__(1024)
softmax_block_f32(const float* in, float* out, int rows, int cols) {
    const u64 row = blockIdx.x;
    if (row >= (u64)rows) return;  // whole block leaves together
    const bool vec = (cols % 4 == 0) && aligned16(in, out);
    softmax_row<true>(in + row * cols, out + row * cols, cols, threadIdx.x, blockDim.x, vec);
}

// softmax_rows_regs_f32: one block per row with the whole row in registers — REG_PACKETS float4
// per thread, so a row of up to 16 * blockDim.x floats (16384 with 1024 threads) is read once and
// written once. With the row in registers the online (m, d) recurrence is not needed: an exact
// block max, then exp(x - max) computed once per element and kept, a block sum, and the scaled
// write. One expf per element instead of two; on an H200 this reached 1.6x the online kernels at
// 4096 x 4096 (kernels/TUNING.md). Same results for NaN / +-inf / all -inf rows as the CPU
// reference: any NaN, a +inf, or an all -inf row gives a row of NaN.
//   Requires cols % 4 == 0, 16-byte aligned in/out, and cols <= 16 * blockDim.x (the host
//   checks; elsewhere use softmax_block_f32).
//   Launch: blockDim.x = a multiple of 32 >= cols / 16 (<= 1024), grid rows.
#define REG_PACKETS 4

__device__ __forceinline__ float block_allreduce(float v, bool is_max, float* smem) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float w = __shfl_xor_sync(0xffffffffu, v, off);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = lane < warps ? smem[lane] : (is_max ? NEG_INF : 0.0f);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {  // every warp reduces the per-warp values alike
        const float w = __shfl_xor_sync(0xffffffffu, v, off);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    __syncthreads();  // smem is reused by the next reduction
    return v;
}

extern "C" __global__ void __launch_bounds__(1024)
softmax_rows_regs_f32(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float smem[32];
    const u64 row = blockIdx.x;
    if (row >= (u64)rows) return;  // whole block leaves together
    const int packs = cols / 4, nt = blockDim.x, t = threadIdx.x;
    const float4* x4 = reinterpret_cast<const float4*>(in + row * (u64)cols);
    float4* y4 = reinterpret_cast<float4*>(out + row * (u64)cols);
    float4 v[REG_PACKETS];
    float m = NEG_INF;
#pragma unroll
    for (int p = 0; p < REG_PACKETS; ++p) {
        const int i = p * nt + t;
        v[p] = i < packs ? x4[i] : make_float4(NEG_INF, NEG_INF, NEG_INF, NEG_INF);
        m = fmaxf(m, fmaxf(fmaxf(v[p].x, v[p].y), fmaxf(v[p].z, v[p].w)));
    }
    m = block_allreduce(m, true, smem);
    // fmaxf skips NaN, but exp(NaN - m) is NaN and reaches the sum, as does exp(-inf - -inf)
    // for an all -inf row: either way the whole row becomes NaN.
    float s = 0.0f;
#pragma unroll
    for (int p = 0; p < REG_PACKETS; ++p) {
        v[p] = make_float4(expf(v[p].x - m), expf(v[p].y - m), expf(v[p].z - m), expf(v[p].w - m));
        if (p * nt + t < packs) s += (v[p].x + v[p].y) + (v[p].z + v[p].w);
    }
    s = block_allreduce(s, false, smem);
    const float inv = 1.0f / s;
#pragma unroll
    for (int p = 0; p < REG_PACKETS; ++p) {
        const int i = p * nt + t;
        if (i < packs) y4[i] = make_float4(v[p].x * inv, v[p].y * inv, v[p].z * inv, v[p].w * inv);
    }
}

// ---------------------------------------------------------------------------------------------
// Rows of any width, picked by shape in ops::softmax_choice (kernels/TUNING.md, round 3).
//
// softmax_small_g<G>_p<PER>_f32: rows of at most G * PER columns, G lanes per row (32 / G rows
// per warp), each lane holding PER elements in registers (element c = lane + i * G: the lanes of
// a row read adjacent floats). Exact row max and sum with shuffles inside the G-lane group, one
// expf per element, any width and alignment (scalar loads). Replaces one warp per row for
// narrow rows (a 1-column row used 1 of 32 lanes) and the online kernels up to 1024 columns.
// Instances: G = next_pow2(cols) / 4 (1 to 32), PER = 4 (fewer below 4 columns; up to 32 when
// G = 32): 4 elements per lane keep 4 loads in flight and cost one shuffle tree per 4 elements.
//   Launch: block 128, grid ceil(rows / (128 / G)).
template <int G, int PER>
__device__ __forceinline__ void softmax_small(const float* __restrict__ in, float* __restrict__ out,
                                              int rows, int cols) {
    const int lane = threadIdx.x % G;
    const u64 row = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / G;
    const bool live = row < (u64)rows;  // dead lanes still take part in the shuffles
    const float* x = in + (live ? row : 0) * (u64)cols;
    float v[PER];
    float m = NEG_INF;
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        const int c = lane + i * G;
        v[i] = (live && c < cols) ? x[c] : NEG_INF;
        m = fmaxf(m, v[i]);
    }
#pragma unroll
    for (int off = G / 2; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off, G));
    // fmaxf skips NaN, but exp(NaN - m) is NaN and reaches the sum, as does exp(-inf - -inf) for
    // an all -inf row: either way the whole row becomes NaN (as the CPU reference).
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        if (lane + i * G < cols) {
            v[i] = expf(v[i] - m);
            s += v[i];
        }
    }
#pragma unroll
    for (int off = G / 2; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off, G);
    if (!live) return;
    const float inv = 1.0f / s;
    float* y = out + row * (u64)cols;
#pragma unroll
    for (int i = 0; i < PER; ++i) {
        const int c = lane + i * G;
        if (c < cols) y[c] = v[i] * inv;
    }
}

extern "C" __global__ void __launch_bounds__(128) softmax_small_g1_p1_f32(const float* in, float* out, int rows, int cols) { softmax_small<1, 1>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(128) softmax_small_g1_p2_f32(const float* in, float* out, int rows, int cols) { softmax_small<1, 2>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(128) softmax_small_g1_p4_f32(const float* in, float* out, int rows, int cols) { softmax_small<1, 4>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(128) softmax_small_g2_p4_f32(const float* in, float* out, int rows, int cols) { softmax_small<2, 4>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(128) softmax_small_g4_p4_f32(const float* in, float* out, int rows, int cols) { softmax_small<4, 4>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(128) softmax_small_g8_p4_f32(const float* in, float* out, int rows, int cols) { softmax_small<8, 4>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(128) softmax_small_g16_p4_f32(const float* in, float* out, int rows, int cols) { softmax_small<16, 4>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(128) softmax_small_g32_p4_f32(const float* in, float* out, int rows, int cols) { softmax_small<32, 4>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(128) softmax_small_g32_p8_f32(const float* in, float* out, int rows, int cols) { softmax_small<32, 8>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(128) softmax_small_g32_p16_f32(const float* in, float* out, int rows, int cols) { softmax_small<32, 16>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(128) softmax_small_g32_p32_f32(const float* in, float* out, int rows, int cols) { softmax_small<32, 32>(in, out, rows, cols); }

// softmax_rows_regs_any_f32: softmax_rows_regs_f32 for any width and alignment: one block per
// row, up to 16 scalar elements per thread in registers (element i * blockDim.x + t), so rows of
// up to 16 * blockDim.x floats (16384 with 1024 threads) are read once. Same NaN / inf rules.
//   Launch: blockDim.x = a multiple of 32 >= cols / 16 (<= 1024), grid rows.
#define REG_ELEMS 16
extern "C" __global__ void __launch_bounds__(1024)
softmax_rows_regs_any_f32(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float smem[32];
    const u64 row = blockIdx.x;
    if (row >= (u64)rows) return;  // whole block leaves together
    const int nt = blockDim.x, t = threadIdx.x;
    const float* x = in + row * (u64)cols;
    float* y = out + row * (u64)cols;
    float v[REG_ELEMS];
    float m = NEG_INF;
#pragma unroll
    for (int p = 0; p < REG_ELEMS; ++p) {
        const int i = p * nt + t;
        v[p] = i < cols ? x[i] : NEG_INF;
        m = fmaxf(m, v[p]);
    }
    m = block_allreduce(m, true, smem);
    float s = 0.0f;
#pragma unroll
    for (int p = 0; p < REG_ELEMS; ++p) {
        if (p * nt + t < cols) {
            v[p] = expf(v[p] - m);
            s += v[p];
        }
    }
    s = block_allreduce(s, false, smem);
    const float inv = 1.0f / s;
#pragma unroll
    for (int p = 0; p < REG_ELEMS; ++p) {
        const int i = p * nt + t;
        if (i < cols) y[i] = v[p] * inv;
    }
}

// Long rows (more than fit in one block's registers): each row is split into P chunks of
// `chunk` columns, one block each (grid (P, rows)), so a few long rows still fill the GPU.
//   softmax_part_stats_f32: block (p, r) computes the online pair (m, d) of its chunk and writes
//       stats[2 * (r * P + p)] = m, stats[2 * (r * P + p) + 1] = d.
//   softmax_part_apply_f32: block (p, r) merges the row's P pairs (same order in every block, so
//       every chunk of a row uses the same m and d) and writes exp(x - m) / d for its chunk.
// The second read of x mostly hits L2. chunk must be a multiple of 4 (16-byte packets when the
// row starts are aligned). Launch: block 256 (a multiple of 32 <= 1024), grid (P, rows <= 65535).
__device__ __forceinline__ bool part_vec(const float* in, const float* out, int cols) {
    return (cols % 4 == 0) && aligned16(in, out);
}

extern "C" __global__ void __launch_bounds__(1024)
softmax_part_stats_f32(const float* __restrict__ in, float* __restrict__ stats, int rows, int cols,
                       int chunk) {
    const u64 row = blockIdx.y;
    if (row >= (u64)rows) return;
    const long long c0 = (long long)blockIdx.x * chunk;
    const int n = (int)max(0LL, min((long long)cols - c0, (long long)chunk));
    const float* x = in + row * (u64)cols + c0;
    const int t = threadIdx.x, nt = blockDim.x;
    MD s;
    s.m = NEG_INF;
    s.d = 0.0f;
    int done = 0;
    if ((cols % 4 == 0) && aligned16(in)) {
        const float4* x4 = reinterpret_cast<const float4*>(x);
        for (int p = t; p < n / 4; p += nt) {
            const float4 v = x4[p];
            md_add(s, v.x); md_add(s, v.y); md_add(s, v.z); md_add(s, v.w);
        }
        done = n / 4 * 4;
    }
    for (int c = done + t; c < n; c += nt) md_add(s, x[c]);
    s = warp_merge(s);
    __shared__ MD warp_md[32];
    if (t % 32 == 0) warp_md[t / 32] = s;
    __syncthreads();
    if (t == 0) {
        MD r = warp_md[0];
        for (int w = 1; w < nt / 32; ++w) r = md_merge(r, warp_md[w]);
        const u64 k = row * gridDim.x + blockIdx.x;
        stats[2 * k] = r.m;
        stats[2 * k + 1] = r.d;
    }
}

extern "C" __global__ void __launch_bounds__(1024)
softmax_part_apply_f32(const float* __restrict__ in, const float* __restrict__ stats,
                       float* __restrict__ out, int rows, int cols, int chunk) {
    const u64 row = blockIdx.y;
    if (row >= (u64)rows) return;
    const float* st = stats + 2 * row * gridDim.x;
    MD r;
    r.m = st[0];
    r.d = st[1];
    for (unsigned p = 1; p < gridDim.x; ++p) {
        MD o;
        o.m = st[2 * p];
        o.d = st[2 * p + 1];
        r = md_merge(r, o);
    }
    // A NaN anywhere in the row: its chunk's m is NaN (md_add keeps NaN out of m, but its d is
    // NaN), so the merged d is NaN and the whole row becomes NaN, as the other kernels.
    const float m = r.m, inv = 1.0f / r.d;
    const long long c0 = (long long)blockIdx.x * chunk;
    const int n = (int)max(0LL, min((long long)cols - c0, (long long)chunk));
    const float* x = in + row * (u64)cols + c0;
    float* y = out + row * (u64)cols + c0;
    const int t = threadIdx.x, nt = blockDim.x;
    int done = 0;
    if (part_vec(in, out, cols)) {
        const float4* x4 = reinterpret_cast<const float4*>(x);
        float4* y4 = reinterpret_cast<float4*>(y);
        for (int p = t; p < n / 4; p += nt) {
            const float4 v = x4[p];
            y4[p] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv,
                                expf(v.w - m) * inv);
        }
        done = n / 4 * 4;
    }
    for (int c = done + t; c < n; c += nt) y[c] = expf(x[c] - m) * inv;
}

// softmax_smem_f32: one block per row with the row staged in dynamic shared memory (cols floats,
// up to the device's opt-in limit: ~56k floats on an H100), for rows too long for registers:
// read once from global memory (16-byte loads when aligned, 4 in flight per thread), exact row max
// while loading, exp(x - max) once per element in place with the row sum, then the scaled write.
// Every thread touches only its own elements between the two block reductions, whose
// __syncthreads order the passes. Same NaN / inf rules as the registers kernel.
//   Launch: block 1024 (a multiple of 32), grid rows, dynamic shared memory 4 * cols bytes.
extern "C" __global__ void __launch_bounds__(1024)
softmax_smem_f32(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    extern __shared__ __align__(16) float srow[];
    __shared__ float red[32];
    const u64 row = blockIdx.x;
    if (row >= (u64)rows) return;  // whole block leaves together
    const int nt = blockDim.x, t = threadIdx.x;
    const float* x = in + row * (u64)cols;
    float* y = out + row * (u64)cols;
    const bool vec = part_vec(in, out, cols);
    const int packs = vec ? cols / 4 : 0;
    float4* s4 = reinterpret_cast<float4*>(srow);
    float m = NEG_INF;
    {
        const float4* x4 = reinterpret_cast<const float4*>(x);
        int p = t;
        for (; p + 3 * nt < packs; p += 4 * nt) {
            float4 v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) v[u] = x4[p + u * nt];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                s4[p + u * nt] = v[u];
                m = fmaxf(m, fmaxf(fmaxf(v[u].x, v[u].y), fmaxf(v[u].z, v[u].w)));
            }
        }
        for (; p < packs; p += nt) {
            const float4 v = x4[p];
            s4[p] = v;
            m = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
        }
        for (int c = packs * 4 + t; c < cols; c += nt) {
            const float v = x[c];
            srow[c] = v;
            m = fmaxf(m, v);
        }
    }
    m = block_allreduce(m, true, red);
    float s = 0.0f;
    for (int p = t; p < packs; p += nt) {
        float4 v = s4[p];
        v = make_float4(expf(v.x - m), expf(v.y - m), expf(v.z - m), expf(v.w - m));
        s4[p] = v;
        s += (v.x + v.y) + (v.z + v.w);
    }
    for (int c = packs * 4 + t; c < cols; c += nt) {
        const float e = expf(srow[c] - m);
        srow[c] = e;
        s += e;
    }
    s = block_allreduce(s, false, red);
    const float inv = 1.0f / s;
    float4* y4 = reinterpret_cast<float4*>(y);
    for (int p = t; p < packs; p += nt) {
        const float4 v = s4[p];
        y4[p] = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
    }
    for (int c = packs * 4 + t; c < cols; c += nt) y[c] = srow[c] * inv;
}
