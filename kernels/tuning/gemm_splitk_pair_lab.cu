// gemm_splitk_pair_lab.cu — issue 34 item 1 (half-precision GEMM at every shape), session 66: the
// long-K shapes over small outputs (512^2 x 16384, 256^2 x 65536, ...) are the hgemm sweep's
// lowest cases (0.72-0.78x cuBLAS in graph replays). Their one-wave split-K plans stream each
// k tile's A and B from L2 into every SM: 32 KB per 128 x 128 unit and k tile, ~14 TB/s at the
// tensor rate, more than L2 serves. Clusters of two blocks on adjacent tile columns that share
// the A tile by TMA multicast (the library's gemm_wgx with CL = 2, shipped only for 128 x 64 with
// one slice) stream 24 KB instead; 128 x 256 units 48 KB for twice the products (40 KB in
// pairs). This lab times every such plan — tile x split count — through the library's own
// kernels (gemm_wgx<.., CL> and gemm_wgx_reduce_*, compiled in from kernels/cuda), the product
// and its reduce launched as the library does (the reduce with a programmatic dependency), each
// plan's LAB_REPS calls captured in a CUDA graph and replayed in turn with cuBLAS's, LAB_ROUNDS
// rounds, after a settle of LAB_SETTLE_MS of cuBLAS calls (the power cap's clock). Every plan's
// C is compared with cuBLAS's first.
//
// Build (nvcc 12.4+; the tensor-map encoder comes from cudaGetDriverEntryPoint):
//   nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o gemm_splitk_pair_lab \
//        kernels/tuning/gemm_splitk_pair_lab.cu -ldl
// Run:  CUBLAS_LIB=/path/libcublas.so.13 ./gemm_splitk_pair_lab [M N K nn|nt]...
#include <cuda_runtime.h>
#include <cuda.h>
#include <dlfcn.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../cuda/gemm_wgmma_tiles.cu"

// The pairs the library does not ship: 128 x 128 and 128 x 256 tiles, two CTAs along N sharing A.
#define PAIR_ENTRY(name, G, TB)                                                                              \
    extern "C" __global__ void __launch_bounds__(384, 1) __cluster_dims__(2, 1, 1)                           \
        name(const __grid_constant__ TensorMap tmA, const __grid_constant__ TensorMap tmB, const bf16_t* A,  \
             const bf16_t* B, unsigned char* __restrict__ out, int M, int N, int K, int ldc, int splits,      \
             int kt_per) {                                                                                   \
        gemm_wgx<WgxBF16, G, 0, TB, 2>(&tmA, &tmB, out, M, N, K, ldc, splits, kt_per);                      \
    }
PAIR_ENTRY(lab_128x128x2_nn, Wgx128x128, 1)
PAIR_ENTRY(lab_128x128x2_nt, Wgx128x128, 0)
PAIR_ENTRY(lab_128x256x2_nn, Wgx128x256, 1)
PAIR_ENTRY(lab_128x256x2_nt, Wgx128x256, 0)

#include "gemm_lab_host.cuh"

struct Tile {
    const char* name;
    const void* nn;
    const void* nt;
    int bm, bn, cl, smem;
};

// kernels/src/ops/gemm_half_plan.rs: half_split and reduce_block.
static void half_split(int K, int splits, int& per, int& real) {
    const int kt = std::max((K + 63) / 64, 1);
    per = (kt + std::min(std::max(splits, 1), kt) - 1) / std::min(std::max(splits, 1), kt);
    real = (kt + per - 1) / per;
}
static void reduce_block(int splits, int& bx, int& zl) {
    int z = (splits + 7) / 8, p = 1;
    while (p < z) p *= 2;
    zl = std::min(std::max(p, 1), 32);
    bx = std::max(256 / zl, 32);
}

