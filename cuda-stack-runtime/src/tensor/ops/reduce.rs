//! Reductions: `sum`, `mean`, `max` over all elements or over one dimension.
//!
//! A reduction over dimension `d` of a contiguous tensor reads it as `[outer, size(d), inner]`
//! (`outer`: the product of the dimensions before `d`, `inner`: after it) and runs
//! `cuda_stack_kernels::ops::sum_dim` / `max_dim`, which pick the kernel by shape (rows, split rows
//! or columns) without moving data; a strided tensor is made contiguous first.

use super::renamed;
use crate::tensor::error::{Result, TensorError};
use crate::tensor::{Tensor, TensorElement};
use cuda_stack_driver::{DeviceSlice, Stream};
use cuda_stack_kernels::Kernels;

/// A dispatch entry for a full reduction into one element of `R`.
type Full<T, R> = fn(&Kernels, &Stream, &DeviceSlice<T>, &mut DeviceSlice<R>) -> Result<()>;
/// A dispatch entry for a reduction `[outer, size, inner] → [outer, inner]`.
type Dim<T, R> = fn(
    &Kernels,
    &Stream,
    &DeviceSlice<T>,
    &mut DeviceSlice<R>,
    (usize, usize, usize),
) -> Result<()>;

impl<T: TensorElement> Tensor<T> {
    fn reduce_all<R: TensorElement>(&self, op: &'static str, f: Full<T, R>) -> Result<Tensor<R>> {
        let x = self.contiguous()?;
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let xv = x.dense()?;
        // SAFETY: the finalize kernel of every full reduction writes its one output element
        // (the identity, or NaN for a mean, when the input is empty).
        let storage = unsafe { exec.storage_with(1, |out| f(&k, exec.stream(), &xv, out)) }
            .map_err(|e| renamed(e.with_shape(self.shape()), op))?;
        Tensor::from_storage(storage, &[])
    }

    /// Reduces dimension `dim` with `f`; `empty_ok` says whether a zero-size `dim` is allowed.
    fn reduce_dim<R: TensorElement>(
        &self,
        op: &'static str,
        dim: isize,
        keepdim: bool,
        empty_ok: bool,
        f: Dim<T, R>,
    ) -> Result<Tensor<R>> {
        if self.rank() == 0 {
            // A scalar has one "dimension" for reductions, as in PyTorch: 0 or -1.
            if dim != 0 && dim != -1 {
                return Err(TensorError::DimOutOfRange {
                    op,
                    dim,
                    rank: 0,
                    shape: Vec::new(),
                });
            }
            return self.unsqueeze(0)?.reduce_dim(op, 0, false, empty_ok, f);
        }
        let d = self.layout.dim(op, dim)?;
        let cols = self.shape()[d];
        if cols == 0 && !empty_ok {
            return Err(TensorError::EmptyReduction {
                op,
                what: format!("dimension {d}"),
                shape: self.shape().to_vec(),
            });
        }
        let outer: usize = self.shape()[..d].iter().product();
        let inner: usize = self.shape()[d + 1..].iter().product();
        let x = self.contiguous()?;
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let xv = x.dense()?;
        // SAFETY: the dimension reductions write every one of the outer · inner outputs (0 /
        // -inf for an empty dimension, which only sums reach).
        let storage = unsafe {
            exec.storage_with(outer * inner, |out| {
                f(&k, exec.stream(), &xv, out, (outer, cols, inner))
            })
        }
        .map_err(|e| renamed(e.with_shape(self.shape()), op))?;
        let mut shape = self.shape().to_vec();
        if keepdim {
            shape[d] = 1;
        } else {
            shape.remove(d);
        }
        Tensor::from_storage(storage, &shape)
    }

    /// The sum of all elements as a 0-d tensor (`tensor.sum()`); f16/bf16 accumulate in f32
    /// and round once to their own dtype, i32 gives i64 (exact). 0 for an empty tensor.
    pub fn sum_all(&self) -> Result<Tensor<T::Sum>> {
        T::round_sum(self.reduce_all("sum", T::sum_all)?)
    }

    /// The sum over dimension `dim`, which is removed (`tensor.sum(dim)`). f32, f64, f16/bf16
    /// (accumulated in f32, rounded once).
    pub fn sum(&self, dim: isize) -> Result<Tensor<T::Sum>> {
        T::round_sum(self.reduce_dim("sum", dim, false, true, T::sum_dim)?)
    }

    /// [`Tensor::sum`] keeping `dim` with size 1 (`keepdim=True`).
    pub fn sum_keepdim(&self, dim: isize) -> Result<Tensor<T::Sum>> {
        T::round_sum(self.reduce_dim("sum", dim, true, true, T::sum_dim)?)
    }

    /// The mean of all elements as a 0-d tensor (`tensor.mean()`); NaN when empty. Floating
    /// dtypes (f16/bf16 accumulated in f32, rounded once).
    pub fn mean_all(&self) -> Result<Tensor<T::Sum>> {
        T::round_sum(self.reduce_all("mean", T::mean_all)?)
    }

    /// The mean over dimension `dim`, which is removed (`tensor.mean(dim)`): the row sums
    /// scaled by `1 / size(dim)` (so within an ulp of a division). NaN for an empty `dim`.
    pub fn mean(&self, dim: isize) -> Result<Tensor<T::Sum>> {
        T::round_sum(self.mean_dim(dim, false)?)
    }

    /// [`Tensor::mean`] keeping `dim` with size 1.
    pub fn mean_keepdim(&self, dim: isize) -> Result<Tensor<T::Sum>> {
        T::round_sum(self.mean_dim(dim, true)?)
    }

    /// The mean in the accumulator type (scaled before the one rounding to `T::Sum`).
    fn mean_dim(&self, dim: isize, keepdim: bool) -> Result<Tensor<T::SumAcc>> {
        let sums = self.reduce_dim("mean", dim, keepdim, true, T::sum_dim)?;
        let count = if self.rank() == 0 {
            1
        } else {
            self.shape()[self.layout.dim("mean", dim)?]
        };
        let alpha = <T::SumAcc as TensorElement>::scalar_from_f64(1.0 / count as f64);
        sums.scale(alpha).map_err(|e| renamed(e, "mean"))
    }

    /// The largest element as a 0-d tensor (`tensor.max()`); NaN if any element is NaN.
    /// f16/bf16 give their own dtype (exactly one of the elements). An empty tensor is an error ([`TensorError::EmptyReduction`]), as in
    /// PyTorch.
    pub fn max_all(&self) -> Result<Tensor<T::Max>> {
        if self.numel() == 0 {
            return Err(TensorError::EmptyReduction {
                op: "max",
                what: "all elements".into(),
                shape: self.shape().to_vec(),
            });
        }
        T::round_max(self.reduce_all("max", T::max_all)?)
    }

    /// The maximum over dimension `dim`, which is removed (`torch.amax(t, dim)`: values only, no
    /// indices). f32, f64, f16/bf16. A zero-size `dim` is an error.
    pub fn max(&self, dim: isize) -> Result<Tensor<T::Max>> {
        T::round_max(self.reduce_dim("max", dim, false, false, T::max_dim)?)
    }

    /// [`Tensor::max`] keeping `dim` with size 1.
    pub fn max_keepdim(&self, dim: isize) -> Result<Tensor<T::Max>> {
        T::round_max(self.reduce_dim("max", dim, true, false, T::max_dim)?)
    }
}
