//! `train_gpt --config shakespeare-char`: nanoGPT's character-level model trained on a text,
//! evaluated as it goes, its curves, checkpoint and a sample written at the end.

use super::{Args, TorchPlan, TINY_SHAKESPEARE};
use cuda_examples::exit::ProgramResult;
use cuda_examples::gpt::torch_bench::{char_table, describe, OursChar, TorchRequest, CHAR_ITERS};
use cuda_examples::gpt::{
    check_sample_config, Batcher, Corpus, Gpt, GptConfig, SampleConfig, TrainConfig, Trainer,
};
use cuda_examples::loss_curves::{Curves, EvalPoint};
use cuda_examples::output::Out;
use cuda_stack_nn::checkpoint::{self, Checkpoint};
use cuda_stack_nn::GradElement;
use cuda_stack_runtime::{AttentionElement, DType, Tensor};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use std::collections::BTreeMap;
use std::error::Error;
use std::path::Path;
use std::time::Instant;

type BoxResult<T> = Result<T, Box<dyn Error>>;

/// `--torch-run`: PyTorch's timed iterations (after its warm-up ones) per mode.
const TORCH_STEPS: usize = 100;
/// `--torch-run`: PyTorch's untimed iterations after its first.
const TORCH_WARMUP: usize = 10;

/// One batch of `rows` windows from `data` on the device.
fn batch(
    b: &mut Batcher,
    data: &[i32],
    rows: usize,
    block: usize,
) -> cuda_stack_nn::Result<(Tensor<i32>, Tensor<i32>)> {
    let (x, y) = b
        .batch(data, rows, block)
        .map_err(|problem| cuda_stack_nn::NnError::Invalid {
            what: "batch",
            problem,
        })?;
    Ok((
        Tensor::from_vec(x, &[rows, block])?,
        Tensor::from_vec(y, &[rows, block])?,
    ))
}

/// Loads `path` into `model`'s parameters: every tensor f32 with the model's names and shapes
/// (anything else is an error before any value is copied); returns the iteration it records.
fn resume(path: &Path, model: &Gpt<f32>) -> BoxResult<usize> {
    let ckpt = Checkpoint::open(path)?;
    let other: Vec<String> = ckpt
        .names()
        .into_iter()
        .filter_map(|n| match ckpt.get(n) {
            Ok(t) if t.dtype != DType::F32 => Some(format!("`{n}` is {:?}", t.dtype)),
            _ => None,
        })
        .collect();
    if !other.is_empty() {
        return Err(format!(
            "{}: this program keeps f32 weights, but {}",
            path.display(),
            other.join(", ")
        )
        .into());
    }
    ckpt.load_into(&model.named_parameters())?;
    let iter = match ckpt.metadata().get("iter") {
        Some(v) => v
            .parse()
            .map_err(|e| format!("{}: metadata iter = {v:?}: {e}", path.display()))?,
        None => 0,
    };
    Ok(iter)
}

