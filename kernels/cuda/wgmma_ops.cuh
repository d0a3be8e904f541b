// wgmma_ops.cuh — Hopper warpgroup MMA (wgmma) for the shape-specialised GEMMs of
// gemm_wgmma_tiles.cu, the FP8 GEMM of gemm_wgmma_fp8.cu and the attention forward of
// attention_wgmma.cu: shared-memory matrix descriptors, the fence / commit / wait instructions,
// and `wgmma.mma_async` m64nNk16 with f32 accumulation for N = 64, 128 and 256 on bf16 and f16
// (sm_90a; PTX ISA 8.0). gemm_wgmma.cu keeps its own copies of the same instructions.
//
// Accumulator fragment of m64nNk16 (f32), thread t of the warpgroup, warp w = t / 32, lane l:
// for each 8-column block i < N / 8, d[4 i + 0..1] hold row 16 w + l / 4, columns 8 i + 2 (l % 4)
// + 0..1; d[4 i + 2..3] the same columns of row 16 w + l / 4 + 8.
#pragma once

// A shared-memory matrix descriptor: start address, leading- and stride-dimension byte offsets
// (in 16-byte units), 128-byte swizzle. Tiles start on 1024-byte boundaries (base offset 0).
__device__ __forceinline__ unsigned long long wgx_desc(unsigned addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16) |
           ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

// The descriptor of a matrix `bytes` further on in shared memory: only the start-address field
// (the low 14 bits, address >> 4) changes. Every shared::cta address is below 2^18, so the field
// never carries into the leading byte offset; one 32-bit add instead of the whole construction.
__device__ __forceinline__ unsigned long long wgx_desc_add(unsigned long long desc, unsigned bytes) {
    const unsigned lo = (unsigned)desc + (bytes >> 4);
    return (desc & 0xFFFFFFFF00000000ull) | lo;
}

__device__ __forceinline__ void wgx_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgx_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgx_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
// Waits until at most one committed group is still in flight (the older ones are done).
__device__ __forceinline__ void wgx_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory"); }

// Keeps the compiler from moving reads or writes of an accumulator across the asynchronous wgmma
// boundary (each asm "modifies" the register, in program order with the volatile asms).
template <int R>
__device__ __forceinline__ void wgx_fence_acc(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define WGX_R32 \
    "{" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" \
    "}"

#define WGX_R64 \
    "{" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
    "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
    "%56, %57, %58, %59, %60, %61, %62, %63" \
    "}"

#define WGX_R96 \
    "{" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95" \
    "}"

#define WGX_R128 \
    "{" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
    "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
    "%56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, " \
    "%74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, " \
    "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, " \
    "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, " \
    "%123, %124, %125, %126, %127" \
    "}"

#define WGX_A8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define WGX_A32 WGX_A8(0), WGX_A8(8), WGX_A8(16), WGX_A8(24)
#define WGX_A64 WGX_A32, WGX_A8(32), WGX_A8(40), WGX_A8(48), WGX_A8(56)
#define WGX_A96 WGX_A64, WGX_A8(64), WGX_A8(72), WGX_A8(80), WGX_A8(88)
#define WGX_A128 WGX_A64, WGX_A8(64), WGX_A8(72), WGX_A8(80), WGX_A8(88), WGX_A8(96), WGX_A8(104), WGX_A8(112), WGX_A8(120)

// Element tags: which wgmma input type, and how a result is rounded on the store.
struct WgxBF16 {
    typedef bf16_t T;
};
struct WgxF16 {
    typedef f16_t T;
};

// d (64 x N, f32) = A (64 x 16) @ B (16 x N) (+ d when `accumulate` != 0), both operands in
// shared memory through descriptors. TA / TB: 1 = the operand is M- / N-major (transposed).
template <class E, int N, int TA, int TB>
struct WgxMma;

template <int TA, int TB>
struct WgxMma<WgxBF16, 64, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[32], unsigned long long da, unsigned long long db, int accumulate) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WGX_R32 ", %32, %33, p, 1, 1, %35, %36; }"
                     : WGX_A32
                     : "l"(da), "l"(db), "r"(accumulate), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB>
struct WgxMma<WgxBF16, 128, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[64], unsigned long long da, unsigned long long db, int accumulate) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WGX_R64 ", %64, %65, p, 1, 1, %67, %68; }"
                     : WGX_A64
                     : "l"(da), "l"(db), "r"(accumulate), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB>
struct WgxMma<WgxBF16, 192, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[96], unsigned long long da, unsigned long long db, int accumulate) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 " WGX_R96 ", %96, %97, p, 1, 1, %99, %100; }"
                     : WGX_A96
                     : "l"(da), "l"(db), "r"(accumulate), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB>
struct WgxMma<WgxBF16, 256, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[128], unsigned long long da, unsigned long long db, int accumulate) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " WGX_R128 ", %128, %129, p, 1, 1, %131, %132; }"
                     : WGX_A128
                     : "l"(da), "l"(db), "r"(accumulate), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB>
struct WgxMma<WgxF16, 64, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[32], unsigned long long da, unsigned long long db, int accumulate) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " WGX_R32 ", %32, %33, p, 1, 1, %35, %36; }"
                     : WGX_A32
                     : "l"(da), "l"(db), "r"(accumulate), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB>
struct WgxMma<WgxF16, 128, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[64], unsigned long long da, unsigned long long db, int accumulate) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %66, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " WGX_R64 ", %64, %65, p, 1, 1, %67, %68; }"
                     : WGX_A64
                     : "l"(da), "l"(db), "r"(accumulate), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB>
struct WgxMma<WgxF16, 192, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[96], unsigned long long da, unsigned long long db, int accumulate) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %98, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 " WGX_R96 ", %96, %97, p, 1, 1, %99, %100; }"
                     : WGX_A96
                     : "l"(da), "l"(db), "r"(accumulate), "n"(TA), "n"(TB));
    }
};
template <int TA, int TB>
struct WgxMma<WgxF16, 256, TA, TB> {
    static __device__ __forceinline__ void run(float (&d)[128], unsigned long long da, unsigned long long db, int accumulate) {
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %130, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " WGX_R128 ", %128, %129, p, 1, 1, %131, %132; }"
                     : WGX_A128
                     : "l"(da), "l"(db), "r"(accumulate), "n"(TA), "n"(TB));
    }
};
