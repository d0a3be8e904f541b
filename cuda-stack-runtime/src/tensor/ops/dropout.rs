//! Dropout with a Philox mask, on tensors (f32, f64, f16, bf16).

use crate::tensor::error::Result;
use crate::tensor::{FloatElement, Tensor};

impl<T: FloatElement> Tensor<T> {
    /// Inverted dropout (`F.dropout(x, p, training=True)`): element `i` (row-major) is kept
    /// and scaled by `1 / (1 − p)` when the uniform float of Philox word `offset + i` under
    /// `seed` is `>= p`, else zeroed. Reproducible for a given `(seed, offset)`; `p = 0` is the
    /// identity, `p = 1` gives zeros; `p` outside `[0, 1]` is an error. The mask is never
    /// stored: the backward pass is `grad.dropout(p, seed, offset)` (the same mask, regenerated).
    /// Advance `offset` by at least `numel()` between calls that must draw independent masks.
    pub fn dropout(&self, p: f64, seed: u64, offset: u64) -> Result<Tensor<T>> {
        let x = self.contiguous()?;
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let xv = x.dense()?;
        // SAFETY: the kernel writes every element (or the op fails before launching).
        let storage = unsafe {
            exec.storage_with(x.numel(), |out| {
                T::dropout(&k, exec.stream(), &xv, out, p, seed, offset)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Tensor::from_storage(storage, self.shape())
    }
}
