//! `peer_bandwidth`: what the GPUs of this machine can do to each other's memory, measured.
//!
//! For every ordered pair of devices: whether it can access the other directly
//! (`Device::can_access_peer`), then — with peer access enabled (`Context::enable_peer_access`)
//! — the bandwidth of `Stream::memcpy_peer` one way (GPU time between events on the
//! destination's stream, median of several copies) and both ways at once (two copies in flight,
//! host clock). Beside it, each device's own device-to-device copy, the ceiling a peer copy is
//! compared with. Every copy is checked against the data it should carry.
//!
//! On a machine with one GPU there are no pairs: the program says so, measures the device's own
//! copy (and `memcpy_peer` within the device, which is that copy) and exits successfully.
//!
//! Run: `cargo run --release -p cuda-examples --bin peer_bandwidth` (`--quick`: 64 MiB, few
//! repetitions; `--mib N`: the copy size).

use clap::Parser;
use cuda_examples::bench::{median, Table};
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_examples::timing::GpuTimer;
use cuda_stack_driver::{Context, Device, Stream};
use serde_json::json;
use std::process::ExitCode;
use std::time::Instant;

/// Peer-to-peer bandwidth between every pair of GPUs.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
    /// Bytes per copy, in MiB (default 256; `--quick`: 64).
    #[arg(long)]
    mib: Option<usize>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run("peer_bandwidth", || body(&args))
}

/// GB/s for `bytes` moved in `secs`.
fn gbps(bytes: usize, secs: f64) -> f64 {
    bytes as f64 / secs / 1e9
}

/// A buffer of `n` floats on `s`, element `i` = `i + tag` (exact in f32 below 2^24).
fn filled(
    s: &Stream,
    n: usize,
    tag: f32,
) -> cuda_stack_driver::Result<cuda_stack_driver::DeviceBuffer<f32>> {
    let host: Vec<f32> = (0..n).map(|i| (i % (1 << 20)) as f32 + tag).collect();
    s.clone_htod(&host)
}

fn check(
    s: &Stream,
    b: &cuda_stack_driver::DeviceSlice<f32>,
    tag: f32,
    what: &str,
) -> ProgramResult {
    let got = s.clone_dtoh(b)?;
    let bad = got
        .iter()
        .enumerate()
        .position(|(i, &v)| v != (i % (1 << 20)) as f32 + tag);
    match bad {
        None => Ok(()),
        Some(i) => Err(format!(
            "{what}: element {i} is {}, expected {}",
            got[i],
            (i % (1 << 20)) as f32 + tag
        )
        .into()),
    }
}

fn body(args: &Args) -> ProgramResult {
    let c = &args.common;
    let mut out = Out::new(c.json);
    let mib = args.mib.unwrap_or(c.pick(64, 256));
    let bytes = mib << 20;
    let n = bytes / 4;
    let reps = c.pick(3, 10);
    let devices = Device::all()?;
    out.say(format!(
        "peer_bandwidth: {} GPU(s), copies of {mib} MiB, median of {reps}",
        devices.len()
    ));
    // Each device's own copy: the ceiling.
    let mut local = Vec::new();
    let mut table = Table::new(&["device", "name", "D2D copy GB/s", "memcpy_peer within GB/s"]);
    for d in &devices {
        let ctx = Context::new(d.ordinal())?;
        let s = ctx.new_stream()?;
        let timer = GpuTimer::new(&ctx)?;
        let src = filled(&s, n, 1.0)?;
        let mut dst = s.alloc_zeros::<f32>(n)?;
        let t_copy = timer.median_per_call(&s, reps, 1, |s| s.memcpy_dtod(&src, &mut dst))?;
        let t_peer = timer.median_per_call(&s, reps, 1, |s| s.memcpy_peer(&src, &mut dst))?;
        check(&s, &dst, 1.0, "copy within the device")?;
        // A copy reads and writes every byte: 2 × bytes of DRAM traffic; GB/s as bytes moved.
        let (a, b) = (gbps(bytes, t_copy), gbps(bytes, t_peer));
        table.row(&[
            d.ordinal().to_string(),
            d.name()?,
            format!("{a:.0}"),
            format!("{b:.0}"),
        ]);
        local.push(json!({"device": d.ordinal(), "d2d_gbps": a, "peer_within_gbps": b}));
    }
    if !out.is_json() {
        table.print();
    }
    out.put("bytes", json!(bytes));
    out.put("local", json!(local));
    if devices.len() < 2 {
        out.say(
            "This machine has one GPU: there is no pair of devices to measure. Peer access of a \
             device to itself needs no mapping (can_access_peer(d, d) is true, enable_peer_access \
             is a no-op), and memcpy_peer within it is the copy above. Run on a machine with two \
             or more GPUs for the peer figures.",
        );
        out.put("pairs", json!([]));
        out.put("note", json!("one GPU: no peer pairs measured"));
        out.finish();
        return Ok(());
    }
    let mut pairs = Vec::new();
    let mut table = Table::new(&["src -> dst", "can access", "one way GB/s", "both ways GB/s"]);
    for a in &devices {
        for b in &devices {
            if a == b {
                continue;
            }
            let (ca, cb) = (Context::new(a.ordinal())?, Context::new(b.ordinal())?);
            let can = a.can_access_peer(b)? && b.can_access_peer(a)?;
            if can {
                ca.enable_peer_access(&cb)?;
                cb.enable_peer_access(&ca)?;
            }
            let (sa, sb) = (ca.new_stream()?, cb.new_stream()?);
            let src = filled(&sa, n, 2.0)?;
            let mut dst = sb.alloc_zeros::<f32>(n)?;
            let timer = GpuTimer::new(&cb)?;
            let one = timer.median_per_call(&sb, reps, 1, |s| s.memcpy_peer(&src, &mut dst))?;
            check(&sb, &dst, 2.0, "one-way peer copy")?;
            // Both ways at once: a -> b on b's stream and b -> a on a's stream.
            let back_src = filled(&sb, n, 3.0)?;
            let mut back_dst = sa.alloc_zeros::<f32>(n)?;
            let mut samples = Vec::new();
            for _ in 0..reps {
                sa.synchronize()?;
                sb.synchronize()?;
                let t = Instant::now();
                sb.memcpy_peer(&src, &mut dst)?;
                sa.memcpy_peer(&back_src, &mut back_dst)?;
                sa.synchronize()?;
                sb.synchronize()?;
                samples.push(t.elapsed().as_secs_f64());
            }
            check(&sa, &back_dst, 3.0, "reverse peer copy")?;
            let (g1, g2) = (gbps(bytes, one), gbps(2 * bytes, median(&samples)));
            table.row(&[
                format!("{} -> {}", a.ordinal(), b.ordinal()),
                can.to_string(),
                format!("{g1:.1}"),
                format!("{g2:.1}"),
            ]);
            pairs.push(json!({
                "src": a.ordinal(), "dst": b.ordinal(), "peer_access": can,
                "one_way_gbps": g1, "both_ways_gbps": g2,
            }));
        }
    }
    if !out.is_json() {
        table.print();
    }
    out.say(
        "one way: GPU time of the copy on the destination's stream; both ways: host clock with \
         a copy in flight in each direction. Without peer access the driver stages copies \
         through the host.",
    );
    out.put("pairs", json!(pairs));
    out.finish();
    Ok(())
}
