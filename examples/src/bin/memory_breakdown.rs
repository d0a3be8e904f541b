//! `memory_breakdown`: seed 002, section 5 ("Understanding GPU Memory Usage"), measured on a
//! real training step.
//!
//! The seed's MLP 784 → 512 → 10 at batch 256 is built and trained with `cuda-stack-nn` (Adam,
//! cross-entropy), and each consumer the seed lists is measured as the change in
//! `memory_allocated()` at the point of the step where it appears:
//!
//! 1. **parameters** — after building the model;
//! 2. **activations** — after the forward pass: the tensors the graph keeps for the backward
//!    (the pre-activation ReLU's backward reads, the hidden layer the second matmul's backward
//!    reads, the logits cross-entropy's backward reads) and the loss; the **peak** during the
//!    forward adds the temporaries freed as it goes;
//! 3. **gradients** — after `backward()`: one per parameter (×1), while the graph's saved tensors
//!    are freed;
//! 4. **optimizer state** — after the first `Adam.step()`: two moments per parameter (×2) and
//!    the step counters (one i32 per parameter, on the device); the update rewrites the
//!    parameters in place, so they add nothing;
//! 5. a **second step** ends where the first did (nothing leaks), and the activations at batch
//!    1024 are 4× those at 256;
//! 6. the **caching allocator**: after everything is dropped `memory_allocated` is back where it
//!    started but `memory_reserved` (what `nvidia-smi` shows) is not, until `empty_cache()`.
//!
//! Every measured figure is checked against the bytes the tensors' shapes give, rounded to the
//! allocator's size classes (512 B, or 2 MiB above 1 MiB); the program fails if one differs.
//!
//! Run: `cargo run --release -p cuda-examples --bin memory_breakdown [-- --quick] [--json]`

use clap::Parser;
use cuda_examples::bench::Table;
use cuda_examples::cli::Common;
use cuda_examples::exit::{self, ProgramResult};
use cuda_examples::output::Out;
use cuda_stack_nn::{
    class_targets, Adam, AdamConfig, Linear, Module, Optimizer, Relu, Sequential, Var,
};
use cuda_stack_runtime::caching::{format_bytes, size_class};
use cuda_stack_runtime::{self as rt, Runtime, Tensor};
use serde_json::json;
use std::process::ExitCode;

#[derive(Parser)]
#[command(about = "Seed 002 section 5: where GPU memory goes while training a small MLP")]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    exit::run("memory_breakdown", || body(Args::parse()))
}

const IN: usize = 784;
const HID: usize = 512;
const OUT: usize = 10;
const BATCH: usize = 256;

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Bytes the allocator hands out for f32 tensors of these element counts.
fn class_bytes(numels: &[usize]) -> usize {
    numels
        .iter()
        .map(|n| size_class(n * 4).map_or(0, |c| c.0))
        .sum()
}

/// The tensors a forward pass keeps for the backward, at batch `b`: pre-activation, hidden,
/// logits, and the loss.
fn activation_numels(b: usize) -> [usize; 4] {
    [b * HID, b * HID, b * OUT, 1]
}

/// `measured == expected`, else an error naming the category.
fn check(what: &str, measured: usize, expected: usize) -> BoxResult<()> {
    if measured == expected {
        Ok(())
    } else {
        Err(format!(
            "{what}: memory_allocated changed by {measured} B, but the tensors' size classes add \
             up to {expected} B"
        )
        .into())
    }
}

fn alloc() -> BoxResult<usize> {
    Ok(rt::memory_allocated()?)
}

/// A batch of `b` inputs and class targets.
fn batch(b: usize, seed: u64) -> BoxResult<(Var<f32>, Tensor<i32>)> {
    let x = Var::constant(Tensor::<f32>::randn(&[b, IN], seed)?);
    let labels: Vec<usize> = (0..b).map(|i| (i * 3 + seed as usize) % OUT).collect();
    Ok((x, class_targets(&labels, OUT)?))
}

