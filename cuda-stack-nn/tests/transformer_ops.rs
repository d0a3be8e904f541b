//! The transformer's non-attention ops as autograd ops and layers: gradchecks (f64 central
//! differences, PyTorch's tolerances: atol 1e-5, rtol 1e-3) of `layer_norm`, `gelu`,
//! `embedding`, `dropout` and `fused_cross_entropy`; global-norm clipping against a host
//! computation; the layers' shapes, initialisation and modes; and a small
//! embedding → LayerNorm → MLP → fused-loss model whose loss falls under Adam with clipping.

use cuda_stack_nn::{
    class_targets, clip_grad_norm, gradcheck, token_ids, Adam, AdamConfig, Dropout, Embedding,
    Gelu, GradcheckOptions, LayerNorm, Linear, Module, Optimizer, Var,
};
use cuda_stack_runtime::Tensor;
use cuda_tests::{cpu, ensure, gpu, TestResult};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn main() {
    cuda_tests::run(vec![
        cpu(
            "dropout_layer_checks_p_and_describes_itself",
            dropout_layer_cpu,
        ),
        gpu("gradcheck_layer_norm", grad_layer_norm),
        gpu("gradcheck_residual_stream", grad_residual_stream),
        gpu(
            "add_layer_norm_equals_add_then_layer_norm",
            add_layer_norm_bits,
        ),
        gpu("gradcheck_gelu", grad_gelu),
        gpu("gradcheck_fused_cross_entropy", grad_fused_ce),
        gpu("gradcheck_embedding", grad_embedding),
        gpu("gradcheck_dropout", grad_dropout),
        gpu("fused_cross_entropy_equals_cross_entropy", fused_ce_value),
        gpu("clip_grad_norm_scales_on_the_device", clip),
        gpu("layers_shapes_init_and_modes", layers),
        gpu("f32_layer_norm_matches_f64", f32_layer_norm),
        gpu("tiny_transformer_mlp_learns", tiny_model),
    ]);
}

fn values(n: usize, seed: u64, scale: f64) -> Vec<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..n)
        .map(|_| scale * rng.random_range(-1.0..1.0))
        .collect()
}

fn t64(shape: &[usize], seed: u64, scale: f64) -> Result<Tensor<f64>, Box<dyn std::error::Error>> {
    let n = shape.iter().product();
    Ok(Tensor::from_vec(values(n, seed, scale), shape)?)
}

fn check(
    what: &str,
    f: impl Fn(&[Var<f64>]) -> cuda_stack_nn::Result<Var<f64>>,
    inputs: &[Tensor<f64>],
) -> TestResult {
    let report = gradcheck(f, inputs, GradcheckOptions::default())?;
    ensure!(report.passed, "{what}: {report}");
    ensure!(report.entries > 0, "{what}: nothing compared");
    Ok(())
}

fn grad_layer_norm() -> TestResult {
    // Full Jacobians on small shapes (rank 2 and 3, weight and bias far from 1 and 0).
    for shape in [vec![3usize, 5], vec![2, 3, 4], vec![4, 1]] {
        let c = *shape.last().ok_or("shape")?;
        let x = t64(&shape, 1, 2.0)?;
        let w = Tensor::from_vec(values(c, 2, 1.0).iter().map(|v| v + 1.5).collect(), &[c])?;
        let b = t64(&[c], 3, 0.5)?;
        check(
            &format!("layer_norm {shape:?}"),
            |v| v[0].layer_norm(&v[1], &v[2], 1e-5),
            &[x, w, b],
        )?;
    }
    // Rows beyond a warp's register cache (f64: 512 forward, 256 backward: the block-per-row
    // kernels, in registers up to 2048, re-reading beyond), through a weighted sum so that the
    // Jacobian is one row.
    for (rows, c) in [(2usize, 600usize), (2, 2500)] {
        let proj = Var::constant(t64(&[rows, c], 4, 1.0)?);
        check(
            &format!("layer_norm of {c}-wide rows"),
            |v| v[0].layer_norm(&v[1], &v[2], 1e-5)?.mul(&proj)?.sum_all(),
            &[
                t64(&[rows, c], 5, 1.0)?,
                Tensor::from_vec(values(c, 6, 0.5).iter().map(|v| v + 1.0).collect(), &[c])?,
                t64(&[c], 7, 0.5)?,
            ],
        )?;
    }
    Ok(())
}

