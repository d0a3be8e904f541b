//! `train_gpt`: nanoGPT's GPT on the crates (`cuda_examples::gpt`), issue 33.
//!
//! - `--config shakespeare-char` (the default): nanoGPT's character-level Shakespeare model
//!   (6 layers, 6 heads, 384 wide, context 256, dropout 0.2) trained on tiny-shakespeare
//!   (committed, `examples/data/`; `--data FILE` for another text) with nanoGPT's settings:
//!   batch 64, AdamW (lr 1e-3, β 0.9/0.99, weight decay 0.1 on matrices and embeddings only),
//!   warm-up 100 iterations then a cosine decay to 1e-4 at 5,000, clipping at 1.0,
//!   `--grad-accum` micro-batches per step, 5,000 iterations (`--iters`). A progress bar shows
//!   the loss and tokens/s; every `--eval-interval` iterations both splits are evaluated over
//!   `--eval-iters` batches with dropout off. At the end: `loss.svg` (train and validation
//!   curves), `losses.csv`, `losses.json`, `ckpt.safetensors` (the last iteration's weights,
//!   nanoGPT's names, written to a temporary name and renamed), `best.safetensors` (written at
//!   each evaluation that improves the validation loss, as nanoGPT's shakespeare_char does:
//!   the model overfits this small corpus) and `sample.txt` (from the best weights;
//!   `--sample-tokens` characters, top-k `--top-k`, `--temperature`, from `--start`, with a KV
//!   cache) in `--out`
//!   (`target/train_gpt`). `--resume FILE` starts from a checkpoint's weights and iteration
//!   (AdamW's moments start at zero; `--lr-decay-iters` keeps a split run's schedule whole).
//! - `--config gpt2-124m`: GPT-2 124M (vocabulary 50304) on synthetic random tokens, batch
//!   `--batch` (16) × 1024 in bf16 with f32 master weights and AdamW state: the memory the step
//!   needs is estimated first (refused, with the figure, if the GPU has less free); then the
//!   time to the first step, tokens/s and MFU over `--steps` steps, and the allocator's peak.
//! - `--check DIR`: the model against PyTorch step for step (see `check.rs`).
//! - `--torch-run` (either config): after our own run, `tools/torch_gpt_bench.py` runs the same
//!   configuration and batch in PyTorch on the same GPU (nanoGPT's GPT, bf16 autocast, SDPA,
//!   fused AdamW, clipping; TF32 allowed as nanoGPT), eager and `torch.compile`
//!   (`--torch-modes`), our GPU memory given back to the driver first; `--torch FILE` reads
//!   its `--json` output from an earlier run instead. One table sets ours beside both modes:
//!   gpt2-124m step time, tokens/s, peak memory (our allocator's peak against
//!   `torch.cuda.max_memory_allocated`), time to the first step, each with ours ÷ theirs, then
//!   PASS/MISS lines for the issue's targets (tokens/s ≥ 1.3× eager and ≥ 1.05× compile, peak
//!   memory ≤ compile's, first step ≤ 5 s); shakespeare-char ms per iteration, tokens/s and
//!   each side's training time projected to 5,000 iterations. PyTorch missing (no python3,
//!   no torch, a mode that fails) does not fail the run: why is printed beside our figures.
//!
//! - `--gpus N` (gpt2-124m): data-parallel on GPUs `--device` .. `--device`+N-1 with
//!   `cuda_stack_nn::DataParallel`, one process per GPU (see `train_gpt/data_parallel.rs` for
//!   why), each rank on its own `--batch` sequences (global batch N × batch), gradients
//!   averaged before clipping and AdamW; the one-GPU run comes first in the same invocation.
//!   One table: step time, global tokens/s, scaling, peak memory per GPU, loss; the replicas
//!   must end bit-identical. With `--torch-run`, PyTorch's `DistributedDataParallel` on the same
//!   GPUs, batch and dtype (`tools/torch_gpt_bench.py --gpus N`, eager unless `--torch-modes`)
//!   and a PASS/MISS line for "tokens/s ≥ 1.0× PyTorch DDP". Needs NCCL (found at run time);
//!   `NCCL_NVLS_ENABLE=0` is set for every process.
//!
//! `--dtype f32|bf16` picks the compute dtype (shakespeare-char f32, gpt2-124m bf16 by
//! default). `--quick`: 40 iterations (gpt2-124m: batch 4, 3 steps), for smoke tests.
//!
//! ```text
//! cargo run --release -p cuda-examples --bin train_gpt                       # shakespeare-char
//! cargo run --release -p cuda-examples --bin train_gpt -- --iters 500 --dtype bf16
//! cargo run --release -p cuda-examples --bin train_gpt -- --config gpt2-124m --batch 16
//! cargo run --release -p cuda-examples --bin train_gpt -- --config gpt2-124m --torch-run
//! cargo run --release -p cuda-examples --bin train_gpt -- --config gpt2-124m --gpus 2 --torch-run
//! cargo run --release -p cuda-examples --bin train_gpt -- --iters 500 --dtype bf16 --torch-run
//! python3 tools/torch_gpt_bench.py --config gpt2 --batch 16 --steps 20 --json > torch.json
//! cargo run --release -p cuda-examples --bin train_gpt -- --config gpt2-124m --torch torch.json
//! python3 tools/torch_gpt.py --out /tmp/gpt-check --config tiny --steps 20
//! cargo run --release -p cuda-examples --bin train_gpt -- --check /tmp/gpt-check
//! ```

use clap::Parser;
use cuda_examples::exit;
use std::process::ExitCode;

#[path = "../train_gpt/mod.rs"]
mod tg;

fn main() -> ExitCode {
    // SAFETY: the first statement of main: no other thread exists yet. `--gpus N` runs NCCL
    // (its children inherit the setting too); never NVLink SHARP multicast.
    unsafe { cuda_stack_nccl::disable_nvls_in_environment() };
    exit::run("train_gpt", || tg::run(tg::Args::parse()))
}
