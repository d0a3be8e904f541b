// layer_norm.cu — LayerNorm over the last dimension of a row-major [rows, C] array, forward and
// backward, in f32, f64, f16 and bf16 (f16/bf16 computed in f32; statistics in f32, f64 for f64).
//
// Exact semantics, per row x[0..C) (S = float for f32/f16/bf16, double for f64; sums in the
// compute type, lane-strided partial sums then a butterfly, so a fixed order):
//   mean = (sum x) / C;  var = (sum (x - mean)^2) / C (biased, as torch);  rstd = 1 / sqrt(var + eps)
//   y = ((x - mean) * rstd) * w[c] + b[c]       (w, b: [C], the input's dtype)
//   saved: mean[r], rstd[r] as S.
// Backward, given dy, x, w and the saved mean, rstd (xhat = (x - mean) * rstd, g = dy * w[c]):
//   dx = rstd * (g - (sum g) / C - xhat * (sum g * xhat) / C)
//   dw[c] = sum_r dy * xhat,  db[c] = sum_r dy — reduced deterministically in two steps:
//   layer_norm_bwd_params (or layer_norm_bwd_fused, which computes dx in the same pass and sums
//   in the same order) writes partial[p][c] for row chunk p (chunk = ceil(rows / P) rows),
//   layer_norm_bwd_params_reduce sums the P partials in 16 phases (p mod 16), each in increasing
//   p, then the phases in increasing order. Bit-identical run to run
//   for a given (rows, C, P) and the same buffers (the 16-byte path and the scalar path, chosen
//   from the buffers' alignment, sum in different orders); P is chosen from rows alone (see the
//   Rust op).
//
// Launch:
//   layer_norm_fwd_<dt>, layer_norm_bwd_dx_<dt>: block 256 EXACTLY (8 warps, one row each), any
//     grid (rows r = 8 * blockIdx.x + warp, + 8 * gridDim.x). A row of up to 32 * ITEMS elements
//     (ITEMS: fwd and bwd 32 for float compute; double 16 fwd, 8 bwd) stays in registers (x read
//     once from memory; 16-byte packets when the row starts are 16-byte aligned and C is a
//     multiple of the packet); longer rows are re-read from memory for each pass (L1/L2).
//   layer_norm_fwd_block_<dt>, layer_norm_bwd_dx_block_<dt>: the same with a block of 256 EXACTLY per
//     row (row r = blockIdx.x, + gridDim.x): rows of up to 256 * 16 = 4096 elements (double:
//     2048) stay in registers; the op uses them above a warp's reach (1024 columns; double 512
//     forward, 256 backward).
//   layer_norm_fwd_add_<dt>, layer_norm_fwd_add_block_<dt>: the forward of x + res (also written
//     out, as `sum`), launched as their plain twins.
//   layer_norm_bwd_dx*: with add_res != 0, dx = (the LayerNorm dx, in the compute type) + res,
//     rounded once: a pending gradient of x folded in (res is not read when add_res == 0).
//   layer_norm_bwd_params_<dt>: block (32, 8) EXACTLY, grid (ceil(C / (32 N)), P), P <= 65535,
//     N the 16-byte packet's elements where C % N == 0 and x, dy are 16-byte aligned, else 1
//     (any gridDim.x is correct).
//   layer_norm_bwd_params_reduce_<dt>: block (32, 16) EXACTLY, grid ceil(C / 32) (any grid).
//   layer_norm_bwd_fused_<dt>: block 256 EXACTLY, grid P (any grid: the chunks are a grid-stride
//     loop), dynamic shared memory 2 * 8 * S_ROW * sizeof(compute type), S_ROW = C rounded up
//     to 32 * N (N the 16-byte packet's elements) when C <= 32 * Items::BWD (1024; f64 256),
//     else C (the op uses it only for rows a warp holds).
#include "dtype.cuh"

#define FULL_MASK 0xffffffffu

template <typename T> __device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

__device__ __forceinline__ float inv_sqrt(float v) { return 1.0f / sqrtf(v); }
__device__ __forceinline__ double inv_sqrt(double v) { return 1.0 / sqrt(v); }

// Registers per lane for a cached row: float compute keeps more elements than double.
template <typename C> struct Items;
template <> struct Items<float> { enum { FWD = 32, BWD = 32, BLOCK_FWD = 16, BLOCK_BWD = 16 }; };
template <> struct Items<double> { enum { FWD = 16, BWD = 8, BLOCK_FWD = 8, BLOCK_BWD = 8 }; };

// Sums over the threads that share a row: a warp (T = 32: shuffles only) or a whole block of
// 256 (T = 256: shuffles, then the 8 warp sums in warp order through shared memory). Every
// thread gets the same value, summed in a fixed order. The block version must be called by
// every thread of the block (the row loop is block-uniform when T = 256).
template <int T> struct RowSum;
template <> struct RowSum<32> {
    template <typename F> __device__ __forceinline__ F operator()(F v) const { return warp_sum(v); }
};
template <> struct RowSum<256> {
    template <typename F> __device__ __forceinline__ F operator()(F v) const {
        __shared__ F part[8];
        v = warp_sum(v);
        __syncthreads();  // the previous call's readers are done with part
        if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
        __syncthreads();
        F t = part[0];
#pragma unroll
        for (int i = 1; i < 8; ++i) t += part[i];
        return t;
    }
};

