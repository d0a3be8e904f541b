//! The fast f32 GEMM with transposes, alpha, beta and leading dimensions.

use crate::launch::{blocks, check_operand, grid, sms, to_i32, BLOCK};
use crate::{dispatch, Error, Kernels, Result};
use cuda_stack_driver::{DeviceSlice, LaunchConfig, Stream};

/// Whether an operand is used as stored or transposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transpose {
    /// `op(X) = X` (BLAS `'N'`).
    NoTrans,
    /// `op(X) = Xᵀ` (BLAS `'T'`).
    Trans,
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

/// The same threshold when `A` is transposed too (TT): at 2047 × 2049 × 2051 (2^33 multiply-adds)
/// the product on the transposed `B` directly measured 0.810x cuBLAS against 0.785x with the
/// relayout in the call (kernels/TUNING.md, round 4); the copy pays for itself only on larger
/// products (4096³, 2^36, measured with it).
pub const RELAYOUT_MIN_WORK_TT: u128 = 1 << 35;

/// k slices of every output the column-strip kernel computes (`STRIP_S` in `sgemm.cu`).
pub const STRIP_SLICES: usize = 32;

/// The most columns the column-strip kernel takes (`STRIP_W` in `sgemm.cu`).
pub const STRIP_MAX_COLS: usize = 8;

/// How `sgemm` runs an `m × n × k` product: the last `strip_cols` columns of C by the
/// column-strip kernel (`sgemm_strip_*`, [`STRIP_SLICES`] k slices per output); of the other
/// `n - strip_cols` columns, the first `main_rows` rows (whole 128-row tile rows making whole
/// waves of tiles) as one launch without a split, and the other rows with `rest_splits` k slices
/// (split-K). `main_rows == 0` is a plain (maybe split) product; `strip_cols == 0`, no strip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SgemmPlan {
    /// Rows of C computed without a split (a multiple of 128, or 0).
    pub main_rows: usize,
    /// k slices for the remaining rows (1: no split).
    pub rest_splits: usize,
    /// Columns at the end of C computed by the column-strip kernel (0..=[`STRIP_MAX_COLS`]).
    pub strip_cols: usize,
}

impl SgemmPlan {
    /// The k slices row `i` of C is computed with, outside the strip.
    pub fn splits_for_row(&self, i: usize) -> usize {
        if i < self.main_rows {
            1
        } else {
            self.rest_splits
        }
    }

    /// The k slices `C[i][j]` of an `n`-column product is computed with.
    pub fn splits_for(&self, i: usize, j: usize, n: usize) -> usize {
        if j + self.strip_cols >= n && self.strip_cols > 0 {
            STRIP_SLICES
        } else {
            self.splits_for_row(i)
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
/// 128 × 128 tiles per SM at a time): [`sgemm_tile_plan`] for all `n` columns, or, when `n` is
/// just past a multiple of 128 (`n % 128` in 1..=[`STRIP_MAX_COLS`]), [`sgemm_tile_plan`] for
/// the whole tiles and the column-strip kernel for the last `n % 128` columns, if the cost model
/// says at least 5% faster. The strip is charged one pass over `op(A)` and a launch; what it
/// saves is the last column of tiles, which computes 1 useful column in 128: at 1023 × 1025 ×
/// 1027 split-K then takes 4 slices of 17 k tiles on 64 tiles instead of 3 of 22 on 72, and at
/// 2047 × 2049 × 2051 the 256 whole tiles are one wave where 272 needed a second.
///
/// kernels/TUNING.md, rounds 3 and 4.
pub fn sgemm_plan(m: usize, n: usize, k: usize, sm_count: u32) -> SgemmPlan {
    let (cost, plan) = tile_plan(m, n, k, sm_count);
    let w = n % 128;
    if n > 128 && (1..=STRIP_MAX_COLS).contains(&w) {
        let (main, p) = tile_plan(m, n - w, k, sm_count);
        let strip = (4 * m * k) as f64 / BYTES_PER_K + LAUNCH_K;
        if main + strip < 0.95 * cost {
            return SgemmPlan { strip_cols: w, ..p };
        }
    }
    plan
}

/// The plan on 128 × 128 tiles alone (no column strip), the cheaper of:
/// - the whole product with its best split: split-K fills a GPU the tiles
///   alone cannot (1024³ has 64 tiles for 264 slots);
/// - whole waves of tile rows without a split, then the leftover rows split: 2047³ has 272
///   tiles, one full wave and 8 blocks; as 255 whole tiles and one tile row in 15 k slices the
///   second wave is 15 times shorter (taken when the model says at least 10% faster).
///
/// kernels/TUNING.md, round 3.
pub fn sgemm_tile_plan(m: usize, n: usize, k: usize, sm_count: u32) -> SgemmPlan {
    tile_plan(m, n, k, sm_count).1
}

/// [`sgemm_tile_plan`] and its cost in k units.
fn tile_plan(m: usize, n: usize, k: usize, sm_count: u32) -> (f64, SgemmPlan) {
    let slots = 2 * sm_count.max(1) as usize;
    let (gx, gy) = (n.div_ceil(128).max(1), m.div_ceil(128).max(1));
    let (s, plain) = best_split(m, n, k, slots);
    let mut best = (
        plain,
        SgemmPlan {
            main_rows: 0,
            rest_splits: s,
            strip_cols: 0,
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
                        strip_cols: 0,
                    },
                );
            }
        }
    }
    best
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
/// a sum of per-slice FMA chains), and when `n` is just past a multiple of 128 it may give the
/// last `n % 128` columns to `sgemm_strip_*` (32 k slices per output).
/// `reference::sgemm_planned` with [`SgemmPlan::splits_for`] computes the same.
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
    sgemm_any_plan(
        k, s, None, ta, tb, m, n, kdim, alpha, a, lda, b, ldb, beta, c, ldc,
    )
}

