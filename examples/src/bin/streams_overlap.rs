//! `streams_overlap`: seed 003, "Ch. 5: Heterogeneous & Async Programming" (streams are ordered
//! queues; work in different streams can overlap), made runnable.
//!
//! The same job, host→device copy, compute, device→host copy of a large array cut into chunks,
//! is queued twice: all chunks on one stream, then chunk `c` on stream `c % N` (N = `--streams`,
//! default 4). Host memory is pinned (`PinnedBuffer`, one input and one output buffer per chunk)
//! and the copies are asynchronous (`copy_htod_async` / `copy_dtoh_async`, whose `PendingCopy`
//! guards borrow the pinned buffers until the copies finish). The compute per chunk is a chain of
//! `ops::scale` passes ending in `ops::tanh`; the number of passes is calibrated at start so the
//! compute takes about as long as one chunk's host→device copy (`--passes` overrides).
//!
//! Every stage is bracketed by CUDA timing events; the program prints the total time of each
//! configuration (median of several runs), how much stage time overlapped, and a text timeline
//! of the last run, e.g. `stream 0 |[H2D ###][compute ###][D2H ##]`, scaled to the terminal
//! width (`$COLUMNS`, default 100). The results are checked against a CPU reference (the scale
//! passes are bit-exact; `tanhf` is within 2 ulp).
//!
//! Run: `cargo run --release -p cuda-examples --bin streams_overlap [-- --streams 4]`
//! (`--quick` for a 16 MiB array).

use clap::Parser;
use cuda_examples::bench::{median, Table};
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_examples::output::Out;
use cuda_stack_driver::{Context, DeviceBuffer, DeviceSlice, Event, PinnedBuffer, Stream};
use cuda_stack_kernels::{ops, Kernels};
use serde_json::{json, Value};
use std::process::ExitCode;

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Copy/compute overlap with several streams and pinned memory, measured and drawn.
#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    common: Common,
    /// Streams (and chunks) for the overlapped run.
    #[arg(long, default_value_t = 4)]
    streams: usize,
    /// Scale passes per chunk (default: calibrated so compute ≈ one chunk's H2D copy).
    #[arg(long)]
    passes: Option<usize>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    run("streams_overlap", || body(&args))
}

/// The multiplier of scale pass `j` (alternating, so values stay bounded).
fn alpha(j: usize) -> f32 {
    if j % 2 == 0 {
        1.25
    } else {
        0.8
    }
}

/// The input value of element `i`: a hash of `i` mapped to [-1, 1).
fn input(i: usize) -> f32 {
    let h = (i as u32).wrapping_mul(2_654_435_761) ^ ((i >> 32) as u32);
    (h >> 8) as f32 * (2.0 / (1u32 << 24) as f32) - 1.0
}

/// The CPU reference of one element: the scale passes in f32 (bit-exact with the GPU), then
/// tanh in f64.
fn reference(x: f32, passes: usize) -> f32 {
    let mut v = x;
    for j in 0..passes {
        v *= alpha(j);
    }
    f64::from(v).tanh() as f32
}

/// One chunk's compute: `passes` scale passes ping-ponging between `a` and `b`, then tanh into
/// `out`.
fn compute(
    k: &Kernels,
    s: &Stream,
    a: &mut DeviceSlice<f32>,
    b: &mut DeviceSlice<f32>,
    out: &mut DeviceSlice<f32>,
    passes: usize,
) -> BoxResult<()> {
    for j in 0..passes {
        if j % 2 == 0 {
            ops::scale(k, s, &*a, b, alpha(j))?;
        } else {
            ops::scale(k, s, &*b, a, alpha(j))?;
        }
    }
    let last: &DeviceSlice<f32> = if passes % 2 == 1 { b } else { a };
    ops::tanh(k, s, last, out)?;
    Ok(())
}

/// The stages of a chunk.
const STAGES: [(&str, char); 3] = [("H2D", 'H'), ("compute", 'c'), ("D2H", 'D')];

/// One run: per chunk, the offsets (s) of its 4 events from the start event.
struct RunTimes {
    chunks: Vec<[f64; 4]>,
    wall: f64,
}