// Column of cached element i (0 <= i < ITEMS) of thread `tid` of the T sharing a row: packets
// of V consecutive elements, thread-interleaved (vec), or plain thread-strided columns
// (scalar). Both cover [0, T * ITEMS) exactly once.
template <int T> __device__ __forceinline__ int col_of(int i, int tid, int V, bool vec) {
    return vec ? ((i / V) * T + tid) * V + (i % V) : i * T + tid;
}

// One row of LayerNorm forward by the T threads that share it (tid in [0, T)).
template <typename Tag, int T, bool ADD>
__device__ __forceinline__ void layer_norm_fwd_row(const typename DType<Tag>::Storage* xr,
                                                   const typename DType<Tag>::Storage* rr,
                                                   typename DType<Tag>::Storage* sr,
                                                   const typename DType<Tag>::Storage* w,
                                                   const typename DType<Tag>::Storage* b,
                                                   typename DType<Tag>::Storage* yr, int C,
                                                   typename DType<Tag>::Compute eps, bool vec,
                                                   int tid, typename DType<Tag>::Compute& mean,
                                                   typename DType<Tag>::Compute& rstd) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    typedef typename D::Compute F;
    enum { ITEMS = T == 32 ? (int)Items<F>::FWD : (int)Items<F>::BLOCK_FWD, V = Pack<S>::N };
    const RowSum<T> row_sum;
    if (C <= T * ITEMS) {
        F v[ITEMS];
        if (vec) {
#pragma unroll
            for (int p = 0; p < ITEMS / V; ++p) {
                const int c0 = (p * T + tid) * V;
                if (c0 < C) {
                    Pack<S> pk = load_pack(xr + c0);
                    if (ADD) {  // the sum rounded to S, as the add kernel rounds it
                        const Pack<S> rk = load_pack(rr + c0);
#pragma unroll
                        for (int j = 0; j < V; ++j)
                            pk.v[j] = D::store(D::load(pk.v[j]) + D::load(rk.v[j]));
                        store_pack(sr + c0, pk);
                    }
#pragma unroll
                    for (int j = 0; j < V; ++j) v[p * V + j] = D::load(pk.v[j]);
                } else {
#pragma unroll
                    for (int j = 0; j < V; ++j) v[p * V + j] = (F)0;
                }
            }
        } else {
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) {
                const int c = i * T + tid;
                if (c < C) {
                    S e = xr[c];
                    if (ADD) {
                        e = D::store(D::load(e) + D::load(rr[c]));
                        sr[c] = e;
                    }
                    v[i] = D::load(e);
                } else {
                    v[i] = (F)0;
                }
            }
        }
        F s = (F)0;
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) s += v[i];  // out-of-row elements are 0
        mean = row_sum(s) / (F)C;
        F q = (F)0;
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const F d = v[i] - mean;
            if (col_of<T>(i, tid, V, vec) < C) q += d * d;
        }
        rstd = inv_sqrt(row_sum(q) / (F)C + eps);
        if (vec) {
#pragma unroll
            for (int p = 0; p < ITEMS / V; ++p) {
                const int c0 = (p * T + tid) * V;
                if (c0 < C) {
                    const Pack<S> wk = load_pack(w + c0), bk = load_pack(b + c0);
                    Pack<S> o;
#pragma unroll
                    for (int j = 0; j < V; ++j)
                        o.v[j] = D::store(((v[p * V + j] - mean) * rstd) * D::load(wk.v[j]) +
                                          D::load(bk.v[j]));
                    store_pack(yr + c0, o);
                }
            }
        } else {
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) {
                const int c = i * T + tid;
                if (c < C) yr[c] = D::store(((v[i] - mean) * rstd) * D::load(w[c]) + D::load(b[c]));
            }
        }
    } else {
        F s = (F)0;
        if (ADD) {
            // Each thread re-reads only the columns it wrote: the sum row is the input from here.
            for (int c = tid; c < C; c += T) {
                const S e = D::store(D::load(xr[c]) + D::load(rr[c]));
                sr[c] = e;
                s += D::load(e);
            }
            xr = sr;
        } else {
            for (int c = tid; c < C; c += T) s += D::load(xr[c]);
        }
        mean = row_sum(s) / (F)C;
        F q = (F)0;
        for (int c = tid; c < C; c += T) {
            const F d = D::load(xr[c]) - mean;
            q += d * d;
        }
        rstd = inv_sqrt(row_sum(q) / (F)C + eps);
        for (int c = tid; c < C; c += T)
            yr[c] = D::store(((D::load(xr[c]) - mean) * rstd) * D::load(w[c]) + D::load(b[c]));
    }
}