/// The most k slices a plan may ask for (split-K workspace: `splits · m · n` floats).
pub const MAX_SPLITS: usize = 64;

/// [`sgemm`] with a given plan instead of [`sgemm_plan`]'s (to measure or test a plan; the
/// result is what `reference::sgemm_planned` with [`SgemmPlan::splits_for`] computes). The plan
/// must have `main_rows` a multiple of 128, `rest_splits` in 1..=[`MAX_SPLITS`] and `strip_cols`
/// at most [`STRIP_MAX_COLS`] and at most `n`.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_with_plan(
    k: &Kernels,
    s: &Stream,
    plan: SgemmPlan,
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
    let problem = if plan.main_rows % 128 != 0 {
        Some(format!(
            "main_rows = {} is not a multiple of 128",
            plan.main_rows
        ))
    } else if !(1..=MAX_SPLITS).contains(&plan.rest_splits) {
        Some(format!(
            "rest_splits = {} is not in 1..={MAX_SPLITS}",
            plan.rest_splits
        ))
    } else if plan.strip_cols > STRIP_MAX_COLS.min(n) {
        Some(format!(
            "strip_cols = {} is more than {} (the strip kernel takes at most {STRIP_MAX_COLS} of the {n} columns)",
            plan.strip_cols,
            STRIP_MAX_COLS.min(n)
        ))
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(Error::Invalid {
            op: "sgemm",
            problem: format!("{problem}; use ops::sgemm_plan's plan or ops::sgemm"),
        });
    }
    sgemm_any_plan(
        k,
        s,
        Some(plan),
        ta,
        tb,
        m,
        n,
        kdim,
        alpha,
        a,
        lda,
        b,
        ldb,
        beta,
        c,
        ldc,
    )
}

