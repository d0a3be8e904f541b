//! `transformer_ops_bench`: the transformer's non-attention kernels (LayerNorm, GELU, the fused
//! classifier, embedding, dropout) at GPT-2 sizes, in µs and effective GB/s, against the
//! physical limit: the driver's device-to-device copy measured in the same run. PyTorch's side
//! of the same ops (through `Tensor`, in the same run) is `attention_bench`'s.
//!
//! Effective bytes count each tensor the op must touch once (e.g. LayerNorm forward: read x,
//! write y; the classifier: read the logits, write dlogits). Medians of 20 timed calls after a
//! warm-up.
//!
//! `linear_bwd_*` (issue 33): a linear layer's weight and bias gradients, `dW = dYᵀ·X` and
//! `db = Σ_rows dY`, in bf16 at GPT-2 124M's four shapes (16384 tokens; C = 768 → 2304, 768,
//! 3072 and 3072 → 768): `gemm` is the weight gradient alone on `cublasGemmEx`, `lt` alone on
//! cuBLASLt, `lt_bgrad` with the bias gradient in its epilogue (`Blas::matmul_bgrad`), and
//! `tensor_separate` / `tensor_fused` are `Tensor::linear_weight_grad_with` (what `Var::linear`'s
//! backward runs) on the two paths `CUDA_STACK_LINEAR_BGRAD` selects. A note says where cuBLASLt
//! has no algorithm with the epilogue (the fused row then times the fallback). Bytes: read dY
//! and X, write dW. Only these rows: `--filter linear`.

use clap::Parser;
use cuda_examples::timing::gpu_time;
use cuda_stack_blas::{Blas, Epilogue, Gemm, Transpose};
use cuda_stack_driver::half::bf16;
use cuda_stack_driver::{Context, DeviceBuffer, DeviceRepr, Stream};
use cuda_stack_kernels::{ops, Element, Kernels};
use std::error::Error;

/// Time the transformer kernels against the D2D copy (and PyTorch).
#[derive(Debug, Parser)]
#[command(name = "transformer_ops_bench", version)]
struct Args {
    #[command(flatten)]
    common: cuda_examples::cli::Common,
    /// Run only the sections whose name contains this (`layer_norm`, `gelu`, `classifier`,
    /// `embedding`, `linear_bwd`).
    #[arg(long)]
    filter: Option<String>,
}

type Res<T> = Result<T, Box<dyn Error>>;

struct Row {
    name: String,
    secs: f64,
    bytes: f64,
}

fn buf<T: Element>(s: &Stream, n: usize, v: f64) -> Res<DeviceBuffer<T>> {
    let host: Vec<T> = (0..n)
        .map(|i| T::from_f64(v * (((i * 2_654_435_761) % 1000) as f64 / 500.0 - 1.0)))
        .collect();
    Ok(s.clone_htod(&host)?)
}

fn zeros<T: DeviceRepr>(s: &Stream, n: usize) -> Res<DeviceBuffer<T>> {
    Ok(s.alloc_zeros::<T>(n)?)
}

fn layer_norm<T: Element>(
    ctx: &Context,
    s: &Stream,
    k: &Kernels,
    rows: usize,
    cols: usize,
    reps: usize,
    out: &mut Vec<Row>,
) -> Res<()> {
    let n = rows * cols;
    let (x, w, b, dy) = (
        buf::<T>(s, n, 2.0)?,
        buf::<T>(s, cols, 1.0)?,
        buf::<T>(s, cols, 0.5)?,
        buf::<T>(s, n, 1.0)?,
    );
    let mut y = zeros::<T>(s, n)?;
    let mut mean = zeros::<T::Scalar>(s, rows)?;
    let mut rstd = zeros::<T::Scalar>(s, rows)?;
    let eps = <T::Scalar as cuda_stack_kernels::Compute>::of_f64(1e-5);
    let t = gpu_time(ctx, s, reps, 5, |s| {
        ops::layer_norm_fwd::<T>(
            k, s, &x, &w, &b, &mut y, &mut mean, &mut rstd, rows, cols, eps,
        )
    })?;
    let sz = std::mem::size_of::<T>() as f64;
    let dt = T::DTYPE;
    out.push(Row {
        name: format!("layer_norm_fwd_{dt}_{rows}x{cols}"),
        secs: t,
        bytes: 2.0 * n as f64 * sz,
    });
    let ws = ops::layer_norm_workspace_len(rows, cols)?;
    let (mut dx, mut dw, mut db) = (
        zeros::<T>(s, n)?,
        zeros::<T>(s, cols)?,
        zeros::<T>(s, cols)?,
    );
    let (mut pw, mut pb) = (zeros::<T::Scalar>(s, ws)?, zeros::<T::Scalar>(s, ws)?);
    let t = gpu_time(ctx, s, reps, 5, |s| {
        ops::layer_norm_bwd::<T>(
            k, s, &x, &w, &mean, &rstd, &dy, &mut dx, &mut dw, &mut db, &mut pw, &mut pb, rows,
            cols,
        )
    })?;
    out.push(Row {
        name: format!("layer_norm_bwd_{dt}_{rows}x{cols}"),
        secs: t,
        bytes: 3.0 * n as f64 * sz,
    });
    Ok(())
}

