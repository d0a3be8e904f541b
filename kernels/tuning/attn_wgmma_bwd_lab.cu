// attn_wgmma_bwd_lab.cu — a standalone check-and-time harness for cuda/attention_wgmma_bwd.cu (the
// wgmma/TMA attention backward) on a GPU machine with nvcc and no Rust toolchain. It compiles the
// kernel sources themselves (so lab macros apply: TMA_SPIN_LIMIT turns a stuck barrier wait into
// a message and a trap), runs the Hopper forward (cuda/attention_wgmma.cu) for out and lse and
// attention.cu's delta kernel, encodes the 4-D tensor maps as kernels/src/ops/attention/
// bwd_wgmma.rs does, and checks dq, dk, dv against a CPU reference in f64 (on the rounded inputs,
// the GPU's lse and the GPU's rounded out for delta) and against the mma.sync backward
// (cuda/attention_mma_bwd.cu), and that a second run gives the same bits. It runs the one-pass
// backward (cuda/attention_wgmma_bwd_fused.cu: memset, attn_bwd_fused_wgmma_*, the dq conversion)
// too: its dq against the reference, its dk and dv against the dk/dv kernel's bits, its time
// beside the two kernels' (one-pass variants: -DABF_MBAR_SYNC=0, -DABF_DQ_PAD=32,
// -DABF_LAB_SKIP=1..3).
//
// Off the GPU machine, with the nvcc 13.0 wheels of tools/install-nvcc-wheel (headers and a
// static cudart) and a stub libcuda.so.1 that only has to link (gcc -shared -fPIC
// -Wl,-soname,libcuda.so.1 of empty cu* functions):
//   N=$(tools/install-nvcc-wheel)/nvidia/cu13; $N/bin/nvcc ... -L$N/lib -L<stub dir> -lcuda
//
//   nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o attn_bwd_lab \
//       kernels/tuning/attn_wgmma_bwd_lab.cu -lcuda
//   (add -DTMA_SPIN_LIMIT=200000000 for a build whose stuck barrier waits print and trap: its
//   waits call printf, which serialises the wgmma pipeline (ptxas C7510), so do not time it;
//   tile variants, D = 64 only: -DABW_KV_OVERLAP=1, -DABW_KV_BM64=128 -DABW_KV_STAGES64=4,
//   -DABW_DQ_BN64=128)
//   ./attn_bwd_lab quick                     # a few cases, both dtypes
//   ./attn_bwd_lab check                     # every case (D 64/128, causal/full, N 1 .. 1000, Nq != Nk,
//                                            #   packed QKV with a strided dO, B*H > 1, many tiles per CTA)
//   ./attn_bwd_lab time B H N D causal [f16] # backward µs and TFLOP/s: wgmma vs mma.sync, same run
//   ./attn_bwd_lab rep B H Nq Nk D causal R  # R checked runs with new seeds (intermittent hangs, races)
//   ... --module FILE                        # the wgmma backward from a PTX or cubin (e.g. the committed
//                                            #   kernels/sass/attention_wgmma_bwd.sm_90a.cubin, 12.4 SASS)
//   ... [--module FILE] --fused-module FILE  # the one pass from a PTX or cubin (the committed
//                                            #   kernels/sass/attention_wgmma_bwd_fused.sm_90a.cubin;
//                                            #   the lab must be built with the same -DABF_* flags)
// TFLOP/s count the backward as 2.5 forwards: 2.5 · 4·B·H·N²·D, halved when causal (FlashAttention's
// convention); "bwd" is dq + dk/dv, "+delta" adds the shared delta kernel.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <random>
#include <chrono>
#include <thread>
#include <atomic>
#include <algorithm>
#include <unistd.h>

#include "../cuda/attention.cu"
#include "../cuda/attention_mma_bwd.cu"
#include "../cuda/attention_wgmma.cu"
#include "../cuda/attention_wgmma_bwd.cu"
#include "../cuda/attention_wgmma_bwd_fused.cu"

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_; cuGetErrorString(r_, &s_); \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_); exit(1); } } while (0)
#define RK(x) do { cudaError_t r_ = (x); if (r_ != cudaSuccess) { fprintf(stderr, "%s:%d %s: %s\n", \
    __FILE__, __LINE__, #x, cudaGetErrorString(r_)); exit(1); } } while (0)

typedef unsigned short u16;
static float bf2f(u16 b) { unsigned u = (unsigned)b << 16; float f; memcpy(&f, &u, 4); return f; }
static u16 f2bf(float f) {
    unsigned u; memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (u16)(u >> 16);
}
static float h2f(u16 h) {
    unsigned s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : (e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), (int)e - 25));
    return s ? -v : v;
}
static u16 f2h(float f) {  // round to nearest even; the inputs here are small and finite
    unsigned s = std::signbit(f) ? 0x8000u : 0u;
    float a = fabsf(f);
    if (a >= 65520.0f) return (u16)(s | 0x7c00);
    if (a < ldexpf(1.0f, -14)) return (u16)(s | (unsigned)nearbyintf(a * ldexpf(1.0f, 24)));
    int e; float m = frexpf(a, &e);                       // a = m 2^e, m in [0.5, 1)
    unsigned mm = (unsigned)nearbyintf(m * 2048.0f);      // 11 bits with the leading one
    if (mm == 2048) { mm = 1024; ++e; }
    return (u16)(s | ((unsigned)(e + 14) << 10) | (mm & 1023));
}

struct View { long long sb, sh, sr; };  // element strides of a [B, H, N, D] view

