//! `square_elementwise`: seed 001, Exercise 4 ("a small CuPy port": `tanh(x) * 2.0 + 1.0` on
//! 5M floats, NumPy vs CuPy), made runnable.
//!
//! Computes `y = tanh(x) * 2 + 1` on 5,000,000 f32 (`--quick`: 1,000,000):
//!
//! - on the CPU, one thread and all threads;
//! - on the GPU as CuPy runs it: three kernels (`tanh`, `* 2`, `+ 1`), each reading and writing
//!   the whole array;
//! - on the GPU as one kernel compiled at run time with NVRTC (`y = tanhf(x) * 2.0f + 1.0f`: one
//!   read, one write), hand-written;
//! - on the GPU with `cuda-stack-jit`'s `ElementwiseKernel("float32 x", "float32 y",
//!   "y = tanhf(x) * 2.0f + 1.0f;", "tanh2p1")` on tensors: the one-line body CuPy users write,
//!   the same one kernel, with the library choosing the launch and allocating the output.
//!
//! GPU times are compute only (data already on the device, warmed up): host clock around the
//! work plus synchronize, and CUDA events. Every result is checked against an f64 reference:
//! CUDA's `tanhf` (like the CPU's) is within 2 ulp, doubled by `* 2`, then `+ 1` rounds once, so
//! the error must stay within `8 ulp(tanh x) + 2 ulp(y)` (a factor 2 of margin on each term).
//!
//! Run: `cargo run --release -p cuda-examples --bin square_elementwise [-- --quick] [--device N] [--json]`

use clap::Parser;
use cuda_examples::bench::{median, Table};
use cuda_examples::cli::Common;
use cuda_examples::exit::{self, ProgramResult};
use cuda_examples::jit::compile_and_load;
use cuda_examples::say;
use cuda_examples::timing::GpuTimer;
use cuda_stack_driver::{Context, DeviceSlice, Kernel, LaunchConfig, Stream};
use cuda_stack_jit::ElementwiseKernel;
use cuda_stack_kernels::ops::{self, BinaryOp};
use cuda_stack_kernels::Kernels;
use cuda_stack_runtime::Tensor;
use std::process::ExitCode;
use std::time::Instant;

const FUSED_SOURCE: &str = r#"
extern "C" __global__ void tanh2p1(const float* x, float* y, unsigned long long n) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        y[i] = tanhf(x[i]) * 2.0f + 1.0f;
    }
}
"#;

type Tanh2p1 = Kernel<(
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    u64,
)>;

#[derive(Parser)]
#[command(about = "Seed 001 exercise 4: tanh(x) * 2 + 1 on the CPU vs the GPU")]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    exit::run("square_elementwise", || body(Args::parse()))
}

fn cpu(x: &[f32], threads: usize) -> Vec<f32> {
    let f = |v: f32| v.tanh() * 2.0 + 1.0;
    let mut y = vec![0.0f32; x.len()];
    let chunk = x.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|sc| {
        for (xs, ys) in x.chunks(chunk).zip(y.chunks_mut(chunk)) {
            sc.spawn(move || {
                for (o, &v) in ys.iter_mut().zip(xs) {
                    *o = f(v);
                }
            });
        }
    });
    y
}

/// The distance from |v| to the next f32 up.
fn ulp(v: f32) -> f64 {
    let a = v.abs();
    if !a.is_finite() {
        return f64::NAN;
    }
    f64::from(f32::from_bits(a.to_bits() + 1)) - f64::from(a)
}

/// Worst `error / bound` and worst absolute error, against the f64 reference.
fn accuracy(x: &[f32], y: &[f32]) -> (f64, f64) {
    let (mut worst_ratio, mut worst_abs) = (0.0f64, 0.0f64);
    for (&xv, &yv) in x.iter().zip(y) {
        let t = f64::from(xv).tanh();
        let want = t * 2.0 + 1.0;
        let err = (f64::from(yv) - want).abs();
        // ulp of tanh(x), taken 4 ulps up so a value just below a power of 2 is not
        // measured in the finer ulp of its binade.
        let ulp_t = ulp(f32::from_bits((t as f32).abs().to_bits() + 4));
        let bound = 8.0 * ulp_t + 2.0 * ulp(want as f32);
        worst_ratio = worst_ratio.max(err / bound);
        worst_abs = worst_abs.max(err);
    }
    (worst_ratio, worst_abs)
}

/// CuPy's three kernels: `t = tanh(x)`, `u = t * 2`, `y = u + ones`.
struct Unfused {
    t: cuda_stack_driver::DeviceBuffer<f32>,
    u: cuda_stack_driver::DeviceBuffer<f32>,
    ones: cuda_stack_driver::DeviceBuffer<f32>,
}

