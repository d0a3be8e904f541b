// Every cuBLASLt algorithm for one bf16 GEMM on this GPU, timed: which of NVIDIA's own kernels
// run, and how fast each family is. Used to place our mma.sync kernel beside NVIDIA's mma.sync
// (sm80-generation) kernels on a Hopper GPU, where cuBLAS's default picks wgmma kernels
// (kernels/TUNING.md, "mma.sync, fourth round").
//
//   g++ -O2 -std=c++17 -I$CUDA/include -I$CUBLAS/include cublaslt_algos.cpp \
//       -L$CUDA/lib64 -L$CUBLAS/lib -lcublasLt -lcudart -o /tmp/cublaslt_algos
//   /tmp/cublaslt_algos M N K            # sweep: every (algo id, tile, stages) AlgoCheck accepts
//   ONLY="id:tile:stages ..." /tmp/cublaslt_algos M N K   # run just these, once each (for ncu)
//   HEURISTIC_ONLY=1 /tmp/cublaslt_algos M N K             # cuBLAS's own picks only
//   HEURISTICS=1 ...                                       # time only the first N of those picks
//   BATCH=100 ...                                          # each sample: 100 back-to-back calls
//
// Column-major C[M,N] = A[M,K] * B[K,N], A, B and C bf16, f32 accumulation and scale, no
// transposes. Each configuration: 2 warm-up calls, then the median of 5 timed calls (CUDA events).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#define CK(x)                                                                     \
  do {                                                                            \
    cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                      \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)
#define LK(x)                                                                     \
  do {                                                                            \
    cublasStatus_t s_ = (x);                                                      \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                            \
      fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, (int)s_);   \
      exit(1);                                                                    \
    }                                                                             \
  } while (0)

static const cublasComputeType_t COMPUTE = CUBLAS_COMPUTE_32F;
static const cudaDataType_t SCALE = CUDA_R_32F, T = CUDA_R_16BF;

struct Gemm {
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, c;
  void *da, *db, *dc, *ws;
  size_t ws_size = size_t(256) << 20;
  int m, n, k;
  cudaEvent_t e0, e1;

  // Median milliseconds of 5 calls with `algo`, or a negative value if it fails to run.
  float time(const cublasLtMatmulAlgo_t* algo, int reps = 5) {
    float alpha = 1.f, beta = 0.f;
    auto call = [&]() {
      return cublasLtMatmul(lt, op, &alpha, da, a, db, b, &beta, dc, c, dc, c, algo, ws, ws_size, 0);
    };
    for (int i = 0; i < 2; i++)
      if (call() != CUBLAS_STATUS_SUCCESS) return -1.f;
    if (cudaDeviceSynchronize() != cudaSuccess) return -2.f;
    std::vector<float> t;
    const int batch = getenv("BATCH") ? atoi(getenv("BATCH")) : 1;  // back-to-back calls per sample
    for (int i = 0; i < reps; i++) {
      cudaEventRecord(e0);
      for (int b = 0; b < batch; b++) call();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      t.push_back(ms / batch);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
  double tflops(float ms) const { return 2.0 * m * n * k / (ms * 1e-3) / 1e12; }
};

static std::vector<int> cap_ids(const cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(algo, attr, nullptr, 0, &written) != CUBLAS_STATUS_SUCCESS ||
      written == 0)
    return {0};
  std::vector<int> v(written / sizeof(int));
  cublasLtMatmulAlgoCapGetAttribute(algo, attr, v.data(), v.size() * sizeof(int), &written);
  if (v.empty()) v.push_back(0);
  return v;
}

static bool configure(Gemm& g, int id, int tile, int stages, cublasLtMatmulAlgo_t* algo) {
  if (cublasLtMatmulAlgoInit(g.lt, COMPUTE, SCALE, T, T, T, T, id, algo) != CUBLAS_STATUS_SUCCESS)
    return false;
  cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile));
  cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages));
  int one = 1, zero = 0;
  cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one, sizeof(one));
  cublasLtMatmulAlgoConfigSetAttribute(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &zero, sizeof(zero));
  cublasLtMatmulHeuristicResult_t r;
  memset(&r, 0, sizeof(r));
  if (cublasLtMatmulAlgoCheck(g.lt, g.op, g.a, g.b, g.c, g.c, algo, &r) != CUBLAS_STATUS_SUCCESS)
    return false;
  return r.workspaceSize <= g.ws_size;
}

