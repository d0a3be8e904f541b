// gemm_lab_host.cuh — the host side the GEMM labs share (gemm_wgx_cluster_lab.cu,
// gemm_splitk_pair_lab.cu): error checks, bf16 tensor maps (128-byte swizzle, as the library's),
// cuBLAS loaded at run time from $CUBLAS_LIB on a capturable stream, and the fill / compare
// kernels. Include after the library's .cu files (it uses TensorMap, bf16_t and their
// conversions).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <functional>
#include <vector>

#define RK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t r_ = (x);                                                                  \
        if (r_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(r_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

typedef CUresult (*EncodeFn)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                             const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                             CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static EncodeFn encode_fn;

// A row-major [rows, cols] bf16 matrix, cols contiguous, as a map with box {bc, br}.
static TensorMap tmap(const void* p, int rows, int cols, int bc, int br) {
    CUtensorMap m;
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)cols * 2};
    cuuint32_t box[2] = {(cuuint32_t)bc, (cuuint32_t)br}, es[2] = {1, 1};
    CUresult r = encode_fn(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void*)p, dims, strides, box, es,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled failed (%d)\n", (int)r);
        exit(1);
    }
    TensorMap t;
    memcpy(&t, &m, sizeof t);
    return t;
}

typedef int (*CublasCreate)(void**);
typedef int (*CublasGemmEx)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                            const void*, void*, int, int, int, int);
static void* cublas;
static cudaStream_t lab_stream;  // every timed launch (capturable, unlike the legacy stream)
static CublasGemmEx gemm_ex;

// Row-major C[M,N] = A[M,K] @ op(B): nn B [K,N]; nt B [N,K].
static void run_cublas(const bf16_t* A, const bf16_t* B, bf16_t* C, int M, int N, int K, bool nt) {
    float one = 1, zero = 0;
    int r = gemm_ex(cublas, nt ? 1 : 0, 0, N, M, K, &one, B, 14, nt ? K : N, A, 14, K, &zero, C, 14, N, 68, -1);
    if (r) {
        fprintf(stderr, "cublasGemmEx failed (%d)\n", r);
        exit(1);
    }
}

__global__ void fill_bf16(bf16_t* p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)i * 2654435761u ^ seed;
        x ^= x >> 13;
        x *= 0x5bd1e995u;
        x ^= x >> 15;
        p[i] = f32_to_bf16(((x & 0xffff) / 32768.0f) - 1.0f);
    }
}
__global__ void diff_bf16(const bf16_t* a, const bf16_t* b, size_t n, float* out) {
    float md = 0, mr = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = bf16_to_f32(a[i]), y = bf16_to_f32(b[i]);
        md = fmaxf(md, fabsf(x - y));
        mr = fmaxf(mr, fabsf(y));
        if (x != x) md = INFINITY;
    }
    atomicMax((int*)&out[0], __float_as_int(md));
    atomicMax((int*)&out[1], __float_as_int(mr));
}


// Loads the tensor-map encoder and cuBLAS ($CUBLAS_LIB), creates lab_stream and binds cuBLAS to it;
// exits with a message when either is missing.
static void lab_host_init() {
    RK(cudaFree(0));
    cudaDriverEntryPointQueryResult q;
    RK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", (void**)&encode_fn, cudaEnableDefault, &q));
    const char* lib = getenv("CUBLAS_LIB");
    void* h = lib ? dlopen(lib, RTLD_NOW) : nullptr;
    if (!h) {
        fprintf(stderr, "set CUBLAS_LIB to libcublas.so (%s)\n", dlerror());
        exit(1);
    }
    ((CublasCreate)dlsym(h, "cublasCreate_v2"))(&cublas);
    RK(cudaStreamCreateWithFlags(&lab_stream, cudaStreamNonBlocking));
    ((int (*)(void*, cudaStream_t))dlsym(h, "cublasSetStream_v2"))(cublas, lab_stream);
    gemm_ex = (CublasGemmEx)dlsym(h, "cublasGemmEx");
}

// One shape's operands: A [M, K] and B ([K, N], or [N, K] when nt) filled with values in [-1, 1),
// C for the candidates, R = cuBLAS's product (the reference every candidate is compared with).
struct LabOperands {
    bf16_t *A, *B, *C, *R;
};
static LabOperands lab_operands(int M, int N, int K, bool nt) {
    LabOperands o;
    RK(cudaMalloc(&o.A, (size_t)M * K * 2));
    RK(cudaMalloc(&o.B, (size_t)K * N * 2));
    RK(cudaMalloc(&o.C, (size_t)M * N * 2));
    RK(cudaMalloc(&o.R, (size_t)M * N * 2));
    fill_bf16<<<1024, 256>>>(o.A, (size_t)M * K, 1);
    fill_bf16<<<1024, 256>>>(o.B, (size_t)K * N, 2);
    RK(cudaDeviceSynchronize());  // the fills ran on the legacy stream, the rest on lab_stream
    run_cublas(o.A, o.B, o.R, M, N, K, nt);
    RK(cudaStreamSynchronize(lab_stream));
    return o;
}
static void lab_free(LabOperands& o) {
    RK(cudaFree(o.A));
    RK(cudaFree(o.B));
    RK(cudaFree(o.C));
    RK(cudaFree(o.R));
}

// Times n sides in turn, `rounds` times: each side a warm-up `run(i)`, then a timed one between two
// events on lab_stream (`run` makes `reps` calls). Returns each side's µs per call, the samples
// sorted (the median is [size / 2]).
static std::vector<std::vector<float>> lab_time_rounds(size_t n, int rounds, int reps,
                                                       const std::function<void(size_t)>& run) {
    cudaEvent_t e0, e1;
    RK(cudaEventCreate(&e0));
    RK(cudaEventCreate(&e1));
    std::vector<std::vector<float>> t(n);
    for (int r = 0; r < rounds; ++r) {
        for (size_t i = 0; i < n; ++i) {
            run(i);
            RK(cudaEventRecord(e0, lab_stream));
            run(i);
            RK(cudaEventRecord(e1, lab_stream));
            RK(cudaEventSynchronize(e1));
            float ms;
            RK(cudaEventElapsedTime(&ms, e0, e1));
            t[i].push_back(ms * 1000 / reps);
        }
    }
    RK(cudaEventDestroy(e0));
    RK(cudaEventDestroy(e1));
    for (auto& v : t) std::sort(v.begin(), v.end());
    return t;
}

// Poisons o.C (0xffff: NaN), runs `launch` (one product into o.C on lab_stream) and returns
// max |C - R| / max |R| (infinity where C holds a NaN).
static float lab_check(const LabOperands& o, int M, int N, const std::function<void()>& launch) {
    static float* dd = nullptr;
    if (!dd) RK(cudaMalloc(&dd, 8));
    RK(cudaMemset(o.C, 0xff, (size_t)M * N * 2));
    RK(cudaDeviceSynchronize());
    launch();
    RK(cudaStreamSynchronize(lab_stream));
    RK(cudaMemset(dd, 0, 8));
    diff_bf16<<<1024, 256>>>(o.C, o.R, (size_t)M * N, dd);
    float hd[2];
    RK(cudaMemcpy(hd, dd, 8, cudaMemcpyDeviceToHost));
    return hd[0] / hd[1];
}