/// Queues the whole job `reps + 1` times (the first is a warm-up) with chunk `c` on stream
/// `c % n_streams`; returns each timed run. Leaves the last run's results in `pin_out`.
#[allow(clippy::too_many_arguments)]
fn run_config(
    ctx: &Context,
    k: &Kernels,
    n_streams: usize,
    pin_in: &[PinnedBuffer<f32>],
    pin_out: &mut [PinnedBuffer<f32>],
    chunk: usize,
    passes: usize,
    reps: usize,
) -> BoxResult<Vec<RunTimes>> {
    let streams: Vec<Stream> = (0..n_streams)
        .map(|_| ctx.new_stream())
        .collect::<Result<_, _>>()?;
    let nc = pin_in.len();
    // Device buffers live on the stream that uses them (no cross-stream ordering needed).
    let alloc = |c: usize| streams[c % n_streams].alloc_zeros::<f32>(chunk);
    let mut d_in: Vec<DeviceBuffer<f32>> = (0..nc).map(alloc).collect::<Result<_, _>>()?;
    let mut d_tmp: Vec<DeviceBuffer<f32>> = (0..nc).map(alloc).collect::<Result<_, _>>()?;
    let mut d_out: Vec<DeviceBuffer<f32>> = (0..nc).map(alloc).collect::<Result<_, _>>()?;
    for st in &streams {
        st.synchronize()?;
    }
    let start = Event::new(ctx, true)?;
    let ev: Vec<[Event; 4]> = (0..nc)
        .map(|_| -> cuda_stack_driver::Result<[Event; 4]> {
            Ok([
                Event::new(ctx, true)?,
                Event::new(ctx, true)?,
                Event::new(ctx, true)?,
                Event::new(ctx, true)?,
            ])
        })
        .collect::<Result<_, _>>()?;
    let mut runs = Vec::new();
    for rep in 0..=reps {
        start.record(&streams[0])?;
        for st in &streams[1..] {
            st.wait_event(&start)?;
        }
        let mut guards = Vec::with_capacity(2 * nc);
        for (c, (pi, po)) in pin_in.iter().zip(pin_out.iter_mut()).enumerate() {
            let st = &streams[c % n_streams];
            ev[c][0].record(st)?;
            guards.push(st.copy_htod_async(pi, &mut d_in[c])?);
            ev[c][1].record(st)?;
            compute(k, st, &mut d_in[c], &mut d_tmp[c], &mut d_out[c], passes)?;
            ev[c][2].record(st)?;
            guards.push(st.copy_dtoh_async(&d_out[c], po)?);
            ev[c][3].record(st)?;
        }
        for g in guards {
            g.wait()?;
        }
        for st in &streams {
            st.synchronize()?;
        }
        if rep == 0 {
            continue;
        }
        let mut chunks = Vec::with_capacity(nc);
        for e in &ev {
            let mut t = [0.0; 4];
            for (i, ei) in e.iter().enumerate() {
                t[i] = start.elapsed(ei)?.as_secs_f64();
            }
            chunks.push(t);
        }
        let wall = chunks.iter().map(|t| t[3]).fold(0.0, f64::max);
        runs.push(RunTimes { chunks, wall });
    }
    Ok(runs)
}

/// Checks `pin_out` against the CPU reference (every `step`-th element and each chunk's last),
/// returns the largest difference, and clears the buffers.
fn check(
    pin_out: &mut [PinnedBuffer<f32>],
    chunk: usize,
    passes: usize,
    step: usize,
) -> BoxResult<f32> {
    let mut worst = 0f32;
    for (c, po) in pin_out.iter_mut().enumerate() {
        for i in (0..chunk).step_by(step).chain(std::iter::once(chunk - 1)) {
            let g = c * chunk + i;
            let want = reference(input(g), passes);
            let got = po[i];
            let d = (got - want).abs();
            if d.is_nan() || d > 2e-6 {
                return Err(format!(
                    "element {g} (chunk {c}): GPU {got}, CPU reference {want} (tolerance 2e-6)"
                )
                .into());
            }
            worst = worst.max(d);
        }
        po.fill(0.0);
    }
    Ok(worst)
}

/// Total time during which at least two stages (of any streams) ran at once.
fn overlapped(segs: &[(f64, f64)]) -> f64 {
    let mut pts: Vec<f64> = segs.iter().flat_map(|&(a, b)| [a, b]).collect();
    pts.sort_by(|a, b| a.total_cmp(b));
    let mut total = 0.0;
    for w in pts.windows(2) {
        let mid = 0.5 * (w[0] + w[1]);
        let active = segs.iter().filter(|&&(a, b)| a <= mid && mid < b).count();
        if active >= 2 {
            total += w[1] - w[0];
        }
    }
    total
}

