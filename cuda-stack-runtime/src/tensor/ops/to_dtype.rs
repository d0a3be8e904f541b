//! `to_dtype::<U>()`: `tensor.to(dtype)` — a converted copy on the same device.

use crate::tensor::error::{Result, TensorError};
use crate::tensor::{Tensor, TensorElement};
use std::any::Any;

impl<T: TensorElement> Tensor<T> {
    /// The elements converted to `U` (`tensor.to(torch.float16)`, `.half()`, `.float()` …), as
    /// a new contiguous tensor of the same shape on the same device; to the same dtype, `self`
    /// itself (no copy, as PyTorch). One kernel, each element rounded once: floats narrow by
    /// round-to-nearest-even, float → i32 truncates toward zero and saturates with NaN → 0
    /// (Rust's `as`). Pairs: f32 ↔ f64 / f16 / bf16 / i32, f16 ↔ bf16, f64 ↔ i32; the others
    /// ([`TensorError::UnsupportedDType`]) would round twice — convert through f32.
    pub fn to_dtype<U: TensorElement>(&self) -> Result<Tensor<U>> {
        const OP: &str = "to_dtype";
        if let Some(same) = (self as &dyn Any).downcast_ref::<Tensor<U>>() {
            return Ok(same.clone());
        }
        let x = self.contiguous()?;
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let xv = x.dense()?;
        // SAFETY: the cast kernel writes every element of the output (or fails).
        let storage = unsafe {
            exec.storage_with::<U>(x.numel(), |out| {
                Ok(cuda_stack_kernels::ops::cast(&k, exec.stream(), &xv, out)?)
            })
        }
        .map_err(|e| match e {
            TensorError::Kernel(cuda_stack_kernels::Error::Invalid { problem, .. }) => {
                TensorError::UnsupportedDType {
                    op: OP,
                    dtype: T::DTYPE,
                    shape: self.shape().to_vec(),
                    why: format!("to {}: {problem}", U::DTYPE),
                }
            }
            other => other.with_shape(self.shape()),
        })?;
        Tensor::from_storage(storage, self.shape())
    }
}
