// attn_wgmma_lab.cu — a standalone check-and-time harness for cuda/attention_wgmma.cu on a GPU
// machine with nvcc and no Rust toolchain. It compiles the kernel source itself (so lab macros
// apply: TMA_SPIN_LIMIT turns a stuck barrier wait into a message and a trap), encodes the 4-D
// tensor maps as kernels/src/ops/attention/fwd_wgmma.rs does, checks out and lse against a CPU
// reference (f64 accumulation on the rounded bf16 inputs) and times large cases with events.
//
//   nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DTMA_SPIN_LIMIT=200000000 -o attn_lab \
//       kernels/tuning/attn_wgmma_lab.cu -lcuda
//   ./attn_lab check               # the correctness cases
//   ./attn_lab time B H N D causal  # TFLOP/s (4·B·H·N²·D, halved when causal)
// `time` times as attention_bench does (trials of ~20 ms, the median of 5) but, unless AW_SETTLE=1
// asks for the bench's 1 s settle, before the power cap lowers the clock: at 16 x 16 x 512 x 64
// that ran 2-9% faster than settled (session 64, kernels/TUNING.md); AW_ITERS=n times one
// burst of n launches instead (faster by 7-10% at D = 128 on an H200: kernels/TUNING.md, session
// 58). Diagnostics (environment): AW_RANDN standard-normal inputs (the bench's) instead of uniform,
// AW_SEPARATE q/k/v in three allocations, AW_POOL buffers from the default memory pool,
// AW_HOSTWORK the maps encoded and the limit raised at every launch (as the library's op does),
// AW_SETTLE=s s seconds of untimed launches before the trials (attention_bench settles 1 s),
// AW_HOSTTIME the host time of a launch call, AW_FEWCHECK a 64-row check before timing.
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
#include <algorithm>
#include <unistd.h>

#ifdef TMA_SPIN_RECORD
// Stuck waits recorded into mapped host memory: [0] = count, then (block << 48 | thread << 32 |
// parity << 31 | barrier address).
__device__ unsigned long long* g_dbg;
__device__ __forceinline__ void tma_spin_record(unsigned bar, unsigned parity) {
    unsigned long long i = atomicAdd(&g_dbg[0], 1ull);
    if (i < 4000)
        g_dbg[1 + i] = ((unsigned long long)blockIdx.x << 48) | ((unsigned long long)threadIdx.x << 32) |
                       ((unsigned long long)parity << 31) | bar;
    __threadfence_system();
}
static unsigned long long* h_dbg;
#endif
#include "../cuda/attention_wgmma.cu"
// AW_NC64=3: the lab runs the 192-row kernels at D = 64 (attn_fwd_wgmma_d64_m192_bf16, three
// consumers) instead of the 128-row ones; the library picks between them per problem.
#ifndef AW_NC64
#define AW_NC64 2
#endif
#define LAB_NC(D) ((D) == 64 ? AW_NC64 : 2)
#define LAB_D64_KERNEL (AW_NC64 == 3 ? attn_fwd_wgmma_d64_m192_bf16 : attn_fwd_wgmma_d64_bf16)
#define LAB_D64_NAME (AW_NC64 == 3 ? "attn_fwd_wgmma_d64_m192_bf16" : "attn_fwd_wgmma_d64_bf16")

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_; cuGetErrorString(r_, &s_); \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_); exit(1); } } while (0)
#define RK(x) do { cudaError_t r_ = (x); if (r_ != cudaSuccess) { fprintf(stderr, "%s:%d %s: %s\n", \
    __FILE__, __LINE__, #x, cudaGetErrorString(r_)); exit(1); } } while (0)

static float bf2f(unsigned short b) { unsigned u = (unsigned)b << 16; float f; memcpy(&f, &u, 4); return f; }
static unsigned short f2bf(float f) {
    unsigned u; memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (unsigned short)(u >> 16);
}

// q/k/v as [B, H, N, D] views: dense, or slices of a packed [B, N, 3, H, D] buffer.
struct View { long long sb, sh, sr; };

