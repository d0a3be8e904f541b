//! Optimizer steps on a part of a flat buffer.

use super::*;

/// `sgd_at_`, `sgd_momentum_at_` and `adam_at_` on elements 3..7 of 10 (a rank's part of a flat
/// parameter buffer under ZeRO-1): the part steps as the whole-tensor op steps a tensor of those
/// four elements (two steps, so the state is read back), the other elements stay, a shared
/// buffer is copied first, and a part past the end is an error. Tolerance: 1e-6 relative (the
/// same kernel, maybe another vector width).
pub(crate) fn optimizer_parts() -> TestResult {
    use cuda_stack_runtime::{AdamParams, SgdParams};
    let base: Vec<f32> = (0..10).map(|i| i as f32 * 0.25 - 1.0).collect();
    let grad = Tensor::from_vec(vec![0.5f32, -1.0, 2.0, 0.125], &[4])?;
    let check = |flat: &Tensor<f32>, alone: &Tensor<f32>, what: &str| -> TestResult {
        let (f, a) = (flat.to_vec()?, alone.to_vec()?);
        for (x, y) in f[3..7].iter().zip(&a) {
            ensure!(
                (x - y).abs() <= 1e-6 * y.abs().max(1.0),
                "{what}: the part {:?}, the op alone {a:?}",
                &f[3..7]
            );
        }
        ensure!(
            f[..3] == base[..3] && f[7..] == base[7..],
            "{what}: elements outside the part changed: {f:?}"
        );
        Ok(())
    };
    let fresh = || -> Result<(Tensor<f32>, Tensor<f32>), TensorError> {
        Ok((
            Tensor::from_vec(base.clone(), &[10])?,
            Tensor::from_vec(base[3..7].to_vec(), &[4])?,
        ))
    };

    let (mut flat, mut alone) = fresh()?;
    for _ in 0..2 {
        flat.sgd_at_(3, &grad, 0.1, 0.01)?;
        alone.sgd_(&grad, 0.1, 0.01)?;
    }
    check(&flat, &alone, "sgd_at_")?;

    let hyper = SgdParams {
        lr: 0.1,
        momentum: 0.9,
        dampening: 0.0,
        weight_decay: 0.01,
        nesterov: true,
    };
    let (mut flat, mut alone) = fresh()?;
    let (mut b1, mut b2) = (grad.full_like(&[4], 0.0)?, grad.full_like(&[4], 0.0)?);
    for first in [true, false] {
        flat.sgd_momentum_at_(3, &grad, &mut b1, hyper, first)?;
        alone.sgd_momentum_(&grad, &mut b2, hyper, first)?;
    }
    check(&flat, &alone, "sgd_momentum_at_")?;
    ensure!(
        b1.to_vec()? == b2.to_vec()?,
        "momentum buffers {:?} vs {:?}",
        b1.to_vec()?,
        b2.to_vec()?
    );

    let hyper = AdamParams {
        lr: 0.01,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.01,
        decoupled: true,
    };
    let (mut flat, mut alone) = fresh()?;
    let zeros = || grad.full_like(&[4], 0.0);
    let (mut m1, mut v1, mut m2, mut v2) = (zeros()?, zeros()?, zeros()?, zeros()?);
    let mut steps = Tensor::from_vec(vec![0i32, 0], &[2])?;
    for _ in 0..2 {
        steps.increment_()?;
        flat.adam_at_(3, &grad, &mut m1, &mut v1, &steps, 1, hyper)?;
        alone.adam_(&grad, &mut m2, &mut v2, &steps, 1, hyper)?;
    }
    check(&flat, &alone, "adam_at_")?;

    // A shared buffer: the other handle keeps its values.
    let (mut flat, _) = fresh()?;
    let keep = flat.clone();
    flat.sgd_at_(3, &grad, 0.1, 0.0)?;
    ensure!(
        keep.to_vec()? == base && !flat.shares_storage(&keep),
        "a shared buffer was written in place"
    );

    let r = flat.sgd_at_(7, &grad, 0.1, 0.0);
    ensure!(
        matches!(r, Err(TensorError::ShapeMismatch { op: "sgd_at_", .. })),
        "a part past the end: {r:?}"
    );
    let r = flat.adam_at_(
        0,
        &grad,
        &mut m1,
        &mut Tensor::zeros(&[3])?,
        &steps,
        0,
        hyper,
    );
    ensure!(
        matches!(r, Err(TensorError::ShapeMismatch { op: "adam_at_", .. })),
        "a moment of another shape: {r:?}"
    );
    Ok(())
}
