//! What a GEMM computes, in row-major terms, and its translation to cuBLAS's column-major call.
//!
//! ## Row-major on a column-major library
//! The project's tensors are row-major; cuBLAS is column-major (Fortran BLAS). A row-major
//! `[r, c]` matrix with row stride `ld` is, byte for byte, a column-major `[c, r]` matrix with
//! leading dimension `ld`: its transpose. So the row-major product `C = op(A)·op(B)` is computed
//! as the column-major product `Cᵀ = op(B)ᵀ·op(A)ᵀ`: cuBLAS is called with the operands swapped
//! (`B` first), `m` and `n` swapped, and each operand's transpose flag kept. No data moves.

use crate::compute::{compute_for, Compute, Math};
use crate::element::{DataType, Element};
use crate::error::{BlasError, Result};
use cuda_stack_driver::cuda_stack_sys::cublas_types::cublasOperation_t;

/// Whether an operand is used as stored or transposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Transpose {
    /// `op(X) = X` (BLAS `'N'`).
    #[default]
    No,
    /// `op(X) = Xᵀ` (BLAS `'T'`).
    Yes,
}

impl Transpose {
    pub(crate) fn cublas(self) -> cublasOperation_t {
        match self {
            Transpose::No => cublasOperation_t::CUBLAS_OP_N,
            Transpose::Yes => cublasOperation_t::CUBLAS_OP_T,
        }
    }
}

/// A strided batch: `count` products, the `i`-th reading `a[i·stride_a..]`, `b[i·stride_b..]`
/// and writing `c[i·stride_c..]` (strides in elements). An input stride of 0 reuses one matrix
/// for every product (broadcast); the output matrices must not overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Batch {
    /// Number of products.
    pub count: usize,
    /// Elements between consecutive `a` matrices.
    pub stride_a: usize,
    /// Elements between consecutive `b` matrices.
    pub stride_b: usize,
    /// Elements between consecutive `c` matrices.
    pub stride_c: usize,
}

/// One GEMM, described row-major: `C = alpha · op(A) · op(B) + beta · C` with `op(A)` of
/// `[m, k]`, `op(B)` of `[k, n]` and `C` of `[m, n]`, each stored row-major with a leading
/// dimension (row stride, in elements).
///
/// ```
/// use cuda_stack_blas::{Gemm, Math, Transpose};
/// // y[64, 10] = x[64, 784] · W[10, 784]ᵀ, as a linear layer does, with TF32.
/// let g = Gemm::new(64, 10, 784).trans_b(Transpose::Yes).math(Math::Tf32);
/// assert_eq!((g.lda(), g.ldb(), g.ldc()), (784, 784, 10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gemm {
    /// Rows of `op(A)` and `C`.
    pub m: usize,
    /// Columns of `op(B)` and `C`.
    pub n: usize,
    /// Columns of `op(A)`, rows of `op(B)`.
    pub k: usize,
    /// Whether `A` is stored transposed (`[k, m]`).
    pub trans_a: Transpose,
    /// Whether `B` is stored transposed (`[n, k]`).
    pub trans_b: Transpose,
    /// Leading dimensions; `None` for densely packed rows.
    pub lda: Option<usize>,
    /// See `lda`.
    pub ldb: Option<usize>,
    /// See `lda`.
    pub ldc: Option<usize>,
    /// Scale of the product.
    pub alpha: f64,
    /// Scale of the old `C` (0 overwrites it, and then its old values are never read).
    pub beta: f64,
    /// A strided batch, or `None` for one product.
    pub batch: Option<Batch>,
    /// Default math, or TF32 for f32 inputs.
    pub math: Math,
}

impl Gemm {
    /// `C[m, n] = A[m, k] · B[k, n]`: no transposes, dense rows, `alpha = 1`, `beta = 0`,
    /// default math, no batch.
    pub fn new(m: usize, n: usize, k: usize) -> Gemm {
        Gemm {
            m,
            n,
            k,
            trans_a: Transpose::No,
            trans_b: Transpose::No,
            lda: None,
            ldb: None,
            ldc: None,
            alpha: 1.0,
            beta: 0.0,
            batch: None,
            math: Math::Default,
        }
    }

    /// Sets whether `A` is stored transposed.
    pub fn trans_a(mut self, t: Transpose) -> Gemm {
        self.trans_a = t;
        self
    }

    /// Sets whether `B` is stored transposed.
    pub fn trans_b(mut self, t: Transpose) -> Gemm {
        self.trans_b = t;
        self
    }

    /// Sets the three leading dimensions.
    pub fn leading_dims(mut self, lda: usize, ldb: usize, ldc: usize) -> Gemm {
        (self.lda, self.ldb, self.ldc) = (Some(lda), Some(ldb), Some(ldc));
        self
    }