int main(int argc, char** argv) {
    lab_host_init();
    int sms = 0;
    RK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    cudaDeviceProp prop;
    RK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s, %d SMs\n", prop.name, sms);

    std::vector<Tile> tiles = {
        {"128x64", (const void*)gemm_wgx_128x64_bf16_nn, (const void*)gemm_wgx_128x64_bf16_nt, 128, 64, 1,
         Wgx128x64::SMEM},
        {"128x64x2", (const void*)gemm_wgx_128x64x2_bf16_nn, (const void*)gemm_wgx_128x64x2_bf16_nt, 128, 64, 2,
         Wgx128x64::SMEM},
        {"128x128", (const void*)gemm_wgx_128x128_bf16_nn, (const void*)gemm_wgx_128x128_bf16_nt, 128, 128, 1,
         Wgx128x128::SMEM},
        {"128x128x2", (const void*)lab_128x128x2_nn, (const void*)lab_128x128x2_nt, 128, 128, 2, Wgx128x128::SMEM},
        {"128x256", (const void*)gemm_wgx_128x256_bf16_nn, (const void*)gemm_wgx_128x256_bf16_nt, 128, 256, 1,
         Wgx128x256::SMEM},
        {"128x256x2", (const void*)lab_128x256x2_nn, (const void*)lab_128x256x2_nt, 128, 256, 2, Wgx128x256::SMEM},
    };
    std::vector<int> maxcl(tiles.size(), 0);
    for (size_t i = 0; i < tiles.size(); ++i)
        for (const void* f : {tiles[i].nn, tiles[i].nt}) {
            RK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, tiles[i].smem));
            if (tiles[i].cl == 2) {
                cudaLaunchConfig_t cfg = {};
                cfg.gridDim = dim3(2 * sms);
                cfg.blockDim = dim3(384);
                cfg.dynamicSmemBytes = tiles[i].smem;
                RK(cudaOccupancyMaxActiveClusters(&maxcl[i], f, &cfg));
            }
        }
    printf("max active clusters of 2: 128x64 %d, 128x128 %d, 128x256 %d\n", maxcl[1], maxcl[3], maxcl[5]);

    struct Shape {
        int M, N, K;
        bool nt;
    };
    std::vector<Shape> shapes;
    for (int i = 1; i + 3 < argc; i += 4)
        shapes.push_back({atoi(argv[i]), atoi(argv[i + 1]), atoi(argv[i + 2]), !strcmp(argv[i + 3], "nt")});
    if (shapes.empty())
        shapes = {{512, 512, 16384, false}, {512, 512, 16384, true}, {256, 256, 65536, false},
                  {256, 256, 65536, true},  {1024, 1024, 8192, false}, {64, 4096, 4096, true},
                  {1000, 1000, 1000, false}, {2048, 2048, 8192, false}};
    const int reps = getenv("LAB_REPS") ? atoi(getenv("LAB_REPS")) : 20;
    const int rounds = getenv("LAB_ROUNDS") ? atoi(getenv("LAB_ROUNDS")) : 5;
    const int settle_ms = getenv("LAB_SETTLE_MS") ? atoi(getenv("LAB_SETTLE_MS")) : 1000;

    cudaEvent_t e0, e1;
    RK(cudaEventCreate(&e0));
    RK(cudaEventCreate(&e1));
    for (const Shape& sh : shapes) {
        const int M = sh.M, N = sh.N, K = sh.K;
        LabOperands ops = lab_operands(M, N, K, sh.nt);
        bf16_t *A = ops.A, *B = ops.B, *C = ops.C, *R = ops.R;

        // The plans: every tile with 1 slice and with the one-wave split counts s_max, 3/4, 1/2
        // of it (units, or for pairs clusters, at most one per SM / cluster slot).
        struct Plan {
            size_t tile;
            int splits, per;
        };
        std::vector<Plan> plans;
        const int kt = (K + 63) / 64;
        for (size_t i = 0; i < tiles.size(); ++i) {
            const Tile& t = tiles[i];
            const int tm = (M + t.bm - 1) / t.bm, tn = (N + t.bn - 1) / t.bn;
            if (t.cl == 2 && tn < 2) continue;
            const int units1 = tm * ((tn + t.cl - 1) / t.cl);
            const int slots = t.cl == 2 ? maxcl[i] : sms;
            const int smax = std::max(1, std::min(slots / units1, kt));
            std::vector<int> ss = {1, smax, (3 * smax + 3) / 4, (smax + 1) / 2};
            std::sort(ss.begin(), ss.end());
            ss.erase(std::unique(ss.begin(), ss.end()), ss.end());
            for (int s : ss) {
                int per, real;
                half_split(K, s, per, real);
                bool dup = false;
                for (auto& p : plans) dup |= (p.tile == i && p.splits == real);
                if (!dup) plans.push_back({i, real, per});
            }
        }
        size_t ws_elems = 0;
        for (auto& p : plans) ws_elems = std::max(ws_elems, p.splits > 1 ? (size_t)p.splits * M * N : 0);
        float* ws = nullptr;
        if (ws_elems) RK(cudaMalloc(&ws, ws_elems * 4));

        const TensorMap mA = tmap(A, M, K, 64, 128), mA_half = tmap(A, M, K, 64, 64);
        auto mapB = [&](int bn) { return sh.nt ? tmap(B, N, K, 64, bn) : tmap(B, K, N, 64, 64); };
        const TensorMap mB64 = mapB(64), mB128 = mapB(128), mB256 = mapB(256);
        auto launch = [&](const Plan& p) {
            const Tile& t = tiles[p.tile];
            const TensorMap& ma = t.cl == 2 ? mA_half : mA;
            const TensorMap& mb = t.bn == 64 ? mB64 : t.bn == 128 ? mB128 : mB256;
            int ldc = N, splits = p.splits, kt_per = p.per, m = M, n = N, k = K;
            unsigned char* out = splits > 1 ? (unsigned char*)ws : (unsigned char*)C;
            void* args[] = {(void*)&ma, (void*)&mb, &A, &B, &out, &m, &n, &k, &ldc, &splits, &kt_per};
            const int tm = (M + t.bm - 1) / t.bm, tn = (N + t.bn - 1) / t.bn;
            const int units = tm * ((tn + t.cl - 1) / t.cl) * splits;
            const int grid = t.cl * std::max(1, std::min(units, sms / t.cl));
            RK(cudaLaunchKernel(sh.nt ? t.nt : t.nn, dim3(grid), dim3(384), args, t.smem, lab_stream));
            if (splits > 1) {
                int bx, zl;
                reduce_block(splits, bx, zl);
                const long long pairs = ((long long)M * N + 1) / 2;
                const int blocks = (int)std::max(1LL, std::min((pairs + bx - 1) / bx, (long long)sms * (2048 / (bx * zl))));
                cudaLaunchConfig_t cfg = {};
                cfg.gridDim = dim3(blocks);
                cfg.blockDim = dim3(bx, zl);
                cfg.stream = lab_stream;
                cudaLaunchAttribute at[1];
                at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
                at[0].val.programmaticStreamSerializationAllowed = 1;
                cfg.attrs = at;
                cfg.numAttrs = 1;
                const float* wsc = ws;
                RK(cudaLaunchKernelEx(&cfg, gemm_wgx_reduce_bf16, wsc, splits, M, N, C, ldc));
            }
        };
        printf("\n%d x %d x %d %s\n", M, N, K, sh.nt ? "nt" : "nn");
        bool ok = true;
        for (auto& p : plans) {
            const float rel = lab_check(ops, M, N, [&] { launch(p); });
            if (!(rel < 1e-2)) {
                printf("  check %s s%d: max|d|/max|ref| = %.2e FAIL\n", tiles[p.tile].name, p.splits, rel);
                ok = false;
            }
        }
        printf("  checks: %s (%zu plans)\n", ok ? "all ok" : "FAILURES", plans.size());
        std::vector<cudaGraphExec_t> execs(plans.size() + 1, nullptr);
        for (size_t i = 0; i <= plans.size(); ++i) {
            cudaGraph_t g;
            RK(cudaStreamBeginCapture(lab_stream, cudaStreamCaptureModeThreadLocal));
            for (int r = 0; r < reps; ++r) i == 0 ? run_cublas(A, B, C, M, N, K, sh.nt) : launch(plans[i - 1]);
            RK(cudaStreamEndCapture(lab_stream, &g));
            RK(cudaGraphInstantiate(&execs[i], g, 0));
            RK(cudaGraphDestroy(g));
        }
        // Settle: cuBLAS's replays for settle_ms, so that every timing runs at the capped clock.
        {
            RK(cudaEventRecord(e0, lab_stream));
            float ms = 0;
            while (ms < settle_ms) {
                for (int r = 0; r < 10; ++r) RK(cudaGraphLaunch(execs[0], lab_stream));
                RK(cudaEventRecord(e1, lab_stream));
                RK(cudaEventSynchronize(e1));
                RK(cudaEventElapsedTime(&ms, e0, e1));
            }
        }
        auto t = lab_time_rounds(plans.size() + 1, rounds, reps,
                                 [&](size_t i) { RK(cudaGraphLaunch(execs[i], lab_stream)); });
        for (auto e : execs)
            if (e) RK(cudaGraphExecDestroy(e));
        std::vector<float> med(t.size());
        for (size_t i = 0; i < t.size(); ++i) med[i] = t[i][t[i].size() / 2];
        size_t best = 1;
        for (size_t i = 1; i < t.size(); ++i)
            if (med[i] < med[best]) best = i;
        const double flop = 2.0 * M * N * K;
        for (size_t i = 0; i < t.size(); ++i) {
            char name[64];
            if (i == 0) snprintf(name, sizeof name, "cuBLAS");
            else snprintf(name, sizeof name, "%s s%d", tiles[plans[i - 1].tile].name, plans[i - 1].splits);
            printf("  %-16s %9.2f us (min %8.2f) %6.1f TFLOP/s  x cuBLAS %.3f%s\n", name, med[i], t[i][0],
                   flop / med[i] / 1e6, med[0] / med[i], i == best ? "  <- fastest" : "");
        }
        if (ws) RK(cudaFree(ws));
        lab_free(ops);
    }
    return 0;
}
