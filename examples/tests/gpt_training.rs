//! `cuda_examples::gpt`'s training pieces on a tiny configuration, on the GPU: a few AdamW
//! iterations on a repetitive text lower the evaluation loss (f32 and bf16 compute); the same
//! seed gives bit-identical losses and weights on a rerun (dropout on); the KV-cache decode's
//! logits equal the last position of a full forward of the whole prefix (prefill, then one
//! position at a time, batch 2); sampling is reproducible and refills a full cache; bf16
//! compute gives about the f32 loss and hands every gradient to the f32 weights; the fused MLP
//! (`Var::mlp_gelu`, GELU in cuBLASLt's epilogues for bf16) against the chain it replaces: the
//! same loss and gradients bit for bit in f32, within bf16's tolerance in bf16; the training
//! loss (`Gpt::loss_with`: the classifier and the loss as `Var::linear_cross_entropy`, the
//! logits overwritten by their gradient) against the logits of `Gpt::forward_with` through
//! `fused_cross_entropy`: the same loss and gradients bit for bit, in f32 and bf16.

use cuda_examples::gpt::{
    Batcher, Corpus, CosineSchedule, Gpt, GptConfig, KvCache, SampleConfig, TrainConfig, Trainer,
};
use cuda_stack_nn::{no_grad, GradElement, NnError};
use cuda_stack_runtime::cuda_stack_driver::half::bf16;
use cuda_stack_runtime::{AttentionElement, Tensor};
use cuda_tests::{ensure, gpu, TestResult};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() {
    cuda_tests::run(vec![
        gpu("tiny_gpt_trains_and_the_loss_falls_f32", || {
            trains::<f32>(0.6)
        }),
        gpu("tiny_gpt_trains_and_the_loss_falls_bf16", || {
            trains::<bf16>(0.6)
        }),
        gpu("same_seed_gives_bit_identical_losses_f32", || {
            reproducible::<f32>()
        }),
        gpu("same_seed_gives_bit_identical_losses_bf16", || {
            reproducible::<bf16>()
        }),
        gpu("kv_cache_decode_equals_the_full_forward_f32", || {
            kv_cache::<f32>(1e-4)
        }),
        gpu("kv_cache_decode_equals_the_full_forward_bf16", || {
            kv_cache::<bf16>(5e-2)
        }),
        gpu(
            "generate_is_reproducible_and_refills_a_full_cache",
            generate,
        ),
        gpu(
            "bf16_compute_is_close_to_f32_and_reaches_the_f32_weights",
            bf16_vs_f32,
        ),
        gpu("fused_and_unfused_mlp_agree_f32_bit_for_bit", || {
            fused_vs_unfused::<f32>(0.0, 0.0)
        }),
        gpu("fused_and_unfused_mlp_agree_bf16", || {
            fused_vs_unfused::<bf16>(1e-2, 5e-2)
        }),
        gpu("loss_with_is_the_logits_loss_bit_for_bit_f32", || {
            classifier_in_place::<f32>()
        }),
        gpu("loss_with_is_the_logits_loss_bit_for_bit_bf16", || {
            classifier_in_place::<bf16>()
        }),
        gpu(
            "captured_iterations_match_eager_ones_bit_for_bit_with_the_schedule_f32",
            captured_vs_eager::<f32>,
        ),
        gpu(
            "captured_iterations_match_eager_ones_bit_for_bit_with_the_schedule_bf16",
            captured_vs_eager::<bf16>,
        ),
        gpu("a_model_with_dropout_is_not_captured", dropout_not_captured),
    ]);
}

/// A text with structure a tiny model learns in tens of steps.
fn text() -> String {
    "the quick brown fox jumps over the lazy dog. a stitch in time saves nine.\n".repeat(60)
}

fn tiny(vocab: usize, dropout: f64) -> GptConfig {
    GptConfig {
        vocab,
        block_size: 32,
        n_layer: 2,
        n_head: 2,
        n_embd: 64,
        dropout,
    }
}

