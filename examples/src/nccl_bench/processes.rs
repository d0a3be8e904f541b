//! The processes layout, as PyTorch runs: this program re-executed once per GPU with hidden
//! arguments (`--rank R --world N --addr 127.0.0.1:PORT` and the plan, [`Plan::child_args`]).
//!
//! Each child gets the communicator's id from rank 0 over TCP
//! (`cuda_stack_nccl::tcp::exchange_unique_id`), makes its communicator on GPU R
//! (`Communicator::init_rank`) and runs the per-rank driver ([`super::rank`]) on a stream of its
//! own; rank 0 prints one JSON line per (op, size) on stdout (`{"row": …}`), every rank its
//! host-time rows (`{"host": …}`), and each a last `{"done": R}`. The parent reads every
//! child's stdout on a thread of its own (a full pipe never stalls a child), polls their exit
//! with a deadline, and when one fails — or the deadline passes — kills the others (each by
//! its own handle) and says which rank failed; the child's own error is on stderr, above.
//! `NCCL_NVLS_ENABLE=0` is in every child's environment explicitly (besides being inherited).

use super::rank::RankBench;
use super::{host, HostRow, Plan, Res, Row};
use cuda_stack_nccl::{CommConfig, Communicator, NVLS_VAR};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A port on 127.0.0.1 that was free a moment ago (for rank 0's id exchange).
fn free_port() -> Res<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Reads `out` to its end, line by line, on a thread of its own.
fn reader(out: Option<std::process::ChildStdout>) -> JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let Some(out) = out else { return Vec::new() };
        BufReader::new(out).lines().map_while(Result::ok).collect()
    })
}

/// Kills every child not known to have exited (each by its own handle: only processes this
/// run started) and waits for them, at most 10 s in all.
fn stop(children: &mut [Child], status: &[Option<ExitStatus>]) {
    for (ch, st) in children.iter_mut().zip(status) {
        if st.is_none() {
            let _ = ch.kill();
        }
    }
    let until = Instant::now() + Duration::from_secs(10);
    for (ch, st) in children.iter_mut().zip(status) {
        while st.is_none() && Instant::now() < until {
            match ch.try_wait() {
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                _ => break,
            }
        }
    }
}

/// The sweep of `plan` on `n` GPUs, one child process each: rank 0's rows (each the slowest
/// rank's time) and every rank's host-time rows. `deadline` bounds the whole run.
pub fn run(plan: &Plan, n: usize, deadline: Duration) -> Res<(Vec<Row>, Vec<HostRow>)> {
    let exe = std::env::current_exe()?;
    let addr = format!("127.0.0.1:{}", free_port()?);
    let mut children: Vec<Child> = Vec::new();
    let mut readers = Vec::new();
    for rank in 0..n {
        let mut cmd = Command::new(&exe);
        cmd.env(NVLS_VAR, "0")
            .args(["--rank", &rank.to_string(), "--world", &n.to_string()])
            .args(["--addr", &addr])
            .args(plan.child_args())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        match cmd.spawn() {
            Ok(mut ch) => {
                readers.push(reader(ch.stdout.take()));
                children.push(ch);
            }
            Err(e) => {
                let status = vec![None; children.len()];
                stop(&mut children, &status);
                return Err(format!("starting rank {rank} ({}): {e}", exe.display()).into());
            }
        }
    }
    let start = Instant::now();
    let mut status: Vec<Option<ExitStatus>> = vec![None; n];
    loop {
        let mut failed: Option<(usize, String)> = None;
        for (r, ch) in children.iter_mut().enumerate() {
            if status[r].is_some() {
                continue;
            }
            match ch.try_wait() {
                Ok(Some(st)) => {
                    status[r] = Some(st);
                    if !st.success() {
                        failed.get_or_insert((r, st.to_string()));
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    failed.get_or_insert((r, format!("cannot wait for it: {e}")));
                }
            }
        }
        if let Some((r, why)) = failed {
            stop(&mut children, &status);
            return Err(format!(
                "processes layout: rank {r} failed ({why}; its message is above); the other \
                 ranks were stopped"
            )
            .into());
        }
        if status.iter().all(Option::is_some) {
            break;
        }
        if start.elapsed() > deadline {
            stop(&mut children, &status);
            return Err(format!(
                "processes layout: the ranks did not finish within {:.0} s; they were stopped",
                deadline.as_secs_f64()
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut rows = Vec::new();
    let mut host = Vec::new();
    let mut done = vec![false; n];
    for (rank, h) in readers.into_iter().enumerate() {
        // The child has exited, so its pipe is at its end (bounded anyway).
        let until = Instant::now() + Duration::from_secs(10);
        while !h.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        if !h.is_finished() {
            return Err(format!("rank {rank}'s output did not end after it exited").into());
        }
        let lines = h
            .join()
            .map_err(|_| format!("reading rank {rank}'s output failed"))?;
        for v in lines
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            if rank == 0 {
                rows.extend(Row::from_json(&v["row"]));
            }
            host.extend(HostRow::from_json(&v["host"]));
            done[rank] |= v["done"].as_u64() == Some(rank as u64);
        }
    }
    if let Some(r) = done.iter().position(|d| !d) {
        return Err(format!("rank {r} exited without finishing its report").into());
    }
    host.sort_by_key(|h| (h.bytes, h.rank));
    Ok((rows, host))
}

/// Prints one JSON line on stdout for the parent (a closed pipe means the parent is gone: the
/// line is dropped).
fn emit(v: Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

/// Asks Linux to kill this process when its parent goes, so that no rank outlives the run.
fn die_with_parent() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_PDEATHSIG, signal) reads its integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
    }
}

/// A child: rank `rank` of `world` on GPU `rank`, the id from rank 0 at `addr`; prints its
/// lines (see the module docs).
pub fn child(plan: &Plan, rank: usize, world: usize, addr: &str) -> Res<()> {
    die_with_parent();
    if rank >= world {
        return Err(format!("--rank {rank} is not below --world {world}").into());
    }
    let id = cuda_stack_nccl::tcp::exchange_unique_id(addr, rank, world, plan.timeout)?;
    let config = CommConfig {
        blocking: plan.blocking,
        ..CommConfig::with_timeout(Some(plan.timeout))
    };
    let comm = Communicator::init_rank(&id, rank, world, rank, &config)?;
    let mut bench = RankBench::new(&comm, plan)?;
    bench.run(plan, &mut |row| {
        if rank == 0 {
            emit(json!({ "row": row.to_json() }));
        }
    })?;
    if plan.host_overhead {
        bench.barrier()?;
        let (comm, stream, buf) = bench.parts();
        for h in host::measure(comm, stream, buf, plan.max, plan.quick, true)? {
            emit(json!({ "host": h.to_json() }));
        }
    }
    bench.barrier()?;
    emit(json!({ "done": rank }));
    Ok(())
}
