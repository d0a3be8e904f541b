//! `custom_relu`: seed 004, "Method 2: JIT Compilation" and "Adding More Operations" (a custom
//! kernel compiled on first use, like `torch.utils.cpp_extension.load`), made runnable.
//!
//! A ReLU written as CUDA C in a string is compiled to PTX with NVRTC at run time
//! (`cuda_stack_driver::nvrtc::compile_ptx`), loaded into the context (`Context::load_ptx`, where the
//! driver JIT-compiles the PTX for this GPU), and launched through a typed handle
//! (`Module::kernel::<(&DeviceSlice<f32>, &mut DeviceSlice<f32>, u32)>`), so the launch itself
//! is checked by the Rust compiler. Its output is compared bit for bit with the library's
//! `ops::relu` and the CPU reference (`reference::relu`), including -0.0, ±inf and NaN, and the
//! program prints the compile time, the load time, the first-launch time and the kernel time
//! (median of CUDA-event samples) next to the library kernel's.
//!
//! Needs NVRTC (`libnvrtc`, see the README); without it the program prints where it looked.
//!
//! Run: `cargo run --release -p cuda-examples --bin custom_relu` (`--quick` for 1M elements).

use clap::Parser;
use cuda_examples::bench::Table;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_examples::timing::gpu_time;
use cuda_examples::trace_log::{summarize, CallRecorder};
use cuda_examples::verify::same_bits;
use cuda_stack_driver::nvrtc::{self, CompileOptions};
use cuda_stack_driver::{Context, DeviceSlice, Event, LaunchConfig};
use cuda_stack_kernels::{ops, reference, Kernels};
use serde_json::json;
use std::process::ExitCode;
use std::time::Instant;

