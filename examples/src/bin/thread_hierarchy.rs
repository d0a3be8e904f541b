//! `thread_hierarchy`: seed 003, "Ch. 4: Kernels and the Thread Hierarchy", made runnable.
//!
//! Launches the `thread_hierarchy` kernel (`ops::thread_hierarchy`) on a small 2-D grid (by
//! default grid (3, 2) of blocks (16, 4)): every thread writes its `blockIdx`, `threadIdx`, warp,
//! lane and the SM it ran on (`%smid`). The program prints the map block by block, checks every
//! record except the SM id against the CPU reference (`reference::thread_hierarchy`), and
//! summarises which SMs ran the blocks. A second, larger launch (4 blocks per SM) shows how the
//! hardware spreads blocks over the SMs.
//!
//! Run: `cargo run --release -p cuda-examples --bin thread_hierarchy [-- --grid 3,2 --block 16,4]`
//! (`--quick`, `--device N`, `--json` as for every program).

use clap::Parser;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_examples::timing::GpuTimer;
use cuda_stack_driver::{Context, Stream};
use cuda_stack_kernels::{ops, reference, Kernels};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::process::ExitCode;

/// Seed 003's thread hierarchy, shown by the threads themselves.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
    /// Grid size in blocks, `X,Y`.
    #[arg(long, default_value = "3,2", value_parser = parse_pair)]
    grid: (u32, u32),
    /// Block size in threads, `X,Y` (at most 1024 threads).
    #[arg(long, default_value = "16,4", value_parser = parse_pair)]
    block: (u32, u32),
}

fn parse_pair(s: &str) -> Result<(u32, u32), String> {
    let (a, b) = s
        .split_once(',')
        .ok_or_else(|| format!("`{s}`: expected X,Y (e.g. 3,2)"))?;
    let p = |v: &str| v.trim().parse::<u32>().map_err(|e| format!("`{v}`: {e}"));
    Ok((p(a)?, p(b)?))
}

fn main() -> ExitCode {
    let args = Args::parse();
    run("thread_hierarchy", || body(&args))
}

/// Launches one `thread_hierarchy` grid and returns the records and the GPU time in µs.
fn launch(
    ctx: &Context,
    s: &Stream,
    k: &Kernels,
    grid: (u32, u32),
    block: (u32, u32),
) -> Result<(Vec<u32>, f64), Box<dyn std::error::Error>> {
    let words =
        ops::THREAD_RECORD_WORDS * (grid.0 * grid.1) as usize * (block.0 * block.1) as usize;
    let mut d = s.alloc_zeros::<u32>(words)?;
    let timer = GpuTimer::new(ctx)?;
    let us = timer
        .time(s, |s| ops::thread_hierarchy(k, s, &mut d, grid, block))?
        .as_secs_f64()
        * 1e6;
    Ok((s.clone_dtoh(&d)?, us))
}

/// Checks every record word except the SM id against the CPU reference.
fn check(
    got: &[u32],
    grid: (u32, u32),
    block: (u32, u32),
) -> Result<(), Box<dyn std::error::Error>> {
    let want = reference::thread_hierarchy(grid, block);
    if want.len() != got.len() {
        return Err(format!("{} words from the GPU, {} expected", got.len(), want.len()).into());
    }
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        if i % ops::THREAD_RECORD_WORDS != reference::SMID_WORD && g != w {
            let t = i / ops::THREAD_RECORD_WORDS;
            return Err(format!(
                "thread {t}: word {} is {g} on the GPU but {w} in the CPU reference \
                 (record [bx, by, tx, ty, warp, lane, smid, g])",
                i % ops::THREAD_RECORD_WORDS
            )
            .into());
        }
    }
    Ok(())
}

