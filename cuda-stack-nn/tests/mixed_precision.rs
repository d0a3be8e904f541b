//! Mixed precision: f32 master weights cast to bf16/f16 for the forward and backward
//! (`Var::cast`), gradients coming back in f32, against the same model computed in f32 on the
//! same (rounded) inputs; `Var<bf16>`/`Var<f16>` through matmul, bias, GELU, tanh, log-softmax
//! and cross-entropy; and `GradScaler`'s skip / back-off / growth against PyTorch's rule.
//!
//! Tolerances: bf16 rounds to 8 significant bits (relative 2⁻⁹ per rounding), f16 to 11; a
//! gradient here passes through about ten roundings (inputs, two matmuls with f32
//! accumulation, the activations, the loss rows), so each gradient is compared with the f32
//! model's in its max-abs norm: `max|g − g32| ≤ tol · max|g32|` with tol 4e-2 for bf16 and 5e-3
//! for f16; the loss within 2e-2 (bf16) and 3e-3 (f16) relative.

use cuda_stack_nn::{
    class_targets, GradElement, GradScaler, GradScalerConfig, NnError, Optimizer, Sgd, SgdConfig,
    Var,
};
use cuda_stack_runtime::cuda_stack_driver::half::{bf16, f16};
use cuda_stack_runtime::Tensor;
use cuda_tests::{ensure, gpu, TestResult};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() {
    cuda_tests::run(vec![
        gpu("bf16_compute_gradients_match_f32", || {
            half_matches_f32::<bf16>(4e-2, 2e-2)
        }),
        gpu("f16_compute_gradients_match_f32", || {
            half_matches_f32::<f16>(5e-3, 3e-3)
        }),
        gpu("cast_of_a_computed_value_is_refused", cast_refused),
        gpu("cast_gradients_reach_the_sources_hooks", cast_hooks),
        gpu("grad_scaler_skips_backs_off_and_grows", grad_scaler),
        gpu("cast_many_equals_cast_one_by_one", cast_many_bf16),
        gpu(
            "deferred_cast_gradients_equal_immediate_ones",
            deferred_cast_gradients,
        ),
    ]);
}

/// Deterministic values in [-r, r).
fn values(n: usize, seed: u64, r: f64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let u = (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
            ((2.0 * u - 1.0) * r) as f32
        })
        .collect()
}

/// The f32 values of `v` rounded to `U` and back (the inputs both models see).
fn rounded<U: GradElement>(v: &[f32], shape: &[usize]) -> Res<Tensor<f32>> {
    Ok(Tensor::from_vec(v.to_vec(), shape)?
        .to_dtype::<U>()?
        .to_dtype::<f32>()?)
}

/// The model: `loss = CE(tanh(relu(x·W1ᵀ + b1)·W2ᵀ + b2) · 3, t)`, with a log-softmax row check
/// folded in (the mean of log_softmax's first column is added).
fn model<T: GradElement>(
    x: &Var<T>,
    w1: &Var<T>,
    b1: &Var<T>,
    w2: &Var<T>,
    b2: &Var<T>,
    t: &Tensor<i32>,
) -> Res<Var<T>> {
    // GELU, not ReLU: a pre-activation within a rounding of 0 would switch a ReLU gate off in
    // U and on in f32, and the gradients would then differ by design; GELU is smooth. (ReLU's
    // half-precision backward has its own tests in the kernels' half_grads suite.)
    let h = x.matmul(&w1.t()?)?.add(b1)?.gelu()?;
    let z = h.matmul(&w2.t()?)?.add(b2)?.tanh()?.scale(3.0)?;
    let extra = z.log_softmax(-1)?.narrow(1, 0, 1)?.mean_all()?;
    Ok(z.cross_entropy(t)?.add(&extra)?)
}

fn max_abs(v: &[f32]) -> f32 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

