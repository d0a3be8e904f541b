//! `kernels_bench`: every kernel of `cuda-stack-kernels`, educational next to fast, in GB/s or TFLOP/s
//! and as a percentage of a physical reference measured in the same run.
//!
//! - Memory-bound kernels are compared with the driver's device-to-device copy (`memcpy_dtod` of
//!   a 2^28-float buffer, read + write bytes); matmul with cuBLAS SGEMM as PyTorch measures it
//!   (TF32 off) in the same session.
//! - Kernels: vector add (seed 000 and fast), full sum (tree and fast), coalesced and strided
//!   copies, three transposes, the elementwise family, seed 004's fused bias + ReLU next to the
//!   unfused three launches (and its backward), matmul naive / tiled16 / sgemm, softmax per warp
//!   and per block.
//! - Each kernel is first checked against its CPU reference on small inputs (FAIL and exit
//!   status 1 if wrong); then timed with events, median of several trials, inputs rotated when
//!   they would fit in L2. Tensor-core GEMMs (and cuBLAS beside them) first run 2 s untimed, so
//!   each is timed at the clock the GPU's power limit sets for it, not for the kernel before.
//! - Prints PASS/MISS for the targets, writes `kernels_bench.md` and `kernels_bench.svg` to
//!   `--out` (default `.`), and prints the table last.
//!
//! Run on the GPU machine, PyTorch's figures first (same machine, same session), then the
//! benchmark (from a `gpu-pack`ed checkout; `cargo run --release -p cuda-examples --bin
//! kernels_bench --` where cargo exists):
//!
//! ```text
//! python3 .gpu/anchors/torch_baseline.py > torch.txt
//! python3 -c "import torch; x=torch.randn(4096,4096,device='cuda'); \
//!   f=lambda: torch.softmax(x,dim=-1); [f() for _ in range(3)]; torch.cuda.synchronize(); \
//!   s,e=torch.cuda.Event(enable_timing=True),torch.cuda.Event(enable_timing=True); \
//!   s.record(); [f() for _ in range(20)]; e.record(); torch.cuda.synchronize(); \
//!   t=s.elapsed_time(e)/20/1e3; \
//!   print(f'torch softmax 4096x4096 f32: {t*1e3:.3f} ms {2*4*4096*4096/t/1e9:.1f} GB/s')" \
//!   >> torch.txt
//! .gpu/bin/kernels_bench --torch torch.txt --out bench/
//! ```
//!
//! `--quick` runs small sizes with few repetitions (seconds: the GPU smoke test);
//! `--filter fp8` runs only the sections whose name contains `fp8` (the FP8 GEMMs against
//! cuBLASLt FP8, with the accuracy FP8 costs).
//!
//! `--sweep` runs the shape sweep instead (see `kernels_bench/sweep/mod.rs`): PyTorch's side
//! comes from `tools/torch_sweep.py`, which reads the cases `--sweep-cases` prints:
//!
//! ```text
//! .gpu/bin/kernels_bench --sweep-cases > cases.json
//! python3 tools/torch_sweep.py cases.json > torch_sweep.json
//! .gpu/bin/kernels_bench --sweep --torch-sweep torch_sweep.json --out bench/
//! ```

#[path = "../kernels_bench/mod.rs"]
mod kb;

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Benchmark every kernel against the D2D copy and cuBLAS measured in the same run.
#[derive(Debug, Parser)]
#[command(name = "kernels_bench", version)]
struct Args {
    #[command(flatten)]
    common: cuda_examples::cli::Common,
    /// Output of `torch_baseline.py` (plus the torch.softmax line) from the same machine and
    /// session.
    #[arg(long, value_name = "FILE")]
    torch: Option<PathBuf>,
    /// Directory for kernels_bench.md and kernels_bench.svg (kernels_sweep.* with --sweep).
    #[arg(long, value_name = "DIR", default_value = ".")]
    out: PathBuf,
    /// Run the shape sweep instead: every fast kernel family over tiny to large, odd, prime
    /// and misaligned shapes, min / median ratio per family.
    #[arg(long)]
    sweep: bool,
    /// Print the sweep's cases as JSON (the input of `tools/torch_sweep.py`) and exit.
    #[arg(long)]
    sweep_cases: bool,
    /// `tools/torch_sweep.py`'s output from the same session (PyTorch's side of the sweep).
    #[arg(long, value_name = "FILE")]
    torch_sweep: Option<PathBuf>,
    /// With --sweep or --sweep-cases: only the cases whose id contains this text (e.g.
    /// `bcast` for the broadcast family, `jit` for cuda-jit's). Otherwise: only the sections
    /// whose name contains it (e.g. `fp8`: the FP8 GEMMs against cuBLASLt FP8).
    #[arg(long, value_name = "TEXT")]
    filter: Option<String>,
}

fn main() -> ExitCode {
    let a = Args::parse();
    if a.sweep_cases {
        return cuda_examples::exit::run("kernels_bench", || {
            println!(
                "{}",
                kb::sweep::cases_json(a.common.quick, a.filter.as_deref())?
            );
            Ok(())
        });
    }
    if a.sweep {
        return cuda_examples::exit::run("kernels_bench", || {
            kb::sweep::run(kb::sweep::Options {
                torch: a.torch_sweep,
                out: a.out,
                quick: a.common.quick,
                device: a.common.device,
                filter: a.filter,
            })
        });
    }
    cuda_examples::exit::run("kernels_bench", || {
        kb::run(kb::Options {
            torch: a.torch,
            out: a.out,
            quick: a.common.quick,
            device: a.common.device,
            json: a.common.json,
            only: a.filter,
        })
    })
}
