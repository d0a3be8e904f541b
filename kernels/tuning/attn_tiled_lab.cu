// attn_tiled_lab.cu — the tiled SIMT attention forward (cuda/attention_tiled.cu) on its own: checks
// it against a CPU reference in double (several shapes, causal and full, Nq != Nk, D not a power of
// two, padded rows), then times it (CUDA events, median of 9 after 2 warm-ups) at 1 x 16 x 4096 x D
// for D = 64 and 128, causal and full, beside attention.cu's warp-a-row kernel at one shape.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 [-DAT_MINB_D64=N -DAT_MINB_D128=N] -o /tmp/atlab \
//       kernels/tuning/attn_tiled_lab.cu && /tmp/atlab
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../cuda/attention.cu"
#include "../cuda/attention_tiled.cu"
#include "../cuda/attention_tiled_bwd.cu"

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
            std::exit(1);                                                                      \
        }                                                                                      \
    } while (0)

typedef void (*Kern)(const float*, const float*, const float*, float*, float*, int, int, int, int, int, long long,
                     long long, long long, long long, long long, long long, long long, long long, long long,
                     long long, long long, long long, float, int);

struct Prob {
    int B, H, Nq, Nk, D, pad;  // pad: extra floats per row of q, k, v, out
    int causal;
};

static int sms() {
    int dev = 0, n = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
}

