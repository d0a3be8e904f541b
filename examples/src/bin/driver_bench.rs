//! `driver_bench`: the cost of the safe layer, measured.
//!
//! - Host-side launch cost of an empty kernel and a 4-argument kernel: raw `cuLaunchKernel`
//!   through `cuda-stack-sys`, the typed launch (checked config, cross-stream tracking, capture gate), and the untyped launch of `cuda-stack-driver`.
//!   256-launch batches (below the launch queue's depth, so the host never waits for the GPU),
//!   median over 200 batches, the variants interleaved batch by batch.
//! - Back-to-back throughput, launch + synchronize round trip, and CUDA-graph replay cost per
//!   kernel for a 100-kernel graph.
//! - 256 MiB copies, host→device and device→host, pageable and pinned.
//!
//! With `--torch FILE` (the output of `python3 .gpu/anchors/torch_baseline.py` from the same run)
//! it prints PyTorch's figures beside ours and the ratios the targets are stated in.
//!
//! Run: `cargo run --release -p cuda-examples --bin driver_bench [-- --torch torch.txt] [--quick]`

use cuda_examples::bench::{median, Table};
use cuda_examples::torch::TorchBaseline;
use cuda_stack_driver::{Context, DeviceSlice, Kernel, LaunchConfig, PinnedBuffer, Stream};
use std::ffi::c_void;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const PTX: &str = include_str!("../../../kernels/ptx/launch_bench.ptx");

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("driver_bench: {e}");
            ExitCode::FAILURE
        }
    }
}

struct Args {
    torch: Option<String>,
    quick: bool,
}

fn args() -> Args {
    let mut a = Args {
        torch: None,
        quick: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--torch" => a.torch = it.next(),
            "--quick" => a.quick = true,
            _ => {}
        }
    }
    a
}

