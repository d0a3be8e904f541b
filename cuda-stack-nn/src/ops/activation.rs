//! Activations: `relu`, `tanh`, GPT-2's `gelu`, and seed 004's fused `relu(x · scale + bias)`.

use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::GradElement;

impl<T: GradElement> Var<T> {
    /// `max(x, 0)`. Backward: the `relu_bwd` kernel (`g` where `x > 0`), saving `x`.
    pub fn relu(&self) -> Result<Var<T>> {
        let x = self.value();
        let value = x.relu()?;
        Ok(Var::from_op(value, "relu", &[self], move |g| {
            Ok(vec![Some(x.relu_backward(g)?)])
        }))
    }

    /// `tanh(x)`. Backward: `g · (1 − y²)` from the saved output `y`.
    pub fn tanh(&self) -> Result<Var<T>> {
        let y = self.value().tanh()?;
        let saved = y.clone();
        Ok(Var::from_op(y, "tanh", &[self], move |g| {
            Ok(vec![Some(saved.tanh_backward(g)?)])
        }))
    }

    /// Seed 004's fused op `relu(self · scale + bias)`, `bias` of shape `[last dim]`, in one
    /// kernel; backward in one kernel too (`bias_relu_bwd`: `grad_x` and the column sums for
    /// `grad_bias` together). Saves `x` and `bias`.
    pub fn bias_relu(&self, bias: &Var<T>, scale: f64) -> Result<Var<T>> {
        let (x, b) = (self.value(), bias.value());
        let s = T::scalar_from_f64(scale);
        let value = x.bias_relu(&b, s)?;
        let (nx, nb) = (self.requires_grad(), bias.requires_grad());
        Ok(Var::from_op(value, "bias_relu", &[self, bias], move |g| {
            let (gx, gb) = x.bias_relu_backward(&b, s, g)?;
            Ok(vec![nx.then_some(gx), nb.then_some(gb)])
        }))
    }

    /// GELU, the tanh form GPT-2 uses (`F.gelu(x, approximate='tanh')`). Backward:
    /// `g · gelu'(x)` from the saved input, one kernel.
    pub fn gelu(&self) -> Result<Var<T>> {
        let x = self.value();
        let value = x.gelu()?;
        Ok(Var::from_op(value, "gelu", &[self], move |g| {
            Ok(vec![Some(x.gelu_backward(g)?)])
        }))
    }
}