fn half_matches_f32<U: GradElement>(tol: f32, loss_tol: f64) -> TestResult {
    let (n, d, h, c) = (64, 32, 48, 10);
    let shapes: [&[usize]; 5] = [&[n, d], &[h, d], &[h], &[c, h], &[c]];
    let raw: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            values(
                s.iter().product(),
                21 + i as u64,
                if i == 0 { 1.0 } else { 0.3 },
            )
        })
        .collect();
    let labels: Vec<usize> = (0..n).map(|i| (i * 7) % c).collect();
    let t = class_targets(&labels, c)?;
    // Both models start from the same U-representable values.
    let params32: Vec<Var<f32>> = (1..5)
        .map(|i| Ok(Var::parameter(rounded::<U>(&raw[i], shapes[i])?)))
        .collect::<Res<_>>()?;
    let x32 = Var::constant(rounded::<U>(&raw[0], shapes[0])?);
    let loss32 = model(
        &x32,
        &params32[0],
        &params32[1],
        &params32[2],
        &params32[3],
        &t,
    )?;
    loss32.backward()?;
    let want: Vec<Vec<f32>> = params32
        .iter()
        .map(|p| Ok(p.grad()?.ok_or("no f32 gradient")?.to_vec()?))
        .collect::<Res<_>>()?;
    let l32 = loss32.value().item()? as f64;
    // Mixed precision: f32 masters, compute in U.
    let masters: Vec<Var<f32>> = (1..5)
        .map(|i| Ok(Var::parameter(rounded::<U>(&raw[i], shapes[i])?)))
        .collect::<Res<_>>()?;
    let casts: Vec<Var<U>> = masters
        .iter()
        .map(|p| p.cast::<U>())
        .collect::<Result<_, _>>()?;
    let x = Var::constant(rounded::<U>(&raw[0], shapes[0])?.to_dtype::<U>()?);
    let loss = model(&x, &casts[0], &casts[1], &casts[2], &casts[3], &t)?;
    loss.backward()?;
    let l = loss.value().to_dtype::<f32>()?.item()? as f64;
    // The loss is the sum of two terms of magnitude about 3 (the cross-entropy of 10 classes
    // and a mean log-probability) that nearly cancel, each rounded to U: its error is relative
    // to the terms (taken as 4), not to the small sum.
    ensure!(
        (l - l32).abs() <= loss_tol * 4.0,
        "{}: loss {l} vs f32 {l32}",
        std::any::type_name::<U>()
    );
    for (i, (m, w)) in masters.iter().zip(&want).enumerate() {
        let g = m
            .grad()?
            .ok_or("no gradient reached the f32 master")?
            .to_vec()?;
        let err = g
            .iter()
            .zip(w)
            .fold(0.0f32, |e, (a, b)| e.max((a - b).abs()));
        let scale = max_abs(w);
        ensure!(
            err <= tol * scale,
            "{} parameter {i}: max |g − g32| = {err:e}, max |g32| = {scale:e} (tol {tol})",
            std::any::type_name::<U>()
        );
        ensure!(
            casts[i].grad()?.is_none(),
            "the cast leaf kept a gradient of its own"
        );
    }
    // A second backward accumulates into the masters, as for f32 parameters.
    let before = masters[0].grad()?.ok_or("gradient")?.to_vec()?;
    let loss2 = model(&x, &casts[0], &casts[1], &casts[2], &casts[3], &t)?;
    loss2.backward()?;
    let after = masters[0].grad()?.ok_or("gradient")?.to_vec()?;
    for (a, b) in after.iter().zip(&before) {
        ensure!(
            (a - 2.0 * b).abs() <= 1e-6 * (1.0 + b.abs()),
            "accumulation: {a} vs 2·{b}"
        );
    }
    Ok(())
}

fn cast_refused() -> TestResult {
    let p = Var::parameter(Tensor::from_vec(vec![1.0f32, 2.0], &[2])?);
    let computed = p.scale(2.0)?;
    match computed.cast::<bf16>() {
        Err(NnError::Invalid {
            what: "Var::cast", ..
        }) => {}
        other => return Err(format!("cast of a computed value: {other:?}").into()),
    }
    // A constant casts to a constant.
    let c = Var::constant(Tensor::from_vec(vec![1.0f32], &[1])?).cast::<bf16>()?;
    ensure!(!c.requires_grad(), "a cast constant requires grad");
    Ok(())
}

fn cast_hooks() -> TestResult {
    let p = Var::parameter(Tensor::from_vec(vec![1.0f32, -2.0, 3.0], &[3])?);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let _h = p.register_grad_ready_hook(move |g| {
        s2.lock().unwrap().push(g.to_vec()?);
        Ok(())
    })?;
    let q = p.cast::<bf16>()?;
    q.mul(&q)?.sum_all()?.backward()?; // d/dp Σ p² = 2p
    let got = seen.lock().unwrap().clone();
    ensure!(got == vec![vec![2.0, -4.0, 6.0]], "hook saw {got:?}");
    Ok(())
}