fn train_config(iters: usize) -> TrainConfig {
    TrainConfig {
        batch: 8,
        grad_accum: 2,
        schedule: CosineSchedule {
            lr: 3e-3,
            min_lr: 3e-4,
            warmup_iters: 5,
            lr_decay_iters: iters,
        },
        max_iters: iters,
        ..TrainConfig::shakespeare_char()
    }
}

fn batch(
    b: &mut Batcher,
    data: &[i32],
    rows: usize,
    block: usize,
) -> Res<(Tensor<i32>, Tensor<i32>)> {
    let (x, y) = b.batch(data, rows, block)?;
    Ok((
        Tensor::from_vec(x, &[rows, block])?,
        Tensor::from_vec(y, &[rows, block])?,
    ))
}

/// A tiny model trained `iters` iterations from `seed`: each iteration's loss, the evaluation
/// loss before and after, and the final weights.
struct Run {
    losses: Vec<f32>,
    before: f32,
    after: f32,
    weights: Vec<Vec<f32>>,
}

fn run<U: GradElement + AttentionElement + 'static>(iters: usize, seed: u64) -> Res<Run> {
    run_with::<U>(iters, seed, 0.1, None)
}

/// [`run`] with `dropout`, the iteration captured into a CUDA graph before iteration
/// `capture_at` (every later iteration a replay).
fn run_with<U: GradElement + AttentionElement + 'static>(
    iters: usize,
    seed: u64,
    dropout: f64,
    capture_at: Option<usize>,
) -> Res<Run> {
    let corpus = Corpus::from_text(&text(), 32, "the test text")?;
    let cfg = tiny(corpus.vocab.len(), dropout);
    let tc = train_config(iters);
    let mut trainer = Trainer::<U>::new(Gpt::<f32>::new(cfg, seed)?, tc)?;
    let eval = |trainer: &Trainer<U>| -> Res<f32> {
        let mut b = Batcher::new(99);
        let batches: Vec<_> = (0..4)
            .map(|_| {
                batch(&mut b, &corpus.val, 8, 32).map_err(|e| NnError::Invalid {
                    what: "batch",
                    problem: e.to_string(),
                })
            })
            .collect();
        Ok(trainer.eval_loss(batches)?)
    };
    let before = eval(&trainer)?;
    let mut batcher = Batcher::new(seed);
    let mut losses = Vec::new();
    for i in 0..iters {
        let micro = (0..tc.grad_accum)
            .map(|_| batch(&mut batcher, &corpus.train, tc.batch, 32))
            .collect::<Res<Vec<_>>>()?;
        if capture_at == Some(i) {
            trainer.capture(&micro)?;
            ensure!(trainer.captured_kernels().is_some(), "not captured");
        }
        losses.push(trainer.step(&micro)?.loss.item()?);
    }
    let after = eval(&trainer)?;
    let weights = trainer
        .model()
        .parameters()
        .iter()
        .map(|p| p.value().to_vec())
        .collect::<Result<_, _>>()?;
    Ok(Run {
        losses,
        before,
        after,
        weights,
    })
}

fn trains<U: GradElement + AttentionElement + 'static>(ratio: f32) -> TestResult {
    let r = run::<U>(60, 3)?;
    let ln_v = (r.weights[0].len() as f32 / 64.0).ln();
    ensure!(
        (r.before - ln_v).abs() < 0.2,
        "loss at initialisation {} (ln vocab = {ln_v})",
        r.before
    );
    ensure!(
        r.losses.iter().all(|l| l.is_finite()),
        "a non-finite loss: {:?}",
        r.losses
    );
    ensure!(
        r.after < ratio * r.before,
        "evaluation loss {} after 60 iterations, {} before",
        r.after,
        r.before
    );
    Ok(())
}

fn reproducible<U: GradElement + AttentionElement + 'static>() -> TestResult {
    let (a, b) = (run::<U>(12, 5)?, run::<U>(12, 5)?);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    ensure!(
        bits(&a.losses) == bits(&b.losses),
        "losses differ: {:?} vs {:?}",
        a.losses,
        b.losses
    );
    ensure!(a.after.to_bits() == b.after.to_bits(), "evaluation differs");
    for (i, (x, y)) in a.weights.iter().zip(&b.weights).enumerate() {
        ensure!(
            bits(x) == bits(y),
            "parameter {i} differs after 12 iterations"
        );
    }
    let c = run::<U>(12, 6)?;
    ensure!(
        bits(&a.losses) != bits(&c.losses),
        "another seed, the same losses"
    );
    Ok(())
}

