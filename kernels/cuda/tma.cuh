// tma.cuh — Hopper's asynchronous copy engine (TMA) and the mbarriers that count its bytes
// (sm_90+; PTX ISA 8.0). Shared by the wgmma GEMMs and attention kernels and gemm_mma_tma.cu.
#pragma once

// The opaque 128-byte CUtensorMap, passed by value as a __grid_constant__ parameter.
struct alignas(64) TensorMap {
    unsigned long long bits[16];
};

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

// Makes the barriers' initialisation visible to the other threads and to the copy engine.
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("{ .reg .b64 st; mbarrier.arrive.shared::cta.b64 st, [%0]; }" ::"r"(bar) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(unsigned bar, unsigned parity) {
    unsigned done;
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    return done != 0;
}

// Waits until the phase of parity `parity` of the barrier has completed. Lab builds (nvcc, see
// kernels/tuning/attn_wgmma_lab.cu) may define TMA_SPIN_LIMIT: a wait that spins that many times
// prints the barrier and traps instead of hanging.
#ifdef TMA_SPIN_LIMIT
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    long long n = 0;
    while (!mbar_try_wait(bar, parity)) {
        if (++n == TMA_SPIN_LIMIT) {
            printf("mbar_wait stuck: block %d thread %d barrier %u parity %u\n", blockIdx.x, threadIdx.x, bar, parity);
            asm volatile("trap;");
        }
    }
}
#elif defined(TMA_SPIN_RECORD)
// Lab builds: the including file defines tma_spin_record(bar, parity) (inline, no calls, so the
// wgmma pipeline is compiled as in the library); it runs once when a wait has spun
// TMA_SPIN_RECORD times, and the wait goes on.
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    long long n = 0;
    while (!mbar_try_wait(bar, parity)) {
        if (++n == TMA_SPIN_RECORD) tma_spin_record(bar, parity);
    }
}
#else
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}
#endif

// mbar_wait with the spin loop inside one asm statement (as CUTLASS's): the compiler sees
// straight-line code, so no divergent branch sits next to wgmma instructions (the attention
// kernels' waits; a loop around try_wait put one there, kernels/TUNING.md). Lab builds with
// TMA_SPIN_* take mbar_wait's checked loop instead.
__device__ __forceinline__ void mbar_wait_spin(unsigned bar, unsigned parity) {
#if defined(TMA_SPIN_LIMIT) || defined(TMA_SPIN_RECORD)
    mbar_wait(bar, parity);
#else
    asm volatile(
        "{ .reg .pred p;\n"
        "MBAR_SPIN:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
        "@!p bra MBAR_SPIN;\n"
        "}" ::"r"(bar),
        "r"(parity)
        : "memory");
#endif
}

// One box of a 2-D tensor map into shared memory at `dst`; completion is counted in bytes on `bar`.
__device__ __forceinline__ void tma_load_2d(unsigned dst, const TensorMap* map, int c0, int c1, unsigned bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
            dst),
        "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

// ---- clusters (thread block clusters, sm_90) ------------------------------------------------------

// This CTA's rank in its cluster.
__device__ __forceinline__ unsigned cluster_ctarank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// Every thread of every CTA of the cluster: barriers initialised before any peer touches them, and
// no CTA leaving while a peer may still write its shared memory or arrive on its barriers.
__device__ __forceinline__ void cluster_sync_all() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

// Arrives on the barrier at shared offset `bar` in CTA `cta` of the cluster (this one included),
// with the default semantics. A `.release.cluster` arrive would put a MEMBAR.ALL.GPU before each
// (kernels/TUNING.md, session 48: half the speed); releasing a stage whose reads were wgmma's,
// complete at wgmma.wait_group, needs no fence.
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned cta) {
    asm volatile(
        "{ .reg .b32 ra; mapa.shared::cluster.u32 ra, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [ra]; }" ::"r"(bar),
        "r"(cta)
        : "memory");
}

// tma_load_2d into the same shared offset `dst` of every CTA in `mask` (bit i: rank i), each
// CTA's barrier at offset `bar` counting the bytes it received.
__device__ __forceinline__ void tma_load_2d_multicast(unsigned dst, const TensorMap* map, int c0, int c1, unsigned bar,
                                                      unsigned short mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
        "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
        : "memory");
}
