//! `tour`: seed 000's pipeline — Python/PyTorch → CUDA Runtime → CUDA Driver → device driver →
//! hardware → result — walked live, one layer at a time, on the real GPU.
//!
//! 1. The PyTorch layer's equivalent: `Tensor` ops (`A + B` on the GPU).
//! 2. The runtime-lite calls the same work turns into (`cudaMalloc`/`cudaMemcpy`/`<<<>>>`-style).
//! 3. The driver calls those turn into, as they happen: every call passes through `cuda-stack-sys`'s
//!    checked-call stratum, whose trace hook records its name, status and duration.
//! 4. The driver library that answered them: its path and version.
//! 5. The hardware: the device, and the grid, blocks and warps of the launch.
//! 6. The result back on the host, verified against the CPU.
//!
//! Then seed 000's "Complete Working Example": CPU vs GPU at 1,000,000 elements and larger, with
//! the transfer cost shown separately. Every time printed is measured in this run.
//!
//! Run: `cargo run --release -p cuda-examples --bin tour [-- --size N --device D --json --quick]`

use clap::Parser;
use cuda_examples::cli::Common;
use cuda_examples::cpu_baseline;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::trace_log::{print_calls, summarize, CallRecorder};
use cuda_stack_driver::LaunchConfig;
use cuda_stack_kernels::image::ImagePreference;
use cuda_stack_kernels::{ops, reference, Kernels};
use cuda_stack_runtime::{self as rt, tensor::Tensor};
use cuda_stack_sys::trace::CallEvent;
use serde_json::json;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(about = "Seed 000's pipeline, from Tensor ops down to the hardware, live")]
struct Args {
    /// Elements in the walked-through vector add.
    #[arg(long, default_value_t = 1_000_000)]
    size: usize,
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    run("tour", body)
}