/// The largest |a − b| over the largest |b|.
fn rel_diff(a: &[f32], b: &[f32]) -> f32 {
    let scale = b.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-30);
    a.iter()
        .zip(b)
        .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

fn kv_cache<U: GradElement + AttentionElement + 'static>(tol: f32) -> TestResult {
    let cfg = tiny(29, 0.0);
    let model = Gpt::<f32>::new(cfg, 11)?;
    // Larger weights than the initialisation's, so the logits are far from uniform.
    for (_, p) in model.named_parameters() {
        let v = p.value().scale(8.0)?;
        p.copy_from_(&v)?;
    }
    model.set_training(false);
    no_grad(|| -> TestResult {
        let w = model.weights_as::<U>()?;
        let b = 2;
        let seq: Vec<i32> = (0..b * cfg.block_size)
            .map(|i| ((i * 7 + i / 5) % cfg.vocab) as i32)
            .collect();
        // Row r of the batch is seq[r·32 ..][..len].
        let prefix = |len: usize| -> Res<Tensor<i32>> {
            let v: Vec<i32> = (0..b)
                .flat_map(|r| seq[r * cfg.block_size..r * cfg.block_size + len].to_vec())
                .collect();
            Ok(Tensor::from_vec(v, &[b, len])?)
        };
        let mut cache = KvCache::<U>::new(&cfg, b)?;
        let prompt = 5;
        let mut got = model.forward_cached(&w, &prefix(prompt)?, &mut cache)?;
        let mut worst = 0.0f32;
        for len in prompt..=cfg.block_size {
            let full = model.forward_with(&w, &prefix(len)?)?.value();
            let last = full
                .narrow(1, len - 1, 1)?
                .contiguous()?
                .reshape(&[b, cfg.vocab])?;
            let (g, f) = (
                got.to_dtype::<f32>()?.to_vec()?,
                last.to_dtype::<f32>()?.to_vec()?,
            );
            let d = rel_diff(&g, &f);
            worst = worst.max(d);
            ensure!(
                d <= tol,
                "position {len}: decode differs by {d} (tolerance {tol})"
            );
            ensure!(
                cache.len() == len,
                "cache holds {} after {len}",
                cache.len()
            );
            if len < cfg.block_size {
                let next: Vec<i32> = (0..b).map(|r| seq[r * cfg.block_size + len]).collect();
                got = model.forward_cached(&w, &Tensor::from_vec(next, &[b, 1])?, &mut cache)?;
            }
        }
        // A full cache refuses one more position; a cleared one starts over.
        let one = Tensor::from_vec(vec![1i32; b], &[b, 1])?;
        ensure!(
            model.forward_cached(&w, &one, &mut cache).is_err(),
            "a full cache took another position"
        );
        cache.clear();
        ensure!(
            model.forward_cached(&w, &one, &mut cache).is_ok(),
            "after clear"
        );
        let wrong_batch = Tensor::from_vec(vec![1i32; 3], &[3, 1])?;
        ensure!(
            model.forward_cached(&w, &wrong_batch, &mut cache).is_err(),
            "another batch size"
        );
        eprintln!("worst relative difference {worst:.2e}");
        Ok(())
    })
}