type FourArgs = Kernel<(
    &'static mut DeviceSlice<f32>,
    &'static DeviceSlice<f32>,
    f32,
    u32,
)>;

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = args();
    let torch = TorchBaseline::load(args.torch.as_ref())?;
    let ctx = Context::new(0)?;
    let dev = ctx.device();
    println!(
        "driver_bench on {} ({} SMs), {}",
        dev.name()?,
        dev.sm_count()?,
        cuda_stack_sys::Driver::get()?.version_string()
    );
    let s = ctx.new_stream()?;
    let m = ctx.load_ptx(PTX)?;
    // SAFETY: empty_kernel() takes no parameters; four_args(float* a, const float* b, float s,
    // unsigned n) writes a[0] only when n == 0xffffffff, which we never pass.
    let empty: Kernel<()> = unsafe { m.kernel("empty_kernel")? };
    // SAFETY: as above.
    let four: FourArgs = unsafe { m.kernel("four_args")? };
    let mut a = s.alloc_zeros::<f32>(1)?;
    let b = s.alloc_zeros::<f32>(1)?;
    let cfg = LaunchConfig::new(1, 32);
    let drv = cuda_stack_sys::Driver::get()?;
    let (batches, per) = if args.quick { (20, 256) } else { (200, 256) };

    // Raw launches through cuda-stack-sys.
    let raw_empty = empty.function().as_raw();
    let raw_four = four.function().as_raw();
    let (mut pa, mut pb, mut sc, mut n) = (a.as_raw_ptr(), b.as_raw_ptr(), 1.0f32, 1u32);
    let stream_raw = s.as_raw();
    let raw = |f: cuda_stack_sys::CUfunction,
               params: *mut *mut c_void|
     -> Result<(), cuda_stack_sys::DriverError> {
        // SAFETY: `f` is a live kernel; `params` holds pointers to live values of its exact
        // parameter types (none for empty_kernel).
        unsafe {
            drv.cuLaunchKernel(
                f,
                1,
                1,
                1,
                32,
                1,
                1,
                0,
                stream_raw,
                params,
                std::ptr::null_mut(),
            )
        }
    };
    let mut four_params: [*mut c_void; 4] = [
        (&mut pa as *mut u64).cast(),
        (&mut pb as *mut u64).cast(),
        (&mut sc as *mut f32).cast(),
        (&mut n as *mut u32).cast(),
    ];
    let four_params_ptr = four_params.as_mut_ptr();

    let mut results: Vec<(&str, Vec<f64>)> = vec![
        ("empty: raw cuLaunchKernel (cuda-stack-sys)", vec![]),
        ("empty: typed launch", vec![]),
        ("empty: untyped launch", vec![]),
        ("4 args: raw cuLaunchKernel (cuda-stack-sys)", vec![]),
        ("4 args: typed launch", vec![]),
        ("4 args: untyped launch", vec![]),
    ];
    let batch = |f: &mut dyn FnMut() -> Result<(), Box<dyn std::error::Error>>| -> Result<f64, Box<dyn std::error::Error>> {
        s.synchronize()?;
        let t = Instant::now();
        for _ in 0..per {
            f()?;
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / per as f64;
        Ok(us)
    };
    for _ in 0..batches {
        results[0]
            .1
            .push(batch(&mut || Ok(raw(raw_empty, std::ptr::null_mut())?))?);
        results[1]
            .1
            // SAFETY: the empty kernel touches no memory.
            .push(batch(&mut || Ok(unsafe { empty.launch(&s, &cfg) }?))?);
        // SAFETY: no parameters.
        results[2].1.push(batch(&mut || {
            unsafe { empty.function().launch(&s, &cfg, &mut [])? };
            Ok(())
        })?);
        results[3]
            .1
            .push(batch(&mut || Ok(raw(raw_four, four_params_ptr)?))?);
        results[4].1.push(batch(&mut || {
            // SAFETY: four_args touches a[0], b[0] only when n == 0xffffffff (never here).
            Ok(unsafe { four.launch(&s, &cfg, &mut a, &b, 1.0, 1) }?)
        })?);
        let mut p: [*mut c_void; 4] = four_params;
        // SAFETY: the parameters match four_args and point to live locals.
        results[5].1.push(batch(&mut || {
            unsafe { four.function().launch(&s, &cfg, &mut p)? };
            Ok(())
        })?);
    }
    s.synchronize()?;
    let med: Vec<f64> = results.iter().map(|(_, v)| median(v)).collect();

    let mut t = Table::new(&[
        "launch cost (host, per launch)",
        "ours",
        "vs raw",
        "PyTorch (same run)",
    ]);
    for (i, (name, _)) in results.iter().enumerate() {
        let raw_ref = if i < 3 { med[0] } else { med[3] };
        t.row(&[
            name.to_string(),
            format!("{:.3} us", med[i]),
            format!("{:.3}x", med[i] / raw_ref),
            String::new(),
        ]);
    }

    // Back-to-back throughput and round trip.
    let reps = if args.quick { 2_000 } else { 20_000 };
    s.synchronize()?;
    let t0 = Instant::now();
    for _ in 0..reps {
        // SAFETY: four_args touches a[0], b[0] only when n == 0xffffffff (never here).
        unsafe { four.launch(&s, &cfg, &mut a, &b, 1.0, 1) }?;
    }
    let submit = t0.elapsed();
    s.synchronize()?;
    let total = t0.elapsed();
    t.row(&[
        "back-to-back typed launches: submit / total".into(),
        format!(
            "{:.2} / {:.2} us",
            per_op(submit, reps),
            per_op(total, reps)
        ),
        String::new(),
        torch
            .get("eager_submit")
            .map(|v| {
                format!(
                    "torch eager add_: {v:.2} / {:.2} us",
                    torch.get("eager_total").unwrap_or(f64::NAN)
                )
            })
            .unwrap_or_default(),
    ]);
    let rt: Vec<f64> = (0..reps / 10)
        .map(|_| -> Result<f64, Box<dyn std::error::Error>> {
            let t = Instant::now();
            // SAFETY: four_args touches a[0], b[0] only when n == 0xffffffff (never here).
            unsafe { four.launch(&s, &cfg, &mut a, &b, 1.0, 1) }?;
            s.synchronize()?;
            Ok(t.elapsed().as_secs_f64() * 1e6)
        })
        .collect::<Result<_, _>>()?;
    t.row(&[
        "launch + stream sync round trip (median)".into(),
        format!("{:.2} us", median(&rt)),
        String::new(),
        String::new(),
    ]);

    // Graph replay: 100 kernels.
    let graph = s.capture(|s| {
        for _ in 0..100 {
            // SAFETY: as above.
            unsafe { four.launch(s, &cfg, &mut a, &b, 1.0, 1) }?;
        }
        Ok(())
    })?;
    let exec = graph.instantiate()?;
    for _ in 0..10 {
        exec.launch(&s)?;
    }
    s.synchronize()?;
    let greps = if args.quick { 100 } else { 1000 };
    let t0 = Instant::now();
    for _ in 0..greps {
        exec.launch(&s)?;
    }
    s.synchronize()?;
    let per_kernel = t0.elapsed().as_secs_f64() * 1e6 / (greps * 100) as f64;
    let tg = torch.get("graph_per_op");
    t.row(&[
        "CUDA graph replay, per kernel (100-kernel graph)".into(),
        format!("{per_kernel:.3} us"),
        tg.map(|v| format!("{:.2}x torch", per_kernel / v))
            .unwrap_or_default(),
        tg.map(|v| format!("{v:.2} us")).unwrap_or_default(),
    ]);
    t.print();

    copies(&ctx, &s, &torch, args.quick)?;
    Ok(())
}

