//! `memory_stats`: seed 000, Troubleshooting 1 ("CUDA Out of Memory": `memory_allocated()` vs
//! `memory_reserved()`, and `empty_cache()`), made runnable.
//!
//! Allocates tensor-sized buffers through `cuda-stack-runtime`'s caching allocator (PyTorch's
//! `CUDACachingAllocator` counterpart) and prints, after every step, what the allocator says
//! (`memory_allocated`, `memory_reserved`) and what the driver says (`cuMemGetInfo`'s free
//! memory: what `nvidia-smi` sees):
//!
//! 1. allocate → allocated and reserved grow together (a *cache miss*: a real driver allocation);
//! 2. free → allocated drops, reserved stays (the block is cached, the driver still has it given
//!    out: `nvidia-smi` does not see the memory come back);
//! 3. allocate the same size again → a *cache hit*: the same block (same address), no driver
//!    call, much faster;
//! 4. `empty_cache()` → reserved drops to what live buffers hold, and the device's free memory
//!    rises again.
//!
//! Each step is checked against the rule it illustrates (the byte counts must move by exactly the
//! block sizes), data written to the buffers is read back and compared, and the program ends with
//! `memory_summary()`.
//!
//! Run: `cargo run --release -p cuda-examples --bin memory_stats [-- --quick] [--device N] [--json]`

use clap::Parser;
use cuda_examples::bench::Table;
use cuda_examples::cli::Common;
use cuda_examples::exit::{self, ProgramResult};
use cuda_examples::say;
use cuda_stack_runtime::caching::format_bytes;
use cuda_stack_runtime::{self as rt, Runtime};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(about = "Seed 000 Troubleshooting 1: allocated vs reserved memory, empty_cache")]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    exit::run("memory_stats", || body(Args::parse()))
}

/// The allocator's and the driver's view after one step.
struct Snapshot {
    allocated: usize,
    reserved: usize,
    device_free: usize,
}

fn snapshot(runtime: &Runtime) -> Result<Snapshot, Box<dyn std::error::Error>> {
    // Frees are stream-ordered; let them land so cuMemGetInfo reflects them.
    runtime.synchronize()?;
    Ok(Snapshot {
        allocated: rt::memory_allocated()?,
        reserved: rt::memory_reserved()?,
        device_free: runtime.context().mem_get_info()?.0,
    })
}

/// Fails with `what` when `cond` is false.
fn check(cond: bool, what: String) -> ProgramResult {
    if cond {
        Ok(())
    } else {
        Err(format!("allocator check failed: {what}").into())
    }
}

/// Collects the table rows and the JSON steps.
struct Log {
    table: Table,
    steps: Vec<serde_json::Value>,
    first_free: usize,
}

impl Log {
    fn add(&mut self, step: &str, s: &Snapshot, took: Option<Duration>) {
        let delta = s.device_free as i128 - self.first_free as i128;
        let sign = if delta > 0 { "+" } else { "-" };
        let took_us = took.map(|d| d.as_secs_f64() * 1e6);
        self.table.row(&[
            step.to_string(),
            format_bytes(s.allocated),
            format_bytes(s.reserved),
            format!(
                "{} ({sign}{})",
                format_bytes(s.device_free),
                format_bytes(delta.unsigned_abs() as usize)
            ),
            took_us.map_or(String::new(), |t| format!("{t:.1} µs")),
        ]);
        self.steps.push(serde_json::json!({
            "step": step,
            "allocated": s.allocated,
            "reserved": s.reserved,
            "device_free": s.device_free,
            "call_us": took_us,
        }));
    }
}

fn timed<R>(f: impl FnOnce() -> R) -> (R, Duration) {
    let t = Instant::now();
    let r = f();
    (r, t.elapsed())
}

