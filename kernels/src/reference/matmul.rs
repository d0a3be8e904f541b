//! Matrix products, accumulating with FMA in increasing k (bit-exact with every GPU kernel).

use crate::ops::Transpose;
use crate::{Compute, Element};

/// `C[m, n] = A[m, k] · B[k, n]` (row-major), `acc = fma(a, b, acc)` for k = 0, 1, … (i32
/// wraps).
pub fn matmul<T: Element>(a: &[T], b: &[T], m: usize, n: usize, k: usize) -> Vec<T> {
    let mut c = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let mut acc = <T::Scalar as Compute>::zero();
            for kk in 0..k {
                acc = Compute::fma(a[i * k + kk].to_scalar(), b[kk * n + j].to_scalar(), acc);
            }
            c.push(T::from_scalar(acc));
        }
    }
    c
}

/// `C = alpha · op(A) · op(B) + beta · C` in place, as `sgemm_XY` computes it: `acc` by FMA in
/// increasing k, then `alpha · acc`, then `fmaf(beta, C, ·)` unless `beta == 0` (C not read).
#[allow(clippy::too_many_arguments)]
pub fn sgemm(
    ta: Transpose,
    tb: Transpose,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
) {
    sgemm_planned(
        ta,
        tb,
        m,
        n,
        k,
        alpha,
        a,
        lda,
        b,
        ldb,
        beta,
        c,
        ldc,
        |_, _| 1,
    );
}

/// [`sgemm`] as `ops::sgemm` computes it under a plan (`ops::sgemm_plan`): `C[i][j]` with
/// `splits_for(i, j)` k slices (`SgemmPlan::splits_for(i, j, n)`), each an FMA chain over its
/// whole 16-wide k tiles in increasing k, the slices added in order, then `alpha · sum` and
/// `fmaf(beta, C, ·)`.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_planned(
    ta: Transpose,
    tb: Transpose,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    splits_for: impl Fn(usize, usize) -> usize,
) {
    for i in 0..m {
        for j in 0..n {
            let acc = sgemm_dot(ta, tb, k, a, lda, b, ldb, i, j, splits_for(i, j));
            let mut v = alpha * acc;
            if beta != 0.0 {
                v = beta.mul_add(c[i * ldc + j], v);
            }
            c[i * ldc + j] = v;
        }
    }
}

/// The accumulator `ops::sgemm` forms for `C[i][j]` with `splits` k slices (before `alpha` and
/// `beta`): for checking single entries of products too large for a CPU reference.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_dot(
    ta: Transpose,
    tb: Transpose,
    k: usize,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    i: usize,
    j: usize,
    splits: usize,
) -> f32 {
    let at = |i: usize, kk: usize| match ta {
        Transpose::NoTrans => a[i * lda + kk],
        Transpose::Trans => a[kk * lda + i],
    };
    let bt = |kk: usize, j: usize| match tb {
        Transpose::NoTrans => b[kk * ldb + j],
        Transpose::Trans => b[j * ldb + kk],
    };
    // The k slices of split-K (`sgemm_splitk`'s order): whole 16-wide k tiles per slice.
    let splits = splits.max(1);
    let per = k.div_ceil(16).div_ceil(splits) * 16;
    let mut acc = 0.0f32;
    for z in 0..splits {
        let k0 = (z * per).min(k);
        let k1 = (k0 + per).min(k);
        let mut part = 0.0f32;
        for kk in k0..k1 {
            part = at(i, kk).mul_add(bt(kk, j), part);
        }
        acc = if z == 0 { part } else { acc + part };
    }
    acc
}

/// `op(A) · op(B)` for the tensor-core GEMMs, in f64 from the exact (widened) inputs, with the
/// bound `Σ_k |a·b|` of each entry: the kernels accumulate in f32 in an order of their own and
/// round once to the output type, so tests compare within `eps_out · |c| + eps_acc · bound`.
/// Shapes as in [`sgemm`]; returns `(c, bound)`, each `[m, n]` row-major.
#[allow(clippy::too_many_arguments)]
pub fn gemm_f64<T: Element>(
    ta: Transpose,
    tb: Transpose,
    m: usize,
    n: usize,
    k: usize,
    a: &[T],
    lda: usize,
    b: &[T],
    ldb: usize,
) -> (Vec<f64>, Vec<f64>) {
    let (mut c, mut bound) = (vec![0.0; m * n], vec![0.0; m * n]);
    for i in 0..m {
        for kk in 0..k {
            let av = match ta {
                Transpose::NoTrans => a[i * lda + kk],
                Transpose::Trans => a[kk * lda + i],
            }
            .to_f64();
            for j in 0..n {
                let bv = match tb {
                    Transpose::NoTrans => b[kk * ldb + j],
                    Transpose::Trans => b[j * ldb + kk],
                }
                .to_f64();
                c[i * n + j] += av * bv;
                bound[i * n + j] += (av * bv).abs();
            }
        }
    }
    (c, bound)
}
