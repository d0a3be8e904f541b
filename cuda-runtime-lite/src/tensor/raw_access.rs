//! The storage behind a tensor, for crates that launch their own kernels on tensors (such as
//! `cuda-jit`'s run-time compiled kernels): read access to the storage a tensor views, write
//! access through an exclusive handle (copy-on-write, like the in-place ops), and tensors over
//! buffers such a kernel wrote.
//!
//! These keep the tensor layer's rules: a kernel reads a tensor through its storage and
//! [`Layout`](super::Layout) (every element `offset + Σ iₖ·strideₖ` lies inside the storage),
//! writes only a storage no other handle shares, and queues its work on the tensor's device's
//! current stream ([`crate::stream_for`]); `cuda-driver` orders the buffers across streams.

use super::error::{Result, TensorError};
use super::layout::numel_of;
use super::storage::Storage;
use super::{Tensor, TensorElement};
use crate::CachedBuffer;
use cuda_driver::DeviceSlice;
use std::sync::Arc;

impl<T: TensorElement> Tensor<T> {
    /// The whole storage this tensor views, read-only (`tensor.untyped_storage()`). Element
    /// `(i₀, …)` of the tensor is `storage[offset + Σ iₖ·strides[k]]` ([`Tensor::layout`]), always
    /// inside it.
    pub fn storage(&self) -> &DeviceSlice<T> {
        self.storage.slice()
    }

    /// The storage for writing, after making this handle exclusive: if it shares its storage
    /// or is a view, it first becomes a private contiguous copy (copy-on-write, see
    /// [`Tensor::is_exclusive`]). Afterwards the tensor is contiguous at offset 0 and covers the
    /// returned slice exactly, so element `k` in row-major order is `slice[k]`.
    pub fn storage_mut(&mut self) -> Result<&mut DeviceSlice<T>> {
        let (_, slice) = self.exclusive_mut()?;
        Ok(slice)
    }

    /// A contiguous tensor of `shape` over `buf` (a buffer from a device's caching allocator,
    /// typically written by a kernel queued on the device's current stream). The buffer must
    /// hold exactly the shape's element count.
    pub fn from_cached_buffer(buf: CachedBuffer<T>, shape: &[usize]) -> Result<Self> {
        const OP: &str = "from_cached_buffer";
        let n = numel_of(shape).ok_or_else(|| TensorError::SizeOverflow {
            op: OP,
            shape: shape.to_vec(),
        })?;
        if n != buf.len() {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: vec![buf.len()],
                rhs: shape.to_vec(),
                why: format!(
                    "shape {shape:?} has {n} elements but the buffer holds {}",
                    buf.len()
                ),
            });
        }
        let device = buf.stream().context().device().ordinal();
        Self::from_storage(Arc::new(Storage::new(buf, device)), shape)
    }
}