fn generate() -> TestResult {
    let cfg = tiny(29, 0.1);
    let model = Gpt::<f32>::new(cfg, 2)?;
    let sc = SampleConfig {
        tokens: 3 * cfg.block_size + 5,
        seed: 4,
        ..SampleConfig::default()
    };
    let a = model.generate::<f32>(&[3, 1, 4], &sc, true)?;
    let b = model.generate::<f32>(&[3, 1, 4], &sc, true)?;
    ensure!(a.len() == sc.tokens, "{} tokens", a.len());
    ensure!(a == b, "the same seed sampled differently");
    ensure!(
        a.iter().all(|&t| t >= 0 && (t as usize) < cfg.vocab),
        "a token outside the vocabulary"
    );
    let c = model.generate::<f32>(&[3, 1, 4], &SampleConfig { seed: 5, ..sc }, true)?;
    ensure!(a != c, "another seed, the same sample");
    // A prompt longer than the context is cut to its last block_size tokens.
    let long: Vec<i32> = (0..50).map(|i| i % 29).collect();
    ensure!(
        model
            .generate::<bf16>(&long, &SampleConfig { tokens: 3, ..sc }, true)?
            .len()
            == 3,
        "long prompt"
    );
    ensure!(
        model.generate::<f32>(&[], &sc, true).is_err(),
        "an empty prompt"
    );
    ensure!(
        model.generate::<f32>(&[29], &sc, true).is_err(),
        "a token outside the vocabulary"
    );
    Ok(())
}

fn bf16_vs_f32() -> TestResult {
    let corpus = Corpus::from_text(&text(), 32, "the test text")?;
    let cfg = tiny(corpus.vocab.len(), 0.0);
    let model = Gpt::<f32>::new(cfg, 8)?;
    let (x, y) = batch(&mut Batcher::new(1), &corpus.train, 4, 32)?;
    let l32 = model.loss(&x, &y)?;
    l32.backward()?;
    let g32: Vec<Vec<f32>> = model
        .parameters()
        .iter()
        .map(|p| Ok(p.grad()?.ok_or("no f32 gradient")?.to_vec()?))
        .collect::<Res<_>>()?;
    for p in model.parameters() {
        p.zero_grad();
    }
    let w = model.weights_as::<bf16>()?;
    let l16 = model.loss_with(&w, &x, &y)?;
    l16.backward()?;
    let (a, b) = (
        f64::from(l32.value().item()?),
        f64::from(l16.value().item()?.to_f32()),
    );
    ensure!((a - b).abs() <= 2e-2 * a, "loss f32 {a} vs bf16 {b}");
    for ((n, p), g) in model.named_parameters().iter().zip(&g32) {
        let g16 = p
            .grad()?
            .ok_or_else(|| format!("no gradient reached {n}"))?;
        let d = rel_diff(&g16.to_vec()?, g);
        ensure!(
            d <= 0.1,
            "{n}: bf16 gradient differs by {d} of its largest f32 value"
        );
    }
    Ok(())
}

/// The loss and every parameter's gradient with `Gpt::set_fused_mlp(true)` and `(false)`,
/// computing in `U`: the loss within `loss_tol` (relative), each gradient within `grad_tol` of
/// its largest value (0: identical).
fn fused_vs_unfused<U: GradElement + AttentionElement + 'static>(
    loss_tol: f64,
    grad_tol: f32,
) -> TestResult {
    let corpus = Corpus::from_text(&text(), 32, "the test text")?;
    let cfg = tiny(corpus.vocab.len(), 0.0);
    let model = Gpt::<f32>::new(cfg, 9)?;
    let (x, y) = batch(&mut Batcher::new(2), &corpus.train, 4, 32)?;
    let mut runs = Vec::new();
    for fused in [true, false] {
        model.set_fused_mlp(fused);
        for p in model.parameters() {
            p.zero_grad();
        }
        let loss = model.loss_with(&model.weights_as::<U>()?, &x, &y)?;
        loss.backward()?;
        let l = loss.value().to_dtype::<f32>()?.item()? as f64;
        let grads: Vec<Vec<f32>> = model
            .parameters()
            .iter()
            .map(|p| Ok(p.grad()?.ok_or("no gradient")?.to_vec()?))
            .collect::<Res<_>>()?;
        runs.push((l, grads));
    }
    model.set_fused_mlp(true); // back to the default
    let what = std::any::type_name::<U>();
    let ((la, ga), (lb, gb)) = (&runs[0], &runs[1]);
    ensure!(
        (la - lb).abs() <= loss_tol * lb.abs(),
        "{what}: loss fused {la} vs unfused {lb}"
    );
    for ((n, _), (a, b)) in model.named_parameters().iter().zip(ga.iter().zip(gb)) {
        if grad_tol == 0.0 {
            ensure!(
                a == b,
                "{what}: {n}'s gradient differs between fused and unfused"
            );
        } else {
            let d = rel_diff(a, b);
            ensure!(
                d <= grad_tol,
                "{what}: {n}'s gradient differs by {d} of its largest value (fused vs unfused)"
            );
        }
    }
    Ok(())
}

