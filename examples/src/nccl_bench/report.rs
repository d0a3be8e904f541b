//! The tables, the targets and the JSON.
//!
//! Targets (issue 31), against `torch.distributed` in the same session: latency ≤ 1.1 ×
//! PyTorch's at every size ≤ 64 KiB, bus bandwidth ≥ 0.95 × PyTorch's at every size ≥ 1 MiB.
//! The bandwidth ratio is PyTorch's time over ours (the same as the ratio of bus bandwidths
//! whenever both are defined, and still defined on one GPU where the bus bandwidth is 0).

use super::torch::TorchRun;
use super::{fmt_size, HostRow, Layout, Measured, Op, Row};
use cuda_examples::bench::{median, Table};
use cuda_examples::output::Out;
use serde_json::{json, Value};

/// Sizes up to this are held to the latency target.
pub const LATENCY_MAX: usize = 64 << 10;
/// Sizes from this on are held to the bandwidth target.
pub const BANDWIDTH_MIN: usize = 1 << 20;
/// Ours / PyTorch's time, at most.
pub const LATENCY_TARGET: f64 = 1.1;
/// Our bus bandwidth / PyTorch's, at least.
pub const BANDWIDTH_TARGET: f64 = 0.95;

/// One row against PyTorch's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// ≤ 64 KiB: ours / PyTorch's time, and whether it meets the target.
    Latency(f64, bool),
    /// ≥ 1 MiB: our bus bandwidth / PyTorch's, and whether it meets the target.
    Bandwidth(f64, bool),
    /// In between: ours / PyTorch's time, no target.
    Between(f64),
}

impl Verdict {
    /// The verdict for our `us` against PyTorch's `torch_us` at `size` bytes.
    pub fn of(size: usize, us: f64, torch_us: f64) -> Verdict {
        if size <= LATENCY_MAX {
            let r = us / torch_us;
            Verdict::Latency(r, r <= LATENCY_TARGET)
        } else if size >= BANDWIDTH_MIN {
            let r = torch_us / us;
            Verdict::Bandwidth(r, r >= BANDWIDTH_TARGET)
        } else {
            Verdict::Between(us / torch_us)
        }
    }

    /// The ratio column: `lat 1.23x`, `bw 0.97x`.
    fn ratio_cell(self) -> String {
        match self {
            Verdict::Latency(r, _) | Verdict::Between(r) => format!("lat {r:.2}x"),
            Verdict::Bandwidth(r, _) => format!("bw {r:.2}x"),
        }
    }

    /// The target column.
    fn target_cell(self) -> &'static str {
        match self {
            Verdict::Latency(_, true) => "PASS (lat <= 1.1x)",
            Verdict::Latency(_, false) => "MISS (lat <= 1.1x)",
            Verdict::Bandwidth(_, true) => "PASS (bw >= 0.95x)",
            Verdict::Bandwidth(_, false) => "MISS (bw >= 0.95x)",
            Verdict::Between(_) => "-",
        }
    }

    fn json(self) -> Value {
        match self {
            Verdict::Latency(r, ok) => json!({"latency_ratio": r, "pass": ok}),
            Verdict::Bandwidth(r, ok) => json!({"bandwidth_ratio": r, "pass": ok}),
            Verdict::Between(r) => json!({"latency_ratio": r, "pass": null}),
        }
    }
}

/// The worst ratios of one op in one layout.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Worst {
    /// Highest ours/PyTorch time at ≤ 64 KiB.
    pub latency: Option<f64>,
    /// Lowest bus-bandwidth ratio at ≥ 1 MiB.
    pub bandwidth: Option<f64>,
}

impl Worst {
    fn add(&mut self, v: Verdict) {
        match v {
            Verdict::Latency(r, _) => self.latency = Some(self.latency.map_or(r, |w| w.max(r))),
            Verdict::Bandwidth(r, _) => {
                self.bandwidth = Some(self.bandwidth.map_or(r, |w| w.min(r)))
            }
            Verdict::Between(_) => {}
        }
    }

    /// The summary line of `op`.
    fn line(&self, op: Op) -> String {
        let pf = |ok: bool| if ok { "PASS" } else { "MISS" };
        let lat = self.latency.map_or("no PyTorch figures".to_string(), |w| {
            format!("{w:.3}x {} (target <= 1.1x)", pf(w <= LATENCY_TARGET))
        });
        let bw = self
            .bandwidth
            .map_or("no PyTorch figures".to_string(), |w| {
                format!("{w:.3}x {} (target >= 0.95x)", pf(w >= BANDWIDTH_TARGET))
            });
        format!(
            "{}: worst latency ratio <= 64 KiB: {lat}; worst bus-bandwidth ratio >= 1 MiB: {bw}",
            op.name()
        )
    }
}

