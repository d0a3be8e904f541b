//! Views (no copy: a new layout over the same storage) and `contiguous()` (a copy, only when
//! needed).

use super::error::{Result, TensorError};
use super::{Tensor, TensorElement};
use cuda_stack_kernels::ops;
use std::ops::{Bound, RangeBounds};

impl<T: TensorElement> Tensor<T> {
    /// `len` elements of dimension `dim` from `start` (`tensor.narrow(dim, start, len)`): a view.
    /// Negative `dim` counts from the end.
    pub fn narrow(&self, dim: isize, start: usize, len: usize) -> Result<Self> {
        Ok(self.with_layout(self.layout.narrow(dim, start, len)?))
    }

    /// The elements of dimension `dim` in `range` (`t[:, 2..5]` is `t.slice(1, 2..5)`): a view.
    pub fn slice(&self, dim: isize, range: impl RangeBounds<usize>) -> Result<Self> {
        let d = self.layout.dim("slice", dim)?;
        let size = self.shape()[d];
        let start = match range.start_bound() {
            Bound::Included(&s) => Some(s),
            Bound::Excluded(&s) => s.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.checked_add(1),
            Bound::Excluded(&e) => Some(e),
            Bound::Unbounded => Some(size),
        };
        match (start, end) {
            (Some(s), Some(e)) if s <= e && e <= size => self.narrow(dim, s, e - s),
            _ => Err(TensorError::IndexOutOfRange {
                op: "slice",
                dim: d,
                what: format!(
                    "range {:?}..{:?} (must satisfy start <= end <= {size})",
                    range.start_bound(),
                    range.end_bound()
                ),
                size,
                shape: self.shape().to_vec(),
            }),
        }
    }

    /// The sub-tensor at `index` of dimension `dim`, without that dimension (`t[index]` for
    /// `dim == 0`, `tensor.select(dim, index)`): a view.
    pub fn select(&self, dim: isize, index: usize) -> Result<Self> {
        Ok(self.with_layout(self.layout.select(dim, index)?))
    }

    /// Dimensions `dim0` and `dim1` swapped (`tensor.transpose(dim0, dim1)`): a view.
    pub fn transpose(&self, dim0: isize, dim1: isize) -> Result<Self> {
        Ok(self.with_layout(self.layout.transpose(dim0, dim1)?))
    }

    /// The transpose of a matrix (`tensor.t()`): a view. Tensors of rank below 2 are returned
    /// as they are; rank above 2 is an error, as in PyTorch.
    pub fn t(&self) -> Result<Self> {
        match self.rank() {
            0 | 1 => Ok(self.clone()),
            2 => self.transpose(0, 1),
            r => Err(TensorError::InvalidArgument {
                op: "t",
                problem: format!(
                    "t() expects a tensor with at most 2 dimensions, but this one has {r} \
                     (shape {:?}); use transpose(dim0, dim1)",
                    self.shape()
                ),
            }),
        }
    }

    /// The dimensions reordered: dimension `i` of the result is `dims[i]` of `self`
    /// (`tensor.permute(dims)`): a view.
    pub fn permute(&self, dims: &[isize]) -> Result<Self> {
        Ok(self.with_layout(self.layout.permute(dims)?))
    }

    /// The same elements with shape `shape` (`tensor.view(shape)`): a view. The tensor must be
    /// contiguous ([`TensorError::NonContiguousView`] otherwise, with its shape and strides) and
    /// `shape` must have the same element count.
    pub fn view(&self, shape: &[usize]) -> Result<Self> {
        Ok(self.with_layout(self.layout.reshape("view", shape)?))
    }

    /// Like [`Tensor::view`]: a view of a contiguous tensor, an error otherwise. Unlike
    /// `torch.reshape`, it never copies silently; write `t.contiguous()?.reshape(..)` to copy.
    pub fn reshape(&self, shape: &[usize]) -> Result<Self> {
        Ok(self.with_layout(self.layout.reshape("reshape", shape)?))
    }

    /// The elements as one dimension (a view of a contiguous tensor, see [`Tensor::view`]).
    pub fn flatten(&self) -> Result<Self> {
        Ok(self.with_layout(self.layout.reshape("flatten", &[self.numel()])?))
    }

    /// The tensor broadcast to `shape` (`tensor.expand(shape)`): a view in which size-1
    /// dimensions (and new leading ones) repeat with stride 0.
    pub fn expand(&self, shape: &[usize]) -> Result<Self> {
        Ok(self.with_layout(self.layout.expand(shape)?))
    }

    /// Same as [`Tensor::expand`] (`torch.broadcast_to`).
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<Self> {
        self.expand(shape)
    }

    /// A size-1 dimension inserted at `dim` (`tensor.unsqueeze(dim)`): a view.
    pub fn unsqueeze(&self, dim: isize) -> Result<Self> {
        Ok(self.with_layout(self.layout.unsqueeze(dim)?))
    }

    /// Dimension `dim` removed if its size is 1 (`tensor.squeeze(dim)`): a view.
    pub fn squeeze(&self, dim: isize) -> Result<Self> {
        Ok(self.with_layout(self.layout.squeeze(dim)?))
    }

    /// Whether the elements are stored in row-major order without gaps (PyTorch's rules:
    /// strides of size-1 dimensions do not matter, empty tensors are contiguous).
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }

    /// A contiguous tensor with the same elements: `self` (another handle, no copy) when it is
    /// already contiguous, else a new storage gathered by the `strided_copy` kernel on the
    /// device's default stream.
    pub fn contiguous(&self) -> Result<Self> {
        const OP: &str = "contiguous";
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        let layout = self.layout.to_strided(OP)?;
        let exec = self.exec()?;
        let k = exec.kernels()?;
        // SAFETY: `strided_copy` writes all `numel` elements of its output (or fails: it checks
        // that the view lies inside the storage and that the output has `numel` elements).
        let storage = unsafe {
            exec.storage_with(self.numel(), |out| {
                Ok(ops::strided_copy(
                    &k,
                    exec.stream(),
                    self.storage.readable()?,
                    &layout,
                    out,
                )?)
            })?
        };
        Self::from_storage(storage, self.shape())
    }
}
