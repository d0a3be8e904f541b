//! `attention_bench`: fused scaled-dot-product attention and the transformer's row ops
//! (LayerNorm, GELU, embedding, the fused classifier) against PyTorch on the same GPU, in the
//! same run.
//!
//! - **Attention**, bf16, causal and full, forward and forward+backward, at (B, H, N, D) =
//!   (16, 16, 512, 64), (16, 16, 1024, 64), (16, 16, 1024, 128), (8, 16, 2048, 128),
//!   (4, 16, 4096, 128), (1, 16, 16384, 128) and the odd (2, 12, 4097, 64), against
//!   `torch.nn.functional.scaled_dot_product_attention` (the backend PyTorch picked is printed).
//!   TFLOP/s count `4·B·H·N²·D`, halved when causal; forward+backward 3.5× that.
//!   Targets: ≥ 0.9× PyTorch in the geometric mean, ≥ 0.8× at every case. Reported beside
//!   them, no target: (2, 16, 8192, 128), where `Auto`'s backward at D = 128 starts taking the
//!   ordered one pass (full attention).
//! - **The f32 path** (the CUDA cores; PyTorch runs its `efficient` backend there), forward and
//!   forward+backward at (1, 16, 4096, 64) and (1, 16, 4096, 128), causal and full: reported, no
//!   target.
//! - **Seed 002's chain** (`softmax(Q·Kᵀ·scale)·V` as separate Tensor ops, as
//!   `attention_chain` walks through) against the fused op at N = 4096, f32 and bf16: the fused op
//!   ≥ 5× faster.
//! - **LayerNorm, GELU, embedding** (forward; backward from saved results), f32 and bf16, in
//!   GB/s of the least traffic (each input read once, each output written once): ≥ 0.95×
//!   PyTorch; **the fused classifier** (logits → loss and dlogits) against `F.cross_entropy`
//!   forward + its gradient at vocabulary 50257: ≥ 1.5×.
//!
//! Times: CUDA events around back-to-back calls on one stream, median of trials, after a
//! warm-up and, for the attention cases, 1 s of untimed calls (`Case::settle_secs`: each case is
//! timed at the clock the GPU's power cap sets for it, not at what the case before left);
//! PyTorch's side (`tools/torch_attention.py`) times the same way. Both sides time the attention
//! cases a second way too: one call captured into a CUDA graph and replayed (the GPU's time
//! without the host side, which at 16 × 16 × 512 × 64 moved PyTorch's eager fwd+bwd between 217
//! and 537 µs from run to run on one H200). An attention case's ratio is the lower of the eager
//! ratio and the graph ratio, so neither side's host cost can carry a case.
//!
//! Run: `cargo run --release -p cuda-examples --bin attention_bench -- [--quick] [--torch-run]
//! [--torch FILE] [--filter TEXT] [--device N] [--json] [--bwd-dq auto|atomic|separate|ordered]`;
//! `--cases` prints the case list as JSON for running the script by hand. `--bwd-dq` picks how
//! the tensor-core backward computes dq (it sets `CUDA_STACK_ATTN_BWD_DQ` for the run): `atomic`
//! is the fused one-pass backward (dq added in f32 in whatever order the tiles finish: on
//! compute capability 9.0 the wgmma one, `attn_bwd_fused_wgmma_*`, elsewhere the mma.sync
//! one), `ordered` the wgmma one pass with the adds in key-tile order (deterministic; compute
//! capability 9.0 only), `separate` the deterministic two-kernel one, `auto` (the default)
//! leaves the choice to `cuda_stack_kernels::ops::attention_bwd_dq_choice` (or to the variable,
//! when already set). Compare them with `--filter sdpa` run once each way on the same machine.

use clap::Parser;
use cuda_examples::cli::Common;
use cuda_examples::exit::{self, ProgramResult};
use cuda_examples::say;
use std::path::PathBuf;
use std::process::ExitCode;

#[path = "../attention_bench/mod.rs"]
mod ab;

