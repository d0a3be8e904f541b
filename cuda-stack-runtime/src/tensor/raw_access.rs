//! Your own kernels on tensors (seed 004's extensions, `cuda-stack-build`'s ahead-of-time kernels,
//! `cuda-stack-jit`'s run-time compiled ones): the device memory behind a tensor and where its work is
//! queued. Read access to the storage a tensor views (whole, or as one dense slice), write access
//! through an exclusive handle (copy-on-write, like the in-place ops), tensors over buffers such
//! a kernel wrote, and the tensor's context and stream.
//!
//! These keep the tensor layer's rules: a kernel reads a tensor through its storage and
//! [`Layout`](super::Layout) (every element `offset + Σ iₖ·strideₖ` lies inside the storage),
//! writes only a storage no other handle shares, and queues its work on the tensor's device's
//! current stream ([`crate::stream_for`]); `cuda-stack-driver` orders the buffers across streams.

use super::error::{Result, TensorError};
use super::layout::numel_of;
use super::storage::Storage;
use super::{Tensor, TensorElement};
use crate::CachedBuffer;
use cuda_stack_driver::{Context, DeviceSlice, DeviceView, Stream};
use std::sync::Arc;

impl<T: TensorElement> Tensor<T> {
    /// The whole storage this tensor views, read-only (`tensor.untyped_storage()`). Element
    /// `(i₀, …)` of the tensor is `storage[offset + Σ iₖ·strides[k]]` ([`Tensor::layout`]), always
    /// inside it. [`TensorError::NotYetComputed`] for a tensor a CUDA graph capture produced,
    /// before the graph has been launched (it holds no value yet).
    pub fn storage(&self) -> Result<&DeviceSlice<T>> {
        self.storage.readable()
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
        let stream = buf.stream().clone();
        let device = stream.context().device().ordinal();
        // Written by work on the stream it was allocated on, as a rule (a capture's, when that
        // stream is capturing: then the tensor has no value until the graph runs).
        Self::from_storage(Arc::new(Storage::new(buf, device, &stream)), shape)
    }

    /// The elements of a contiguous tensor as one read-only device slice, in row-major order
    /// (no copy; a view's slice starts at its offset). [`TensorError::NonContiguousView`] for
    /// a non-contiguous view: call [`Tensor::contiguous`] first.
    pub fn as_slice(&self) -> Result<DeviceView<'_, T>> {
        if !self.is_contiguous() {
            return Err(TensorError::NonContiguousView {
                op: "as_slice",
                shape: self.shape().to_vec(),
                strides: self.strides().to_vec(),
                requested: self.shape().to_vec(),
            });
        }
        self.dense()
    }

    /// The elements as one mutable device slice, to write in place (a custom kernel's output).
    /// A tensor whose storage another handle shares, or a view, first gets a private dense copy
    /// (copy-on-write, as every in-place op here), so no other tensor ever sees the writes.
    /// Make outputs with [`Tensor::full_like`] (on the input's device) or [`Tensor::zeros`].
    pub fn as_mut_slice(&mut self) -> Result<&mut DeviceSlice<T>> {
        Ok(self.exclusive_mut()?.1)
    }

    /// The context of this tensor's device (a custom op loads its module into it).
    pub fn context(&self) -> Result<Context> {
        Ok(self.exec()?.runtime().context().clone())
    }

    /// The stream this tensor's ops queue on: the calling thread's current stream for its
    /// device ([`crate::use_stream`]), else the runtime's default stream. A custom kernel
    /// launched on it runs in order with the tensor ops around it.
    pub fn stream(&self) -> Result<Stream> {
        Ok(self.exec()?.stream().clone())
    }
}