fn gelu<T: Element>(
    ctx: &Context,
    s: &Stream,
    k: &Kernels,
    n: usize,
    reps: usize,
    out: &mut Vec<Row>,
) -> Res<()> {
    let (x, dy) = (buf::<T>(s, n, 4.0)?, buf::<T>(s, n, 1.0)?);
    let (mut y, mut dx) = (zeros::<T>(s, n)?, zeros::<T>(s, n)?);
    let sz = std::mem::size_of::<T>() as f64;
    let dt = T::DTYPE;
    let t = gpu_time(ctx, s, reps, 5, |s| ops::gelu_fwd::<T>(k, s, &x, &mut y))?;
    out.push(Row {
        name: format!("gelu_fwd_{dt}_{n}"),
        secs: t,
        bytes: 2.0 * n as f64 * sz,
    });
    let t = gpu_time(ctx, s, reps, 5, |s| {
        ops::gelu_bwd::<T>(k, s, &x, &dy, &mut dx)
    })?;
    out.push(Row {
        name: format!("gelu_bwd_{dt}_{n}"),
        secs: t,
        bytes: 3.0 * n as f64 * sz,
    });
    let mut d = zeros::<T>(s, n)?;
    let t = gpu_time(ctx, s, reps, 5, |s| {
        ops::dropout::<T>(k, s, &x, &mut d, 0.1, 7, 0)
    })?;
    out.push(Row {
        name: format!("dropout_{dt}_{n}"),
        secs: t,
        bytes: 2.0 * n as f64 * sz,
    });
    Ok(())
}