    /// Sets `alpha` and `beta`.
    pub fn scale(mut self, alpha: f64, beta: f64) -> Gemm {
        (self.alpha, self.beta) = (alpha, beta);
        self
    }

    /// Makes it a strided batch of `count` products (strides in elements).
    pub fn batched(
        mut self,
        count: usize,
        stride_a: usize,
        stride_b: usize,
        stride_c: usize,
    ) -> Gemm {
        self.batch = Some(Batch {
            count,
            stride_a,
            stride_b,
            stride_c,
        });
        self
    }

    /// Sets the math mode.
    pub fn math(mut self, math: Math) -> Gemm {
        self.math = math;
        self
    }

    /// `A`'s stored shape `[rows, cols]` (row-major).
    pub fn a_stored(&self) -> (usize, usize) {
        match self.trans_a {
            Transpose::No => (self.m, self.k),
            Transpose::Yes => (self.k, self.m),
        }
    }

    /// `B`'s stored shape `[rows, cols]`.
    pub fn b_stored(&self) -> (usize, usize) {
        match self.trans_b {
            Transpose::No => (self.k, self.n),
            Transpose::Yes => (self.n, self.k),
        }
    }

    /// `A`'s leading dimension: as set, or its stored row length (at least 1).
    pub fn lda(&self) -> usize {
        self.lda.unwrap_or(self.a_stored().1.max(1))
    }

    /// `B`'s leading dimension.
    pub fn ldb(&self) -> usize {
        self.ldb.unwrap_or(self.b_stored().1.max(1))
    }

    /// `C`'s leading dimension.
    pub fn ldc(&self) -> usize {
        self.ldc.unwrap_or(self.n.max(1))
    }

    /// Checks the description against operands of `A`, `C` types and lengths `a_len`, `b_len`,
    /// `c_len` (elements), without touching a GPU: every error `Blas::gemm` can report before
    /// calling cuBLAS comes from here.
    pub fn check<A: Element, C: Element>(
        &self,
        a_len: usize,
        b_len: usize,
        c_len: usize,
    ) -> Result<()> {
        self.plan("gemm", A::DTYPE, C::DTYPE, a_len, b_len, c_len)
            .map(|_| ())
    }

    /// Validates and translates to the column-major call.
    pub(crate) fn plan(
        &self,
        op: &'static str,
        input: DataType,
        output: DataType,
        a_len: usize,
        b_len: usize,
        c_len: usize,
    ) -> Result<ColMajor> {
        let compute = compute_for(op, input, output, self.math)?;
        for (what, v) in [("m", self.m), ("n", self.n), ("k", self.k)] {
            fits_i32(op, what, v as u128)?;
        }
        let (a_rows, a_cols) = self.a_stored();
        let (b_rows, b_cols) = self.b_stored();
        let span_a = operand(op, "a", a_rows, a_cols, self.lda())?;
        let span_b = operand(op, "b", b_rows, b_cols, self.ldb())?;
        let span_c = operand(op, "c", self.m, self.n, self.ldc())?;
        let batch = self.batch.unwrap_or(Batch {
            count: 1,
            stride_a: 0,
            stride_b: 0,
            stride_c: 0,
        });
        fits_i32(op, "the batch count", batch.count as u128)?;
        if batch.count > 1 && span_c > 0 && batch.stride_c < span_c {
            return Err(BlasError::BatchOverlap {
                op,
                count: batch.count,
                stride: batch.stride_c,
                span: span_c,
            });
        }
        let need = |operand, span: usize, stride: usize, len: usize, shape: String| {
            let total = if batch.count == 0 || span == 0 {
                0
            } else {
                (batch.count as u128 - 1) * stride as u128 + span as u128
            };
            if total > i64::MAX as u128 {
                return Err(BlasError::TooLarge {
                    op,
                    what: "the elements a batch spans",
                    value: total,
                    max: i64::MAX as u128,
                });
            }
            if (len as u128) < total {
                let expected = match self.batch {
                    None => format!("{shape} ({total} elements)"),
                    Some(_) => format!(
                        "{} matrices {shape} {stride} elements apart ({total} elements)",
                        batch.count
                    ),
                };
                return Err(BlasError::Length {
                    op,
                    operand,
                    expected,
                    found: len,
                });
            }
            Ok(())
        };
        let desc = |r, c, ld| format!("a stored [{r}, {c}] matrix with row stride {ld}");
        need(
            "a",
            span_a,
            batch.stride_a,
            a_len,
            desc(a_rows, a_cols, self.lda()),
        )?;
        need(
            "b",
            span_b,
            batch.stride_b,
            b_len,
            desc(b_rows, b_cols, self.ldb()),
        )?;
        need(
            "c",
            span_c,
            batch.stride_c,
            c_len,
            desc(self.m, self.n, self.ldc()),
        )?;
        Ok(ColMajor {
            // Cᵀ = op(B)ᵀ · op(A)ᵀ: B is cuBLAS's first operand.
            trans_first: self.trans_b,
            trans_second: self.trans_a,
            m: self.n as i32,
            n: self.m as i32,
            k: self.k as i32,
            ld_first: self.ldb() as i32,
            ld_second: self.lda() as i32,
            ldc: self.ldc() as i32,
            stride_first: batch.stride_b as i64,
            stride_second: batch.stride_a as i64,
            stride_c: batch.stride_c as i64,
            count: batch.count as i32,
            batched: self.batch.is_some(),
            input,
            output,
            compute,
            alpha: self.alpha,
            beta: self.beta,
        })
    }
}

