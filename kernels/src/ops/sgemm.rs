//! The fast f32 GEMM with transposes, alpha, beta and leading dimensions.

use crate::launch::{blocks, grid, sms, to_i32, BLOCK};
use crate::{dispatch, Error, Kernels, Result};
use cuda_driver::{DeviceSlice, LaunchConfig, Stream};

/// Whether an operand is used as stored or transposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transpose {
    /// `op(X) = X` (BLAS `'N'`).
    NoTrans,
    /// `op(X) = Xᵀ` (BLAS `'T'`).
    Trans,
}

/// Elements a row-major `[rows, cols]` matrix with row stride `ld` spans (0 when empty).
fn span(rows: usize, cols: usize, ld: usize) -> Option<usize> {
    if rows == 0 || cols == 0 {
        Some(0)
    } else {
        (rows - 1).checked_mul(ld)?.checked_add(cols)
    }
}

/// Checks one operand of `op`: `ld >= cols` and the slice spans the stored matrix.
pub(crate) fn check_operand(
    op: &'static str,
    what: &'static str,
    len: usize,
    rows: usize,
    cols: usize,
    ld: usize,
) -> Result<()> {
    if ld < cols {
        return Err(Error::Invalid {
            op,
            problem: format!(
                "leading dimension of `{what}` is {ld}, but its stored rows have {cols} elements \
                 (the leading dimension must be >= {cols})"
            ),
        });
    }
    let need = span(rows, cols, ld).ok_or(Error::TooLarge {
        op,
        what,
        value: rows as u128 * ld as u128,
        max: usize::MAX as u128,
    })?;
    if len < need {
        return Err(Error::Shape {
            op,
            what,
            expected: format!(
                "a stored [{rows}, {cols}] matrix with row stride {ld} ({need} elements)"
            ),
            found: format!("{len} elements"),
        });
    }
    Ok(())
}

/// Bytes of split-K workspace traffic that cost as much time as one k of a full wave of
/// 128 × 128 tiles: a block does 32768 FLOP per k at ~165 GFLOP/s
/// (two blocks per SM on an H100) while the GPU moves ~3 TB/s, so one k ≈ 0.6 MB of traffic.
const BYTES_PER_K: f64 = 600_000.0;

/// The cost of one extra launch (the split-K reduce), in the same k units (~3 µs).
const LAUNCH_K: f64 = 15.0;

/// Products of at least this many multiply-adds (2^31, ~1290³) with `B` stored transposed run on a
/// transposed copy of `B` (one pass over it) instead.
pub const RELAYOUT_MIN_WORK: u128 = 1 << 31;

/// How `sgemm` runs an `m × n × k` product: the first `main_rows` rows of C (whole 128-row tile
/// rows making whole waves of tiles) as one launch without a split, and the other rows with
/// `rest_splits` k slices (split-K). `main_rows == 0` is a plain (maybe split) product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SgemmPlan {
    /// Rows of C computed without a split (a multiple of 128, or 0).
    pub main_rows: usize,
    /// k slices for the remaining rows (1: no split).
    pub rest_splits: usize,
}

impl SgemmPlan {
    /// The k slices row `i` of C is computed with.
    pub fn splits_for_row(&self, i: usize) -> usize {
        if i < self.main_rows {
            1
        } else {
            self.rest_splits
        }
    }
}