/// One line per stream: `[H2D ###][compute ###][D2H #]` placed by time.
fn timeline(run: &RunTimes, n_streams: usize, width: usize) -> Vec<String> {
    let label_w = "stream 00 |".len();
    let cols = width.saturating_sub(label_w + 1).max(20);
    let scale = cols as f64 / run.wall.max(1e-12);
    let mut lines = Vec::new();
    for st in 0..n_streams {
        let mut row = vec![' '; cols];
        for (c, t) in run.chunks.iter().enumerate() {
            if c % n_streams != st {
                continue;
            }
            for (i, (name, letter)) in STAGES.iter().enumerate() {
                let c0 = ((t[i] * scale).floor() as usize).min(cols - 1);
                let c1 = ((t[i + 1] * scale).round() as usize).clamp(c0 + 1, cols);
                let len = c1 - c0;
                let text: Vec<char> = if len >= name.len() + 3 {
                    let mut s = format!("[{name} ");
                    s.extend(std::iter::repeat_n('#', len - name.len() - 3));
                    s.push(']');
                    s.chars().collect()
                } else {
                    vec![*letter; len]
                };
                row[c0..c1].copy_from_slice(&text);
            }
        }
        lines.push(format!(
            "stream {st:>2} |{}",
            row.into_iter().collect::<String>()
        ));
    }
    lines
}

