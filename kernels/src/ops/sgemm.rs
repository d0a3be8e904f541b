//! The fast f32 GEMM with transposes, alpha, beta and leading dimensions.

use crate::launch::{blocks, grid, sms, to_i32, BLOCK};
use crate::{Error, Kernels, Result};
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

/// Checks one operand: `ld >= cols` and the slice spans the stored matrix.
fn check_operand(
    what: &'static str,
    len: usize,
    rows: usize,
    cols: usize,
    ld: usize,
) -> Result<()> {
    const OP: &str = "sgemm";
    if ld < cols {
        return Err(Error::Invalid {
            op: OP,
            problem: format!(
                "leading dimension of `{what}` is {ld}, but its stored rows have {cols} elements \
                 (the leading dimension must be >= {cols})"
            ),
        });
    }
    let need = span(rows, cols, ld).ok_or(Error::TooLarge {
        op: OP,
        what,
        value: rows as u128 * ld as u128,
        max: usize::MAX as u128,
    })?;
    if len < need {
        return Err(Error::Shape {
            op: OP,
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

/// Products of at least this many multiply-adds (128³) with `B` stored transposed run on a
/// transposed copy of `B` (one pass over it) instead.
pub const RELAYOUT_MIN_WORK: u128 = 1 << 21;

/// How many k slices (split-K) `sgemm` uses for an `m × n × k` product on a GPU with
/// `sm_count` SMs (two 128 × 128 tiles per SM at a time): the `s` in 1..=16 (each slice at least
/// 4 k tiles of 16) that minimises `waves(s) · k / s` plus the workspace traffic
/// `(2s + 1) · m · n · 4` bytes and one more launch, where `waves(s) = ceil(tiles · s / slots)`.
/// Split-K fills a GPU the tiles alone cannot (1024³ has 64 tiles for 264 slots) and evens out
/// the last wave (2047³ has 272 tiles: one full wave and 8 blocks). kernels/TUNING.md, round 3.
pub fn sgemm_splits(m: usize, n: usize, k: usize, sm_count: u32) -> usize {
    let tiles = m.div_ceil(128).max(1) * n.div_ceil(128).max(1);
    let slots = 2 * sm_count.max(1) as usize;
    let max_s = (k.div_ceil(16) / 4).clamp(1, 16);
    let cost = |s: usize| {
        let waves = (tiles * s).div_ceil(slots) as f64;
        let per_slice = (k.div_ceil(16).div_ceil(s) * 16) as f64;
        let extra = if s == 1 {
            0.0
        } else {
            ((2 * s + 1) * m * n * 4) as f64 / BYTES_PER_K + LAUNCH_K
        };
        waves * per_slice + extra
    };
    (1..=max_s)
        .min_by(|&a, &b| cost(a).total_cmp(&cost(b)))
        .unwrap_or(1)
}

/// `C = alpha · op(A) · op(B) + beta · C`, row-major, f32 (`sgemm_{nn,nt,tn,tt}`).
///
/// `op(A)` is `[m, kdim]`: `A` is stored `[m, kdim]` (`lda >= kdim`) for `NoTrans`, `[kdim, m]`
/// (`lda >= m`) for `Trans`; `op(B)` is `[kdim, n]`: `B` stored `[kdim, n]` (`ldb >= n`) or
/// `[n, kdim]` (`ldb >= kdim`); `C` is `[m, n]` with `ldc >= n`. Each slice must span its stored
/// matrix (`(rows - 1) · ld + cols` elements). Each output is `fmaf(beta, C, alpha · acc)` with
/// `acc` accumulated by FMA in increasing k; with `beta == 0` C is not read. Fast path: 16-byte
/// aligned operands and leading dimensions that are multiples of 4. Launch: block 256, grid
/// `(ceil(n / 128), ceil(m / 128))`; when those tiles cannot fill the GPU, split-K
/// ([`sgemm_splits`] slices of k into a stream-ordered workspace, summed in order by
/// `sgemm_splitk_reduce`: deterministic, but the k sum is then a sum of per-slice FMA chains).
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
    check_operand("a", a.len(), a_rows, a_cols, lda)?;
    check_operand("b", b.len(), b_rows, b_cols, ldb)?;
    check_operand("c", c.len(), m, n, ldc)?;
    let (mi, ni, ki) = (
        to_i32(OP, "m", m)?,
        to_i32(OP, "n", n)?,
        to_i32(OP, "k", kdim)?,
    );
    let (la, lb, lc) = (
        to_i32(OP, "lda", lda)?,
        to_i32(OP, "ldb", ldb)?,
        to_i32(OP, "ldc", ldc)?,
    );
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
    let splits = sgemm_splits(m, n, kdim, sms(s) as u32);
    let (gx, gy) = (blocks(n, 128), blocks(m, 128));
    if splits == 1 {
        let cfg = LaunchConfig::new((gx, gy), BLOCK);
        // SAFETY: every index the kernel reads or writes lies in the stored matrices checked
        // above (op(A) [m, k] with lda, op(B) [k, n] with ldb, C [m, n] with ldc); the grid has
        // one k slice (gridDim.z == 1), so C itself is the output.
        unsafe { kernel.launch(s, &cfg, mi, ni, ki, alpha, a, la, b, lb, beta, c, lc) }?;
        return Ok(());
    }
    // Split-K: `splits` slabs of [m, n] partial products, then their sum in order.
    let slab = m * n;
    // SAFETY: each slice z writes every element of its slab (the [m, n] tile grid covers it,
    // K = 0 slices write zeros) before the reduce kernel reads it, in stream order.
    let mut ws = unsafe { s.alloc::<f32>(slab * splits)? };
    let cfg = LaunchConfig::new((gx, gy, splits as u32), BLOCK);
    let n_ld = ni;
    // SAFETY: as above for A and B; slice z writes ws[z·m·n + i·n + j] for i < m, j < n: inside
    // the splits·m·n workspace (C = ws with ldc = n, alpha 1, beta 0: not read).
    unsafe { kernel.launch(s, &cfg, mi, ni, ki, 1.0, a, la, b, lb, 0.0, &mut ws, n_ld) }?;
    let rcfg = LaunchConfig::new(grid(slab as u64, BLOCK as u64 * 4, 8 * sms(s)), BLOCK);
    let sp = to_i32(OP, "splits", splits)?;
    // SAFETY: reads ws[z·m·n + e] for z < splits, e < m·n (the workspace) and writes
    // c[i·ldc + j] for i < m, j < n (checked above).
    unsafe {
        k.sgemm_splitk_reduce
            .launch(s, &rcfg, &ws, sp, mi, ni, alpha, beta, c, lc)
    }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::sgemm_splits;

    #[test]
    fn split_k_fills_the_gpu_and_evens_the_last_wave() {
        let sms = 132;
        assert_eq!(sgemm_splits(4096, 4096, 4096, sms), 1);
        assert_eq!(sgemm_splits(8192, 8192, 8192, sms), 1);
        assert_eq!(sgemm_splits(2048, 2048, 2048, sms), 1);
        assert_eq!(sgemm_splits(1024, 1024, 1024, sms), 4);
        assert!(sgemm_splits(2047, 2049, 2051, sms) > 1);
        assert!(sgemm_splits(3072, 3072, 3072, sms) > 1);
        assert_eq!(sgemm_splits(1, 1, 1, sms), 1);
        assert_eq!(sgemm_splits(256, 256, 256, sms), 4);
    }
}
