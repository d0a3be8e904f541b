//! The transformer's non-attention ops on tensors: shapes (rank 3 LayerNorm, 2-D ids), the
//! half-precision paths against the f32 ones on the same rounded inputs (LayerNorm, GELU, the
//! fused classifier: within 2 ulp of bf16/f16; statistics and losses `1e-6`/`1e-5` relative),
//! the in-place classifier (exclusive: in place; shared: a private copy, the other handle keeps
//! the logits), dropout's backward regenerating its mask, clipping's in-place scaling, and the
//! typed errors. Kernel-level accuracy is `cuda-stack-kernels`' `transformer_ops` test.

use cuda_stack_runtime::cuda_stack_driver::half::{bf16, f16};
use cuda_stack_runtime::tensor::{Tensor, TensorElement, TensorError};
use cuda_stack_runtime::{clip_grad_norm_, FloatElement};
use cuda_tests::{ensure, gpu, TestResult};

fn main() {
    cuda_tests::run(vec![
        gpu("layer_norm_rank3_and_half_precision", layer_norm),
        gpu("gelu_half_precision", gelu),
        gpu("fused_classifier_in_place_and_half", classifier),
        gpu("embedding_shapes_and_backward", embedding),
        gpu("dropout_backward_is_the_same_mask", dropout),
        gpu("clip_grad_norm_in_place", clip),
        gpu("errors_are_typed", errors),
    ]);
}

fn vals(n: usize, seed: u64, scale: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let u = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
            scale * (2.0 * u - 1.0)
        })
        .collect()
}

fn t<T: FloatElement>(v: &[f64], shape: &[usize]) -> Result<Tensor<T>, TensorError> {
    Tensor::from_vec(v.iter().map(|&x| T::from_f64(x)).collect(), shape)
}

fn close(what: &str, got: &[f64], want: &[f64], tol: impl Fn(f64) -> f64) -> TestResult {
    ensure!(
        got.len() == want.len(),
        "{what}: lengths {} vs {}",
        got.len(),
        want.len()
    );
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        ensure!((g - w).abs() <= tol(*w), "{what}[{i}]: {g} vs {w}");
    }
    Ok(())
}

fn host<T: TensorElement>(x: &Tensor<T>) -> Result<Vec<f64>, TensorError> {
    Ok(x.to_vec()?.iter().map(|v| v.to_f64()).collect())
}

/// 2 ulp of a half type at `w` (`bits` mantissa bits) plus `abs`.
fn half_tol(bits: i32, abs: f64) -> impl Fn(f64) -> f64 {
    move |w: f64| 2.0 * 2f64.powi(w.abs().max(1e-4).log2().floor() as i32 - bits) + abs
}

/// The values as `T` would store them.
fn rounded<T: FloatElement>(v: &[f64]) -> Vec<f64> {
    v.iter().map(|&x| T::from_f64(x).to_f64()).collect()
}

/// LayerNorm of `T` against f32 on the same (rounded) values.
fn layer_norm_vs_f32<T: FloatElement>(bits: i32) -> TestResult {
    let shape = [2usize, 3, 40];
    let (x, w, b) = (
        rounded::<T>(&vals(240, 1, 2.0)),
        rounded::<T>(&vals(40, 2, 1.0)),
        rounded::<T>(&vals(40, 3, 0.5)),
    );
    let (y32, m32, r32) = t::<f32>(&x, &shape)?.layer_norm(&t(&w, &[40])?, &t(&b, &[40])?, 1e-5)?;
    ensure!(y32.shape() == shape, "y shape {:?}", y32.shape());
    ensure!(m32.shape() == [6] && r32.shape() == [6], "stats [6]");
    let (y, m, r) = t::<T>(&x, &shape)?.layer_norm(&t(&w, &[40])?, &t(&b, &[40])?, 1e-5)?;
    close(
        "half layer_norm",
        &host(&y)?,
        &host(&y32)?,
        half_tol(bits, 1e-5),
    )?;
    close("half mean", &host(&m)?, &host(&m32)?, |w| {
        1e-6 * (1.0 + w.abs())
    })?;
    close("half rstd", &host(&r)?, &host(&r32)?, |w| 1e-6 * w.abs())?;
    Ok(())
}

fn layer_norm() -> TestResult {
    layer_norm_vs_f32::<f32>(23)?;
    layer_norm_vs_f32::<f16>(10)?;
    layer_norm_vs_f32::<bf16>(7)?;
    Ok(())
}

fn gelu() -> TestResult {
    let x = vals(1001, 4, 4.0);
    let x16: Vec<f64> = x.iter().map(|&v| f16::from_f64(v).to_f64()).collect();
    let want = host(&t::<f32>(&x16, &[1001])?.gelu()?)?;
    let got = host(&t::<f16>(&x16, &[1001])?.gelu()?)?;
    close("f16 gelu", &got, &want, half_tol(10, 1e-6))?;
    Ok(())
}