/// `Gpt::loss_with` (the classifier and the loss as one op, `Var::linear_cross_entropy`) and
/// the loss it replaced, `Gpt::forward_with`'s logits reshaped to `[B·T, V]` through
/// `fused_cross_entropy`, computing in `U`: the same ops in the same order, so the same loss
/// and every parameter's gradient (the tied `wte` included), bit for bit.
fn classifier_in_place<U: GradElement + AttentionElement + 'static>() -> TestResult {
    let corpus = Corpus::from_text(&text(), 32, "the test text")?;
    let cfg = tiny(corpus.vocab.len(), 0.0);
    let model = Gpt::<f32>::new(cfg, 10)?;
    let (x, y) = batch(&mut Batcher::new(3), &corpus.train, 4, 32)?;
    let mut runs = Vec::new();
    for fused in [true, false] {
        for p in model.parameters() {
            p.zero_grad();
        }
        let w = model.weights_as::<U>()?;
        let loss = if fused {
            model.loss_with(&w, &x, &y)?
        } else {
            let n = x.numel();
            model
                .forward_with(&w, &x)?
                .reshape(&[n, cfg.vocab])?
                .fused_cross_entropy(&y.reshape(&[n])?)?
        };
        loss.backward()?;
        let l = loss.value().to_dtype::<f32>()?.item()?.to_bits();
        let grads: Vec<Vec<u32>> = model
            .parameters()
            .iter()
            .map(|p| {
                let g = p.grad()?.ok_or("no gradient")?.to_vec()?;
                Ok(g.iter().map(|v| v.to_bits()).collect())
            })
            .collect::<Res<_>>()?;
        runs.push((l, grads));
    }
    let what = std::any::type_name::<U>();
    let ((la, ga), (lb, gb)) = (&runs[0], &runs[1]);
    ensure!(
        la == lb,
        "{what}: loss_with {} vs the logits' loss {}",
        f32::from_bits(*la),
        f32::from_bits(*lb)
    );
    for ((n, _), (a, b)) in model.named_parameters().iter().zip(ga.iter().zip(gb)) {
        ensure!(
            a == b,
            "{what}: {n}'s gradient differs between loss_with and the logits' loss"
        );
    }
    Ok(())
}

/// The iteration captured once (after two eager ones) and replayed with new batches and the
/// scheduled rate (warm-up, then cosine decay: a different rate at every iteration) gives the
/// eager run's losses, evaluation and weights bit for bit.
fn captured_vs_eager<U: GradElement + AttentionElement + 'static>() -> TestResult {
    let eager = run_with::<U>(12, 7, 0.0, None)?;
    let graph = run_with::<U>(12, 7, 0.0, Some(2))?;
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    ensure!(
        bits(&eager.losses) == bits(&graph.losses),
        "losses differ: eager {:?}, captured {:?}",
        eager.losses,
        graph.losses
    );
    ensure!(
        eager.after.to_bits() == graph.after.to_bits(),
        "evaluation differs: {} vs {}",
        eager.after,
        graph.after
    );
    for (i, (x, y)) in eager.weights.iter().zip(&graph.weights).enumerate() {
        ensure!(bits(x) == bits(y), "parameter {i} differs");
    }
    Ok(())
}

/// Dropout's mask position advances on the host: a captured step would repeat its mask, so
/// the capture is refused, saying why.
fn dropout_not_captured() -> TestResult {
    let e = match run_with::<f32>(3, 1, 0.1, Some(1)) {
        Ok(_) => return Err("a model with dropout was captured".into()),
        Err(e) => e,
    };
    ensure!(e.to_string().contains("dropout"), "{e}");
    Ok(())
}
