//! Layers and optimizers on the GPU: SGD (plain, momentum, Nesterov, weight decay) and Adam /
//! AdamW steps against f64 CPU references of PyTorch's update rules, parameter counts and names
//! of the seeds' models, and a small model that must learn.

use cuda_stack_nn::{
    class_targets, clip_grad_norm, clip_grad_scale, Adam, AdamConfig, CapturedStep, FusedOpLayer,
    Linear, Module, NnError, Optimizer, ParamGroup, Relu, Sequential, Sgd, SgdConfig, Var,
};
use cuda_stack_runtime::Tensor;
use cuda_tests::{ensure, gpu, TestResult};

fn main() {
    cuda_tests::run(vec![
        gpu("sgd_steps_match_the_cpu_rule", sgd),
        gpu("adam_and_adamw_steps_match_the_cpu_rule", adam),
        gpu(
            "adamw_param_groups_and_set_lr_match_the_cpu_rule",
            adam_groups,
        ),
        gpu(
            "adamw_with_a_device_clip_scale_equals_clip_then_step_bit_for_bit",
            adam_clip_scale,
        ),
        gpu("seed_models_count_and_name_parameters", model_shapes),
        gpu("parameters_without_grad_are_skipped", skipped),
        gpu("an_mlp_learns_a_separable_problem", learns),
        gpu("updates_are_in_place_unless_the_value_is_shared", in_place),
        gpu(
            "captured_step_replays_match_eager_steps_bit_for_bit",
            captured,
        ),
        gpu("capture_errors_say_what_to_do", capture_errors),
        gpu(
            "captured_adamw_step_follows_a_learning_rate_schedule_bit_for_bit",
            captured_lr_schedule,
        ),
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

/// Parameter `k` of `count`: the base values shifted, and gradients scaled, by `k` (so one
/// optimizer sees different tensors; 5 parameters = one multi-tensor group of 4 + one alone).
fn shifted(base: &[f64], k: usize, scale: bool) -> Vec<f64> {
    base.iter()
        .map(|v| {
            if scale {
                v * (1.0 + 0.5 * k as f64)
            } else {
                v + k as f64
            }
        })
        .collect()
}

fn sgd() -> TestResult {
    let p0 = [0.5, -1.0, 2.0, 0.0];
    let grads = [
        [0.1, 0.2, -0.3, 0.4],
        [-0.2, 0.1, 0.0, 0.5],
        [0.3, -0.1, 0.2, -0.4],
    ];
    for count in [1usize, 5] {
        for (momentum, dampening, wd, nesterov) in [
            (0.0, 0.0, 0.0, false),
            (0.0, 0.0, 0.01, false),
            (0.9, 0.1, 0.01, false),
            (0.9, 0.0, 0.0, true),
        ] {
            let lr = 0.1;
            let ps = (0..count)
                .map(|k| param_with_grad(&shifted(&p0, k, false), &shifted(&grads[0], k, true)))
                .collect::<Result<Vec<_>, _>>()?;
            let cfg = SgdConfig {
                lr,
                momentum,
                dampening,
                weight_decay: wd,
                nesterov,
            };
            let mut opt = Sgd::new(ps.clone(), cfg)?;
            let mut cps: Vec<Vec<f64>> = (0..count).map(|k| shifted(&p0, k, false)).collect();
            let mut bufs: Vec<Option<Vec<f64>>> = vec![None; count];
            for (step, g0) in grads.iter().enumerate() {
                for (k, p) in ps.iter().enumerate() {
                    if step > 0 {
                        set_grad(p, &shifted(g0, k, true))?;
                    }
                }
                opt.step()?;
                for k in 0..count {
                    // PyTorch's SGD, on the CPU.
                    let g = shifted(g0, k, true);
                    let d: Vec<f64> = g.iter().zip(&cps[k]).map(|(g, p)| g + wd * p).collect();
                    let d = if momentum != 0.0 {
                        let b: Vec<f64> = match &bufs[k] {
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
                        bufs[k] = Some(b);
                        out
                    } else {
                        d
                    };
                    cps[k] = cps[k].iter().zip(&d).map(|(p, d)| p - lr * d).collect();
                    close(
                        &ps[k].value().to_vec()?,
                        &cps[k],
                        &format!(
                            "sgd ({count} params) m={momentum} wd={wd} nesterov={nesterov} \
                             step {step} param {k}"
                        ),
                    )?;
                }
            }
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
    for count in [1usize, 5] {
        for (wd, decoupled) in [(0.0, false), (0.1, false), (0.1, true)] {
            let cfg = AdamConfig {
                lr: 0.01,
                betas: (0.9, 0.999),
                eps: 1e-8,
                weight_decay: wd,
                decoupled_weight_decay: decoupled,
            };
            let ps = (0..count)
                .map(|k| param_with_grad(&shifted(&p0, k, false), &shifted(&grads[0], k, true)))
                .collect::<Result<Vec<_>, _>>()?;
            let mut opt = Adam::new(ps.clone(), cfg)?;
            let mut cps: Vec<Vec<f64>> = (0..count).map(|k| shifted(&p0, k, false)).collect();
            let (mut ms, mut vs) = (vec![vec![0.0; 5]; count], vec![vec![0.0; 5]; count]);
            for (step, g0) in grads.iter().enumerate() {
                for (k, p) in ps.iter().enumerate() {
                    if step > 0 {
                        set_grad(p, &shifted(g0, k, true))?;
                    }
                }
                opt.step()?;
                let t = (step + 1) as i32;
                let (b1, b2) = cfg.betas;
                let (bc1, bc2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
                for k in 0..count {
                    let g = shifted(g0, k, true);
                    let (cp, m, v) = (&mut cps[k], &mut ms[k], &mut vs[k]);
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
                        &ps[k].value().to_vec()?,
                        cp,
                        &format!(
                            "adam ({count} params) wd={wd} decoupled={decoupled} step {step} \
                             param {k}"
                        ),
                    )?;
                }
            }
        }
    }
    // A parameter listed twice is refused (a multi-tensor update would lock it twice).
    let p = Var::parameter(Tensor::from_vec(vec![1.0f32], &[1])?);
    let e = Adam::new(vec![p.clone(), p], AdamConfig::new(0.1))
        .err()
        .ok_or("duplicate")?;
    ensure!(e.to_string().contains("same variable"), "{e}");
    Ok(())
}

/// 150 f32 parameters of odd sizes in two groups (more than one multi-tensor launch): AdamW
/// stepped with `clip_grad_scale` + `step_with_grad_scale` gives bit for bit the parameters of
/// `clip_grad_norm` + `step`, with the same norm, over three steps with clipping active.
fn adam_clip_scale() -> TestResult {
    let sizes: Vec<usize> = (0..150)
        .map(|i| [1, 2, 3, 31, 257, 2049, 5][i % 7] + i % 5)
        .collect();
    let value = |i: usize, n: usize, step: usize| -> Vec<f32> {
        (0..n)
            .map(|e| (((i * 31 + e * 7 + step * 13) % 17) as f32 - 8.0) * 0.25)
            .collect()
    };
    let make = || -> Result<Vec<Var<f32>>, Box<dyn std::error::Error>> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| Ok(Var::parameter(Tensor::from_vec(value(i, n, 0), &[n])?)))
            .collect()
    };
    let (a, b) = (make()?, make()?);
    let cfg = AdamConfig {
        lr: 0.01,
        betas: (0.9, 0.95),
        eps: 1e-8,
        weight_decay: 0.0,
        decoupled_weight_decay: true,
    };
    let groups = |p: &[Var<f32>]| {
        vec![
            ParamGroup::new(p[..70].to_vec(), 0.1),
            ParamGroup::new(p[70..].to_vec(), 0.0),
        ]
    };
    let mut oa = Adam::with_groups(groups(&a), cfg)?;
    let mut ob = Adam::with_groups(groups(&b), cfg)?;
    for step in 1..=3 {
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            let g = Tensor::from_vec(value(i + 500, sizes[i], step), &[sizes[i]])?;
            x.set_grad(Some(g.clone()))?;
            y.set_grad(Some(g.deep_copy()?))?;
        }
        let na = clip_grad_norm(&a, 1.0)?.item()?;
        oa.step()?;
        let (nb, scale) = clip_grad_scale(&b, 1.0)?;
        ensure!(scale.item()? < 1.0, "clipping must be active");
        ob.step_with_grad_scale(&scale)?;
        ensure!(
            na.to_bits() == nb.item()?.to_bits(),
            "norms {na} vs {}",
            nb.item()?
        );
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            ensure!(
                x.value().to_vec()? == y.value().to_vec()?,
                "step {step}: parameter {i} differs"
            );
        }
    }
    Ok(())
}

/// AdamW over two parameter groups (3 parameters decayed by 0.1, then 5 not decayed: the
/// multi-tensor groups of four must not span the two) with the learning rate changed before
/// each step, against PyTorch's rule on the CPU; and the groups' errors.
fn adam_groups() -> TestResult {
    let p0 = [0.5, -1.0, 2.0, 0.0, 3.0];
    let grads = [
        [0.1, 0.2, -0.3, 0.4, 0.0],
        [-0.2, 0.1, 0.0, 0.5, 1.0],
        [0.3, -0.1, 0.2, -0.4, 0.0],
    ];
    let lrs = [0.01, 0.005, 0.02];
    let count = 8;
    let wd = |k: usize| if k < 3 { 0.1 } else { 0.0 };
    let ps = (0..count)
        .map(|k| param_with_grad(&shifted(&p0, k, false), &shifted(&grads[0], k, true)))
        .collect::<Result<Vec<_>, _>>()?;
    let cfg = AdamConfig {
        lr: 1.0, // replaced by set_lr before every step
        betas: (0.9, 0.95),
        eps: 1e-8,
        weight_decay: 0.5, // not used: each group has its own
        decoupled_weight_decay: true,
    };
    let mut opt = Adam::with_groups(
        vec![
            ParamGroup::new(ps[..3].to_vec(), 0.1),
            ParamGroup::new(ps[3..].to_vec(), 0.0),
        ],
        cfg,
    )?;
    let decays: Vec<f64> = (0..count).map(wd).collect();
    ensure!(opt.weight_decays() == decays, "{:?}", opt.weight_decays());
    let mut cps: Vec<Vec<f64>> = (0..count).map(|k| shifted(&p0, k, false)).collect();
    let (mut ms, mut vs) = (vec![vec![0.0; 5]; count], vec![vec![0.0; 5]; count]);
    for (step, (g0, &lr)) in grads.iter().zip(&lrs).enumerate() {
        for (k, p) in ps.iter().enumerate() {
            if step > 0 {
                set_grad(p, &shifted(g0, k, true))?;
            }
        }
        opt.set_lr(lr)?;
        ensure!(opt.config().lr == lr, "set_lr");
        opt.step()?;
        let t = (step + 1) as i32;
        let (b1, b2) = cfg.betas;
        let (bc1, bc2) = (1.0 - b1.powi(t), 1.0 - b2.powi(t));
        for k in 0..count {
            let g = shifted(g0, k, true);
            let (cp, m, v) = (&mut cps[k], &mut ms[k], &mut vs[k]);
            for i in 0..5 {
                cp[i] *= 1.0 - lr * wd(k);
                m[i] = b1 * m[i] + (1.0 - b1) * g[i];
                v[i] = b2 * v[i] + (1.0 - b2) * g[i] * g[i];
                cp[i] -= (lr / bc1) * m[i] / (v[i].sqrt() / bc2.sqrt() + cfg.eps);
            }
            close(
                &ps[k].value().to_vec()?,
                cp,
                &format!("adamw groups step {step} param {k} (wd {})", wd(k)),
            )?;
        }
    }
    for bad in [-1.0, f64::NAN] {
        ensure!(opt.set_lr(bad).is_err(), "set_lr({bad}) must be an error");
    }
    let e = Adam::with_groups(
        vec![ParamGroup::new(ps[..2].to_vec(), -0.1)],
        AdamConfig::new(0.1),
    )
    .err()
    .ok_or("a negative weight decay")?;
    ensure!(e.to_string().contains("group 0"), "{e}");
    let e = Adam::with_groups(
        vec![
            ParamGroup::new(ps[..2].to_vec(), 0.1),
            ParamGroup::new(ps[1..3].to_vec(), 0.0),
        ],
        AdamConfig::new(0.1),
    )
    .err()
    .ok_or("a parameter in two groups")?;
    ensure!(e.to_string().contains("same variable"), "{e}");
    let empty = Adam::<f64>::with_groups(
        vec![ParamGroup::new(vec![], 0.1), ParamGroup::new(vec![], 0.0)],
        AdamConfig::new(0.1),
    );
    ensure!(
        matches!(empty, Err(NnError::NoParameters { .. })),
        "no parameters at all must be an error"
    );
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

fn in_place() -> TestResult {
    let p = Var::parameter(Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3])?);
    let before = p.value().data_ptr();
    p.sum_all()?.backward()?;
    let mut opt = Adam::new(vec![p.clone()], AdamConfig::new(0.1))?;
    opt.step()?;
    ensure!(
        p.value().data_ptr() == before,
        "an exclusive parameter is updated in place"
    );
    // A handle kept elsewhere keeps the old values: the update copies first.
    let kept = p.value();
    let old = kept.to_vec()?;
    opt.step()?;
    ensure!(
        kept.to_vec()? == old,
        "the other handle still sees the old values"
    );
    ensure!(
        p.value().data_ptr() != kept.data_ptr(),
        "the parameter got its own copy"
    );
    Ok(())
}

/// A model and its optimizer.
type ModelAndOptimizer = (Sequential<f32>, Box<dyn Optimizer<f32>>);

/// Builds a small MLP (same seeds each call) and its optimizer.
fn mlp_and_opt(adam: bool) -> Result<ModelAndOptimizer, NnError> {
    let m = Sequential::<f32>::new()
        .append(Linear::new(64, 48, 1)?)
        .append(Relu)
        .append(Linear::new(48, 10, 2)?);
    let opt: Box<dyn Optimizer<f32>> = if adam {
        Box::new(Adam::new(m.parameters(), AdamConfig::new(1e-2))?)
    } else {
        let cfg = SgdConfig {
            momentum: 0.9,
            ..SgdConfig::new(0.1)
        };
        Box::new(Sgd::new(m.parameters(), cfg)?)
    };
    Ok((m, opt))
}

fn captured() -> TestResult {
    let batches = [
        Tensor::<f32>::randn(&[32, 64], 5)?,
        Tensor::<f32>::randn(&[32, 64], 6)?,
    ];
    let labels: Vec<usize> = (0..32).map(|i| (i * 7) % 10).collect();
    let t = class_targets(&labels, 10)?;
    for adam in [false, true] {
        // Eager: 10 steps alternating the two batches.
        let (ma, mut oa) = mlp_and_opt(adam)?;
        let mut eager_loss = 0.0;
        for i in 0..10 {
            oa.zero_grad();
            let loss = ma
                .forward(&Var::constant(batches[i % 2].clone()))?
                .cross_entropy(&t)?;
            loss.backward()?;
            oa.step()?;
            eager_loss = loss.value().item()?;
        }
        // Captured: 3 eager steps, then the step captured once and replayed 7 times, the static
        // input rewritten in place before each replay.
        let (mb, mut ob) = mlp_and_opt(adam)?;
        let x = Var::constant(Tensor::<f32>::zeros(&[32, 64])?);
        for i in 0..3 {
            x.copy_from_(&batches[i % 2])?;
            ob.zero_grad();
            mb.forward(&x)?.cross_entropy(&t)?.backward()?;
            ob.step()?;
        }
        let (graph, loss) = CapturedStep::capture(ob.as_mut(), |opt| {
            opt.zero_grad();
            let loss = mb.forward(&x)?.cross_entropy(&t)?;
            loss.backward()?;
            opt.step()?;
            Ok(loss)
        })?;
        ensure!(
            graph.kernel_count()? > 10,
            "kernels in the graph: {}",
            graph.kernel_count()?
        );
        for i in 3..10 {
            x.copy_from_(&batches[i % 2])?;
            graph.replay()?;
        }
        graph.synchronize()?;
        let graph_loss = loss.value().item()?;
        ensure!(
            graph_loss.to_bits() == eager_loss.to_bits(),
            "adam={adam}: loss {graph_loss} vs {eager_loss}"
        );
        for (i, (a, b)) in ma.parameters().iter().zip(mb.parameters()).enumerate() {
            let (va, vb) = (a.value().to_vec()?, b.value().to_vec()?);
            ensure!(
                va.iter().zip(&vb).all(|(x, y)| x.to_bits() == y.to_bits()),
                "adam={adam}: parameter {i} differs between eager and replayed steps"
            );
        }
    }
    Ok(())
}

fn capture_errors() -> TestResult {
    let x = Var::constant(Tensor::<f32>::randn(&[8, 64], 1)?);
    let t = class_targets(&[1; 8], 10)?;
    // Before any eager step the optimizer has no state to update in place.
    let (m, mut opt) = mlp_and_opt(true)?;
    let e = CapturedStep::capture(opt.as_mut(), |o| {
        o.zero_grad();
        m.forward(&x)?.cross_entropy(&t)?.backward()?;
        o.step()
    })
    .err()
    .ok_or("no warm-up")?;
    ensure!(e.to_string().contains("eager step first"), "{e}");

    // A step that reads a value on the host cannot be captured.
    let (m2, mut o2) = mlp_and_opt(false)?;
    o2.zero_grad();
    m2.forward(&x)?.cross_entropy(&t)?.backward()?;
    o2.step()?;
    let e = CapturedStep::capture(o2.as_mut(), |_| {
        Ok(m2.forward(&x)?.cross_entropy(&t)?.value().item()?)
    })
    .err()
    .ok_or("item() inside a capture")?;
    ensure!(matches!(e, NnError::Tensor(_)), "{e}");

    // A parameter whose value is shared is copied, not updated in place: refused.
    let keep = o2.parameters()[0].value();
    let e = CapturedStep::capture(o2.as_mut(), |o| {
        o.zero_grad();
        m2.forward(&x)?.cross_entropy(&t)?.backward()?;
        o.step()
    })
    .err()
    .ok_or("shared parameter")?;
    drop(keep);
    ensure!(e.to_string().contains("not updated in place"), "{e}");
    Ok(())
}

/// A captured AdamW step whose rate changes before every replay ([`CapturedStep::set_lr`])
/// matches eager steps that set the same rates, bit for bit; SGD's captured rate cannot be
/// changed (an error, not a silent no-op).
fn captured_lr_schedule() -> TestResult {
    let batches = [
        Tensor::<f32>::randn(&[32, 64], 8)?,
        Tensor::<f32>::randn(&[32, 64], 9)?,
    ];
    let labels: Vec<usize> = (0..32).map(|i| (i * 3) % 10).collect();
    let t = class_targets(&labels, 10)?;
    let lr = |i: usize| 1e-2 / (1.0 + i as f64);
    let model = || -> Result<(Sequential<f32>, Adam<f32>), NnError> {
        let m = Sequential::<f32>::new()
            .append(Linear::new(64, 48, 1)?)
            .append(Relu)
            .append(Linear::new(48, 10, 2)?);
        let cfg = AdamConfig {
            weight_decay: 0.1,
            decoupled_weight_decay: true,
            ..AdamConfig::new(lr(0))
        };
        let o = Adam::new(m.parameters(), cfg)?;
        Ok((m, o))
    };
    let steps = 8;
    let (ma, mut oa) = model()?;
    let mut eager_loss = 0.0;
    for i in 0..steps {
        oa.set_lr(lr(i))?;
        oa.zero_grad();
        let loss = ma
            .forward(&Var::constant(batches[i % 2].clone()))?
            .cross_entropy(&t)?;
        loss.backward()?;
        oa.step()?;
        eager_loss = loss.value().item()?;
    }
    let (mb, mut ob) = model()?;
    let x = Var::constant(Tensor::<f32>::zeros(&[32, 64])?);
    x.copy_from_(&batches[0])?;
    ob.zero_grad();
    mb.forward(&x)?.cross_entropy(&t)?.backward()?;
    ob.step()?;
    let (mut graph, loss) = CapturedStep::capture(&mut ob, |opt| {
        opt.zero_grad();
        let loss = mb.forward(&x)?.cross_entropy(&t)?;
        loss.backward()?;
        opt.step()?;
        Ok(loss)
    })?;
    ensure!(
        graph.set_lr(f64::NAN).is_err() && graph.set_lr(-1.0).is_err(),
        "a NaN or negative rate was accepted"
    );
    for i in 1..steps {
        x.copy_from_(&batches[i % 2])?;
        graph.set_lr(lr(i))?;
        graph.replay()?;
    }
    graph.synchronize()?;
    let graph_loss = loss.value().item()?;
    ensure!(
        graph_loss.to_bits() == eager_loss.to_bits(),
        "loss {graph_loss} vs {eager_loss}"
    );
    for (i, (a, b)) in ma.parameters().iter().zip(mb.parameters()).enumerate() {
        let (va, vb) = (a.value().to_vec()?, b.value().to_vec()?);
        ensure!(
            va.iter().zip(&vb).all(|(x, y)| x.to_bits() == y.to_bits()),
            "parameter {i} differs between eager and replayed steps with a schedule"
        );
    }

    // SGD: no rate to change.
    let (mc, mut oc) = mlp_and_opt(false)?;
    oc.zero_grad();
    mc.forward(&x)?.cross_entropy(&t)?.backward()?;
    oc.step()?;
    let (mut sgd_graph, _) = CapturedStep::capture(oc.as_mut(), |o| {
        o.zero_grad();
        mc.forward(&x)?.cross_entropy(&t)?.backward()?;
        o.step()
    })?;
    let e = sgd_graph
        .set_lr(0.5)
        .err()
        .ok_or("SGD's rate was 'changed'")?;
    ensure!(e.to_string().contains("Adam"), "{e}");
    Ok(())
}
