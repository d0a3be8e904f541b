//! The body of `nccl_bench` (the program's entry point is `src/bin/nccl_bench.rs`).
//!
//! One file per concern: what every layout shares is here ([`Op`], [`Layout`], [`Plan`],
//! [`Row`], [`HostRow`]); the three ways of driving the ranks are [`group`] (one thread, one
//! `Group` per iteration), [`threads`] (one thread per GPU) and [`processes`] (one process per
//! GPU, as PyTorch runs), the last two through the per-rank driver of [`rank`]; [`host`] measures
//! the host time of one call; [`torch`] reads (or runs) `tools/torch_nccl_bench.py`; [`report`]
//! prints the tables, the targets and the JSON.

pub mod group;
pub mod host;
pub mod processes;
pub mod rank;
pub mod report;
pub mod threads;
pub mod torch;

use serde_json::{json, Value};
use std::time::Duration;

/// What the bench's functions return: errors that may cross threads.
pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// A collective measured, on f32, as PyTorch's call of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum Op {
    /// Sum, in place (`dist.all_reduce`).
    #[value(name = "all_reduce")]
    AllReduce,
    /// `dist.all_gather_into_tensor`.
    #[value(name = "all_gather")]
    AllGather,
    /// Sum (`dist.reduce_scatter_tensor`).
    #[value(name = "reduce_scatter")]
    ReduceScatter,
    /// From rank 0, in place (`dist.broadcast`).
    #[value(name = "broadcast")]
    Broadcast,
}

impl Op {
    /// Checks one rank's received elements after [`Op`] ran on data where rank `k` sent only
    /// `k + 1` (and broadcast's root 0 sent 1): `Err` naming the first wrong element.
    pub fn check_received(self, who: &str, got: &[f32], send: usize, ranks: usize) -> Res<()> {
        let total = (ranks * (ranks + 1) / 2) as f32;
        let want = |j: usize| match self {
            Op::AllReduce | Op::ReduceScatter => total,
            Op::AllGather => (j / send + 1) as f32,
            Op::Broadcast => 1.0,
        };
        match (0..got.len()).find(|&j| got[j] != want(j)) {
            None => Ok(()),
            Some(j) => Err(format!(
                "{} on {who}: element {j} is {}, the CPU says {}",
                self.name(),
                got[j],
                want(j)
            )
            .into()),
        }
    }

    /// Every operation, in the order the tables show them.
    pub const ALL: [Op; 4] = [
        Op::AllReduce,
        Op::AllGather,
        Op::ReduceScatter,
        Op::Broadcast,
    ];

    /// The name PyTorch's script and the JSON use.
    pub fn name(self) -> &'static str {
        match self {
            Op::AllReduce => "all_reduce",
            Op::AllGather => "all_gather",
            Op::ReduceScatter => "reduce_scatter",
            Op::Broadcast => "broadcast",
        }
    }

    /// The operation named `s` (as [`Op::name`] spells it).
    pub fn from_name(s: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.name() == s)
    }

    /// (send elements, receive elements, size in bytes) for `bytes` on `n` ranks, as
    /// nccl-tests counts them; `None` when the size holds less than one element per rank.
    /// All-reduce and broadcast work in place on the receive buffer.
    pub fn counts(self, bytes: usize, n: usize) -> Option<(usize, usize, usize)> {
        let elems = bytes / 4;
        let n = n.max(1);
        match self {
            Op::AllReduce | Op::Broadcast => (elems >= 1).then_some((elems, elems, elems * 4)),
            Op::AllGather => {
                let per = elems / n;
                (per >= 1).then_some((per, per * n, per * n * 4))
            }
            Op::ReduceScatter => {
                let per = elems / n;
                (per >= 1).then_some((per * n, per, per * n * 4))
            }
        }
    }

    /// nccl-tests' bus-bandwidth factor.
    pub fn bus_factor(self, n: usize) -> f64 {
        let n = n.max(1) as f64;
        match self {
            Op::AllReduce => 2.0 * (n - 1.0) / n,
            Op::AllGather | Op::ReduceScatter => (n - 1.0) / n,
            Op::Broadcast => 1.0,
        }
    }
}

/// How the ranks are driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Layout {
    /// One process per GPU (this program re-executed per rank), as PyTorch runs.
    Processes,
    /// One thread per GPU in this process, each with its own communicator.
    Threads,
    /// One thread drives every rank, one `Group` per iteration (as nccl-tests by default).
    Group,
}

impl Layout {
    /// The name on the command line and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Processes => "processes",
            Layout::Threads => "threads",
            Layout::Group => "group",
        }
    }

    /// One line that says what the layout is.
    pub fn describe(self) -> &'static str {
        match self {
            Layout::Processes => {
                "one process per GPU (this program re-executed per rank, its own communicator \
                 from Communicator::init_rank, plain Communicator calls), as PyTorch runs"
            }
            Layout::Threads => {
                "one thread per GPU in one process, each with its own communicator, no group"
            }
            Layout::Group => {
                "one thread drives every rank, one cuda_stack_nccl::Group per iteration"
            }
        }
    }
}

