// introspect.cu — see the thread hierarchy: which block, thread, warp, lane and SM each thread is.
//
// thread_hierarchy(out) writes one record of 8 unsigned ints per thread, at
//   out[8 * g .. 8 * g + 8), g = (blockIdx.y * gridDim.x + blockIdx.x) * (blockDim.x * blockDim.y)
//                              + threadIdx.y * blockDim.x + threadIdx.x      (global linear id)
// record fields, in order:
//   0 blockIdx.x   1 blockIdx.y   2 threadIdx.x   3 threadIdx.y
//   4 warp id within the block = (threadIdx.y * blockDim.x + threadIdx.x) / 32
//   5 lane = (threadIdx.y * blockDim.x + threadIdx.x) % 32
//   6 SM id (%smid: the streaming multiprocessor the block ran on; may differ run to run)
//   7 g (the global linear thread id itself)
// Launch: any 2-D grid and 2-D block (z dimensions must be 1); out must hold
// 8 * gridDim.x * gridDim.y * blockDim.x * blockDim.y unsigned ints.
#include "dtype.cuh"

__device__ __forceinline__ unsigned int sm_id() {
    unsigned int id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
}

extern "C" __global__ void thread_hierarchy(unsigned int* out) {
    const unsigned int t = threadIdx.y * blockDim.x + threadIdx.x;
    const u64 g = ((u64)blockIdx.y * gridDim.x + blockIdx.x) * (u64)(blockDim.x * blockDim.y) + t;
    unsigned int* rec = out + 8 * g;
    rec[0] = blockIdx.x;
    rec[1] = blockIdx.y;
    rec[2] = threadIdx.x;
    rec[3] = threadIdx.y;
    rec[4] = t / 32;
    rec[5] = t % 32;
    rec[6] = sm_id();
    rec[7] = (unsigned int)g;
}