/// The best split for `rows × n × k` alone and its cost in k units: the `s` in 1..=16 (each
/// slice at least 4 k tiles of 16) that minimises `waves(s) · k / s` plus the workspace traffic
/// `(2s + 1) · rows · n · 4` bytes and one more launch, `waves(s) = ceil(tiles · s / slots)`.
fn best_split(rows: usize, n: usize, k: usize, slots: usize) -> (usize, f64) {
    let tiles = rows.div_ceil(128).max(1) * n.div_ceil(128).max(1);
    let max_s = (k.div_ceil(16) / 4).clamp(1, 16);
    let cost = |s: usize| {
        let waves = (tiles * s).div_ceil(slots) as f64;
        let per_slice = (k.div_ceil(16).div_ceil(s) * 16) as f64;
        let extra = if s == 1 {
            0.0
        } else {
            ((2 * s + 1) * rows * n * 4) as f64 / BYTES_PER_K + LAUNCH_K
        };
        waves * per_slice + extra
    };
    (1..=max_s)
        .map(|s| (s, cost(s)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or((1, cost(1)))
}

/// The plan `sgemm` uses for an `m × n × k` product on a GPU with `sm_count` SMs (two
/// 128 × 128 tiles per SM at a time), the cheaper of:
/// - the whole product with its best split: split-K fills a GPU the tiles
///   alone cannot (1024³ has 64 tiles for 264 slots);
/// - whole waves of tile rows without a split, then the leftover rows split: 2047³ has 272
///   tiles, one full wave and 8 blocks; as 255 whole tiles and one tile row in 15 k slices the
///   second wave is 15 times shorter (taken when the model says at least 10% faster).
///
/// kernels/TUNING.md, round 3.
pub fn sgemm_plan(m: usize, n: usize, k: usize, sm_count: u32) -> SgemmPlan {
    let slots = 2 * sm_count.max(1) as usize;
    let (gx, gy) = (n.div_ceil(128).max(1), m.div_ceil(128).max(1));
    let (s, plain) = best_split(m, n, k, slots);
    let mut best = (
        plain,
        SgemmPlan {
            main_rows: 0,
            rest_splits: s,
        },
    );
    let full_waves = gx * gy / slots;
    if full_waves >= 1 && gx <= slots {
        let r = (full_waves * slots / gx).min(gy);
        if r < gy {
            let main = ((r * gx).div_ceil(slots) * k.div_ceil(16) * 16) as f64;
            let (s2, rest) = best_split(m - r * 128, n, k, slots);
            let total = main + rest + LAUNCH_K;
            // Only for a clear gain: with many waves, blocks finish staggered and the last
            // wave's cost is smaller than this count says.
            if total < 0.9 * best.0 {
                best = (
                    total,
                    SgemmPlan {
                        main_rows: r * 128,
                        rest_splits: s2,
                    },
                );
            }
        }
    }
    best.1
}

/// `C = alpha · op(A) · op(B) + beta · C`, row-major, f32 (`sgemm_{nn,nt,tn,tt}`).
///
/// `op(A)` is `[m, kdim]`: `A` is stored `[m, kdim]` (`lda >= kdim`) for `NoTrans`, `[kdim, m]`
/// (`lda >= m`) for `Trans`; `op(B)` is `[kdim, n]`: `B` stored `[kdim, n]` (`ldb >= n`) or
/// `[n, kdim]` (`ldb >= kdim`); `C` is `[m, n]` with `ldc >= n`. Each slice must span its stored
/// matrix (`(rows - 1) · ld + cols` elements). Each output is `fmaf(beta, C, alpha · acc)` with
/// `acc` accumulated by FMA in increasing k; with `beta == 0` C is not read. Fast path: 16-byte
/// aligned operands and leading dimensions that are multiples of 4. Launch: block 256, grid
/// `(ceil(n / 128), ceil(m / 128))`; when those tiles cannot fill the GPU or leave a short last
/// wave, [`sgemm_plan`] splits k for some or all rows (slices into a stream-ordered workspace,
/// summed in order by `sgemm_splitk_reduce`: deterministic, but the k sum of those rows is then
/// a sum of per-slice FMA chains: `reference::sgemm_planned` computes the same).
#[allow(clippy::too_many_arguments)]
pub fn sgemm(
    k: &Kernels,
    s: &Stream,
    ta: Transpose,
    tb: Transpose,
    m: usize,
    n: usize,
    kdim: usize,
    alpha: f32,
    a: &DeviceSlice<f32>,
    lda: usize,
    b: &DeviceSlice<f32>,
    ldb: usize,
    beta: f32,
    c: &mut DeviceSlice<f32>,
    ldc: usize,
) -> Result<()> {
    const OP: &str = "sgemm";
    let (a_rows, a_cols) = match ta {
        Transpose::NoTrans => (m, kdim),
        Transpose::Trans => (kdim, m),
    };
    let (b_rows, b_cols) = match tb {
        Transpose::NoTrans => (kdim, n),
        Transpose::Trans => (n, kdim),
    };
    check_operand(OP, "a", a.len(), a_rows, a_cols, lda)?;
    check_operand(OP, "b", b.len(), b_rows, b_cols, ldb)?;
    check_operand(OP, "c", c.len(), m, n, ldc)?;
    // Every extent and leading dimension must fit the kernels' `int`s (checked before any work).
    for (what, v) in [("m", m), ("k", kdim), ("lda", lda), ("ldc", ldc)] {
        to_i32(OP, what, v)?;
    }
    let (ni, lb) = (to_i32(OP, "n", n)?, to_i32(OP, "ldb", ldb)?);
    if m == 0 || n == 0 {
        return Ok(());
    }
    // `B` stored transposed ([n, k], k contiguous) costs the kernel 16 rows per warp load
    // (kernels/TUNING.md, round 3); a dense one is transposed once into [k, n] instead (same
    // products, same order: the result is bit-identical).
    let work = m as u128 * n as u128 * kdim as u128;
    let b_copy = if tb == Transpose::Trans && ldb == kdim && work >= RELAYOUT_MIN_WORK {
        // SAFETY: every element is written by the transpose before sgemm reads it.
        let mut buf = unsafe { s.alloc::<f32>(kdim * n)? };
        let stored = b.slice(0..n * kdim)?;
        super::coalescing::transpose_any(
            k,
            s,
            super::TransposeAlgo::Auto,
            &stored,
            &mut buf,
            n,
            kdim,
        )?;
        Some(buf)
    } else {
        None
    };
    let (tb, b, lb) = match &b_copy {
        Some(buf) => (Transpose::NoTrans, &**buf, ni),
        None => (tb, b, lb),
    };
    let kernel = match (ta, tb) {
        (Transpose::NoTrans, Transpose::NoTrans) => &k.sgemm_nn,
        (Transpose::NoTrans, Transpose::Trans) => &k.sgemm_nt,
        (Transpose::Trans, Transpose::NoTrans) => &k.sgemm_tn,
        (Transpose::Trans, Transpose::Trans) => &k.sgemm_tt,
    };
    let plan = sgemm_plan(m, n, kdim, sms(s) as u32);
    let main = plan.main_rows.min(m);
    let op = Operands {
        kernel,
        ta,
        n,
        kdim,
        alpha,
        a,
        lda,
        b,
        lb,
        beta,
        ldc,
    };
    if main > 0 {
        gemm_rows(k, s, &op, c, 0..main, 1)?;
    }
    if main < m {
        gemm_rows(k, s, &op, c, main..m, plan.rest_splits)?;
    }
    Ok(())
}

/// What [`gemm_rows`] needs of the product (checked by `sgemm`).
struct Operands<'a> {
    kernel: &'a dispatch::Sgemm<f32>,
    ta: Transpose,
    n: usize,
    kdim: usize,
    alpha: f32,
    a: &'a DeviceSlice<f32>,
    lda: usize,
    b: &'a DeviceSlice<f32>,
    lb: i32,
    beta: f32,
    ldc: usize,
}

/// Rows `rows` of C, with `splits` k slices.
fn gemm_rows(
    k: &Kernels,
    s: &Stream,
    op: &Operands<'_>,
    c: &mut DeviceSlice<f32>,
    rows: std::ops::Range<usize>,
    splits: usize,
) -> Result<()> {
    const OP: &str = "sgemm";
    let m = rows.len();
    let (mi, ni, ki) = (
        to_i32(OP, "m", m)?,
        to_i32(OP, "n", op.n)?,
        to_i32(OP, "k", op.kdim)?,
    );
    let (la, lc) = (to_i32(OP, "lda", op.lda)?, to_i32(OP, "ldc", op.ldc)?);
    // Row i of op(A) starts at A[i·lda] (stored [m, k]) or A[i] (stored [k, m]); row i of C at
    // C[i·ldc]: the sub-product's operands are the same matrices from those offsets on.
    let a0 = match op.ta {
        Transpose::NoTrans => rows.start * op.lda,
        Transpose::Trans => rows.start,
    };
    let a = op.a.slice(a0..)?;
    let mut c = c.slice_mut(rows.start * op.ldc..)?;
    let (gx, gy) = (blocks(op.n, 128), blocks(m, 128));
    let (b, lb, alpha, beta) = (op.b, op.lb, op.alpha, op.beta);
    if splits == 1 {
        let cfg = LaunchConfig::new((gx, gy), BLOCK);
        // SAFETY: every index the kernel reads or writes lies in the stored matrices checked by
        // `sgemm` (op(A) [m, k] with lda, op(B) [k, n] with ldb, C [m, n] with ldc), here from
        // row `rows.start` on (the slices above start there); the grid has one k slice
        // (gridDim.z == 1), so C itself is the output.
        unsafe {
            op.kernel
                .launch(s, &cfg, mi, ni, ki, alpha, &a, la, b, lb, beta, &mut c, lc)
        }?;
        return Ok(());
    }
    // Split-K: `splits` slabs of [m, n] partial products, then their sum in order.
    let slab = m * op.n;
    // SAFETY: each slice z writes every element of its slab (the [m, n] tile grid covers it,
    // K = 0 slices write zeros) before the reduce kernel reads it, in stream order.
    let mut ws = unsafe { s.alloc::<f32>(slab * splits)? };
    let cfg = LaunchConfig::new((gx, gy, splits as u32), BLOCK);
    // SAFETY: as above for A and B; slice z writes ws[z·m·n + i·n + j] for i < m, j < n: inside
    // the splits·m·n workspace (C = ws with ldc = n, alpha 1, beta 0: not read).
    unsafe {
        op.kernel
            .launch(s, &cfg, mi, ni, ki, 1.0, &a, la, b, lb, 0.0, &mut ws, ni)
    }?;
    let rcfg = LaunchConfig::new(grid(slab as u64, BLOCK as u64 * 4, 8 * sms(s)), BLOCK);
    let sp = to_i32(OP, "splits", splits)?;
    // SAFETY: reads ws[z·m·n + e] for z < splits, e < m·n (the workspace) and writes
    // c[i·ldc + j] for i < m, j < n (the rows checked by `sgemm`).
    unsafe {
        k.sgemm_splitk_reduce
            .launch(s, &rcfg, &ws, sp, mi, ni, alpha, beta, &mut c, lc)
    }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{sgemm_plan, SgemmPlan};

    fn plan(m: usize, n: usize, k: usize) -> SgemmPlan {
        sgemm_plan(m, n, k, 132)
    }

    #[test]
    fn split_k_fills_the_gpu_and_evens_the_last_wave() {
        let none = |p: SgemmPlan| p.main_rows == 0 && p.rest_splits == 1;
        assert!(none(plan(4096, 4096, 4096)));
        assert!(none(plan(8192, 8192, 8192)));
        assert!(none(plan(2048, 2048, 2048)));
        assert!(none(plan(1, 1, 1)));
        assert_eq!(
            plan(1024, 1024, 1024),
            SgemmPlan {
                main_rows: 0,
                rest_splits: 4
            }
        );
        assert_eq!(
            plan(256, 256, 256),
            SgemmPlan {
                main_rows: 0,
                rest_splits: 4
            }
        );
        // 272 tiles: 255 of them (15 tile rows) as one wave, the last tile row split.
        let p = plan(2047, 2049, 2051);
        assert_eq!(p.main_rows, 15 * 128);
        assert!(p.rest_splits > 4, "{p:?}");
        assert_eq!(p.splits_for_row(0), 1);
        assert_eq!(p.splits_for_row(2046), p.rest_splits);
        assert!(plan(3072, 3072, 3072).rest_splits > 1);
    }
}
