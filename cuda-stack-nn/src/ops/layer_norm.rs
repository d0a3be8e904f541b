//! `layer_norm` (`F.layer_norm` over the last dimension) as an autograd op.

use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::{GradElement, Tensor};

impl<T: GradElement> Var<T> {
    /// LayerNorm over the last dimension: `(x − mean) · rstd · weight + bias`, `weight` and
    /// `bias` of shape `[C]`. Forward: one fused kernel, saving `x`, `weight` and the per-row
    /// `mean` and `rstd`; backward: the `dx` kernel, which also adds the gradient already
    /// pending for `self` (a residual stream's: no separate add), and the deterministic
    /// `dweight`/`dbias` column sums (bit-identical on every run).
    pub fn layer_norm(&self, weight: &Var<T>, bias: &Var<T>, eps: f64) -> Result<Var<T>> {
        let (x, w) = (self.value(), weight.value());
        let (y, mean, rstd) = x.layer_norm(&w, &bias.value(), eps)?;
        Ok(layer_norm_node(y, self, weight, bias, x, w, mean, rstd))
    }

    /// The residual stream of a pre-LayerNorm transformer: `(sum, y)` with `sum = self + res`
    /// (same shapes, no broadcasting) and `y = sum.layer_norm(weight, bias, eps)`, both from
    /// one kernel ([`Tensor::add_layer_norm`]), the same values as [`Var::add`] then
    /// [`Var::layer_norm`]. In the backward, the LayerNorm adds `sum`'s gradient from the rest
    /// of the stream into its `dx` kernel (as [`Var::layer_norm`] always does), so a block's
    /// residual adds cost no kernel of their own either way.
    pub fn add_layer_norm(
        &self,
        res: &Var<T>,
        weight: &Var<T>,
        bias: &Var<T>,
        eps: f64,
    ) -> Result<(Var<T>, Var<T>)> {
        let (x, w) = (self.value(), weight.value());
        let (sum, y, mean, rstd) = x.add_layer_norm(&res.value(), &w, &bias.value(), eps)?;
        let (na, nb) = (self.requires_grad(), res.requires_grad());
        let sum = Var::from_op(sum, "add", &[self, res], move |g| {
            Ok(vec![na.then(|| g.clone()), nb.then(|| g.clone())])
        });
        let s = sum.value();
        let y = layer_norm_node(y, &sum, weight, bias, s, w, mean, rstd);
        Ok((sum, y))
    }
}

/// The autograd node of a LayerNorm of `input` (whose value is `x`) giving `y`: its backward
/// folds the gradient pending for `input` into the `dx` kernel
/// ([`Tensor::layer_norm_backward_add`]).
#[allow(clippy::too_many_arguments)]
fn layer_norm_node<T: GradElement>(
    y: Tensor<T>,
    input: &Var<T>,
    weight: &Var<T>,
    bias: &Var<T>,
    x: Tensor<T>,
    w: Tensor<T>,
    mean: Tensor<T::Stat>,
    rstd: Tensor<T::Stat>,
) -> Var<T> {
    let needs = [
        input.requires_grad(),
        weight.requires_grad(),
        bias.requires_grad(),
    ];
    Var::from_op_folding_first(
        y,
        "layer_norm",
        &[input, weight, bias],
        move |g, pending| {
            let (dx, dw, db) = match pending.take_if(|_| needs[0]) {
                Some(p) => x.layer_norm_backward_add(&w, &mean, &rstd, g, &p)?,
                None => x.layer_norm_backward(&w, &mean, &rstd, g)?,
            };
            Ok(vec![
                needs[0].then_some(dx),
                needs[1].then_some(dw),
                needs[2].then_some(db),
            ])
        },
    )
}
