//! `softmax` and `log_softmax` along a dimension.

use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::GradElement;

impl<T: GradElement> Var<T> {
    /// `softmax(x, dim)`. Backward from the saved output `y`: `y · (g − Σ_dim g·y)` (one row
    /// kernel).
    pub fn softmax(&self, dim: isize) -> Result<Var<T>> {
        let y = self.value().softmax(dim)?;
        let saved = y.clone();
        Ok(Var::from_op(y, "softmax", &[self], move |g| {
            Ok(vec![Some(saved.softmax_backward(g, dim)?)])
        }))
    }

    /// `log_softmax(x, dim)`. Backward from the saved output `y`: `g − exp(y) · Σ_dim g`.
    pub fn log_softmax(&self, dim: isize) -> Result<Var<T>> {
        let y = self.value().log_softmax(dim)?;
        let saved = y.clone();
        Ok(Var::from_op(y, "log_softmax", &[self], move |g| {
            Ok(vec![Some(saved.log_softmax_backward(g, dim)?)])
        }))
    }
}