// Rows per block: 8 (a warp each) for T = 32, 1 for T = 256.
template <typename Tag, int T, bool ADD>
__device__ __forceinline__ void layer_norm_fwd(const typename DType<Tag>::Storage* x,
                                               const typename DType<Tag>::Storage* res,
                                               typename DType<Tag>::Storage* sum,
                                               const typename DType<Tag>::Storage* w,
                                               const typename DType<Tag>::Storage* b,
                                               typename DType<Tag>::Storage* y,
                                               typename DType<Tag>::Compute* mean_out,
                                               typename DType<Tag>::Compute* rstd_out, int rows,
                                               int C, typename DType<Tag>::Compute eps) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    typedef typename D::Compute F;
    enum { PER_BLOCK = 256 / T };
    const int tid = threadIdx.x % T;
    // Every row start is 16-byte aligned when the base is and C is a multiple of the packet.
    const bool vec = (C % Pack<S>::N == 0) && aligned16(x, y) && aligned16(w, b) &&
                     (!ADD || aligned16(res, sum));
    for (int r = blockIdx.x * PER_BLOCK + threadIdx.x / T; r < rows; r += gridDim.x * PER_BLOCK) {
        F mean, rstd;
        const u64 base = (u64)r * (u64)C;
        layer_norm_fwd_row<Tag, T, ADD>(x + base, ADD ? res + base : nullptr,
                                        ADD ? sum + base : nullptr, w, b, y + base, C, eps, vec,
                                        tid, mean, rstd);
        if (tid == 0) {
            mean_out[r] = mean;
            rstd_out[r] = rstd;
        }
    }
}

// One row of the dx backward by the T threads that share it. With ACC (T = 32 only), the row's
// parameter-gradient terms are also added to this warp's accumulators in shared memory:
// acc_w[s] += dy * xhat, acc_b[s] += dy, where s = acc_slot(i, tid) for cached element i (a
// conflict-free, lane-interleaved layout; see acc_slot_of_col) and s = c on the long-row path.
template <typename Tag, int T, bool ACC = false>
__device__ __forceinline__ void layer_norm_bwd_dx_row(const typename DType<Tag>::Storage* xr,
                                                      const typename DType<Tag>::Storage* w,
                                                      const typename DType<Tag>::Storage* dyr,
                                                      const typename DType<Tag>::Storage* resr,
                                                      bool add_res,
                                                      typename DType<Tag>::Storage* dxr, int C,
                                                      typename DType<Tag>::Compute mean,
                                                      typename DType<Tag>::Compute rstd, bool vec,
                                                      int tid,
                                                      typename DType<Tag>::Compute* acc_w = nullptr,
                                                      typename DType<Tag>::Compute* acc_b = nullptr) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    typedef typename D::Compute F;
    enum { ITEMS = T == 32 ? (int)Items<F>::BWD : (int)Items<F>::BLOCK_BWD, V = Pack<S>::N };
    const RowSum<T> row_sum;
    F sg = (F)0, sgx = (F)0;
    if (C <= T * ITEMS) {
        F xh[ITEMS], g[ITEMS];  // xhat and dy * w; 0 outside the row
        if (vec) {
#pragma unroll
            for (int p = 0; p < ITEMS / V; ++p) {
                const int c0 = (p * T + tid) * V;
                if (c0 < C) {
                    const Pack<S> xk = load_pack(xr + c0), dk = load_pack(dyr + c0),
                                  wk = load_pack(w + c0);
#pragma unroll
                    for (int j = 0; j < V; ++j) {
                        xh[p * V + j] = (D::load(xk.v[j]) - mean) * rstd;
                        g[p * V + j] = D::load(dk.v[j]) * D::load(wk.v[j]);
                        if (ACC) {
                            const F d = D::load(dk.v[j]);
                            acc_w[(p * V + j) * 32 + tid] += d * xh[p * V + j];
                            acc_b[(p * V + j) * 32 + tid] += d;
                        }
                    }
                } else {
#pragma unroll
                    for (int j = 0; j < V; ++j) xh[p * V + j] = g[p * V + j] = (F)0;
                }
            }
        } else {
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) {
                const int c = i * T + tid;
                xh[i] = c < C ? (D::load(xr[c]) - mean) * rstd : (F)0;
                g[i] = c < C ? D::load(dyr[c]) * D::load(w[c]) : (F)0;
                if (ACC && c < C) {
                    const F d = D::load(dyr[c]);
                    acc_w[i * 32 + tid] += d * xh[i];
                    acc_b[i * 32 + tid] += d;
                }
            }
        }
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            sg += g[i];
            sgx += g[i] * xh[i];
        }
        const F mg = row_sum(sg) / (F)C, mgx = row_sum(sgx) / (F)C;
        if (vec) {
#pragma unroll
            for (int p = 0; p < ITEMS / V; ++p) {
                const int c0 = (p * T + tid) * V;
                if (c0 < C) {
                    Pack<S> o;
                    if (add_res) {
                        const Pack<S> rk = load_pack(resr + c0);
#pragma unroll
                        for (int j = 0; j < V; ++j)
                            o.v[j] = D::store(rstd * (g[p * V + j] - mg - xh[p * V + j] * mgx) +
                                              D::load(rk.v[j]));
                    } else {
#pragma unroll
                        for (int j = 0; j < V; ++j)
                            o.v[j] = D::store(rstd * (g[p * V + j] - mg - xh[p * V + j] * mgx));
                    }
                    store_pack(dxr + c0, o);
                }
            }
        } else {
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) {
                const int c = i * T + tid;
                if (c < C) {
                    F o = rstd * (g[i] - mg - xh[i] * mgx);
                    if (add_res) o += D::load(resr[c]);
                    dxr[c] = D::store(o);
                }
            }
        }
    } else {
        for (int c = tid; c < C; c += T) {
            const F xh = (D::load(xr[c]) - mean) * rstd;
            const F g = D::load(dyr[c]) * D::load(w[c]);
            sg += g;
            sgx += g * xh;
            if (ACC) {
                const F d = D::load(dyr[c]);
                acc_w[c] += d * xh;
                acc_b[c] += d;
            }
        }
        const F mg = row_sum(sg) / (F)C, mgx = row_sum(sgx) / (F)C;
        for (int c = tid; c < C; c += T) {
            const F xh = (D::load(xr[c]) - mean) * rstd;
            const F g = D::load(dyr[c]) * D::load(w[c]);
            F o = rstd * (g - mg - xh * mgx);
            if (add_res) o += D::load(resr[c]);
            dxr[c] = D::store(o);
        }
    }
}