fn classifier() -> TestResult {
    let (rows, v) = (5usize, 1001usize);
    let x = vals(rows * v, 5, 4.0);
    let targets = Tensor::from_vec(vec![0i32, 1000, 17, 500, 3], &[rows])?;
    let g = Tensor::from_vec(vec![2.0f32], &[])?;
    let logits = t::<f32>(&x, &[rows, v])?;
    let (loss, dl) = logits.fused_classifier(&targets, &g, 0.2)?;
    ensure!(loss.shape() == [rows] && dl.shape() == [rows, v], "shapes");
    let loss_only = host(&logits.classifier_loss(&targets)?)?;
    close("loss only", &loss_only, &host(&loss)?, |w| {
        1e-6 * (1.0 + w.abs())
    })?;
    // Shared: a private copy is written, the other handle keeps the logits.
    let mut shared = logits.clone();
    let l2 = shared.fused_classifier_(&targets, &g, 0.2)?;
    close("in-place loss", &host(&l2)?, &host(&loss)?, |w| {
        1e-6 * (1.0 + w.abs())
    })?;
    close("in-place dlogits", &host(&shared)?, &host(&dl)?, |w| {
        1e-6 * w.abs() + 1e-9
    })?;
    close("untouched logits", &host(&logits)?, &x, |w| 1e-6 * w.abs())?;
    // Exclusive: written in place.
    let mut own = t::<f32>(&x, &[rows, v])?;
    let before = own.storage_handles();
    own.fused_classifier_(&targets, &g, 0.2)?;
    ensure!(
        before == 1 && own.is_exclusive(),
        "in place on an exclusive tensor"
    );
    // bf16 logits: f32 losses.
    let xb: Vec<f64> = x.iter().map(|&v| bf16::from_f64(v).to_f64()).collect();
    let (lb, db) = t::<bf16>(&xb, &[rows, v])?.fused_classifier(&targets, &g, 0.2)?;
    let (l32, d32) = t::<f32>(&xb, &[rows, v])?.fused_classifier(&targets, &g, 0.2)?;
    close("bf16 loss", &host(&lb)?, &host(&l32)?, |w| {
        1e-5 * (1.0 + w.abs())
    })?;
    close("bf16 dlogits", &host(&db)?, &host(&d32)?, half_tol(7, 1e-9))?;
    Ok(())
}

fn embedding() -> TestResult {
    let w = t::<f32>(&vals(40, 6, 1.0), &[10, 4])?;
    let ids = Tensor::from_vec(vec![3i32, 9, 3, 0, 0, 3], &[2, 3])?;
    let out = w.embedding(&ids)?;
    ensure!(out.shape() == [2, 3, 4], "shape {:?}", out.shape());
    let (wv, ov) = (w.to_vec()?, out.to_vec()?);
    ensure!(ov[..4] == wv[12..16], "row 0 is weight row 3");
    let dw = out.embedding_backward(&ids, 10)?;
    ensure!(dw.shape() == [10, 4], "dweight shape");
    let d = dw.to_vec()?;
    for c in 0..4 {
        ensure!(d[12 + c] == 3.0 * wv[12 + c], "id 3 used three times");
        ensure!(d[4 + c] == 0.0, "id 1 unused");
    }
    ensure!(
        out.embedding_backward(&ids.reshape(&[6])?, 10).is_err(),
        "shape checked"
    );
    Ok(())
}

fn dropout() -> TestResult {
    let x = t::<f32>(&vals(1000, 7, 1.0), &[10, 100])?;
    let y = x.dropout(0.25, 11, 400)?;
    let g = t::<f32>(&[1.0; 1000], &[10, 100])?;
    let back = g.dropout(0.25, 11, 400)?.to_vec()?;
    let (xv, yv) = (x.to_vec()?, y.to_vec()?);
    let mut kept = 0;
    for i in 0..1000 {
        let k = back[i] != 0.0;
        kept += usize::from(k);
        let want = if k { xv[i] / 0.75 } else { 0.0 };
        ensure!((yv[i] - want).abs() <= 1e-6 * want.abs(), "element {i}");
    }
    ensure!(
        (650..850).contains(&kept),
        "kept {kept} of 1000 at p = 0.25"
    );
    ensure!(
        x.dropout(0.0, 1, 0)?.to_vec()? == xv,
        "p = 0 is the identity"
    );
    ensure!(
        x.dropout(1.0, 1, 0)?.to_vec()?.iter().all(|&v| v == 0.0),
        "p = 1: zeros"
    );
    Ok(())
}

fn clip() -> TestResult {
    let mut a = Tensor::from_vec(vec![3.0f32, 0.0], &[2])?;
    let mut b = Tensor::from_vec(vec![4.0f32], &[1])?;
    let norm = clip_grad_norm_(&mut [&mut a, &mut b], 1.0)?;
    ensure!((norm.item()? - 5.0).abs() < 1e-6, "norm {}", norm.item()?);
    let s = 1.0 / (5.0 + 1e-6);
    ensure!((a.to_vec()?[0] - 3.0 * s as f32).abs() < 1e-6, "a scaled");
    ensure!((b.to_vec()?[0] - 4.0 * s as f32).abs() < 1e-6, "b scaled");
    ensure!(
        clip_grad_norm_::<f32>(&mut [&mut a], -1.0).is_err(),
        "negative max_norm"
    );
    Ok(())
}

fn errors() -> TestResult {
    let x = t::<f32>(&vals(12, 8, 1.0), &[3, 4])?;
    let w3 = t::<f32>(&[1.0; 3], &[3])?;
    ensure!(
        matches!(
            x.layer_norm(&w3, &w3, 1e-5),
            Err(TensorError::ShapeMismatch { .. })
        ),
        "weight of the wrong length"
    );
    let targets = Tensor::from_vec(vec![0i32, 1, 2], &[3])?;
    let g2 = Tensor::from_vec(vec![1.0f32, 1.0], &[2])?;
    ensure!(
        x.fused_classifier(&targets, &g2, 1.0).is_err(),
        "two-element upstream gradient"
    );
    ensure!(
        x.classifier_loss(&targets.reshape(&[3, 1])?).is_err(),
        "targets [3, 1]"
    );
    ensure!(x.dropout(2.0, 0, 0).is_err(), "p = 2");
    ensure!(
        x.reshape(&[12])?.embedding(&targets).is_err(),
        "a 1-D table"
    );
    Ok(())
}