/// What one run measures; the same in every layout (the processes layout hands it to its
/// children as arguments, [`Plan::child_args`]).
#[derive(Debug, Clone)]
pub struct Plan {
    /// The operations, in order.
    pub ops: Vec<Op>,
    /// Smallest size in bytes (rounded up to a power of two).
    pub min: usize,
    /// Largest size in bytes (buffers are sized for it).
    pub max: usize,
    /// `--quick`: few iterations.
    pub quick: bool,
    /// The communicators' timeout: an operation unfinished after it aborts them.
    pub timeout: Duration,
    /// Measure the host time per call too ([`host`]).
    pub host_overhead: bool,
    /// Blocking NCCL communicators (`CommGroup::init_all`; `CommConfig::blocking` for one
    /// process per GPU) instead of non-blocking ones.
    pub blocking: bool,
}

impl Plan {
    /// The sizes: powers of two from `min` to `max`.
    pub fn sizes(&self) -> Vec<usize> {
        let mut v = Vec::new();
        let mut s = self.min.max(1).next_power_of_two();
        while s <= self.max {
            v.push(s);
            match s.checked_mul(2) {
                Some(t) => s = t,
                None => break,
            }
        }
        v
    }

    /// Warm-up iterations before each timed loop.
    pub fn warmup(&self) -> usize {
        if self.quick {
            2
        } else {
            5
        }
    }

    /// Iterations timed for a size (more for small messages, whose times are microseconds);
    /// the PyTorch script uses the same rule.
    pub fn iterations(&self, bytes: usize) -> usize {
        let (lo, hi) = if self.quick { (5, 20) } else { (20, 200) };
        ((1usize << 28) / bytes.max(1)).clamp(lo, hi)
    }

    /// f32 elements of each rank's send and receive buffers: enough for every op at `max`.
    pub fn buffer_elems(&self, n: usize) -> usize {
        self.max / 4 + n.max(1)
    }

    /// The arguments that give a child process this plan.
    pub fn child_args(&self) -> Vec<String> {
        let ops: Vec<&str> = self.ops.iter().map(|o| o.name()).collect();
        let mut a = vec![
            "--ops".to_string(),
            ops.join(","),
            "--min-bytes".into(),
            self.min.to_string(),
            "--max-bytes".into(),
            self.max.to_string(),
            "--timeout".into(),
            format!("{}", self.timeout.as_secs_f64()),
        ];
        if self.quick {
            a.push("--quick".into());
        }
        if self.host_overhead {
            a.push("--host-overhead".into());
        }
        if self.blocking {
            a.push("--blocking".into());
        }
        a
    }
}

/// One measured size of one operation: the slowest rank's GPU time per iteration.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The operation.
    pub op: Op,
    /// The size asked for (the key PyTorch's rows use).
    pub bytes: usize,
    /// The size moved, nccl-tests' way ([`Op::counts`]).
    pub size: usize,
    /// Elements sent per rank.
    pub send: usize,
    /// Elements received per rank.
    pub recv: usize,
    /// Timed iterations.
    pub iters: usize,
    /// µs per iteration, the slowest rank's.
    pub us: f64,
}

impl Row {
    /// The row as one JSON object (what a child prints, and the `--json` rows' core).
    pub fn to_json(&self) -> Value {
        json!({"op": self.op.name(), "bytes": self.bytes, "size": self.size,
               "send_count": self.send, "recv_count": self.recv, "iters": self.iters,
               "time_us": self.us})
    }

    /// The row [`Row::to_json`] wrote, or `None` when `v` is not one.
    pub fn from_json(v: &Value) -> Option<Row> {
        let u = |k: &str| v[k].as_u64().map(|x| x as usize);
        Some(Row {
            op: Op::from_name(v["op"].as_str()?)?,
            bytes: u("bytes")?,
            size: u("size")?,
            send: u("send_count")?,
            recv: u("recv_count")?,
            iters: u("iters")?,
            us: v["time_us"].as_f64()?,
        })
    }
}

/// Host time of one all-reduce call on one rank, at one size ([`host`]): medians in µs.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRow {
    /// The rank.
    pub rank: usize,
    /// The buffer, bytes.
    pub bytes: usize,
    /// Calls measured per variant.
    pub calls: usize,
    /// `Communicator::all_reduce_in_place`: the call.
    pub safe_us: f64,
    /// The bare `ncclAllReduce` on the same (non-blocking) communicator, plus the polling of
    /// `ncclCommGetAsyncError` NCCL requires before the next call.
    pub bare_us: f64,
    /// The bare `ncclAllReduce` on a blocking communicator made for the measurement, when
    /// measured (processes layout).
    pub blocking_us: Option<f64>,
    /// The call and the stream synchronize after it, for the three variants.
    pub safe_sync_us: f64,
    /// As `safe_sync_us`, bare call.
    pub bare_sync_us: f64,
    /// As `safe_sync_us`, bare call on the blocking communicator.
    pub blocking_sync_us: Option<f64>,
}

