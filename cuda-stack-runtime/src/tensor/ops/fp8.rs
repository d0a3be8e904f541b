//! FP8 on tensors: scaled casts between f32/f16/bf16 and [`F8E4M3`] / [`F8E5M2`], amax, and the
//! scale update of delayed scaling (`cuda_stack_kernels::ops::fp8_*`, compute capability 8.9+).
//!
//! # Scale convention (Transformer Engine's)
//! `q = fp8(x · scale)` (round to nearest even, saturating at ±[`Fp8::MAX`], NaN kept) and
//! `x ≈ f32(q) · inv_scale` with `inv_scale = 1 / scale`. Scales and amaxes are one-element f32
//! tensors (shape `[]` or `[1]`) that stay on the GPU, so a training step never waits for the
//! host:
//!
//! ```no_run
//! use cuda_stack_runtime::tensor::Tensor;
//! use cuda_stack_driver::float8::F8E4M3;
//! # fn main() -> Result<(), cuda_stack_runtime::tensor::TensorError> {
//! let x = Tensor::<f32>::randn(&[1024, 1024], 7)?;
//! // Current scaling: amax of x now, scale = 448 / amax.
//! let (q, inv_scale) = x.to_fp8_current::<F8E4M3>()?;
//! let back = Tensor::<f32>::from_fp8(&q, &inv_scale)?;
//! // Delayed scaling: this step's cast uses the scale made from earlier amaxes and records
//! // x's amax for the next step, in the same pass.
//! let history = Tensor::<f32>::full(&[16], 0.0)?; // amax of the last 16 steps
//! let (scale, inv_scale) = history.fp8_scale::<F8E4M3>(&Tensor::scalar(1.0f32)?, 0)?;
//! let cast = x.to_fp8::<F8E4M3>(&scale)?; // cast.data, cast.amax (→ the history)
//! # let _ = (back, cast, inv_scale); Ok(()) }
//! ```

use crate::tensor::error::{Result, TensorError};
use crate::tensor::{Tensor, TensorElement};
use cuda_stack_kernels::ops::{self, Fp8, Fp8Wide};

/// What [`Tensor::to_fp8`] gives: the FP8 tensor, and the amax of the input (max |x|, a
/// one-element f32 tensor; NaN if any element was NaN) recorded in the same pass, for the
/// amax history of delayed scaling.
#[derive(Debug, Clone)]
pub struct Fp8Cast<Q: Fp8 + TensorElement> {
    /// `fp8(x · scale)`, contiguous, `x`'s shape.
    pub data: Tensor<Q>,
    /// `max |x|` (shape `[]`).
    pub amax: Tensor<f32>,
}

/// A one-element f32 tensor (a scale or an amax) on `x`'s device.
fn check_scalar<T: TensorElement>(
    op: &'static str,
    what: &'static str,
    x: &Tensor<T>,
    s: &Tensor<f32>,
) -> Result<()> {
    x.same_device(op, s)?;
    if s.numel() != 1 {
        return Err(TensorError::InvalidArgument {
            op,
            problem: format!(
                "`{what}` must be a one-element f32 tensor (shape [] or [1]); it has shape {:?}",
                s.shape()
            ),
        });
    }
    Ok(())
}

