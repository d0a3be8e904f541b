//! `soak`: sixteen threads share one device through every layer for minutes, and the process's
//! memory must not grow.
//!
//! Each thread runs one kind of work until the time is up (of 16 threads: 2 launching, 6
//! allocating, 4 tensor, 4 graph + copy threads):
//! - **launches**: typed kernel launches through `cuda-stack-kernels` (`axpy`) on the thread's stream;
//! - **alloc/free**: device buffers of changing sizes through `cuda-stack-driver` (stream-ordered
//!   `cuMemAllocAsync`/`cuMemFreeAsync`) and through the runtime's caching allocator, each used on
//!   another stream before it is dropped (cross-stream events);
//! - **tensors**: `Tensor` ops (matmul, add, relu, sum, transpose + contiguous, `to_vec`) on the
//!   thread's own stream (`use_stream`);
//! - **graphs + async copies**: replays of a captured graph of ten launches, and async pinned
//!   host↔device copies.
//!
//! Every second it samples the process's resident memory (`/proc/self/statm`) and its device
//! memory in live allocations (the default memory pool's used bytes, `Context::pool_usage`; not
//! `cuMemGetInfo`, which counts every process on the device) and prints a line. After the warm-up (the first quarter of the
//! run), neither may grow by more than its tolerance, or the program fails. It also reports how
//! many launches and allocation cycles ran (the targets are 10^6 and 10^5 for a full run).
//!
//! Run: `cargo run --release -p cuda-examples --bin soak [-- --seconds 180] [--quick]`; under
//! `compute-sanitizer --tool memcheck --leak-check full` use `--quick`.

use clap::Parser;
use cuda_examples::cli::Common;
use cuda_examples::exit::{self, ProgramResult};
use cuda_stack_driver::{Context, PinnedBuffer};
use cuda_stack_kernels::{ops, Kernels};
use cuda_stack_runtime::Tensor;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(about = "Soak: 16 threads through every layer; fails if host or device memory grows")]
struct Args {
    #[command(flatten)]
    common: Common,
    /// How long to run, in seconds (`--quick`: 4).
    #[arg(long, default_value_t = 180)]
    seconds: u64,
    /// Worker threads (a multiple of 8: see `body` for the mix of work).
    #[arg(long, default_value_t = 16)]
    threads: usize,
    /// Allowed growth of resident host memory after warm-up, MiB.
    #[arg(long, default_value_t = 64)]
    rss_tolerance_mib: u64,
    /// Allowed growth of used device memory after warm-up, MiB.
    #[arg(long, default_value_t = 256)]
    device_tolerance_mib: u64,
}

type WorkResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[derive(Default)]
struct Counters {
    launches: AtomicU64,
    alloc_cycles: AtomicU64,
    tensor_ops: AtomicU64,
    graph_replays: AtomicU64,
    async_copies: AtomicU64,
}

fn main() -> ExitCode {
    exit::run("soak", || body(Args::parse()))
}