impl HostRow {
    /// The row as one JSON object.
    pub fn to_json(&self) -> Value {
        json!({"rank": self.rank, "bytes": self.bytes, "calls": self.calls,
               "safe_us": self.safe_us, "bare_us": self.bare_us,
               "ours_adds_us": self.safe_us - self.bare_us,
               "blocking_bare_us": self.blocking_us,
               "safe_call_sync_us": self.safe_sync_us, "bare_call_sync_us": self.bare_sync_us,
               "blocking_call_sync_us": self.blocking_sync_us})
    }

    /// The row [`HostRow::to_json`] wrote, or `None` when `v` is not one.
    pub fn from_json(v: &Value) -> Option<HostRow> {
        let f = |k: &str| v[k].as_f64();
        Some(HostRow {
            rank: v["rank"].as_u64()? as usize,
            bytes: v["bytes"].as_u64()? as usize,
            calls: v["calls"].as_u64()? as usize,
            safe_us: f("safe_us")?,
            bare_us: f("bare_us")?,
            blocking_us: f("blocking_bare_us"),
            safe_sync_us: f("safe_call_sync_us")?,
            bare_sync_us: f("bare_call_sync_us")?,
            blocking_sync_us: f("blocking_call_sync_us"),
        })
    }
}

/// What one layout measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The layout.
    pub layout: Layout,
    /// Blocking communicators.
    pub blocking: bool,
    /// Rank 0's rows (each the slowest rank's time).
    pub rows: Vec<Row>,
    /// Every rank's host-time rows (empty unless asked for).
    pub host: Vec<HostRow>,
}

/// A size for people: `8 B`, `64 KiB`, `1 GiB`.
pub fn fmt_size(b: usize) -> String {
    match b {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            ops: Op::ALL.to_vec(),
            min: 5,
            max: 64,
            quick: true,
            timeout: Duration::from_secs(60),
            host_overhead: false,
            blocking: false,
        }
    }

    #[test]
    fn counts_follow_nccl_tests() {
        assert_eq!(Op::AllReduce.counts(8, 2), Some((2, 2, 8)));
        assert_eq!(Op::Broadcast.counts(8, 2), Some((2, 2, 8)));
        assert_eq!(Op::AllGather.counts(8, 2), Some((1, 2, 8)));
        assert_eq!(Op::ReduceScatter.counts(8, 2), Some((2, 1, 8)));
        assert_eq!(Op::AllGather.counts(4, 2), None);
        assert_eq!(Op::AllGather.counts(16, 3), Some((1, 3, 12)));
        assert_eq!(Op::Broadcast.bus_factor(2), 1.0);
        assert_eq!(Op::AllReduce.bus_factor(2), 1.0);
        assert_eq!(Op::AllGather.bus_factor(1), 0.0);
    }

    #[test]
    fn sizes_and_names() {
        assert_eq!(plan().sizes(), vec![8, 16, 32, 64]);
        for o in Op::ALL {
            assert_eq!(Op::from_name(o.name()), Some(o));
        }
        assert_eq!(fmt_size(65536), "64 KiB");
        assert_eq!(fmt_size(12), "12 B");
        assert_eq!(fmt_size(3 << 20), "3 MiB");
    }

    #[test]
    fn rows_round_trip_through_json() {
        let r = Row {
            op: Op::Broadcast,
            bytes: 8,
            size: 8,
            send: 2,
            recv: 2,
            iters: 20,
            us: 12.5,
        };
        assert_eq!(Row::from_json(&r.to_json()), Some(r));
        let h = HostRow {
            rank: 1,
            bytes: 8,
            calls: 300,
            safe_us: 40.0,
            bare_us: 35.0,
            blocking_us: None,
            safe_sync_us: 60.0,
            bare_sync_us: 55.0,
            blocking_sync_us: Some(20.0),
        };
        assert_eq!(HostRow::from_json(&h.to_json()), Some(h));
        assert_eq!(Row::from_json(&json!({"op": "nope"})), None);
    }

    #[test]
    fn child_args_carry_the_plan() {
        let a = plan().child_args().join(" ");
        assert!(
            a.contains("--ops all_reduce,all_gather,reduce_scatter,broadcast"),
            "{a}"
        );
        assert!(a.contains("--min-bytes 5 --max-bytes 64"), "{a}");
        assert!(a.contains("--quick"), "{a}");
        assert!(!a.contains("--host-overhead"), "{a}");
    }
}
