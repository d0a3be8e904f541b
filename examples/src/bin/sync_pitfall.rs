//! `sync_pitfall`: seed 000, Troubleshooting 2 ("Device Synchronization": why
//! `torch.cuda.synchronize()` goes before reading the clock), made runnable.
//!
//! GPU work is queued: a launch returns as soon as the driver has accepted it, long before the
//! kernel finishes. This program times one big operation (a 4096³ f32 matrix multiply; `--quick`:
//! 1024³) three ways and prints all three:
//!
//! 1. **wrong** — host clock around the call, no synchronize: measures only the launch;
//! 2. **right** — host clock around the call *and* `synchronize()`: launch + GPU work + wake-up;
//! 3. **events** — CUDA events recorded on the stream before and after: GPU time only.
//!
//! It also asks the stream, right after the unsynchronized measurement, whether the work was
//! done (it was not), and checks sampled entries of the product against the CPU (f64 dot
//! products).
//!
//! Run: `cargo run --release -p cuda-examples --bin sync_pitfall [-- --quick] [--device N] [--json]`

use clap::Parser;
use cuda_examples::bench::{median, Table};
use cuda_examples::cli::Common;
use cuda_examples::exit::{self, ProgramResult};
use cuda_examples::say;
use cuda_examples::timing::GpuTimer;
use cuda_stack_driver::{Context, DeviceSlice, Stream};
use cuda_stack_kernels::ops::{self, Transpose};
use cuda_stack_kernels::Kernels;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(about = "Seed 000 Troubleshooting 2: timing GPU work with and without synchronize")]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    exit::run("sync_pitfall", || body(Args::parse()))
}

/// `c = a · b` for square `n × n` matrices (one sgemm launch).
fn matmul(
    k: &Kernels,
    s: &Stream,
    n: usize,
    a: &DeviceSlice<f32>,
    b: &DeviceSlice<f32>,
    c: &mut DeviceSlice<f32>,
) -> cuda_stack_kernels::Result<()> {
    use Transpose::NoTrans;
    ops::sgemm(k, s, NoTrans, NoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c, n)
}

fn body(args: Args) -> ProgramResult {
    let q = args.common.json;
    let n: usize = args.common.pick(1024, 4096);
    let reps = args.common.pick(5, 10);
    let ctx = Context::new(args.common.device)?;
    let s = ctx.new_stream()?;
    let t = Instant::now();
    let k = Kernels::get(&ctx)?;
    say!(
        q,
        "sync_pitfall on {}: C = A @ B, {n}×{n} f32 ({:.1} GFLOP); kernels loaded in {:.1} ms",
        ctx.device().name()?,
        2.0 * (n as f64).powi(3) / 1e9,
        t.elapsed().as_secs_f64() * 1e3
    );
    let mut a = s.alloc_zeros::<f32>(n * n)?;
    let mut b = s.alloc_zeros::<f32>(n * n)?;
    let mut c = s.alloc_zeros::<f32>(n * n)?;
    ops::fill_normal(&k, &s, &mut a, 1, 0)?;
    ops::fill_normal(&k, &s, &mut b, 2, 0)?;
    // Warm-up: the first launch pays for lazy module loading.
    matmul(&k, &s, n, &a, &b, &mut c)?;
    s.synchronize()?;

    let timer = GpuTimer::new(&ctx)?;
    let (mut wrong, mut right, mut events) = (Vec::new(), Vec::new(), Vec::new());
    let mut still_running = 0;
    for _ in 0..reps {
        // 1. Wrong: no synchronize before reading the clock.
        s.synchronize()?;
        let t = Instant::now();
        matmul(&k, &s, n, &a, &b, &mut c)?;
        wrong.push(t.elapsed().as_secs_f64() * 1e3);
        if !s.query()? {
            still_running += 1;
        }
        s.synchronize()?;

        // 2. Right: synchronize before reading the clock.
        let t = Instant::now();
        matmul(&k, &s, n, &a, &b, &mut c)?;
        s.synchronize()?;
        right.push(t.elapsed().as_secs_f64() * 1e3);

        // 3. Events around the work on the stream.
        let gpu = timer.time(&s, |s| matmul(&k, s, n, &a, &b, &mut c))?;
        events.push(gpu.as_secs_f64() * 1e3);
    }
    let (w, r, e) = (median(&wrong), median(&right), median(&events));
    let tflops = |ms: f64| 2.0 * (n as f64).powi(3) / (ms * 1e-3) / 1e12;

    // Check sampled entries against f64 dot products.
    let (ha, hb, hc) = (s.clone_dtoh(&a)?, s.clone_dtoh(&b)?, s.clone_dtoh(&c)?);
    let samples = 64;
    let mut worst = 0.0f64;
    for t in 0..samples {
        let (i, j) = ((t * 7919 + 13) % n, (t * 104_729 + 7) % n);
        let (mut dot, mut mag) = (0.0f64, 0.0f64);
        for kk in 0..n {
            let p = f64::from(ha[i * n + kk]) * f64::from(hb[kk * n + j]);
            dot += p;
            mag += p.abs();
        }
        let err = (f64::from(hc[i * n + j]) - dot).abs() / mag.max(f64::MIN_POSITIVE);
        worst = worst.max(err);
    }
    if worst.is_nan() || worst >= 1e-5 {
        return Err(format!(
            "C = A @ B is wrong: sampled error {worst:.3e} (relative to Σ|a·b|) exceeds 1e-5"
        )
        .into());
    }

    if q {
        let j = serde_json::json!({
            "program": "sync_pitfall",
            "n": n,
            "no_sync_ms": w,
            "with_sync_ms": r,
            "events_ms": e,
            "still_running_after_no_sync": still_running,
            "reps": reps,
            "max_rel_error": worst,
        });
        println!("{j}");
        return Ok(());
    }
    let mut t = Table::new(&["how it was timed", "median ms", "implied TFLOP/s"]);
    t.row(&[
        "1. host clock, no synchronize (WRONG)".into(),
        format!("{w:.4}"),
        format!("{:.1}  (impossible)", tflops(w)),
    ]);
    t.row(&[
        "2. host clock + synchronize()".into(),
        format!("{r:.4}"),
        format!("{:.1}", tflops(r)),
    ]);
    t.row(&[
        "3. CUDA events on the stream".into(),
        format!("{e:.4}"),
        format!("{:.1}", tflops(e)),
    ]);
    println!();
    t.print();
    println!(
        "In {still_running} of {reps} runs the stream was still busy when the unsynchronized clock \
         stopped:\nmethod 1 timed only the launch ({:.0}× less than the real time). Method 2 adds \
         launch and\nwake-up overhead to the GPU time ({:.1} µs more than the events here); \
         events measure the GPU alone.",
        r / w,
        (r - e) * 1e3
    );
    println!(
        "{samples} sampled entries of C match f64 dot products (worst relative error {worst:.1e})."
    );
    Ok(())
}
