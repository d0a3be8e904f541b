//! The forward pass, in the parameters' dtype or another one (mixed precision): the
//! parameters are taken once per pass as [`GptWeights`] in the compute dtype `U` (for `U` =
//! the parameters' dtype, the parameters themselves; otherwise [`Var::cast`] of each, whose
//! gradients come back to the f32 parameters), and every op of the pass computes in `U`.

use super::config::LN_EPS;
use super::model::Gpt;
use cuda_stack_nn::{GradElement, Module, NnError, Result, Var};
use cuda_stack_runtime::{AttentionElement, Tensor};
use std::any::{Any, TypeId};

/// A linear layer's (or a LayerNorm's) weight and bias.
#[derive(Clone)]
pub(crate) struct Affine<U: GradElement> {
    pub(crate) weight: Var<U>,
    pub(crate) bias: Var<U>,
}

/// One block's weights in the compute dtype.
#[derive(Clone)]
pub(crate) struct BlockWeights<U: GradElement> {
    pub(crate) ln_1: Affine<U>,
    pub(crate) c_attn: Affine<U>,
    pub(crate) attn_proj: Affine<U>,
    pub(crate) ln_2: Affine<U>,
    pub(crate) c_fc: Affine<U>,
    pub(crate) c_proj: Affine<U>,
}

/// Every parameter of a [`Gpt`] in the compute dtype `U`, for one or more forward passes:
/// made by [`Gpt::weights_as`]. Cast leaves pass their gradients to the parameters, so make
/// new weights for each training forward (after an optimizer step the parameters have moved);
/// weights made under [`cuda_stack_nn::no_grad`] are constants, for evaluation and sampling.
#[derive(Clone)]
pub struct GptWeights<U: GradElement> {
    pub(crate) wte: Var<U>,
    pub(crate) wpe: Var<U>,
    pub(crate) blocks: Vec<BlockWeights<U>>,
    pub(crate) ln_f: Affine<U>,
}

/// `ps` in the compute dtype: themselves when `U` is `T`, else [`Var::cast_many`] (one
/// launch per 136 tensors for f32 -> bf16 / f16).
fn in_dtype_many<T: GradElement + 'static, U: GradElement + 'static>(
    ps: &[Var<T>],
) -> Result<Vec<Var<U>>> {
    if TypeId::of::<T>() != TypeId::of::<U>() {
        return Var::cast_many::<U>(ps);
    }
    ps.iter()
        .map(|p| {
            (p as &dyn Any)
                .downcast_ref::<Var<U>>()
                .cloned()
                .ok_or_else(|| NnError::Invalid {
                    what: "Gpt",
                    problem: "internal error: a parameter of another dtype".into(),
                })
        })
        .collect()
}

fn no_bias(what: &str) -> NnError {
    NnError::Invalid {
        what: "Gpt",
        problem: format!("internal error: the {what} layer has no bias"),
    }
}