template <typename Tag, int T>
__device__ __forceinline__ void layer_norm_bwd_dx(const typename DType<Tag>::Storage* x,
                                                  const typename DType<Tag>::Storage* w,
                                                  const typename DType<Tag>::Compute* mean_in,
                                                  const typename DType<Tag>::Compute* rstd_in,
                                                  const typename DType<Tag>::Storage* dy,
                                                  const typename DType<Tag>::Storage* res,
                                                  int add_res,
                                                  typename DType<Tag>::Storage* dx, int rows,
                                                  int C) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    enum { PER_BLOCK = 256 / T };
    const int tid = threadIdx.x % T;
    const bool add = add_res != 0;
    const bool vec = (C % Pack<S>::N == 0) && aligned16(x, dy, dx) && aligned16(w) &&
                     (!add || aligned16(res));
    for (int r = blockIdx.x * PER_BLOCK + threadIdx.x / T; r < rows; r += gridDim.x * PER_BLOCK) {
        const u64 base = (u64)r * (u64)C;
        layer_norm_bwd_dx_row<Tag, T>(x + base, w, dy + base, add ? res + base : nullptr, add,
                                      dx + base, C, mean_in[r], rstd_in[r], vec, tid);
    }
}

// Where column c's accumulator sits in a warp's shared-memory row (see layer_norm_bwd_dx_row):
// on the cached path, element i of lane tid is slot i * 32 + tid (consecutive lanes, consecutive
// banks); that element's column is col_of<32>(i, tid, V, vec), so invert it. Long rows: slot c.
__device__ __forceinline__ int acc_slot_of_col(int c, int V, bool vec, bool cached) {
    if (!cached) return c;
    if (!vec) return c;  // c = i * 32 + tid
    const int q = c / V, j = c % V;  // packet q = p * 32 + tid, element j of it
    return ((q / 32) * V + j) * 32 + q % 32;
}

// dx as layer_norm_bwd_dx (warp per row) and, in the same pass over x and dy, the parameter
// gradients' partial sums of layer_norm_bwd_params: block p (a grid-stride loop over the
// chunks) takes rows [p * chunk, min((p + 1) * chunk, rows)), warp k of its 8 the rows
// r0 + k, r0 + k + 8, ... in increasing order, each warp adding its rows' terms into its own
// row of shared memory; then partial[p][c] = warp 0's + warp 1's + ... + warp 7's. That is
// layer_norm_bwd_params' order exactly (thread phase ty = k sums the same rows in the same
// order, the phases are added in the same order, each term is dy * ((x - mean) * rstd)), so the
// partials — and dw, db after layer_norm_bwd_params_reduce — are the same bits as the two-kernel
// path, with x and dy read once. Dynamic shared memory: 2 * 8 * S_ROW compute-type elements,
// S_ROW = C rounded up to 32 * (16 / sizeof(storage)) where C <= 32 * Items::BWD (the cached
// path), else C.
template <typename Tag>
__device__ __forceinline__ void layer_norm_bwd_fused(const typename DType<Tag>::Storage* x,
                                                     const typename DType<Tag>::Storage* w,
                                                     const typename DType<Tag>::Compute* mean_in,
                                                     const typename DType<Tag>::Compute* rstd_in,
                                                     const typename DType<Tag>::Storage* dy,
                                                     const typename DType<Tag>::Storage* res,
                                                     int add_res, typename DType<Tag>::Storage* dx,
                                                     typename DType<Tag>::Compute* partial_w,
                                                     typename DType<Tag>::Compute* partial_b,
                                                     int rows, int C, int chunk) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    typedef typename D::Compute F;
    enum { V = Pack<S>::N, ITEMS = Items<F>::BWD };
    extern __shared__ __align__(16) unsigned char ln_fused_smem[];
    const bool cached = C <= 32 * ITEMS;
    const int srow = cached ? (C + 32 * V - 1) / (32 * V) * (32 * V) : C;
    F* acc_w = reinterpret_cast<F*>(ln_fused_smem);
    F* acc_b = acc_w + 8 * srow;
    const int tid = threadIdx.x % 32, warp = threadIdx.x / 32;
    const bool add = add_res != 0;
    const bool vec = (C % V == 0) && aligned16(x, dy, dx) && aligned16(w) && (!add || aligned16(res));
    for (int p = blockIdx.x; (u64)p * (u64)chunk < (u64)rows; p += gridDim.x) {
        const int r0 = p * chunk;
        const int r1 = (u64)r0 + (u64)chunk < (u64)rows ? r0 + chunk : rows;
        for (int i = threadIdx.x; i < 8 * srow; i += 256) acc_w[i] = acc_b[i] = (F)0;
        __syncthreads();
        for (int r = r0 + warp; r < r1; r += 8) {
            const u64 base = (u64)r * (u64)C;
            layer_norm_bwd_dx_row<Tag, 32, true>(x + base, w, dy + base, add ? res + base : nullptr,
                                                 add, dx + base, C, mean_in[r], rstd_in[r], vec,
                                                 tid, acc_w + warp * srow, acc_b + warp * srow);
        }
        __syncthreads();
        for (int c = threadIdx.x; c < C; c += 256) {
            const int sl = acc_slot_of_col(c, V, vec, cached);
            F tw = acc_w[sl], tb = acc_b[sl];
#pragma unroll
            for (int k = 1; k < 8; ++k) {
                tw += acc_w[k * srow + sl];
                tb += acc_b[k * srow + sl];
            }
            partial_w[(u64)p * (u64)C + c] = tw;
            partial_b[(u64)p * (u64)C + c] = tb;
        }
        __syncthreads();
    }
}

