//! `cupy_bench`: `cuda-stack-jit`'s `ElementwiseKernel` beside CuPy's, same machine, same run, same
//! timing method, on seed 001 exercise 4's body `y = tanhf(x) * 2 + 1` (float32):
//!
//! 1. **cold compile**: the first call in a new process with an empty cache folder (define,
//!    compile, load, launch, synchronize; the process and the CUDA context are already up);
//! 2. **warm cache**: the same in a second new process on that folder (no compile: a disk load);
//! 3. **per-call host overhead on 1 element**: host time of one call (from before the call until
//!    it returns), median over many calls, synchronizing after each one so the queue is empty,
//!    beside the floor under it (a bare `cuLaunchKernel` of the same kernel shape, measured in
//!    the same loop); with the script, CuPy's side runs in blocks alternating with ours (its
//!    process waits between blocks) and the ratio is the median of the per-pair ratios; and per
//!    call in a batch of back-to-back calls (submission throughput);
//! 4. **throughput at 5M elements**: GPU time per call with CUDA events around back-to-back
//!    calls, against a hand-written CUDA kernel with the same body (grid-stride loop, one thread
//!    per element, output preallocated).
//!
//! CuPy's side is `tools/cupy_bench.py` (CuPy 14, `cupy-cuda13x`), which measures the same four
//! things the same way. Either give its JSON output (`--cupy FILE`) or let this program run it
//! (`--cupy-script tools/cupy_bench.py`), then the report is one table with the ratios.
//! Targets: per-call overhead ≤ 0.5× CuPy's, throughput ≥ 0.95× the hand-written kernel.
//!
//! Every process of the run is pinned to one CPU (the one the program starts on, or `--cpu N`;
//! `--no-pin` turns it off). Unpinned on an H100 host, CuPy's call took 6.9-14.5 µs from run to
//! run while the bare launch in our process did not move with it; pinned, both processes share
//! one core's state, and the bare launch moved with CuPy's fast runs (docs/results, stop 24).
//!
//! Run: `cargo run --release -p cuda-examples --bin cupy_bench [-- --quick] [--cupy-script tools/cupy_bench.py]`

use clap::Parser;
use cuda_examples::bench::{median, Table};
use cuda_examples::cli::Common;
use cuda_examples::exit::{self, ProgramResult};
use cuda_examples::timing::GpuTimer;
use cuda_stack_jit::{ElementwiseKernel, In, LaunchConfig, Out, RawKernel};
use cuda_stack_runtime::Tensor;
use serde_json::{json, Value};
use std::process::{Command, ExitCode};
use std::time::Instant;

const BODY: &str = "y = tanhf(x) * 2.0f + 1.0f;";

const HAND_WRITTEN: &str = r#"
extern "C" __global__ void tanh2p1_hand(const float* __restrict__ x, float* __restrict__ y,
                                        unsigned long long n) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += stride) {
        y[i] = tanhf(x[i]) * 2.0f + 1.0f;
    }
}
"#;

#[derive(Parser)]
#[command(
    about = "cuda-stack-jit's ElementwiseKernel beside CuPy's: compile, cache, overhead, throughput"
)]
struct Args {
    #[command(flatten)]
    common: Common,
    /// Elements for the throughput measurement.
    #[arg(long, default_value_t = 5_000_000)]
    n: usize,
    /// CuPy's figures: the JSON that `tools/cupy_bench.py` printed.
    #[arg(long)]
    cupy: Option<std::path::PathBuf>,
    /// Run this script (`tools/cupy_bench.py`) with python3 for CuPy's figures.
    #[arg(long)]
    cupy_script: Option<std::path::PathBuf>,
    /// The CPU this program and the processes it starts (CuPy's included) run on; default: the
    /// one it starts on.
    #[arg(long)]
    cpu: Option<usize>,
    /// Leave the scheduler free to move the processes between CPUs (the paired ratio then also
    /// compares the cores each process got).
    #[arg(long, conflicts_with = "cpu")]
    no_pin: bool,
    /// Internal: measure the first call in this (new) process and print it as JSON.
    #[arg(long, hide = true)]
    child_first_call: bool,
    /// Internal, with `--child-first-call`: load NVRTC before the timer starts.
    #[arg(long, hide = true)]
    preload_nvrtc: bool,
    /// Internal, with `--child-first-call`: record the driver calls the first call makes.
    #[arg(long, hide = true)]
    trace_first_call: bool,
}

