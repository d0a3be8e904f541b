//! `embedding` (`F.embedding`) as an autograd op, and token ids checked on the host.

use crate::error::{NnError, Result};
use crate::Var;
use cuda_stack_runtime::{GradElement, Tensor};

/// Token ids `ids` as a device tensor of i32 of shape `shape`, each checked to be in
/// `0..vocab` first (the embedding kernel cannot report a bad id without a host round trip;
/// it would give a NaN row).
pub fn token_ids(ids: &[usize], vocab: usize, shape: &[usize]) -> Result<Tensor<i32>> {
    let n: usize = shape.iter().product();
    if n != ids.len() {
        return Err(NnError::Invalid {
            what: "token_ids",
            problem: format!("{} ids for the shape {shape:?} ({n} elements)", ids.len()),
        });
    }
    let mut out = Vec::with_capacity(ids.len());
    for (i, &t) in ids.iter().enumerate() {
        if t >= vocab || t > i32::MAX as usize {
            return Err(NnError::Invalid {
                what: "token_ids",
                problem: format!("id {t} at position {i} is not in the vocabulary 0..{vocab}"),
            });
        }
        out.push(t as i32);
    }
    Ok(Tensor::from_vec(out, shape)?)
}

impl<T: GradElement> Var<T> {
    /// The rows of the table `self` (`[vocab, C]`) picked by `ids` (any shape; e.g. from
    /// [`token_ids`]): shape `ids.shape() + [C]`. Backward: the deterministic scatter-add of
    /// the output's gradient into a `[vocab, C]` gradient (bit-identical on every run).
    pub fn embedding(&self, ids: &Tensor<i32>) -> Result<Var<T>> {
        let w = self.value();
        let vocab = w.shape().first().copied().unwrap_or(0);
        let value = w.embedding(ids)?;
        let ids = ids.clone();
        Ok(Var::from_op(value, "embedding", &[self], move |g| {
            Ok(vec![Some(g.embedding_backward(&ids, vocab)?)])
        }))
    }
}
