//! `dropout` as an autograd op (the Philox mask is regenerated in the backward pass).

use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::GradElement;

impl<T: GradElement> Var<T> {
    /// Inverted dropout with the Philox mask of `(seed, offset)` (see
    /// [`Tensor::dropout`](cuda_stack_runtime::Tensor::dropout)): kept elements scaled by
    /// `1 / (1 − p)`. Backward: the same mask regenerated on the gradient (nothing is stored).
    pub fn dropout(&self, p: f64, seed: u64, offset: u64) -> Result<Var<T>> {
        let value = self.value().dropout(p, seed, offset)?;
        Ok(Var::from_op(value, "dropout", &[self], move |g| {
            Ok(vec![Some(g.dropout(p, seed, offset)?)])
        }))
    }
}