fn main() -> ExitCode {
    exit::run("cupy_bench", || body(Args::parse()))
}

fn define() -> cuda_stack_jit::Result<ElementwiseKernel> {
    // SAFETY: the body reads x and writes y, its own elements.
    unsafe { ElementwiseKernel::new("float32 x", "float32 y", BODY, "tanh2p1") }
}

/// In a new process: the device is initialised first, then the first call is timed.
fn child_first_call(device: usize, preload_nvrtc: bool, trace: bool) -> ProgramResult {
    cuda_stack_runtime::set_device(device)?;
    let x = Tensor::<f32>::ones(&[1024])?;
    x.synchronize()?;
    let t = Instant::now();
    if preload_nvrtc {
        cuda_stack_driver::nvrtc::version()?;
    }
    let nvrtc_ms = t.elapsed().as_secs_f64() * 1e3;
    let rec = trace.then(cuda_examples::trace_log::CallRecorder::start);
    let t = Instant::now();
    let k = define()?;
    let y = k.call1::<f32>(&[(&x).into()])?;
    y.synchronize()?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    // The driver calls of the first call, summed by entry point (most time first).
    let mut driver: Vec<(&str, usize, f64)> = Vec::new();
    for c in rec.map(|r| r.take()).unwrap_or_default() {
        let us = c.elapsed.as_secs_f64() * 1e6;
        match driver.iter_mut().find(|d| d.0 == c.call) {
            Some(d) => {
                d.1 += 1;
                d.2 += us;
            }
            None => driver.push((c.call, 1, us)),
        }
    }
    driver.sort_by(|a, b| b.2.total_cmp(&a.2));
    let info = k.launch_info(&[(&x).into()])?;
    let v = y.to_vec()?;
    let want = 1.0f32.tanh() * 2.0 + 1.0;
    if v.iter().any(|&e| (e - want).abs() > 1e-5) {
        return Err(format!("wrong result {} (want {want})", v[0]).into());
    }
    let stats = cuda_stack_jit::KernelCache::global().stats();
    // What finding NVRTC's file without loading it costs (done once in the call above too).
    let t = Instant::now();
    let located = cuda_stack_jit::cache::nvrtc_location();
    let locate_ms = t.elapsed().as_secs_f64() * 1e3;
    println!(
        "{}",
        json!({"first_call_ms": ms, "nvrtc_load_ms": nvrtc_ms,
               "origin": format!("{:?}", info.origin),
               "compiles": stats.compiles, "disk_hits": stats.disk_hits,
               "nvrtc_loaded": stats.nvrtc_loaded, "locate_ms": locate_ms,
               "driver_calls": driver,
               "nvrtc_file": located.map(|p| p.display().to_string())})
    );
    Ok(())
}