/// A validated GEMM as cuBLAS's column-major call: `first` is `B`, `second` is `A`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ColMajor {
    pub(crate) trans_first: Transpose,
    pub(crate) trans_second: Transpose,
    pub(crate) m: i32,
    pub(crate) n: i32,
    pub(crate) k: i32,
    pub(crate) ld_first: i32,
    pub(crate) ld_second: i32,
    pub(crate) ldc: i32,
    pub(crate) stride_first: i64,
    pub(crate) stride_second: i64,
    pub(crate) stride_c: i64,
    pub(crate) count: i32,
    pub(crate) batched: bool,
    pub(crate) input: DataType,
    pub(crate) output: DataType,
    pub(crate) compute: Compute,
    pub(crate) alpha: f64,
    pub(crate) beta: f64,
}

impl ColMajor {
    /// Whether there is nothing to compute or write.
    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0 || self.m == 0 || self.n == 0
    }
}

fn fits_i32(op: &'static str, what: &'static str, v: u128) -> Result<()> {
    if v > i32::MAX as u128 {
        return Err(BlasError::TooLarge {
            op,
            what,
            value: v,
            max: i32::MAX as u128,
        });
    }
    Ok(())
}

/// Checks one stored operand's leading dimension; returns the elements it spans.
fn operand(
    op: &'static str,
    name: &'static str,
    rows: usize,
    cols: usize,
    ld: usize,
) -> Result<usize> {
    let min = cols.max(1);
    if ld < min {
        return Err(BlasError::LeadingDimension {
            op,
            operand: name,
            ld,
            min,
        });
    }
    fits_i32(op, ld_name(name), ld as u128)?;
    if rows == 0 || cols == 0 {
        return Ok(0);
    }
    let span = (rows as u128 - 1) * ld as u128 + cols as u128;
    if span > i64::MAX as u128 {
        return Err(BlasError::TooLarge {
            op,
            what: "the elements one matrix spans",
            value: span,
            max: i64::MAX as u128,
        });
    }
    Ok(span as usize)
}