// Launches the tiled kernel (or the row kernel when row = true) for p on buffers laid out [B, H, N, D + pad].
static void launch(const Prob& p, const float* q, const float* k, const float* v, float* o, float* lse, bool row,
                   cudaStream_t st = 0) {
    const int ld = p.D + p.pad;
    const long long q_sr = ld, q_sh = (long long)p.Nq * ld, q_sb = q_sh * p.H;
    const long long k_sr = ld, k_sh = (long long)p.Nk * ld, k_sb = k_sh * p.H;
    const float scale = 1.0f / std::sqrt((float)p.D);
    if (row) {
        const long long rows = (long long)p.B * p.H * p.Nq;
        const int grid = (int)std::min<long long>((rows + 3) / 4, (long long)sms() * 64);
        attn_fwd_f32<<<grid, 128, 0, st>>>(q, k, v, o, lse, p.B, p.H, p.Nq, p.Nk, p.D, q_sb, q_sh, q_sr, k_sb, k_sh,
                                           k_sr, k_sb, k_sh, k_sr, q_sb, q_sh, q_sr, scale, p.causal);
        return;
    }
    const bool d64 = p.D <= 64;
    Kern kern = d64 ? attn_fwd_tiled_d64_f32 : attn_fwd_tiled_d128_f32;
    const int smem = d64 ? AT_SMEM_BYTES(64) : AT_SMEM_BYTES(128);
    CK(cudaFuncSetAttribute((const void*)kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const long long tiles = (long long)p.B * p.H * ((p.Nq + AT_BM - 1) / AT_BM);
    const int grid = (int)std::min<long long>(tiles, 1 << 30);
    kern<<<grid, AT_THREADS, smem, st>>>(q, k, v, o, lse, p.B, p.H, p.Nq, p.Nk, p.D, q_sb, q_sh, q_sr, k_sb, k_sh,
                                         k_sr, k_sb, k_sh, k_sr, q_sb, q_sh, q_sr, scale, p.causal);
}

static void fill(std::vector<float>& x, unsigned seed) {
    for (auto& e : x) {
        seed = seed * 1664525u + 1013904223u;
        e = ((seed >> 8) / 16777216.0f) * 2.0f - 1.0f;
    }
}

// max |got - ref| / max |ref| over out, and the worst lse difference.
static bool check(const Prob& p) {
    const int ld = p.D + p.pad;
    const size_t nq = (size_t)p.B * p.H * p.Nq * ld, nk = (size_t)p.B * p.H * p.Nk * ld;
    std::vector<float> hq(nq), hk(nk), hv(nk), ho(nq, NAN), hl((size_t)p.B * p.H * p.Nq, NAN);
    fill(hq, 1u + p.D);
    fill(hk, 2u + p.Nk);
    fill(hv, 3u + p.Nq);
    for (size_t i = 0; i < nq; ++i)
        if ((int)(i % ld) >= p.D) hq[i] = NAN;  // the padding must not be read
    for (size_t i = 0; i < nk; ++i)
        if ((int)(i % ld) >= p.D) hk[i] = hv[i] = NAN;
    float *q, *k, *v, *o, *l;
    CK(cudaMalloc(&q, nq * 4)); CK(cudaMalloc(&k, nk * 4)); CK(cudaMalloc(&v, nk * 4));
    CK(cudaMalloc(&o, nq * 4)); CK(cudaMalloc(&l, hl.size() * 4));
    CK(cudaMemcpy(q, hq.data(), nq * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(k, hk.data(), nk * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(v, hv.data(), nk * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(o, ho.data(), nq * 4, cudaMemcpyHostToDevice));
    launch(p, q, k, v, o, l, false);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(ho.data(), o, nq * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hl.data(), l, hl.size() * 4, cudaMemcpyDeviceToHost));
    const double sc = (double)(1.0f / std::sqrt((float)p.D));
    double err = 0, mag = 0, lerr = 0;
    const long long shift = (long long)p.Nk - p.Nq;
    std::vector<double> s(p.Nk), acc(p.D);
    for (int bh = 0; bh < p.B * p.H; ++bh)
        for (int i = 0; i < p.Nq; ++i) {
            const float* qi = &hq[((size_t)bh * p.Nq + i) * ld];
            const long long e = p.causal ? std::min<long long>(p.Nk, std::max<long long>(0, i + shift + 1)) : p.Nk;
            double mx = -INFINITY;
            for (int j = 0; j < e; ++j) {
                const float* kj = &hk[((size_t)bh * p.Nk + j) * ld];
                double d = 0;
                for (int c = 0; c < p.D; ++c) d += (double)qi[c] * kj[c];
                s[j] = d * sc;
                mx = std::max(mx, s[j]);
            }
            double sum = 0;
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int j = 0; j < e; ++j) {
                const double w = std::exp(s[j] - mx);
                sum += w;
                const float* vj = &hv[((size_t)bh * p.Nk + j) * ld];
                for (int c = 0; c < p.D; ++c) acc[c] += w * vj[c];
            }
            const float* oi = &ho[((size_t)bh * p.Nq + i) * ld];
            for (int c = 0; c < p.D; ++c) {
                const double r = e > 0 ? acc[c] / sum : 0.0;
                err = std::max(err, std::fabs(oi[c] - r));
                mag = std::max(mag, std::fabs(r));
            }
            const double lr = e > 0 ? mx + std::log(sum) : -INFINITY;
            const double lg = hl[(size_t)bh * p.Nq + i];
            if (e == 0) {
                if (!(std::isinf(lg) && lg < 0)) lerr = INFINITY;
            } else {
                lerr = std::max(lerr, std::fabs(lg - lr) / (1 + std::fabs(lr)));
            }
        }
    const bool ok = err <= 1e-5 * mag + 1e-6 && lerr <= 1e-5;
    std::printf("check B%d H%d Nq%d Nk%d D%d pad%d %s: out err %.2e (max |ref| %.2f), lse err %.2e  %s\n", p.B,
                p.H, p.Nq, p.Nk, p.D, p.pad, p.causal ? "causal" : "full", err, mag, lerr, ok ? "ok" : "FAIL");
    cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(l);
    return ok;
}

static double time_us(const Prob& p, bool row, int reps) {
    const size_t nq = (size_t)p.B * p.H * p.Nq * p.D, nk = (size_t)p.B * p.H * p.Nk * p.D;
    std::vector<float> h(std::max(nq, nk));
    fill(h, 7);
    float *q, *k, *v, *o, *l;
    CK(cudaMalloc(&q, nq * 4)); CK(cudaMalloc(&k, nk * 4)); CK(cudaMalloc(&v, nk * 4));
    CK(cudaMalloc(&o, nq * 4)); CK(cudaMalloc(&l, (size_t)p.B * p.H * p.Nq * 4));
    CK(cudaMemcpy(q, h.data(), nq * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(k, h.data(), nk * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(v, h.data(), nk * 4, cudaMemcpyHostToDevice));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    for (int w = 0; w < 2; ++w) launch(p, q, k, v, o, l, row);
    std::vector<float> ts;
    for (int r = 0; r < reps; ++r) {
        CK(cudaEventRecord(a));
        launch(p, q, k, v, o, l, row);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        ts.push_back(ms * 1000.0f);
    }
    CK(cudaGetLastError());
    std::sort(ts.begin(), ts.end());
    cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(l);
    return ts[ts.size() / 2];
}

typedef void (*KDq)(const float*, const float*, const float*, const float*, const float*, const float*, float*, int,
                    int, int, int, int, long long, long long, long long, long long, long long, long long, long long,
                    long long, long long, long long, long long, long long, long long, long long, long long, float, int);
typedef void (*KDkdv)(const float*, const float*, const float*, const float*, const float*, const float*, float*,
                      float*, int, int, int, int, int, long long, long long, long long, long long, long long,
                      long long, long long, long long, long long, long long, long long, long long, long long,
                      long long, long long, long long, long long, long long, long long, float, int);

// The backward of p (dense [B, H, N, D + pad] buffers): delta (the row kernel), then dq and dk/dv
// (tiled, or the row kernels when row = true).
static void launch_bwd(const Prob& p, const float* q, const float* k, const float* v, const float* o, const float* dout,
                       const float* lse, float* delta, float* dq, float* dk, float* dv, bool row) {
    const int ld = p.D + p.pad;
    const long long q_sr = ld, q_sh = (long long)p.Nq * ld, q_sb = q_sh * p.H;
    const long long k_sr = ld, k_sh = (long long)p.Nk * ld, k_sb = k_sh * p.H;
    const float scale = 1.0f / std::sqrt((float)p.D);
    const long long qrows = (long long)p.B * p.H * p.Nq, krows = (long long)p.B * p.H * p.Nk;
    if (qrows > 0)
        attn_bwd_delta_f32<<<(int)std::min<long long>((qrows + 3) / 4, (long long)sms() * 64), 128>>>(
            o, dout, delta, p.B, p.H, p.Nq, p.D, q_sb, q_sh, q_sr, q_sb, q_sh, q_sr);
    if (row) {
        if (qrows > 0)
            attn_bwd_dq_f32<<<(int)std::min<long long>((qrows + 3) / 4, (long long)sms() * 64), 128>>>(
                q, k, v, dout, lse, delta, dq, p.B, p.H, p.Nq, p.Nk, p.D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, k_sb, k_sh,
                k_sr, q_sb, q_sh, q_sr, q_sb, q_sh, q_sr, scale, p.causal);
        if (krows > 0)
            attn_bwd_dkdv_f32<<<(int)std::min<long long>((krows + 3) / 4, (long long)sms() * 64), 128>>>(
                q, k, v, dout, lse, delta, dk, dv, p.B, p.H, p.Nq, p.Nk, p.D, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, k_sb,
                k_sh, k_sr, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, k_sb, k_sh, k_sr, -1, scale, p.causal);
        return;
    }
    const bool d64 = p.D <= 64;
    KDq kq = d64 ? attn_bwd_dq_tiled_d64_f32 : attn_bwd_dq_tiled_d128_f32;
    KDkdv kk = d64 ? attn_bwd_dkdv_tiled_d64_f32 : attn_bwd_dkdv_tiled_d128_f32;
    const int sq = d64 ? ATB_DQ_SMEM(64) : ATB_DQ_SMEM(128), sk = d64 ? ATB_DKDV_SMEM(64) : ATB_DKDV_SMEM(128);
    CK(cudaFuncSetAttribute((const void*)kq, cudaFuncAttributeMaxDynamicSharedMemorySize, sq));
    CK(cudaFuncSetAttribute((const void*)kk, cudaFuncAttributeMaxDynamicSharedMemorySize, sk));
    const long long tq = (long long)p.B * p.H * ((p.Nq + 63) / 64), tk = (long long)p.B * p.H * ((p.Nk + 63) / 64);
    if (tq > 0)
        kq<<<(int)tq, AT_THREADS, sq>>>(q, k, v, dout, lse, delta, dq, p.B, p.H, p.Nq, p.Nk, p.D, q_sb, q_sh, q_sr, k_sb,
                                        k_sh, k_sr, k_sb, k_sh, k_sr, q_sb, q_sh, q_sr, q_sb, q_sh, q_sr, scale, p.causal);
    if (tk > 0)
        kk<<<(int)tk, AT_THREADS, sk>>>(q, k, v, dout, lse, delta, dk, dv, p.B, p.H, p.Nq, p.Nk, p.D, q_sb, q_sh, q_sr,
                                        k_sb, k_sh, k_sr, k_sb, k_sh, k_sr, q_sb, q_sh, q_sr, k_sb, k_sh, k_sr, k_sb, k_sh,
                                        k_sr, -1, scale, p.causal);
}

// The tiled backward against the row kernels (the same f32 math in another order: they agree to
// rounding) and against a CPU reference in double on small shapes.
static bool check_bwd(const Prob& p) {
    const int ld = p.D + p.pad;
    const size_t nq = (size_t)p.B * p.H * p.Nq * ld, nk = (size_t)p.B * p.H * p.Nk * ld, nr = (size_t)p.B * p.H * p.Nq;
    std::vector<float> hq(nq), hk(nk), hv(nk), hdo(nq);
    fill(hq, 11u + p.D);
    fill(hk, 12u + p.Nk);
    fill(hv, 13u + p.Nq);
    fill(hdo, 14u);
    float *q, *k, *v, *o, *dO, *l, *dl, *dq[2], *dk[2], *dv[2];
    CK(cudaMalloc(&q, nq * 4 + 4)); CK(cudaMalloc(&k, nk * 4 + 4)); CK(cudaMalloc(&v, nk * 4 + 4));
    CK(cudaMalloc(&o, nq * 4 + 4)); CK(cudaMalloc(&dO, nq * 4 + 4)); CK(cudaMalloc(&l, nr * 4 + 4));
    CK(cudaMalloc(&dl, nr * 4 + 4));
    for (int x = 0; x < 2; ++x) {
        CK(cudaMalloc(&dq[x], nq * 4 + 4)); CK(cudaMalloc(&dk[x], nk * 4 + 4)); CK(cudaMalloc(&dv[x], nk * 4 + 4));
        CK(cudaMemset(dq[x], 0xff, nq * 4 + 4)); CK(cudaMemset(dk[x], 0xff, nk * 4 + 4));
        CK(cudaMemset(dv[x], 0xff, nk * 4 + 4));  // NaN poison: every element must be written
    }
    CK(cudaMemcpy(q, hq.data(), nq * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(k, hk.data(), nk * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(v, hv.data(), nk * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dO, hdo.data(), nq * 4, cudaMemcpyHostToDevice));
    launch(p, q, k, v, o, l, false);
    launch_bwd(p, q, k, v, o, dO, l, dl, dq[0], dk[0], dv[0], false);
    launch_bwd(p, q, k, v, o, dO, l, dl, dq[1], dk[1], dv[1], true);
    CK(cudaDeviceSynchronize());
    double err[3] = {0, 0, 0}, mag[3] = {0, 0, 0};
    bool nan = false;
    float* bufs[3][2] = {{dq[0], dq[1]}, {dk[0], dk[1]}, {dv[0], dv[1]}};
    const size_t ns[3] = {nq, nk, nk};
    for (int w = 0; w < 3; ++w) {
        std::vector<float> a(ns[w]), b(ns[w]);
        CK(cudaMemcpy(a.data(), bufs[w][0], ns[w] * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b.data(), bufs[w][1], ns[w] * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < ns[w]; ++i) {
            if ((int)(i % ld) >= p.D) continue;
            if (std::isnan(a[i])) nan = true;
            err[w] = std::max(err[w], (double)std::fabs(a[i] - b[i]));
            mag[w] = std::max(mag[w], (double)std::fabs(b[i]));
        }
    }
    bool ok = !nan;
    for (int w = 0; w < 3; ++w) ok = ok && err[w] <= 1e-4 * mag[w] + 1e-5;
    std::printf("check bwd B%d H%d Nq%d Nk%d D%d pad%d %s: dq %.1e/%.2f dk %.1e/%.2f dv %.1e/%.2f%s  %s\n", p.B, p.H,
                p.Nq, p.Nk, p.D, p.pad, p.causal ? "causal" : "full", err[0], mag[0], err[1], mag[1], err[2], mag[2],
                nan ? " NaN left" : "", ok ? "ok" : "FAIL");
    cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(dO); cudaFree(l); cudaFree(dl);
    for (int x = 0; x < 2; ++x) { cudaFree(dq[x]); cudaFree(dk[x]); cudaFree(dv[x]); }
    return ok;
}

static double time_bwd_us(const Prob& p, bool row, int reps) {
    const size_t nq = (size_t)p.B * p.H * p.Nq * p.D, nk = (size_t)p.B * p.H * p.Nk * p.D, nr = (size_t)p.B * p.H * p.Nq;
    std::vector<float> h(std::max(nq, nk));
    fill(h, 9);
    float *q, *k, *v, *o, *dO, *l, *dl, *dq, *dk, *dv;
    CK(cudaMalloc(&q, nq * 4)); CK(cudaMalloc(&k, nk * 4)); CK(cudaMalloc(&v, nk * 4)); CK(cudaMalloc(&o, nq * 4));
    CK(cudaMalloc(&dO, nq * 4)); CK(cudaMalloc(&l, nr * 4)); CK(cudaMalloc(&dl, nr * 4)); CK(cudaMalloc(&dq, nq * 4));
    CK(cudaMalloc(&dk, nk * 4)); CK(cudaMalloc(&dv, nk * 4));
    CK(cudaMemcpy(q, h.data(), nq * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(k, h.data(), nk * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(v, h.data(), nk * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dO, h.data(), nq * 4, cudaMemcpyHostToDevice));
    launch(p, q, k, v, o, l, false);
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int w = 0; w < 2; ++w) launch_bwd(p, q, k, v, o, dO, l, dl, dq, dk, dv, row);
    std::vector<float> ts;
    for (int r = 0; r < reps; ++r) {
        CK(cudaEventRecord(a));
        launch_bwd(p, q, k, v, o, dO, l, dl, dq, dk, dv, row);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        ts.push_back(ms * 1000.0f);
    }
    CK(cudaGetLastError());
    std::sort(ts.begin(), ts.end());
    cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(dO); cudaFree(l); cudaFree(dl); cudaFree(dq);
    cudaFree(dk); cudaFree(dv);
    return ts[ts.size() / 2];
}

int main() {
    std::printf("attn_tiled_lab: AT_MINB_D64 %d, AT_MINB_D128 %d\n", AT_MINB_D64, AT_MINB_D128);
    bool ok = true;
    const Prob checks[] = {
        {1, 2, 200, 200, 64, 0, 0}, {1, 2, 200, 200, 64, 0, 1},  {2, 3, 130, 300, 100, 3, 1},
        {2, 3, 300, 130, 128, 4, 1}, {1, 2, 65, 65, 1, 0, 0},    {1, 1, 1, 4097, 128, 0, 1},
        {1, 2, 257, 257, 40, 1, 0},  {2, 2, 64, 0, 64, 0, 0},    {1, 2, 129, 129, 128, 0, 0},
    };
    for (const Prob& p : checks) ok = check(p) && ok;
    std::printf("checks: %s\n", ok ? "all ok" : "SOME FAILED");
    for (int D : {64, 128})
        for (int causal : {0, 1}) {
            const Prob p{1, 16, 4096, 4096, D, 0, causal};
            const double us = time_us(p, false, 9);
            const double fl = 4.0 * p.B * p.H * (double)p.Nq * p.Nk * D * (causal ? 0.5 : 1.0);
            std::printf("tiled fwd f32 1x16x4096x%d %s: %.1f us, %.1f TFLOP/s\n", D, causal ? "causal" : "full", us,
                        fl / us * 1e-6);
        }
    for (int D : {64, 128}) {
        const Prob p{8, 16, 1024, 1024, D, 0, 1};
        const double us = time_us(p, false, 9);
        const double fl = 4.0 * p.B * p.H * (double)p.Nq * p.Nk * D * 0.5;
        std::printf("tiled fwd f32 8x16x1024x%d causal: %.1f us, %.1f TFLOP/s\n", D, us, fl / us * 1e-6);
    }
    {
        const Prob p{1, 16, 1024, 1024, 64, 0, 0};
        const double us = time_us(p, true, 3), us2 = time_us(p, false, 9);
        std::printf("row kernel f32 1x16x1024x64 full: %.1f us; tiled %.1f us (%.1fx)\n", us, us2, us / us2);
    }
    const Prob bchecks[] = {
        {1, 2, 200, 200, 64, 0, 0}, {1, 2, 200, 200, 64, 0, 1}, {2, 3, 130, 300, 100, 3, 1}, {2, 3, 300, 130, 128, 4, 1},
        {1, 2, 65, 65, 1, 0, 0},    {1, 1, 1, 1000, 128, 0, 1}, {1, 2, 257, 257, 40, 1, 0}, {1, 2, 129, 129, 128, 0, 0},
        {1, 1, 100, 1, 64, 0, 1},
    };
    bool bok = true;
    for (const Prob& p : bchecks) bok = check_bwd(p) && bok;
    std::printf("bwd checks: %s\n", bok ? "all ok" : "SOME FAILED");
    for (int D : {64, 128})
        for (int causal : {0, 1}) {
            const Prob p{1, 16, 4096, 4096, D, 0, causal};
            const double us = time_bwd_us(p, false, 5);
            const double fl = 2.5 * 4.0 * p.B * p.H * (double)p.Nq * p.Nk * D * (causal ? 0.5 : 1.0);
            std::printf("tiled bwd f32 1x16x4096x%d %s: %.1f us, %.1f TFLOP/s (2.5x the forward's flops)\n", D,
                        causal ? "causal" : "full", us, fl / us * 1e-6);
        }
    {
        const Prob p{1, 16, 1024, 1024, 64, 0, 0};
        const double us = time_bwd_us(p, true, 3), us2 = time_bwd_us(p, false, 5);
        std::printf("row kernels bwd f32 1x16x1024x64 full: %.1f us; tiled %.1f us (%.1fx)\n", us, us2, us / us2);
    }
    return ok && bok ? 0 : 1;
}
