//! `train_gpt`'s parts: the flags, and one file per run — the step-for-step check against
//! PyTorch (`check`), nanoGPT's `shakespeare-char` training (`char_run`), the GPT-2 124M
//! throughput and memory run (`throughput`) and its data-parallel form on several GPUs
//! (`data_parallel`, `--gpus N`); PyTorch's speed beside ours (`--torch FILE`,
//! `--torch-run`: [`TorchPlan`], `cuda_examples::gpt::torch_bench`).

pub mod char_run;
pub mod check;
pub mod data_parallel;
pub mod throughput;

use cuda_examples::cli::Common;
use cuda_examples::exit::ProgramResult;
use cuda_examples::gpt::torch_bench::{TorchGpt, TorchRequest};
use cuda_examples::output::Out;
use cuda_stack_runtime::cuda_stack_driver::half::bf16;
use std::path::PathBuf;

/// The committed corpus: tiny-shakespeare (see `examples/data/README.md`).
pub const TINY_SHAKESPEARE: &str = include_str!("../../data/tinyshakespeare.txt");

/// Which run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ConfigName {
    /// nanoGPT's character-level Shakespeare model, trained to convergence.
    ShakespeareChar,
    /// GPT-2 124M on synthetic tokens: throughput, MFU and peak memory.
    #[value(name = "gpt2-124m")]
    Gpt2124m,
}

/// The compute dtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Dtype {
    /// Everything in f32.
    F32,
    /// bf16 activations and matmuls, f32 master weights and optimizer state.
    Bf16,
}

/// How the GPT's MLPs run ([`cuda_examples::gpt::Gpt::set_fused_mlp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MlpMode {
    /// One op, `Var::mlp_gelu`: GELU in cuBLASLt's GEMM epilogues (bf16/f16).
    Fused,
    /// The chain linear → gelu → linear.
    Chain,
}

impl MlpMode {
    /// Whether this is [`MlpMode::Fused`].
    pub fn fused(self) -> bool {
        self == MlpMode::Fused
    }
}

/// Whether the training step runs as a captured CUDA graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphMode {
    /// Captured where the step can be: the model has no dropout (gpt2-124m), since dropout's
    /// mask position advances on the host and a replay would repeat the captured mask.
    Auto,
    /// Captured (an error for a model with dropout).
    On,
    /// Every step eager.
    Off,
}

impl GraphMode {
    /// Whether to capture a model with this dropout.
    pub fn wanted(self, dropout: f64) -> bool {
        match self {
            GraphMode::Auto => dropout == 0.0,
            GraphMode::On => true,
            GraphMode::Off => false,
        }
    }
}