/// The run, computing in `U` (f32 or bf16).
pub fn run<U: GradElement + AttentionElement + 'static>(a: &Args) -> ProgramResult {
    let q = &a.common;
    let mut out = Out::new(q.json);
    let dtype = if std::mem::size_of::<U>() == 4 {
        "f32"
    } else {
        "bf16"
    };
    // Everything the flags and the corpus can get wrong, before the GPU is touched.
    let block = GptConfig::shakespeare_char(1).block_size;
    let (corpus, source) = match &a.data {
        Some(p) => (Corpus::load(p, block)?, p.display().to_string()),
        None => (
            Corpus::from_text(TINY_SHAKESPEARE, block, "the committed tiny-shakespeare")?,
            "tiny-shakespeare (examples/data/tinyshakespeare.txt)".to_string(),
        ),
    };
    let iters = a.iters.unwrap_or(q.pick(40, 5000));
    let eval_iters = if q.quick {
        a.eval_iters.min(4)
    } else {
        a.eval_iters
    };
    let eval_interval = if q.quick {
        a.eval_interval.min(20)
    } else {
        a.eval_interval
    };
    let sample_tokens = if q.quick {
        a.sample_tokens.min(100)
    } else {
        a.sample_tokens
    };
    if eval_interval == 0 || eval_iters == 0 || a.log_interval == 0 {
        return Err("--eval-interval, --eval-iters and --log-interval must be at least 1".into());
    }
    let sample = SampleConfig {
        tokens: sample_tokens,
        top_k: a.top_k,
        temperature: a.temperature,
        seed: a.seed,
    };
    check_sample_config(&sample)?;
    let prompt = corpus
        .vocab
        .encode(&a.start)
        .map_err(|e| format!("--start: {e}"))?;
    if prompt.is_empty() && sample_tokens > 0 {
        return Err("--start is empty: sampling needs at least one character to start".into());
    }
    let cfg = GptConfig::shakespeare_char(corpus.vocab.len());
    let mut tc = TrainConfig::shakespeare_char();
    tc.batch = a.batch.unwrap_or(tc.batch);
    tc.grad_accum = a.grad_accum;
    tc.max_iters = iters;
    if a.iters.is_some() || q.quick {
        // nanoGPT's configs set lr_decay_iters = max_iters: the decay follows --iters.
        tc.schedule.lr_decay_iters = iters;
    }
    if let Some(n) = a.lr_decay_iters {
        tc.schedule.lr_decay_iters = n;
    }
    let torch_plan = TorchPlan::new(a, "shakespeare")?;
    std::fs::create_dir_all(&a.out)
        .map_err(|e| format!("creating --out {}: {e}", a.out.display()))?;

    cuda_stack_runtime::set_device(q.device)?;
    let model = Gpt::<f32>::new(cfg, a.seed)?;
    model.set_fused_mlp(a.mlp.fused());
    let start = match &a.resume {
        Some(p) => resume(p, &model)?,
        None => 0,
    };
    let mut trainer = Trainer::<U>::new(model, tc)?;
    trainer.set_iter(start);
    out.say(format!(
        "train_gpt shakespeare-char: {source}, {} characters, vocabulary {} ({} train / {} val \
         tokens)\nmodel {} layers, {} heads, {} wide, context {}, dropout {}: {:.2}M parameters; \
         compute {dtype}, f32 weights and AdamW state\nbatch {} × {} micro-batch(es) × {block} \
         tokens, AdamW lr {} → {} (warm-up {}, decay to {}), β ({}, {}), weight decay {} \
         (matrices), clip {}; iterations {start} → {iters}, seed {}",
        corpus.train.len() + corpus.val.len(),
        corpus.vocab.len(),
        corpus.train.len(),
        corpus.val.len(),
        cfg.n_layer,
        cfg.n_head,
        cfg.n_embd,
        cfg.block_size,
        cfg.dropout,
        cfg.parameter_count() as f64 / 1e6,
        tc.batch,
        tc.grad_accum,
        tc.schedule.lr,
        tc.schedule.min_lr,
        tc.schedule.warmup_iters,
        tc.schedule.lr_decay_iters,
        tc.betas.0,
        tc.betas.1,
        tc.weight_decay,
        tc.grad_clip,
        a.seed
    ));
    let want_graph = a.graph.wanted(cfg.dropout);
    out.say(if want_graph {
        "the step: one CUDA graph replay, captured after the first eager step".to_string()
    } else if cfg.dropout > 0.0 {
        format!(
            "the step: eager (dropout {} cannot be captured: a replay would repeat the mask \
             drawn during the capture)",
            cfg.dropout
        )
    } else {
        "the step: eager (--graph off)".to_string()
    });

    let mut train_batches = Batcher::new(a.seed);
    let mut eval_batches = Batcher::new(a.seed ^ 0x5eed_e7a1);
    let mut curves = Curves::default();
    let mut evaluate = |trainer: &Trainer<U>, curves: &mut Curves, it: usize| -> BoxResult<()> {
        let mut loss_of = |data: &[i32]| {
            let batches: Vec<_> = (0..eval_iters)
                .map(|_| batch(&mut eval_batches, data, tc.batch, block))
                .collect();
            trainer.eval_loss(batches)
        };
        let train = loss_of(&corpus.train)?;
        let val = loss_of(&corpus.val)?;
        curves.evals.push(EvalPoint {
            iter: it,
            train,
            val,
        });
        Ok(())
    };

    let pb = if q.json || iters <= start {
        ProgressBar::hidden()
    } else {
        ProgressBar::new((iters - start) as u64)
    };
    pb.set_style(
        ProgressStyle::with_template("{bar:30} iter {pos}/{len} {msg} [{elapsed_precise}]")
            .map_err(|e| e.to_string())?,
    );
    let tokens_per_iter = tc.batch * tc.grad_accum * block;
    // nanoGPT's shakespeare_char (`always_save_checkpoint = False`: "we expect to overfit on this
    // small dataset, so only save when val improves"): `best.safetensors` holds the weights of
    // the best validation loss so far, written when an evaluation improves on it; the sample at
    // the end comes from them. `ckpt.safetensors` is the last iteration's (for --resume).
    let mut meta = BTreeMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    meta.insert("config".to_string(), format!("{cfg:?}"));
    meta.insert("vocab".to_string(), corpus.vocab.chars().iter().collect());
    let save = |trainer: &Trainer<U>, path: &std::path::Path, it: usize| -> BoxResult<()> {
        let mut m = meta.clone();
        m.insert("iter".to_string(), it.to_string());
        checkpoint::save(path, &trainer.model().named_parameters(), Some(&m))?;
        Ok(())
    };
    let best_path = a.out.join("best.safetensors");
    let mut best: Option<EvalPoint> = None;
    let mut keep_best = |trainer: &Trainer<U>, e: EvalPoint| -> BoxResult<()> {
        if best.is_none_or(|b| e.val < b.val) {
            save(trainer, &best_path, e.iter)?;
            best = Some(e);
        }
        Ok(())
    };
    let t_run = Instant::now();
    let mut eval_seconds = 0.0;
    let mut pending: Vec<(usize, Tensor<f32>)> = Vec::new();
    let mut window = (Instant::now(), 0usize);
    for it in start..iters {
        if it % eval_interval == 0 {
            let t = Instant::now();
            evaluate(&trainer, &mut curves, it)?;
            let e = curves.evals[curves.evals.len() - 1];
            keep_best(&trainer, e)?;
            eval_seconds += t.elapsed().as_secs_f64();
            pb.println(format!(
                "iter {it}: train loss {:.4}, val loss {:.4}",
                e.train, e.val
            ));
            window = (Instant::now(), 0);
        }
        let micro = (0..tc.grad_accum)
            .map(|_| batch(&mut train_batches, &corpus.train, tc.batch, block))
            .collect::<Result<Vec<_>, _>>()?;
        if want_graph && it == start + 1 {
            // After one eager step (AdamW's state exists): every later step is a replay.
            // `--graph auto` falls back to eager steps, saying why; `--graph on` fails.
            match trainer.capture(&micro) {
                Ok(()) => pb.println(format!(
                    "iter {it}: the step is captured into one CUDA graph ({} kernels)",
                    trainer.captured_kernels().unwrap_or(0)
                )),
                Err(e) if a.graph == super::GraphMode::Auto => {
                    pb.println(format!(
                        "iter {it}: the step could not be captured ({e}); it runs eagerly"
                    ));
                }
                Err(e) => return Err(e.into()),
            }
        }
        let stats = trainer.step(&micro)?;
        pending.push((it, stats.loss));
        window.1 += 1;
        if pending.len() >= a.log_interval || it + 1 == iters {
            // One wait for the GPU per log interval.
            for (i, l) in pending.drain(..) {
                let v = l.item()?;
                if !v.is_finite() {
                    pb.abandon();
                    return Err(format!("the training loss is {v} at iteration {i}").into());
                }
                curves.steps.push((i, v));
            }
            let secs = window.0.elapsed().as_secs_f64();
            let tps = (window.1 * tokens_per_iter) as f64 / secs.max(1e-9);
            let last = curves.steps.last().map_or(f32::NAN, |s| s.1);
            pb.set_position((it + 1 - start) as u64);
            pb.set_message(format!(
                "loss {last:.4}  lr {:.2e}  {:.0} tokens/s",
                stats.lr, tps
            ));
            window = (Instant::now(), 0);
        }
    }
    let t = Instant::now();
    evaluate(&trainer, &mut curves, iters.max(start))?;
    keep_best(&trainer, curves.evals[curves.evals.len() - 1])?;
    eval_seconds += t.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let best = best.ok_or("no evaluation ran")?;
    let run_seconds = t_run.elapsed().as_secs_f64();
    let train_seconds = run_seconds - eval_seconds;
    let done = iters.saturating_sub(start);
    let last = curves.evals[curves.evals.len() - 1];
    for e in &curves.evals {
        out.say(format!(
            "  iter {:>5}: train {:.4}  val {:.4}",
            e.iter, e.train, e.val
        ));
    }
    let tokens_per_s = (done * tokens_per_iter) as f64 / train_seconds.max(1e-9);
    out.say(format!(
        "{done} iterations in {run_seconds:.1} s ({train_seconds:.1} s training: {:.1} ms per \
         iteration, {tokens_per_s:.0} tokens/s; {eval_seconds:.1} s evaluating); final val loss \
         {:.4} (nanoGPT: about 1.47 after 5,000)",
        train_seconds * 1e3 / done.max(1) as f64,
        last.val
    ));
    out.say(format!(
        "best val loss {:.4} at iteration {} (nanoGPT's shakespeare_char: 1.4697)",
        best.val, best.iter
    ));
    out.put("best_val_loss", json!(best.val));
    out.put("best_val_iter", json!(best.iter));

    // Files: curves, checkpoint, sample.
    let title = format!(
        "train_gpt shakespeare-char ({dtype}): final val loss {:.4} at iteration {}",
        last.val, last.iter
    );
    curves.write(&a.out, &title)?;
    let ckpt = a.out.join("ckpt.safetensors");
    save(&trainer, &ckpt, iters.max(start))?;
    out.say(format!(
        "wrote {0}/loss.svg, {0}/losses.csv, {0}/losses.json, {1} (the last iteration) and {2} \
         (iteration {3}, the best validation loss)",
        a.out.display(),
        ckpt.display(),
        best_path.display(),
        best.iter
    ));
    if sample_tokens > 0 {
        // The sample comes from the best weights, as nanoGPT samples from its saved checkpoint.
        Checkpoint::open(&best_path)?.load_into(&trainer.model().named_parameters())?;
        let t = Instant::now();
        let ids = trainer.model().generate::<U>(&prompt, &sample, true)?;
        let secs = t.elapsed().as_secs_f64();
        let text = format!("{}{}", a.start, corpus.vocab.decode(&ids));
        let path = a.out.join("sample.txt");
        std::fs::write(&path, &text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        out.say(format!(
            "\nsample ({} characters, top-k {}, temperature {}, KV cache: {:.0} tokens/s; \
             {}):\n{text}",
            ids.len(),
            sample.top_k,
            sample.temperature,
            ids.len() as f64 / secs.max(1e-9),
            path.display()
        ));
        out.put("sample", json!(text));
    }
    let peak_alloc = cuda_stack_runtime::max_memory_allocated()?;

    // PyTorch on the same GPU, after ours: our memory goes back to the driver first.
    drop(trainer);
    cuda_stack_runtime::synchronize()?;
    cuda_stack_runtime::empty_cache()?;
    let torch = torch_plan.figures(
        || TorchRequest {
            script: a.torch_script.clone(),
            config: "shakespeare",
            batch: tc.batch,
            grad_accum: tc.grad_accum,
            steps: q.pick(20, TORCH_STEPS),
            warmup: q.pick(3, TORCH_WARMUP),
            dtype,
            tf32: dtype == "bf16" || cuda_stack_runtime::tensor::allow_tf32(),
            modes: a.torch_modes(),
            device: q.device,
            gpus: 1,
        },
        &mut out,
    );
    if let Some(t) = &torch {
        let ours = OursChar {
            iter_ms: train_seconds * 1e3 / done.max(1) as f64,
            tokens_per_s,
            peak_allocated: peak_alloc as u64,
        };
        out.say("");
        for line in describe(t) {
            out.say(line);
        }
        for line in t.differences(tc.batch, tc.grad_accum, dtype) {
            out.say(format!("note: {line}"));
        }
        let attn_drop = t.doc["attn_dropout"].as_f64().unwrap_or(0.0);
        out.say(format!(
            "ours: {done} iterations timed (evaluation left out); PyTorch: the mean of its timed \
             iterations on random tokens{}. Each projected to {CHAR_ITERS} iterations.",
            if attn_drop > 0.0 {
                format!(
                    " (dropout {attn_drop} also on the attention probabilities, as nanoGPT; ours \
                     does not drop those)"
                )
            } else {
                String::new()
            }
        ));
        if dtype == "f32" && t.dtype == "f32" {
            out.say(
                "note: both computed in f32 (no autocast); nanoGPT's own runs use bf16 \
                 autocast: --dtype bf16 compares with that",
            );
        }
        if !q.json {
            char_table(&ours, t).print();
        }
        out.put("torch", t.doc.clone());
        out.put("peak_allocated_bytes", json!(peak_alloc));
    }
    out.put("config", json!("shakespeare-char"));
    out.put("dtype", json!(dtype));
    out.put("iterations", json!(done));
    out.put("train_seconds", json!(train_seconds));
    out.put("eval_seconds", json!(eval_seconds));
    out.put("tokens_per_s", json!(tokens_per_s));
    out.put("final_train_loss", json!(last.train));
    out.put("final_val_loss", json!(last.val));
    out.put("curves", curves.json());
    out.finish();
    Ok(())
}
