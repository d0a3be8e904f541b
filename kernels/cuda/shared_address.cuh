// shared_address.cuh — the 32-bit shared-memory address of a generic pointer into shared memory,
// as ldmatrix, cp.async, mbarrier and TMA instructions take it.
#pragma once

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    unsigned r;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
    return r;
}
