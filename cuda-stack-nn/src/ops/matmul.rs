//! The matrix product, 2-D and batched.

use super::sum_to;
use crate::error::Result;
use crate::Var;
use cuda_stack_runtime::GradElement;

impl<T: GradElement> Var<T> {
    /// `self @ other`: `[m, k] · [k, n]`, or batched `[b, m, k] · [b, k, n]` with a 2-D (or
    /// batch-1) operand broadcast over the batch (as [`cuda_stack_runtime::Tensor::matmul`]).
    /// Backward: `dA = g · Bᵀ`, `dB = Aᵀ · g` (transposed views: the f32 kernel reads them in
    /// place), each summed over a broadcast batch; for 2-D operands `dB` is computed as
    /// `(gᵀ · A)ᵀ`, so a layer's weight (used as `Wᵀ`) gets a contiguous gradient directly.
    pub fn matmul(&self, other: &Var<T>) -> Result<Var<T>> {
        let (a, b) = (self.value(), other.value());
        let value = a.matmul(&b)?;
        let (na, nb) = (self.requires_grad(), other.requires_grad());
        Ok(Var::from_op(value, "matmul", &[self, other], move |g| {
            let ga = if na {
                let full = g.matmul(&b.transpose(-2, -1)?)?;
                Some(sum_to(&full, a.shape())?)
            } else {
                None
            };
            let gb = if nb && b.rank() == 2 && a.rank() == 2 {
                // (gᵀ · A)ᵀ: the product is computed in B's transposed layout, so when B is
                // itself a transposed view (a Linear layer's Wᵀ), the gradient that reaches W is
                // already contiguous and accumulating it needs no transpose kernel.
                Some(g.transpose(0, 1)?.matmul(&a)?.transpose(0, 1)?)
            } else if nb {
                let full = a.transpose(-2, -1)?.matmul(g)?;
                Some(sum_to(&full, b.shape())?)
            } else {
                None
            };
            Ok(vec![ga, gb])
        }))
    }
}