/// The flags.
#[derive(clap::Parser)]
#[command(
    about = "nanoGPT's GPT on the crates: shakespeare-char training, GPT-2 124M \
                   throughput, and a step-for-step check against PyTorch"
)]
pub struct Args {
    #[command(flatten)]
    pub common: Common,
    /// The run: nanoGPT's `shakespeare-char` training or the `gpt2-124m` throughput run.
    #[arg(long, value_enum, default_value_t = ConfigName::ShakespeareChar)]
    pub config: ConfigName,
    /// Instead of training, compare with PyTorch: the folder `tools/torch_gpt.py --out` wrote.
    #[arg(long)]
    pub check: Option<PathBuf>,
    /// --check: relative tolerance of the step-0 loss (default 1e-5 in f32, 1e-2 in bf16).
    #[arg(long)]
    pub loss_tol: Option<f64>,
    /// --check: tolerance of each gradient, relative to the parameter's largest |gradient|
    /// (default 1e-3 in f32, 5e-2 in bf16).
    #[arg(long)]
    pub grad_tol: Option<f64>,
    /// --check: relative tolerance of the later steps' losses (default 1e-4 in f32, 2e-2 in
    /// bf16).
    #[arg(long)]
    pub steps_tol: Option<f64>,
    /// The corpus, a UTF-8 text file (default: the committed tiny-shakespeare).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Where the loss curves (SVG, CSV, JSON), the checkpoint and the sample go.
    #[arg(long, default_value = "target/train_gpt")]
    pub out: PathBuf,
    /// Training iterations (shakespeare-char: 5000, the learning rate's decay ending there).
    #[arg(long)]
    pub iters: Option<usize>,
    /// The iteration the learning rate's cosine decay ends at (default: --iters when given,
    /// else 5000). Set it to the whole run's length when a run is split with --resume.
    #[arg(long)]
    pub lr_decay_iters: Option<usize>,
    /// Evaluate every this many iterations (and at the end).
    #[arg(long, default_value_t = 250)]
    pub eval_interval: usize,
    /// Batches of each split per evaluation.
    #[arg(long, default_value_t = 200)]
    pub eval_iters: usize,
    /// Read the training loss back (and update the progress bar) every this many iterations.
    #[arg(long, default_value_t = 10)]
    pub log_interval: usize,
    /// Sequences per micro-batch (shakespeare-char: 64; gpt2-124m: 16).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Micro-batches per optimizer step (gradient accumulation).
    #[arg(long, default_value_t = 1)]
    pub grad_accum: usize,
    /// Compute dtype (shakespeare-char: f32; gpt2-124m: bf16). Parameters and AdamW's state
    /// are f32 either way.
    #[arg(long, value_enum)]
    pub dtype: Option<Dtype>,
    /// Seed of the initial weights, the batches, dropout and sampling.
    #[arg(long, default_value_t = 1337)]
    pub seed: u64,
    /// Characters to sample at the end (0: none).
    #[arg(long, default_value_t = 500)]
    pub sample_tokens: usize,
    /// Sampling keeps the top-k logits.
    #[arg(long, default_value_t = 200)]
    pub top_k: usize,
    /// Sampling temperature (0: greedy).
    #[arg(long, default_value_t = 0.8)]
    pub temperature: f64,
    /// The text the sample starts from.
    #[arg(long, default_value = "\n")]
    pub start: String,
    /// Start from this checkpoint (weights and iteration; AdamW's moments start at zero).
    #[arg(long)]
    pub resume: Option<PathBuf>,
    /// How each block's MLP runs: `fused`, the one op `Var::mlp_gelu` (in bf16, GELU in the
    /// epilogue of `c_fc`'s GEMM and GELU's derivative in the epilogue of `c_proj`'s `dY · W`
    /// GEMM), or `chain`, the ops linear → gelu → linear, to compare. GPT-2 124M on an H200 at
    /// batch 16: 32.87 ms a step fused against 33.41 for the chain (same run). f32 runs the same
    /// ops either way.
    #[arg(long, value_enum, default_value_t = MlpMode::Fused)]
    pub mlp: MlpMode,
    /// The training step as one captured CUDA graph (`cuda_stack_nn::CapturedStep`), replayed
    /// with the batch copied in place and the scheduled rate written into the graph's AdamW
    /// nodes; captured after the first eager step (gpt2-124m: after the warm-up steps). `auto`:
    /// where the model has no dropout (gpt2-124m yes, shakespeare-char's dropout 0.2 no); `off`
    /// runs every step eagerly, to compare.
    #[arg(long, value_enum, default_value_t = GraphMode::Auto)]
    pub graph: GraphMode,
    /// gpt2-124m: timed steps.
    #[arg(long, default_value_t = 20)]
    pub steps: usize,
    /// gpt2-124m: untimed steps before them (after the first).
    #[arg(long, default_value_t = 3)]
    pub warmup_steps: usize,
    /// gpt2-124m: the GPU's dense bf16 peak in TFLOP/s for MFU (default: from the device,
    /// H100 SXM / H200 989.4).
    #[arg(long)]
    pub peak_tflops: Option<f64>,
    /// PyTorch's figures for the same configuration, to print beside ours: the JSON of
    /// `python3 tools/torch_gpt_bench.py --json --config gpt2` (for gpt2-124m) or
    /// `--config shakespeare` (for shakespeare-char), from the same GPU.
    #[arg(long, conflicts_with = "torch_run")]
    pub torch: Option<PathBuf>,
    /// After our own run, run `--torch-script` (PyTorch eager and torch.compile) on the same
    /// GPU with the same configuration and batch, and print its figures beside ours. Without
    /// python3, torch or a working torch.compile our figures still stand (the reason is printed).
    #[arg(long)]
    pub torch_run: bool,
    /// The script `--torch-run` runs.
    #[arg(long, default_value = "tools/torch_gpt_bench.py")]
    pub torch_script: PathBuf,
    /// `--torch-run`: PyTorch's modes, comma-separated (eager, compile; default both, and with
    /// `--gpus N` > 1 `eager`: DistributedDataParallel around the eager module).
    #[arg(long)]
    pub torch_modes: Option<String>,
    /// gpt2-124m: train data-parallel on this many GPUs (`--device` and the ones after it),
    /// one process per GPU, each on its own `--batch` sequences (the global batch is N × batch),
    /// gradients averaged with `DataParallel`; the one-GPU run comes first for the scaling.
    /// 1 (the default): the one-GPU run alone.
    #[arg(long, default_value_t = 1)]
    pub gpus: usize,
    /// Internal: run as rank RANK of a `--gpus` run (a child process).
    #[arg(long, hide = true)]
    pub dp_rank: Option<usize>,
    /// Internal: the ranks of that run.
    #[arg(long, hide = true, default_value_t = 1)]
    pub dp_world: usize,
    /// Internal: rank 0's address for NCCL's unique id.
    #[arg(long, hide = true)]
    pub dp_addr: Option<String>,
}