/// [`sgemm`] under `plan` (checked by the caller), or [`sgemm_plan`]'s when `None`.
#[allow(clippy::too_many_arguments)]
fn sgemm_any_plan(
    k: &Kernels,
    s: &Stream,
    plan: Option<SgemmPlan>,
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
    for (what, v) in [("m", m), ("n", n), ("k", kdim), ("lda", lda), ("ldc", ldc)] {
        to_i32(OP, what, v)?;
    }
    let lb = to_i32(OP, "ldb", ldb)?;
    if m == 0 || n == 0 {
        return Ok(());
    }
    // `B` stored transposed ([n, k], k contiguous) costs the kernel 16 rows per warp load
    // (kernels/TUNING.md, round 3); a dense one is transposed once into [k, n] instead (same
    // products, same order: the result is bit-identical). The copy's rows are padded to a
    // multiple of 4 floats, so they start on 16-byte boundaries and the product reads them with
    // float4 loads (an odd n would otherwise send every B load down the scalar path).
    let work = m as u128 * n as u128 * kdim as u128;
    let min_work = if ta == Transpose::Trans {
        RELAYOUT_MIN_WORK_TT
    } else {
        RELAYOUT_MIN_WORK
    };
    let b_copy = if tb == Transpose::Trans && ldb == kdim && work >= min_work {
        let padded = n.next_multiple_of(4);
        let ld = if padded != n && i32::try_from(padded).is_ok() && kdim.div_ceil(64) <= 65_535 {
            padded
        } else {
            n
        };
        let len = kdim.checked_mul(ld).ok_or_else(|| Error::TooLarge {
            op: OP,
            what: "relayout of b",
            value: kdim as u128 * ld as u128,
            max: usize::MAX as u128,
        })?;
        // SAFETY: the transpose writes columns 0..n of every row before sgemm reads them; the
        // padding columns n..ld are never read (the kernels load only columns < n).
        let mut buf = unsafe { s.alloc::<f32>(len)? };
        let stored = b.slice(0..n * kdim)?;
        if ld == n {
            super::coalescing::transpose_any(
                k,
                s,
                super::TransposeAlgo::Auto,
                &stored,
                &mut buf,
                n,
                kdim,
            )?;
        } else {
            super::coalescing::transpose_ld(k, s, &stored, &mut buf, n, kdim, ld)?;
        }
        Some((buf, ld))
    } else {
        None
    };
    let (tb, b, ldb, lb) = match &b_copy {
        Some((buf, ld)) => (Transpose::NoTrans, &**buf, *ld, to_i32(OP, "ldb", *ld)?),
        None => (tb, b, ldb, lb),
    };
    let (kernel, strip) = match (ta, tb) {
        (Transpose::NoTrans, Transpose::NoTrans) => (k.sgemm_nn()?, k.sgemm_strip_nn()?),
        (Transpose::NoTrans, Transpose::Trans) => (k.sgemm_nt()?, k.sgemm_strip_nt()?),
        (Transpose::Trans, Transpose::NoTrans) => (k.sgemm_tn()?, k.sgemm_strip_tn()?),
        (Transpose::Trans, Transpose::Trans) => (k.sgemm_tt()?, k.sgemm_strip_tt()?),
    };
    let plan = plan.unwrap_or_else(|| sgemm_plan(m, n, kdim, sms(s) as u32));
    let main = plan.main_rows.min(m);
    let n_tiles = n - plan.strip_cols; // the columns the tile kernel computes
    let op = Operands {
        kernel,
        strip,
        ta,
        tb,
        n: n_tiles,
        kdim,
        alpha,
        a,
        lda,
        b,
        ldb,
        lb,
        beta,
        ldc,
    };
    if n_tiles > 0 && main > 0 {
        gemm_rows(k, s, &op, c, 0..main, 1)?;
    }
    if n_tiles > 0 && main < m {
        gemm_rows(k, s, &op, c, main..m, plan.rest_splits)?;
    }
    if plan.strip_cols > 0 {
        gemm_strip(s, &op, m, c, n_tiles, plan.strip_cols)?;
    }
    Ok(())
}

/// What [`gemm_rows`] and [`gemm_strip`] need of the product (checked by `sgemm`).
struct Operands<'a> {
    kernel: &'a dispatch::Sgemm<f32>,
    strip: &'a dispatch::Sgemm<f32>,
    ta: Transpose,
    tb: Transpose,
    /// Columns of C the tile kernel computes.
    n: usize,
    kdim: usize,
    alpha: f32,
    a: &'a DeviceSlice<f32>,
    lda: usize,
    b: &'a DeviceSlice<f32>,
    ldb: usize,
    lb: i32,
    beta: f32,
    ldc: usize,
}

