//! Your own kernels on tensors (seed 004's extensions): the device memory behind a tensor and
//! where its work is queued, for a crate that launches kernels `cuda-kernels` does not have
//! (e.g. ones `cuda-build` compiled in its build script).

use super::error::{Result, TensorError};
use super::{Tensor, TensorElement};
use cuda_driver::{Context, DeviceSlice, DeviceView, Stream};

impl<T: TensorElement> Tensor<T> {
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