#[derive(Parser)]
#[command(
    about = "Fused attention, LayerNorm, GELU, embedding and the fused classifier against \
                   PyTorch in the same run"
)]
struct Args {
    #[command(flatten)]
    common: Common,
    /// Run tools/torch_attention.py on the same cases after ours (same GPU, same session).
    #[arg(long)]
    torch_run: bool,
    /// The script `--torch-run` runs.
    #[arg(long, default_value = "tools/torch_attention.py")]
    torch_script: PathBuf,
    /// PyTorch's figures from an earlier `python3 tools/torch_attention.py cases.json`.
    #[arg(long)]
    torch: Option<PathBuf>,
    /// Print the case list as JSON (the script's input) and exit.
    #[arg(long)]
    cases: bool,
    /// Only cases whose id contains this text.
    #[arg(long)]
    filter: Option<String>,
    /// How the tensor-core attention backward computes dq.
    #[arg(long, value_enum, default_value_t = BwdDq::Auto)]
    bwd_dq: BwdDq,
    /// Which kernels run the forward (`CUDA_STACK_ATTN_FWD` for this run): the automatic choice,
    /// the Hopper wgmma kernels, or the mma.sync ones.
    #[arg(long, value_enum, default_value_t = FwdKernel::Auto)]
    fwd: FwdKernel,
}

/// `--fwd`: the value of `CUDA_STACK_ATTN_FWD` for this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FwdKernel {
    /// wgmma where it fits (compute capability 9.0), else mma.sync (or the variable, when set).
    Auto,
    /// The wgmma kernels (TMA, warpgroup MMA).
    Wgmma,
    /// The mma.sync kernels.
    Mma,
}

/// `--bwd-dq`: the value of `CUDA_STACK_ATTN_BWD_DQ` for this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BwdDq {
    /// The shape rule (or the variable, when already set).
    Auto,
    /// The fused backward, dq added into f32 with atomics (not bitwise reproducible).
    Atomic,
    /// dq by its own kernel (deterministic).
    Separate,
    /// The fused backward with dq's adds in key-tile order (deterministic; wgmma only).
    Ordered,
}

fn main() -> ExitCode {
    exit::run("attention_bench", || body(Args::parse()))
}

fn body(args: Args) -> ProgramResult {
    let env = cuda_stack_kernels::ops::ATTENTION_BWD_DQ_ENV;
    match args.bwd_dq {
        BwdDq::Auto => {}
        // Set before any other thread exists (the GPU work starts below).
        BwdDq::Atomic => std::env::set_var(env, "atomic"),
        BwdDq::Separate => std::env::set_var(env, "separate"),
        BwdDq::Ordered => std::env::set_var(env, "ordered"),
    }
    let fwd_env = cuda_stack_kernels::ops::ATTENTION_FWD_ENV;
    match args.fwd {
        FwdKernel::Auto => {}
        FwdKernel::Wgmma => std::env::set_var(fwd_env, "wgmma"),
        FwdKernel::Mma => std::env::set_var(fwd_env, "mma"),
    }
    let quick = args.common.quick;
    let device = args.common.device;
    let mut cases = ab::cases::all(quick);
    if let Some(f) = &args.filter {
        cases.retain(|c| c.id().contains(f.as_str()));
    }
    if args.cases {
        let v: Vec<_> = cases.iter().map(|c| c.to_json(device, quick)).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let q = args.common.json;
    say!(
        q,
        "attention_bench: {} cases{} on GPU {device}; forward: {}; backward dq: {}; {}",
        cases.len(),
        if quick { " (--quick)" } else { "" },
        std::env::var(fwd_env).unwrap_or_else(|_| "auto".into()),
        std::env::var(env).unwrap_or_else(|_| "auto (shape rule)".into()),
        if quick {
            "no settling".to_string()
        } else {
            format!(
                "each attention case settles {} s before its trials, on both sides",
                ab::cases::SETTLE_SECS
            )
        }
    );
    let ours = ab::measure(&cases, device, quick)?;
    let torch = if let Some(p) = &args.torch {
        Some(ab::torch::TorchSide::load(p)?)
    } else if args.torch_run {
        match ab::torch::TorchSide::run(&args.torch_script, &cases, device, quick) {
            Ok(t) => Some(t),
            Err(e) => {
                say!(q, "PyTorch not measured: {e}");
                None
            }
        }
    } else {
        None
    };
    if let Some(t) = &torch {
        say!(q, "PyTorch {} on {}", t.version, t.device);
    }
    let rows: Vec<ab::Row> = cases
        .into_iter()
        .zip(ours)
        .map(|(case, ours)| {
            let torch = torch
                .as_ref()
                .and_then(|t| t.cases.get(&case.id()).cloned());
            ab::Row {
                case,
                ours: ours.0,
                ours_graph: ours.1,
                torch,
            }
        })
        .collect();
    let (text, doc) = ab::report(&rows, torch.as_ref());
    if q {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{text}");
    }
    Ok(())
}
