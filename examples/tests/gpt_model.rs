//! The GPT model of `cuda_examples::gpt` on a tiny configuration: shapes, the loss at
//! initialisation (logits near 0, so about ln(vocab)), a gradient for every parameter, the
//! parameter count and nanoGPT's names, a checkpoint round trip, and a few Adam steps that
//! lower the loss on a repeated batch.

use cuda_examples::gpt::{Gpt, GptConfig};
use cuda_stack_nn::checkpoint::{self, Checkpoint};
use cuda_stack_nn::{Adam, AdamConfig, Optimizer};
use cuda_stack_runtime::Tensor;
use cuda_tests::{ensure, gpu, TestResult};

fn main() {
    cuda_tests::run(vec![gpu(
        "tiny_gpt_forward_backward_names_and_learning",
        tiny,
    )]);
}

fn tiny() -> TestResult {
    let cfg = GptConfig {
        vocab: 37,
        block_size: 16,
        n_layer: 2,
        n_head: 2,
        n_embd: 32,
        dropout: 0.0,
    };
    let model = Gpt::<f32>::new(cfg, 7)?;
    let named = model.named_parameters();
    let count: usize = named.iter().map(|(_, p)| p.numel()).sum();
    ensure!(
        count == cfg.parameter_count(),
        "{count} vs {}",
        cfg.parameter_count()
    );
    for want in [
        "transformer.wte.weight",
        "transformer.h.1.attn.c_attn.weight",
        "transformer.h.0.mlp.c_proj.bias",
        "transformer.ln_f.weight",
    ] {
        ensure!(
            named.iter().any(|(n, _)| n == want),
            "no parameter `{want}`"
        );
    }
    let (b, t) = (3usize, 11usize);
    let ids: Vec<i32> = (0..b * t)
        .map(|i| ((i * 7 + 3) % cfg.vocab) as i32)
        .collect();
    let next: Vec<i32> = (0..b * t)
        .map(|i| ((i * 7 + 10) % cfg.vocab) as i32)
        .collect();
    let (x, y) = (
        Tensor::from_vec(ids, &[b, t])?,
        Tensor::from_vec(next, &[b, t])?,
    );
    let logits = model.forward(&x)?;
    ensure!(
        logits.shape() == [b, t, cfg.vocab],
        "logits {:?}",
        logits.shape()
    );
    let loss = model.loss(&x, &y)?;
    let l0 = loss.value().item()? as f64;
    let ln_v = (cfg.vocab as f64).ln();
    ensure!(
        (l0 - ln_v).abs() < 0.1,
        "initial loss {l0}, expected about ln(37) = {ln_v}"
    );
    loss.backward()?;
    for (n, p) in &named {
        let g = p.grad()?.ok_or_else(|| format!("no gradient for {n}"))?;
        ensure!(
            g.to_vec()?.iter().all(|v| v.is_finite()),
            "a non-finite gradient in {n}"
        );
    }
    // A checkpoint round trip into a model of other weights gives the same loss.
    let file = std::env::temp_dir().join(format!("gpt-tiny-{}.safetensors", std::process::id()));
    checkpoint::save(&file, &named, None)?;
    let other = Gpt::<f32>::new(cfg, 99)?;
    Checkpoint::open(&file)?.load_into(&other.named_parameters())?;
    let l1 = other.loss(&x, &y)?.value().item()? as f64;
    ensure!(l1 == l0, "loss after loading {l1}, before {l0}");
    let _ = std::fs::remove_file(&file);
    // Adam on one repeated batch: the loss falls.
    let params: Vec<_> = named.iter().map(|(_, p)| p.clone()).collect();
    let mut opt = Adam::new(params, AdamConfig::new(3e-3))?;
    let mut last = l0;
    for _ in 0..20 {
        opt.zero_grad();
        let l = model.loss(&x, &y)?;
        l.backward()?;
        opt.step()?;
        last = l.value().item()? as f64;
    }
    ensure!(
        last < 0.8 * l0,
        "after 20 Adam steps the loss is {last} (from {l0})"
    );
    Ok(())
}