impl<T: GradElement + AttentionElement + 'static> Gpt<T> {
    /// The parameters in the compute dtype `U`: the parameters themselves when `U` is `T`,
    /// otherwise each cast once ([`Var::cast`]: a `U` leaf whose gradient is converted back
    /// and added to the parameter's). Autocast's rule: f32 master weights, bf16 compute.
    pub fn weights_as<U: GradElement + 'static>(&self) -> Result<GptWeights<U>> {
        // Every parameter in one list (cast together: one launch per 136 tensors), in the
        // order the weights are taken from it below.
        let mut list: Vec<Var<T>> = vec![self.wte.weight().clone(), self.wpe.weight().clone()];
        let bias = |l: &cuda_stack_nn::Linear<T>, what: &str| -> Result<Var<T>> {
            l.bias().cloned().ok_or_else(|| no_bias(what))
        };
        for b in &self.blocks {
            list.extend([
                b.ln_1.weight().clone(),
                b.ln_1.bias().clone(),
                b.c_attn.weight().clone(),
                bias(&b.c_attn, "c_attn")?,
                b.attn_proj.weight().clone(),
                bias(&b.attn_proj, "attn.c_proj")?,
                b.ln_2.weight().clone(),
                b.ln_2.bias().clone(),
                b.c_fc.weight().clone(),
                bias(&b.c_fc, "c_fc")?,
                b.c_proj.weight().clone(),
                bias(&b.c_proj, "mlp.c_proj")?,
            ]);
        }
        list.extend([self.ln_f.weight().clone(), self.ln_f.bias().clone()]);
        let mut it = in_dtype_many::<T, U>(&list)?.into_iter();
        let mut next = || {
            it.next().ok_or_else(|| NnError::Invalid {
                what: "Gpt",
                problem: "internal error: fewer cast weights than parameters".into(),
            })
        };
        let mut affine = || -> Result<Affine<U>> {
            Ok(Affine {
                weight: next()?,
                bias: next()?,
            })
        };
        let (wte, wpe) = {
            let w = affine()?;
            (w.weight, w.bias)
        };
        let blocks = self
            .blocks
            .iter()
            .map(|_| {
                Ok(BlockWeights {
                    ln_1: affine()?,
                    c_attn: affine()?,
                    attn_proj: affine()?,
                    ln_2: affine()?,
                    c_fc: affine()?,
                    c_proj: affine()?,
                })
            })
            .collect::<Result<_>>()?;
        let ln_f = affine()?;
        Ok(GptWeights {
            wte,
            wpe,
            blocks,
            ln_f,
        })
    }

    /// Checks `idx` is `[B, T]` with `1 <= T <= block_size` and returns `(B, T)`.
    pub(crate) fn check_ids(
        &self,
        what: &'static str,
        idx: &Tensor<i32>,
    ) -> Result<(usize, usize)> {
        let &[b, t] = idx.shape() else {
            return Err(NnError::Invalid {
                what,
                problem: format!("token ids of shape {:?}: they must be [B, T]", idx.shape()),
            });
        };
        if b == 0 || t == 0 || t > self.config.block_size {
            return Err(NnError::Invalid {
                what,
                problem: format!(
                    "ids of shape [{b}, {t}]: B must be at least 1 and T between 1 and \
                     block_size = {}",
                    self.config.block_size
                ),
            });
        }
        Ok((b, t))
    }

    /// The logits `[B, T, vocab]` for token ids `idx` (`[B, T]`, `T ≤ block_size`), computed
    /// in `T`.
    pub fn forward(&self, idx: &Tensor<i32>) -> Result<Var<T>> {
        self.forward_as::<T>(idx)
    }

    /// The logits `[B, T, vocab]`, computed in `U` from the parameters cast once.
    pub fn forward_as<U: GradElement + AttentionElement + 'static>(
        &self,
        idx: &Tensor<i32>,
    ) -> Result<Var<U>> {
        self.forward_with(&self.weights_as::<U>()?, idx)
    }

    /// The logits `[B, T, vocab]` from `w` (this model's [`Gpt::weights_as`]), with this
    /// model's dropout layers (active in training mode).
    pub fn forward_with<U: GradElement + AttentionElement>(
        &self,
        w: &GptWeights<U>,
        idx: &Tensor<i32>,
    ) -> Result<Var<U>> {
        self.hidden_with(w, idx)?.linear(&w.wte, None)
    }

    /// The final LayerNorm's output `[B, T, n_embd]`: what the (tied) classifier reads.
    fn hidden_with<U: GradElement + AttentionElement>(
        &self,
        w: &GptWeights<U>,
        idx: &Tensor<i32>,
    ) -> Result<Var<U>> {
        let (_, t) = self.check_ids("Gpt::forward", idx)?;
        let pos = if self.positions.device() == idx.device() && t <= self.positions.numel() {
            self.positions.narrow(0, 0, t)?
        } else {
            let positions: Vec<i32> = (0..t as i32).collect();
            Tensor::from_slice_on(idx.device(), &positions, &[t])?
        };
        let x = w.wte.embedding(idx)?.add(&w.wpe.embedding(&pos)?)?;
        let mut x = self.drop.forward(&x)?;
        let heads = self.config.n_head;
        // Each residual add is fused into the LayerNorm that reads the sum (`add_layer_norm`:
        // one kernel for the add and the norm, and in the backward the stream's gradient added
        // in the LayerNorm's dx kernel): the next block's ln_1, or ln_f after the last block.
        let first_ln = w.blocks.first().map_or(&w.ln_f, |bw| &bw.ln_1);
        let mut h = x.layer_norm(&first_ln.weight, &first_ln.bias, LN_EPS)?;
        for (i, (b, bw)) in self.blocks.iter().zip(&w.blocks).enumerate() {
            let qkv = h.linear(&bw.c_attn.weight, Some(&bw.c_attn.bias))?;
            let a = qkv
                .packed_qkv_attention(heads, true)?
                .linear(&bw.attn_proj.weight, Some(&bw.attn_proj.bias))?;
            let (x1, h2) =
                x.add_layer_norm(&b.drop.forward(&a)?, &bw.ln_2.weight, &bw.ln_2.bias, LN_EPS)?;
            let m = if self.fused_mlp() {
                h2.mlp_gelu(
                    &bw.c_fc.weight,
                    Some(&bw.c_fc.bias),
                    &bw.c_proj.weight,
                    Some(&bw.c_proj.bias),
                )?
            } else {
                h2.linear(&bw.c_fc.weight, Some(&bw.c_fc.bias))?
                    .gelu()?
                    .linear(&bw.c_proj.weight, Some(&bw.c_proj.bias))?
            };
            let next_ln = w.blocks.get(i + 1).map_or(&w.ln_f, |next| &next.ln_1);
            (x, h) =
                x1.add_layer_norm(&b.drop.forward(&m)?, &next_ln.weight, &next_ln.bias, LN_EPS)?;
        }
        Ok(h)
    }

    /// The mean cross-entropy of the next-token predictions: `forward(idx)` against `targets`
    /// (`[B, T]`), through the fused classifier (the logits overwritten by their gradient in
    /// the backward: see [`Gpt::loss_with`]), computed in `T`.
    pub fn loss(&self, idx: &Tensor<i32>, targets: &Tensor<i32>) -> Result<Var<T>> {
        self.loss_with(&self.weights_as::<T>()?, idx, targets)
    }

    /// [`Gpt::loss`] from `w`, computed in `U` (the loss value rounded once to `U`; the rows
    /// are summed in f32 for bf16/f16).
    ///
    /// The classifier and the loss are one op, [`Var::linear_cross_entropy`]: the logits
    /// `[B·T, vocab]` live only inside its backward, which writes their gradient over them, so
    /// the backward's peak holds one `[B·T, vocab]` buffer, not two (the largest of a GPT-2
    /// step: 1.5 GiB in bf16 at 16 × 1024 tokens). The same ops, in the same order, as
    /// [`Gpt::forward_with`]'s logits through [`Var::fused_cross_entropy`]: the same loss and
    /// gradients, bit for bit. The graph can be differentiated once (a second backward through
    /// a retained graph is [`NnError::SavedTensorConsumed`]).
    pub fn loss_with<U: GradElement + AttentionElement>(
        &self,
        w: &GptWeights<U>,
        idx: &Tensor<i32>,
        targets: &Tensor<i32>,
    ) -> Result<Var<U>> {
        self.check_targets(idx, targets)?;
        self.hidden_with(w, idx)?
            .linear_cross_entropy(&w.wte, None, targets)
    }

    /// The mean loss as a 0-d f32 tensor on the device, not rounded to `U` (the rows' mean
    /// taken in the classifier's statistics dtype): for evaluation, under
    /// [`cuda_stack_nn::no_grad`] with weights made there.
    pub fn eval_loss_with<U: GradElement + AttentionElement>(
        &self,
        w: &GptWeights<U>,
        idx: &Tensor<i32>,
        targets: &Tensor<i32>,
    ) -> Result<Tensor<f32>> {
        let (b, t) = self.check_targets(idx, targets)?;
        let logits = self.forward_with(w, idx)?.value();
        let rows = logits
            .reshape(&[b * t, self.config.vocab])?
            .classifier_loss(&targets.reshape(&[b * t])?)?;
        Ok(rows.mean_all()?.to_dtype::<f32>()?)
    }

    fn check_targets(&self, idx: &Tensor<i32>, targets: &Tensor<i32>) -> Result<(usize, usize)> {
        let (b, t) = self.check_ids("Gpt::loss", idx)?;
        if targets.shape() != [b, t] {
            return Err(NnError::Invalid {
                what: "Gpt::loss",
                problem: format!(
                    "targets of shape {:?} for ids of shape [{b}, {t}]",
                    targets.shape()
                ),
            });
        }
        Ok((b, t))
    }
}
