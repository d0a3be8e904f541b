//! Layers and optimizers on the GPU: SGD (plain, momentum, Nesterov, weight decay) and Adam /
//! AdamW steps against f64 CPU references of PyTorch's update rules, parameter counts and names
//! of the seeds' models, and a small model that must learn.

use cuda_nn::{
    class_targets, Adam, AdamConfig, FusedOpLayer, Linear, Module, Optimizer, Relu, Sequential,
    Sgd, SgdConfig, Var,
};
use cuda_runtime_lite::Tensor;
use cuda_tests::{ensure, gpu, TestResult};

fn main() {
    cuda_tests::run(vec![
        gpu("sgd_steps_match_the_cpu_rule", sgd),
        gpu("adam_and_adamw_steps_match_the_cpu_rule", adam),
        gpu("seed_models_count_and_name_parameters", model_shapes),
        gpu("parameters_without_grad_are_skipped", skipped),
        gpu("an_mlp_learns_a_separable_problem", learns),
    ]);
}

/// A parameter whose gradient is set by a backward of `Σ g·p` (so `p.grad == g` exactly).
fn param_with_grad(p: &[f64], g: &[f64]) -> Result<Var<f64>, Box<dyn std::error::Error>> {
    let v = Var::parameter(Tensor::from_vec(p.to_vec(), &[p.len()])?);
    set_grad(&v, g)?;
    Ok(v)
}

fn set_grad(v: &Var<f64>, g: &[f64]) -> TestResult {
    v.zero_grad();
    let gt = Var::constant(Tensor::from_vec(g.to_vec(), &[g.len()])?);
    v.mul(&gt)?.sum_all()?.backward()?;
    Ok(())
}

fn close(a: &[f64], b: &[f64], what: &str) -> TestResult {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        ensure!(
            (x - y).abs() <= 1e-12 * (1.0 + y.abs()),
            "{what}[{i}]: gpu {x} vs cpu {y}"
        );
    }
    Ok(())
}

fn sgd() -> TestResult {
    let p0 = [0.5, -1.0, 2.0, 0.0];
    let grads = [
        [0.1, 0.2, -0.3, 0.4],
        [-0.2, 0.1, 0.0, 0.5],
        [0.3, -0.1, 0.2, -0.4],
    ];
    for (momentum, dampening, wd, nesterov) in [
        (0.0, 0.0, 0.0, false),
        (0.0, 0.0, 0.01, false),
        (0.9, 0.1, 0.01, false),
        (0.9, 0.0, 0.0, true),
    ] {
        let lr = 0.1;
        let p = param_with_grad(&p0, &grads[0])?;
        let cfg = SgdConfig {
            lr,
            momentum,
            dampening,
            weight_decay: wd,
            nesterov,
        };
        let mut opt = Sgd::new(vec![p.clone()], cfg)?;
        let (mut cp, mut buf): (Vec<f64>, Option<Vec<f64>>) = (p0.to_vec(), None);
        for (step, g) in grads.iter().enumerate() {
            if step > 0 {
                set_grad(&p, g)?;
            }
            opt.step()?;
            // PyTorch's SGD, on the CPU.
            let d: Vec<f64> = g.iter().zip(&cp).map(|(g, p)| g + wd * p).collect();
            let d = if momentum != 0.0 {
                let b: Vec<f64> = match &buf {
                    None => d.clone(),
                    Some(b) => b
                        .iter()
                        .zip(&d)
                        .map(|(b, d)| momentum * b + (1.0 - dampening) * d)
                        .collect(),
                };
                let out = if nesterov {
                    d.iter().zip(&b).map(|(d, b)| d + momentum * b).collect()
                } else {
                    b.clone()
                };
                buf = Some(b);
                out
            } else {
                d
            };
            cp = cp.iter().zip(&d).map(|(p, d)| p - lr * d).collect();
            close(
                &p.value().to_vec()?,
                &cp,
                &format!("sgd m={momentum} wd={wd} nesterov={nesterov} step {step}"),
            )?;
        }
    }
    Ok(())
}