fn body(args: &Args) -> ProgramResult {
    let mut out = Out::new(args.common.json);
    let ctx = Context::new(args.common.device)?;
    let dev = ctx.device();
    let lim = *ctx.limits();
    let s = ctx.new_stream()?;
    let k = Kernels::get(&ctx)?;
    let (grid, block) = (args.grid, args.block);
    let total = [grid.0, grid.1, block.0, block.1]
        .iter()
        .map(|&d| u64::from(d))
        .product::<u64>();
    if total == 0 {
        return Err("grid and block must have at least one thread in each dimension".into());
    }
    if total > 1 << 16 {
        return Err("this map is meant to be read: use at most 65536 threads in all".into());
    }
    let per_block = block.0 * block.1;
    out.say(format!(
        "thread_hierarchy on device {} ({}, compute capability {}, {} SMs)\n",
        dev.ordinal(),
        dev.name()?,
        lim.compute_capability,
        lim.sm_count
    ));
    out.say(
        "The hierarchy (seed 003, Ch. 4): a kernel launch is a GRID of BLOCKS; a block is up to \
         1024 THREADS\nthat share memory and __syncthreads() and run on one SM; the SM executes a \
         block's threads in\nWARPS of 32 (consecutive linear thread ids tid = ty*blockDim.x + tx); \
         a thread's LANE is its place\nin its warp. Blocks are independent: the hardware puts them \
         on whichever SM is free.",
    );
    let warps_per_block = per_block.div_ceil(32);
    out.say(format!(
        "\nLaunch: grid ({}, {}) = {} blocks, block ({}, {}) = {} threads = {} warp(s) per block, \
         {} threads in all.",
        grid.0,
        grid.1,
        grid.0 * grid.1,
        block.0,
        block.1,
        per_block,
        warps_per_block,
        grid.0 * grid.1 * per_block
    ));

    let (rec, us) = launch(&ctx, &s, &k, grid, block)?;
    check(&rec, grid, block)?;
    out.say(format!(
        "GPU time of the launch: {us:.1} µs. Every record matches the CPU reference \
         (blockIdx, threadIdx, warp, lane, global id).\n"
    ));

    let w = ops::THREAD_RECORD_WORDS;
    let mut blocks_json = Vec::new();
    let mut sm_of_block: BTreeMap<u32, Vec<(u32, u32)>> = BTreeMap::new();
    for by in 0..grid.1 {
        for bx in 0..grid.0 {
            let b = (by * grid.0 + bx) as usize;
            let first = b * per_block as usize * w;
            let sm = rec[first + reference::SMID_WORD];
            // All threads of a block run on one SM.
            let same_sm =
                (0..per_block as usize).all(|t| rec[first + t * w + reference::SMID_WORD] == sm);
            if !same_sm {
                return Err(format!("block ({bx}, {by}) reports more than one SM id").into());
            }
            sm_of_block.entry(sm).or_default().push((bx, by));
            out.say(format!(
                "block ({bx}, {by})  ran on SM {sm:>3}   cells: warp:lane  (row = threadIdx.y, \
                 column = threadIdx.x)"
            ));
            let mut threads = Vec::new();
            for ty in 0..block.1 {
                let mut line = format!("  ty={ty:<2} ");
                for tx in 0..block.0 {
                    let t = (ty * block.0 + tx) as usize;
                    let r = &rec[first + t * w..first + t * w + w];
                    line += &format!(" {}:{:<2}", r[4], r[5]);
                    threads.push(
                        json!({"tx": r[2], "ty": r[3], "warp": r[4], "lane": r[5], "g": r[7]}),
                    );
                }
                out.say(line);
            }
            blocks_json.push(json!({"block": [bx, by], "sm": sm, "threads": threads}));
        }
    }
    out.say(format!(
        "\nSMs used: {} of {} for {} blocks.",
        sm_of_block.len(),
        lim.sm_count,
        grid.0 * grid.1
    ));
    for (sm, bl) in &sm_of_block {
        let list: Vec<String> = bl.iter().map(|(x, y)| format!("({x},{y})")).collect();
        out.say(format!("  SM {sm:>3}: blocks {}", list.join(" ")));
    }
    out.put("device", json!(dev.name()?));
    out.put("grid", json!([grid.0, grid.1]));
    out.put("block", json!([block.0, block.1]));
    out.put("gpu_us", json!(us));
    out.put("blocks", Value::Array(blocks_json));
    out.put("sms_used", json!(sm_of_block.len()));

    // A bigger grid: how the blocks spread over the SMs.
    let big_grid = (4 * lim.sm_count, 1);
    let big_block = (256, 1);
    let (rec, us) = launch(&ctx, &s, &k, big_grid, big_block)?;
    check(&rec, big_grid, big_block)?;
    let mut per_sm: BTreeMap<u32, u32> = BTreeMap::new();
    for b in 0..big_grid.0 as usize {
        *per_sm
            .entry(rec[b * 256 * w + reference::SMID_WORD])
            .or_default() += 1;
    }
    let (lo, hi) = (
        per_sm.values().min().copied().unwrap_or(0),
        per_sm.values().max().copied().unwrap_or(0),
    );
    out.say(format!(
        "\nA larger launch: grid ({}, 1) of 256-thread blocks (4 per SM) took {us:.1} µs and ran \
         on {} of {} SMs,\n{lo} to {hi} blocks per SM (records checked against the CPU reference). \
         The program never\nchose an SM: the block scheduler did, which is why the same code \
         scales to GPUs with more or fewer SMs.",
        big_grid.0,
        per_sm.len(),
        lim.sm_count
    ));
    out.put(
        "large_launch",
        json!({"blocks": big_grid.0, "sms_used": per_sm.len(), "min_blocks_per_sm": lo,
               "max_blocks_per_sm": hi, "gpu_us": us}),
    );
    out.finish();
    Ok(())
}
