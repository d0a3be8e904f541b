//! The fast f32 GEMM with transposes, alpha, beta and leading dimensions.

use crate::launch::{blocks, to_i32, BLOCK};
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

/// `C = alpha · op(A) · op(B) + beta · C`, row-major, f32 (`sgemm_{nn,nt,tn,tt}`).
///
/// `op(A)` is `[m, kdim]`: `A` is stored `[m, kdim]` (`lda >= kdim`) for `NoTrans`, `[kdim, m]`
/// (`lda >= m`) for `Trans`; `op(B)` is `[kdim, n]`: `B` stored `[kdim, n]` (`ldb >= n`) or
/// `[n, kdim]` (`ldb >= kdim`); `C` is `[m, n]` with `ldc >= n`. Each slice must span its stored
/// matrix (`(rows - 1) · ld + cols` elements). Each output is `fmaf(beta, C, alpha · acc)` with
/// `acc` accumulated by FMA in increasing k; with `beta == 0` C is not read. Fast path: 16-byte
/// aligned operands and leading dimensions that are multiples of 4. Launch: block 256, grid
/// `(ceil(n / 128), ceil(m / 128))`.
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
    let cfg = LaunchConfig::new((blocks(n, 128), blocks(m, 128)), BLOCK);
    let kernel = match (ta, tb) {
        (Transpose::NoTrans, Transpose::NoTrans) => &k.sgemm_nn,
        (Transpose::NoTrans, Transpose::Trans) => &k.sgemm_nt,
        (Transpose::Trans, Transpose::NoTrans) => &k.sgemm_tn,
        (Transpose::Trans, Transpose::Trans) => &k.sgemm_tt,
    };
    // SAFETY: the kernel guards rows < m and cols < n and reads/writes each operand within
    // (rows - 1) * ld + cols elements, which check_operand verified against each buffer.
    unsafe { kernel.launch(s, &cfg, mi, ni, ki, alpha, a, la, b, lb, beta, c, lc) }?;
    Ok(())
}