impl Args {
    /// `--torch-modes`, or its default for this run.
    pub fn torch_modes(&self) -> String {
        match &self.torch_modes {
            Some(m) => m.clone(),
            None if self.gpus > 1 => "eager".into(),
            None => "eager,compile".into(),
        }
    }
}

/// PyTorch's side as the flags ask for it.
pub enum TorchPlan {
    /// Neither `--torch` nor `--torch-run`.
    None,
    /// `--torch FILE`, read (and checked) before our run.
    File(TorchGpt),
    /// `--torch-run`: the script runs after ours.
    Run,
}

impl TorchPlan {
    /// Reads `--torch FILE` for `config` (`gpt2` or `shakespeare`) now, so a wrong file is an
    /// error before the GPU work, not after it.
    pub fn new(a: &Args, config: &str) -> Result<TorchPlan, String> {
        Ok(match (&a.torch, a.torch_run) {
            (Some(p), _) => TorchPlan::File(TorchGpt::load(p, config)?),
            (None, true) => TorchPlan::Run,
            (None, false) => TorchPlan::None,
        })
    }

    /// PyTorch's figures: the file's, or the script's run with `req` (our GPU memory must be
    /// given back first). A failed run is not an error: why is printed (and put in the JSON as
    /// `torch_error`) and there are no figures.
    pub fn figures(self, req: impl FnOnce() -> TorchRequest, out: &mut Out) -> Option<TorchGpt> {
        match self {
            TorchPlan::None => None,
            TorchPlan::File(t) => Some(t),
            TorchPlan::Run => {
                let req = req();
                out.say(format!(
                    "\nPyTorch: python3 {} (eager and torch.compile: a minute or so) ...",
                    req.args().join(" ")
                ));
                match req.run() {
                    Ok(t) => Some(t),
                    Err(e) => {
                        out.say(format!(
                            "PyTorch not measured: {e}. Our figures above stand alone."
                        ));
                        out.put("torch_error", serde_json::json!(e));
                        None
                    }
                }
            }
        }
    }
}

/// Runs what the flags ask for.
pub fn run(a: Args) -> ProgramResult {
    if let Some(rank) = a.dp_rank {
        return match a.dtype {
            None | Some(Dtype::Bf16) => data_parallel::worker::<bf16>(&a, rank),
            Some(Dtype::F32) => data_parallel::worker::<f32>(&a, rank),
        };
    }
    if a.gpus != 1 {
        return data_parallel::run(&a);
    }
    if let Some(dir) = &a.check {
        return match a.dtype {
            None | Some(Dtype::F32) => check::run::<f32>(&a, dir),
            Some(Dtype::Bf16) => check::run::<bf16>(&a, dir),
        };
    }
    match (a.config, a.dtype) {
        (ConfigName::ShakespeareChar, None | Some(Dtype::F32)) => char_run::run::<f32>(&a),
        (ConfigName::ShakespeareChar, Some(Dtype::Bf16)) => char_run::run::<bf16>(&a),
        (ConfigName::Gpt2124m, None | Some(Dtype::Bf16)) => throughput::run::<bf16>(&a),
        (ConfigName::Gpt2124m, Some(Dtype::F32)) => throughput::run::<f32>(&a),
    }
}