fn adam() -> TestResult {
    let p0 = [0.5, -1.0, 2.0, 0.0, 3.0];
    let grads = [
        [0.1, 0.2, -0.3, 0.4, 0.0],
        [-0.2, 0.1, 0.0, 0.5, 1.0],
        [0.3, -0.1, 0.2, -0.4, 0.0],
    ];
    for (wd, decoupled) in [(0.0, false), (0.1, false), (0.1, true)] {
        let cfg = AdamConfig {
            lr: 0.01,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: wd,
            decoupled_weight_decay: decoupled,
        };
        let p = param_with_grad(&p0, &grads[0])?;
        let mut opt = Adam::new(vec![p.clone()], cfg)?;
        let (mut cp, mut m, mut v) = (p0.to_vec(), vec![0.0; 5], vec![0.0; 5]);
        for (step, g) in grads.iter().enumerate() {
            if step > 0 {
                set_grad(&p, g)?;
            }
            opt.step()?;
            let t = (step + 1) as i32;
            let (b1, b2) = cfg.betas;
            let (bc1, bc2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
            for i in 0..5 {
                let mut gi = g[i];
                if decoupled {
                    cp[i] *= 1.0 - cfg.lr * wd;
                } else {
                    gi += wd * cp[i];
                }
                m[i] = b1 * m[i] + (1.0 - b1) * gi;
                v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
                cp[i] -= (cfg.lr / bc1) * m[i] / (v[i].sqrt() / bc2.sqrt() + cfg.eps);
            }
            close(
                &p.value().to_vec()?,
                &cp,
                &format!("adam wd={wd} decoupled={decoupled} step {step}"),
            )?;
        }
    }
    Ok(())
}

fn model_shapes() -> TestResult {
    let tiny = Sequential::<f32>::new()
        .append(Linear::new(784, 512, 1)?)
        .append(Relu)
        .append(Linear::new(512, 10, 2)?);
    ensure!(
        tiny.num_parameters() == 784 * 512 + 512 + 512 * 10 + 10,
        "seed 001 model: {}",
        tiny.num_parameters()
    );
    let names: Vec<String> = tiny
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    ensure!(
        names == ["0.weight", "0.bias", "2.weight", "2.bias"],
        "{names:?}"
    );
    let fused = Sequential::<f32>::new()
        .append(Linear::new(512, 256, 3)?)
        .append(FusedOpLayer::new(256, 2.0)?)
        .append(Linear::new(256, 10, 4)?);
    ensure!(
        fused.num_parameters() == 512 * 256 + 256 + 256 + 256 * 10 + 10,
        "seed 004 model"
    );
    ensure!(
        fused
            .describe()
            .contains("(1): FusedOpLayer(features=256, scale=2)"),
        "{}",
        fused.describe()
    );
    // PyTorch's default init bound 1/√fan_in.
    let w = Linear::<f32>::new(784, 512, 9)?.weight().value().to_vec()?;
    let bound = 1.0 / 784f32.sqrt();
    ensure!(w.iter().all(|v| v.abs() <= bound), "init within ±1/√784");
    ensure!(
        w.iter().cloned().fold(0.0f32, f32::max) > 0.9 * bound,
        "init spans the range"
    );
    Ok(())
}

fn skipped() -> TestResult {
    let a = Var::parameter(Tensor::from_vec(vec![1.0f64, 2.0], &[2])?);
    let b = Var::parameter(Tensor::from_vec(vec![3.0f64], &[1])?);
    a.sum_all()?.backward()?;
    let mut opt = Sgd::new(vec![a.clone(), b.clone()], SgdConfig::new(0.5))?;
    opt.step()?;
    ensure!(a.value().to_vec()? == [0.5, 1.5], "a stepped");
    ensure!(b.value().to_vec()? == [3.0], "b has no grad: unchanged");
    opt.zero_grad();
    ensure!(a.grad()?.is_none(), "zero_grad");
    Ok(())
}

fn learns() -> TestResult {
    // 4 classes: the sign pattern of the first two of 8 features (plus noise features).
    let n = 256;
    let x = Tensor::<f32>::randn(&[n, 8], 11)?;
    let xs = x.to_vec()?;
    let labels: Vec<usize> = (0..n)
        .map(|i| usize::from(xs[i * 8] > 0.0) * 2 + usize::from(xs[i * 8 + 1] > 0.0))
        .collect();
    let t = class_targets(&labels, 4)?;
    let model = Sequential::<f32>::new()
        .append(Linear::new(8, 32, 1)?)
        .append(Relu)
        .append(Linear::new(32, 4, 2)?);
    let mut opt = Adam::new(model.parameters(), AdamConfig::new(0.01))?;
    let xv = Var::constant(x);
    let mut first = None;
    let mut last = 0.0;
    for _ in 0..200 {
        opt.zero_grad();
        let loss = model.forward(&xv)?.cross_entropy(&t)?;
        loss.backward()?;
        opt.step()?;
        last = loss.value().item()?;
        first.get_or_insert(last);
    }
    let first = first.ok_or("no step")?;
    ensure!(last < 0.25 * first && last < 0.3, "loss {first} -> {last}");
    Ok(())
}
