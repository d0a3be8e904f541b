//! `train_gpt --config gpt2-124m`: GPT-2 124M training steps on synthetic tokens — the memory
//! the step needs (estimated before anything is allocated), the time to the first step,
//! tokens/s, model FLOPs utilisation and the caching allocator's peak.

use super::{Args, TorchPlan};
use cuda_examples::bench::Table;
use cuda_examples::exit::ProgramResult;
use cuda_examples::gpt::torch_bench::{
    describe, gpt2_table, gpt2_targets, OursGpt2, Target, TorchRequest,
};
use cuda_examples::gpt::{
    bf16_dense_peak, flops_per_token, Gpt, GptConfig, MemoryEstimate, TrainConfig, Trainer,
};
use cuda_examples::output::Out;
use cuda_stack_nn::GradElement;
use cuda_stack_runtime::caching::format_bytes;
use cuda_stack_runtime::cuda_stack_driver::Context;
use cuda_stack_runtime::{self as rt, AttentionElement, Tensor};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde_json::json;
use std::time::Instant;

/// GPT-2's real vocabulary (the model's 50304 rows are padded): synthetic tokens come from it.
pub const GPT2_VOCAB: usize = 50257;

/// Why `est` does not fit in `free` bytes, with the largest batch that would.
pub fn does_not_fit(
    est: &MemoryEstimate,
    cfg: &GptConfig,
    batch: usize,
    dtype: &str,
    bytes: usize,
    (free, total): (usize, usize),
    device: &str,
) -> String {
    let fits = (1..batch)
        .rev()
        .find(|&b| MemoryEstimate::new(cfg, b, bytes).total() <= free);
    format!(
        "gpt2-124m at batch {batch} × {} tokens in {dtype} needs about {} (parameters {}, \
         gradients {}, AdamW moments {}, {dtype} copies {}, activations {}, logits (their \
         gradient written over them) {}, workspace {}, + 10 % for the allocator's rounding), but the {device} has \
         {} free of {}: nothing was allocated. {}",
        cfg.block_size,
        format_bytes(est.total()),
        format_bytes(est.parameters),
        format_bytes(est.gradients),
        format_bytes(est.optimizer),
        format_bytes(est.compute_copies),
        format_bytes(est.activations),
        format_bytes(est.logits),
        format_bytes(est.workspace),
        format_bytes(free),
        format_bytes(total),
        match fits {
            Some(b) => format!("--batch {b} fits."),
            None => "Not even batch 1 fits.".to_string(),
        }
    )
}