fn grad_scaler() -> TestResult {
    // Σ p·x in f16. The default scale is 2¹⁵, the largest power of two an f16 gradient seed
    // holds; with x = 1000 the parameter's gradient 1000·2¹⁵ overflows f16.
    let p = Var::parameter(Tensor::from_vec(vec![0.5f32, -0.25], &[2])?);
    let mut opt = Sgd::new(vec![p.clone()], SgdConfig::new(0.1))?;
    let mut scaler = GradScaler::new(GradScalerConfig {
        growth_interval: 2,
        ..Default::default()
    })?;
    ensure!(
        scaler.scale() == 32768.0,
        "default scale {}",
        scaler.scale()
    );
    let step = |scaler: &mut GradScaler, opt: &mut Sgd<f32>, x: f32| -> Res<bool> {
        opt.zero_grad();
        let xv = Var::constant(Tensor::from_vec(vec![x, x], &[2])?.to_dtype::<f16>()?);
        let loss = p.cast::<f16>()?.mul(&xv)?.sum_all()?;
        scaler.scale_loss(&loss)?.backward()?;
        Ok(scaler.step(opt)?)
    };
    ensure!(
        !step(&mut scaler, &mut opt, 1000.0)?,
        "an overflowing step ran"
    );
    ensure!(
        scaler.scale() == 16384.0,
        "scale after a skip: {}",
        scaler.scale()
    );
    ensure!(
        scaler.skipped_steps() == 1,
        "skipped {}",
        scaler.skipped_steps()
    );
    ensure!(
        p.value().to_vec()? == [0.5, -0.25],
        "a skipped step changed the parameter"
    );
    // x = 0.5: gradient 0.5 per element, scaled by 2¹⁴ (exact in f16), unscaled exactly.
    ensure!(step(&mut scaler, &mut opt, 0.5)?, "a good step was skipped");
    let v = p.value().to_vec()?;
    ensure!(
        (v[0] - 0.45).abs() <= 1e-7 && (v[1] + 0.3).abs() <= 1e-7,
        "after one SGD step with gradient 0.5: {v:?}"
    );
    ensure!(scaler.scale() == 16384.0, "no growth after one good step");
    ensure!(step(&mut scaler, &mut opt, 0.5)?, "a good step was skipped");
    ensure!(
        scaler.scale() == 32768.0,
        "growth after two good steps: {}",
        scaler.scale()
    );
    // Growth stops at max_scale (2¹⁵ by default).
    ensure!(step(&mut scaler, &mut opt, 0.5)?, "a good step was skipped");
    ensure!(step(&mut scaler, &mut opt, 0.5)?, "a good step was skipped");
    ensure!(
        scaler.scale() == 32768.0,
        "grew past max_scale: {}",
        scaler.scale()
    );
    Ok(())
}

/// `Var::cast_many` (one launch per 136 tensors) gives what `Var::cast` gives one by one: the
/// same bf16 bits, and the same f32 gradients back in the sources — for 150 parameters of odd
/// sizes (more than one launch's table), one of them used twice.
fn cast_many_bf16() -> TestResult {
    let sizes: Vec<usize> = (0..150)
        .map(|i| [1, 2, 3, 31, 257, 2049, 5][i % 7] + i % 3)
        .collect();
    let make = || -> Res<Vec<Var<f32>>> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                Ok(Var::parameter(Tensor::from_vec(
                    values(n, i as u64, 2.0),
                    &[n],
                )?))
            })
            .collect()
    };
    let (a, b) = (make()?, make()?);
    let many = Var::cast_many::<bf16>(&a)?;
    let one: Vec<Var<bf16>> = b
        .iter()
        .map(|p| p.cast::<bf16>())
        .collect::<Result<_, _>>()?;
    // Σ_i Σ (c_i · w_i) over all the cast values, with weights w_i, then backward.
    let loss = |cs: &[Var<bf16>]| -> Res<Var<bf16>> {
        let mut total: Option<Var<bf16>> = None;
        for (i, c) in cs.iter().enumerate() {
            let w = Var::constant(Tensor::from_vec(
                values(c.numel(), 1000 + i as u64, 1.0)
                    .into_iter()
                    .map(bf16::from_f32)
                    .collect(),
                &[c.numel()],
            )?);
            let t = c.mul(&w)?.sum_all()?;
            total = Some(match total {
                None => t,
                Some(x) => x.add(&t)?,
            });
        }
        total.ok_or_else(|| "no parameters".into())
    };
    for (x, y) in many.iter().zip(&one) {
        ensure!(
            x.value().to_vec()? == y.value().to_vec()?,
            "cast values differ"
        );
    }
    loss(&many)?.backward()?;
    loss(&one)?.backward()?;
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let (gx, gy) = (x.grad()?.ok_or("no grad")?, y.grad()?.ok_or("no grad")?);
        ensure!(gx.to_vec()? == gy.to_vec()?, "gradient {i} differs");
    }
    // A computed value is refused before anything is cast.
    let c = a[0].mul(&a[0])?;
    ensure!(
        Var::cast_many::<bf16>(&[a[1].clone(), c]).is_err(),
        "cast of a computed value"
    );
    Ok(())
}