fn body(args: Args) -> ProgramResult {
    let seconds = if args.common.quick {
        4
    } else {
        args.seconds.max(4)
    };
    let threads = args.threads.max(8) / 8 * 8;
    let ctx = Context::new(args.common.device)?;
    cuda_stack_runtime::set_device(args.common.device)?;
    // Keep freed memory in the device's stream-ordered pool (as PyTorch's caching allocator
    // keeps it). With the driver's default threshold of 0 the pool gives memory back at every
    // synchronize and must map it again on the next allocation; measured on an H100, that made
    // allocating threads wait minutes behind the launch threads saturating the GPU.
    if ctx.limits().memory_pools {
        ctx.set_pool_release_threshold(u64::MAX)?;
    }
    let kernels = Kernels::get(&ctx)?;
    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    println!(
        "soak: {threads} threads on device {} ({}) for {seconds} s",
        args.common.device,
        ctx.device().name()?
    );
    let mut workers = Vec::new();
    for t in 0..threads {
        let (ctx, k, c, stop) = (ctx.clone(), kernels.clone(), counters.clone(), stop.clone());
        let device = args.common.device;
        workers.push(std::thread::spawn(move || -> WorkResult {
            cuda_stack_runtime::set_device(device)?;
            // Per 8 threads: 1 launching, 3 allocating, 2 tensor, 2 graph + copy threads. (Four
            // launch-only threads that never slept starved the allocating ones for minutes on an
            // H100: cuMemAllocAsync waits for a driver lock that threads issuing cuLaunchKernel
            // back to back almost never let go. The busy threads now pause between batches.)
            let r = match t % 8 {
                0 => launches(&ctx, &k, &c, &stop),
                1 | 2 | 5 => alloc_free(&ctx, &c, &stop, t as u64),
                3 | 6 => tensors(&ctx, &c, &stop, t as u64),
                _ => graphs_and_copies(&ctx, &k, &c, &stop),
            };
            if r.is_err() {
                stop.store(true, Ordering::SeqCst);
            }
            r
        }));
    }
    let start = Instant::now();
    let mut samples: Vec<(f64, u64, u64)> = Vec::new();
    while start.elapsed() < Duration::from_secs(seconds) && !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_secs(1));
        let rss = rss_bytes();
        // This process's allocations (the device's default pool), not `cuMemGetInfo`'s
        // device-wide figure: other processes on the device (the other programs of
        // `programs_quick`, which run at the same time) must not count as our growth. A device
        // without memory pools (every allocation then `cuMemAlloc`) has only the latter.
        let used = if ctx.limits().memory_pools {
            ctx.pool_usage()?.used
        } else {
            let (free, total) = ctx.mem_get_info()?;
            (total - free) as u64
        };
        let t = start.elapsed().as_secs_f64();
        println!(
            "  t={t:6.1}s  rss {:8.1} MiB  device {:8.1} MiB  launches {:>10}  alloc cycles {:>9}  tensor ops {:>8}  replays {:>7}  async copies {:>7}",
            mib(rss),
            mib(used),
            counters.launches.load(Ordering::Relaxed),
            counters.alloc_cycles.load(Ordering::Relaxed),
            counters.tensor_ops.load(Ordering::Relaxed),
            counters.graph_replays.load(Ordering::Relaxed),
            counters.async_copies.load(Ordering::Relaxed),
        );
        samples.push((t, rss, used));
    }
    stop.store(true, Ordering::SeqCst);
    for (i, w) in workers.into_iter().enumerate() {
        w.join()
            .map_err(|_| format!("worker {i} panicked"))?
            .map_err(|e| format!("worker {i}: {e}"))?;
    }
    ctx.synchronize()?;
    // Hand cached blocks back, so a leak checker sees only real leaks.
    cuda_stack_runtime::empty_cache()?;
    let drop_errors = ctx.take_drop_errors();
    if !drop_errors.is_empty() {
        return Err(format!("{} errors in Drop: {:?}", drop_errors.len(), drop_errors).into());
    }
    report(&args, &samples, &counters)
}

fn report(args: &Args, samples: &[(f64, u64, u64)], c: &Counters) -> ProgramResult {
    if samples.len() < 2 {
        return Err("too few samples".into());
    }
    let warm = (samples.len() / 4).max(1);
    let launches = c.launches.load(Ordering::Relaxed);
    let cycles = c.alloc_cycles.load(Ordering::Relaxed);
    let mut failed = Vec::new();
    for (name, pick, tol) in [
        ("rss", 1usize, args.rss_tolerance_mib),
        ("device", 2usize, args.device_tolerance_mib),
    ] {
        let v = |s: &(f64, u64, u64)| if pick == 1 { s.1 } else { s.2 };
        let first = v(&samples[0]);
        let base = v(&samples[warm - 1]);
        let max = samples[warm..].iter().map(v).max().unwrap_or(base);
        let last = v(samples.last().unwrap_or(&samples[0]));
        let growth = max.saturating_sub(base);
        println!(
            "soak: {name:6} first {:8.1} MiB, after warm-up {:8.1} MiB, max {:8.1} MiB, last {:8.1} MiB: growth {:6.1} MiB (tolerance {tol} MiB)",
            mib(first),
            mib(base),
            mib(max),
            mib(last),
            mib(growth)
        );
        if growth > tol << 20 {
            failed.push(name);
        }
    }
    println!(
        "soak: {launches} launches (target 10^6: {}), {cycles} allocation cycles (target 10^5: {}), {} tensor ops, {} graph replays, {} async copies",
        if launches >= 1_000_000 { "met" } else { "not met" },
        if cycles >= 100_000 { "met" } else { "not met" },
        c.tensor_ops.load(Ordering::Relaxed),
        c.graph_replays.load(Ordering::Relaxed),
        c.async_copies.load(Ordering::Relaxed),
    );
    if !failed.is_empty() {
        return Err(format!("memory grew after warm-up: {}", failed.join(", ")).into());
    }
    println!("soak: PASS");
    Ok(())
}

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

/// Resident set size of this process (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

fn launches(ctx: &Context, k: &Kernels, c: &Counters, stop: &AtomicBool) -> WorkResult {
    let s = ctx.new_stream()?;
    let n = 4096;
    let x = s.clone_htod(&vec![1.0f32; n])?;
    let mut y = s.alloc_zeros::<f32>(n)?;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..1000 {
            ops::axpy(k, &s, 1e-6f32, &x, &mut y)?;
        }
        s.synchronize()?;
        c.launches.fetch_add(1000, Ordering::Relaxed);
        // Let go of the driver between batches: back-to-back launches from a thread that never
        // sleeps starve the allocating threads (the driver's locks are not fair).
        std::thread::sleep(Duration::from_micros(500));
    }
    Ok(())
}

