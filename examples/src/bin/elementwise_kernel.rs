//! `elementwise_kernel`: seed 001's CuPy `ElementwiseKernel` ("Basics of CUDA kernels"),
//! literally, with `cuda-stack-jit`:
//!
//! ```python
//! square = cp.ElementwiseKernel("float32 x", "float32 y", "y = x * x;", "square_kernel")
//! x = cp.arange(10, dtype=cp.float32)
//! y = square(x)
//! ```
//!
//! Prints the result, the CUDA source the library wrote around the one-line body, the launch
//! configuration it chose (for 10 elements and for a large array), and where the compiled
//! kernel came from (NVRTC, or the disk cache of an earlier run) with the time it took. Every
//! result is checked against the CPU.
//!
//! Run: `cargo run --release -p cuda-examples --bin elementwise_kernel [-- --quick] [--device N] [--json]`

use clap::Parser;
use cuda_examples::cli::Common;
use cuda_examples::exit::{self, ProgramResult};
use cuda_examples::say;
use cuda_stack_jit::{ElementwiseKernel, KernelCache, LaunchInfo, Origin};
use cuda_stack_runtime::Tensor;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    about = "Seed 001's CuPy ElementwiseKernel `square`, with the generated source and launch"
)]
struct Args {
    #[command(flatten)]
    common: Common,
    /// Do not print the generated CUDA source.
    #[arg(long)]
    no_source: bool,
}

fn main() -> ExitCode {
    exit::run("elementwise_kernel", || body(Args::parse()))
}

fn origin(o: Origin) -> &'static str {
    match o {
        Origin::Compiled => "compiled by NVRTC just now",
        Origin::Disk => "loaded from the disk cache (no compile)",
        Origin::Memory => "from this process's memory cache",
    }
}

fn describe(i: &LaunchInfo) -> String {
    format!(
        "{} elements: grid {} x block {} = {} threads ({} SMs x {} resident blocks/SM; {} per \
         thread in the grid-stride loop), arguments {:?}",
        i.n,
        i.grid,
        i.block,
        i.grid as u64 * i.block as u64,
        i.sm_count,
        i.blocks_per_sm,
        (i.n as u64).div_ceil(i.grid as u64 * i.block as u64),
        i.arguments
    )
}

fn body(args: Args) -> ProgramResult {
    let q = args.common.json;
    cuda_stack_runtime::set_device(args.common.device)?;
    let big = args.common.pick(1_000_000, 5_000_000);

    // Seed 001, line for line.
    // SAFETY: the body reads x and writes y, its own elements: nothing else.
    let square = unsafe {
        ElementwiseKernel::new(
            "float32 x",     // input parameters
            "float32 y",     // output parameters
            "y = x * x;",    // kernel body (per element)
            "square_kernel", // kernel name
        )?
    };
    let x = Tensor::<f32>::arange(0.0, 10.0, 1.0)?;
    let info = square.launch_info(&[(&x).into()])?; // compiles (or loads) the kernel
    let y = square.call1::<f32>(&[(&x).into()])?;
    let got = y.to_vec()?;
    let want: Vec<f32> = (0..10).map(|i| (i * i) as f32).collect();
    if got != want {
        return Err(format!("square(x) = {got:?}, the CPU says {want:?}").into());
    }

    // The same kernel on a large array: the same compiled code, another launch configuration.
    let xb = Tensor::<f32>::arange(0.0, big as f64, 1.0)?;
    let info_big = square.launch_info(&[(&xb).into()])?;
    let yb = square.call1::<f32>(&[(&xb).into()])?.to_vec()?;
    let bad = yb
        .iter()
        .enumerate()
        .find(|&(i, &v)| v != (i as f32) * (i as f32));
    if let Some((i, v)) = bad {
        return Err(format!("element {i}: {v}, the CPU says {}", (i as f32) * (i as f32)).into());
    }
    let cache = KernelCache::global();
    let status = cache.disk_status();

    if q {
        let j = serde_json::json!({
            "program": "elementwise_kernel",
            "y": got,
            "target": info.target.to_string(),
            "origin": format!("{:?}", info.origin),
            "compile_or_load_ms": info.compile_time.as_secs_f64() * 1e3,
            "launch_small": {"n": info.n, "grid": info.grid, "block": info.block},
            "launch_large": {"n": info_big.n, "grid": info_big.grid, "block": info_big.block},
            "sm_count": info.sm_count,
            "blocks_per_sm": info.blocks_per_sm,
            "cache_dir": status.dir.map(|d| d.display().to_string()),
            "cache_writable": status.writable,
            "verified": true,
        });
        println!("{j}");
        return Ok(());
    }
    say!(q, "square = ElementwiseKernel(\"float32 x\", \"float32 y\", \"y = x * x;\", \"square_kernel\")");
    say!(q, "x = arange(10, float32); y = square(x)");
    say!(q, "y = {y}");
    say!(q, "(checked against the CPU; also on {big} elements)\n");
    if !args.no_source {
        say!(
            q,
            "--- the CUDA source cuda-stack-jit wrote for float32 (source_for / launch_info) ---"
        );
        say!(q, "{}", info.source);
        say!(q, "--- end of source ---\n");
    }
    say!(
        q,
        "compiled for {}: {}, {:.1} ms",
        info.target,
        origin(info.origin),
        info.compile_time.as_secs_f64() * 1e3
    );
    match (&status.dir, &status.problem) {
        (Some(d), None) => say!(
            q,
            "disk cache: {} (a second run loads the kernel from there)",
            d.display()
        ),
        (d, Some(p)) => say!(
            q,
            "disk cache: {} — {p}",
            d.as_ref()
                .map_or("none".into(), |d| d.display().to_string())
        ),
        (None, None) => say!(q, "disk cache: none"),
    }
    say!(q, "launch chosen for {}", describe(&info));
    say!(q, "launch chosen for {}", describe(&info_big));
    Ok(())
}
