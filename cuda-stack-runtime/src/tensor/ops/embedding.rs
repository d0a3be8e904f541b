//! The embedding lookup (`F.embedding`) and its deterministic backward, on tensors (f32, f64,
//! f16, bf16 tables; i32 ids).

use crate::tensor::error::{Result, TensorError};
use crate::tensor::storage::Exec;
use crate::tensor::{FloatElement, Tensor};
use cuda_stack_kernels::ops::embedding_workspace_len;

impl<T: FloatElement> Tensor<T> {
    /// Rows of the table `self` (`[vocab, C]`) picked by `ids` (any shape, i32): the result
    /// has shape `ids.shape() + [C]` (`F.embedding(ids, weight)`). An id outside `0..vocab`
    /// gives a NaN row — the device cannot report it without a host round trip, so check ids
    /// where they come from the host (`cuda_stack_nn::token_ids` does).
    pub fn embedding(&self, ids: &Tensor<i32>) -> Result<Tensor<T>> {
        const OP: &str = "embedding";
        self.same_device(OP, ids)?;
        let &[vocab, cols] = self.shape() else {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: ids.shape().to_vec(),
                why: "the embedding table must be [vocab, dim]".into(),
            });
        };
        let n = ids.numel();
        let mut shape = ids.shape().to_vec();
        shape.push(cols);
        let (w, i) = (self.contiguous()?, ids.contiguous()?);
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (wv, iv) = (w.dense()?, i.dense()?);
        // SAFETY: the kernel writes row t of the output for every one of the n ids.
        let storage = unsafe {
            exec.storage_with(n * cols, |out| {
                T::embedding_fwd(&k, exec.stream(), &wv, &iv, out, n, vocab, cols)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Tensor::from_storage(storage, &shape)
    }

    /// The gradient of [`Tensor::embedding`] with respect to the table, from the output's
    /// gradient `self` (shape `ids.shape() + [C]`): `[vocab, C]`, row `v` the sum of the
    /// gradient rows of the tokens with id `v`, in token order (ids outside `0..vocab` are
    /// skipped; unused rows are zero). Deterministic — a stable counting sort of the tokens by
    /// id and one ordered sum per id, no float atomics — so bit-identical on every run. Uses an
    /// i32 workspace of `ceil(N / 256) · vocab + 2N + 2 · vocab + 1` elements.
    pub fn embedding_backward(&self, ids: &Tensor<i32>, vocab: usize) -> Result<Tensor<T>> {
        const OP: &str = "embedding_backward";
        self.same_device(OP, ids)?;
        let cols = *self.shape().last().unwrap_or(&0);
        let mut want = ids.shape().to_vec();
        want.push(cols);
        if self.rank() == 0 || self.shape() != want.as_slice() {
            return Err(TensorError::ShapeMismatch {
                op: OP,
                lhs: self.shape().to_vec(),
                rhs: ids.shape().to_vec(),
                why: "the gradient must have shape ids.shape() + [dim]".into(),
            });
        }
        let n = ids.numel();
        let (g, i) = (self.contiguous()?, ids.contiguous()?);
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let ws_len = embedding_workspace_len(n, vocab)?;
        let mut ws =
            Tensor::<i32>::from_storage(Exec::on(self.device())?.zeros(ws_len)?, &[ws_len])?;
        let (gv, iv) = (g.dense()?, i.dense()?);
        let (_, wsv) = ws.exclusive_mut()?;
        // SAFETY: the sum kernel writes every row (unused ids get zeros) of the [vocab, C] table.
        let storage = unsafe {
            exec.storage_with(vocab * cols, |dw| {
                T::embedding_bwd(&k, exec.stream(), &iv, &gv, dw, wsv, n, vocab, cols)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Tensor::from_storage(storage, &[vocab, cols])
    }
}