/// Runs `f`, returning its value, its host time, and the driver calls it made.
fn traced<R>(
    rec: &CallRecorder,
    f: impl FnOnce() -> Result<R, Box<dyn std::error::Error>>,
) -> Result<(R, Duration, Vec<CallEvent>), Box<dyn std::error::Error>> {
    rec.take();
    let t = Instant::now();
    let r = f()?;
    let dt = t.elapsed();
    Ok((r, dt, rec.take()))
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

struct Step {
    code: &'static str,
    time: Duration,
    calls: Vec<CallEvent>,
}

fn body() -> ProgramResult {
    let args = Args::parse();
    let quick = args.common.quick;
    let json_out = args.common.json;
    let n = if quick {
        args.size.min(1 << 16)
    } else {
        args.size
    };
    let say = |s: &str| {
        if !json_out {
            println!("{s}");
        }
    };
    // The loader: without a driver this is where the program stops, listing every place tried.
    let drv = cuda_stack_sys::Driver::get()?;

    let a_host: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.5).collect();
    let b_host: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
    let expect = reference::vector_add(&a_host, &b_host);
    let rec = CallRecorder::start();

    say("cuda-rs tour: seed 000's execution pipeline, live");
    say(&format!(
        "  C = A + B on {n} f32 elements; every time below is measured now.\n"
    ));

    // ── Layer 1: the PyTorch equivalent ────────────────────────────────────────────────────
    rt::set_device(args.common.device)?;
    let (a, t1, c1) = traced(&rec, || Ok(Tensor::from_vec(a_host.clone(), &[n])?))?;
    let (b, t2, c2) = traced(&rec, || Ok(Tensor::from_vec(b_host.clone(), &[n])?))?;
    let (c, t3, c3) = traced(&rec, || Ok((&a + &b)?))?;
    let (c_host, t4, c4) = traced(&rec, || Ok(c.to_vec()?))?;
    let tensor_steps = [
        Step {
            code: "let a = Tensor::from_vec(a_host, &[n])?;   // torch.tensor(A, device='cuda')",
            time: t1,
            calls: c1,
        },
        Step {
            code: "let b = Tensor::from_vec(b_host, &[n])?;",
            time: t2,
            calls: c2,
        },
        Step {
            code: "let c = (&a + &b)?;                         // C = A + B (queued, async)",
            time: t3,
            calls: c3,
        },
        Step {
            code: "let c_host = c.to_vec()?;                   // C.cpu(): waits for the GPU",
            time: t4,
            calls: c4,
        },
    ];
    say("1. Python/PyTorch layer → our Tensor API (cuda-stack-runtime::tensor)");
    for s in &tensor_steps {
        say(&format!(
            "   {:<78} {:>10}  ({} driver calls)",
            s.code,
            ms(s.time),
            s.calls.len()
        ));
    }
    let tensor_ok = c_host == expect;
    say("   first line includes lazy start-up: context, default stream and caching allocator; `+` loads its kernel file once.");
    let rt_kernels = Kernels::get(rt::Runtime::current()?.context())?;
    for l in rt_kernels.loaded_images() {
        say(&format!("   loaded so far: {l}"));
    }
    say("");

    // ── Layers 2 + 3: runtime-lite calls, and the driver calls each one became ─────────────
    let runtime = rt::Runtime::current()?;
    let stream = runtime.default_stream().clone();
    let ctx = runtime.context().clone();
    let mut rt_steps: Vec<Step> = Vec::new();
    let (da, t, c) = traced(&rec, || Ok(rt::clone_htod(&a_host)?))?;
    rt_steps.push(Step {
        code: "let da = rt::clone_htod(&a)?;        // cudaMalloc + cudaMemcpy(HostToDevice)",
        time: t,
        calls: c,
    });
    let (db, t, c) = traced(&rec, || Ok(rt::clone_htod(&b_host)?))?;
    rt_steps.push(Step {
        code: "let db = rt::clone_htod(&b)?;",
        time: t,
        calls: c,
    });
    let (mut dc, t, c) = traced(&rec, || Ok(rt::malloc_zeros::<f32>(n)?))?;
    rt_steps.push(Step {
        code: "let mut dc = rt::malloc_zeros(n)?;   // cudaMalloc + cudaMemset",
        time: t,
        calls: c,
    });
    // A fresh module load, as the runtime does on first use of a kernel file (cuModuleLoadData):
    // its SASS for this GPU where one ships, else its PTX, JIT-compiled by the driver.
    let kernels = Kernels::load_with(&ctx, ImagePreference::from_env());
    let ((), t, c) = traced(&rec, || {
        kernels.vector_add_kernels()?;
        Ok(())
    })?;
    rt_steps.push(Step {
        code:
            "k.vector_add_kernels()?;             // module load: SASS for this GPU, else PTX JIT",
        time: t,
        calls: c,
    });
    let ((), t, c) = traced(&rec, || {
        Ok(ops::vector_add_seed(&kernels, &stream, &da, &db, &mut dc)?)
    })?;
    rt_steps.push(Step {
        code: "vector_add<<<grid, 256>>>(da, db, dc, n);  // ops::vector_add_seed",
        time: t,
        calls: c,
    });
    let ((), t, c) = traced(&rec, || Ok(rt::synchronize()?))?;
    rt_steps.push(Step {
        code: "rt::synchronize()?;                  // cudaDeviceSynchronize",
        time: t,
        calls: c,
    });
    let (dc_host, t, c) = traced(&rec, || Ok(rt::clone_dtoh(&dc)?))?;
    rt_steps.push(Step {
        code: "let c = rt::clone_dtoh(&dc)?;        // cudaMemcpy(DeviceToHost)",
        time: t,
        calls: c,
    });
    drop(rec);
    let runtime_ok = dc_host == expect;

    say("2. CUDA Runtime layer → cuda-stack-runtime calls for the same work");
    for s in &rt_steps {
        say(&format!("   {:<82} {:>10}", s.code, ms(s.time)));
    }
    say("");
    say("3. CUDA Driver API layer → the driver calls each runtime call made (traced, in order)");
    for s in &rt_steps {
        if json_out {
            continue;
        }
        println!("   {}", s.code.split("//").next().unwrap_or("").trim());
        print_calls("      ", &s.calls);
    }
    say("   (cuMemAlloc → cuMemAllocAsync from the device's memory pool; cuMemcpyHtoD/DtoH → their _v2 async forms on the stream;");
    say("    cuModuleLoadData → cuModuleLoadDataEx with JIT log buffers, one per kernel file, on first use; the typed handles'");
    say("    signatures were checked against the PTX when generated, so loading asks the driver only for each function.)");
    for l in kernels.loaded_images() {
        say(&format!("   {l}"));
    }
    say("   (`cold_start` measures a first op in a fresh process with the driver's JIT cache off, SASS vs PTX, beside PyTorch.)\n");

    // ── Layer 4: the driver library ────────────────────────────────────────────────────────
    let resolved = drv
        .resolved_path()
        .unwrap_or_else(|| drv.path().to_path_buf());
    say("4. Device driver layer → the library that answered");
    say(&format!(
        "   {} loaded from {} ({})",
        drv.version_string(),
        drv.path().display(),
        resolved.display()
    ));
    say(&format!(
        "   Driver::load took {:.3} ms: dlopen + {} of {} entry points resolved one by one\n",
        drv.load_time().as_secs_f64() * 1e3,
        drv.table().resolved_count(),
        cuda_stack_sys::driver_table::DriverTable::SYMBOLS.len()
    ));

    // ── Layer 5: the hardware ──────────────────────────────────────────────────────────────
    let dev = ctx.device();
    let limits = *ctx.limits();
    let cfg = LaunchConfig::for_num_elems(n);
    let f = kernels.vector_add()?.function();
    let attrs = f.attributes()?;
    let per_sm = f.max_active_blocks_per_sm(cfg.block().x, 0)?;
    let blocks = cfg.grid().x as u64;
    let warps_per_block = (cfg.block().x as u64).div_ceil(32);
    let resident = per_sm as u64 * limits.sm_count as u64;
    say("5. GPU hardware → where the launch ran");
    say(&format!(
        "   {} — compute capability {}, {} SMs, {:.1} GiB, peak DRAM ~{:.0} GB/s",
        dev.name()?,
        limits.compute_capability,
        limits.sm_count,
        dev.total_memory()? as f64 / (1u64 << 30) as f64,
        dev.peak_memory_bandwidth()? / 1e9
    ));
    say(&format!(
        "   launch: grid {} blocks × block {} threads = {} threads, {} warps of 32 ({} per block)",
        blocks,
        cfg.block().x,
        cfg.total_threads(),
        blocks * warps_per_block,
        warps_per_block
    ));
    say(&format!(
        "   kernel uses {} registers/thread; {} blocks fit per SM → {} resident at once → {:.1} waves\n",
        attrs.registers,
        per_sm,
        resident,
        blocks as f64 / resident.max(1) as f64
    ));

    // ── Layer 6: the result ────────────────────────────────────────────────────────────────
    say("6. Result back on the host");
    let show: Vec<String> = c_host.iter().take(4).map(|v| format!("{v}")).collect();
    say(&format!("   c[0..4] = [{}], …  (n = {n})", show.join(", ")));
    say(&format!(
        "   Tensor result {} the CPU; runtime-layer result {} the CPU\n",
        if tensor_ok {
            "matches"
        } else {
            "DOES NOT match"
        },
        if runtime_ok {
            "matches"
        } else {
            "DOES NOT match"
        }
    ));
    if !tensor_ok || !runtime_ok {
        return Err("the GPU result differs from the CPU reference".into());
    }

    // ── Seed 000's benchmark: CPU vs GPU, transfers separately ─────────────────────────────
    let sizes: &[usize] = if quick {
        &[1_000_000]
    } else {
        &[1_000_000, 10_000_000, 100_000_000]
    };
    let bench = benchmark(sizes)?;
    if json_out {
        let walk: Vec<_> = tensor_steps
            .iter()
            .chain(rt_steps.iter())
            .map(|s| {
                json!({
                    "code": s.code,
                    "ms": s.time.as_secs_f64() * 1e3,
                    "driver_calls": summarize(&s.calls).iter().map(|(name, count, t, status)| json!({
                        "call": name, "count": count, "us": t.as_secs_f64() * 1e6, "status": status
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let out = json!({
            "size": n,
            "driver": { "version": drv.version(), "path": resolved.display().to_string(),
                        "load_ms": drv.load_time().as_secs_f64() * 1e3 },
            "device": { "name": dev.name()?, "sms": limits.sm_count,
                        "compute_capability": limits.compute_capability.to_string() },
            "launch": { "grid": blocks, "block": cfg.block().x, "warps": blocks * warps_per_block,
                        "registers": attrs.registers, "blocks_per_sm": per_sm },
            "steps": walk,
            "verified": true,
            "cpu_side": cpu_baseline::describe(),
            "benchmark": bench.iter().map(|r| json!({
                "n": r.n, "cpu_ms": r.cpu * 1e3, "gpu_ms": r.gpu * 1e3, "speedup": r.cpu / r.gpu,
                "h2d_ms": r.h2d * 1e3, "d2h_ms": r.d2h * 1e3,
                "speedup_with_transfers": r.cpu_add / (r.gpu_add + r.h2d + r.d2h),
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("Seed 000's \"Complete Working Example\": randn(size) twice + add, CPU vs GPU");
    println!("{}", cpu_baseline::describe());
    let mut t = cuda_examples::bench::Table::new(&[
        "size",
        "CPU (randn+add)",
        "GPU (randn+add+sync)",
        "speedup",
        "H2D a,b",
        "add only",
        "D2H c",
        "speedup incl. transfers",
    ]);
    for r in &bench {
        t.row(&[
            r.n.to_string(),
            format!("{:.2} ms", r.cpu * 1e3),
            format!("{:.3} ms", r.gpu * 1e3),
            format!("{:.1}x", r.cpu / r.gpu),
            format!("{:.2} ms", r.h2d * 1e3),
            format!("{:.3} ms", r.gpu_add * 1e3),
            format!("{:.2} ms", r.d2h * 1e3),
            format!("{:.1}x", r.cpu_add / (r.gpu_add + r.h2d + r.d2h)),
        ]);
    }
    t.print();
    println!("(\"speedup incl. transfers\" compares the CPU add alone with H2D of both inputs + the GPU add + D2H of the result:");
    println!(" moving data across PCIe costs far more than adding it, which is why tensors should stay on the GPU.)");
    Ok(())
}

struct BenchRow {
    n: usize,
    /// CPU randn ×2 + add, seconds.
    cpu: f64,
    /// CPU add alone.
    cpu_add: f64,
    /// GPU randn ×2 + add + synchronize.
    gpu: f64,
    /// GPU add alone (+ synchronize).
    gpu_add: f64,
    /// Host→device of both inputs.
    h2d: f64,
    /// Device→host of the result.
    d2h: f64,
}

fn benchmark(sizes: &[usize]) -> Result<Vec<BenchRow>, Box<dyn std::error::Error>> {
    let mut rows = Vec::new();
    for &n in sizes {
        // CPU: a fair, optimised implementation (cpu_baseline: vectorisable loops on every core
        // with rayon), warmed once so the thread pool exists before the clock runs.
        std::hint::black_box(cpu_baseline::randn_add(n.min(1 << 16)));
        let t = Instant::now();
        let (a, b, mut c) = cpu_baseline::randn_add(n);
        let cpu = t.elapsed().as_secs_f64();
        let t_add = Instant::now();
        cpu_baseline::add(&a, &b, &mut c);
        let cpu_add = t_add.elapsed().as_secs_f64();
        std::hint::black_box(&c);

        // GPU: warm once, then time the seed's sequence ending with a synchronize.
        let warm = (&Tensor::<f32>::randn(&[n], 1)? + &Tensor::<f32>::randn(&[n], 2)?)?;
        warm.synchronize()?;
        drop(warm);
        let t = Instant::now();
        let ga = Tensor::<f32>::randn(&[n], 1)?;
        let gb = Tensor::<f32>::randn(&[n], 2)?;
        let gc = (&ga + &gb)?;
        gc.synchronize()?;
        let gpu = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let gc2 = (&ga + &gb)?;
        gc2.synchronize()?;
        let gpu_add = t.elapsed().as_secs_f64();

        // Transfers, separately: the inputs up, the result down. One untimed round first, so the
        // pinned staging buffers of large pageable copies are allocated before the clock runs.
        drop(Tensor::from_slice(&a, &[n])?);
        let t = Instant::now();
        let ua = Tensor::from_slice(&a, &[n])?;
        let ub = Tensor::from_slice(&b, &[n])?;
        ub.synchronize()?;
        let h2d = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let back = gc.to_vec()?;
        let d2h = t.elapsed().as_secs_f64();
        // The GPU's randn is the CPU's Philox twin (reference::fill_normal, to a few ulp), which
        // is kept for this check only (it is a scalar loop, not a CPU baseline).
        let twin: Vec<f32> = reference::fill_normal(n, 1, 0)
            .iter()
            .zip(&reference::fill_normal(n, 2, 0))
            .map(|(x, y)| x + y)
            .collect();
        let got: f64 = back.iter().map(|&x| x as f64).sum();
        let want: f64 = twin.iter().map(|&x| x as f64).sum();
        let scale: f64 = twin.iter().map(|&x| (x as f64).abs()).sum::<f64>().max(1.0);
        if (got - want).abs() > 1e-4 * scale {
            return Err(format!("n={n}: GPU sum {got} vs the Philox twin's {want}").into());
        }
        drop((ua, ub));
        rows.push(BenchRow {
            n,
            cpu,
            cpu_add,
            gpu,
            gpu_add,
            h2d,
            d2h,
        });
    }
    Ok(rows)
}