/// Columns `n0 .. n0 + w` of all `m` rows of C (w <= [`STRIP_MAX_COLS`]) with the strip kernel.
fn gemm_strip(
    s: &Stream,
    op: &Operands<'_>,
    m: usize,
    c: &mut DeviceSlice<f32>,
    n0: usize,
    w: usize,
) -> Result<()> {
    const OP: &str = "sgemm";
    let (mi, wi, ki) = (
        to_i32(OP, "m", m)?,
        to_i32(OP, "n", w)?,
        to_i32(OP, "k", op.kdim)?,
    );
    let (la, lc) = (to_i32(OP, "lda", op.lda)?, to_i32(OP, "ldc", op.ldc)?);
    // Column n0 of op(B) starts at B[n0] (stored [k, n]) or B[n0·ldb] (stored [n, k]); of C at
    // C[n0]: the strip's operands are the same matrices from those offsets on.
    // With k == 0 the kernel reads no B at all (and B may hold no elements).
    let b0 = match op.tb {
        _ if op.kdim == 0 => 0,
        Transpose::NoTrans => n0,
        Transpose::Trans => n0 * op.ldb,
    };
    let b = op.b.slice(b0..)?;
    let mut c = c.slice_mut(n0..)?;
    let cfg = LaunchConfig::new(blocks(m, 8), BLOCK);
    // SAFETY: sgemm_strip_XY reads op(A)[i][k] (i < m, k < K) from A with lda, op(B)[k][j]
    // (j < w) from column n0 of B with ldb, and writes C[i·ldc + n0 + j]: inside the matrices
    // `sgemm` checked (op(A) [m, k], op(B) [k, n], C [m, n]), since n0 + w <= n; grid ceil(m / 8)
    // of 256 threads, as the kernel requires.
    unsafe {
        op.strip.launch(
            s, &cfg, mi, wi, ki, op.alpha, op.a, la, &b, op.lb, op.beta, &mut c, lc,
        )
    }?;
    Ok(())
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
    // With k == 0 the kernel reads no A at all (and A may hold no elements).
    let a0 = match op.ta {
        _ if op.kdim == 0 => 0,
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
        k.sgemm_splitk_reduce()?
            .launch(s, &rcfg, &ws, sp, mi, ni, alpha, beta, &mut c, lc)
    }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{sgemm_plan, sgemm_tile_plan, SgemmPlan, STRIP_SLICES};

    fn plan(m: usize, n: usize, k: usize) -> SgemmPlan {
        sgemm_plan(m, n, k, 132)
    }

    fn split(rest_splits: usize) -> SgemmPlan {
        SgemmPlan {
            main_rows: 0,
            rest_splits,
            strip_cols: 0,
        }
    }

    #[test]
    fn split_k_fills_the_gpu_and_evens_the_last_wave() {
        let none = |p: SgemmPlan| p.main_rows == 0 && p.rest_splits == 1 && p.strip_cols == 0;
        assert!(none(plan(4096, 4096, 4096)));
        assert!(none(plan(8192, 8192, 8192)));
        assert!(none(plan(2048, 2048, 2048)));
        assert!(none(plan(1, 1, 1)));
        assert_eq!(plan(1024, 1024, 1024), split(4));
        assert_eq!(plan(256, 256, 256), split(4));
        // On tiles alone, 272 tiles: 255 of them (15 tile rows) as one wave, the last tile row
        // split.
        let p = sgemm_tile_plan(2047, 2049, 2051, 132);
        assert_eq!(p.main_rows, 15 * 128);
        assert!(p.rest_splits > 4, "{p:?}");
        assert_eq!(p.strip_cols, 0);
        assert_eq!(p.splits_for_row(0), 1);
        assert_eq!(p.splits_for_row(2046), p.rest_splits);
        assert!(plan(3072, 3072, 3072).rest_splits > 1);
    }

    #[test]
    fn a_last_column_of_tiles_with_few_columns_goes_to_the_strip() {
        // 2047 x 2049: 256 whole tiles (one wave) and a 1-column strip.
        let p = plan(2047, 2049, 2051);
        assert_eq!(
            p,
            SgemmPlan {
                main_rows: 0,
                rest_splits: 1,
                strip_cols: 1
            }
        );
        assert_eq!(p.splits_for(5, 2047, 2049), 1);
        assert_eq!(p.splits_for(5, 2048, 2049), STRIP_SLICES);
        // 1023 x 1025: 64 tiles in 4 k slices (as 1024^3) and a 1-column strip.
        assert_eq!(
            plan(1023, 1025, 1027),
            SgemmPlan {
                main_rows: 0,
                rest_splits: 4,
                strip_cols: 1
            }
        );
        // 4095 x 4097: 1056 tiles are exactly 4 waves; whole tiles alone would still need 4.
        assert_eq!(plan(4095, 4097, 4093).strip_cols, 0);
        // Too many leftover columns, or too few columns to have a whole tile.
        assert_eq!(plan(2047, 2048 + 9, 2051).strip_cols, 0);
        assert_eq!(plan(2047, 100, 2051).strip_cols, 0);
        // No strip where the whole tiles need as many waves (or k slices) as all the tiles.
        for (m, n, k) in [(64, 129, 64), (8192, 8193, 8192), (100, 1025, 1024)] {
            assert_eq!(plan(m, n, k), sgemm_tile_plan(m, n, k, 132), "{m}x{n}x{k}");
        }
        // Up to 8 leftover columns.
        assert_eq!(plan(2047, 2048 + 8, 2051).strip_cols, 8);
    }
}
