// embedding.cu — the embedding lookup (a row gather) and its deterministic backward (a
// scatter-add done as a stable counting sort of the tokens by id, then one ordered sum per id),
// in f32, f64, f16 and bf16 (f16/bf16 accumulated in f32 and rounded once). No float atomics:
// dweight is bit-identical on every run.
//
// Exact semantics (weight [V, C], idx [N] i32, dy and out [N, C]):
//   embedding_fwd:  out[n][c] = weight[idx[n]][c]; an id outside [0, V) gives a NaN row (the
//     device cannot report it without a host round trip; check ids on the host).
//   embedding_bwd:  dweight[v][c] = sum over tokens n with idx[n] == v, in increasing n, of
//     dy[n][c] (ids outside [0, V) are skipped); an unused id gets a zero row. Buckets of more
//     than LONG tokens are summed in 8 interleaved parts (token j of the bucket goes to part
//     j % 8), added in part order: still a fixed order.
//
// The backward pipeline (tokens in chunks of CHUNK = 256; K = ceil(N / 256)):
//   1. embedding_bwd_rank (block 256 EXACTLY, any grid over chunks): block k zeroes counts[k][0..V), then for each token
//      n of its chunk: rank[n] = number of earlier tokens of the chunk with the same id, and the
//      last token of each id in the chunk writes counts[k][id] = its rank + 1.
//   2. embedding_bwd_chunk_scan (block 256, any grid over ids): counts[k][v] becomes the number of
//      tokens of id v in chunks before k; totals[v] the bucket size.
//   3. embedding_bwd_offsets (block 1024 EXACTLY, grid 1): offsets[0..V] = exclusive scan of
//      totals (offsets[V] = number of valid tokens).
//   4. embedding_bwd_place (block 256, any grid): order[offsets[id] + counts[k][id] + rank[n]] = n
//      (a stable sort of the tokens by id; a position >= N, impossible for a workspace the
//      earlier steps wrote, is skipped rather than written out of bounds).
//   5. embedding_bwd_sum_<dt> (block 256 EXACTLY, grid (ceil(C / col_tile), G), G <= 65535, ids
//      blockIdx.y + G * i): block (x, id) writes dweight[id][c] for its column tile.
// embedding_fwd_<dt>: block 256 (one warp per row, 8 rows per block), any grid.
#include "dtype.cuh"

#define CHUNK 256
#define LONG 8

__device__ __forceinline__ float nan_of(float) { return __int_as_float(0x7fffffff); }
__device__ __forceinline__ double nan_of(double) { return __longlong_as_double(0x7ff8000000000000ULL); }

template <typename Tag>
__device__ __forceinline__ void embedding_fwd(const typename DType<Tag>::Storage* w,
                                              const int* idx, typename DType<Tag>::Storage* out,
                                              int N, int V, int C) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    typedef typename D::Compute F;
    const int NP = Pack<S>::N;
    const int lane = threadIdx.x % 32;
    const bool vec = (C % NP == 0) && aligned16(w, out);
    const S nan = D::store(nan_of((F)0));
    for (int n = blockIdx.x * 8 + threadIdx.x / 32; n < N; n += gridDim.x * 8) {
        const int id = idx[n];
        const bool ok = id >= 0 && id < V;
        const S* wr = w + (u64)(ok ? id : 0) * (u64)C;
        S* orow = out + (u64)n * (u64)C;
        if (vec) {
            for (int p = lane; p < C / NP; p += 32) {
                Pack<S> pk;
                if (ok) {
                    pk = load_pack(wr + (u64)p * NP);
                } else {
#pragma unroll
                    for (int j = 0; j < NP; ++j) pk.v[j] = nan;
                }
                store_pack(orow + (u64)p * NP, pk);
            }
        } else {
            for (int c = lane; c < C; c += 32) orow[c] = ok ? wr[c] : nan;
        }
    }
}

extern "C" __global__ void embedding_bwd_rank(const int* idx, int* rank, int* counts, int N, int V) {
    __shared__ int ids[CHUNK];
    for (int k = blockIdx.x; (u64)k * CHUNK < (u64)N; k += gridDim.x) {
        int* ck = counts + (u64)k * (u64)V;
        for (int v = threadIdx.x; v < V; v += blockDim.x) ck[v] = 0;
        const u64 n = (u64)k * CHUNK + threadIdx.x;
        int id = -1;
        if (threadIdx.x < CHUNK && n < (u64)N) {
            id = idx[n];
            if (id < 0 || id >= V) id = -1;
        }
        if (threadIdx.x < CHUNK) ids[threadIdx.x] = id;
        __syncthreads();  // also orders the zeroing of ck before the count writes below
        if (id >= 0) {
            int before = 0;
            bool later = false;
            for (int j = 0; j < CHUNK; ++j) {
                const int o = ids[j];
                before += (j < (int)threadIdx.x && o == id) ? 1 : 0;
                later = later || (j > (int)threadIdx.x && o == id);
            }
            rank[n] = before;
            if (!later) ck[id] = before + 1;
        } else if (threadIdx.x < CHUNK && n < (u64)N) {
            rank[n] = -1;
        }
        __syncthreads();  // ids is rewritten for the next chunk
    }
}

extern "C" __global__ void embedding_bwd_chunk_scan(int* counts, int* totals, int K, int V) {
    for (u64 v = global_tid(); v < (u64)V; v += grid_threads()) {
        int run = 0;
        for (int k = 0; k < K; ++k) {
            const u64 i = (u64)k * (u64)V + v;
            const int c = counts[i];
            counts[i] = run;
            run += c;
        }
        totals[v] = run;
    }
}

