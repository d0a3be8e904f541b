//! `train_gpt --check DIR [--dtype f32|bf16]`: the GPT of `cuda_examples::gpt`, checked step
//! for step against PyTorch (issue 33; llm.c's `test_gpt2` idea).
//!
//! `--check DIR` reads what `tools/torch_gpt.py --out DIR` wrote — the initial weights, a batch,
//! PyTorch's step-0 gradients (f32) and the losses of its AdamW steps — loads the same weights
//! into this model and compares ([`cuda_examples::gpt::parity`]):
//! - the step-0 loss, within `--loss-tol` relative (f32 1e-5, bf16 1e-2);
//! - every parameter's step-0 gradient, within `--grad-tol` of that parameter's largest
//!   |gradient| (f32 1e-3, bf16 5e-2);
//! - the loss before each of the following AdamW steps (betas, eps, learning rate from the
//!   file; no weight decay), within `--steps-tol` relative (f32 1e-4, bf16 2e-2).
//!
//! `--dtype bf16` computes in bf16 on f32 parameters (autocast's rule) against the same f32
//! PyTorch run. The table lists the worst parameters; the exit status is non-zero on any
//! mismatch. The GPU test `gpt_parity` runs the same comparison on a committed fixture.
//!
//! ```text
//! python3 tools/torch_gpt.py --out /tmp/gpt-check --config tiny --steps 20
//! cargo run --release -p cuda-examples --bin train_gpt -- --check /tmp/gpt-check
//! cargo run --release -p cuda-examples --bin train_gpt -- --check /tmp/gpt-check --dtype bf16
//! ```

use super::Args;
use cuda_examples::bench::Table;
use cuda_examples::exit::ProgramResult;
use cuda_examples::gpt::parity::{compare_with_torch, ParityTolerances};
use cuda_stack_nn::GradElement;
use cuda_stack_runtime::AttentionElement;
use std::path::Path;

/// Runs the comparison with the files in `dir`, computing in `U`.
pub fn run<U: GradElement + AttentionElement + 'static>(a: &Args, dir: &Path) -> ProgramResult {
    cuda_stack_runtime::set_device(a.common.device)?;
    let bf16 = std::mem::size_of::<U>() == 2;
    let base = if bf16 {
        ParityTolerances::BF16
    } else {
        ParityTolerances::F32
    };
    let tol = ParityTolerances {
        loss: a.loss_tol.unwrap_or(base.loss),
        grad: a.grad_tol.unwrap_or(base.grad),
        steps: a.steps_tol.unwrap_or(base.steps),
    };
    let r = compare_with_torch::<U>(dir, tol, a.mlp.fused())?;
    println!(
        "train_gpt --check ({}): {:?}, batch {:?}, {} steps of {}",
        if bf16 { "bf16 compute" } else { "f32" },
        r.config,
        r.batch_shape,
        r.step_losses.len() + 1,
        r.torch
    );
    println!(
        "step 0 loss {:.7} (PyTorch {:.7}), relative difference {:.2e} (tolerance {})",
        r.step0_loss.0,
        r.step0_loss.1,
        r.step0_relative(),
        tol.loss
    );
    let mut t = Table::new(&[
        "parameter (worst first)",
        "max |Δgrad| / max |grad|",
        "max |grad|",
    ]);
    for g in r.grads.iter().take(8) {
        t.row(&[
            g.name.clone(),
            format!("{:.2e}", g.relative),
            format!("{:.3e}", g.scale),
        ]);
    }
    t.print();
    println!(
        "gradients: worst {:.2e} of the parameter's largest |gradient| (tolerance {})",
        r.grads.first().map_or(0.0, |g| g.relative),
        tol.grad
    );
    println!(
        "steps 1..{}: worst relative loss difference {:.2e} (tolerance {})",
        r.step_losses.len(),
        r.worst_step_relative(),
        tol.steps
    );
    if r.passed() {
        println!(
            "PASS: loss, gradients and {} steps match PyTorch",
            r.step_losses.len() + 1
        );
        Ok(())
    } else {
        for f in &r.failures {
            println!("MISS: {f}");
        }
        Err(format!("{} mismatches with PyTorch", r.failures.len()).into())
    }
}
