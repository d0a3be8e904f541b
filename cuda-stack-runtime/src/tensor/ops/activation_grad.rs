//! The backward passes of `relu` and `tanh` on tensors (for autograd).

use crate::tensor::error::{Result, TensorError};
use crate::tensor::{GradElement, Tensor, TensorElement};
use cuda_stack_driver::{DeviceSlice, Stream};
use cuda_stack_kernels::Kernels;

/// The signature of a `(saved, grad) -> grad_in` kernel of [`GradElement`].
type PairKernel<T> =
    fn(&Kernels, &Stream, &DeviceSlice<T>, &DeviceSlice<T>, &mut DeviceSlice<T>) -> Result<()>;

/// `grad` must have `saved`'s shape (and device).
pub(crate) fn check_grad_shape<T: TensorElement>(
    op: &'static str,
    saved: &Tensor<T>,
    grad: &Tensor<T>,
) -> Result<()> {
    saved.same_device(op, grad)?;
    if saved.shape() != grad.shape() {
        return Err(TensorError::ShapeMismatch {
            op,
            lhs: saved.shape().to_vec(),
            rhs: grad.shape().to_vec(),
            why: "the gradient must have the shape of the forward's tensor".into(),
        });
    }
    Ok(())
}

impl<T: GradElement> Tensor<T> {
    fn pointwise_grad(
        &self,
        op: &'static str,
        grad: &Tensor<T>,
        f: PairKernel<T>,
    ) -> Result<Tensor<T>> {
        check_grad_shape(op, self, grad)?;
        let (a, g) = (self.contiguous()?, grad.contiguous()?);
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (av, gv) = (a.dense()?, g.dense()?);
        // SAFETY: the pointwise backward kernels write every element of their output.
        let storage =
            unsafe { exec.storage_with(a.numel(), |out| f(&k, exec.stream(), &av, &gv, out)) }
                .map_err(|e| e.with_shape(self.shape()))?;
        Tensor::from_storage(storage, self.shape())
    }

    /// The gradient of `relu` at its input `self`: `grad` where `self > 0`, else 0 (0 at 0, as
    /// PyTorch). f32 and f64.
    pub fn relu_backward(&self, grad: &Tensor<T>) -> Result<Tensor<T>> {
        self.pointwise_grad("relu_backward", grad, T::relu_bwd)
    }

    /// The gradient of `tanh` from its **output** `self = tanh(x)`: `grad · (1 − self²)`.
    pub fn tanh_backward(&self, grad: &Tensor<T>) -> Result<Tensor<T>> {
        self.pointwise_grad("tanh_backward", grad, T::tanh_bwd)
    }
}