// Exclusive scan of totals[0..V) into offsets[0..V], one block of 1024 threads: thread t owns the
// contiguous segment [t * per, (t + 1) * per) and the segment sums are scanned in shared memory.
extern "C" __global__ void embedding_bwd_offsets(const int* totals, int* offsets, int V) {
    __shared__ int part[1024];
    const int t = threadIdx.x;
    const int per = (V + 1023) / 1024;
    const u64 lo = (u64)t * (u64)per;
    const u64 hi = lo + (u64)per < (u64)V ? lo + (u64)per : (u64)V;
    int sum = 0;
    for (u64 v = lo; v < hi; ++v) sum += totals[v];
    part[t] = sum;
    __syncthreads();
    // Hillis–Steele inclusive scan over the 1024 segment sums.
    for (int o = 1; o < 1024; o <<= 1) {
        const int add = t >= o ? part[t - o] : 0;
        __syncthreads();
        part[t] += add;
        __syncthreads();
    }
    int run = part[t] - sum;  // exclusive prefix of this segment
    for (u64 v = lo; v < hi; ++v) {
        offsets[v] = run;
        run += totals[v];
    }
    if (t == 1023) offsets[V] = part[1023];
}

extern "C" __global__ void embedding_bwd_place(const int* idx, const int* rank, const int* counts,
                                               const int* offsets, int* order, int N, int V) {
    for (u64 n = global_tid(); n < (u64)N; n += grid_threads()) {
        const int id = idx[n];
        if (id < 0 || id >= V) continue;
        const u64 k = n / CHUNK;
        const u64 pos = (u64)offsets[id] + (u64)counts[k * (u64)V + id] + (u64)rank[n];
        if (pos < (u64)N) order[pos] = (int)n;  // always true for a consistent workspace
    }
}

template <typename Tag>
__device__ __forceinline__ void embedding_bwd_sum(const int* order, const int* offsets,
                                                  const typename DType<Tag>::Storage* dy,
                                                  typename DType<Tag>::Storage* dw, int V, int C,
                                                  int col_tile) {
    typedef DType<Tag> D;
    typedef typename D::Compute F;
    __shared__ F part[8][33];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int c_lo = blockIdx.x * col_tile;
    const int c_hi = (u64)c_lo + (u64)col_tile < (u64)C ? c_lo + col_tile : C;
    for (int id = blockIdx.y; id < V; id += gridDim.y) {
        const int b0 = offsets[id], cnt = offsets[id + 1] - b0;
        if (cnt <= LONG) {
            // Short bucket: every thread a column, the tokens in order.
            for (int c = c_lo + tid; c < c_hi; c += 256) {
                F acc = (F)0;
                for (int j = 0; j < cnt; ++j) acc += D::load(dy[(u64)order[b0 + j] * (u64)C + c]);
                dw[(u64)id * (u64)C + c] = D::store(acc);
            }
        } else {
            // Long bucket (block-uniform branch): 32 columns at a time, warp w sums tokens j with
            // j % 8 == w, then warp 0 adds the 8 parts in order.
            for (int c0 = c_lo; c0 < c_hi; c0 += 32) {
                const int c = c0 + lane;
                F acc = (F)0;
                if (c < c_hi) {
#pragma unroll 4
                    for (int j = warp; j < cnt; j += 8)
                        acc += D::load(dy[(u64)order[b0 + j] * (u64)C + c]);
                }
                part[warp][lane] = acc;
                __syncthreads();
                if (warp == 0 && c < c_hi) {
                    F tot = part[0][lane];
#pragma unroll
                    for (int w = 1; w < 8; ++w) tot += part[w][lane];
                    dw[(u64)id * (u64)C + c] = D::store(tot);
                }
                __syncthreads();
            }
        }
    }
}

extern "C" __global__ void embedding_fwd_f32(const float* weight, const int* idx, float* out, int N, int V,
                                         int C) {
    embedding_fwd<float>(weight, idx, out, N, V, C);
}
extern "C" __global__ void __launch_bounds__(256)
embedding_bwd_sum_f32(const int* order, const int* offsets, const float* dy, float* dweight, int V, int C,
                       int col_tile) {
    embedding_bwd_sum<float>(order, offsets, dy, dweight, V, C, col_tile);
}
extern "C" __global__ void embedding_fwd_f64(const double* weight, const int* idx, double* out, int N, int V,
                                         int C) {
    embedding_fwd<double>(weight, idx, out, N, V, C);
}
extern "C" __global__ void __launch_bounds__(256)
embedding_bwd_sum_f64(const int* order, const int* offsets, const double* dy, double* dweight, int V, int C,
                       int col_tile) {
    embedding_bwd_sum<double>(order, offsets, dy, dweight, V, C, col_tile);
}
extern "C" __global__ void embedding_fwd_f16(const f16_t* weight, const int* idx, f16_t* out, int N, int V,
                                         int C) {
    embedding_fwd<F16>(weight, idx, out, N, V, C);
}
extern "C" __global__ void __launch_bounds__(256)
embedding_bwd_sum_f16(const int* order, const int* offsets, const f16_t* dy, f16_t* dweight, int V, int C,
                       int col_tile) {
    embedding_bwd_sum<F16>(order, offsets, dy, dweight, V, C, col_tile);
}
extern "C" __global__ void embedding_fwd_bf16(const bf16_t* weight, const int* idx, bf16_t* out, int N, int V,
                                         int C) {
    embedding_fwd<BF16>(weight, idx, out, N, V, C);
}
extern "C" __global__ void __launch_bounds__(256)
embedding_bwd_sum_bf16(const int* order, const int* offsets, const bf16_t* dy, bf16_t* dweight, int V, int C,
                       int col_tile) {
    embedding_bwd_sum<BF16>(order, offsets, dy, dweight, V, C, col_tile);
}