fn body(args: Args) -> ProgramResult {
    let q = args.common.json;
    rt::set_device(args.common.device)?;
    let runtime = Runtime::current()?;
    let (_, total) = runtime.context().mem_get_info()?;
    say!(
        q,
        "memory_stats on {} ({} total): torch.cuda.memory_allocated / memory_reserved, \
         step by step",
        runtime.device().name()?,
        format_bytes(total)
    );
    // "Tensors": a big activation-sized x, a 1024×1024 weight, a bias (small pool).
    let nx: usize = args.common.pick(4 << 20, 64 << 20); // f32: 16 MiB / 256 MiB
    let nw: usize = 1024 * 1024;
    let nb: usize = 1024;

    let s0 = snapshot(runtime)?;
    let mut log = Log {
        table: Table::new(&[
            "step",
            "allocated",
            "reserved",
            "device free (Δ since start)",
            "call",
        ]),
        steps: Vec::new(),
        first_free: s0.device_free,
    };
    log.add("start", &s0, None);

    // 1. Allocations: cache misses, each one a driver allocation.
    let (x, t_miss) = timed(|| rt::malloc_zeros::<f32>(nx));
    let x = x?;
    let s1 = snapshot(runtime)?;
    log.add(&format!("x = zeros({nx}) f32"), &s1, Some(t_miss));
    check(
        s1.allocated == s0.allocated + x.block_bytes()
            && s1.reserved == s0.reserved + x.block_bytes(),
        format!(
            "a new {}-byte block must add to allocated and reserved",
            x.block_bytes()
        ),
    )?;
    let (w, t) = timed(|| rt::malloc_zeros::<f32>(nw));
    let w = w?;
    log.add("w = zeros(1024, 1024)", &snapshot(runtime)?, Some(t));
    let (b, t) = timed(|| rt::malloc_zeros::<f32>(nb));
    let mut b = b?;
    let s2 = snapshot(runtime)?;
    log.add("b = zeros(1024) (small pool)", &s2, Some(t));

    // The buffers are real: write and read back.
    let pattern: Vec<f32> = (0..nx).map(|i| (i % 1000) as f32 * 0.5).collect();
    let mut x = x;
    rt::memcpy_htod(&pattern, &mut x)?;
    if rt::clone_dtoh(&x)? != pattern {
        return Err("x does not read back what was written".into());
    }
    let bias: Vec<f32> = (0..nb).map(|i| i as f32).collect();
    rt::memcpy_htod(&bias, &mut b)?;
    if rt::clone_dtoh(&b)? != bias || rt::clone_dtoh(&w)?.iter().any(|&v| v != 0.0) {
        return Err("b or w does not hold what was written".into());
    }
    let x_addr = x.as_raw_ptr();
    let x_block = x.block_bytes();

    // 2. Free x: back to the cache, not to the driver.
    let ((), t) = timed(|| drop(x));
    let s3 = snapshot(runtime)?;
    log.add("del x", &s3, Some(t));
    check(
        s3.allocated + x_block == s2.allocated && s3.reserved == s2.reserved,
        "freeing x must lower allocated by its block and leave reserved unchanged".into(),
    )?;

    // 3. The same size again: a cache hit, the same block.
    let hits_before = rt::memory_stats()?.large.cache_hits;
    let (x2, t_hit) = timed(|| rt::malloc_zeros::<f32>(nx));
    let x2 = x2?;
    let s4 = snapshot(runtime)?;
    log.add(&format!("x2 = zeros({nx}) (cache hit)"), &s4, Some(t_hit));
    let hits = rt::memory_stats()?.large.cache_hits - hits_before;
    check(
        hits == 1 && s4.reserved == s3.reserved && x2.as_raw_ptr() == x_addr,
        format!(
            "re-allocating x's size must reuse its cached block (hits +{hits}, reserved {} -> {}, \
             address {:#x} vs {x_addr:#x})",
            s3.reserved,
            s4.reserved,
            x2.as_raw_ptr()
        ),
    )?;
    if rt::clone_dtoh(&x2)?.iter().any(|&v| v != 0.0) {
        return Err("x2 = zeros(..) reused x's block but is not all zeros".into());
    }

    // A size the cache does not have: a miss, reserved grows.
    let ny = nx + (2 << 20);
    let (y, t) = timed(|| rt::malloc_zeros::<f32>(ny));
    let y = y?;
    let s5 = snapshot(runtime)?;
    log.add(&format!("y = zeros({ny}) (new size: miss)"), &s5, Some(t));
    check(
        s5.reserved == s4.reserved + y.block_bytes(),
        "a size with no cached block must reserve a new one".into(),
    )?;

    // Free everything: allocated goes to 0, reserved stays.
    drop((x2, y, w, b));
    let s6 = snapshot(runtime)?;
    log.add("del x2, y, w, b", &s6, None);
    check(
        s6.allocated == s0.allocated && s6.reserved == s5.reserved,
        "with everything freed, allocated must be back to the start and reserved unchanged".into(),
    )?;

    // 4. empty_cache: the cached blocks go back to the driver.
    let (r, t) = timed(rt::empty_cache);
    r?;
    let s7 = snapshot(runtime)?;
    log.add("torch.cuda.empty_cache()", &s7, Some(t));
    check(
        s7.reserved == s7.allocated,
        "after empty_cache, reserved must equal allocated".into(),
    )?;

    let stats = rt::memory_stats()?;
    if q {
        let j = serde_json::json!({
            "program": "memory_stats",
            "device_total": total,
            "steps": log.steps,
            "miss_alloc_us": t_miss.as_secs_f64() * 1e6,
            "hit_alloc_us": t_hit.as_secs_f64() * 1e6,
            "cache_hits": stats.small.cache_hits + stats.large.cache_hits,
            "cache_misses": stats.small.cache_misses + stats.large.cache_misses,
            "verified": true,
        });
        println!("{j}");
        return Ok(());
    }
    println!();
    log.table.print();
    println!(
        "allocation from the driver (miss): {:.1} µs; from the cache (hit): {:.1} µs (both include \
         the zeroing memset's launch)",
        t_miss.as_secs_f64() * 1e6,
        t_hit.as_secs_f64() * 1e6
    );
    println!(
        "\n- allocated = bytes in live tensors (rounded to 512 B in the small pool, 2 MiB in the \
         large pool)\n- reserved  = allocated + cached free blocks: what the process holds, and \
         what nvidia-smi shows\n- empty_cache() hands the cached blocks back; it frees no live \
         tensor, so it cannot fix an OOM by itself\n"
    );
    print!("{}", rt::memory_summary()?);
    Ok(())
}