/// A pre-LayerNorm residual stream, two blocks deep: `x` feeds a LayerNorm and the first add,
/// each sum feeds the next add and a LayerNorm (whose backward folds the stream's gradient
/// into its dx kernel), and both the sums and the norms reach the output.
fn grad_residual_stream() -> TestResult {
    for (shape, seed) in [
        (vec![3usize, 5], 20u64),
        (vec![2, 3, 4], 30),
        (vec![2, 600], 40),
    ] {
        let c = *shape.last().ok_or("shape")?;
        let proj = Var::constant(t64(&shape, seed, 1.0)?);
        let proj2 = Var::constant(t64(&shape, seed + 1, 1.0)?);
        let affine = |k: u64| -> Result<Tensor<f64>, Box<dyn std::error::Error>> {
            Ok(Tensor::from_vec(
                values(c, seed + k, 0.5).iter().map(|v| v + 1.0).collect(),
                &[c],
            )?)
        };
        let stream = |v: &[Var<f64>]| -> cuda_stack_nn::Result<Var<f64>> {
            let h = v[0].layer_norm(&v[2], &v[3], 1e-5)?;
            let r1 = h.gelu()?.add(&v[1])?;
            let (s1, y1) = v[0].add_layer_norm(&r1, &v[4], &v[5], 1e-5)?;
            let (s2, y2) = s1.add_layer_norm(&y1.gelu()?, &v[2], &v[5], 1e-5)?;
            y2.mul(&proj)?.sum_all()?.add(&s2.mul(&proj2)?.sum_all()?)
        };
        check(
            &format!("residual stream {shape:?}"),
            stream,
            &[
                t64(&shape, seed + 2, 2.0)?,
                t64(&shape, seed + 3, 1.0)?,
                affine(4)?,
                t64(&[c], seed + 5, 0.5)?,
                affine(6)?,
                t64(&[c], seed + 7, 0.5)?,
            ],
        )?;
    }
    Ok(())
}

/// `Var::add_layer_norm` gives the same bits as `Var::add` then `Var::layer_norm`: values and
/// every gradient (f32, warp rows and block rows; the sum also read downstream).
fn add_layer_norm_bits() -> TestResult {
    for (rows, c) in [(33usize, 768usize), (5, 1500)] {
        let t32 = |seed: u64,
                   scale: f64,
                   shift: f64|
         -> Result<Tensor<f32>, Box<dyn std::error::Error>> {
            let v: Vec<f32> = values(rows * c, seed, scale)
                .iter()
                .map(|x| (x + shift) as f32)
                .collect();
            Ok(Tensor::from_vec(v, &[rows, c])?)
        };
        let p32 = |seed: u64, shift: f64| -> Result<Tensor<f32>, Box<dyn std::error::Error>> {
            let v: Vec<f32> = values(c, seed, 0.5)
                .iter()
                .map(|x| (x + shift) as f32)
                .collect();
            Ok(Tensor::from_vec(v, &[c])?)
        };
        let (x0, r0, w0, b0) = (
            t32(91, 3.0, 1.0)?,
            t32(92, 1.0, 0.0)?,
            p32(93, 1.0)?,
            p32(94, 0.0)?,
        );
        let (proj, proj2) = (
            Var::constant(t32(95, 1.0, 0.0)?),
            Var::constant(t32(96, 1.0, 0.0)?),
        );
        let mut runs = Vec::new();
        for fused in [true, false] {
            let (x, r, w, b) = (
                Var::parameter(x0.clone()),
                Var::parameter(r0.clone()),
                Var::parameter(w0.clone()),
                Var::parameter(b0.clone()),
            );
            let (s, y) = if fused {
                x.add_layer_norm(&r, &w, &b, 1e-5)?
            } else {
                let s = x.add(&r)?;
                let y = s.layer_norm(&w, &b, 1e-5)?;
                (s, y)
            };
            let loss = y.mul(&proj)?.sum_all()?.add(&s.mul(&proj2)?.sum_all()?)?;
            loss.backward()?;
            let mut out = vec![s.value().to_vec()?, y.value().to_vec()?];
            for v in [&x, &r, &w, &b] {
                out.push(v.grad()?.ok_or("grad")?.to_vec()?);
            }
            runs.push(out);
        }
        for (k, name) in ["sum", "y", "dx", "dres", "dweight", "dbias"]
            .iter()
            .enumerate()
        {
            let (a, b) = (&runs[0][k], &runs[1][k]);
            ensure!(a.len() == b.len(), "[{rows}, {c}] {name}: lengths differ");
            for (i, (p, q)) in a.iter().zip(b).enumerate() {
                ensure!(
                    p.to_bits() == q.to_bits(),
                    "[{rows}, {c}] {name}[{i}]: fused {p}, add then layer_norm {q}"
                );
            }
        }
    }
    Ok(())
}