/// The driver/NVRTC calls of one step, consecutive repeats collapsed, one per line.
fn calls_text(calls: &[cuda_stack_sys::trace::CallEvent]) -> String {
    summarize(calls)
        .iter()
        .map(|(name, n, t, status)| {
            format!(
                "      {name}{} {:.1} µs{}",
                if *n > 1 {
                    format!(" x{n}")
                } else {
                    String::new()
                },
                t.as_secs_f64() * 1e6,
                if *status == 0 {
                    String::new()
                } else {
                    format!("  -> status {status}")
                }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The custom kernel: the library's ReLU semantics (`x < 0 ? 0 : x`, so NaN and -0.0 pass
/// through), one thread per element, as the seed's extension kernels are written.
const SOURCE: &str = r#"
extern "C" __global__ void custom_relu(const float* __restrict__ x,
                                       float* __restrict__ y,
                                       unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = v < 0.0f ? 0.0f : v;
    }
}
"#;

/// A ReLU compiled from CUDA C at run time, against the library's.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run("custom_relu", || body(&args))
}

fn body(args: &Args) -> ProgramResult {
    let q = &args.common;
    let mut out = Out::new(q.json);
    let ctx = Context::new(q.device)?;
    let dev = ctx.device();
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let n: usize = q.pick(1 << 20, 1 << 26);
    let (reps, inner) = (q.pick(5, 20), q.pick(3, 10));
    out.say(format!(
        "custom_relu on {} (compute capability {})\n",
        dev.name()?,
        ctx.limits().compute_capability
    ));
    out.say(format!("1. The kernel, CUDA C in a string:{SOURCE}"));

    // Compile.
    let opts = CompileOptions::for_context(&ctx);
    let nv = cuda_stack_sys::Nvrtc::get()?;
    let rec = CallRecorder::start();
    let t = Instant::now();
    let ptx = nvrtc::compile_ptx("custom_relu.cu", SOURCE, &opts)?;
    let compile_s = t.elapsed().as_secs_f64();
    let compile_calls = rec.take();
    let header: Vec<&str> = ptx
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with(".version") || l.starts_with(".target"))
        .collect();
    out.say(format!(
        "2. NVRTC {} compiled it with {:?} in {:.1} ms: {} bytes of PTX ({}).",
        nv.version_string(),
        opts.to_args(),
        compile_s * 1e3,
        ptx.len(),
        header.join(", ")
    ));
    out.say(format!("   NVRTC calls:\n{}", calls_text(&compile_calls)));

    // Load (the driver JIT-compiles the PTX to this GPU's machine code).
    let t = Instant::now();
    let module = ctx.load_ptx(&ptx)?;
    let load_s = t.elapsed().as_secs_f64();
    let load_calls = rec.take();
    // SAFETY: the signature matches the CUDA declaration in SOURCE: `const float*` (read),
    // `float*` (written), `unsigned int`; the kernel touches only `x[i]`, `y[i]` for `i < n`,
    // and every launch below passes `n` = the length of both slices.
    let kernel =
        unsafe { module.kernel::<(&DeviceSlice<f32>, &mut DeviceSlice<f32>, u32)>("custom_relu")? };
    let handle_calls = rec.take();
    let attr = kernel.function().attributes()?;
    out.say(format!(
        "3. Context::load_ptx (cuModuleLoadDataEx: the driver JIT-compiles PTX -> SASS for \
         sm_{}) took {:.1} ms;\n   kernels in the module: {:?};\n   \
         `custom_relu`: {} registers/thread, {} B local memory, typed handle checked against the \
         driver's\n   parameter list (3 parameters, 8 + 8 + 4 bytes).",
        attr.binary_version,
        load_s * 1e3,
        module.entries(),
        attr.registers,
        attr.local_bytes
    ));
    out.say(format!(
        "   driver calls, load:\n{}\n   driver calls, typed handle:\n{}",
        calls_text(&load_calls),
        calls_text(&handle_calls)
    ));

    // Data, with the special values first.
    let mut host: Vec<f32> = vec![
        -0.0,
        0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -1.5,
        2.5,
    ];
    host.extend((host.len()..n).map(|i| {
        let h = (i as u32).wrapping_mul(2_654_435_761);
        (h >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    }));
    let n32 = u32::try_from(n).map_err(|_| "n must fit the kernel's unsigned int")?;
    let x = s.clone_htod(&host)?;
    let mut y_custom = s.alloc_zeros::<f32>(n)?;
    let mut y_lib = s.alloc_zeros::<f32>(n)?;
    let cfg = LaunchConfig::for_num_elems(n);

    let (e0, e1) = (Event::new(&ctx, true)?, Event::new(&ctx, true)?);
    rec.take();
    let t = Instant::now();
    e0.record(&s)?;
    // SAFETY: the kernel writes y[i] for i < n only, and x and y both have n elements.
    unsafe { kernel.launch(&s, &cfg, &x, &mut y_custom, n32) }?;
    let launch_calls = rec.take();
    e1.record(&s)?;
    e1.synchronize()?;
    let first_host = t.elapsed().as_secs_f64();
    let first_gpu = e0.elapsed(&e1)?.as_secs_f64();
    drop(rec);
    ops::relu(&k, &s, &x, &mut y_lib)?;

    let want = reference::relu(&host);
    same_bits("custom_relu vs CPU", &s.clone_dtoh(&y_custom)?, &want)?;
    same_bits("ops::relu vs CPU", &s.clone_dtoh(&y_lib)?, &want)?;
    out.say(format!(
        "4. Launch: grid {} x block {}. Output equals the CPU reference and ops::relu bit for bit \
         on {n} elements\n   (relu(-0.0) = -0.0, relu(NaN) = NaN, relu(-inf) = 0: both kernels \
         compute x < 0 ? 0 : x).",
        cfg.grid().x,
        cfg.block().x
    ));
    out.say(format!(
        "   driver calls of the typed launch:\n{}",
        calls_text(&launch_calls)
    ));

    let t_custom = gpu_time(&ctx, &s, reps, inner, |s| {
        // SAFETY: the kernel writes y[i] for i < n only, and x and y both have n elements.
        unsafe { kernel.launch(s, &cfg, &x, &mut y_custom, n32) }
    })?;
    let t_lib = gpu_time(&ctx, &s, reps, inner, |s| ops::relu(&k, s, &x, &mut y_lib))?;
    let gbps = |t: f64| 8.0 * n as f64 / t / 1e9;
    let mut tb = Table::new(&["step", "time", "note"]);
    tb.row(&[
        "NVRTC compile (host)".into(),
        format!("{:.2} ms", compile_s * 1e3),
        "once per process (or cache the PTX)".into(),
    ]);
    tb.row(&[
        "module load + JIT (host)".into(),
        format!("{:.2} ms", load_s * 1e3),
        "once per context".into(),
    ]);
    tb.row(&[
        "first launch (host, to completion)".into(),
        format!("{:.1} µs", first_host * 1e6),
        format!("GPU {:.1} µs", first_gpu * 1e6),
    ]);
    tb.row(&[
        "custom_relu kernel (GPU, median)".into(),
        format!("{:.1} µs", t_custom * 1e6),
        format!("{:.0} GB/s, one float per thread", gbps(t_custom)),
    ]);
    tb.row(&[
        "ops::relu kernel (GPU, median)".into(),
        format!("{:.1} µs", t_lib * 1e6),
        format!(
            "{:.0} GB/s, 16-byte packets, grid-stride; custom/library = {:.2}",
            gbps(t_lib),
            t_custom / t_lib
        ),
    ]);
    out.say(format!(
        "\n5. Timing ({n} f32, {} MiB in and out):",
        (n * 4) >> 20
    ));
    out.say(tb.render());
    out.put("device", json!(dev.name()?));
    out.put("n", json!(n));
    out.put("nvrtc", json!(nv.version_string()));
    out.put("compile_ms", json!(compile_s * 1e3));
    out.put("load_ms", json!(load_s * 1e3));
    out.put("first_launch_host_us", json!(first_host * 1e6));
    out.put("custom_us", json!(t_custom * 1e6));
    out.put("library_us", json!(t_lib * 1e6));
    out.put("registers", json!(attr.registers));
    out.finish();
    Ok(())
}