// partial_w[p][c] = sum over rows of chunk p of dy * xhat, partial_b[p][c] = sum of dy.
// Block (32, 8): threadIdx.y = row phase (rows r0 + ty, r0 + ty + 8, ... summed in that order by
// one thread), the 8 phase sums then added in increasing phase (fixed order).
//   Packet path (C a multiple of the 16-byte packet's N elements, x and dy 16-byte aligned):
//     a block tile is 32 N columns, thread tx owning columns ct + N tx .. + N - 1 (one packet of x
//     and one of dy per row, 4 rows' packets loaded before any is used); the phase sums go
//     through shared memory in column order and thread t (of 256) adds column ct + t's.
//   Scalar path otherwise: a tile is 32 columns, thread tx owning column ct + tx.
// The host sizes gridDim.x for the path the buffers allow (any gridDim.x is correct: the column
// tiles are a grid-stride loop).
template <typename Tag>
__device__ __forceinline__ void layer_norm_bwd_params(const typename DType<Tag>::Storage* x,
                                                      const typename DType<Tag>::Compute* mean_in,
                                                      const typename DType<Tag>::Compute* rstd_in,
                                                      const typename DType<Tag>::Storage* dy,
                                                      typename DType<Tag>::Compute* partial_w,
                                                      typename DType<Tag>::Compute* partial_b,
                                                      int rows, int C, int chunk) {
    typedef DType<Tag> D;
    typedef typename D::Storage S;
    typedef typename D::Compute F;
    enum { N = Pack<S>::N, TILE = 32 * N, UNROLL = 4 };
    __shared__ F sw[8][TILE + 1], sb[8][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y, t = ty * 32 + tx;
    const bool vec = C % N == 0 && aligned16(x, dy);
    for (int p = blockIdx.y; (u64)p * (u64)chunk < (u64)rows; p += gridDim.y) {
        const int r0 = p * chunk;
        const int r1 = (u64)r0 + (u64)chunk < (u64)rows ? r0 + chunk : rows;
        if (vec) {
            for (int ct = blockIdx.x * TILE; ct < C; ct += gridDim.x * TILE) {
                const int c0 = ct + N * tx;  // this thread's first column
                F aw[N], ab[N];
#pragma unroll
                for (int j = 0; j < N; ++j) aw[j] = ab[j] = (F)0;
                if (c0 < C) {
                    int r = r0 + ty;
                    for (; r + 8 * (UNROLL - 1) < r1; r += 8 * UNROLL) {
                        Pack<S> px[UNROLL], pd[UNROLL];
#pragma unroll
                        for (int u = 0; u < UNROLL; ++u) {
                            const u64 i = (u64)(r + 8 * u) * (u64)C + c0;
                            px[u] = load_pack(x + i);
                            pd[u] = load_pack(dy + i);
                        }
#pragma unroll
                        for (int u = 0; u < UNROLL; ++u) {
                            const F mu = mean_in[r + 8 * u], rs = rstd_in[r + 8 * u];
#pragma unroll
                            for (int j = 0; j < N; ++j) {
                                const F d = D::load(pd[u].v[j]);
                                aw[j] += d * ((D::load(px[u].v[j]) - mu) * rs);
                                ab[j] += d;
                            }
                        }
                    }
                    for (; r < r1; r += 8) {
                        const u64 i = (u64)r * (u64)C + c0;
                        const Pack<S> px = load_pack(x + i), pd = load_pack(dy + i);
                        const F mu = mean_in[r], rs = rstd_in[r];
#pragma unroll
                        for (int j = 0; j < N; ++j) {
                            const F d = D::load(pd.v[j]);
                            aw[j] += d * ((D::load(px.v[j]) - mu) * rs);
                            ab[j] += d;
                        }
                    }
                }
#pragma unroll
                for (int j = 0; j < N; ++j) {
                    sw[ty][N * tx + j] = aw[j];
                    sb[ty][N * tx + j] = ab[j];
                }
                __syncthreads();
                for (int q = t; q < TILE; q += 256) {
                    if (ct + q < C) {
                        F tw = sw[0][q], tb = sb[0][q];
#pragma unroll
                        for (int k = 1; k < 8; ++k) {
                            tw += sw[k][q];
                            tb += sb[k][q];
                        }
                        partial_w[(u64)p * (u64)C + ct + q] = tw;
                        partial_b[(u64)p * (u64)C + ct + q] = tb;
                    }
                }
                __syncthreads();
            }
            continue;
        }
        for (int ct = blockIdx.x * 32; ct < C; ct += gridDim.x * 32) {
            const int c = ct + tx;
            F aw = (F)0, ab = (F)0;
            if (c < C) {
                for (int r = r0 + ty; r < r1; r += 8) {
                    const u64 i = (u64)r * (u64)C + c;
                    const F d = D::load(dy[i]);
                    aw += d * ((D::load(x[i]) - mean_in[r]) * rstd_in[r]);
                    ab += d;
                }
            }
            sw[ty][tx] = aw;
            sb[ty][tx] = ab;
            __syncthreads();
            if (ty == 0 && c < C) {
                F tw = sw[0][tx], tb = sb[0][tx];
#pragma unroll
                for (int k = 1; k < 8; ++k) {
                    tw += sw[k][tx];
                    tb += sb[k][tx];
                }
                partial_w[(u64)p * (u64)C + c] = tw;
                partial_b[(u64)p * (u64)C + c] = tb;
            }
            __syncthreads();
        }
    }
}

// dw[c] = sum_p partial_w[p][c], db[c] = sum_p partial_b[p][c]; rounded once. Block (32, 16):
// thread (tx, ty) sums p = ty, ty + 16, ... in increasing p for column ct + tx, then the 16 phase
// sums are added in increasing phase (a fixed order for a given P: deterministic). With one
// thread per column walking all P partials (P up to 256, each a dependent load) the reduction of a
// [16384, 768] LayerNorm took ~40 µs on an H200; 16 phases keep 16 loads in flight per column.
// Any grid (column tiles of 32 are a grid-stride loop).
template <typename Tag>
__device__ __forceinline__ void layer_norm_bwd_params_reduce(
    const typename DType<Tag>::Compute* partial_w, const typename DType<Tag>::Compute* partial_b,
    typename DType<Tag>::Storage* dw, typename DType<Tag>::Storage* db, int parts, int C) {
    typedef DType<Tag> D;
    typedef typename D::Compute F;
    __shared__ F sw[16][33], sb[16][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int ct = blockIdx.x * 32; ct < C; ct += gridDim.x * 32) {
        const int c = ct + tx;
        F tw = (F)0, tb = (F)0;
        if (c < C) {
            for (int p = ty; p < parts; p += 16) {
                tw += partial_w[(u64)p * (u64)C + c];
                tb += partial_b[(u64)p * (u64)C + c];
            }
        }
        sw[ty][tx] = tw;
        sb[ty][tx] = tb;
        __syncthreads();
        if (ty == 0 && c < C) {
            F w = sw[0][tx], b = sb[0][tx];
#pragma unroll
            for (int k = 1; k < 16; ++k) {
                w += sw[k][tx];
                b += sb[k][tx];
            }
            dw[c] = D::store(w);
            db[c] = D::store(b);
        }
        __syncthreads();
    }
}

extern "C" __global__ void layer_norm_fwd_f32(const float* x, const float* w, const float* b, float* y,
                                          float* mean, float* rstd, int rows, int C, float eps) {
    layer_norm_fwd<float, 32, false>(x, nullptr, nullptr, w, b, y, mean, rstd, rows, C, eps);
}
extern "C" __global__ void layer_norm_bwd_dx_f32(const float* x, const float* w, const float* mean,
                                             const float* rstd, const float* dy, const float* res, int add_res, float* dx, int rows, int C) {
    layer_norm_bwd_dx<float, 32>(x, w, mean, rstd, dy, res, add_res, dx, rows, C);
}
extern "C" __global__ void layer_norm_bwd_params_f32(const float* x, const float* mean, const float* rstd,
                                                 const float* dy, float* partial_w, float* partial_b,
                                                 int rows, int C, int chunk) {
    layer_norm_bwd_params<float>(x, mean, rstd, dy, partial_w, partial_b, rows, C, chunk);
}
extern "C" __global__ void layer_norm_bwd_params_reduce_f32(const float* partial_w, const float* partial_b,
                                                        float* dw, float* db, int parts, int C) {
    layer_norm_bwd_params_reduce<float>(partial_w, partial_b, dw, db, parts, C);
}

extern "C" __global__ void layer_norm_fwd_f64(const double* x, const double* w, const double* b, double* y,
                                          double* mean, double* rstd, int rows, int C, double eps) {
    layer_norm_fwd<double, 32, false>(x, nullptr, nullptr, w, b, y, mean, rstd, rows, C, eps);
}
extern "C" __global__ void layer_norm_bwd_dx_f64(const double* x, const double* w, const double* mean,
                                             const double* rstd, const double* dy, const double* res, int add_res, double* dx, int rows, int C) {
    layer_norm_bwd_dx<double, 32>(x, w, mean, rstd, dy, res, add_res, dx, rows, C);
}
extern "C" __global__ void layer_norm_bwd_params_f64(const double* x, const double* mean, const double* rstd,
                                                 const double* dy, double* partial_w, double* partial_b,
                                                 int rows, int C, int chunk) {
    layer_norm_bwd_params<double>(x, mean, rstd, dy, partial_w, partial_b, rows, C, chunk);
}
extern "C" __global__ void layer_norm_bwd_params_reduce_f64(const double* partial_w, const double* partial_b,
                                                        double* dw, double* db, int parts, int C) {
    layer_norm_bwd_params_reduce<double>(partial_w, partial_b, dw, db, parts, C);
}

extern "C" __global__ void layer_norm_fwd_f16(const f16_t* x, const f16_t* w, const f16_t* b, f16_t* y,
                                          float* mean, float* rstd, int rows, int C, float eps) {
    layer_norm_fwd<F16, 32, false>(x, nullptr, nullptr, w, b, y, mean, rstd, rows, C, eps);
}
extern "C" __global__ void layer_norm_bwd_dx_f16(const f16_t* x, const f16_t* w, const float* mean,
                                             const float* rstd, const f16_t* dy, const f16_t* res, int add_res, f16_t* dx, int rows, int C) {
    layer_norm_bwd_dx<F16, 32>(x, w, mean, rstd, dy, res, add_res, dx, rows, C);
}
extern "C" __global__ void layer_norm_bwd_params_f16(const f16_t* x, const float* mean, const float* rstd,
                                                 const f16_t* dy, float* partial_w, float* partial_b,
                                                 int rows, int C, int chunk) {
    layer_norm_bwd_params<F16>(x, mean, rstd, dy, partial_w, partial_b, rows, C, chunk);
}
extern "C" __global__ void layer_norm_bwd_params_reduce_f16(const float* partial_w, const float* partial_b,
                                                        f16_t* dw, f16_t* db, int parts, int C) {
    layer_norm_bwd_params_reduce<F16>(partial_w, partial_b, dw, db, parts, C);
}

extern "C" __global__ void layer_norm_fwd_bf16(const bf16_t* x, const bf16_t* w, const bf16_t* b, bf16_t* y,
                                          float* mean, float* rstd, int rows, int C, float eps) {
    layer_norm_fwd<BF16, 32, false>(x, nullptr, nullptr, w, b, y, mean, rstd, rows, C, eps);
}
extern "C" __global__ void layer_norm_bwd_dx_bf16(const bf16_t* x, const bf16_t* w, const float* mean,
                                             const float* rstd, const bf16_t* dy, const bf16_t* res, int add_res, bf16_t* dx, int rows, int C) {
    layer_norm_bwd_dx<BF16, 32>(x, w, mean, rstd, dy, res, add_res, dx, rows, C);
}
extern "C" __global__ void layer_norm_bwd_params_bf16(const bf16_t* x, const float* mean, const float* rstd,
                                                 const bf16_t* dy, float* partial_w, float* partial_b,
                                                 int rows, int C, int chunk) {
    layer_norm_bwd_params<BF16>(x, mean, rstd, dy, partial_w, partial_b, rows, C, chunk);
}
extern "C" __global__ void layer_norm_bwd_params_reduce_bf16(const float* partial_w, const float* partial_b,
                                                        bf16_t* dw, bf16_t* db, int parts, int C) {
    layer_norm_bwd_params_reduce<BF16>(partial_w, partial_b, dw, db, parts, C);
}

// dx and the parameter partials in one pass (see layer_norm_bwd_fused).
extern "C" __global__ void
layer_norm_bwd_fused_f32(const float* x, const float* w, const float* mean, const float* rstd, const float* dy,
                          const float* res, int add_res, float* dx, float* partial_w, float* partial_b, int rows,
                          int C, int chunk) {
    layer_norm_bwd_fused<float>(x, w, mean, rstd, dy, res, add_res, dx, partial_w, partial_b, rows, C, chunk);
}
extern "C" __global__ void
layer_norm_bwd_fused_f64(const double* x, const double* w, const double* mean, const double* rstd, const double* dy,
                          const double* res, int add_res, double* dx, double* partial_w, double* partial_b, int rows,
                          int C, int chunk) {
    layer_norm_bwd_fused<double>(x, w, mean, rstd, dy, res, add_res, dx, partial_w, partial_b, rows, C, chunk);
}
extern "C" __global__ void
layer_norm_bwd_fused_f16(const f16_t* x, const f16_t* w, const float* mean, const float* rstd, const f16_t* dy,
                          const f16_t* res, int add_res, f16_t* dx, float* partial_w, float* partial_b, int rows,
                          int C, int chunk) {
    layer_norm_bwd_fused<F16>(x, w, mean, rstd, dy, res, add_res, dx, partial_w, partial_b, rows, C, chunk);
}
extern "C" __global__ void
layer_norm_bwd_fused_bf16(const bf16_t* x, const bf16_t* w, const float* mean, const float* rstd, const bf16_t* dy,
                          const bf16_t* res, int add_res, bf16_t* dx, float* partial_w, float* partial_b, int rows,
                          int C, int chunk) {
    layer_norm_bwd_fused<BF16>(x, w, mean, rstd, dy, res, add_res, dx, partial_w, partial_b, rows, C, chunk);
}

// Block-per-row twins (256 threads share a row) for rows longer than a warp can hold.
extern "C" __global__ void
layer_norm_fwd_block_f32(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                          int rows, int C, float eps) {
    layer_norm_fwd<float, 256, false>(x, nullptr, nullptr, w, b, y, mean, rstd, rows, C, eps);
}
extern "C" __global__ void
layer_norm_bwd_dx_block_f32(const float* x, const float* w, const float* mean, const float* rstd,
                             const float* dy, const float* res, int add_res, float* dx, int rows, int C) {
    layer_norm_bwd_dx<float, 256>(x, w, mean, rstd, dy, res, add_res, dx, rows, C);
}

extern "C" __global__ void
layer_norm_fwd_block_f64(const double* x, const double* w, const double* b, double* y, double* mean, double* rstd,
                          int rows, int C, double eps) {
    layer_norm_fwd<double, 256, false>(x, nullptr, nullptr, w, b, y, mean, rstd, rows, C, eps);
}
extern "C" __global__ void
layer_norm_bwd_dx_block_f64(const double* x, const double* w, const double* mean, const double* rstd,
                             const double* dy, const double* res, int add_res, double* dx, int rows, int C) {
    layer_norm_bwd_dx<double, 256>(x, w, mean, rstd, dy, res, add_res, dx, rows, C);
}

extern "C" __global__ void
layer_norm_fwd_block_f16(const f16_t* x, const f16_t* w, const f16_t* b, f16_t* y, float* mean, float* rstd,
                          int rows, int C, float eps) {
    layer_norm_fwd<F16, 256, false>(x, nullptr, nullptr, w, b, y, mean, rstd, rows, C, eps);
}
extern "C" __global__ void
layer_norm_bwd_dx_block_f16(const f16_t* x, const f16_t* w, const float* mean, const float* rstd,
                             const f16_t* dy, const f16_t* res, int add_res, f16_t* dx, int rows, int C) {
    layer_norm_bwd_dx<F16, 256>(x, w, mean, rstd, dy, res, add_res, dx, rows, C);
}

extern "C" __global__ void
layer_norm_fwd_block_bf16(const bf16_t* x, const bf16_t* w, const bf16_t* b, bf16_t* y, float* mean, float* rstd,
                          int rows, int C, float eps) {
    layer_norm_fwd<BF16, 256, false>(x, nullptr, nullptr, w, b, y, mean, rstd, rows, C, eps);
}
extern "C" __global__ void
layer_norm_bwd_dx_block_bf16(const bf16_t* x, const bf16_t* w, const float* mean, const float* rstd,
                             const bf16_t* dy, const bf16_t* res, int add_res, bf16_t* dx, int rows, int C) {
    layer_norm_bwd_dx<BF16, 256>(x, w, mean, rstd, dy, res, add_res, dx, rows, C);
}

// LayerNorm of a residual sum: sum = x + res (rounded to the storage type, exactly as the add
// kernel rounds it), written out, and y = LayerNorm(sum) computed from the rounded sum — the
// same bits as `add` then `layer_norm_fwd`, in one pass over the row. Launch as the plain twins.
extern "C" __global__ void
layer_norm_fwd_add_f32(const float* x, const float* res, float* sum, const float* w, const float* b, float* y,
                          float* mean, float* rstd, int rows, int C, float eps) {
    layer_norm_fwd<float, 32, true>(x, res, sum, w, b, y, mean, rstd, rows, C, eps);
}
extern "C" __global__ void
layer_norm_fwd_add_f64(const double* x, const double* res, double* sum, const double* w, const double* b, double* y,
                          double* mean, double* rstd, int rows, int C, double eps) {
    layer_norm_fwd<double, 32, true>(x, res, sum, w, b, y, mean, rstd, rows, C, eps);
}
extern "C" __global__ void
layer_norm_fwd_add_f16(const f16_t* x, const f16_t* res, f16_t* sum, const f16_t* w, const f16_t* b, f16_t* y,
                          float* mean, float* rstd, int rows, int C, float eps) {
    layer_norm_fwd<F16, 32, true>(x, res, sum, w, b, y, mean, rstd, rows, C, eps);
}
extern "C" __global__ void
layer_norm_fwd_add_bf16(const bf16_t* x, const bf16_t* res, bf16_t* sum, const bf16_t* w, const bf16_t* b, bf16_t* y,
                          float* mean, float* rstd, int rows, int C, float eps) {
    layer_norm_fwd<BF16, 32, true>(x, res, sum, w, b, y, mean, rstd, rows, C, eps);
}
extern "C" __global__ void
layer_norm_fwd_add_block_f32(const float* x, const float* res, float* sum, const float* w, const float* b, float* y,
                          float* mean, float* rstd, int rows, int C, float eps) {
    layer_norm_fwd<float, 256, true>(x, res, sum, w, b, y, mean, rstd, rows, C, eps);
}
extern "C" __global__ void
layer_norm_fwd_add_block_f64(const double* x, const double* res, double* sum, const double* w, const double* b, double* y,
                          double* mean, double* rstd, int rows, int C, double eps) {
    layer_norm_fwd<double, 256, true>(x, res, sum, w, b, y, mean, rstd, rows, C, eps);
}
extern "C" __global__ void
layer_norm_fwd_add_block_f16(const f16_t* x, const f16_t* res, f16_t* sum, const f16_t* w, const f16_t* b, f16_t* y,
                          float* mean, float* rstd, int rows, int C, float eps) {
    layer_norm_fwd<F16, 256, true>(x, res, sum, w, b, y, mean, rstd, rows, C, eps);
}
extern "C" __global__ void
layer_norm_fwd_add_block_bf16(const bf16_t* x, const bf16_t* res, bf16_t* sum, const bf16_t* w, const bf16_t* b, bf16_t* y,
                          float* mean, float* rstd, int rows, int C, float eps) {
    layer_norm_fwd<BF16, 256, true>(x, res, sum, w, b, y, mean, rstd, rows, C, eps);
}