fn body(args: Args) -> ProgramResult {
    let mut out = Out::new(args.common.json);
    rt::set_device(args.common.device)?;
    let runtime = Runtime::current()?;
    let ctx = runtime.context();
    // Load the kernels first: module memory is not the allocator's.
    cuda_stack_kernels::Kernels::get(ctx)?;
    runtime.synchronize()?;
    let free_start = ctx.mem_get_info()?.0;
    let start = alloc()?;
    out.say(format!(
        "memory_breakdown on {}: training Linear({IN}, {HID}) → ReLU → Linear({HID}, {OUT}), f32, \
         batch {BATCH}, cross-entropy, Adam (cuda-stack-nn)\n",
        runtime.device().name()?
    ));

    // 1. Parameters.
    let model = Sequential::<f32>::new()
        .append(Linear::new(IN, HID, 1)?)
        .append(Relu)
        .append(Linear::new(HID, OUT, 2)?);
    let param_numels = [IN * HID, HID, HID * OUT, OUT];
    let params = alloc()? - start;
    check("parameters", params, class_bytes(&param_numels))?;
    let mut opt = Adam::new(model.parameters(), AdamConfig::new(1e-3))?;
    let (x, y) = batch(BATCH, 3)?;
    let inputs = alloc()? - start - params;
    check(
        "inputs",
        inputs,
        class_bytes(&[BATCH * IN]) + size_class(BATCH * 4).map_or(0, |c| c.0),
    )?;

    // 2. Activations: what the graph keeps after the forward pass; the peak adds temporaries.
    let before_fwd = alloc()?;
    rt::reset_peak_stats()?;
    let loss = model.forward(&x)?.cross_entropy(&y)?;
    let acts = alloc()? - before_fwd;
    let peak_fwd = rt::max_memory_allocated()? - before_fwd;
    check("activations", acts, class_bytes(&activation_numels(BATCH)))?;

    // 3. Gradients: the backward frees the saved tensors and leaves one gradient per parameter.
    rt::reset_peak_stats()?;
    loss.backward()?;
    let peak_bwd = rt::max_memory_allocated()? - before_fwd;
    let loss_bytes = class_bytes(&[1]);
    let grads = alloc()? - before_fwd - loss_bytes;
    check("gradients", grads, class_bytes(&param_numels))?;

    // 4. Optimizer state: Adam's m and v, and the step counters; parameters updated in place.
    let before_step = alloc()?;
    opt.step()?;
    let state = alloc()? - before_step;
    let counters = size_class(param_numels.len() * 4).map_or(0, |c| c.0);
    check(
        "Adam state",
        state,
        2 * class_bytes(&param_numels) + counters,
    )?;
    drop(loss);
    let after_step1 = alloc()?;

    // 5. A second step ends where the first did; activations grow with the batch.
    opt.zero_grad();
    let loss = model.forward(&x)?.cross_entropy(&y)?;
    loss.backward()?;
    opt.step()?;
    drop(loss);
    let after_step2 = alloc()?;
    if after_step2 != after_step1 {
        return Err(format!(
            "a second step ended at {after_step2} B allocated, the first at {after_step1} B"
        )
        .into());
    }
    opt.zero_grad();
    let (x4, y4) = batch(4 * BATCH, 4)?;
    let before_fwd4 = alloc()?;
    let loss4 = model.forward(&x4)?.cross_entropy(&y4)?;
    let acts4 = alloc()? - before_fwd4;
    check(
        "activations at batch 1024",
        acts4,
        class_bytes(&activation_numels(4 * BATCH)),
    )?;
    drop((loss4, x4, y4));
    opt.zero_grad();

    // 6. The caching allocator.
    runtime.synchronize()?;
    let (alloc_live, reserved_live) = (alloc()?, rt::memory_reserved()?);
    let free_live = ctx.mem_get_info()?.0;
    drop((model, opt, x, y));
    let (alloc_freed, reserved_freed) = (alloc()?, rt::memory_reserved()?);
    if alloc_freed != start || reserved_freed != reserved_live {
        return Err("dropping everything must bring allocated back and keep reserved".into());
    }
    rt::empty_cache()?;
    runtime.synchronize()?;
    let (alloc_end, reserved_end) = (alloc()?, rt::memory_reserved()?);
    let free_end = ctx.mem_get_info()?.0;

    let rows = [
        ("1. parameters (W1, b1, W2, b2)", 4, params),
        ("   inputs (x [256, 784], targets [256])", 2, inputs),
        ("2. activations kept for backward, batch 256", 4, acts),
        ("   peak during the forward (+ temporaries)", 0, peak_fwd),
        ("3. gradients (one per parameter)", 4, grads),
        ("   peak during the backward", 0, peak_bwd),
        (
            "4. Adam state (m, v per parameter; step counters)",
            9,
            state,
        ),
        ("5. activations kept for backward, batch 1024", 4, acts4),
    ];
    let mut t = Table::new(&[
        "measured at",
        "tensors",
        "memory_allocated Δ",
        "× parameters",
    ]);
    for (name, n, bytes) in rows {
        t.row(&[
            name.into(),
            if n == 0 { "—".into() } else { n.to_string() },
            format_bytes(bytes),
            format!("{:.2}", bytes as f64 / params as f64),
        ]);
    }
    out.say(t.render());
    let used = |free: usize| format_bytes(free_start.saturating_sub(free));
    out.say(format!(
        "\nafter two steps, everything live: allocated {}, reserved {}; the device's used memory \
         grew by {} (cuMemGetInfo)\nall dropped: allocated {} — reserved still {}, what \
         nvidia-smi shows\nempty_cache(): reserved {}, device use back to {}",
        format_bytes(alloc_live - start),
        format_bytes(reserved_live),
        used(free_live),
        format_bytes(alloc_freed - start),
        format_bytes(reserved_freed),
        format_bytes(reserved_end),
        used(free_end)
    ));
    out.say(format!(
        "\nParameters + gradients + Adam = 4× the parameters ({}). The forward keeps {} for the \
         backward at batch 256 and {:.1}× that at batch 1024; each figure above equals the \
         size-class bytes of the tensors named (checked).",
        format_bytes(params + grads + state),
        format_bytes(acts),
        acts4 as f64 / acts as f64
    ));
    out.put(
        "bytes",
        json!({
            "parameters": params, "inputs": inputs, "activations": acts,
            "peak_forward": peak_fwd, "gradients": grads, "peak_backward": peak_bwd,
            "adam_state": state, "activations_1024": acts4,
            "allocated_live": alloc_live - start, "reserved_live": reserved_live,
            "reserved_after_empty_cache": reserved_end, "allocated_end": alloc_end - start,
        }),
    );
    out.put("verified", json!(true));
    out.finish();
    Ok(())
}