fn per_op(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e6 / n as f64
}

fn copies(
    ctx: &Context,
    s: &Stream,
    torch: &TorchBaseline,
    quick: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let n = if quick { 16 << 20 } else { 256 << 20 };
    let reps = 5;
    let mut t = Table::new(&[
        &format!("{} MiB copy", n >> 20),
        "ours GB/s",
        "PyTorch GB/s (same run)",
        "ratio",
    ]);
    let pageable = vec![1u8; n];
    let mut pageable_back = vec![0u8; n];
    let pinned = PinnedBuffer::from_slice(ctx, &pageable)?;
    let mut pinned_back = PinnedBuffer::<u8>::zeroed(ctx, n)?;
    let mut d = s.alloc_zeros::<u8>(n)?;
    let gbs = |f: &mut dyn FnMut() -> Result<(), Box<dyn std::error::Error>>| -> Result<f64, Box<dyn std::error::Error>> {
        f()?; // warm-up
        let mut v = Vec::new();
        for _ in 0..reps {
            let t = Instant::now();
            f()?;
            v.push(n as f64 / t.elapsed().as_secs_f64() / 1e9);
        }
        Ok(median(&v))
    };
    let h2d_pageable = gbs(&mut || Ok(s.memcpy_htod(&pageable, &mut d)?))?;
    let h2d_pinned = gbs(&mut || Ok(s.copy_htod_async(&pinned, &mut d)?.wait()?))?;
    let d2h_pageable = gbs(&mut || Ok(s.memcpy_dtoh(&d, &mut pageable_back)?))?;
    let d2h_pinned = gbs(&mut || Ok(s.copy_dtoh_async(&d, &mut pinned_back)?.wait()?))?;
    for (name, ours, key) in [
        ("H2D pageable", h2d_pageable, "h2d_pageable"),
        ("H2D pinned", h2d_pinned, "h2d_pinned"),
        ("D2H pageable", d2h_pageable, ""),
        ("D2H pinned", d2h_pinned, "d2h_pinned"),
    ] {
        let theirs = torch.get(key);
        t.row(&[
            name.into(),
            format!("{ours:.1}"),
            theirs.map(|v| format!("{v:.1}")).unwrap_or_default(),
            theirs
                .map(|v| format!("{:.3}x", ours / v))
                .unwrap_or_default(),
        ]);
    }
    t.print();
    Ok(())
}