static void encode(CUtensorMap* m, void* base, int D, int N, int H, int B, View v) {
    cuuint64_t dims[4] = {(cuuint64_t)D, (cuuint64_t)N, (cuuint64_t)H, (cuuint64_t)B};
    cuuint64_t strides[3] = {(cuuint64_t)v.sr * 2, (cuuint64_t)v.sh * 2, (cuuint64_t)v.sb * 2};
    cuuint32_t box[4] = {64, 128, 1, 1}, es[4] = {1, 1, 1, 1};
    CK(cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, base, dims, strides, box, es,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
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

// A kernel from a module file (PTX or cubin) instead of this build's own: set by `--module FILE`.
static CUfunction g_mod_fn64 = nullptr, g_mod_fn128 = nullptr;

struct Problem {
    int B, H, Nq, Nk, D, causal;
    bool packed;
};

// AW_POOL set: device buffers from the default memory pool (cudaMallocAsync, as the library's
// cuMemAllocAsync), else cudaMalloc (diagnostic: does the allocation kind change the timing?).
template <typename T>
static cudaError_t dev_alloc(T** p, size_t bytes) {
    if (!getenv("AW_POOL")) return cudaMalloc(p, bytes);
    cudaError_t e = cudaMallocAsync((void**)p, bytes, 0);
    return e == cudaSuccess ? cudaStreamSynchronize(0) : e;
}
static cudaError_t dev_free(void* p) {
    if (!getenv("AW_POOL")) return cudaFree(p);
    cudaError_t e = cudaFreeAsync(p, 0);
    return e == cudaSuccess ? cudaStreamSynchronize(0) : e;
}

// `time` mode: launches per timed burst (AW_ITERS), or 0 for attention_bench's trials.
static int g_burst = 0;

// Runs one problem; returns false on a mismatch or a hang. time_iters > 0: also times it.
static bool run(const Problem& p, int time_iters, unsigned seed) {
    const int B = p.B, H = p.H, Nq = p.Nq, Nk = p.Nk, D = p.D;
    if (p.packed && Nq != Nk) { fprintf(stderr, "packed needs Nq == Nk\n"); exit(1); }
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    // Host buffers: packed [B, N, 3, H, D] or three dense ones.
    size_t nq = (size_t)B * H * Nq * D, nk = (size_t)B * H * Nk * D;
    size_t total = p.packed ? 3 * nq : nq + 2 * nk;
    std::vector<unsigned short> hbuf(total);
    // AW_RANDN set: standard-normal inputs (attention_bench's), else uniform in [-1, 1).
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const bool randn = getenv("AW_RANDN") != nullptr;
    for (auto& x : hbuf) x = f2bf(randn ? nd(rng) : u(rng));
    View vq, vk, vv;
    size_t oq, ok, ov;
    if (p.packed) {
        vq = vk = vv = View{(long long)Nq * 3 * H * D, (long long)D, (long long)3 * H * D};
        oq = 0; ok = (size_t)H * D; ov = 2 * (size_t)H * D;
    } else {
        vq = View{(long long)H * Nq * D, (long long)Nq * D, D};
        vk = vv = View{(long long)H * Nk * D, (long long)Nk * D, D};
        oq = 0; ok = nq; ov = nq + nk;
    }
    unsigned short* d;
    RK(dev_alloc(&d, total * 2));
    RK(cudaMemcpy(d, hbuf.data(), total * 2, cudaMemcpyHostToDevice));
    // AW_SEPARATE set (dense q/k/v only): q, k and v in three allocations, as the library's
    // tensors are, instead of one buffer (diagnostic: does the placement change the timing?).
    unsigned short* sep[3] = {nullptr, nullptr, nullptr};
    if (getenv("AW_SEPARATE") && !p.packed) {
        const size_t len[3] = {nq, nk, nk}, off[3] = {0, nq, nq + nk};
        for (int i = 0; i < 3; ++i) {
            RK(dev_alloc(&sep[i], len[i] * 2));
            RK(cudaMemcpy(sep[i], hbuf.data() + off[i], len[i] * 2, cudaMemcpyHostToDevice));
        }
    }
    unsigned short* dout; float* dlse;
    RK(dev_alloc(&dout, nq * 2));
    RK(dev_alloc(&dlse, (size_t)B * H * Nq * 4));
    RK(cudaMemset(dout, 0xff, nq * 2));
    RK(cudaMemset(dlse, 0xff, (size_t)B * H * Nq * 4));
    CUtensorMap mq, mk, mv;
    unsigned short *bq = sep[0] ? sep[0] : d + oq, *bk = sep[0] ? sep[1] : d + ok, *bv = sep[0] ? sep[2] : d + ov;
    encode(&mq, bq, D, Nq, H, B, vq);
    encode(&mk, bk, D, Nk, H, B, vk);
    encode(&mv, bv, D, Nk, H, B, vv);
    TensorMap tq, tk, tv;
    memcpy(&tq, &mq, 128); memcpy(&tk, &mk, 128); memcpy(&tv, &mv, 128);
    const float scale = 1.0f / sqrtf((float)D);
    const int smem = AW_SMEM_NC(D, LAB_NC(D));
    auto kern = D == 64 ? LAB_D64_KERNEL : attn_fwd_wgmma_d128_bf16;
    RK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int sms; RK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    long long tiles = (long long)B * H * ((Nq + AW_BM_NC(LAB_NC(D)) - 1) / AW_BM_NC(LAB_NC(D)));
    int grid = (int)std::min<long long>(tiles, sms);
    cudaStream_t s; RK(cudaStreamCreate(&s));
    CUfunction mf = D == 64 ? g_mod_fn64 : g_mod_fn128;
    unsigned short *pq = bq, *pk = bk, *pv = bv;
    // AW_HOSTWORK set: each launch first encodes the three maps and raises the shared memory
    // limit again, as the library's op does per call (diagnostic: host work between launches).
    const bool hostwork = getenv("AW_HOSTWORK") != nullptr;
    int causal_ = p.causal;
    float scale_ = scale;
    // out is dense [B, H, Nq, D] here (the kernel takes its batch, head and row strides).
    long long o_sb = (long long)H * Nq * D, o_sh = (long long)Nq * D, o_sr = D;
    void* args[] = {&tq, &tk, &tv, &pq, &pk, &pv, &dout, &dlse, (void*)&B, (void*)&H, (void*)&Nq, (void*)&Nk,
                    &o_sb, &o_sh, &o_sr, &scale_, &causal_};
    auto launch = [&]() {
        if (hostwork) {
            encode(&mq, bq, D, Nq, H, B, vq);
            encode(&mk, bk, D, Nk, H, B, vk);
            encode(&mv, bv, D, Nk, H, B, vv);
            memcpy(&tq, &mq, 128); memcpy(&tk, &mk, 128); memcpy(&tv, &mv, 128);
            if (!mf) RK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        }
        if (mf) {
            CK(cuFuncSetAttribute(mf, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
            CK(cuLaunchKernel(mf, grid, 1, 1, AW_THREADS_NC(LAB_NC(D)), 1, 1, smem, (CUstream)s, args, nullptr));
        } else {
            kern<<<grid, AW_THREADS_NC(LAB_NC(D)), smem, s>>>(tq, tk, tv, pq, pk, pv, dout, dlse, B, H, Nq, Nk, o_sb, o_sh, o_sr, scale,
                                                p.causal);
        }
    };
    launch();
    RK(cudaGetLastError());
    if (!wait_for(s, 10.0)) {
#ifdef TMA_SPIN_RECORD
        unsigned long long nrec = h_dbg[0];
        printf("%llu stuck waits recorded\n", nrec);
        for (unsigned long long i = 0; i < nrec && i < 4000; ++i) {
            unsigned long long x = h_dbg[1 + i];
            printf("  block %llu thread %llu barrier %llu parity %llu\n", x >> 48, (x >> 32) & 0xffff,
                   x & 0x7fffffff, (x >> 31) & 1);
        }
#endif
        printf("HANG B%d H%d Nq%d Nk%d D%d causal%d packed%d\n", B, H, Nq, Nk, D, p.causal, p.packed);
        fflush(stdout);
        _exit(3);
    }
    std::vector<unsigned short> hout(nq);
    std::vector<float> hlse((size_t)B * H * Nq);
    RK(cudaMemcpy(hout.data(), dout, nq * 2, cudaMemcpyDeviceToHost));
    RK(cudaMemcpy(hlse.data(), dlse, hlse.size() * 4, cudaMemcpyDeviceToHost));
    // Reference on a sample of rows (all rows when small; 64 rows when timing with AW_FEWCHECK set).
    double worst = 0, worst_lse = 0, maxref = 0;
    long long rows = (long long)B * H * Nq;
    const long long sample = time_iters > 0 && getenv("AW_FEWCHECK") ? 64 : 4096;
    long long step = rows > sample ? rows / sample : 1;
    std::vector<double> sc(Nk > 0 ? Nk : 1);
    for (long long r = 0; r < rows; r += step) {
        int b = (int)(r / ((long long)H * Nq)), h = (int)(r / Nq % H), i = (int)(r % Nq);
        const unsigned short* qr = &hbuf[oq + b * vq.sb + h * vq.sh + i * vq.sr];
        long long lim = p.causal ? (long long)i + Nk - Nq : (long long)Nk - 1;  // keys j <= lim
        if (lim > Nk - 1) lim = Nk - 1;
        double mx = -INFINITY;
        for (long long j = 0; j <= lim; ++j) {
            const unsigned short* kr = &hbuf[ok + b * vk.sb + h * vk.sh + j * vk.sr];
            double a = 0;
            for (int x = 0; x < D; ++x) a += (double)bf2f(qr[x]) * bf2f(kr[x]);
            sc[j] = a * scale;
            mx = std::max(mx, sc[j]);
        }
        double sum = 0;
        for (long long j = 0; j <= lim; ++j) sum += exp(sc[j] - mx);
        double lse = lim >= 0 ? mx + log(sum) : -INFINITY;
        float gl = hlse[r];
        if (lim < 0) {
            if (!(std::isinf(gl) && gl < 0)) worst_lse = INFINITY;
        } else {
            worst_lse = std::max(worst_lse, fabs(gl - lse) / (1 + fabs(lse)));
        }
        for (int x = 0; x < D; ++x) {
            double o = 0;
            for (long long j = 0; j <= lim; ++j)
                o += exp(sc[j] - mx) / sum * bf2f(hbuf[ov + b * vv.sb + h * vv.sh + j * vv.sr + x]);
            double g = bf2f(hout[r * D + x]);
            if (std::isnan(g)) g = INFINITY;
            worst = std::max(worst, fabs(g - o));
            maxref = std::max(maxref, fabs(o));
        }
    }
    bool ok_ = worst <= 1e-2 * maxref + 1e-5 && worst_lse <= 1e-5;
    printf("%s B%d H%d Nq%d Nk%d D%d causal%d packed%d: max|err| %.3g (max|ref| %.3g), lse rel %.3g\n",
           ok_ ? "ok  " : "FAIL", B, H, Nq, Nk, D, p.causal, p.packed, worst, maxref, worst_lse);
    if (time_iters > 0) {
        cudaEvent_t e0, e1; RK(cudaEventCreate(&e0)); RK(cudaEventCreate(&e1));
        auto timed = [&](int n) {  // ms for n back-to-back launches
            RK(cudaEventRecord(e0, s));
            for (int i = 0; i < n; ++i) launch();
            RK(cudaEventRecord(e1, s));
            RK(cudaEventSynchronize(e1));
            float ms; RK(cudaEventElapsedTime(&ms, e0, e1));
            return (double)ms;
        };
        for (int i = 0; i < 3; ++i) launch();
        // AW_SETTLE=s: s seconds of untimed back-to-back launches first, as attention_bench's
        // settle (Case::settle_secs): the trials then run at the clock the power cap holds.
        if (const char* st = getenv("AW_SETTLE")) {
            const double one = timed(1);
            const long n = (long)(atof(st) * 1000.0 / std::max(one, 1e-4));
            for (long i = 0; i < n; ++i) launch();
        }
        double us;
        char how[64];
        if (g_burst > 0) {
            // AW_ITERS = n: one burst of n launches (the lab's timing before session 58). Short
            // bursts finish before the H200's power cap lowers the clocks: 20 launches of a
            // D = 128 forward ran 7-10% faster than the same kernel sustained (kernels/TUNING.md).
            us = timed(g_burst) * 1000 / g_burst;
            snprintf(how, sizeof how, "one burst of %d", g_burst);
        } else {
            // attention_bench's method (and tools/torch_attention.py's): R back-to-back launches
            // a trial, R so that a trial lasts ~20 ms (at most 200), the median of 5 trials.
            const double one = timed(1);
            const int reps = (int)std::min(200.0, std::max(1.0, 20.0 / std::max(one, 1e-4)));
            std::vector<double> t;
            for (int k = 0; k < 5; ++k) t.push_back(timed(reps) * 1000 / reps);
            std::sort(t.begin(), t.end());
            us = t[2];
            snprintf(how, sizeof how, "median of 5 trials of %d", reps);
        }
        if (getenv("AW_HOSTTIME")) {  // host time of one launch call (nothing waited for)
            const auto h0 = std::chrono::steady_clock::now();
            for (int i = 0; i < 20; ++i) launch();
            const double hus = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - h0).count();
            RK(cudaStreamSynchronize(s));
            printf("host %.1f us per launch call\n", hus / 20);
        }
        double flop = 4.0 * B * H * (double)Nq * Nk * D * (p.causal ? 0.5 : 1.0);
        printf("time B%d H%d N%d D%d causal%d: %.1f us, %.1f TFLOP/s (%s)\n", B, H, Nq, D, p.causal, us,
               flop / us * 1e-6, how);
        RK(cudaEventDestroy(e0)); RK(cudaEventDestroy(e1));
    }
    fflush(stdout);
    RK(cudaStreamDestroy(s));
    RK(dev_free(d)); RK(dev_free(dout)); RK(dev_free(dlse));
    for (auto x : sep) if (x) RK(dev_free(x));
    return ok_;
}

int main(int argc, char** argv) {
    CK(cuInit(0));
    RK(cudaFree(0));
#ifdef TMA_SPIN_RECORD
    {
        RK(cudaHostAlloc(&h_dbg, 4001 * 8, cudaHostAllocMapped));
        memset(h_dbg, 0, 4001 * 8);
        unsigned long long* dp;
        RK(cudaHostGetDevicePointer(&dp, h_dbg, 0));
        RK(cudaMemcpyToSymbol(g_dbg, &dp, sizeof dp));
    }
#endif
    cudaFuncAttributes a;
    RK(cudaFuncGetAttributes(&a, attn_fwd_wgmma_d128_bf16));
    printf("attn_fwd_wgmma_d128_bf16: %d registers, %zu local bytes\n", a.numRegs, a.localSizeBytes);
    RK(cudaFuncGetAttributes(&a, LAB_D64_KERNEL));
    printf("%s: %d registers, %zu local bytes\n", LAB_D64_NAME, a.numRegs, a.localSizeBytes);
    if (argc >= 4 && !strcmp(argv[argc - 2], "--module")) {
        std::vector<char> buf;
        FILE* f = fopen(argv[argc - 1], "rb");
        if (!f) { perror(argv[argc - 1]); return 1; }
        char tmp[65536]; size_t n;
        while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) buf.insert(buf.end(), tmp, tmp + n);
        fclose(f);
        buf.push_back(0);
        CUmodule m;
        CK(cuModuleLoadData(&m, buf.data()));
        CK(cuModuleGetFunction(&g_mod_fn64, m, LAB_D64_NAME));
        CK(cuModuleGetFunction(&g_mod_fn128, m, "attn_fwd_wgmma_d128_bf16"));
        int regs; CK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, g_mod_fn128));
        printf("module %s: d128 %d registers\n", argv[argc - 1], regs);
        argc -= 2;
    }
    if (argc >= 9 && !strcmp(argv[1], "rep")) {  // rep B H Nq Nk D causal R
        Problem p{atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), atoi(argv[7]), false};
        int bad = 0;
        for (int r = 0; r < atoi(argv[8]); ++r) bad += !run(p, 0, 100 + r);
        printf("rep: %d bad\n", bad);
        return bad ? 1 : 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "time")) {
        Problem p{atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]), false};
        // AW_ITERS = n: time one burst of n launches instead of attention_bench's trials.
        g_burst = getenv("AW_ITERS") ? atoi(getenv("AW_ITERS")) : 0;
        return run(p, 1, 7) ? 0 : 1;
    }
    int fails = 0;
    const bool quick = argc >= 2 && !strcmp(argv[1], "quick");
    const int pairs[][2] = {{1, 1}, {17, 17}, {64, 64}, {128, 128}, {129, 129}, {257, 257}, {5, 64}, {64, 5},
                            {200, 129}, {700, 300}, {300, 900}, {1024, 1024}};
    if (quick) {
        for (int D : {64, 128})
            for (int causal = 0; causal < 2; ++causal) {
                fails += !run(Problem{2, 3, 1, 1, D, causal, false}, 0, 1);
                fails += !run(Problem{2, 3, 700, 300, D, causal, false}, 0, 2);
                fails += !run(Problem{16, 12, 129, 129, D, causal, false}, 0, 3);
            }
        printf("%d failures\n", fails);
        return fails ? 1 : 0;
    }
    for (int D : {64, 128})
        for (auto& pr : pairs)
            for (int causal = 0; causal < 2; ++causal)
                for (int packed = 0; packed < 2; ++packed) {
                    if (packed && pr[0] != pr[1]) continue;
                    fails += !run(Problem{2, 3, pr[0], pr[1], D, causal, packed != 0}, 0, pr[0] * 31 + pr[1]);
                }
    for (int D : {64, 128})
        for (int causal = 0; causal < 2; ++causal) fails += !run(Problem{16, 12, 129, 129, D, causal, false}, 0, 9);
    printf("%d failures\n", fails);
    return fails ? 1 : 0;
}