impl<T: TensorElement + Fp8Wide> Tensor<T> {
    /// `max |x|` over all elements as a one-element f32 tensor (shape `[]`), NaN if any element
    /// is NaN: what a per-tensor FP8 scale is computed from (`scale = Q::MAX / amax`). Compute
    /// capability 8.9 or newer (it serves the FP8 casts; elsewhere `UnsupportedDevice`).
    pub fn amax(&self) -> Result<Tensor<f32>> {
        const OP: &str = "amax";
        let x = self.contiguous()?;
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let xv = x.dense()?;
        // SAFETY: the one element is zeroed, then max-accumulated by the kernel.
        let storage = unsafe {
            exec.storage_with::<f32>(1, |amax| {
                exec.stream().memset_zeros(amax)?;
                Ok(ops::fp8_amax(&k, exec.stream(), &xv, amax)?)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))
        .map_err(|e| super::renamed(e, OP))?;
        Tensor::from_storage(storage, &[])
    }

    /// `fp8(x · scale)` as a new contiguous `Q` tensor of the same shape, plus the amax of `x`
    /// recorded in the same pass ([`Fp8Cast`]). `scale` is a one-element f32 tensor on the same
    /// device (see the module docs for the convention). Compute capability 8.9 or newer.
    pub fn to_fp8<Q: Fp8 + TensorElement>(&self, scale: &Tensor<f32>) -> Result<Fp8Cast<Q>> {
        const OP: &str = "to_fp8";
        check_scalar(OP, "scale", self, scale)?;
        let x = self.contiguous()?;
        let sc = scale.contiguous()?;
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (xv, sv) = (x.dense()?, sc.dense()?);
        // SAFETY: the quantize kernel writes every element of q; amax is zeroed first, then
        // max-accumulated.
        let (data, amax) = unsafe {
            exec.storage_pair_with::<Q, f32>(x.numel(), 1, |q, amax| {
                exec.stream().memset_zeros(amax)?;
                Ok(ops::fp8_quantize(&k, exec.stream(), &xv, q, &sv, amax)?)
            })
        }
        .map_err(|e| e.with_shape(self.shape()))?;
        Ok(Fp8Cast {
            data: Tensor::from_storage(data, self.shape())?,
            amax: Tensor::from_storage(amax, &[])?,
        })
    }

    /// Current scaling: `amax` of `x`, `scale = Q::MAX / amax` (1 when amax is 0 or not
    /// finite), and `fp8(x · scale)`. Returns the FP8 tensor and `inv_scale = 1 / scale` (what
    /// [`Tensor::from_fp8`] and the FP8 matmuls take). Two passes over `x`; delayed scaling
    /// ([`Tensor::to_fp8`] with a scale from [`Tensor::fp8_scale`]) needs one.
    pub fn to_fp8_current<Q: Fp8 + TensorElement>(&self) -> Result<(Tensor<Q>, Tensor<f32>)> {
        let amax = self.amax()?;
        let (scale, inv_scale) = amax.fp8_scale::<Q>(&Tensor::full_like(&amax, &[], 1.0)?, 0)?;
        Ok((self.to_fp8::<Q>(&scale)?.data, inv_scale))
    }

    /// `f32(q) · inv_scale` rounded once to `T`: the wide tensor an FP8 tensor stands for.
    /// `inv_scale` is a one-element f32 tensor on `q`'s device. Compute capability 8.9+.
    pub fn from_fp8<Q: Fp8 + TensorElement>(
        q: &Tensor<Q>,
        inv_scale: &Tensor<f32>,
    ) -> Result<Tensor<T>> {
        const OP: &str = "from_fp8";
        check_scalar(OP, "inv_scale", q, inv_scale)?;
        let qc = q.contiguous()?;
        let sc = inv_scale.contiguous()?;
        let exec = q.exec()?;
        let k = exec.kernels()?;
        let (qv, sv) = (qc.dense()?, sc.dense()?);
        // SAFETY: the dequantize kernel writes every element of the output.
        let storage = unsafe {
            exec.storage_with::<T>(qc.numel(), |out| {
                Ok(ops::fp8_dequantize(&k, exec.stream(), &qv, out, &sv)?)
            })
        }
        .map_err(|e| e.with_shape(q.shape()))?;
        Tensor::from_storage(storage, q.shape())
    }
}

impl Tensor<f32> {
    /// Delayed scaling's scale update, on the GPU (Transformer Engine's rule), with `self` the
    /// amax history (any shape; NaN entries ignored): `a = max(self)`; when `a` is finite and
    /// positive, `scale = Q::MAX / a / 2^margin`, otherwise `scale = previous`. Returns
    /// `(scale, inv_scale)` as one-element tensors (shape `[]`). `previous` is a one-element
    /// f32 tensor (the last step's scale, or 1). Compute capability 8.9 or newer.
    pub fn fp8_scale<Q: Fp8>(
        &self,
        previous: &Tensor<f32>,
        margin: i32,
    ) -> Result<(Tensor<f32>, Tensor<f32>)> {
        const OP: &str = "fp8_scale";
        check_scalar(OP, "previous", self, previous)?;
        let h = self.contiguous()?;
        let p = previous.contiguous()?;
        let exec = self.exec()?;
        let k = exec.kernels()?;
        let (hv, pv) = (h.dense()?, p.dense()?);
        // SAFETY: scale is copied from `previous`, then the update writes scale and inv_scale.
        let (scale, inv) = unsafe {
            exec.storage_pair_with::<f32, f32>(1, 1, |scale, inv| {
                exec.stream().memcpy_dtod(&pv, scale)?;
                Ok(ops::fp8_scale_update::<Q>(
                    &k,
                    exec.stream(),
                    &hv,
                    scale,
                    inv,
                    margin,
                )?)
            })
        }
        .map_err(|e| super::renamed(e, OP))?;
        Ok((
            Tensor::from_storage(scale, &[])?,
            Tensor::from_storage(inv, &[])?,
        ))
    }
}