/// A small deterministic generator for sizes.
fn lcg(state: &mut u64) -> u64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    *state >> 33
}

/// Runs `f`, and says so when it took longer than a second (a stall, not a leak, but worth
/// seeing).
fn timed<R>(what: &str, f: impl FnOnce() -> R) -> R {
    let t = Instant::now();
    let r = f();
    if t.elapsed() > Duration::from_secs(1) {
        eprintln!(
            "soak: slow step: {what} took {:.1} s",
            t.elapsed().as_secs_f64()
        );
    }
    r
}

fn alloc_free(ctx: &Context, c: &Counters, stop: &AtomicBool, seed: u64) -> WorkResult {
    let home = ctx.new_stream()?;
    let other = ctx.new_stream()?;
    let mut state = seed;
    while !stop.load(Ordering::Relaxed) {
        for i in 0..100 {
            let len = 1 + (lcg(&mut state) % (1 << 18)) as usize;
            if i % 2 == 0 {
                let mut b = timed("alloc_zeros", || home.alloc_zeros::<u8>(len))?;
                // a foreign use, ordered by events
                timed("memset on another stream", || other.memset_bytes(&mut b, 1))?;
                timed("free", || drop(b));
            } else {
                let mut b = timed("malloc_zeros", || {
                    cuda_stack_runtime::malloc_zeros::<u8>(len)
                })?;
                timed("memset on another stream", || other.memset_bytes(&mut b, 2))?;
                timed("cached free", || drop(b));
            }
        }
        timed("home synchronize", || home.synchronize())?;
        timed("other synchronize", || other.synchronize())?;
        c.alloc_cycles.fetch_add(100, Ordering::Relaxed);
    }
    Ok(())
}

fn tensors(ctx: &Context, c: &Counters, stop: &AtomicBool, seed: u64) -> WorkResult {
    let s = ctx.new_stream()?;
    let _on = cuda_stack_runtime::use_stream(&s);
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let a = Tensor::<f32>::rand(&[64, 48], seed + i)?;
        let b = Tensor::<f32>::ones(&[48, 32])?;
        let m = a.matmul(&b)?.relu()?;
        let t = m.transpose(0, 1)?.contiguous()?;
        let total = t.add(&t)?.sum_all()?.item()?;
        if !total.is_finite() {
            return Err("non-finite tensor result".into());
        }
        let _ = m.to_vec()?;
        c.tensor_ops.fetch_add(8, Ordering::Relaxed);
        i += 1;
        if i % 16 == 0 {
            std::thread::sleep(Duration::from_micros(500)); // as in `launches`
        }
    }
    Ok(())
}

fn graphs_and_copies(ctx: &Context, k: &Kernels, c: &Counters, stop: &AtomicBool) -> WorkResult {
    let s = ctx.new_stream()?;
    let n = 1 << 16;
    let x = timed("graph thread clone_htod", || s.clone_htod(&vec![1.0f32; n]))?;
    let mut y = s.alloc_zeros::<f32>(n)?;
    let exec = ctx
        .capture(|cs| {
            for _ in 0..10 {
                ops::axpy(k, cs, 1e-6f32, &x, &mut y).map_err(|e| {
                    cuda_stack_driver::Error::Unsupported {
                        what: "axpy during capture",
                        why: e.to_string(),
                    }
                })?;
            }
            Ok(())
        })?
        .instantiate()?;
    let host = timed("PinnedBuffer::from_slice", || {
        PinnedBuffer::from_slice(ctx, &vec![2.0f32; n])
    })?;
    let mut back = PinnedBuffer::<f32>::zeroed(ctx, n)?;
    let mut dev = s.alloc_zeros::<f32>(n)?;
    while !stop.load(Ordering::Relaxed) {
        timed("10 graph replays", || -> cuda_stack_driver::Result<()> {
            for _ in 0..10 {
                exec.launch(&s)?;
            }
            Ok(())
        })?;
        timed("async htod + wait", || {
            s.copy_htod_async(&host, &mut dev)?.wait()
        })?;
        timed("async dtoh + wait", || {
            s.copy_dtoh_async(&dev, &mut back)?.wait()
        })?;
        if back[n - 1] != 2.0 {
            return Err("async copy round trip".into());
        }
        c.graph_replays.fetch_add(10, Ordering::Relaxed);
        c.launches.fetch_add(100, Ordering::Relaxed);
        c.async_copies.fetch_add(2, Ordering::Relaxed);
    }
    s.synchronize()?;
    Ok(())
}
