//! `layer_norm` (`F.layer_norm` over the last dimension) as an autograd op.

use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::GradElement;

impl<T: GradElement> Var<T> {
    /// LayerNorm over the last dimension: `(x − mean) · rstd · weight + bias`, `weight` and
    /// `bias` of shape `[C]`. Forward: one fused kernel, saving `x`, `weight` and the per-row
    /// `mean` and `rstd`; backward: the `dx` kernel and the deterministic `dweight`/`dbias`
    /// column sums (bit-identical on every run).
    pub fn layer_norm(&self, weight: &Var<T>, bias: &Var<T>, eps: f64) -> Result<Var<T>> {
        let (x, w) = (self.value(), weight.value());
        let (y, mean, rstd) = x.layer_norm(&w, &bias.value(), eps)?;
        let needs = [
            self.requires_grad(),
            weight.requires_grad(),
            bias.requires_grad(),
        ];
        Ok(Var::from_op(
            y,
            "layer_norm",
            &[self, weight, bias],
            move |g| {
                let (dx, dw, db) = x.layer_norm_backward(&w, &mean, &rstd, g)?;
                Ok(vec![
                    needs[0].then_some(dx),
                    needs[1].then_some(dw),
                    needs[2].then_some(db),
                ])
            },
        ))
    }
}
