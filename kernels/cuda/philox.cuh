// philox.cuh — Philox4x32-10, the counter-based generator of random.cu and dropout.cu (see
// random.cu for the algorithm, the key/counter layout and the known answer).
#pragma once
#include "dtype.cuh"

// The 4 words of Philox block j (counter (j lo, j hi, 0, 0)) under key seed.
__device__ __forceinline__ uint4 philox4x32_10(u64 j, u64 seed) {
    unsigned int c0 = (unsigned int)j, c1 = (unsigned int)(j >> 32), c2 = 0, c3 = 0;
    unsigned int k0 = (unsigned int)seed, k1 = (unsigned int)(seed >> 32);
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        const unsigned int lo0 = 0xD2511F53u * c0, hi0 = __umulhi(0xD2511F53u, c0);
        const unsigned int lo1 = 0xCD9E8D57u * c2, hi1 = __umulhi(0xCD9E8D57u, c2);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    return make_uint4(c0, c1, c2, c3);
}