/// (algorithm, bus) bandwidth in GB/s of a row on `n` ranks.
fn bandwidths(r: &Row, n: usize) -> (f64, f64) {
    let algbw = r.size as f64 / (r.us * 1e-6) / 1e9;
    (algbw, algbw * r.op.bus_factor(n))
}

/// A layout's title line.
fn title(m: &Measured) -> String {
    let comms = if m.blocking {
        "blocking communicators (CommGroup::init_all)"
    } else {
        "non-blocking communicators"
    };
    format!(
        "== layout {}: {}; {comms} ==",
        m.layout.name(),
        m.layout.describe()
    )
}

/// Prints one layout's tables (one per op) and summary lines; returns its JSON.
fn layout(out: &Out, m: &Measured, n: usize, torch: Option<&TorchRun>) -> Value {
    out.say(title(m));
    let mut rows_json = Vec::new();
    let mut summary = serde_json::Map::new();
    let mut lines = Vec::new();
    let mut ops: Vec<Op> = m.rows.iter().map(|r| r.op).collect();
    ops.dedup();
    for op in ops {
        let mut table = Table::new(&[
            "size",
            "count",
            "iters",
            "ours µs",
            "ours busbw GB/s",
            "torch µs",
            "torch busbw",
            "ratio",
            "target",
        ]);
        let mut worst = Worst::default();
        for r in m.rows.iter().filter(|r| r.op == op) {
            let (algbw, busbw) = bandwidths(r, n);
            let theirs = torch.and_then(|t| t.get(op.name(), r.bytes));
            let verdict = theirs.map(|(t_us, _)| Verdict::of(r.size, r.us, t_us));
            if let Some(v) = verdict {
                worst.add(v);
            }
            table.row(&[
                fmt_size(r.size),
                r.recv.max(r.send).to_string(),
                r.iters.to_string(),
                format!("{:.1}", r.us),
                format!("{busbw:.2}"),
                theirs.map_or("-".into(), |(t, _)| format!("{t:.1}")),
                theirs.map_or("-".into(), |(_, b)| format!("{b:.2}")),
                verdict.map_or("-".into(), Verdict::ratio_cell),
                verdict.map_or("", Verdict::target_cell).into(),
            ]);
            let mut j = r.to_json();
            if let Some(o) = j.as_object_mut() {
                o.insert("layout".into(), json!(m.layout.name()));
                o.insert("algbw_gbps".into(), json!(algbw));
                o.insert("busbw_gbps".into(), json!(busbw));
                o.insert("torch_time_us".into(), json!(theirs.map(|t| t.0)));
                o.insert("torch_busbw_gbps".into(), json!(theirs.map(|t| t.1)));
                o.insert(
                    "speed_vs_torch".into(),
                    json!(theirs.map(|(t, _)| t / r.us)),
                );
                o.insert("target".into(), verdict.map_or(Value::Null, Verdict::json));
            }
            rows_json.push(j);
        }
        if !out.is_json() {
            println!("{}", op.name());
            table.print();
        }
        lines.push(worst.line(op));
        summary.insert(
            op.name().into(),
            json!({"worst_latency_ratio": worst.latency,
                   "latency_pass": worst.latency.map(|w| w <= LATENCY_TARGET),
                   "worst_bandwidth_ratio": worst.bandwidth,
                   "bandwidth_pass": worst.bandwidth.map(|w| w >= BANDWIDTH_TARGET)}),
        );
    }
    out.say(format!("summary, layout {}:", m.layout.name()));
    for l in &lines {
        out.say(format!("  {l}"));
    }
    let host = if m.host.is_empty() {
        Value::Null
    } else {
        host_table(out, &m.host)
    };
    out.say("");
    json!({"layout": m.layout.name(), "blocking": m.blocking, "rows": rows_json,
           "summary": summary, "host_overhead": host})
}

