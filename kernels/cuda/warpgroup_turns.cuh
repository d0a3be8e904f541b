// warpgroup_turns.cuh — two consumer warpgroups taking turns issuing their tensor-core products
// (FlashAttention-3's ping-pong): consumer c (0 or 1) waits for its turn on named barrier 8 + c
// (its 128 threads and the other consumer's 128 arrivals) and passes the turn by arriving on the
// other's. The attention kernels' protocol: consumer 1 passes once before its first wait (consumer
// 0 goes first), each consumer then waits and passes equally often, and consumer 0 waits once more
// before the CTA exits, taking that first pass, so no barrier phase is left open. Barriers 8 and 9
// must be free in the kernel (ptxas then reports 16 barriers used: the ids are registers).
#pragma once

__device__ __forceinline__ void wg_turn_wait(int c) { asm volatile("bar.sync %0, 256;" ::"r"(8 + c) : "memory"); }
__device__ __forceinline__ void wg_turn_pass(int c) { asm volatile("bar.arrive %0, 256;" ::"r"(9 - c) : "memory"); }
