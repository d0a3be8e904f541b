//! The fused op built ahead of time: the embedded PTX and its handles (CPU), and the GPU results
//! against the CPU twin (GPU trials are reported as ignored where there is no GPU).

use cuda_stack_kernels::ptx::{PtxFile, PtxTarget};
use cuda_stack_nn::{Adam, AdamConfig, Linear, Module, Optimizer, Sequential, Var};
use cuda_tests::{cpu, ensure, gpu, TestResult};
use custom_kernels_aot::kernels::{Kernels, PTX_FILES};
use custom_kernels_aot::{reference, AotFusedLayer, FusedOpExt, Tensor};

fn main() {
    println!("kernels built with {}", custom_kernels_aot::BUILT_WITH);
    cuda_tests::run(vec![
        cpu("embedded_ptx_is_at_or_below_the_floor", ptx_isa_floor),
        cpu("handles_accept_the_embedded_ptx", handles_accept_embedded),
        cpu(
            "handles_refuse_ptx_whose_parameters_disagree",
            handles_refuse_mismatch,
        ),
        cpu("reference_matches_the_formula", reference_formula),
        gpu("forward_matches_cpu_bit_for_bit", forward_matches),
        gpu("backward_matches_cpu_bit_for_bit", backward_matches),
        gpu("views_and_bad_shapes", views_and_bad_shapes),
        gpu("autograd_through_the_custom_op", autograd),
        gpu("same_as_the_builtin_bias_relu", same_as_builtin),
        gpu("layer_trains_with_adam", layer_trains),
    ]);
}

fn version(ptx: &str) -> Option<(u32, u32)> {
    let v = ptx
        .lines()
        .find_map(|l| l.trim().strip_prefix(".version"))?
        .trim();
    let (a, b) = v.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

fn ptx_isa_floor() -> TestResult {
    let floor =
        version(&format!(".version {}", custom_kernels_aot::PTX_ISA_FLOOR)).ok_or("bad floor")?;
    for f in PTX_FILES {
        for t in f.targets {
            let v = version(t.ptx).ok_or("no .version")?;
            ensure!(
                v <= floor,
                "{} {}: PTX ISA {v:?} above the floor {floor:?}",
                f.name,
                t.arch
            );
            println!(
                "{} {}: PTX ISA {}.{} <= floor {}",
                f.name,
                t.arch,
                v.0,
                v.1,
                custom_kernels_aot::PTX_ISA_FLOOR
            );
        }
    }
    Ok(())
}

fn handles_accept_embedded() -> TestResult {
    Kernels::check_ptx(PTX_FILES)?;
    ensure!(
        custom_kernels_aot::kernels::KERNEL_NAMES
            == [
                "fused_op_forward",
                "fused_op_backward_input",
                "fused_op_backward_bias"
            ],
        "{:?}",
        custom_kernels_aot::kernels::KERNEL_NAMES
    );
    Ok(())
}

/// PTX whose `fused_op_forward` takes a `double` scale (8 bytes) where the handle passes an
/// `f32`: the generated check refuses it before anything is loaded.
fn handles_refuse_mismatch() -> TestResult {
    let good = PTX_FILES[0].targets[0].ptx;
    let bad: &'static str = Box::leak(
        good.replacen(
            ".param .f32 fused_op_forward_param_2",
            ".param .f64 fused_op_forward_param_2",
            1,
        )
        .into_boxed_str(),
    );
    ensure!(
        bad != good,
        "the PTX has no `.param .f32 fused_op_forward_param_2` to change"
    );
    let targets: &'static [PtxTarget] = Box::leak(Box::new([PtxTarget {
        arch: PTX_FILES[0].targets[0].arch,
        min_cc: PTX_FILES[0].targets[0].min_cc,
        ptx: bad,
    }]));
    let file = PtxFile {
        name: PTX_FILES[0].name,
        source: PTX_FILES[0].source,
        targets,
        sass: &[],
    };
    let err = match Kernels::check_ptx(std::slice::from_ref(&file)) {
        Ok(()) => return Err("a PTX with a double scale was accepted".into()),
        Err(e) => e.to_string(),
    };
    ensure!(
        err.contains("fused_op_forward")
            && err.contains("[8, 8, 8, 8, 4, 4]")
            && err.contains("[8, 8, 4, 8, 4, 4]"),
        "{err}"
    );
    println!("refused: {err}");
    Ok(())
}

fn reference_formula() -> TestResult {
    let y = reference::forward(&[1.0, -2.0, 0.5, f32::NAN], &[0.5, -1.0], 2.0);
    ensure!(y == [2.5, 0.0, 1.5, 0.0], "{y:?}");
    let (gx, gb) = reference::backward(
        &[1.0, -2.0, 3.0, 4.0],
        &[0.5, -1.0],
        2.0,
        &[1.0, 1.0, 1.0, 1.0],
    );
    ensure!(
        gx == [2.0, 0.0, 2.0, 2.0] && gb == [2.0, 1.0],
        "{gx:?} {gb:?}"
    );
    Ok(())
}

/// Deterministic data with negatives, zeros after the op, and odd values.
fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

const SHAPES: &[&[usize]] = &[
    &[1, 1],
    &[7],
    &[3, 1000],
    &[257, 33],
    &[64, 256],
    &[2, 3, 5],
    &[0, 4],
    &[4, 0],
    &[1024, 1031],
];

