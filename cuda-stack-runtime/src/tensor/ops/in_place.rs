//! Writing into a tensor's own storage: the in-place ops (optimizer updates, `copy_from_`,
//! `increment_`), PyTorch's trailing-underscore methods.
//!
//! Tensors share storages freely (views, clones, tensors saved for a backward pass), and every
//! other op writes a new storage, so sharing is never observable. An in-place op therefore writes
//! only through a handle that is the **only** one of its storage and covers it exactly
//! (`Arc::get_mut`: no other `Tensor` can see the write); when the tensor is shared or a view,
//! it first becomes a private copy (copy-on-write), and the other handles keep the old values.
//! [`Tensor::is_exclusive`] says which will happen. A CUDA graph that captured work on the
//! storage sees the new values at its next replay (that is how static inputs are fed).

use crate::tensor::error::{Result, TensorError};
use crate::tensor::storage::Exec;
use crate::tensor::{Tensor, TensorElement};
use cuda_stack_driver::DeviceSlice;
use std::sync::Arc;

impl<T: TensorElement> Tensor<T> {
    /// Whether an in-place op on this handle writes its storage in place: no other handle shares
    /// the storage and the tensor covers it exactly (contiguous, offset 0, every element).
    pub fn is_exclusive(&self) -> bool {
        Arc::strong_count(&self.storage) == 1
            && Arc::weak_count(&self.storage) == 0
            && self.layout.offset() == 0
            && self.is_contiguous()
            && self.numel() == self.storage.len()
    }

    /// How many `Tensor` handles share this tensor's storage (clones and views included): 1 when
    /// this is the only one. (A CUDA graph that rewrites a storage in place checks this count
    /// before each replay.)
    pub fn storage_handles(&self) -> usize {
        Arc::strong_count(&self.storage)
    }

    /// A copy of this tensor's elements in a storage of its own, contiguous (PyTorch's
    /// `t.clone()`: `Clone` here gives another handle to the same storage, which is enough for
    /// a value nobody writes in place, but not for one a CUDA graph rewrites at every replay).
    pub fn deep_copy(&self) -> Result<Tensor<T>> {
        let exec = self.exec()?;
        let src = self.contiguous()?;
        let view = src.dense()?;
        // SAFETY: the copy writes every element of the new storage.
        let storage = unsafe {
            exec.storage_with(src.numel(), |out| {
                Ok(exec.stream().memcpy_dtod(&view, out)?)
            })
        }?;
        Tensor::from_storage(storage, src.shape())
    }

    /// The storage as one mutable slice, after making this handle exclusive (a private dense
    /// copy when it was shared or a view), and where to queue work on it.
    pub(crate) fn exclusive_mut(&mut self) -> Result<(Exec, &mut DeviceSlice<T>)> {
        if !self.is_exclusive() {
            *self = self.deep_copy()?;
        }
        let exec = self.exec()?;
        let storage =
            Arc::get_mut(&mut self.storage).ok_or_else(|| TensorError::InvalidArgument {
                op: "in-place op",
                problem: "internal error: a fresh storage is shared".into(),
            })?;
        let slice = storage.slice_mut()?;
        Ok((exec, slice))
    }

    /// Copies `src`'s values into this tensor's storage (same shape): `tensor.copy_(src)`. In
    /// place when [`Tensor::is_exclusive`]; the way to feed new data to a CUDA graph's static
    /// input between replays.
    pub fn copy_from_(&mut self, src: &Tensor<T>) -> Result<()> {
        const OP: &str = "copy_from_";
        self.same_device(OP, src)?;
        if src.shape() != self.shape() {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: src.shape().to_vec(),
                why: "copy_from_ keeps the destination's shape: the source must have it".into(),
            });
        }
        let s = src.contiguous()?;
        let view = s.dense()?;
        let (exec, dst) = self.exclusive_mut()?;
        exec.stream().memcpy_dtod(&view, dst)?;
        Ok(())
    }
}

impl<T: TensorElement> Tensor<T> {
    /// Copies `src`'s elements (row-major) into this tensor's storage from flat element
    /// `offset` on (`flat[offset..offset + src.numel()].copy_(src.flatten())`), in place when
    /// [`Tensor::is_exclusive`] (a copy-on-write otherwise). How a flat buffer is filled piece by
    /// piece (data-parallel training's gradient buckets).
    pub fn copy_from_at_(&mut self, offset: usize, src: &Tensor<T>) -> Result<()> {
        const OP: &str = "copy_from_at_";
        self.same_device(OP, src)?;
        let n = src.numel();
        let end = offset.checked_add(n).filter(|&e| e <= self.numel());
        let Some(end) = end else {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: src.shape().to_vec(),
                why: format!(
                    "{n} elements from offset {offset} do not fit in {} elements",
                    self.numel()
                ),
            });
        };
        let s = src.contiguous()?;
        let view = s.dense()?;
        let (exec, dst) = self.exclusive_mut()?;
        let mut part = dst.slice_mut(offset..end)?;
        exec.stream().memcpy_dtod(&view, &mut part)?;
        Ok(())
    }
}

impl Tensor<i32> {
    /// Adds one to every element, in place (the step counters of a graph-capturable optimizer).
    pub fn increment_(&mut self) -> Result<()> {
        let (exec, dst) = self.exclusive_mut()?;
        let k = exec.kernels()?;
        cuda_stack_kernels::ops::increment_counters(&k, exec.stream(), dst)?;
        Ok(())
    }

    /// Adds one to element `index` (of the flat storage), in place.
    pub fn increment_at_(&mut self, index: usize) -> Result<()> {
        let n = self.numel();
        if index >= n {
            return Err(TensorError::IndexOutOfRange {
                op: "increment_at_",
                dim: 0,
                what: format!("index {index}"),
                size: n,
                shape: self.shape().to_vec(),
            });
        }
        let (exec, dst) = self.exclusive_mut()?;
        let k = exec.kernels()?;
        let mut one = dst.slice_mut(index..index + 1)?;
        cuda_stack_kernels::ops::increment_counters(&k, exec.stream(), &mut one)?;
        Ok(())
    }
}