fn grad_gelu() -> TestResult {
    check("gelu", |v| v[0].gelu(), &[t64(&[4, 6], 11, 3.0)?])?;
    check(
        "gelu of an odd length",
        |v| v[0].gelu()?.scale(0.5),
        &[t64(&[13], 12, 4.0)?],
    )?;
    Ok(())
}

fn grad_fused_ce() -> TestResult {
    let t = class_targets(&[2, 0, 6, 1], 7)?;
    check(
        "fused_cross_entropy",
        |v| v[0].fused_cross_entropy(&t),
        &[t64(&[4, 7], 21, 3.0)?],
    )?;
    // An upstream gradient other than 1 (read on the device in the backward kernel).
    check(
        "fused_cross_entropy scaled",
        |v| v[0].fused_cross_entropy(&t)?.scale(-2.5),
        &[t64(&[4, 7], 22, 3.0)?],
    )?;
    check(
        "fused_cross_entropy of a linear map",
        |v| v[0].matmul(&v[1])?.fused_cross_entropy(&t),
        &[t64(&[4, 3], 23, 1.0)?, t64(&[3, 7], 24, 1.0)?],
    )?;
    Ok(())
}

fn grad_embedding() -> TestResult {
    // Repeated ids (the scatter-add), an unused row, and a 2-D id tensor.
    let ids = token_ids(&[1, 4, 1, 0, 1, 1], 5, &[2, 3])?;
    check(
        "embedding",
        |v| v[0].embedding(&ids)?.tanh(),
        &[t64(&[5, 3], 31, 1.0)?],
    )?;
    Ok(())
}

fn grad_dropout() -> TestResult {
    check(
        "dropout p = 0.3",
        |v| v[0].dropout(0.3, 7, 12)?.tanh(),
        &[t64(&[4, 6], 41, 1.0)?],
    )?;
    Ok(())
}

fn fused_ce_value() -> TestResult {
    let labels: Vec<usize> = (0..9).map(|i| (i * 7) % 11).collect();
    let t = class_targets(&labels, 11)?;
    let x = Var::parameter(t64(&[9, 11], 51, 4.0)?);
    let a = x.fused_cross_entropy(&t)?;
    a.backward()?;
    let ga = x.grad()?.ok_or("no gradient")?.to_vec()?;
    x.zero_grad();
    let b = x.cross_entropy(&t)?;
    b.backward()?;
    let gb = x.grad()?.ok_or("no gradient")?.to_vec()?;
    let (va, vb) = (a.value().item()?, b.value().item()?);
    ensure!((va - vb).abs() < 1e-12, "losses {va} and {vb} differ");
    for (i, (p, q)) in ga.iter().zip(&gb).enumerate() {
        ensure!((p - q).abs() < 1e-14, "gradient {i}: {p} vs {q}");
    }
    Ok(())
}

fn clip() -> TestResult {
    let a = Var::parameter(t64(&[3, 4], 61, 1.0)?);
    let b = Var::parameter(t64(&[5], 62, 1.0)?);
    let c = Var::parameter(t64(&[2], 63, 1.0)?); // no gradient: skipped
    let ga = values(12, 64, 2.0);
    let gb = values(5, 65, 2.0);
    let norm: f64 = ga.iter().chain(&gb).map(|v| v * v).sum::<f64>().sqrt();
    for max_norm in [0.5, 1e9] {
        a.set_grad(Some(Tensor::from_vec(ga.clone(), &[3, 4])?))?;
        b.set_grad(Some(Tensor::from_vec(gb.clone(), &[5])?))?;
        let got = clip_grad_norm(&[a.clone(), b.clone(), c.clone()], max_norm)?;
        ensure!(
            got.shape().is_empty(),
            "the norm is 0-d, got {:?}",
            got.shape()
        );
        let got = got.item()?;
        ensure!((got - norm).abs() < 1e-12 * norm, "norm {got} vs {norm}");
        let scale = (max_norm / (norm + 1e-6)).min(1.0);
        let sa = a.grad()?.ok_or("grad a")?.to_vec()?;
        let sb = b.grad()?.ok_or("grad b")?.to_vec()?;
        for (g, w) in sa.iter().zip(&ga).chain(sb.iter().zip(&gb)) {
            ensure!(
                (g - w * scale).abs() < 1e-15,
                "scaled {g}, expected {}",
                w * scale
            );
        }
        ensure!(c.grad()?.is_none(), "a parameter without gradient got one");
    }
    // No gradients at all: norm 0.
    let z = clip_grad_norm(std::slice::from_ref(&c), 1.0)?.item()?;
    ensure!(z == 0.0, "norm of nothing = {z}");
    Ok(())
}