fn ld_name(operand: &str) -> &'static str {
    match operand {
        "a" => "lda",
        "b" => "ldb",
        _ => "ldc",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuda_stack_driver::half::{bf16, f16};

    #[test]
    fn row_major_becomes_the_swapped_column_major_call() {
        let g = Gemm::new(3, 5, 7);
        let c = g
            .plan("t", DataType::F32, DataType::F32, 21, 35, 15)
            .unwrap();
        assert_eq!((c.m, c.n, c.k), (5, 3, 7));
        assert_eq!((c.ld_first, c.ld_second, c.ldc), (5, 7, 5));
        assert_eq!(
            (c.trans_first, c.trans_second),
            (Transpose::No, Transpose::No)
        );
        let g = Gemm::new(3, 5, 7)
            .trans_a(Transpose::Yes)
            .trans_b(Transpose::Yes)
            .leading_dims(4, 9, 6);
        // A stored [7, 3] (ld 4), B stored [5, 7] (ld 9), C [3, 5] (ld 6).
        let c = g.plan(
            "t",
            DataType::F32,
            DataType::F32,
            6 * 4 + 3,
            4 * 9 + 7,
            2 * 6 + 5,
        );
        let c = c.unwrap();
        assert_eq!(
            (c.trans_first, c.trans_second),
            (Transpose::Yes, Transpose::Yes)
        );
        assert_eq!((c.ld_first, c.ld_second, c.ldc), (9, 4, 6));
    }

    #[test]
    fn lengths_are_checked_exactly() {
        let g = Gemm::new(4, 6, 5).leading_dims(8, 6, 7);
        // A: 3 rows of stride 8, then 5 elements = 29; B: 4·6 + 6 = 30; C: 3·7 + 6 = 27.
        assert!(g.check::<f32, f32>(29, 30, 27).is_ok());
        for (lens, who) in [
            ((28, 30, 27), "a"),
            ((29, 29, 27), "b"),
            ((29, 30, 26), "c"),
        ] {
            match g.check::<f32, f32>(lens.0, lens.1, lens.2) {
                Err(BlasError::Length { operand, .. }) => assert_eq!(operand, who),
                other => panic!("{who}: {other:?}"),
            }
        }
        let e = g.check::<f32, f32>(29, 30, 26).unwrap_err().to_string();
        assert!(
            e.contains("stored [4, 6] matrix with row stride 7 (27 elements)"),
            "{e}"
        );
        assert!(e.contains("has 26 elements"), "{e}");
    }

    #[test]
    fn leading_dimensions_must_cover_the_stored_rows() {
        let e = Gemm::new(4, 6, 5).leading_dims(4, 6, 6);
        match e.check::<f32, f32>(100, 100, 100) {
            Err(BlasError::LeadingDimension {
                operand, ld, min, ..
            }) => {
                assert_eq!((operand, ld, min), ("a", 4, 5))
            }
            other => panic!("{other:?}"),
        }
        // Transposed A is stored [k, m] = [5, 4]: ld 4 is enough.
        let t = e.trans_a(Transpose::Yes);
        assert!(t.check::<f32, f32>(100, 100, 100).is_ok());
        let c = Gemm::new(4, 6, 5).leading_dims(5, 6, 5);
        assert!(matches!(
            c.check::<f32, f32>(100, 100, 100),
            Err(BlasError::LeadingDimension { operand: "c", .. })
        ));
    }

    #[test]
    fn sizes_beyond_i32_are_refused() {
        let g = Gemm::new(1 << 31, 1, 1);
        match g.check::<f32, f32>(0, 0, 0) {
            Err(BlasError::TooLarge { what, value, .. }) => {
                assert_eq!((what, value), ("m", 1 << 31))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn batches_are_checked_whole_and_outputs_may_not_overlap() {
        let g = Gemm::new(2, 3, 4).batched(5, 8, 12, 6);
        // last a starts at 4·8 and spans 8: 40; b: 4·12 + 12 = 60; c: 4·6 + 6 = 30.
        assert!(g.check::<f32, f32>(40, 60, 30).is_ok());
        let e = g.check::<f32, f32>(39, 60, 30).unwrap_err().to_string();
        assert!(e.contains("5 matrices") && e.contains("40 elements"), "{e}");
        // Broadcast inputs (stride 0) are fine; overlapping outputs are not.
        assert!(Gemm::new(2, 3, 4)
            .batched(5, 0, 0, 6)
            .check::<f32, f32>(8, 12, 30)
            .is_ok());
        match Gemm::new(2, 3, 4)
            .batched(5, 0, 0, 5)
            .check::<f32, f32>(8, 12, 30)
        {
            Err(BlasError::BatchOverlap { stride, span, .. }) => assert_eq!((stride, span), (5, 6)),
            other => panic!("{other:?}"),
        }
        // An empty batch touches nothing.
        assert!(Gemm::new(2, 3, 4)
            .batched(0, 8, 12, 6)
            .check::<f32, f32>(0, 0, 0)
            .is_ok());
    }

    #[test]
    fn empty_products_need_no_memory_but_valid_leading_dimensions() {
        assert!(Gemm::new(0, 3, 4).check::<f32, f32>(0, 12, 0).is_ok());
        assert!(Gemm::new(3, 0, 4).check::<f32, f32>(12, 0, 0).is_ok());
        // k = 0: C = beta·C still needs all of C.
        assert!(Gemm::new(3, 2, 0).check::<f32, f32>(0, 0, 6).is_ok());
        assert!(Gemm::new(3, 2, 0).check::<f32, f32>(0, 0, 5).is_err());
    }

    #[test]
    fn unsupported_type_combinations_are_typed_errors() {
        let g = Gemm::new(2, 2, 2);
        assert!(matches!(
            g.check::<f16, bf16>(4, 4, 4),
            Err(BlasError::UnsupportedTypes { .. })
        ));
        assert!(matches!(
            g.math(Math::Tf32).check::<bf16, f32>(4, 4, 4),
            Err(BlasError::UnsupportedTypes { .. })
        ));
        assert!(g.check::<bf16, f32>(4, 4, 4).is_ok());
        assert!(g.check::<f64, f64>(4, 4, 4).is_ok());
        assert!(g.check::<f32, f64>(4, 4, 4).is_err());
    }
}