static void encode(CUtensorMap* m, void* base, int D, int N, int H, int B, View v, int box_rows, bool f16) {
    cuuint64_t dims[4] = {(cuuint64_t)D, (cuuint64_t)N, (cuuint64_t)H, (cuuint64_t)B};
    cuuint64_t strides[3] = {(cuuint64_t)v.sr * 2, (cuuint64_t)v.sh * 2, (cuuint64_t)v.sb * 2};
    cuuint32_t box[4] = {64, (cuuint32_t)box_rows, 1, 1}, es[4] = {1, 1, 1, 1};
    CK(cuTensorMapEncodeTiled(m, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, base,
                              dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

static bool wait_for(cudaStream_t s, double seconds) {
    auto t0 = std::chrono::steady_clock::now();
    for (;;) {
        cudaError_t e = cudaStreamQuery(s);
        if (e == cudaSuccess) return true;
        if (e != cudaErrorNotReady) { fprintf(stderr, "kernel error: %s\n", cudaGetErrorString(e)); exit(1); }
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

// The kernels by [f16][D == 128]; every one takes 16-bit elements as unsigned short.
typedef void (*FwdFn)(TensorMap, TensorMap, TensorMap, const u16*, const u16*, const u16*, u16*, float*, int, int,
                      int, int, long long, long long, long long, float, int);
typedef void (*DeltaFn)(const u16*, const u16*, float*, int, int, int, int, long long, long long, long long,
                        long long, long long, long long);
typedef void (*MmaDqFn)(const u16*, const u16*, const u16*, const u16*, const float*, const float*, u16*, int, int,
                        int, int, int, long long, long long, long long, long long, long long, long long, long long,
                        long long, long long, long long, long long, long long, long long, long long, long long, float,
                        int);
typedef void (*MmaKvFn)(const u16*, const u16*, const u16*, const u16*, const float*, const float*, u16*, u16*, int,
                        int, int, int, int, long long, long long, long long, long long, long long, long long,
                        long long, long long, long long, long long, long long, long long, long long, long long,
                        long long, long long, long long, long long, long long, float, int);
static const FwdFn FWD[2][2] = {{attn_fwd_wgmma_d64_bf16, attn_fwd_wgmma_d128_bf16},
                                {attn_fwd_wgmma_d64_f16, attn_fwd_wgmma_d128_f16}};
static const DeltaFn DELTA[2] = {attn_bwd_delta_bf16, attn_bwd_delta_f16};
static const MmaDqFn MMA_DQ[2][2] = {{attn_bwd_dq_mma_d64_bf16, attn_bwd_dq_mma_d128_bf16},
                                     {attn_bwd_dq_mma_d64_f16, attn_bwd_dq_mma_d128_f16}};
static const MmaKvFn MMA_KV[2][2] = {{attn_bwd_dkdv_mma_d64_bf16, attn_bwd_dkdv_mma_d128_bf16},
                                     {attn_bwd_dkdv_mma_d64_f16, attn_bwd_dkdv_mma_d128_f16}};
static const void* const WG_DQ[2][2] = {{(const void*)attn_bwd_dq_wgmma_d64_bf16, (const void*)attn_bwd_dq_wgmma_d128_bf16},
                                        {(const void*)attn_bwd_dq_wgmma_d64_f16, (const void*)attn_bwd_dq_wgmma_d128_f16}};
static const void* const WG_FU[2][2] = {
    {(const void*)attn_bwd_fused_wgmma_d64_bf16, (const void*)attn_bwd_fused_wgmma_d128_bf16},
    {(const void*)attn_bwd_fused_wgmma_d64_f16, (const void*)attn_bwd_fused_wgmma_d128_f16}};
// The ordered one pass (dq's adds in key-tile order: bitwise reproducible).
static const void* const WG_FO[2][2] = {
    {(const void*)attn_bwd_fused_ord_wgmma_d64_bf16, (const void*)attn_bwd_fused_ord_wgmma_d128_bf16},
    {(const void*)attn_bwd_fused_ord_wgmma_d64_f16, (const void*)attn_bwd_fused_ord_wgmma_d128_f16}};
typedef void (*ConvFn)(const float*, u16*, int, int, int, int, long long, long long, long long, float);
static const ConvFn CONV[2] = {(ConvFn)attn_bwd_dq_convert_bf16, (ConvFn)attn_bwd_dq_convert_f16};
static const void* const WG_KV[2][2] = {
    {(const void*)attn_bwd_dkdv_wgmma_d64_bf16, (const void*)attn_bwd_dkdv_wgmma_d128_bf16},
    {(const void*)attn_bwd_dkdv_wgmma_d64_f16, (const void*)attn_bwd_dkdv_wgmma_d128_f16}};
// `--module FILE`: the wgmma backward kernels from that module instead.
static CUfunction g_mod_dq[2][2], g_mod_kv[2][2];
static bool g_module = false;
// `--fused-module FILE`: the one-pass kernels from that module (e.g. the committed
// kernels/sass/attention_wgmma_bwd_fused.sm_90a.cubin) instead.
static CUfunction g_mod_fu[2][2];
static bool g_fmodule = false;
static int g_sms = 0;

struct Problem {
    int B, H, Nq, Nk, D, causal;
    bool packed, f16;
};

static double tflops(const Problem& p, double us) {
    return 2.5 * 4.0 * p.B * p.H * (double)p.Nq * p.Nk * p.D * (p.causal ? 0.5 : 1.0) / us * 1e-6;
}

// The CPU reference for one (b, h), f64: P from the GPU's lse, delta from the GPU's rounded out.
struct Host {
    const Problem* p;
    const std::vector<u16>* buf;  // q, k, v (and dO) elements
    View vq, vk, vv, vdo;
    size_t oq, ok, ov, odo;
    const std::vector<u16>* out;
    const std::vector<float>* lse;
    std::vector<double> dq, dk, dv;  // dense
    float cv(u16 x) const { return p->f16 ? h2f(x) : bf2f(x); }
    void run(long long bh) {
        const int H = p->H, Nq = p->Nq, Nk = p->Nk, D = p->D;
        const int b = (int)(bh / H), h = (int)(bh % H);
        const double scale = 1.0 / sqrt((double)D);
        auto at = [&](size_t o, View v, int r, int d) { return (double)cv((*buf)[o + b * v.sb + h * v.sh + (long long)r * v.sr + d]); };
        std::vector<double> qr(D), dor(D);
        for (int i = 0; i < Nq; ++i) {
            long long lim = p->causal ? (long long)i + Nk - Nq : (long long)Nk - 1;
            if (lim > Nk - 1) lim = Nk - 1;
            if (lim < 0) continue;
            const double l = (*lse)[bh * Nq + i];
            double delta = 0;
            for (int d = 0; d < D; ++d) {
                qr[d] = at(oq, vq, i, d);
                dor[d] = at(odo, vdo, i, d);
                delta += dor[d] * cv((*out)[(bh * Nq + i) * D + d]);
            }
            for (long long j = 0; j <= lim; ++j) {
                double s = 0, dp = 0;
                for (int d = 0; d < D; ++d) {
                    s += qr[d] * at(ok, vk, (int)j, d);
                    dp += dor[d] * at(ov, vv, (int)j, d);
                }
                const double pr = exp(s * scale - l), ds = pr * (dp - delta);
                double* dqr = &dq[(bh * Nq + i) * D];
                double* dkr = &dk[(bh * Nk + j) * D];
                double* dvr = &dv[(bh * Nk + j) * D];
                for (int d = 0; d < D; ++d) {
                    dqr[d] += scale * ds * at(ok, vk, (int)j, d);
                    dkr[d] += scale * ds * qr[d];
                    dvr[d] += pr * dor[d];
                }
            }
        }
    }
};

// max |got - ref| (NaN counts as infinite) and max |ref|.
static double abs_err(const std::vector<u16>& got, const std::vector<double>& ref, bool f16, double* maxref) {
    double worst = 0, mr = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        double g = f16 ? h2f(got[i]) : bf2f(got[i]);
        if (std::isnan(g)) g = INFINITY;
        worst = std::max(worst, fabs(g - ref[i]));
        mr = std::max(mr, fabs(ref[i]));
    }
    *maxref = mr;
    return worst;
}
static double rel_diff(const std::vector<u16>& a, const std::vector<u16>& b, bool f16) {
    std::vector<double> r(b.size());
    for (size_t i = 0; i < b.size(); ++i) r[i] = f16 ? h2f(b[i]) : bf2f(b[i]);
    double mr;
    const double e = abs_err(a, r, f16, &mr);
    return e / std::max(mr, 1e-30);
}

// Runs one problem: forward, delta, the wgmma backward twice (bit identity), the mma.sync
// backward; checks against the CPU reference when `check`; times both when time_iters > 0.
static bool run(const Problem& p, bool check, int time_iters, unsigned seed) {
    const int B = p.B, H = p.H, Nq = p.Nq, Nk = p.Nk, D = p.D, f = p.f16, dd = D == 128;
    if (p.packed && Nq != Nk) { fprintf(stderr, "packed needs Nq == Nk\n"); exit(1); }
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto rnd = [&]() { float x = u(rng); return f ? f2h(x) : f2bf(x); };
    const size_t nq = (size_t)B * H * Nq * D, nk = (size_t)B * H * Nk * D;
    // One buffer: q, k, v (packed [B, N, 3, H, D] or three dense), then dO (strided [B, Nq, H, D]
    // when packed, else dense), then a dense copy of dO for delta and the mma.sync backward.
    const size_t nqkv = p.packed ? 3 * nq : nq + 2 * nk;
    std::vector<u16> hbuf(nqkv + 2 * nq);
    for (size_t i = 0; i < nqkv + nq; ++i) hbuf[i] = rnd();
    Host ref;
    ref.p = &p; ref.buf = &hbuf;
    if (p.packed) {
        ref.vq = ref.vk = ref.vv = View{(long long)Nq * 3 * H * D, (long long)D, (long long)3 * H * D};
        ref.oq = 0; ref.ok = (size_t)H * D; ref.ov = 2 * (size_t)H * D;
        ref.vdo = View{(long long)Nq * H * D, (long long)D, (long long)H * D};
    } else {
        ref.vq = View{(long long)H * Nq * D, (long long)Nq * D, D};
        ref.vk = ref.vv = View{(long long)H * Nk * D, (long long)Nk * D, D};
        ref.oq = 0; ref.ok = nq; ref.ov = nq + nk;
        ref.vdo = ref.vq;
    }
    ref.odo = nqkv;
    const size_t odense = nqkv + nq;
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H; ++h)
            for (int i = 0; i < Nq; ++i)
                for (int d = 0; d < D; ++d)
                    hbuf[odense + (((size_t)b * H + h) * Nq + i) * D + d] =
                        hbuf[ref.odo + b * ref.vdo.sb + h * ref.vdo.sh + (long long)i * ref.vdo.sr + d];
    u16* d; RK(cudaMalloc(&d, hbuf.size() * 2));
    RK(cudaMemcpy(d, hbuf.data(), hbuf.size() * 2, cudaMemcpyHostToDevice));
    u16 *pq = d + ref.oq, *pk = d + ref.ok, *pv = d + ref.ov, *pdo = d + ref.odo, *pdo_dense = d + odense;
    u16* g; RK(cudaMalloc(&g, (nq + 2 * nk) * 2 * 4 + nq * 2));  // out; dq, dk, dv for wgmma, again, mma, fused
    u16* out = g; u16* gw = g + nq; u16* gw2 = gw + nq + 2 * nk; u16* gm = gw2 + nq + 2 * nk;
    u16* gf = gm + nq + 2 * nk;
    float* acc; RK(cudaMalloc(&acc, nq * 4));
    // The ordered one pass's tile counter and (b, h, query tile) counters; its dq, dk, dv at go,
    // twice (go2: the rerun must give the same bits).
    const long long n_order = 1 + (long long)B * H * ((Nq + ABF_BM(D) - 1) / ABF_BM(D));
    int* order; RK(cudaMalloc(&order, n_order * 4));
    u16* go; RK(cudaMalloc(&go, (nq + 2 * nk) * 2 * 2));
    u16* go2 = go + nq + 2 * nk;
    RK(cudaMemset(go, 0xff, (nq + 2 * nk) * 2 * 2));
    float *lse, *delta;
    RK(cudaMalloc(&lse, (size_t)B * H * Nq * 4)); RK(cudaMalloc(&delta, (size_t)B * H * Nq * 4));
    RK(cudaMemset(g, 0xff, (nq + 2 * nk) * 8 + nq * 2));  // NaN everywhere: every element must be written
    CUtensorMap m[7];
    encode(&m[0], pq, D, Nq, H, B, ref.vq, 128, f);  // the forward's maps
    encode(&m[1], pk, D, Nk, H, B, ref.vk, 128, f);
    encode(&m[2], pv, D, Nk, H, B, ref.vv, 128, f);
    encode(&m[3], pq, D, Nq, H, B, ref.vq, 64, f);   // the backward's
    encode(&m[4], pk, D, Nk, H, B, ref.vk, 64, f);
    encode(&m[5], pv, D, Nk, H, B, ref.vv, 64, f);
    encode(&m[6], pdo, D, Nq, H, B, ref.vdo, 64, f);
    TensorMap t[7];
    for (int i = 0; i < 7; ++i) memcpy(&t[i], &m[i], 128);
    const float scale = 1.0f / sqrtf((float)D);
    int cz = p.causal, Bv = B, Hv = H, Nqv = Nq, Nkv = Nk;
    float sc = scale;
    cudaStream_t s; RK(cudaStreamCreate(&s));
    // out, dO (dense copy), dq, dk, dv are dense [B, H, N, D] here: their (batch, head, row) strides.
    long long qsb = (long long)H * Nq * D, qsh = (long long)Nq * D, qsr = D;
    long long ksb = (long long)H * Nk * D, ksh = (long long)Nk * D, ksr = D, dv_at = -1;

    // Forward (out, lse) and delta.
    const int fsm = AW_SMEM_NC(D, 2);
    RK(cudaFuncSetAttribute(FWD[f][dd], cudaFuncAttributeMaxDynamicSharedMemorySize, fsm));
    const long long fq = (long long)B * H * ((Nq + AW_BM_NC(2) - 1) / AW_BM_NC(2));
    FWD[f][dd]<<<(int)std::min<long long>(fq, g_sms), AW_THREADS_NC(2), fsm, s>>>(t[0], t[1], t[2], pq, pk, pv, out, lse, B,
                                                                            H, Nq, Nk, qsb, qsh, qsr, scale,
                                                                            p.causal);
    const long long rows = (long long)B * H * Nq;
    const int dgrid = (int)std::min<long long>((rows + 3) / 4, (long long)g_sms * 64);
    auto launch_delta = [&]() { DELTA[f]<<<dgrid, 128, 0, s>>>(out, pdo_dense, delta, B, H, Nq, D, qsb, qsh, qsr,
                                                                  qsb, qsh, qsr); };
    launch_delta();
    RK(cudaGetLastError());

    // The wgmma backward into (dq, dk, dv) at `o`.
    const int dq_smem = ABW_DQ_SMEM_BYTES(D), kv_smem = ABW_KV_SMEM_BYTES(D);
    const int dq_grid = (int)std::min<long long>((long long)B * H * ((Nq + 127) / 128), g_sms);
    const int kv_grid = (int)std::min<long long>((long long)B * H * ((Nk + 127) / 128), g_sms);
    if (g_module) {
        CK(cuFuncSetAttribute(g_mod_dq[f][dd], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dq_smem));
        CK(cuFuncSetAttribute(g_mod_kv[f][dd], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, kv_smem));
    } else {
        RK(cudaFuncSetAttribute(WG_DQ[f][dd], cudaFuncAttributeMaxDynamicSharedMemorySize, dq_smem));
        RK(cudaFuncSetAttribute(WG_KV[f][dd], cudaFuncAttributeMaxDynamicSharedMemorySize, kv_smem));
    }
    u16 *odq, *odk, *odv;
    void* dq_args[] = {&t[3], &t[4], &t[5], &t[6], &pq,  &pk,  &pv, &pdo, &lse, &delta, &odq,
                       &Bv,   &Hv,   &Nqv,  &Nkv,  &qsb, &qsh, &qsr, &sc, &cz};
    void* kv_args[] = {&t[3], &t[4], &t[5], &t[6], &pq,  &pk,  &pv,  &pdo, &lse, &delta, &odk, &odv,
                       &Bv,   &Hv,   &Nqv,  &Nkv,  &ksb, &ksh, &ksr, &ksb, &ksh, &ksr,  &dv_at, &sc, &cz};
    auto launch_wg_dq = [&](u16* o) {
        odq = o;
        if (g_module) CK(cuLaunchKernel(g_mod_dq[f][dd], dq_grid, 1, 1, ABW_THREADS, 1, 1, dq_smem, (CUstream)s, dq_args, nullptr));
        else RK(cudaLaunchKernel(WG_DQ[f][dd], dq_grid, ABW_THREADS, dq_args, dq_smem, s));
    };
    auto launch_wg_kv = [&](u16* o) {
        odk = o + nq; odv = o + nq + nk;
        if (g_module) CK(cuLaunchKernel(g_mod_kv[f][dd], kv_grid, 1, 1, ABW_THREADS, 1, 1, kv_smem, (CUstream)s, kv_args, nullptr));
        else RK(cudaLaunchKernel(WG_KV[f][dd], kv_grid, ABW_THREADS, kv_args, kv_smem, s));
    };
    // The fused wgmma backward (dk, dv, and dq through the f32 workspace) into gf.
    const int fu_smem = ABF_SMEM_BYTES(D);
    if (g_fmodule) CK(cuFuncSetAttribute(g_mod_fu[f][dd], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, fu_smem));
    else RK(cudaFuncSetAttribute(WG_FU[f][dd], cudaFuncAttributeMaxDynamicSharedMemorySize, fu_smem));
    u16 *fdk, *fdv;
    float* facc = acc;
    void* fu_args[] = {&t[3], &t[4], &t[5], &t[6], &pq,  &pk,  &pv,  &pdo, &lse, &delta, &facc, &fdk, &fdv,
                       &Bv,   &Hv,   &Nqv,  &Nkv,  &ksb, &ksh, &ksr, &ksb, &ksh, &ksr,  &dv_at, &sc, &cz};
    const int cgrid = (int)std::min<long long>(((long long)nq / 4 + 255) / 256, (long long)g_sms * 16);
    auto launch_fused = [&](u16* o) {
        fdk = o + nq; fdv = o + nq + nk;
        RK(cudaMemsetAsync(acc, 0, nq * 4, s));
        if (g_fmodule) CK(cuLaunchKernel(g_mod_fu[f][dd], kv_grid, 1, 1, ABW_THREADS, 1, 1, fu_smem, (CUstream)s, fu_args, nullptr));
        else RK(cudaLaunchKernel(WG_FU[f][dd], kv_grid, ABW_THREADS, fu_args, fu_smem, s));
        CONV[f]<<<std::max(cgrid, 1), 256, 0, s>>>(acc, o, B, H, Nq, D, qsb, qsh, qsr, scale);
    };
    RK(cudaFuncSetAttribute(WG_FO[f][dd], cudaFuncAttributeMaxDynamicSharedMemorySize, fu_smem));
    // The ordered kernels' tile order: key-tile-major where the library runs it (D = 64), and in
    // the key-tile-major build.
    int kt_major = ABF_KT_MAJOR || D == 64;
    void* fo_args[] = {&t[3], &t[4], &t[5], &t[6], &pq,  &pk,  &pv,  &pdo, &lse, &delta, &facc, &fdk, &fdv,
                       &Bv,   &Hv,   &Nqv,  &Nkv,  &ksb, &ksh, &ksr, &ksb, &ksh, &ksr,  &dv_at, &sc, &cz, &order, &kt_major};
    // ABF_ORD_GRID (lab): CTAs of the ordered kernel (default: as the others); fewer than the SMs
    // shows that its waits end whatever number of CTAs run at once.
    const int ord_grid = getenv("ABF_ORD_GRID") ? std::max(1, atoi(getenv("ABF_ORD_GRID"))) : kv_grid;
    auto launch_ord = [&](u16* o) {
        fdk = o + nq; fdv = o + nq + nk;
        RK(cudaMemsetAsync(acc, 0, nq * 4, s));
        RK(cudaMemsetAsync(order, 0, n_order * 4, s));
        RK(cudaLaunchKernel(WG_FO[f][dd], ord_grid, ABW_THREADS, fo_args, fu_smem, s));
        CONV[f]<<<std::max(cgrid, 1), 256, 0, s>>>(acc, o, B, H, Nq, D, qsb, qsh, qsr, scale);
    };
    // The mma.sync backward (dense dO) into gm.
    const int mkv_smem = dd ? AB_DKDV128_DYN_SMEM : 0;
    if (dd) RK(cudaFuncSetAttribute(MMA_KV[f][dd], cudaFuncAttributeMaxDynamicSharedMemorySize, mkv_smem));
    const View a = ref.vq, bk = ref.vk, c = ref.vv;
    auto launch_mma_dq = [&]() {
        MMA_DQ[f][dd]<<<(unsigned)((long long)B * H * ((Nq + 63) / 64)), 128, 0, s>>>(
            pq, pk, pv, pdo_dense, lse, delta, gm, B, H, Nq, Nk, D, a.sb, a.sh, a.sr, bk.sb, bk.sh, bk.sr, c.sb, c.sh,
            c.sr, qsb, qsh, qsr, qsb, qsh, qsr, scale, p.causal);
    };
    auto launch_mma_kv = [&]() {
        MMA_KV[f][dd]<<<(unsigned)((long long)B * H * ((Nk + 63) / 64)), 128, mkv_smem, s>>>(
            pq, pk, pv, pdo_dense, lse, delta, gm + nq, gm + nq + nk, B, H, Nq, Nk, D, a.sb, a.sh, a.sr, bk.sb, bk.sh,
            bk.sr, c.sb, c.sh, c.sr, qsb, qsh, qsr, ksb, ksh, ksr, ksb, ksh, ksr, dv_at, scale,
            p.causal);
    };
    auto hang = [&](const char* what) {
        if (wait_for(s, 20.0)) return;
        printf("HANG (%s) B%d H%d Nq%d Nk%d D%d causal%d packed%d %s\n", what, B, H, Nq, Nk, D, p.causal, p.packed,
               f ? "f16" : "bf16");
        fflush(stdout);
        _exit(3);
    };
    hang("forward");
    launch_wg_dq(gw);
    hang("wgmma dq");
    launch_wg_kv(gw);
    hang("wgmma dkdv");
    launch_wg_dq(gw2);
    launch_wg_kv(gw2);
    hang("wgmma rerun");
    launch_mma_dq();
    launch_mma_kv();
    hang("mma.sync");
    launch_fused(gf);
    hang("fused");
    launch_ord(go);
    hang("ordered");
    launch_ord(go2);
    hang("ordered rerun");
    RK(cudaGetLastError());

    const size_t ng = nq + 2 * nk;
    std::vector<u16> hw(ng), hw2(ng), hm(ng), hf(ng), hout(nq);
    std::vector<float> hlse(rows);
    RK(cudaMemcpy(hw.data(), gw, ng * 2, cudaMemcpyDeviceToHost));
    RK(cudaMemcpy(hw2.data(), gw2, ng * 2, cudaMemcpyDeviceToHost));
    RK(cudaMemcpy(hm.data(), gm, ng * 2, cudaMemcpyDeviceToHost));
    RK(cudaMemcpy(hf.data(), gf, ng * 2, cudaMemcpyDeviceToHost));
    // The fused kernel's dk, dv: the same bits as the dk/dv kernel's.
    const bool fsame = memcmp(hw.data() + nq, hf.data() + nq, 2 * nk * 2) == 0;
    // The ordered kernel's: dk, dv the same bits as the dk/dv kernel's; dq the same bits on rerun.
    std::vector<u16> ho(2 * ng);
    RK(cudaMemcpy(ho.data(), go, 2 * ng * 2, cudaMemcpyDeviceToHost));
    const bool osame = memcmp(hw.data() + nq, ho.data() + nq, 2 * nk * 2) == 0;
    const bool orerun = memcmp(ho.data(), ho.data() + ng, ng * 2) == 0;
    RK(cudaMemcpy(hout.data(), out, nq * 2, cudaMemcpyDeviceToHost));
    RK(cudaMemcpy(hlse.data(), lse, rows * 4, cudaMemcpyDeviceToHost));
    const bool same = memcmp(hw.data(), hw2.data(), ng * 2) == 0;
    auto part = [&](const std::vector<u16>& v, size_t o, size_t n) { return std::vector<u16>(v.begin() + o, v.begin() + o + n); };
    const char* names[3] = {"dq", "dk", "dv"};
    const size_t offs[3] = {0, nq, nq + nk}, lens[3] = {nq, nk, nk};
    bool ok = same && fsame && osame && orerun;
    char line[512];
    int len = snprintf(line, sizeof line, "B%d H%d Nq%d Nk%d D%d causal%d packed%d %s:", B, H, Nq, Nk, D, p.causal,
                       p.packed, f ? "f16" : "bf16");
    if (check) {
        ref.out = &hout; ref.lse = &hlse;
        ref.dq.assign(nq, 0.0); ref.dk.assign(nk, 0.0); ref.dv.assign(nk, 0.0);
        std::atomic<long long> next(0);
        std::vector<std::thread> pool;
        const unsigned nt = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
        for (unsigned i = 0; i < nt; ++i)
            pool.emplace_back([&]() { for (long long bh; (bh = next++) < (long long)B * H;) ref.run(bh); });
        for (auto& th : pool) th.join();
        const std::vector<double>* refs[3] = {&ref.dq, &ref.dk, &ref.dv};
        // Tolerance relative to the largest |gradient|: P and dS are rounded to 16 bits before the
        // second products (as in the mma.sync kernels); bf16 errors run ~3e-3, f16 ~5e-4.
        const double tol = f ? 5e-3 : 2e-2;
        for (int i = 0; i < 3; ++i) {
            double mr, mrm;
            const double e = abs_err(part(hw, offs[i], lens[i]), *refs[i], f, &mr);
            const double em = abs_err(part(hm, offs[i], lens[i]), *refs[i], f, &mrm);
            ok = ok && e <= tol * mr + 1e-5;
            len += snprintf(line + len, sizeof line - len, " %s %.2e (mma %.2e)", names[i], e / std::max(mr, 1e-30),
                            em / std::max(mrm, 1e-30));
            if (i == 0) {  // the fused kernel's dq
                double mrf;
                const double ef = abs_err(part(hf, 0, nq), *refs[0], f, &mrf);
                ok = ok && ef <= tol * mrf + 1e-5;
                len += snprintf(line + len, sizeof line - len, " (fused %.2e)", ef / std::max(mrf, 1e-30));
                double mro;
                const double eo = abs_err(part(ho, 0, nq), *refs[0], f, &mro);
                ok = ok && eo <= tol * mro + 1e-5;
                len += snprintf(line + len, sizeof line - len, " (ordered %.2e)", eo / std::max(mro, 1e-30));
            }
        }
    } else {
        for (int i = 0; i < 3; ++i)
            len += snprintf(line + len, sizeof line - len, " %s vs mma %.2e", names[i],
                            rel_diff(part(hw, offs[i], lens[i]), part(hm, offs[i], lens[i]), f));
    }
    printf("%s %s%s%s%s%s\n", ok ? "ok  " : "FAIL", line, same ? "" : " RERUN DIFFERS", fsame ? "" : " FUSED DK/DV DIFFER",
           osame ? "" : " ORDERED DK/DV DIFFER", orerun ? "" : " ORDERED RERUN DIFFERS");

    if (time_iters > 0) {
        cudaEvent_t e[9];
        for (auto& x : e) RK(cudaEventCreate(&x));
        for (int i = 0; i < 3; ++i) { launch_wg_dq(gw); launch_wg_kv(gw); launch_mma_dq(); launch_mma_kv(); launch_fused(gf); launch_ord(go); }
        float ms[7] = {0, 0, 0, 0, 0, 0, 0};
        // Interleaved rounds so that clocks and temperature hit both families alike.
        const int rounds = 4;
        for (int round = 0; round < rounds; ++round) {
            RK(cudaEventRecord(e[0], s));
            for (int i = 0; i < time_iters; ++i) launch_wg_dq(gw);
            RK(cudaEventRecord(e[1], s));
            for (int i = 0; i < time_iters; ++i) launch_wg_kv(gw);
            RK(cudaEventRecord(e[2], s));
            for (int i = 0; i < time_iters; ++i) launch_mma_dq();
            RK(cudaEventRecord(e[3], s));
            for (int i = 0; i < time_iters; ++i) launch_mma_kv();
            RK(cudaEventRecord(e[4], s));
            for (int i = 0; i < time_iters; ++i) launch_delta();
            RK(cudaEventRecord(e[5], s));
            for (int i = 0; i < time_iters; ++i) launch_fused(gf);
            RK(cudaEventRecord(e[6], s));
            for (int i = 0; i < time_iters; ++i) launch_ord(go);
            RK(cudaEventRecord(e[7], s));
            RK(cudaEventSynchronize(e[7]));
            for (int k = 0; k < 7; ++k) {
                float x;
                RK(cudaEventElapsedTime(&x, e[k], e[k + 1]));
                ms[k] += x;
            }
        }
        RK(cudaGetLastError());
        const double n = (double)rounds * time_iters;
        const double wdq = ms[0] * 1e3 / n, wkv = ms[1] * 1e3 / n, mdq = ms[2] * 1e3 / n, mkv = ms[3] * 1e3 / n;
        const double del = ms[4] * 1e3 / n, fu = ms[5] * 1e3 / n, fo = ms[6] * 1e3 / n;
        printf("time B%d H%d N%d D%d causal%d %s (%d SMs): delta %.1f us\n", B, H, Nq, D, p.causal, f ? "f16" : "bf16",
               g_sms, del);
        printf("  wgmma    dq %.1f us + dkdv %.1f us = %.1f us: bwd %.1f TFLOP/s, +delta %.1f TFLOP/s\n", wdq, wkv,
               wdq + wkv, tflops(p, wdq + wkv), tflops(p, wdq + wkv + del));
        printf("  mma.sync dq %.1f us + dkdv %.1f us = %.1f us: bwd %.1f TFLOP/s, +delta %.1f TFLOP/s\n", mdq, mkv,
               mdq + mkv, tflops(p, mdq + mkv), tflops(p, mdq + mkv + del));
        printf("  wgmma / mma.sync time: %.3f (dq %.3f, dkdv %.3f)\n", (wdq + wkv) / (mdq + mkv), wdq / mdq, wkv / mkv);
        printf("  fused    memset + fused + convert %.1f us: bwd %.1f TFLOP/s, +delta %.1f TFLOP/s; / two kernels %.3f\n",
               fu, tflops(p, fu), tflops(p, fu + del), fu / (wdq + wkv));
        printf("  ordered  memset + fused + convert %.1f us: bwd %.1f TFLOP/s, +delta %.1f TFLOP/s; / two kernels %.3f, / fused %.3f\n",
               fo, tflops(p, fo), tflops(p, fo + del), fo / (wdq + wkv), fo / fu);
        for (auto& x : e) RK(cudaEventDestroy(x));
    }
    fflush(stdout);
    RK(cudaStreamDestroy(s));
    RK(cudaFree(d)); RK(cudaFree(g)); RK(cudaFree(lse)); RK(cudaFree(delta)); RK(cudaFree(acc));
    RK(cudaFree(order)); RK(cudaFree(go));
    return ok;
}

int main(int argc, char** argv) {
    CK(cuInit(0));
    RK(cudaFree(0));
    RK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, 0));
    printf("variant: dk/dv %d-row steps at D = 64, %d stages, overlap %d; dq %d-key steps at D = 64%s\n",
           ABW_KV_BM64, ABW_KV_STAGES64, ABW_KV_OVERLAP, ABW_DQ_BN64,
#ifdef TMA_SPIN_LIMIT
           "; TMA_SPIN_LIMIT (do not time)"
#else
           ""
#endif
    );
    const char* kn[2][2][2] = {{{"attn_bwd_dq_wgmma_d64_bf16", "attn_bwd_dq_wgmma_d128_bf16"},
                                {"attn_bwd_dq_wgmma_d64_f16", "attn_bwd_dq_wgmma_d128_f16"}},
                               {{"attn_bwd_dkdv_wgmma_d64_bf16", "attn_bwd_dkdv_wgmma_d128_bf16"},
                                {"attn_bwd_dkdv_wgmma_d64_f16", "attn_bwd_dkdv_wgmma_d128_f16"}}};
    for (int f = 0; f < 2; ++f)
        for (int dd = 0; dd < 2; ++dd) {
            cudaFuncAttributes a;
            RK(cudaFuncGetAttributes(&a, WG_DQ[f][dd]));
            printf("%s: %d registers, %zu local bytes;", kn[0][f][dd], a.numRegs, a.localSizeBytes);
            RK(cudaFuncGetAttributes(&a, WG_KV[f][dd]));
            printf(" %s: %d registers, %zu local bytes\n", kn[1][f][dd], a.numRegs, a.localSizeBytes);
        }
    // A module file's bytes, NUL-terminated (cuModuleLoadData takes PTX text or a cubin).
    auto read_file = [](const char* path) {
        std::vector<char> buf;
        FILE* fp = fopen(path, "rb");
        if (!fp) { perror(path); exit(1); }
        char tmp[65536]; size_t n;
        while ((n = fread(tmp, 1, sizeof tmp, fp)) > 0) buf.insert(buf.end(), tmp, tmp + n);
        fclose(fp);
        buf.push_back(0);
        return buf;
    };
    if (argc >= 4 && !strcmp(argv[argc - 2], "--fused-module")) {  // last on the line when both are given
        std::vector<char> buf = read_file(argv[argc - 1]);
        CUmodule mod;
        CK(cuModuleLoadData(&mod, buf.data()));
        const char* fn[2][2] = {{"attn_bwd_fused_wgmma_d64_bf16", "attn_bwd_fused_wgmma_d128_bf16"},
                                {"attn_bwd_fused_wgmma_d64_f16", "attn_bwd_fused_wgmma_d128_f16"}};
        for (int f = 0; f < 2; ++f)
            for (int dd = 0; dd < 2; ++dd) CK(cuModuleGetFunction(&g_mod_fu[f][dd], mod, fn[f][dd]));
        int r1, r2;
        CK(cuFuncGetAttribute(&r1, CU_FUNC_ATTRIBUTE_NUM_REGS, g_mod_fu[0][0]));
        CK(cuFuncGetAttribute(&r2, CU_FUNC_ATTRIBUTE_NUM_REGS, g_mod_fu[0][1]));
        printf("fused module %s: d64 %d registers, d128 %d registers\n", argv[argc - 1], r1, r2);
        g_fmodule = true;
        argc -= 2;
    }
    if (argc >= 4 && !strcmp(argv[argc - 2], "--module")) {
        std::vector<char> buf = read_file(argv[argc - 1]);
        CUmodule mod;
        CK(cuModuleLoadData(&mod, buf.data()));
        for (int f = 0; f < 2; ++f)
            for (int dd = 0; dd < 2; ++dd) {
                CK(cuModuleGetFunction(&g_mod_dq[f][dd], mod, kn[0][f][dd]));
                CK(cuModuleGetFunction(&g_mod_kv[f][dd], mod, kn[1][f][dd]));
            }
        int r1, r2;
        CK(cuFuncGetAttribute(&r1, CU_FUNC_ATTRIBUTE_NUM_REGS, g_mod_dq[0][1]));
        CK(cuFuncGetAttribute(&r2, CU_FUNC_ATTRIBUTE_NUM_REGS, g_mod_kv[0][1]));
        printf("module %s: d128 dq %d registers, dkdv %d registers\n", argv[argc - 1], r1, r2);
        g_module = true;
        argc -= 2;
    }
    if (argc >= 9 && !strcmp(argv[1], "rep")) {  // rep B H Nq Nk D causal R [f16]
        const bool f16 = argc >= 10 && !strcmp(argv[9], "f16");
        Problem p{atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), atoi(argv[7]), false, f16};
        int bad = 0;
        for (int r = 0; r < atoi(argv[8]); ++r) bad += !run(p, true, 0, 100 + r);
        printf("rep: %d bad\n", bad);
        return bad ? 1 : 0;
    }
    if (argc >= 7 && !strcmp(argv[1], "time")) {  // time B H N D causal [f16]
        const bool f16 = argc >= 8 && !strcmp(argv[7], "f16");
        Problem p{atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), false, f16};
        run(p, false, 10, 7);
        return 0;
    }
    int fails = 0;
    if (argc >= 2 && !strcmp(argv[1], "quick")) {
        for (int f16 = 0; f16 < 2; ++f16)
            for (int D : {64, 128})
                for (int causal = 0; causal < 2; ++causal) {
                    fails += !run(Problem{1, 1, 1, 1, D, causal, false, f16 != 0}, true, 0, 1);
                    fails += !run(Problem{2, 3, 300, 900, D, causal, false, f16 != 0}, true, 0, 2);
                    fails += !run(Problem{2, 3, 127, 127, D, causal, true, f16 != 0}, true, 0, 3);
                }
        printf("%d failures\n", fails);
        return fails ? 1 : 0;
    }
    if (argc < 2 || strcmp(argv[1], "check")) {
        fprintf(stderr, "usage: %s quick | check | time B H N D causal [f16] | rep B H Nq Nk D causal R [f16] "
                        "[--module FILE]\n", argv[0]);
        return 2;
    }
    const int ns[] = {1, 17, 64, 127, 128, 300, 1000};
    const int pairs[][2] = {{300, 900}, {900, 300}, {5, 64}, {64, 5}, {1, 129}, {129, 1}, {200, 129}, {65, 257}};
    for (int f16 = 0; f16 < 2; ++f16)
        for (int D : {64, 128})
            for (int causal = 0; causal < 2; ++causal) {
                for (int n : ns)
                    for (int packed = 0; packed < 2; ++packed)
                        fails += !run(Problem{2, 3, n, n, D, causal, packed != 0, f16 != 0}, true, 0, n * 31 + packed);
                for (auto& pr : pairs)
                    fails += !run(Problem{2, 3, pr[0], pr[1], D, causal, false, f16 != 0}, true, 0, pr[0] * 7 + pr[1]);
                // More tiles than SMs: every CTA walks several (the barrier phases across tiles).
                fails += !run(Problem{16, 12, 300, 300, D, causal, false, f16 != 0}, true, 0, 9);
            }
    printf("%d failures\n", fails);
    return fails ? 1 : 0;
}