/// Runs this program again with `--child-first-call` on cache folder `dir`.
fn first_call_in_new_process(
    dir: &std::path::Path,
    device: usize,
    preload_nvrtc: bool,
    trace: bool,
) -> Result<Value, Box<dyn std::error::Error>> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args(["--child-first-call", "--device", &device.to_string()]);
    if preload_nvrtc {
        cmd.arg("--preload-nvrtc");
    }
    if trace {
        cmd.arg("--trace-first-call");
    }
    let out = cmd.env(cuda_stack_jit::cache::DIR_ENV, dir).output()?;
    if !out.status.success() {
        return Err(format!(
            "child process failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or("");
    Ok(serde_json::from_str(line)?)
}

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

fn body(args: Args) -> ProgramResult {
    let dev = args.common.device;
    if args.child_first_call {
        return child_first_call(dev, args.preload_nvrtc, args.trace_first_call);
    }
    // Before anything starts a thread or a process, so that all of them inherit it.
    let pinned = if args.no_pin {
        None
    } else {
        let cpu = args.cpu.or_else(cuda_examples::cpu_pin::current_cpu);
        match cpu {
            Some(c) => {
                cuda_examples::cpu_pin::pin_to_cpu(c)
                    .map_err(|e| format!("pinning to CPU {c}: {e} (or pass --no-pin)"))?;
                Some(c)
            }
            None => None,
        }
    };
    let quick = args.common.quick;
    let n = if quick { args.n.min(1_000_000) } else { args.n };
    let calls = args.common.pick(300, 3000);
    let (reps, inner) = args.common.pick((5, 5), (21, 20));

    // CuPy first (its own processes), so both sides see the same idle GPU.
    let cupy: Option<Value> = match (&args.cupy, &args.cupy_script) {
        (Some(f), _) => Some(serde_json::from_str(&std::fs::read_to_string(f)?)?),
        (None, Some(script)) => {
            let mut cmd = Command::new("python3");
            cmd.arg(script)
                .args(["--n", &n.to_string(), "--device", &dev.to_string()]);
            if quick {
                cmd.arg("--quick");
            }
            let out = cmd.output()?;
            if !out.status.success() {
                return Err(format!(
                    "{} failed: {}",
                    script.display(),
                    String::from_utf8_lossy(&out.stderr)
                )
                .into());
            }
            let text = String::from_utf8_lossy(&out.stdout);
            Some(serde_json::from_str(text.lines().last().unwrap_or(""))?)
        }
        (None, None) => None,
    };

    // 1 and 2: first calls in new processes, cold then warm, on an empty folder.
    let dir = std::env::temp_dir().join(format!("cuda-stack-jit-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cold = first_call_in_new_process(&dir, dev, false, false)?;
    let warm = first_call_in_new_process(&dir, dev, false, false)?;
    // Where a warm first call's time goes: its driver calls, recorded in another new process
    // (the recording adds a little; the `warm` row is measured without it).
    let warm_traced = first_call_in_new_process(&dir, dev, false, true)?;
    // The same again with NVRTC loaded before the timer: what a warm first call would cost if
    // it had to load NVRTC (a warm hit loads none where the library file can be found without
    // loading it; the `warm` row says whether it did).
    let warm_loaded = first_call_in_new_process(&dir, dev, true, false)?;
    let _ = std::fs::remove_dir_all(&dir);
    if cold["origin"] != "Compiled"
        || warm["origin"] != "Disk"
        || warm["compiles"] != 0
        || warm_loaded["origin"] != "Disk"
    {
        return Err(format!(
            "cache: cold {cold}, warm {warm} (expected a compile, then a disk load)"
        )
        .into());
    }

    // 3: per-call host overhead, 1 element, interleaved with the same measurement of the floor
    // under it: a bare `cuLaunchKernel` of the hand-written kernel (output preallocated, no
    // checks, no tracking) and the same kernel through the safe, tracked `RawKernel::launch`.
    cuda_stack_runtime::set_device(dev)?;
    let k = define()?;
    let x1 = Tensor::<f32>::ones(&[1])?;
    let mut y1 = Tensor::<f32>::zeros(&[1])?;
    // SAFETY: the declaration matches (const float*, float*, unsigned long long).
    let hand =
        unsafe { RawKernel::<(In<f32>, Out<f32>, u64)>::new(HAND_WRITTEN, "tanh2p1_hand", &[])? };
    let one = LaunchConfig::for_num_elems(1);
    let stream = cuda_stack_runtime::stream_for(dev)?;
    // The bare launches write their own output, never one a safe handle also holds.
    let y_bare = Tensor::<f32>::zeros(&[1])?;
    // SAFETY: `tanh2p1_hand` is (const float*, float*, unsigned long long) and touches
    // element 0 for n = 1; x1 and y_bare have one element each, created on this thread's
    // current stream, which `stream` is; y_bare is used by nothing else.
    let bare = unsafe { BareLaunch::new(&hand.function(dev)?, &stream, &x1, &y_bare)? };
    for _ in 0..100 {
        k.call1::<f32>(&[(&x1).into()])?;
        bare.launch()?;
        // SAFETY: the kernel touches element 0 only, and x1 and y1 have one element each.
        unsafe { hand.launch(&one, (&x1, &mut y1, 1))? };
    }
    x1.synchronize()?;
    // With the CuPy script, its side is measured in blocks alternating with ours (a CuPy
    // process kept waiting between its blocks): each pair of blocks shares the same seconds of
    // the run, so the per-pair ratio does not depend on the host's slower and faster phases.
    let mut server = match &args.cupy_script {
        Some(script) => Some(CupyServer::start(script, dev)?),
        None => None,
    };
    let pairs = args.common.pick(5, 15);
    let block = calls / pairs;
    let (mut host, mut host_bare, mut host_raw) = (
        Vec::with_capacity(calls),
        Vec::with_capacity(calls),
        Vec::with_capacity(calls),
    );
    let (mut cupy_blocks, mut pair_ratios, mut bare_ratios) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..pairs * block {
        if i % block == 0 {
            if let Some(srv) = server.as_mut() {
                cupy_blocks.push(srv.overhead_us(block)?);
            }
        }
        let t = Instant::now();
        let y = k.call1::<f32>(&[(&x1).into()])?;
        host.push(t.elapsed().as_secs_f64() * 1e6);
        y.synchronize()?;
        let t = Instant::now();
        bare.launch()?;
        host_bare.push(t.elapsed().as_secs_f64() * 1e6);
        stream.synchronize()?;
        let t = Instant::now();
        // SAFETY: as above.
        unsafe { hand.launch(&one, (&x1, &mut y1, 1))? };
        host_raw.push(t.elapsed().as_secs_f64() * 1e6);
        y1.synchronize()?;
        if (i + 1) % block == 0 {
            if let Some(&cu) = cupy_blocks.last() {
                pair_ratios.push(median(&host[i + 1 - block..]) / cu);
                bare_ratios.push(median(&host_bare[i + 1 - block..]) / cu);
            }
        }
    }
    if let Some(srv) = server {
        srv.quit()?;
    }
    let overhead_us = median(&host);
    let bare_us = median(&host_bare);
    let raw_us = median(&host_raw);
    let batch = 1000;
    let mut per_batch = Vec::new();
    for _ in 0..args.common.pick(3, 10) {
        let t = Instant::now();
        for _ in 0..batch {
            k.call1::<f32>(&[(&x1).into()])?;
        }
        per_batch.push(t.elapsed().as_secs_f64() * 1e6 / batch as f64);
        x1.synchronize()?;
    }
    let batch_us = median(&per_batch);
    // The same for the bare launch: when it is as slow per call as ours, the batch is limited by
    // how fast the GPU (or the driver's queue) takes tiny kernels, not by host work.
    let mut per_batch_bare = Vec::new();
    for _ in 0..args.common.pick(3, 10) {
        let t = Instant::now();
        for _ in 0..batch {
            bare.launch()?;
        }
        per_batch_bare.push(t.elapsed().as_secs_f64() * 1e6 / batch as f64);
        stream.synchronize()?;
    }
    let batch_bare_us = median(&per_batch_bare);
    // What one warm call asks of the driver, and how much of its host time is spent inside it
    // (the trace hook adds a little to both).
    let rec = cuda_examples::trace_log::CallRecorder::start();
    let t = Instant::now();
    let y = k.call1::<f32>(&[(&x1).into()])?;
    let traced_us = t.elapsed().as_secs_f64() * 1e6;
    let calls_made = rec.take();
    drop(rec);
    y.synchronize()?;
    let driver_us: f64 = calls_made
        .iter()
        .map(|c| c.elapsed.as_secs_f64() * 1e6)
        .sum();
    let call_names: Vec<&str> = calls_made.iter().map(|c| c.call).collect();

    // 4: throughput at n elements, against the hand-written kernel.
    let host_x: Vec<f32> = (0..n)
        .map(|i| ((i % 2001) as f32 - 1000.0) / 250.0)
        .collect();
    let x = Tensor::from_slice(&host_x, &[n])?;
    let ctx = cuda_stack_runtime::Runtime::get(dev)?.context().clone();
    let timer = GpuTimer::new(&ctx)?;
    let mut y_hand = Tensor::<f32>::zeros(&[n])?;
    let cfg = LaunchConfig::for_num_elems(n);
    let launch_hand = |y: &mut Tensor<f32>| -> cuda_stack_jit::Result<()> {
        // SAFETY: the kernel touches i < n only, and x and y both have n elements.
        unsafe { hand.launch(&cfg, (&x, y, n as u64)) }
    };
    launch_hand(&mut y_hand)?;
    let y_ours = k.call1::<f32>(&[(&x).into()])?;
    if y_ours.to_vec()? != y_hand.to_vec()? {
        return Err("ElementwiseKernel and the hand-written kernel disagree".into());
    }
    let t_hand = timer.median_per_call(&stream, reps, inner, |_| launch_hand(&mut y_hand))?;
    let t_ours =
        timer.median_per_call(&stream, reps, inner, |_| -> cuda_stack_jit::Result<()> {
            k.call1::<f32>(&[(&x).into()])?;
            Ok(())
        })?;
    let info = k.launch_info(&[(&x).into()])?;
    let gbps = |t: f64| (2 * n * 4) as f64 / t / 1e9;

    let cold_ms = num(&cold, "first_call_ms").unwrap_or(f64::NAN);
    let warm_ms = num(&warm, "first_call_ms").unwrap_or(f64::NAN);
    let warm_loaded_ms = num(&warm_loaded, "first_call_ms").unwrap_or(f64::NAN);
    let nvrtc_load_ms = num(&warm_loaded, "nvrtc_load_ms").unwrap_or(f64::NAN);
    let c = |k: &str| cupy.as_ref().and_then(|v| num(v, k));
    let device = ctx.device().name()?;
    let throughput_ratio = t_hand / t_ours;
    // CuPy's per-call time and the ratio: from the paired blocks when there are any (the
    // median of the per-pair ratios), else from CuPy's own unpaired run.
    let paired = !pair_ratios.is_empty();
    let cupy_overhead = if paired {
        Some(median(&cupy_blocks))
    } else {
        c("overhead_us")
    };
    let overhead_ratio = if paired {
        Some(median(&pair_ratios))
    } else {
        cupy_overhead.map(|cu| overhead_us / cu)
    };
    let bare_ratio = if paired {
        Some(median(&bare_ratios))
    } else {
        cupy_overhead.map(|cu| bare_us / cu)
    };
    let range = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{lo:.2}x-{hi:.2}x")
    };
    if args.common.json {
        println!(
            "{}",
            json!({
                "program": "cupy_bench", "device": device, "n": n,
                "ours": {"cold_first_call_ms": cold_ms, "warm_first_call_ms": warm_ms,
                         "warm_first_call_nvrtc_loaded_ms": warm_loaded_ms,
                         "nvrtc_load_ms": nvrtc_load_ms,
                         "overhead_us": overhead_us, "batch_us": batch_us,
                         "bare_batch_us": batch_bare_us,
                         "bare_launch_us": bare_us, "raw_kernel_launch_us": raw_us,
                         "gpu_us": t_ours * 1e6, "hand_written_gpu_us": t_hand * 1e6,
                         "grid": info.grid, "block": info.block},
                "cupy": cupy,
                "overhead_ratio": overhead_ratio,
                "paired": {"cupy_block_us": cupy_blocks, "ratios": pair_ratios,
                           "bare_ratios": bare_ratios, "calls_per_block": block},
                "throughput_vs_hand_written": throughput_ratio,
            })
        );
        return Ok(());
    }
    println!(
        "cupy_bench on {device}: y = tanhf(x) * 2 + 1, float32{}",
        match &cupy {
            Some(v) => format!(
                "; CuPy {} from the same run",
                v.get("cupy_version").and_then(Value::as_str).unwrap_or("?")
            ),
            None => "; no CuPy figures (pass --cupy-script tools/cupy_bench.py)".into(),
        }
    );
    let fmt = |v: Option<f64>, unit: &str| v.map_or("-".to_string(), |v| format!("{v:.3} {unit}"));
    let ratio = |ours: f64, theirs: Option<f64>| {
        theirs.map_or("-".to_string(), |t| format!("{:.2}x", ours / t))
    };
    let mut t = Table::new(&[
        "measure",
        "cuda-stack-jit",
        "CuPy",
        "cuda-stack-jit / CuPy",
        "target",
    ]);
    t.row(&[
        "cold: first call, empty cache, new process".into(),
        format!("{cold_ms:.1} ms"),
        fmt(c("cold_ms"), "ms"),
        ratio(cold_ms, c("cold_ms")),
        "-".into(),
    ]);
    t.row(&[
        format!(
            "warm: first call, disk cache, new process (NVRTC loaded: {})",
            if warm["nvrtc_loaded"] == true {
                "yes"
            } else {
                "no"
            }
        ),
        format!("{warm_ms:.2} ms"),
        fmt(c("warm_ms"), "ms"),
        ratio(warm_ms, c("warm_ms")),
        "<= 1.0x".into(),
    ]);
    t.row(&[
        format!(
            "  of it: finding NVRTC's file without loading it ({})",
            warm["nvrtc_file"]
                .as_str()
                .unwrap_or("not found: NVRTC is loaded instead")
        ),
        format!("{:.2} ms", warm["locate_ms"].as_f64().unwrap_or(f64::NAN)),
        "-".into(),
        "-".into(),
        "-".into(),
    ]);
    let traced_ms = num(&warm_traced, "first_call_ms").unwrap_or(f64::NAN);
    let traced_calls: Vec<(String, u64, f64)> = warm_traced["driver_calls"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| {
                    Some((
                        c.get(0)?.as_str()?.to_string(),
                        c.get(1)?.as_u64()?,
                        c.get(2)?.as_f64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let driver_ms: f64 = traced_calls.iter().map(|c| c.2).sum::<f64>() / 1e3;
    let top: Vec<String> = traced_calls
        .iter()
        .take(4)
        .map(|(name, n, us)| format!("{name} x{n} {us:.0} us"))
        .collect();
    t.row(&[
        format!(
            "  traced in another process ({traced_ms:.2} ms): driver calls {driver_ms:.2} ms ({})",
            top.join(", ")
        ),
        format!("{:.2} ms outside", traced_ms - driver_ms),
        "-".into(),
        "-".into(),
        "-".into(),
    ]);
    t.row(&[
        format!("  the same, NVRTC loaded before the timer ({nvrtc_load_ms:.1} ms to load it)"),
        format!("{warm_loaded_ms:.2} ms"),
        "-".into(),
        ratio(warm_loaded_ms, c("warm_ms")),
        "-".into(),
    ]);
    t.row(&[
        "host time per call, 1 element (sync after each)".into(),
        format!("{overhead_us:.2} us"),
        fmt(cupy_overhead, "us"),
        overhead_ratio.map_or("-".into(), |r| format!("{r:.2}x")),
        match overhead_ratio {
            Some(r) => format!("<= 0.5x: {}", if r <= 0.5 { "PASS" } else { "FAIL" }),
            None => "<= 0.5x".into(),
        },
    ]);
    if paired {
        t.row(&[
            format!("  per pair of blocks ({pairs} pairs of {block} calls)"),
            "-".into(),
            "-".into(),
            range(&pair_ratios),
            "-".into(),
        ]);
    }
    t.row(&[
        "  floor: bare cuLaunchKernel, same kernel shape".into(),
        format!("{bare_us:.2} us"),
        "-".into(),
        bare_ratio.map_or("-".into(), |r| format!("{r:.2}x")),
        "-".into(),
    ]);
    t.row(&[
        "  hand-written kernel, RawKernel::launch".into(),
        format!("{raw_us:.2} us"),
        "-".into(),
        "-".into(),
        "-".into(),
    ]);
    t.row(&[
        "  the call beyond the bare launch".into(),
        format!("{:.2} us", overhead_us - bare_us),
        cupy_overhead.map_or("-".into(), |u| format!("{:.2} us", u - bare_us)),
        cupy_overhead.map_or("-".into(), |u| {
            format!("{:.2}x", (overhead_us - bare_us) / (u - bare_us))
        }),
        "-".into(),
    ]);
    t.row(&[
        format!("per call, {batch} back-to-back calls, 1 element"),
        format!("{batch_us:.2} us"),
        fmt(c("batch_us"), "us"),
        ratio(batch_us, c("batch_us")),
        "-".into(),
    ]);
    t.row(&[
        "  floor: bare cuLaunchKernel, back-to-back".into(),
        format!("{batch_bare_us:.2} us"),
        "-".into(),
        ratio(batch_bare_us, c("batch_us")),
        "-".into(),
    ]);
    t.row(&[
        format!("GPU time per call, {n} elements"),
        format!("{:.1} us ({:.0} GB/s)", t_ours * 1e6, gbps(t_ours)),
        c("gpu_us").map_or("-".into(), |u| {
            format!("{u:.1} us ({:.0} GB/s)", gbps(u * 1e-6))
        }),
        ratio(t_ours * 1e6, c("gpu_us")),
        "-".into(),
    ]);
    t.row(&[
        format!("hand-written kernel, {n} elements"),
        format!("{:.1} us ({:.0} GB/s)", t_hand * 1e6, gbps(t_hand)),
        "-".into(),
        format!("throughput {throughput_ratio:.3}x of it"),
        format!(
            ">= 0.95x: {}",
            if throughput_ratio >= 0.95 {
                "PASS"
            } else {
                "FAIL"
            }
        ),
    ]);
    println!();
    t.print();
    println!(
        "One warm call (traced): {} driver calls ({}), {driver_us:.2} us of its {traced_us:.2} us \
         inside the driver.",
        call_names.len(),
        call_names.join(", ")
    );
    if let Some(b) = cupy
        .as_ref()
        .and_then(|v| v.get("warm_nvrtc_loaded_before"))
        .and_then(Value::as_bool)
    {
        println!(
            "CuPy's warm first call: libnvrtc {} mapped in its process when the timer started.",
            if b { "was already" } else { "was not yet" }
        );
    }
    println!(
        "The floor rows are measured in the same loop as ours, one after the other (same host \
         state); the bare launch is what any library's call costs at least on this machine, and \
         the last of them compares what each library adds on top of it."
    );
    match pinned {
        Some(c) => println!(
            "Every process of this run (ours, CuPy's, the first-call children) ran on CPU {c} \
             only, so each pair of blocks compares the libraries on the same core (--no-pin: \
             wherever the scheduler puts them)."
        ),
        None => println!("Processes not pinned: each ran wherever the scheduler put it."),
    }
    if paired {
        println!(
            "Per-call host times: {pairs} pairs of blocks of {block} calls, a CuPy block (its \
             process waiting between blocks) then ours; the ratio is the median of the per-pair \
             ratios, the CuPy figure the median of its block medians (its unpaired run: {}).",
            fmt(c("overhead_us"), "us")
        );
    }
    println!(
        "Host times: medians of {calls} calls; GPU: medians of {reps} samples of {inner} \
         back-to-back calls between CUDA events (both sides the same way). Ours launches grid {} \
         x {} ({} SMs); the hand-written one grid {} x {}. Cold/warm include defining the kernel \
         and the first call's synchronize, after device initialisation.",
        info.grid,
        info.block,
        info.sm_count,
        cfg.grid().x,
        cfg.block().x
    );
    Ok(())
}

/// One launch of the hand-written kernel on one element straight through `cuda-stack-sys`: no checks,
/// no dependency tracking, parameters prepared once. The floor under any library's call.
struct BareLaunch<'a> {
    driver: &'static cuda_stack_sys::Driver,
    /// Keeps the module (and so `raw`) loaded.
    _function: cuda_stack_driver::Function,
    raw: cuda_stack_sys::CUfunction,
    stream: &'a cuda_stack_driver::Stream,
    params: [u64; 3],
    /// `x` and `y` stay alive (and their storage in place) while launches can be made.
    _tensors: std::marker::PhantomData<&'a Tensor<f32>>,
}

impl<'a> BareLaunch<'a> {
    /// Launches of `function` reading `x[0]` and writing `y[0]` on `stream`, behind the
    /// tensors' tracking.
    ///
    /// # Safety
    /// `function` must be a kernel of the parameters `(const float*, float*, unsigned long long)`
    /// that touches elements below the last one only (`tanh2p1_hand`), in `stream`'s context;
    /// `x` and `y` must hold at least one element, with every earlier write to them ordered
    /// before `stream`'s work; and while the returned value lives, nothing else may read or
    /// write `y` except after synchronizing `stream`.
    unsafe fn new(
        function: &cuda_stack_driver::Function,
        stream: &'a cuda_stack_driver::Stream,
        x: &'a Tensor<f32>,
        y: &'a Tensor<f32>,
    ) -> Result<BareLaunch<'a>, Box<dyn std::error::Error>> {
        Ok(BareLaunch {
            driver: cuda_stack_sys::Driver::get()?,
            _function: function.clone(),
            raw: function.as_raw(),
            stream,
            params: [x.data_ptr(), y.data_ptr(), 1],
            _tensors: std::marker::PhantomData,
        })
    }

    fn launch(&self) -> Result<(), cuda_stack_sys::DriverError> {
        let mut p = self.params;
        let mut ptrs: [*mut std::ffi::c_void; 3] = [
            (&mut p[0] as *mut u64).cast(),
            (&mut p[1] as *mut u64).cast(),
            (&mut p[2] as *mut u64).cast(),
        ];
        // SAFETY: `new`'s contract: `raw` is a kernel of these three parameters (kept loaded by
        // `_function`), each pointer refers to a live value of that size; it touches x[0] and
        // y[0] of tensors borrowed for 'a (so alive, their storage not replaced), earlier
        // writes to them are ordered before the stream's work, and nothing else uses y.
        unsafe {
            self.driver.cuLaunchKernel(
                self.raw,
                1,
                1,
                1,
                256,
                1,
                1,
                0,
                self.stream.as_raw(),
                ptrs.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
    }
}

/// CuPy's side of the paired per-call measurement: `tools/cupy_bench.py --serve`, kept waiting
/// between blocks.
struct CupyServer {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: std::io::BufReader<std::process::ChildStdout>,
}

impl CupyServer {
    fn start(
        script: &std::path::Path,
        device: usize,
    ) -> Result<CupyServer, Box<dyn std::error::Error>> {
        use std::io::BufRead;
        use std::process::Stdio;
        let mut child = Command::new("python3")
            .arg(script)
            .args(["--serve", "--device", &device.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let (Some(input), Some(out)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("the CuPy server's pipes were not set up".into());
        };
        let mut output = std::io::BufReader::new(out);
        let mut line = String::new();
        while line.trim() != "ready" {
            line.clear();
            if output.read_line(&mut line)? == 0 {
                let status = child.wait()?;
                return Err(format!(
                    "{} --serve ended before it was ready: {status}",
                    script.display()
                )
                .into());
            }
        }
        Ok(CupyServer {
            child,
            input,
            output,
        })
    }

    /// CuPy's median host time per call over `calls` calls on 1 element.
    fn overhead_us(&mut self, calls: usize) -> Result<f64, Box<dyn std::error::Error>> {
        use std::io::{BufRead, Write};
        writeln!(self.input, "overhead {calls}")?;
        self.input.flush()?;
        let mut line = String::new();
        if self.output.read_line(&mut line)? == 0 {
            return Err("the CuPy server ended during a block".into());
        }
        let v: Value = serde_json::from_str(line.trim())?;
        num(&v, "overhead_us").ok_or_else(|| format!("the CuPy server answered {line}").into())
    }

    fn quit(mut self) -> Result<(), Box<dyn std::error::Error>> {
        use std::io::Write;
        writeln!(self.input, "quit")?;
        drop(self.input);
        self.child.wait()?;
        Ok(())
    }
}
