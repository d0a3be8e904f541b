//! `small_kernels_pitfall`: seed 001, "Common performance pitfalls" 1 ("Too many small kernels"),
//! made runnable.
//!
//! The same math three ways, on a small tensor (1024 f32), with N = 1000 steps of
//! `y = alpha * x + y` (`--quick`: 200):
//!
//! 1. **eager**: N tiny launches of the `axpy` kernel, one per step, like a Python loop of
//!    elementwise ops. Host submission time and total time (after synchronize) per op.
//! 2. **fused**: one launch of a kernel compiled at run time with NVRTC that applies the N steps
//!    in registers (`v = fmaf(alpha, x, v)` in a loop) — what fusion (or a custom kernel) buys.
//! 3. **CUDA graph**: the N tiny launches captured once (`stream.capture`), instantiated, and
//!    replayed with one `cuGraphLaunch` — launch overhead amortised, the kernels unchanged.
//!
//! All three give bit-identical results (the same `fmaf`, in the same order), checked against a
//! CPU loop. With `--torch FILE` PyTorch's eager `add_` and CUDA-graph per-op figures are shown
//! alongside.
//!
//! Run: `cargo run --release -p cuda-examples --bin small_kernels_pitfall [-- --quick] [--torch FILE] [--device N] [--json]`

use clap::Parser;
use cuda_examples::bench::{median, Table};
use cuda_examples::cli::Common;
use cuda_examples::exit::{self, ProgramResult};
use cuda_examples::jit::compile_and_load;
use cuda_examples::say;
use cuda_examples::torch::TorchFlag;
use cuda_examples::verify::same_bits;
use cuda_stack_driver::{Context, DeviceSlice, Kernel, LaunchConfig, Stream};
use cuda_stack_kernels::ops;
use cuda_stack_kernels::Kernels;
use std::process::ExitCode;
use std::time::Instant;

/// The fused kernel: `reps` steps of `y = fmaf(alpha, x, y)` per element, in registers.
const FUSED_SOURCE: &str = r#"
extern "C" __global__ void axpy_repeat(float* y, const float* x, float alpha, int reps,
                                       unsigned long long n) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        float v = y[i];
        const float xv = x[i];
        for (int r = 0; r < reps; ++r) {
            v = fmaf(alpha, xv, v);
        }
        y[i] = v;
    }
}
"#;

type AxpyRepeat = Kernel<(
    &'static mut DeviceSlice<f32>,
    &'static DeviceSlice<f32>,
    f32,
    i32,
    u64,
)>;

#[derive(Parser)]
#[command(about = "Seed 001 pitfall 1: many tiny launches vs one fused kernel vs a CUDA graph")]
struct Args {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    torch: TorchFlag,
}

fn main() -> ExitCode {
    exit::run("small_kernels_pitfall", || body(Args::parse()))
}

const ALPHA: f32 = 0.5;

/// The N tiny launches.
fn eager(
    k: &Kernels,
    s: &Stream,
    steps: usize,
    x: &DeviceSlice<f32>,
    y: &mut DeviceSlice<f32>,
) -> cuda_stack_kernels::Result<()> {
    for _ in 0..steps {
        ops::axpy(k, s, ALPHA, x, y)?;
    }
    Ok(())
}