fn forward_matches() -> TestResult {
    for shape in SHAPES {
        let cols = *shape.last().unwrap();
        let n: usize = shape.iter().product();
        let (x, b) = (data(n, 1), data(cols, 2));
        let gx = Tensor::from_vec(x.clone(), shape)?;
        let gb = Tensor::from_vec(b.clone(), &[cols])?;
        let y = gx.fused_op(&gb, 1.7)?;
        ensure!(y.shape() == *shape, "shape {:?}", y.shape());
        ensure!(
            y.to_vec()? == reference::forward(&x, &b, 1.7),
            "forward differs for {shape:?}"
        );
    }
    Ok(())
}

fn backward_matches() -> TestResult {
    for shape in SHAPES {
        let cols = *shape.last().unwrap();
        let n: usize = shape.iter().product();
        let (x, b, g) = (data(n, 3), data(cols, 4), data(n, 5));
        let (tx, tb, tg) = (
            Tensor::from_vec(x.clone(), shape)?,
            Tensor::from_vec(b.clone(), &[cols])?,
            Tensor::from_vec(g.clone(), shape)?,
        );
        let (gx, gb) = custom_kernels_aot::fused_op_backward(&tx, &tb, -0.8, &tg)?;
        let (rx, rb) = reference::backward(&x, &b, -0.8, &g);
        ensure!(gx.to_vec()? == rx, "grad_input differs for {shape:?}");
        ensure!(gb.to_vec()? == rb, "grad_bias differs for {shape:?}");
    }
    Ok(())
}

fn views_and_bad_shapes() -> TestResult {
    // A transposed (non-contiguous) input is made contiguous first.
    let x = data(6 * 4, 6);
    let t = Tensor::from_vec(x.clone(), &[6, 4])?.t()?;
    let b = data(6, 7);
    let y = t.fused_op(&Tensor::from_vec(b.clone(), &[6])?, 0.5)?;
    let xt: Vec<f32> = (0..4)
        .flat_map(|r| (0..6).map(move |c| (r, c)))
        .map(|(r, c)| x[c * 4 + r])
        .collect();
    ensure!(
        y.to_vec()? == reference::forward(&xt, &b, 0.5),
        "transposed input"
    );
    // Wrong bias shape: an error that names both shapes, nothing launched.
    let e = Tensor::from_vec(data(12, 1), &[3, 4])?
        .fused_op(&Tensor::from_vec(data(3, 1), &[3])?, 1.0)
        .err()
        .ok_or("a [3] bias for [3, 4] was accepted")?
        .to_string();
    ensure!(
        e.contains("[3, 4]") && e.contains("bias must have shape [4]"),
        "{e}"
    );
    Ok(())
}

fn autograd() -> TestResult {
    let (rows, cols) = (33, 17);
    let (x, b, w) = (data(rows * cols, 8), data(cols, 9), data(rows * cols, 10));
    let vx = Var::parameter(Tensor::from_vec(x.clone(), &[rows, cols])?);
    let vb = Var::parameter(Tensor::from_vec(b.clone(), &[cols])?);
    let vw = Var::constant(Tensor::from_vec(w.clone(), &[rows, cols])?);
    // loss = Σ fused(x) ⊙ w, so d loss / d out = w.
    let loss = vx.fused_op(&vb, 1.3)?.mul(&vw)?.sum_all()?;
    ensure!(
        vx.fused_op(&vb, 1.3)?.op() == Some("custom_kernels_aot::fused_op"),
        "op name"
    );
    loss.backward()?;
    let (rx, rb) = reference::backward(&x, &b, 1.3, &w);
    ensure!(
        vx.grad()?.ok_or("no grad for x")?.to_vec()? == rx,
        "x.grad differs"
    );
    ensure!(
        vb.grad()?.ok_or("no grad for bias")?.to_vec()? == rb,
        "bias.grad differs"
    );
    Ok(())
}

fn same_as_builtin() -> TestResult {
    // cuda-stack-kernels' own bias_relu computes the same fmaf and comparison.
    let (x, b) = (
        Tensor::from_vec(data(128 * 96, 11), &[128, 96])?,
        Tensor::from_vec(data(96, 12), &[96])?,
    );
    ensure!(
        x.fused_op(&b, 2.0)?.to_vec()? == x.bias_relu(&b, 2.0)?.to_vec()?,
        "differs from Tensor::bias_relu"
    );
    Ok(())
}

fn layer_trains() -> TestResult {
    // Seed 004's "Using in Neural Networks": Linear → FusedOpLayer → Linear, trained with Adam.
    let model = Sequential::<f32>::new()
        .append(Linear::new(32, 64, 1)?)
        .append(AotFusedLayer::new(64, 2.0)?)
        .append(Linear::new(64, 1, 2)?);
    let mut opt = Adam::new(model.parameters(), AdamConfig::new(1e-2))?;
    let x = Var::constant(Tensor::randn(&[128, 32], 3)?);
    let target = Var::constant(Tensor::randn(&[128, 1], 4)?);
    let mut losses = Vec::new();
    for _ in 0..30 {
        opt.zero_grad();
        let diff = model.forward(&x)?.sub(&target)?;
        let loss = diff.mul(&diff)?.mean_all()?;
        loss.backward()?;
        opt.step()?;
        losses.push(loss.value().item()?);
    }
    println!("loss {:.4} -> {:.4}", losses[0], losses[losses.len() - 1]);
    ensure!(
        losses[losses.len() - 1] < 0.5 * losses[0],
        "loss did not fall: {losses:?}"
    );
    Ok(())
}
