//! GELU (the tanh form GPT-2 uses) and its backward pass, on tensors (f32, f64, f16, bf16).

use super::activation_grad::check_grad_shape;
use crate::tensor::error::Result;
use crate::tensor::{FloatElement, Tensor};

impl<T: FloatElement> Tensor<T> {
    /// `0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))`, elementwise
    /// (`F.gelu(x, approximate='tanh')`); contiguous, `self`'s shape. f16/bf16 computed in f32.
    pub fn gelu(&self) -> Result<Tensor<T>> {
        let x = self.contiguous()?;
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let xv = x.dense()?;
        // SAFETY: the kernel writes every element.
        let storage =
            unsafe { exec.storage_with(x.numel(), |out| T::gelu_fwd(&k, exec.stream(), &xv, out)) }
                .map_err(|e| e.with_shape(self.shape()))?;
        Tensor::from_storage(storage, self.shape())
    }

    /// The gradient of [`Tensor::gelu`] from its **input** `self` and the output's gradient:
    /// `grad · gelu'(self)`.
    pub fn gelu_backward(&self, grad: &Tensor<T>) -> Result<Tensor<T>> {
        check_grad_shape("gelu_backward", self, grad)?;
        let (x, g) = (self.contiguous()?, grad.contiguous()?);
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (xv, gv) = (x.dense()?, g.dense()?);
        // SAFETY: the kernel writes every element.
        let storage = unsafe {
            exec.storage_with(x.numel(), |out| {
                T::gelu_bwd(&k, exec.stream(), &xv, &gv, out)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Tensor::from_storage(storage, self.shape())
    }
}