fn dropout_layer_cpu() -> TestResult {
    ensure!(Dropout::new(1.5, 0).is_err(), "p = 1.5 must be refused");
    ensure!(
        Dropout::new(f64::NAN, 0).is_err(),
        "p = NaN must be refused"
    );
    let d = Dropout::new(0.2, 1)?;
    ensure!(d.is_training(), "training by default");
    ensure!(
        Module::<f32>::describe(&d) == "Dropout(p=0.2, inplace=False)",
        "describe: {}",
        Module::<f32>::describe(&d)
    );
    ensure!(
        Module::<f32>::describe(&Gelu) == "GELU(approximate='tanh')",
        "gelu describe"
    );
    Ok(())
}

fn layers() -> TestResult {
    let ln = LayerNorm::<f64>::new(6, 1e-5)?;
    ensure!(ln.num_parameters() == 12, "LayerNorm(6) has 12 parameters");
    ensure!(ln.weight().value().to_vec()? == vec![1.0; 6], "gamma = 1");
    ensure!(ln.bias().value().to_vec()? == vec![0.0; 6], "beta = 0");
    ensure!(
        ln.describe() == "LayerNorm((6,), eps=1e-5, elementwise_affine=True)",
        "describe: {}",
        ln.describe()
    );
    let x = Var::parameter(t64(&[4, 6], 71, 2.0)?);
    let y = ln.forward(&x)?.to_tensor_checked()?;
    for r in 0..4 {
        let row = &y[r * 6..(r + 1) * 6];
        let mean: f64 = row.iter().sum::<f64>() / 6.0;
        let var: f64 = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 6.0;
        ensure!(mean.abs() < 1e-12, "row {r}: mean {mean}");
        ensure!((var - 1.0).abs() < 1e-4, "row {r}: variance {var}");
    }

    let emb = Embedding::<f64>::new(1000, 64, 3)?;
    let w = emb.weight().value().to_vec()?;
    let n = w.len() as f64;
    let mean = w.iter().sum::<f64>() / n;
    let std = (w.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
    ensure!(mean.abs() < 1e-3, "embedding init mean {mean}");
    ensure!((std - 0.02).abs() < 5e-4, "embedding init std {std}");
    ensure!(emb.describe() == "Embedding(1000, 64)", "describe");
    ensure!(
        emb.forward(&x).is_err(),
        "Embedding::forward of a Var is an error"
    );
    let ids = token_ids(&[3, 999, 3], 1000, &[3])?;
    let out = emb.forward_ids(&ids)?;
    ensure!(out.shape() == [3, 64], "shape {:?}", out.shape());
    ensure!(
        token_ids(&[1000], 1000, &[1]).is_err(),
        "id 1000 of 1000 refused"
    );

    let drop = Dropout::new(0.5, 9)?;
    let a = Module::<f64>::forward(&drop, &x)?.value().to_vec()?;
    ensure!(
        drop.offset() == 24,
        "offset advanced by 24, is {}",
        drop.offset()
    );
    let b = Module::<f64>::forward(&drop, &x)?.value().to_vec()?;
    ensure!(a != b, "two training forwards draw different masks");
    let xv = x.value().to_vec()?;
    for (o, i) in a.iter().zip(&xv) {
        ensure!(
            *o == 0.0 || (o - 2.0 * i).abs() < 1e-15,
            "kept values are scaled by 2"
        );
    }
    drop.set_training(false);
    let c = Module::<f64>::forward(&drop, &x)?.value().to_vec()?;
    ensure!(c == xv, "evaluation mode is the identity");
    let g = Module::<f64>::forward(&Gelu, &x)?;
    ensure!(g.shape() == [4, 6], "gelu shape");
    Ok(())
}

/// Reads a `Var`'s value (a small helper trait for the tests).
trait ToHost {
    fn to_tensor_checked(&self) -> Result<Vec<f64>, Box<dyn std::error::Error>>;
}

impl ToHost for Var<f64> {
    fn to_tensor_checked(&self) -> Result<Vec<f64>, Box<dyn std::error::Error>> {
        Ok(self.value().to_vec()?)
    }
}

fn f32_layer_norm() -> TestResult {
    let (rows, c) = (33, 768);
    let x64 = values(rows * c, 81, 3.0);
    let w64: Vec<f64> = values(c, 82, 0.5).iter().map(|v| v + 1.0).collect();
    let b64 = values(c, 83, 0.5);
    let g64 = values(rows * c, 84, 1.0);
    let to32 = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    let run64 = {
        let x = Var::parameter(Tensor::from_vec(x64.clone(), &[rows, c])?);
        let w = Var::parameter(Tensor::from_vec(w64.clone(), &[c])?);
        let b = Var::parameter(Tensor::from_vec(b64.clone(), &[c])?);
        let y = x.layer_norm(&w, &b, 1e-5)?;
        y.backward_with(&Tensor::from_vec(g64.clone(), &[rows, c])?, false)?;
        let grads = [&x, &w, &b]
            .iter()
            .map(|v| Ok(v.grad()?.ok_or("grad")?.to_vec()?))
            .collect::<Result<Vec<Vec<f64>>, Box<dyn std::error::Error>>>()?;
        (y.value().to_vec()?, grads)
    };
    let x = Var::parameter(Tensor::from_vec(to32(&x64), &[rows, c])?);
    let w = Var::parameter(Tensor::from_vec(to32(&w64), &[c])?);
    let b = Var::parameter(Tensor::from_vec(to32(&b64), &[c])?);
    let y = x.layer_norm(&w, &b, 1e-5)?;
    y.backward_with(&Tensor::from_vec(to32(&g64), &[rows, c])?, false)?;
    let y32 = y.value().to_vec()?;
    for (i, (a, b)) in y32.iter().zip(&run64.0).enumerate() {
        ensure!((f64::from(*a) - b).abs() < 1e-4, "y[{i}]: f32 {a}, f64 {b}");
    }
    for (k, v) in [&x, &w, &b].iter().enumerate() {
        let g = v.grad()?.ok_or("grad")?.to_vec()?;
        for (i, (a, b)) in g.iter().zip(&run64.1[k]).enumerate() {
            let tol = if k == 0 { 1e-4 } else { 1e-3 * (1.0 + b.abs()) };
            ensure!(
                (f64::from(*a) - b).abs() < tol,
                "grad {k}[{i}]: f32 {a}, f64 {b}"
            );
        }
    }
    Ok(())
}

fn tiny_model() -> TestResult {
    // Token t predicts token (t * 3 + 1) mod V: embedding → LayerNorm → Linear → GELU →
    // Linear → fused cross-entropy, Adam with global-norm clipping.
    let (vocab, dim, n) = (17usize, 16usize, 64usize);
    let emb = Embedding::<f32>::new(vocab, dim, 1)?;
    let ln = LayerNorm::<f32>::new(dim, 1e-5)?;
    let l1 = Linear::<f32>::new(dim, 32, 2)?;
    let l2 = Linear::<f32>::new(32, vocab, 3)?;
    let ids: Vec<usize> = (0..n).map(|i| (i * 5) % vocab).collect();
    let next: Vec<usize> = ids.iter().map(|t| (t * 3 + 1) % vocab).collect();
    let x = token_ids(&ids, vocab, &[n])?;
    let y = class_targets(&next, vocab)?;
    let mut params = emb.parameters();
    params.extend(ln.parameters());
    params.extend(l1.parameters());
    params.extend(l2.parameters());
    let mut opt = Adam::new(params.clone(), AdamConfig::new(1e-2))?;
    let mut losses = Vec::new();
    for _ in 0..100 {
        opt.zero_grad();
        let h = ln.forward(&emb.forward_ids(&x)?)?;
        let logits = l2.forward(&Gelu.forward(&l1.forward(&h)?)?)?;
        let loss = logits.fused_cross_entropy(&y)?;
        loss.backward()?;
        clip_grad_norm(&params, 1.0)?;
        opt.step()?;
        losses.push(loss.value().item()?);
    }
    let (first, last) = (losses[0], losses[losses.len() - 1]);
    ensure!(
        last < 0.5 * first,
        "loss fell from {first} only to {last}: {losses:?}"
    );
    Ok(())
}
