//! `fused_layer_training`: seed 004, "Basic Usage" and "Using in Neural Networks" — the fused
//! `relu(x * scale + bias)` with autograd, then `FusedOpLayer` inside
//! `Sequential(Linear(512, 256), FusedOpLayer(256, scale=2.0), Linear(256, 10))` trained for 10
//! epochs with `Adam(lr=0.001)` on `loss = output.sum()`, as the seed writes it.
//!
//! The fused op records one node whose backward is one kernel (`bias_relu_bwd`: `grad_x` and
//! the bias's column sums together); the program checks its gradients against the same
//! function built from unfused autograd ops (`relu(x.scale(2) + bias)`: three nodes).
//!
//! Run: `cargo run --release -p cuda-examples --bin fused_layer_training` (`--quick`: 3 epochs).

use clap::Parser;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_stack_nn::{Adam, AdamConfig, FusedOpLayer, Linear, Module, Optimizer, Sequential, Var};
use cuda_stack_runtime::Tensor;
use serde_json::json;
use std::process::ExitCode;

/// Seed 004's fused op with autograd, and the network that uses it.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
    /// Training epochs (the seed's 10).
    #[arg(long, default_value_t = 10)]
    epochs: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run("fused_layer_training", || body(&args))
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn body(args: &Args) -> ProgramResult {
    let q = &args.common;
    let mut out = Out::new(q.json);
    cuda_stack_runtime::set_device(q.device)?;

    // Basic usage.
    let (batch, features, scale) = (128, 256, 2.0);
    out.say(format!(
        "Basic usage (seed 004): input [{batch}, {features}] and bias [{features}] with \
         requires_grad, scale {scale}"
    ));
    let input = Var::parameter(Tensor::<f32>::randn(&[batch, features], 1)?);
    let bias = Var::parameter(Tensor::<f32>::randn(&[features], 2)?);
    let output = input.bias_relu(&bias, scale)?;
    let loss = output.sum_all()?;
    out.say(format!(
        "  output = fused_op_forward(input, bias, scale): shape {:?}, grad_fn {:?}",
        output.shape(),
        output.op().unwrap_or("none")
    ));
    loss.backward()?;
    let gi = input.grad()?.ok_or("input.grad missing")?;
    let gb = bias.grad()?.ok_or("bias.grad missing")?;
    out.say(format!("  Input gradient shape: {:?}", gi.shape()));
    out.say(format!("  Bias gradient shape: {:?}", gb.shape()));

    // The same gradients through unfused ops.
    let (input2, bias2) = (Var::parameter(input.value()), Var::parameter(bias.value()));
    input2
        .scale(scale)?
        .add(&bias2)?
        .relu()?
        .sum_all()?
        .backward()?;
    let dx = max_diff(&gi.to_vec()?, &input2.grad()?.ok_or("grad")?.to_vec()?);
    let db = max_diff(&gb.to_vec()?, &bias2.grad()?.ok_or("grad")?.to_vec()?);
    out.say(format!(
        "  against relu(input * {scale} + bias) built from unfused ops (3 nodes, 5 backward \
         kernels): input.grad differs by {dx:.1e}, bias.grad by {db:.1e}\n"
    ));
    if dx > 0.0 || db > 1e-3 {
        return Err(format!("fused and unfused gradients disagree: {dx}, {db}").into());
    }

    // The network.
    let model = Sequential::<f32>::new()
        .append(Linear::new(512, 256, 3)?)
        .append(FusedOpLayer::new(256, 2.0)?)
        .append(Linear::new(256, 10, 4)?);
    out.say(format!(
        "model = {}\n{} parameters; Adam(lr=0.001); loss = output.sum() on torch.randn(32, 512) \
         per epoch (the seed's loop)",
        model.describe(),
        model.num_parameters()
    ));
    let mut opt = Adam::new(model.parameters(), AdamConfig::new(1e-3))?;
    let epochs = q.pick(3, args.epochs);
    let mut losses = Vec::with_capacity(epochs);
    for epoch in 0..epochs {
        opt.zero_grad();
        let x = Var::constant(Tensor::<f32>::randn(&[32, 512], 100 + epoch as u64)?);
        let loss = model.forward(&x)?.sum_all()?;
        loss.backward()?;
        opt.step()?;
        let l = loss.value().item()?;
        out.say(format!("  epoch {epoch:>2}: loss {l:>12.4}"));
        losses.push(l);
    }
    if let (Some(first), Some(last)) = (losses.first(), losses.last()) {
        if epochs > 1 && last >= first {
            return Err(format!("the loss did not decrease: {first} -> {last}").into());
        }
    }
    out.put("grad_shapes", json!([gi.shape(), gb.shape()]));
    out.put("fused_vs_unfused_max_diff", json!([dx, db]));
    out.put("losses", json!(losses));
    out.finish();
    Ok(())
}
