//! `train_gpt --check DIR`: the GPT of `cuda_examples::gpt`, checked step for step against
//! PyTorch (issue 33; llm.c's `test_gpt2` idea).
//!
//! `--check DIR` reads what `tools/torch_gpt.py --out DIR` wrote — the initial weights, a batch,
//! PyTorch's step-0 gradients and the losses of its AdamW steps — loads the same weights into
//! this model and compares, in f32:
//! - the step-0 loss, within `--loss-tol` relative (1e-5);
//! - every parameter's step-0 gradient, within `--grad-tol` (1e-3) of that parameter's largest
//!   |gradient| (GEMM and reduction orders differ, so gradients agree to float rounding
//!   accumulated through the layers, not bit for bit);
//! - the loss before each of the following AdamW steps (betas, eps, learning rate from the
//!   file; no weight decay), within `--steps-tol` relative (1e-4).
//!
//! The table lists the worst parameters; the exit status is non-zero on any mismatch.
//!
//! ```text
//! python3 tools/torch_gpt.py --out /tmp/gpt-check --config tiny --steps 20
//! cargo run --release -p cuda-examples --bin train_gpt -- --check /tmp/gpt-check
//! ```

use super::Args;
use cuda_examples::bench::Table;
use cuda_examples::exit::ProgramResult;
use cuda_examples::gpt::{Gpt, GptConfig};
use cuda_stack_nn::checkpoint::Checkpoint;
use cuda_stack_nn::{Adam, AdamConfig, Optimizer};
use serde_json::Value;
use std::path::Path;

fn num(v: &Value, key: &str) -> Result<f64, String> {
    v[key]
        .as_f64()
        .ok_or_else(|| format!("expected.json has no number `{key}`"))
}

/// Runs the comparison with the files in `dir`.
pub fn run(a: &Args, dir: &Path) -> ProgramResult {
    cuda_stack_runtime::set_device(a.common.device)?;
    let text = std::fs::read_to_string(dir.join("expected.json"))
        .map_err(|e| format!("reading {}: {e}", dir.join("expected.json").display()))?;
    let exp: Value = serde_json::from_str(&text)?;
    let c = &exp["config"];
    let size = |k: &str| num(c, k).map(|v| v as usize);
    let cfg = GptConfig {
        vocab: size("vocab")?,
        block_size: size("block_size")?,
        n_layer: size("n_layer")?,
        n_head: size("n_head")?,
        n_embd: size("n_embd")?,
        dropout: 0.0,
    };
    let losses: Vec<f64> = exp["losses"]
        .as_array()
        .ok_or("expected.json has no `losses`")?
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    let model = Gpt::<f32>::new(cfg, 0)?;
    model.set_fused_mlp(a.fused_mlp);
    let named = model.named_parameters();
    Checkpoint::open(dir.join("model.safetensors"))?.load_into(&named)?;
    let batch = Checkpoint::open(dir.join("batch.safetensors"))?;
    let (x, y) = (batch.tensor::<i32>("x")?, batch.tensor::<i32>("y")?);
    println!(
        "train_gpt --check: {cfg:?}, batch {:?}, {} steps of PyTorch {}",
        x.shape(),
        losses.len(),
        exp["torch"].as_str().unwrap_or("?")
    );
    let mut failures = Vec::new();

    // Step 0: the loss and every gradient.
    let loss = model.loss(&x, &y)?;
    loss.backward()?;
    let l0 = f64::from(loss.value().item()?);
    let want0 = *losses.first().ok_or("no losses in expected.json")?;
    let rel0 = (l0 - want0).abs() / want0.abs();
    println!("step 0 loss {l0:.7} (PyTorch {want0:.7}), relative difference {rel0:.2e}");
    if rel0 > a.loss_tol {
        failures.push(format!(
            "step-0 loss differs by {rel0:.2e} > {}",
            a.loss_tol
        ));
    }
    let grads = Checkpoint::open(dir.join("grads.safetensors"))?;
    let mut rows = Vec::new();
    for (n, p) in &named {
        let want = grads.tensor::<f32>(n)?.to_vec()?;
        let got = p
            .grad()?
            .ok_or_else(|| format!("no gradient for {n}"))?
            .to_vec()?;
        let scale = want
            .iter()
            .fold(0.0f32, |m, v| m.max(v.abs()))
            .max(f32::MIN_POSITIVE);
        let err = got
            .iter()
            .zip(&want)
            .fold(0.0f32, |m, (g, w)| m.max((g - w).abs()));
        let rel = f64::from(err / scale);
        if rel > a.grad_tol || got.len() != want.len() {
            failures.push(format!("gradient of {n}: {rel:.2e} of its largest value"));
        }
        rows.push((rel, n.clone(), scale));
    }
    rows.sort_by(|p, q| q.0.total_cmp(&p.0));
    let mut t = Table::new(&[
        "parameter (worst first)",
        "max |Δgrad| / max |grad|",
        "max |grad|",
    ]);
    for (rel, n, scale) in rows.iter().take(8) {
        t.row(&[n.clone(), format!("{rel:.2e}"), format!("{scale:.3e}")]);
    }
    t.print();

    // The AdamW steps.
    let betas = &exp["betas"];
    let config = AdamConfig {
        lr: num(&exp, "lr")?,
        betas: (
            betas[0].as_f64().ok_or("betas")?,
            betas[1].as_f64().ok_or("betas")?,
        ),
        eps: num(&exp, "eps")?,
        weight_decay: 0.0,
        decoupled_weight_decay: true,
    };
    let params = named.iter().map(|(_, p)| p.clone()).collect();
    let mut opt = Adam::new(params, config)?;
    opt.step()?; // step 0's update, from the gradients checked above
    let mut worst: f64 = 0.0;
    for (i, want) in losses.iter().enumerate().skip(1) {
        opt.zero_grad();
        let l = model.loss(&x, &y)?;
        l.backward()?;
        opt.step()?;
        let got = f64::from(l.value().item()?);
        let rel = (got - want).abs() / want.abs();
        worst = worst.max(rel);
        if rel > a.steps_tol {
            failures.push(format!("step {i} loss {got} vs PyTorch {want}: {rel:.2e}"));
        }
    }
    println!(
        "steps 1..{}: worst relative loss difference {worst:.2e} (tolerance {})",
        losses.len(),
        a.steps_tol
    );
    if failures.is_empty() {
        println!(
            "PASS: loss, gradients and {} steps match PyTorch",
            losses.len()
        );
        Ok(())
    } else {
        for f in &failures {
            println!("MISS: {f}");
        }
        Err(format!("{} mismatches with PyTorch", failures.len()).into())
    }
}
