//! `zero_pad(dim, before, after)`: a tensor placed inside zeros along one dimension — the
//! backward pass of `narrow` (PyTorch's `slice_backward`), and `F.pad` with zeros on one dim.

use crate::tensor::error::{Result, TensorError};
use crate::tensor::{Tensor, TensorElement};

impl<T: TensorElement> Tensor<T> {
    /// A tensor of `self`'s shape except `shape[dim] + before + after` along `dim`: zeros, with
    /// `self` at positions `before .. before + shape[dim]` of that dimension. One memset and
    /// one device-to-device copy (after moving `dim` first, where the region is contiguous);
    /// the result is a view of that buffer (contiguous when `dim` is 0).
    pub fn zero_pad(&self, dim: isize, before: usize, after: usize) -> Result<Tensor<T>> {
        const OP: &str = "zero_pad";
        let d = self.layout.dim(OP, dim)?;
        let len = self.shape()[d];
        let overflow = || TensorError::SizeOverflow {
            op: OP,
            shape: self.shape().to_vec(),
        };
        let full = len
            .checked_add(before)
            .and_then(|v| v.checked_add(after))
            .ok_or_else(overflow)?;
        let g = if d == 0 {
            self.contiguous()?
        } else {
            self.transpose(0, d as isize)?.contiguous()?
        };
        let inner: usize = g.shape()[1..].iter().product();
        let mut shape = g.shape().to_vec();
        shape[0] = full;
        let total = full.checked_mul(inner).ok_or_else(overflow)?;
        let exec = self.exec()?;
        let gv = g.dense()?;
        let (start, end) = (before * inner, (before + len) * inner);
        // SAFETY: every element is written: the whole buffer is zeroed, then the middle region
        // is overwritten with `self` (both queued on the default stream, in that order).
        let storage = unsafe {
            exec.storage_with(total, |buf| {
                exec.stream().memset_zeros(buf)?;
                let mut middle = buf.slice_mut(start..end)?;
                exec.stream().memcpy_dtod(&gv, &mut middle)?;
                Ok(())
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        let padded = Tensor::from_storage(storage, &shape)?;
        if d == 0 {
            Ok(padded)
        } else {
            padded.transpose(0, d as isize)
        }
    }
}