fn classifier(
    ctx: &Context,
    s: &Stream,
    k: &Kernels,
    rows: usize,
    vocab: usize,
    reps: usize,
    out: &mut Vec<Row>,
) -> Res<()> {
    let n = rows * vocab;
    let logits = buf::<f32>(s, n, 4.0)?;
    let targets: Vec<i32> = (0..rows).map(|r| ((r * 7919) % vocab) as i32).collect();
    let t_dev = s.clone_htod(&targets)?;
    let g = s.clone_htod(&[1.0f32])?;
    let mut loss = zeros::<f32>(s, rows)?;
    let mut dl = zeros::<f32>(s, n)?;
    let scale = 1.0 / rows as f32;
    let t = gpu_time(ctx, s, reps, 3, |s| {
        ops::fused_classifier::<f32>(
            k, s, &logits, &t_dev, &g, &mut loss, &mut dl, rows, vocab, scale,
        )
    })?;
    out.push(Row {
        name: format!("fused_classifier_f32_{rows}x{vocab}"),
        secs: t,
        bytes: 2.0 * n as f64 * 4.0,
    });
    let t = gpu_time(ctx, s, reps, 3, |s| {
        ops::classifier_loss::<f32>(k, s, &logits, &t_dev, &mut loss, rows, vocab)
    })?;
    out.push(Row {
        name: format!("classifier_loss_f32_{rows}x{vocab}"),
        secs: t,
        bytes: n as f64 * 4.0,
    });
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn embedding(
    ctx: &Context,
    s: &Stream,
    k: &Kernels,
    vocab: usize,
    cols: usize,
    tokens: usize,
    reps: usize,
    out: &mut Vec<Row>,
) -> Res<()> {
    let w = buf::<f32>(s, vocab * cols, 0.02)?;
    let ids: Vec<i32> = (0..tokens)
        .map(|i| ((i * 2_654_435_761usize) % vocab) as i32)
        .collect();
    let ids = s.clone_htod(&ids)?;
    let mut o = zeros::<f32>(s, tokens * cols)?;
    let t = gpu_time(ctx, s, reps, 5, |s| {
        ops::embedding_fwd::<f32>(k, s, &w, &ids, &mut o, tokens, vocab, cols)
    })?;
    out.push(Row {
        name: format!("embedding_fwd_f32_V{vocab}_C{cols}_N{tokens}"),
        secs: t,
        bytes: 2.0 * (tokens * cols) as f64 * 4.0,
    });
    let dy = buf::<f32>(s, tokens * cols, 1.0)?;
    let mut dw = zeros::<f32>(s, vocab * cols)?;
    let mut ws = zeros::<i32>(s, ops::embedding_workspace_len(tokens, vocab)?)?;
    let t = gpu_time(ctx, s, reps, 3, |s| {
        ops::embedding_bwd::<f32>(k, s, &ids, &dy, &mut dw, &mut ws, tokens, vocab, cols)
    })?;
    out.push(Row {
        name: format!("embedding_bwd_f32_V{vocab}_C{cols}_N{tokens}"),
        secs: t,
        bytes: ((tokens + vocab) * cols) as f64 * 4.0,
    });
    Ok(())
}

/// The weight and bias gradients of a linear layer `[tokens, in] -> [tokens, out]` in bf16 (see
/// the module docs for the rows).
fn linear_bwd(
    ctx: &Context,
    s: &Stream,
    device: usize,
    (tokens, in_f, out_f): (usize, usize, usize),
    reps: usize,
    out: &mut Vec<Row>,
) -> Res<()> {
    use cuda_stack_runtime::tensor::{LinearBiasGrad, Tensor};
    let name = |what: &str| format!("linear_bwd_bf16_N{tokens}_{in_f}to{out_f}_{what}");
    let bytes = 2.0 * (tokens * (in_f + out_f) + in_f * out_f) as f64;
    let blas = Blas::get(ctx)?;
    let dy = buf::<bf16>(s, tokens * out_f, 1.0)?;
    let x = buf::<bf16>(s, tokens * in_f, 1.0)?;
    let mut dw = zeros::<bf16>(s, out_f * in_f)?;
    let mut db = zeros::<bf16>(s, out_f)?;
    // dW [out, in] = ([tokens, out] read transposed) · [tokens, in].
    let g = Gemm::new(out_f, in_f, tokens).trans_a(Transpose::Yes);
    let t = gpu_time(ctx, s, reps, 3, |s| blas.gemm(s, &g, &dy, &x, &mut dw))?;
    out.push(Row {
        name: name("gemm"),
        secs: t,
        bytes,
    });
    let t = gpu_time(ctx, s, reps, 3, |s| {
        blas.matmul(s, &g, Epilogue::None, &dy, &x, None, &mut dw)
    })?;
    out.push(Row {
        name: name("lt"),
        secs: t,
        bytes,
    });
    match blas.matmul_bgrad(s, &g, Epilogue::BGradA, &dy, &x, &mut db, &mut dw) {
        Ok(()) => {
            let t = gpu_time(ctx, s, reps, 3, |s| {
                blas.matmul_bgrad(s, &g, Epilogue::BGradA, &dy, &x, &mut db, &mut dw)
            })?;
            out.push(Row {
                name: name("lt_bgrad"),
                secs: t,
                bytes,
            });
        }
        Err(e) => eprintln!(
            "note: {}: no fused bias gradient ({e}); tensor_fused times the fallback",
            name("lt_bgrad")
        ),
    }
    // The same through Tensor, on the runtime's stream for this device.
    cuda_stack_runtime::set_device(device)?;
    let ts = cuda_stack_runtime::stream_for(device)?;
    let gt = Tensor::<f32>::randn(&[tokens, out_f], 1)?.to_dtype::<bf16>()?;
    let xt = Tensor::<f32>::randn(&[tokens, in_f], 2)?.to_dtype::<bf16>()?;
    for (how, what) in [
        (LinearBiasGrad::Separate, "tensor_separate"),
        (LinearBiasGrad::Fused, "tensor_fused"),
    ] {
        let t = gpu_time(ctx, &ts, reps, 3, |_| {
            gt.linear_weight_grad_with(&xt, true, how).map(|_| ())
        })?;
        out.push(Row {
            name: name(what),
            secs: t,
            bytes,
        });
    }
    Ok(())
}

fn main() -> Res<()> {
    let a = Args::parse();
    let ctx = Context::new(a.common.device)?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let reps = a.common.pick(3, 20);
    let mut rows = Vec::new();

    // The device-to-device copy of 256 MiB: the bandwidth reference.
    let copy_n = a.common.pick(1 << 20, 1 << 26);
    let src = zeros::<f32>(&s, copy_n)?;
    let mut dst = zeros::<f32>(&s, copy_n)?;
    let t = gpu_time(&ctx, &s, reps, 3, |s| s.memcpy_dtod(&src, &mut dst))?;
    let copy_gbs = 2.0 * copy_n as f64 * 4.0 / t / 1e9;

    let on = |section: &str| a.filter.as_deref().is_none_or(|f| section.contains(f));
    if on("layer_norm") {
        let (r, c) = a.common.pick((512, 768), (8192, 768));
        layer_norm::<f32>(&ctx, &s, &k, r, c, reps, &mut rows)?;
        layer_norm::<bf16>(&ctx, &s, &k, r, c, reps, &mut rows)?;
        let (r2, c2) = a.common.pick((64, 4096), (4096, 4096));
        layer_norm::<f32>(&ctx, &s, &k, r2, c2, reps, &mut rows)?;
    }
    if on("gelu") {
        let n = a.common.pick(1 << 20, 8192 * 3072);
        gelu::<f32>(&ctx, &s, &k, n, reps, &mut rows)?;
        gelu::<bf16>(&ctx, &s, &k, n, reps, &mut rows)?;
    }
    if on("classifier") {
        let cr = a.common.pick(64, 8192);
        classifier(&ctx, &s, &k, cr, 50257, reps, &mut rows)?;
    }
    if on("embedding") {
        let tokens = a.common.pick(1024, 8192);
        embedding(&ctx, &s, &k, 50304, 768, tokens, reps, &mut rows)?;
        embedding(
            &ctx,
            &s,
            &k,
            65,
            384,
            a.common.pick(2048, 16384),
            reps,
            &mut rows,
        )?;
    }
    if on("linear_bwd") {
        // GPT-2 124M: c_attn 768 -> 2304, attn c_proj 768 -> 768, c_fc 768 -> 3072, mlp c_proj
        // 3072 -> 768, over 16384 tokens (batch 16 × 1024).
        let tokens = a.common.pick(1024, 16384);
        for (in_f, out_f) in [(768, 2304), (768, 768), (768, 3072), (3072, 768)] {
            linear_bwd(
                &ctx,
                &s,
                a.common.device,
                (tokens, in_f, out_f),
                reps,
                &mut rows,
            )?;
        }
    }

    if a.common.json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "op": r.name, "seconds": r.secs, "gbs": r.bytes / r.secs / 1e9,
                })
            })
            .collect();
        println!("{}", serde_json::json!({ "copy_gbs": copy_gbs, "ops": v }));
        return Ok(());
    }
    println!("device-to-device copy: {copy_gbs:.0} GB/s");
    println!("{:<52} {:>10} {:>9} {:>7}", "op", "µs", "GB/s", "% copy");
    for r in &rows {
        let gbs = r.bytes / r.secs / 1e9;
        println!(
            "{:<52} {:>10.1} {:>9.0} {:>6.0}%",
            r.name,
            r.secs * 1e6,
            gbs,
            100.0 * gbs / copy_gbs
        );
    }
    Ok(())
}