/// The gradients of casts whose sources have no hooks are converted in one batch when the
/// backward pass ends; with a (no-op) grad-ready hook on the source they are converted at once.
/// Both give the same bits: 150 parameters of odd shapes (lengths 1 to 300, more than one
/// launch's table), one unused, one cast twice, over two accumulating backward passes — and
/// the batched gradients are there as soon as `backward` returns.
fn deferred_cast_gradients() -> TestResult {
    const N: usize = 150;
    const UNUSED: usize = 3;
    const TWICE: usize = 7;
    let shape = |i: usize| -> Vec<usize> {
        let n = 1 + (i * 97) % 300;
        match i % 3 {
            0 => vec![n],
            1 => vec![n, 1],
            _ if n % 3 == 0 => vec![3, n / 3],
            _ => vec![1, n],
        }
    };
    let make = || -> Res<Vec<Var<f32>>> {
        (0..N)
            .map(|i| {
                let s = shape(i);
                let v = values(s.iter().product(), 500 + i as u64, 2.0);
                Ok(Var::parameter(Tensor::from_vec(v, &s)?))
            })
            .collect()
    };
    // `deferred`: no hooks (batched); `immediate`: the same values, each with a no-op hook.
    let (deferred, immediate) = (make()?, make()?);
    let _hooks = immediate
        .iter()
        .map(|p| p.register_grad_ready_hook(|_| Ok(())))
        .collect::<Result<Vec<_>, _>>()?;
    // The shape of cast `i` (`N`: the second cast of parameter `TWICE`), and its weights in
    // pass `pass`, bf16 values.
    let cast_shape = |i: usize| if i == N { shape(TWICE) } else { shape(i) };
    let weight = |i: usize, pass: u64| -> Vec<f32> {
        let n = cast_shape(i).iter().product();
        values(n, 3000 + 211 * pass + i as u64, 1.0)
            .into_iter()
            .map(|x| bf16::from_f32(x).to_f32())
            .collect()
    };
    let weight_of = |i: usize, pass: u64| -> Res<Var<bf16>> {
        let w: Vec<bf16> = weight(i, pass).into_iter().map(bf16::from_f32).collect();
        Ok(Var::constant(Tensor::from_vec(w, &cast_shape(i))?))
    };
    // Σ_i Σ (c_i · w_i) over the casts but the unused one, plus the second cast's term.
    let loss = |cs: &[Var<bf16>], second: &Var<bf16>, pass: u64| -> Res<Var<bf16>> {
        let mut total = second.mul(&weight_of(N, pass)?)?.sum_all()?;
        for (i, c) in cs.iter().enumerate() {
            if i != UNUSED {
                total = total.add(&c.mul(&weight_of(i, pass)?)?.sum_all()?)?;
            }
        }
        Ok(total)
    };
    let casts_d = Var::cast_many::<bf16>(&deferred)?;
    let casts_i = Var::cast_many::<bf16>(&immediate)?;
    let (second_d, second_i) = (
        deferred[TWICE].cast::<bf16>()?,
        immediate[TWICE].cast::<bf16>()?,
    );
    for pass in 0..2u64 {
        loss(&casts_d, &second_d, pass)?.backward()?;
        // The batch was converted before `backward` returned.
        for (i, p) in deferred.iter().enumerate() {
            ensure!(
                p.grad()?.is_some() == (i != UNUSED),
                "pass {pass}: parameter {i} has a gradient: {}",
                p.grad()?.is_some()
            );
        }
        loss(&casts_i, &second_i, pass)?.backward()?;
        for (i, (d, m)) in deferred.iter().zip(&immediate).enumerate() {
            let (gd, gm) = match (d.grad()?, m.grad()?) {
                (None, None) if i == UNUSED => continue,
                (Some(gd), Some(gm)) => (gd.to_vec()?, gm.to_vec()?),
                (gd, gm) => {
                    return Err(format!(
                        "pass {pass}: parameter {i}: deferred gradient {}, immediate {}",
                        gd.is_some(),
                        gm.is_some()
                    )
                    .into())
                }
            };
            let same =
                gd.len() == gm.len() && gd.iter().zip(&gm).all(|(a, b)| a.to_bits() == b.to_bits());
            ensure!(
                same,
                "pass {pass}: parameter {i}: the batched gradient differs from the immediate one"
            );
            // And both are the exact sums of the weights (widening to f32 is exact).
            if i != TWICE {
                let mut want = weight(i, 0);
                if pass == 1 {
                    for (w, x) in want.iter_mut().zip(weight(i, 1)) {
                        *w += x;
                    }
                }
                ensure!(
                    gd.iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "pass {pass}: parameter {i}: gradient {:?}… vs Σ weights {:?}…",
                    &gd[..gd.len().min(4)],
                    &want[..want.len().min(4)]
                );
            }
        }
        for c in casts_d.iter().chain([&second_d]) {
            ensure!(c.grad()?.is_none(), "a cast leaf kept a gradient");
        }
    }
    Ok(())
}
