//! `dtype_dispatch`: seed 003's dispatch chain — one op, several dtypes, and the single place
//! where the dtype picks the kernel (`AT_DISPATCH_ALL_TYPES` in PyTorch).
//!
//! `a + b` on a `Tensor<T>` goes: `Tensor::add` (generic, never looks at the dtype) →
//! `TensorElement for T` in `cuda-stack-runtime/src/tensor/dtype.rs` (one impl per dtype: the
//! tensor layer's dispatch) → `cuda_stack_kernels::ops::binary::<T>` → the `match T::DTYPE` in
//! `kernels/src/dispatch.rs` (the kernel layer's only dispatch) → the typed handle
//! `Kernels.add_<dtype>` (generated in `kernels/src/generated/handles.rs`) → the PTX entry
//! `add_<dtype>` in `kernels/ptx/elementwise.ptx`.
//!
//! Run: `cargo run --release -p cuda-examples --bin dtype_dispatch [-- --quick]`

use clap::Parser;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_stack_kernels::Kernels;
use cuda_stack_runtime::tensor::{Tensor, TensorElement};
use cuda_stack_runtime::{self as rt};
use half::{bf16, f16};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(about = "One op over f32/f64/i32/f16/bf16, and where the dtype picks the kernel")]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    run("dtype_dispatch", body)
}

/// Runs `a + b` and `sum(a)` for one dtype; checks against the CPU; prints the path taken.
fn one<T: TensorElement + PartialEq + std::fmt::Debug>(
    kernels: &Kernels,
    n: usize,
    from_f64: impl Fn(f64) -> T,
    to_f64: impl Fn(T) -> f64,
) -> ProgramResult {
    let a: Vec<T> = (0..n).map(|i| from_f64((i % 100) as f64 * 0.25)).collect();
    let b: Vec<T> = (0..n).map(|i| from_f64((i % 7) as f64)).collect();
    let (ta, tb) = (Tensor::from_slice(&a, &[n])?, Tensor::from_slice(&b, &[n])?);
    ta.synchronize()?;
    let t = Instant::now();
    let c = (&ta + &tb)?;
    c.synchronize()?;
    let add_us = t.elapsed().as_secs_f64() * 1e6;
    let got = c.to_vec()?;
    let want: Vec<T> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| from_f64(to_f64(*x) + to_f64(*y)))
        .collect();
    if got != want {
        return Err(format!("{}: a + b differs from the CPU", c.dtype().name()).into());
    }
    let s = ta.sum_all()?;
    let sum_dtype = s.dtype();
    let dt = ta.dtype().name();
    let entry = format!("add_{dt}");
    let f = kernels.function(&entry);
    let regs = match f {
        Some(f) => f.attributes()?.registers.to_string(),
        None => "?".into(),
    };
    println!(
        "  {:<5} {:<10} a + b → Kernels.{entry:<9} ({regs:>2} regs)  {:>8.1} µs  ✓   sum(a) → {} ({})  = {}",
        dt,
        ta.dtype().torch_name(),
        add_us,
        sum_dtype.name(),
        if sum_dtype == ta.dtype() { "same dtype" } else { "accumulated wider" },
        s
    );
    Ok(())
}

fn body() -> ProgramResult {
    let args = Args::parse();
    rt::set_device(args.common.device)?;
    let runtime = rt::Runtime::current()?;
    let kernels = Kernels::get(runtime.context())?;
    let n = args.common.pick(4099, 1 << 22);
    println!("a + b and sum(a) on {n} elements of each dtype. The generic code path is the same;");
    println!(
        "the dtype picks the kernel in one place per layer (see this file's docs for the chain).\n"
    );
    one::<f32>(&kernels, n, |v| v as f32, |v| v as f64)?;
    one::<f64>(&kernels, n, |v| v, |v| v)?;
    one::<i32>(&kernels, n, |v| v as i32, |v| v as f64)?;
    one::<f16>(&kernels, n, f16::from_f64, f16::to_f64)?;
    one::<bf16>(&kernels, n, bf16::from_f64, bf16::to_f64)?;

    println!("\nA dtype no kernel supports is a typed error, not a crash:");
    let h = Tensor::from_vec(vec![1i64; 4], &[2, 2])?;
    match h.matmul(&h) {
        Err(e) => println!("  i64 matmul → {e}"),
        Ok(_) => return Err("i64 matmul should be unsupported".into()),
    }
    Ok(())
}
