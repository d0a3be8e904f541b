//! The host side of a warm `ElementwiseKernel` call, in a loop, for profilers.
//!
//! `cargo run --release -p cuda-stack-jit --example host_path -- [calls]` runs seed 001's
//! `y = tanhf(x) * 2 + 1` on one element `calls` times (default 100000), synchronizing after each
//! call as `cupy_bench` does, then the hand-written kernel through `RawKernel::launch` as often.
//! On a GPU it prints the mean host time of each. A second argument, `elementwise` or `raw`,
//! runs only that loop. Its real use is with the stand-in driver of
//! `tools/host-profile`, under callgrind: then every instruction counted is our own code's.

use cuda_stack_jit::{ElementwiseKernel, In, LaunchConfig, Out, RawKernel};
use cuda_stack_runtime::Tensor;
use std::time::Instant;

const HAND_WRITTEN: &str = r#"
extern "C" __global__ void tanh2p1_hand(const float* x, float* y, unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = tanhf(x[i]) * 2.0f + 1.0f;
}
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let calls: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(100_000);
    // `elementwise` or `raw` runs only that loop (for instruction counts per call).
    let only = std::env::args().nth(2);
    let run = |what: &str| only.is_none() || only.as_deref() == Some(what);
    // SAFETY: the body reads x and writes y, its own elements.
    let k = unsafe {
        ElementwiseKernel::new("float32 x", "float32 y", "y = tanhf(x) * 2 + 1;", "tanh2p1")?
    };
    // SAFETY: the declaration matches (const float*, float*, unsigned long long).
    let hand =
        unsafe { RawKernel::<(In<f32>, Out<f32>, u64)>::new(HAND_WRITTEN, "tanh2p1_hand", &[])? };
    let x = Tensor::<f32>::ones(&[1])?;
    let mut y1 = Tensor::<f32>::zeros(&[1])?;
    let one = LaunchConfig::for_num_elems(1);
    // Only the call is timed, as in `cupy_bench` (the synchronize and the output's drop are not).
    let mut ours = std::time::Duration::ZERO;
    for _ in 0..if run("elementwise") { calls } else { 0 } {
        let t = Instant::now();
        let y = k.call1::<f32>(&[(&x).into()])?;
        ours += t.elapsed();
        y.synchronize()?;
    }
    let mut raw = std::time::Duration::ZERO;
    for _ in 0..if run("raw") { calls } else { 0 } {
        let t = Instant::now();
        // SAFETY: the kernel touches element 0 only, and x and y1 have one element each.
        unsafe { hand.launch(&one, (&x, &mut y1, 1))? };
        raw += t.elapsed();
        y1.synchronize()?;
    }
    let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / calls.max(1) as f64;
    println!(
        "{calls} calls, mean host time of the call alone: ElementwiseKernel::call1 {:.3} us, \
         RawKernel::launch {:.3} us",
        per(ours),
        per(raw)
    );
    Ok(())
}
