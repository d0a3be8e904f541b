// warpgroup_turns.cuh — consumer warpgroups taking turns issuing their tensor-core products
// (FlashAttention-3's ping-pong): consumer c (0 .. NC - 1) waits for its turn on named barrier
// 8 + c (its 128 threads and the previous consumer's 128 arrivals) and passes the turn by arriving
// on the next one's, 8 + (c + 1) % NC. The attention kernels' protocol: consumer NC - 1 passes once
// before its first wait (consumer 0 goes first), each consumer then waits and passes equally often,
// and consumer 0 waits once more before the CTA exits, taking that first pass, so no barrier phase
// is left open. A consumer cannot pass twice before the next one has waited: its own next turn
// needs every other consumer's turn first. Barriers 8 .. 8 + NC - 1 must be free in the kernel
// (ptxas then reports 16 barriers used: the ids are registers). NC = 2 unless a kernel says so.
#pragma once

template <int NC = 2>
__device__ __forceinline__ void wg_turn_wait(int c) {
    asm volatile("bar.sync %0, 256;" ::"r"(8 + c) : "memory");
}
template <int NC = 2>
__device__ __forceinline__ void wg_turn_pass(int c) {
    if constexpr (NC == 2)  // the same barrier as the general form; the shipped kernels' code unchanged
        asm volatile("bar.arrive %0, 256;" ::"r"(9 - c) : "memory");
    else
        asm volatile("bar.arrive %0, 256;" ::"r"(8 + (c + 1) % NC) : "memory");
}