impl Unfused {
    fn run(
        &mut self,
        k: &Kernels,
        s: &Stream,
        x: &DeviceSlice<f32>,
        y: &mut DeviceSlice<f32>,
    ) -> cuda_stack_kernels::Result<()> {
        ops::tanh(k, s, x, &mut self.t)?;
        ops::scale(k, s, &self.t, &mut self.u, 2.0)?;
        ops::binary(k, s, BinaryOp::Add, &self.u, &self.ones, y)
    }
}

fn body(args: Args) -> ProgramResult {
    let q = args.common.json;
    let n: usize = args.common.pick(1_000_000, 5_000_000);
    let reps = args.common.pick(3, 10);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ctx = Context::new(args.common.device)?;
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    // SAFETY: matches the declaration above (`x` read, `y` written, `unsigned long long n`); the
    // kernel touches indices `< n` only and every launch passes `n = x.len() = y.len()`.
    let (fused, t_compile): (Tanh2p1, _) =
        compile_and_load(&ctx, "tanh2p1.cu", FUSED_SOURCE, |m| unsafe {
            m.kernel("tanh2p1")
        })?;
    let t_compile = t_compile.as_secs_f64() * 1e3;
    say!(
        q,
        "square_elementwise on {}: y = tanh(x) * 2 + 1 on {n} f32 (x ~ randn); fused kernel \
         NVRTC-compiled + loaded in {t_compile:.1} ms",
        ctx.device().name()?
    );

    let mut x = s.alloc_zeros::<f32>(n)?;
    ops::fill_normal(&k, &s, &mut x, 5, 0)?;
    let x_host = s.clone_dtoh(&x)?;
    let mut y = s.alloc_zeros::<f32>(n)?;
    let mut unfused = Unfused {
        t: s.alloc_zeros(n)?,
        u: s.alloc_zeros(n)?,
        ones: s.alloc_zeros(n)?,
    };
    ops::fill(&k, &s, &mut unfused.ones, 1.0)?;
    let cfg = LaunchConfig::for_num_elems(n);
    let timer = GpuTimer::new(&ctx)?;

    // CPU.
    let mut y_cpu = Vec::new();
    let (mut c1, mut cn) = (vec![], vec![]);
    for _ in 0..reps {
        let t = Instant::now();
        y_cpu = cpu(&x_host, 1);
        c1.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let y_par = cpu(&x_host, threads);
        cn.push(t.elapsed().as_secs_f64() * 1e3);
        if y_par != y_cpu {
            return Err("the multi-threaded CPU result differs from the single-threaded".into());
        }
    }

    // GPU, both ways: (host clock + sync, events).
    let mut gpu =
        |fused_path: bool, y: &mut DeviceSlice<f32>| -> Result<_, Box<dyn std::error::Error>> {
            let mut go = |y: &mut DeviceSlice<f32>| -> Result<(), Box<dyn std::error::Error>> {
                if fused_path {
                    // SAFETY: the kernel touches elements i < n only, and x and y both have n elements.
                    unsafe { fused.launch(&s, &cfg, &x, y, n as u64) }?;
                } else {
                    unfused.run(&k, &s, &x, y)?;
                }
                Ok(())
            };
            go(y)?; // warm-up
            s.synchronize()?;
            let (mut host, mut ev) = (vec![], vec![]);
            for _ in 0..reps {
                let t = Instant::now();
                go(y)?;
                s.synchronize()?;
                host.push(t.elapsed().as_secs_f64() * 1e3);
                ev.push(timer.time(&s, |_| go(y))?.as_secs_f64() * 1e3);
            }
            Ok((median(&host), median(&ev)))
        };
    s.memset_zeros(&mut y)?;
    let (u_host, u_ev) = gpu(false, &mut y)?;
    let y_unfused = s.clone_dtoh(&y)?;
    s.memset_zeros(&mut y)?;
    let (f_host, f_ev) = gpu(true, &mut y)?;
    let y_fused = s.clone_dtoh(&y)?;

    // The same one kernel from a one-line body (cuda-stack-jit's ElementwiseKernel on tensors).
    cuda_stack_runtime::set_device(args.common.device)?;
    // SAFETY: the body reads x and writes y, its own elements.
    let ek = unsafe {
        ElementwiseKernel::new(
            "float32 x",
            "float32 y",
            "y = tanhf(x) * 2.0f + 1.0f;",
            "tanh2p1",
        )?
    };
    let xt = Tensor::from_slice(&x_host, &[n])?;
    let ts = cuda_stack_runtime::stream_for(args.common.device)?;
    let info = ek.launch_info(&[(&xt).into()])?;
    let mut yt = ek.call1::<f32>(&[(&xt).into()])?; // warm-up
    yt.synchronize()?;
    let (mut e_host, mut e_ev) = (vec![], vec![]);
    for _ in 0..reps {
        let t = Instant::now();
        yt = ek.call1::<f32>(&[(&xt).into()])?;
        yt.synchronize()?;
        e_host.push(t.elapsed().as_secs_f64() * 1e3);
        e_ev.push(
            timer
                .time(&ts, |_| -> cuda_stack_jit::Result<()> {
                    yt = ek.call1::<f32>(&[(&xt).into()])?;
                    Ok(())
                })?
                .as_secs_f64()
                * 1e3,
        );
    }
    let (e_host, e_ev) = (median(&e_host), median(&e_ev));
    let y_jit = yt.to_vec()?;

    let mut acc = Vec::new();
    for (what, v) in [
        ("CPU", &y_cpu),
        ("GPU 3 kernels", &y_unfused),
        ("GPU fused", &y_fused),
        ("GPU ElementwiseKernel", &y_jit),
    ] {
        let (ratio, abs) = accuracy(&x_host, v);
        if ratio.is_nan() || ratio > 1.0 {
            return Err(format!(
                "{what}: error {ratio:.2}× the bound 8 ulp(tanh x) + 2 ulp(y) (max abs error \
                 {abs:.2e})"
            )
            .into());
        }
        acc.push((what, abs, ratio));
    }
    let (c1, cn) = (median(&c1), median(&cn));

    if q {
        let j = serde_json::json!({
            "program": "square_elementwise",
            "n": n,
            "cpu_1t_ms": c1,
            "cpu_mt_ms": cn,
            "cpu_threads": threads,
            "gpu_3_kernels_sync_ms": u_host,
            "gpu_3_kernels_events_ms": u_ev,
            "gpu_fused_sync_ms": f_host,
            "gpu_fused_events_ms": f_ev,
            "gpu_elementwise_kernel_sync_ms": e_host,
            "gpu_elementwise_kernel_events_ms": e_ev,
            "elementwise_kernel_launch": {"grid": info.grid, "block": info.block},
            "max_abs_error": acc.iter().map(|a| (a.0, a.1)).collect::<Vec<_>>(),
            "max_error_over_bound": acc.iter().map(|a| (a.0, a.2)).collect::<Vec<_>>(),
            "verified": true,
        });
        println!("{j}");
        return Ok(());
    }
    let mut t = Table::new(&[
        "",
        "launches",
        "host clock ms",
        "events ms",
        "max |error|",
        "error / bound",
    ]);
    t.row(&[
        "CPU, 1 thread".into(),
        "-".into(),
        format!("{c1:.3}"),
        "-".into(),
        format!("{:.1e}", acc[0].1),
        format!("{:.2}", acc[0].2),
    ]);
    t.row(&[
        format!("CPU, {threads} threads"),
        "-".into(),
        format!("{cn:.3}"),
        "-".into(),
        format!("{:.1e}", acc[0].1),
        format!("{:.2}", acc[0].2),
    ]);
    t.row(&[
        "GPU, tanh / *2 / +1 (CuPy)".into(),
        "3".into(),
        format!("{u_host:.3}"),
        format!("{u_ev:.3}"),
        format!("{:.1e}", acc[1].1),
        format!("{:.2}", acc[1].2),
    ]);
    t.row(&[
        "GPU, one NVRTC kernel".into(),
        "1".into(),
        format!("{f_host:.3}"),
        format!("{f_ev:.3}"),
        format!("{:.1e}", acc[2].1),
        format!("{:.2}", acc[2].2),
    ]);
    t.row(&[
        "GPU, ElementwiseKernel (cuda-stack-jit)".into(),
        "1".into(),
        format!("{e_host:.3}"),
        format!("{e_ev:.3}"),
        format!("{:.1e}", acc[3].1),
        format!("{:.2}", acc[3].2),
    ]);
    println!();
    t.print();
    println!(
        "ElementwiseKernel(\"float32 x\", \"float32 y\", \"y = tanhf(x) * 2.0f + 1.0f;\", \
         \"tanh2p1\"): grid {} x block {} on {} SMs, {} ({:.1} ms).",
        info.grid,
        info.block,
        info.sm_count,
        info.target,
        info.compile_time.as_secs_f64() * 1e3
    );
    println!(
        "Medians of {reps} runs, data already on the device. The 3-kernel chain moves {:.0} MB \
         through memory,\nthe fused kernel {:.0} MB: {:.1}× faster on the GPU clock. All results \
         are within 8 ulp(tanh x) + 2 ulp(y)\nof an f64 reference.",
        (3 * 2 * n * 4 + n * 4) as f64 / 1e6,
        (2 * n * 4) as f64 / 1e6,
        u_ev / f_ev
    );
    Ok(())
}
