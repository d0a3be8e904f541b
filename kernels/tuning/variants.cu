// kernels/tuning/variants.cu — candidate variants of the fast kernels, compiled at run time by
// `kernel_lab` (examples/src/bin/kernel_lab.rs), which checks each against the library kernel and
// times it beside the library kernel, the device-to-device copy and PyTorch (same run).
// Findings are in kernels/TUNING.md; the winners moved into kernels/cuda/*.cu.
typedef unsigned long long u64;
#define NEG_INF __int_as_float(0xff800000)

// ---- vector add: c = a + b over n4 float4 packets (n % 4 == 0, 16-byte aligned) -------------
__device__ __forceinline__ float4 ld_cs(const float4* p) {
    float4 v;
    asm volatile("ld.global.cs.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ void st_cs(float4* p, float4 v) {
    asm volatile("st.global.cs.v4.f32 [%0], {%1,%2,%3,%4};" :: "l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
}
__device__ __forceinline__ float4 add4(float4 x, float4 y) {
    return make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
}

// U packets per thread, block-strided (coalesced), all loads issued before the stores.
template <int U, bool CS>
__device__ __forceinline__ void va_body(const float* a, const float* b, float* c, u64 n4) {
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* c4 = reinterpret_cast<float4*>(c);
    const u64 base = (u64)blockIdx.x * blockDim.x * U + threadIdx.x;
    float4 x[U], y[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const u64 i = base + (u64)u * blockDim.x;
        if (i < n4) { x[u] = CS ? ld_cs(a4 + i) : a4[i]; y[u] = CS ? ld_cs(b4 + i) : b4[i]; }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const u64 i = base + (u64)u * blockDim.x;
        if (i < n4) { if (CS) st_cs(c4 + i, add4(x[u], y[u])); else c4[i] = add4(x[u], y[u]); }
    }
}
extern "C" __global__ void va_x1(const float* a, const float* b, float* c, u64 n4) { va_body<1, false>(a, b, c, n4); }
extern "C" __global__ void va_x2(const float* a, const float* b, float* c, u64 n4) { va_body<2, false>(a, b, c, n4); }
extern "C" __global__ void va_x4(const float* a, const float* b, float* c, u64 n4) { va_body<4, false>(a, b, c, n4); }
extern "C" __global__ void va_x2_cs(const float* a, const float* b, float* c, u64 n4) { va_body<2, true>(a, b, c, n4); }
extern "C" __global__ void va_x4_cs(const float* a, const float* b, float* c, u64 n4) { va_body<4, true>(a, b, c, n4); }
// Grid-stride with two packets in flight per iteration.
extern "C" __global__ void va_gs2(const float* a, const float* b, float* c, u64 n4) {
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* c4 = reinterpret_cast<float4*>(c);
    const u64 stride = (u64)gridDim.x * blockDim.x;
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + stride < n4; i += 2 * stride) {
        const float4 x0 = a4[i], y0 = b4[i], x1 = a4[i + stride], y1 = b4[i + stride];
        c4[i] = add4(x0, y0);
        c4[i + stride] = add4(x1, y1);
    }
    if (i < n4) c4[i] = add4(a4[i], b4[i]);
}

// ---- transpose: out[cols][rows] = in[rows][cols] ------------------------------------------
// Round 1 (tp_*: loops starting at threadIdx, so not unrolled) lost to the library's 32x8
// kernel: few loads in flight. Round 2: a TH x TW tile (TW = 32 * CX) with block (32, BY), every
// load and store in a compile-time unrolled loop, so each thread has TH/BY * CX loads in flight.
template <int TH, int CX, int BY>
__device__ __forceinline__ void tq_body(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    constexpr int TW = 32 * CX;
    __shared__ float tile[TH][TW + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c0 = blockIdx.x * TW, r0 = blockIdx.y * TH;
#pragma unroll
    for (int j = 0; j < TH; j += BY)
#pragma unroll
        for (int cx = 0; cx < CX; ++cx) {
            const int r = r0 + ty + j, c = c0 + tx + 32 * cx;
            if (r < rows && c < cols) tile[ty + j][tx + 32 * cx] = in[(u64)r * cols + c];
        }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < TW; j += BY)
#pragma unroll
        for (int rx = 0; rx < TH / 32; ++rx) {
            const int orow = c0 + ty + j, ocol = r0 + tx + 32 * rx;
            if (orow < cols && ocol < rows) out[(u64)orow * rows + ocol] = tile[tx + 32 * rx][ty + j];
        }
}
extern "C" __global__ void __launch_bounds__(256) tq_32x32_b8(const float* in, float* out, int rows, int cols) { tq_body<32, 1, 8>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(128) tq_32x32_b4(const float* in, float* out, int rows, int cols) { tq_body<32, 1, 4>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(256) tq_32x64_b8(const float* in, float* out, int rows, int cols) { tq_body<32, 2, 8>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(128) tq_32x64_b4(const float* in, float* out, int rows, int cols) { tq_body<32, 2, 4>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(256) tq_64x32_b8(const float* in, float* out, int rows, int cols) { tq_body<64, 1, 8>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(256) tq_64x64_b8(const float* in, float* out, int rows, int cols) { tq_body<64, 2, 8>(in, out, rows, cols); }
extern "C" __global__ void __launch_bounds__(512) tq_64x64_b16(const float* in, float* out, int rows, int cols) { tq_body<64, 2, 16>(in, out, rows, cols); }

// ---- softmax: one block per row, the row held in registers (cols == NT * 4 * P) -----------
template <int NT>
__device__ __forceinline__ float block_reduce(float v, bool is_max, float* smem) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    v = lane < NT / 32 ? smem[lane] : (is_max ? NEG_INF : 0.0f);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    __syncthreads();  // smem is reused by the next reduction
    return v;
}
template <int NT, int P, bool EXP2>
__device__ __forceinline__ void sm_body(const float* __restrict__ in, float* __restrict__ out, int cols) {
    __shared__ float smem[32];
    const float4* x4 = reinterpret_cast<const float4*>(in + (u64)blockIdx.x * cols);
    float4* y4 = reinterpret_cast<float4*>(out + (u64)blockIdx.x * cols);
    const int t = threadIdx.x;
    float4 v[P];
    float m = NEG_INF;
#pragma unroll
    for (int p = 0; p < P; ++p) {
        v[p] = x4[p * NT + t];
        m = fmaxf(m, fmaxf(fmaxf(v[p].x, v[p].y), fmaxf(v[p].z, v[p].w)));
    }
    m = block_reduce<NT>(m, true, smem);
    float s = 0.0f;
    const float L2E = 1.4426950408889634f;
#pragma unroll
    for (int p = 0; p < P; ++p) {
        if (EXP2) {
            const float ml = m * L2E;
            v[p].x = exp2f(fmaf(v[p].x, L2E, -ml)); v[p].y = exp2f(fmaf(v[p].y, L2E, -ml));
            v[p].z = exp2f(fmaf(v[p].z, L2E, -ml)); v[p].w = exp2f(fmaf(v[p].w, L2E, -ml));
        } else {
            v[p].x = expf(v[p].x - m); v[p].y = expf(v[p].y - m); v[p].z = expf(v[p].z - m); v[p].w = expf(v[p].w - m);
        }
        s += (v[p].x + v[p].y) + (v[p].z + v[p].w);
    }
    s = block_reduce<NT>(s, false, smem);
    const float inv = 1.0f / s;
#pragma unroll
    for (int p = 0; p < P; ++p) y4[p * NT + t] = make_float4(v[p].x * inv, v[p].y * inv, v[p].z * inv, v[p].w * inv);
}
extern "C" __global__ void __launch_bounds__(256) sm_256x4(const float* in, float* out, int rows, int cols) { sm_body<256, 4, false>(in, out, cols); }
extern "C" __global__ void __launch_bounds__(128) sm_128x8(const float* in, float* out, int rows, int cols) { sm_body<128, 8, false>(in, out, cols); }
extern "C" __global__ void __launch_bounds__(512) sm_512x2(const float* in, float* out, int rows, int cols) { sm_body<512, 2, false>(in, out, cols); }
extern "C" __global__ void __launch_bounds__(1024) sm_1024x1(const float* in, float* out, int rows, int cols) { sm_body<1024, 1, false>(in, out, cols); }
extern "C" __global__ void __launch_bounds__(256) sm_256x4_exp2(const float* in, float* out, int rows, int cols) { sm_body<256, 4, true>(in, out, cols); }
extern "C" __global__ void __launch_bounds__(128) sm_128x8_exp2(const float* in, float* out, int rows, int cols) { sm_body<128, 8, true>(in, out, cols); }