/// The run, computing in `U` (bf16, or f32).
pub fn run<U: GradElement + AttentionElement + 'static>(a: &Args) -> ProgramResult {
    let q = &a.common;
    let mut out = Out::new(q.json);
    let bytes = std::mem::size_of::<U>();
    let dtype = if bytes == 4 { "f32" } else { "bf16" };
    let cfg = GptConfig::gpt2_124m();
    let batch = a.batch.unwrap_or(q.pick(4, 16));
    let steps = if q.quick { a.steps.min(3) } else { a.steps };
    let warmup = if q.quick {
        a.warmup_steps.min(1)
    } else {
        a.warmup_steps
    };
    if batch == 0 || steps == 0 || a.grad_accum == 0 {
        return Err("--batch, --steps and --grad-accum must be at least 1".into());
    }
    let torch_plan = TorchPlan::new(a, "gpt2")?;
    let t0 = Instant::now();
    // cuBLAS and cuBLASLt (about 0.7 GB of libraries) load on another thread while this one
    // makes the context and the weights: on a freshly started machine their load took 0.26 and
    // 0.43 s (H200, H100), now hidden behind the context (~0.3 s) and the weights. The first
    // GEMM waits for the load if it is still running (`Cublas::get` is a once-cell); a failure
    // is reported there, as without this thread.
    let libraries = std::thread::spawn(|| {
        let t = Instant::now();
        let _ = cuda_stack_sys::Cublas::get();
        let _ = cuda_stack_sys::CublasLt::get();
        t.elapsed().as_secs_f64()
    });
    let ctx = Context::new(q.device)?;
    let t_context = t0.elapsed().as_secs_f64();
    rt::set_device(q.device)?;
    let dev = ctx.device();
    let (name, cc, sms) = (dev.name()?, dev.compute_capability()?, dev.sm_count()?);
    let mem = ctx.mem_get_info()?;
    let est = MemoryEstimate::new(&cfg, batch, bytes);
    if est.total() > mem.0 {
        return Err(does_not_fit(&est, &cfg, batch, dtype, bytes, mem, &name).into());
    }
    let peak = a
        .peak_tflops
        .map(|t| t * 1e12)
        .or_else(|| bf16_dense_peak(cc.major, cc.minor, sms));
    out.say(format!(
        "train_gpt gpt2-124m on {name} (compute capability {cc}, {sms} SMs, {} free of {})\n\
         model 12 layers, 12 heads, 768 wide, context 1024, vocabulary 50304: {:.2}M parameters; \
         compute {dtype}, f32 weights and AdamW state (β 0.9/0.95, weight decay 0.1 on \
         matrices, clip 1.0)\nbatch {batch} × {} micro-batch(es) × 1024 synthetic tokens \
         (uniform over GPT-2's 50257); {warmup} warm-up steps, {steps} timed; memory needed: \
         about {}",
        format_bytes(mem.0),
        format_bytes(mem.1),
        cfg.parameter_count() as f64 / 1e6,
        a.grad_accum,
        format_bytes(est.total())
    ));

    let model = Gpt::<f32>::new(cfg, a.seed)?;
    model.set_fused_mlp(a.mlp.fused());
    let mut tc = TrainConfig::gpt2_124m();
    tc.batch = batch;
    tc.grad_accum = a.grad_accum;
    let mut trainer = Trainer::<U>::new(model, tc)?;
    // A few distinct batches on the device, cycled (the host makes nothing per step).
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(a.seed);
    let mut ids = || {
        let v: Vec<i32> = (0..batch * cfg.block_size)
            .map(|_| rng.random_range(0..GPT2_VOCAB) as i32)
            .collect();
        Tensor::from_vec(v, &[batch, cfg.block_size])
    };
    let data = (0..4)
        .map(|_| Ok((ids()?, ids()?)))
        .collect::<Result<Vec<_>, rt::TensorError>>()?;
    let micro = |i: usize| -> Vec<(Tensor<i32>, Tensor<i32>)> {
        (0..a.grad_accum)
            .map(|j| data[(i * a.grad_accum + j) % data.len()].clone())
            .collect()
    };
    let t_weights = t0.elapsed().as_secs_f64();
    let first = trainer.step(&micro(0))?.loss.item()?;
    let first_step = t0.elapsed().as_secs_f64();
    let t_libraries = libraries.join().unwrap_or(f64::NAN);
    for i in 0..warmup {
        trainer.step(&micro(1 + i))?;
    }
    // The step captured into one CUDA graph, then replayed once untimed (its first launch
    // uploads it).
    let mut capture_s = None;
    if a.graph.wanted(cfg.dropout) {
        rt::synchronize()?;
        let tc = Instant::now();
        match trainer.capture(&micro(1 + warmup)) {
            Ok(()) => {
                trainer.step(&micro(1 + warmup))?;
                rt::synchronize()?;
                capture_s = Some(tc.elapsed().as_secs_f64());
            }
            // `--graph auto` falls back to eager steps, saying why; `--graph on` fails.
            Err(e) if a.graph == super::GraphMode::Auto => {
                out.say(format!(
                    "note: the step could not be captured ({e}); it runs eagerly"
                ));
                out.put("graph_error", json!(e.to_string()));
            }
            Err(e) => return Err(e.into()),
        }
    }
    rt::synchronize()?;
    let t = Instant::now();
    let mut last = None;
    for i in 0..steps {
        last = Some(trainer.step(&micro(1 + warmup + i))?.loss);
    }
    rt::synchronize()?;
    let secs = t.elapsed().as_secs_f64();
    let last = last.ok_or("no timed step")?.item()?;
    let tokens = (steps * batch * a.grad_accum * cfg.block_size) as f64;
    let tokens_per_s = tokens / secs;
    let flops = flops_per_token(&cfg) * tokens_per_s;
    let mfu = peak.map(|p| flops / p);
    let (peak_alloc, peak_reserved) = (rt::max_memory_allocated()?, rt::max_memory_reserved()?);
    let graph_kernels = trainer.captured_kernels();

    let mut t = Table::new(&["figure", "value"]);
    t.row(&[
        "time to the first step (context, weights, first step)".into(),
        format!(
            "{first_step:.2} s (context {t_context:.2}, weights and AdamW state {:.2}, first \
             step {:.2}; cuBLAS loaded beside them in {t_libraries:.2})",
            t_weights - t_context,
            first_step - t_weights
        ),
    ]);
    t.row(&[
        "step".into(),
        match (graph_kernels, capture_s) {
            (Some(k), Some(c)) => format!(
                "one CUDA graph replay ({k} kernels; capture + first replay {:.2} s)",
                c
            ),
            _ => "eager (--graph off, or dropout > 0)".into(),
        },
    ]);
    t.row(&[
        "step time".into(),
        format!("{:.2} ms", secs * 1e3 / steps as f64),
    ]);
    t.row(&["tokens/s".into(), format!("{tokens_per_s:.0}")]);
    t.row(&[
        "model TFLOP/s (6·N + 12·L·C·T per token)".into(),
        format!("{:.1}", flops / 1e12),
    ]);
    t.row(&[
        "MFU (of the dense bf16 peak)".into(),
        match (mfu, peak) {
            (Some(m), Some(p)) => format!("{:.1} % of {:.1} TFLOP/s", m * 100.0, p / 1e12),
            _ => "- (peak unknown for this GPU: pass --peak-tflops)".into(),
        },
    ]);
    t.row(&[
        "peak memory allocated / reserved".into(),
        format!(
            "{} / {}",
            format_bytes(peak_alloc),
            format_bytes(peak_reserved)
        ),
    ]);
    t.row(&[
        "memory estimated before allocating".into(),
        format_bytes(est.total()),
    ]);
    t.row(&[
        "loss: first step, last timed step".into(),
        format!(
            "{first:.4}, {last:.4} (ln 50257 = {:.4})",
            (GPT2_VOCAB as f64).ln()
        ),
    ]);
    if !q.json {
        t.print();
    }
    if !(first.is_finite() && last.is_finite()) {
        return Err(format!("the loss is not finite (first {first}, last {last})").into());
    }

    // PyTorch on the same GPU, after ours: our memory goes back to the driver first.
    drop(data);
    drop(trainer);
    rt::synchronize()?;
    rt::empty_cache()?;
    let torch = torch_plan.figures(
        || TorchRequest {
            script: a.torch_script.clone(),
            config: "gpt2",
            batch,
            grad_accum: a.grad_accum,
            steps,
            warmup,
            dtype,
            tf32: bytes == 2 || rt::tensor::allow_tf32(),
            modes: a.torch_modes(),
            device: q.device,
            gpus: 1,
        },
        &mut out,
    );
    let ours = OursGpt2 {
        step_ms: secs * 1e3 / steps as f64,
        tokens_per_s,
        peak_allocated: peak_alloc as u64,
        first_step_s: first_step,
        loss_last: last as f64,
    };
    if let Some(t) = &torch {
        out.say("");
        for line in describe(t) {
            out.say(line);
        }
        for line in t.differences(batch, a.grad_accum, dtype) {
            out.say(format!("note: {line}"));
        }
        if !q.json {
            gpt2_table(&ours, t).print();
        }
        out.put("torch", t.doc.clone());
    }
    let targets = gpt2_targets(&ours, torch.as_ref());
    out.say(format!(
        "targets (issue 33; PyTorch at the same batch on the same GPU, {dtype}):"
    ));
    for t in &targets {
        out.say(format!("  {}", t.line()));
    }
    out.put(
        "targets",
        json!(targets.iter().map(Target::json).collect::<Vec<_>>()),
    );
    out.put("config", json!("gpt2-124m"));
    out.put("device", json!(name));
    out.put("dtype", json!(dtype));
    out.put("batch", json!(batch));
    out.put("grad_accum", json!(a.grad_accum));
    out.put("steps", json!(steps));
    out.put("first_step_s", json!(first_step));
    out.put("step_ms", json!(secs * 1e3 / steps as f64));
    out.put("graph", json!(graph_kernels.is_some()));
    out.put("graph_kernels", json!(graph_kernels));
    out.put("capture_s", json!(capture_s));
    out.put("tokens_per_s", json!(tokens_per_s));
    out.put("model_tflops", json!(flops / 1e12));
    out.put("mfu", json!(mfu));
    out.put("peak_allocated_bytes", json!(peak_alloc));
    out.put("peak_reserved_bytes", json!(peak_reserved));
    out.put("estimated_bytes", json!(est.total()));
    out.put("loss_first", json!(first));
    out.put("loss_last", json!(last));
    out.finish();
    Ok(())
}