fn body(args: &Args) -> ProgramResult {
    let q = &args.common;
    let mut out = Out::new(q.json);
    if args.streams == 0 || args.streams > 64 {
        return Err("--streams must be between 1 and 64".into());
    }
    let ctx = Context::new(q.device)?;
    let dev = ctx.device();
    let k = Kernels::get(&ctx)?;
    let n_streams = args.streams;
    let total: usize = q.pick(1 << 22, 1 << 26);
    let chunk = total / n_streams;
    let reps = q.pick(2, 5);
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .unwrap_or(100)
        .clamp(60, 240);
    out.say(format!(
        "streams_overlap on {} ({} SMs, {} copy engine(s))\n",
        dev.name()?,
        ctx.limits().sm_count,
        dev.async_engine_count()?
    ));
    out.say(format!(
        "Job: {} f32 ({} MiB) in {n_streams} chunks of {} MiB; per chunk H2D copy -> compute -> \
         D2H copy,\npinned host buffers, asynchronous copies.",
        n_streams * chunk,
        (n_streams * chunk * 4) >> 20,
        (chunk * 4) >> 20
    ));

    let mut pin_in = Vec::with_capacity(n_streams);
    let mut pin_out = Vec::with_capacity(n_streams);
    for c in 0..n_streams {
        let mut p = PinnedBuffer::<f32>::zeroed(&ctx, chunk)?;
        for (i, v) in p.iter_mut().enumerate() {
            *v = input(c * chunk + i);
        }
        pin_in.push(p);
        pin_out.push(PinnedBuffer::<f32>::zeroed(&ctx, chunk)?);
    }

    // Calibrate: one chunk's copies and one scale pass, on one stream.
    let s = ctx.new_stream()?;
    let mut d_a = s.alloc_zeros::<f32>(chunk)?;
    let mut d_b = s.alloc_zeros::<f32>(chunk)?;
    let (e0, e1) = (Event::new(&ctx, true)?, Event::new(&ctx, true)?);
    let (mut h2d, mut d2h, mut pass) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..4 {
        e0.record(&s)?;
        let g = s.copy_htod_async(&pin_in[0], &mut d_a)?;
        e1.record(&s)?;
        e1.synchronize()?;
        g.wait()?;
        h2d.push(e0.elapsed(&e1)?.as_secs_f64());
        e0.record(&s)?;
        ops::scale(&k, &s, &d_a, &mut d_b, 1.25)?;
        e1.record(&s)?;
        e1.synchronize()?;
        pass.push(e0.elapsed(&e1)?.as_secs_f64());
        e0.record(&s)?;
        let g = s.copy_dtoh_async(&d_b, &mut pin_out[0])?;
        e1.record(&s)?;
        e1.synchronize()?;
        g.wait()?;
        d2h.push(e0.elapsed(&e1)?.as_secs_f64());
    }
    drop((d_a, d_b));
    let (h2d, d2h, pass) = (median(&h2d[1..]), median(&d2h[1..]), median(&pass[1..]));
    let passes = args
        .passes
        .unwrap_or(((h2d / pass.max(1e-9)).round() as usize).clamp(1, 256));
    let gbs = |t: f64| (chunk * 4) as f64 / t / 1e9;
    out.say(format!(
        "Calibration (one chunk): H2D {:.3} ms ({:.1} GB/s), D2H {:.3} ms ({:.1} GB/s), one scale \
         pass {:.3} ms\n-> compute = {passes} scale passes + 1 tanh pass per chunk{}.\n",
        h2d * 1e3,
        gbs(h2d),
        d2h * 1e3,
        gbs(d2h),
        pass * 1e3,
        if args.passes.is_some() {
            " (--passes)"
        } else {
            " (≈ one H2D copy)"
        }
    ));
    out.put("device", json!(dev.name()?));
    out.put(
        "calibration",
        json!({"chunk_bytes": chunk * 4, "h2d_ms": h2d * 1e3, "d2h_ms": d2h * 1e3,
               "pass_ms": pass * 1e3, "passes": passes}),
    );

    let step = q.pick(1, 61);
    let mut t = Table::new(&[
        "configuration",
        "total (median)",
        "sum of stage times",
        "time with >= 2 stages overlapping",
        "speedup",
    ]);
    let mut configs = Vec::new();
    let mut base: Option<f64> = None;
    let mut worst = 0f32;
    let mut last_runs = Vec::new();
    let config_list: Vec<usize> = if n_streams == 1 {
        vec![1]
    } else {
        vec![1, n_streams]
    };
    for ns in config_list {
        let runs = run_config(&ctx, &k, ns, &pin_in, &mut pin_out, chunk, passes, reps)?;
        worst = worst.max(check(&mut pin_out, chunk, passes, step)?);
        let walls: Vec<f64> = runs.iter().map(|r| r.wall).collect();
        let wall = median(&walls);
        let Some(last) = runs.into_iter().last() else {
            return Err("no timed run".into());
        };
        let segs: Vec<(f64, f64)> = last
            .chunks
            .iter()
            .flat_map(|t| [(t[0], t[1]), (t[1], t[2]), (t[2], t[3])])
            .collect();
        let busy: f64 = segs.iter().map(|(a, b)| b - a).sum();
        let ov = overlapped(&segs);
        let speedup = base.map_or(1.0, |b| b / wall);
        base.get_or_insert(wall);
        let name = format!(
            "{ns} stream{} ({n_streams} chunks)",
            if ns == 1 { "" } else { "s" }
        );
        t.row(&[
            name.clone(),
            format!("{:.3} ms", wall * 1e3),
            format!("{:.3} ms", busy * 1e3),
            format!(
                "{:.3} ms ({:.0}% of total)",
                ov * 1e3,
                100.0 * ov / last.wall
            ),
            format!("{speedup:.2}x"),
        ]);
        configs.push(
            json!({"streams": ns, "chunks": n_streams, "wall_ms": wall * 1e3,
                            "stage_sum_ms": busy * 1e3, "overlap_ms": ov * 1e3,
                            "speedup": speedup,
                            "timeline_ms": last.chunks.iter()
                                .map(|t| t.iter().map(|v| v * 1e3).collect::<Vec<_>>())
                                .collect::<Vec<_>>()}),
        );
        last_runs.push((name, ns, last));
    }
    out.say(t.render());
    out.say(format!(
        "Results of every configuration match the CPU reference (every {}element checked; \
         largest difference {worst:.1e}, tolerance 2e-6).\n",
        if step == 1 {
            String::new()
        } else {
            format!("{step}th ")
        }
    ));
    out.put("max_abs_err", json!(worst));
    for (name, ns, run) in &last_runs {
        out.say(format!(
            "Timeline, {name}, last run ({:.3} ms across; H = H2D, c = compute, D = D2H where \
             too short to label):",
            run.wall * 1e3
        ));
        for l in timeline(run, *ns, width) {
            out.say(l);
        }
        out.say("");
    }
    out.say(
        "One stream runs every stage in order. With several streams the copy engines move \
         chunk c+1 in while\nthe SMs compute chunk c and chunk c-1 goes out, so the total \
         approaches the longest stage times the\nnumber of chunks instead of the sum of all \
         stages.",
    );
    out.put("configs", Value::Array(configs));
    out.finish();
    Ok(())
}