/// Prints the host-time table and its summary line; returns its JSON.
fn host_table(out: &Out, host: &[HostRow]) -> Value {
    let mut t = Table::new(&[
        "rank",
        "size",
        "calls",
        "safe µs",
        "bare µs",
        "ours adds µs",
        "blocking bare µs",
        "safe+sync µs",
        "bare+sync µs",
        "blocking+sync µs",
    ]);
    let opt = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.1}"));
    for h in host {
        t.row(&[
            h.rank.to_string(),
            fmt_size(h.bytes),
            h.calls.to_string(),
            format!("{:.1}", h.safe_us),
            format!("{:.1}", h.bare_us),
            format!("{:+.1}", h.safe_us - h.bare_us),
            opt(h.blocking_us),
            format!("{:.1}", h.safe_sync_us),
            format!("{:.1}", h.bare_sync_us),
            opt(h.blocking_sync_us),
        ]);
    }
    let adds: Vec<f64> = host.iter().map(|h| h.safe_us - h.bare_us).collect();
    let nb: Vec<f64> = host
        .iter()
        .filter_map(|h| h.blocking_us.map(|b| h.bare_us - b))
        .collect();
    let adds_med = median(&adds);
    let nb_med = (!nb.is_empty()).then(|| median(&nb));
    if !out.is_json() {
        println!(
            "host time per all-reduce call (median over the calls; each call followed by a \
             stream synchronize; safe = Communicator::all_reduce_in_place, bare = ncclAllReduce \
             on the same communicator + polling ncclCommGetAsyncError until queued, blocking = \
             ncclAllReduce on a blocking communicator):"
        );
        t.print();
    }
    out.say(format!(
        "  our layer adds {adds_med:.1} µs per call (median over ranks and sizes: safe - bare)"
    ));
    if let Some(m) = nb_med {
        out.say(format!(
            "  NCCL's non-blocking mode costs {m:.1} µs per call over a blocking communicator \
             (bare - blocking)"
        ));
    }
    json!({"rows": host.iter().map(HostRow::to_json).collect::<Vec<_>>(),
           "ours_adds_us_median": adds_med, "nonblocking_costs_us_median": nb_med})
}

/// Prints every layout's tables and summaries, and (with `--json`) puts the document
/// together: `layouts` holds everything; `rows`, `worst_latency_ratio` and
/// `worst_bandwidth_ratio` repeat the first layout's, as earlier versions wrote them.
pub fn print(out: &mut Out, measured: &[Measured], n: usize, torch: Option<&TorchRun>) {
    let compare = torch.filter(|t| t.world == n);
    if let Some(t) = torch {
        out.say(format!(
            "PyTorch (same machine): {}, {} process(es)",
            t.meta, t.world
        ));
        if t.world != n {
            out.say(format!(
                "note: PyTorch ran {} ranks and this run has {n}: no ratios are shown",
                t.world
            ));
        }
        out.put("torch_meta", t.meta.clone());
    }
    let layouts: Vec<Value> = measured
        .iter()
        .map(|m| layout(out, m, n, compare))
        .collect();
    if compare.is_none() {
        out.say(
            "(no PyTorch figures: pass --torch-run, or --torch FILE from tools/torch_nccl_bench.py)",
        );
    }
    if let Some(first) = layouts.first() {
        out.put("rows", first["rows"].clone());
        let pick = |k: &str| -> Value {
            let mut m = serde_json::Map::new();
            if let Some(s) = first["summary"].as_object() {
                for (op, v) in s {
                    if !v[k].is_null() {
                        m.insert(op.clone(), v[k].clone());
                    }
                }
            }
            Value::Object(m)
        };
        out.put("worst_latency_ratio", pick("worst_latency_ratio"));
        out.put("worst_bandwidth_ratio", pick("worst_bandwidth_ratio"));
    }
    out.put("layouts", json!(layouts));
}

/// The layouts' names, for the header line.
pub fn names(layouts: &[Layout]) -> String {
    layouts
        .iter()
        .map(|l| l.name())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_targets() {
        assert_eq!(Verdict::of(8, 11.0, 10.0), Verdict::Latency(1.1, true));
        assert!(matches!(
            Verdict::of(64 << 10, 12.0, 10.0),
            Verdict::Latency(_, false)
        ));
        assert!(matches!(
            Verdict::of(128 << 10, 12.0, 10.0),
            Verdict::Between(_)
        ));
        assert_eq!(
            Verdict::of(1 << 20, 10.0, 9.5),
            Verdict::Bandwidth(0.95, true)
        );
        assert!(matches!(
            Verdict::of(1 << 30, 10.0, 9.0),
            Verdict::Bandwidth(_, false)
        ));
        let mut w = Worst::default();
        w.add(Verdict::Latency(1.2, false));
        w.add(Verdict::Latency(0.9, true));
        w.add(Verdict::Bandwidth(0.97, true));
        w.add(Verdict::Bandwidth(1.2, true));
        assert_eq!(w.latency, Some(1.2));
        assert_eq!(w.bandwidth, Some(0.97));
        let l = w.line(Op::Broadcast);
        assert!(
            l.contains("1.200x MISS") && l.contains("0.970x PASS"),
            "{l}"
        );
    }
}
