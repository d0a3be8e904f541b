//! A first op in a fresh process, with the driver's JIT cache disabled (`CUDA_CACHE_DISABLE=1`,
//! what a container with an ephemeral home, a CI job or a new driver sees): it must not
//! JIT-compile, so it stays within a bound that a PTX JIT of its kernel file would blow.
//!
//! Each scenario runs in a child process of this binary, so it sees a process with no context,
//! no loaded module and the environment the test sets.

use cuda_stack_kernels::image::{ImageKind, ImagePreference};
use cuda_stack_kernels::Kernels;
use cuda_stack_runtime::{self as rt, tensor::Tensor};
use cuda_tests::{child_scenarios, ensure, gpu, run_in_child_with_env, TestResult};
use std::time::{Duration, Instant};

/// The first `Tensor` add (module loads included, context creation excluded) must finish
/// within this with the JIT cache off. The target is 50 ms (2.5× PyTorch's 20 ms);
/// the bound leaves room for a slow machine and still fails on a JIT of the elementwise file
/// (hundreds of milliseconds).
const FIRST_ADD_BOUND: Duration = Duration::from_millis(100);

/// Whether the shipped SASS covers this device (sm_75, sm_80 for 8.x, sm_90).
fn sass_covers(cc: cuda_stack_driver::ComputeCapability) -> bool {
    matches!((cc.major, cc.minor), (7, 5) | (8, _) | (9, 0))
}

fn first_add_child() -> TestResult {
    rt::set_device(0)?;
    // Context, stream and allocator: measured apart (PyTorch's first tensor pays the same).
    let start = Instant::now();
    let a = Tensor::from_vec(vec![1.0f32; 4096], &[4096])?;
    let b = Tensor::from_vec(vec![2.0f32; 4096], &[4096])?;
    let context = start.elapsed();
    let t = Instant::now();
    let c = (&a + &b)?;
    let host = c.to_vec()?;
    let first_add = t.elapsed();
    ensure!(host.iter().all(|&v| v == 3.0), "1 + 2 is not 3 on the GPU");
    let ctx = rt::Runtime::current()?.context().clone();
    let k = Kernels::get(&ctx)?;
    let loaded = k.loaded_images();
    let cc = ctx.limits().compute_capability;
    eprintln!(
        "context {:.1} ms, first add {:.1} ms; loaded: {}",
        context.as_secs_f64() * 1e3,
        first_add.as_secs_f64() * 1e3,
        loaded
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    );
    if sass_covers(cc) {
        ensure!(
            loaded.iter().all(|l| l.kind == ImageKind::Sass),
            "on compute capability {cc} every file must load its SASS: {loaded:?}"
        );
        ensure!(
            first_add <= FIRST_ADD_BOUND,
            "the first Tensor add took {first_add:?} with the JIT cache off (bound {FIRST_ADD_BOUND:?}); loaded: {loaded:?}"
        );
    }
    Ok(())
}

/// The PTX path still runs where no SASS fits (forced here): same results, PTX loaded.
fn ptx_path_child() -> TestResult {
    std::env::var(ImagePreference::ENV)
        .ok()
        .filter(|v| v == "ptx")
        .ok_or("the test sets CUDA_STACK_KERNELS_IMAGE=ptx")?;
    rt::set_device(0)?;
    let a = Tensor::from_vec((0..1000).map(|i| i as f32).collect(), &[1000])?;
    let b = Tensor::from_vec(vec![0.5f32; 1000], &[1000])?;
    let c = (&a * &b)?.to_vec()?;
    ensure!(
        c.iter().enumerate().all(|(i, &v)| v == i as f32 * 0.5),
        "a * 0.5 differs on the PTX path"
    );
    let ctx = rt::Runtime::current()?.context().clone();
    let loaded = Kernels::get(&ctx)?.loaded_images();
    ensure!(
        !loaded.is_empty() && loaded.iter().all(|l| l.kind == ImageKind::Ptx),
        "CUDA_STACK_KERNELS_IMAGE=ptx must load PTX only: {loaded:?}"
    );
    Ok(())
}

fn first_tensor_add_is_fast_with_the_jit_cache_off() -> TestResult {
    run_in_child_with_env(
        "first_add",
        Duration::from_secs(120),
        &[("CUDA_CACHE_DISABLE", "1")],
    )
}

fn the_ptx_path_runs_when_forced() -> TestResult {
    run_in_child_with_env(
        "ptx_path",
        Duration::from_secs(300),
        &[("CUDA_CACHE_DISABLE", "1"), (ImagePreference::ENV, "ptx")],
    )
}

fn main() {
    child_scenarios(&[("first_add", first_add_child), ("ptx_path", ptx_path_child)]);
    cuda_tests::run(vec![
        gpu(
            "first_tensor_add_is_fast_with_the_jit_cache_off",
            first_tensor_add_is_fast_with_the_jit_cache_off,
        ),
        gpu(
            "the_ptx_path_runs_when_forced",
            the_ptx_path_runs_when_forced,
        ),
    ]);
}