fn body(args: Args) -> ProgramResult {
    let q = args.common.json;
    let n = 1024usize;
    let steps: usize = args.common.pick(200, 1000);
    let reps = args.common.pick(3, 7);
    let torch = args.torch.load()?;
    let ctx = Context::new(args.common.device)?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    // SAFETY: matches the declaration above: `y` is read and written, `x` only read, then
    // `float`, `int`, `unsigned long long`; the kernel touches indices `< n` only, and every
    // launch passes `n = y.len() = x.len()`.
    let (fused, t_compile): (AxpyRepeat, _) =
        compile_and_load(&ctx, "axpy_repeat.cu", FUSED_SOURCE, |m| unsafe {
            m.kernel("axpy_repeat")
        })?;
    let t_compile = t_compile.as_secs_f64() * 1e3;
    say!(
        q,
        "small_kernels_pitfall on {}: {steps} steps of y = {ALPHA} * x + y on {n} f32\n\
         fused kernel NVRTC-compiled and loaded in {t_compile:.1} ms",
        ctx.device().name()?
    );

    let x_host = cuda_stack_kernels::reference::fill_normal(n, 11, 0);
    let y0 = cuda_stack_kernels::reference::fill_normal(n, 12, 0);
    let want: Vec<f32> = x_host
        .iter()
        .zip(&y0)
        .map(|(&x, &y)| (0..steps).fold(y, |v, _| ALPHA.mul_add(x, v)))
        .collect();
    let x = s.clone_htod(&x_host)?;
    let mut y = s.clone_htod(&y0)?;
    let check =
        |what: &str, got: Vec<f32>| same_bits(&format!("{what} vs the CPU loop"), &got, &want);
    let per_op = |ms: f64| ms * 1e3 / steps as f64;

    // 1. Eager: N launches.
    eager(&k, &s, steps, &x, &mut y)?; // warm-up
    let (mut submit, mut total) = (vec![], vec![]);
    for _ in 0..reps {
        s.memcpy_htod(&y0, &mut y)?;
        s.synchronize()?;
        let t = Instant::now();
        eager(&k, &s, steps, &x, &mut y)?;
        submit.push(t.elapsed().as_secs_f64() * 1e3);
        s.synchronize()?;
        total.push(t.elapsed().as_secs_f64() * 1e3);
    }
    check("eager", s.clone_dtoh(&y)?)?;
    let (eager_submit, eager_total) = (per_op(median(&submit)), per_op(median(&total)));

    // 2. Fused: one launch.
    let cfg = LaunchConfig::for_num_elems(n);
    let reps_i = i32::try_from(steps)?;
    // SAFETY: the kernels touch elements i < n only, and x and y both have n elements.
    unsafe { fused.launch(&s, &cfg, &mut y, &x, ALPHA, reps_i, n as u64) }?; // warm-up
    let mut fused_t = vec![];
    for _ in 0..reps {
        s.memcpy_htod(&y0, &mut y)?;
        s.synchronize()?;
        let t = Instant::now();
        // SAFETY: the kernels touch elements i < n only, and x and y both have n elements.
        unsafe { fused.launch(&s, &cfg, &mut y, &x, ALPHA, reps_i, n as u64) }?;
        s.synchronize()?;
        fused_t.push(t.elapsed().as_secs_f64() * 1e3);
    }
    check("fused", s.clone_dtoh(&y)?)?;
    let fused_total = median(&fused_t);

    // 3. CUDA graph: capture the N launches once, replay with one call.
    let t = Instant::now();
    // The capture runs on a stream of its own (like `torch.cuda.graph`'s side stream).
    let capture = ctx.begin_capture()?;
    let captured = eager(&k, &capture, steps, &x, &mut y);
    let graph = capture.end();
    captured?;
    let exec = graph?.instantiate()?;
    let t_build = t.elapsed().as_secs_f64() * 1e3;
    let nodes = exec.kernel_node_count()?;
    s.memcpy_htod(&y0, &mut y)?;
    exec.launch(&s)?; // warm-up (uploads the graph)
    s.synchronize()?;
    let mut graph_t = vec![];
    for _ in 0..reps {
        s.memcpy_htod(&y0, &mut y)?;
        s.synchronize()?;
        let t = Instant::now();
        exec.launch(&s)?;
        s.synchronize()?;
        graph_t.push(t.elapsed().as_secs_f64() * 1e3);
    }
    check("graph replay", s.clone_dtoh(&y)?)?;
    let graph_per_op = per_op(median(&graph_t));

    if q {
        let j = serde_json::json!({
            "program": "small_kernels_pitfall",
            "n": n,
            "steps": steps,
            "eager_submit_us_per_op": eager_submit,
            "eager_total_us_per_op": eager_total,
            "fused_total_us": fused_total * 1e3,
            "fused_us_per_op": per_op(fused_total),
            "graph_us_per_op": graph_per_op,
            "graph_build_ms": t_build,
            "graph_kernel_nodes": nodes,
            "torch_eager_total": torch.get("eager_total"),
            "torch_graph_per_op": torch.get("graph_per_op"),
            "verified": true,
        });
        println!("{j}");
        return Ok(());
    }
    let tv = |key: &str| torch.number(key, 2);
    let mut t = Table::new(&["way", "launches", "µs per op", "PyTorch µs per op"]);
    t.row(&[
        "1. eager: host submission only".into(),
        steps.to_string(),
        format!("{eager_submit:.2}"),
        tv("eager_submit"),
    ]);
    t.row(&[
        "1. eager: total (after synchronize)".into(),
        steps.to_string(),
        format!("{eager_total:.2}"),
        tv("eager_total"),
    ]);
    t.row(&[
        "2. fused NVRTC kernel".into(),
        "1".into(),
        format!("{:.3}", per_op(fused_total)),
        "-".into(),
    ]);
    t.row(&[
        format!("3. CUDA graph replay ({nodes} kernel nodes)"),
        "1 graph".into(),
        format!("{graph_per_op:.2}"),
        tv("graph_per_op"),
    ]);
    println!();
    t.print();
    println!(
        "Medians of {reps} runs of {steps} steps. The tiny kernel's work is nothing: what the \
         eager loop pays\nis per-launch overhead. The fused kernel does all {steps} steps in \
         {:.1} µs in total ({:.0}× faster than eager);\nthe graph keeps the {steps} kernels but \
         submits them at once (capture + instantiate took {t_build:.1} ms, once).\nAll three \
         results equal the CPU loop bit for bit.",
        fused_total * 1e3,
        eager_total / per_op(fused_total)
    );
    Ok(())
}