int main(int argc, char** argv) {
  Gemm g;
  g.m = argc > 1 ? atoi(argv[1]) : 4096;
  g.n = argc > 2 ? atoi(argv[2]) : g.m;
  g.k = argc > 3 ? atoi(argv[3]) : g.m;
  CK(cudaMalloc(&g.da, size_t(g.m) * g.k * 2));
  CK(cudaMalloc(&g.db, size_t(g.k) * g.n * 2));
  CK(cudaMalloc(&g.dc, size_t(g.m) * g.n * 2));
  CK(cudaMalloc(&g.ws, g.ws_size));
  // Small random-ish values (a constant bit pattern per byte would let nothing differ).
  {
    std::vector<unsigned short> h(size_t(std::max(g.m, g.n)) * g.k);
    unsigned s = 12345;
    for (auto& x : h) {
      s = s * 1664525u + 1013904223u;
      float f = ((s >> 9) & 0xFFFF) / 65536.f - 0.5f;
      unsigned u;
      memcpy(&u, &f, 4);
      x = (unsigned short)(u >> 16);
    }
    CK(cudaMemcpy(g.da, h.data(), size_t(g.m) * g.k * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g.db, h.data(), size_t(g.k) * g.n * 2, cudaMemcpyHostToDevice));
  }
  CK(cudaEventCreate(&g.e0));
  CK(cudaEventCreate(&g.e1));
  LK(cublasLtCreate(&g.lt));
  LK(cublasLtMatmulDescCreate(&g.op, COMPUTE, SCALE));
  LK(cublasLtMatrixLayoutCreate(&g.a, T, g.m, g.k, g.m));
  LK(cublasLtMatrixLayoutCreate(&g.b, T, g.k, g.n, g.k));
  LK(cublasLtMatrixLayoutCreate(&g.c, T, g.m, g.n, g.m));

  if (const char* only = getenv("ONLY")) {
    std::istringstream in(only);
    std::string w;
    while (in >> w) {
      int id, tile, stages;
      if (sscanf(w.c_str(), "%d:%d:%d", &id, &tile, &stages) != 3) continue;
      cublasLtMatmulAlgo_t algo;
      if (!configure(g, id, tile, stages, &algo)) {
        printf("%s rejected\n", w.c_str());
        continue;
      }
      float ms = g.time(&algo);
      printf("%s %.1f TFLOP/s\n", w.c_str(), g.tflops(ms));
    }
    return 0;
  }

  // cuBLAS's own pick: the heuristic's first result.
  {
    cublasLtMatmulPreference_t pref;
    LK(cublasLtMatmulPreferenceCreate(&pref));
    LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g.ws_size,
                                            sizeof(g.ws_size)));
    cublasLtMatmulHeuristicResult_t r[8];
    int got = 0;
    LK(cublasLtMatmulAlgoGetHeuristic(g.lt, g.op, g.a, g.b, g.c, g.c, pref, 8, r, &got));
    const int shown = getenv("HEURISTICS") ? std::min(got, atoi(getenv("HEURISTICS"))) : got;
    for (int i = 0; i < shown; i++) {
      int id, tile, stages;
      size_t w;
      cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &w);
      cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &w);
      cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages),
                                           &w);
      float ms = g.time(&r[i].algo);
      printf("heuristic #%d: id %d tile %d stages %d: %.1f TFLOP/s\n", i, id, tile, stages, g.tflops(ms));
    }
    cublasLtMatmulPreferenceDestroy(pref);
  }
  if (getenv("HEURISTIC_ONLY")) return 0;

  int ids[256], nids = 0;
  LK(cublasLtMatmulAlgoGetIds(g.lt, COMPUTE, SCALE, T, T, T, T, 256, ids, &nids));
  printf("%d algorithm ids for bf16 x bf16 -> bf16, f32 compute; %d x %d x %d\n", nids, g.m, g.n, g.k);
  for (int i = 0; i < nids; i++) {
    cublasLtMatmulAlgo_t algo;
    if (cublasLtMatmulAlgoInit(g.lt, COMPUTE, SCALE, T, T, T, T, ids[i], &algo) != CUBLAS_STATUS_SUCCESS)
      continue;
    std::vector<int> tiles = cap_ids(&algo, CUBLASLT_ALGO_CAP_TILE_IDS);
    std::vector<int> stages = cap_ids(&algo, CUBLASLT_ALGO_CAP_STAGES_IDS);
    double best = 0;
    int bt = -1, bs = -1, ran = 0;
    for (int t : tiles)
      for (int s : stages) {
        cublasLtMatmulAlgo_t a;
        if (!configure(g, ids[i], t, s, &a)) continue;
        float ms = g.time(&a);
        if (ms <= 0) continue;
        ran++;
        double tf = g.tflops(ms);
        printf("  id %d tile %d stages %d: %.1f TFLOP/s\n", ids[i], t, s, tf);
        if (tf > best) best = tf, bt = t, bs = s;
      }
    printf("algo id %d: %zu tiles x %zu stages, %d ran; best tile %d stages %d: %.1f TFLOP/s  BEST %d:%d:%d\n",
           ids[i], tiles.size(), stages.size(), ran, bt, bs, best, ids[i], bt, bs);
    fflush(stdout);
  }
  return 0;
}
