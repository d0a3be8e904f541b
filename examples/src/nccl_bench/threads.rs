//! The threads layout: one thread per GPU in this process, each with its own communicator —
//! `Communicator::init_rank` with one shared `UniqueId` (peer access enabled first, as its
//! documentation asks), or with `--blocking` the blocking communicators of
//! `CommGroup::init_all` — driven with plain `Communicator` calls ([`super::rank`]), no group.
//!
//! Nothing waits unboundedly: the results come back over a channel with a deadline; when a
//! rank fails or the deadline passes, every communicator is aborted (the other ranks' waits
//! then end) and the error is returned. Each thread drops its own communicator, all at the same
//! time (ranks finalize together), once this thread has let go of its handles.

use super::rank::RankBench;
use super::{host, HostRow, Plan, Res, Row};
use cuda_stack_driver::Context;
use cuda_stack_nccl::{enable_peer_access, CommConfig, CommGroup, Communicator, UniqueId};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What one rank's thread reports.
type Report = (usize, Res<(Vec<Row>, Vec<HostRow>)>);

/// The handles this thread keeps to abort every rank, and the signal that lets the rank
/// threads drop theirs.
#[derive(Default)]
struct Shared {
    comms: Mutex<Vec<Communicator>>,
    released: Mutex<bool>,
    release: Condvar,
}

impl Shared {
    fn lock_comms(&self) -> std::sync::MutexGuard<'_, Vec<Communicator>> {
        self.comms.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Aborts every rank's communicator (their waits end with an error).
    fn abort_all(&self) {
        for c in self.lock_comms().iter() {
            let _ = c.abort();
        }
    }

    /// Drops this thread's handles, then lets the rank threads drop theirs.
    fn release(&self) {
        self.lock_comms().clear();
        *self.released.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.release.notify_all();
    }

    /// A rank thread waits (at most `limit`) until [`Shared::release`].
    fn wait_release(&self, limit: Duration) {
        let g = self.released.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self.release.wait_timeout_while(g, limit, |r| !*r);
    }
}

/// One rank's whole run on its thread.
fn rank_body(plan: &Plan, comm: &Communicator) -> Res<(Vec<Row>, Vec<HostRow>)> {
    let mut bench = RankBench::new(comm, plan)?;
    let mut rows = Vec::new();
    bench.run(plan, &mut |r| rows.push(r))?;
    let host = if plan.host_overhead {
        bench.barrier()?;
        let (comm, stream, buf) = bench.parts();
        host::measure(comm, stream, buf, plan.max, plan.quick, false)?
    } else {
        Vec::new()
    };
    Ok((rows, host))
}

/// The sweep of `plan` on `n` GPUs, one thread each: rank 0's rows (each the slowest rank's
/// time) and every rank's host-time rows. `deadline` bounds the whole run.
pub fn run(plan: &Plan, n: usize, deadline: Duration) -> Res<(Vec<Row>, Vec<HostRow>)> {
    let config = CommConfig::with_timeout(Some(plan.timeout));
    let shared = Arc::new(Shared::default());
    // The contexts stay alive for the whole run: a context whose last handle goes is released,
    // and its peer access with it.
    let ctxs = (0..n)
        .map(Context::new)
        .collect::<cuda_stack_driver::Result<Vec<_>>>()?;
    // Either every communicator now (blocking, NCCL's ncclCommInitAll), or an id the threads
    // join with (non-blocking init_rank: every rank must call it at the same time).
    let mut premade: Vec<Option<Communicator>> = if plan.blocking {
        let devices: Vec<usize> = (0..n).collect();
        let comms = CommGroup::init_all(&devices, &config)?.into_comms();
        shared.lock_comms().extend(comms.iter().cloned());
        comms.into_iter().map(Some).collect()
    } else {
        enable_peer_access(&ctxs)?;
        vec![None; n]
    };
    let id = if plan.blocking {
        None
    } else {
        Some(UniqueId::new()?)
    };
    let (tx, rx) = mpsc::channel::<Report>();
    let start = Instant::now();
    let mut handles = Vec::new();
    for (rank, made) in premade.iter_mut().enumerate() {
        let (tx, shared, plan, config) = (tx.clone(), shared.clone(), plan.clone(), config.clone());
        let made = made.take();
        let h = std::thread::Builder::new()
            .name(format!("nccl_bench rank {rank}"))
            .spawn(move || {
                let comm: Res<Communicator> = match (made, id) {
                    (Some(c), _) => Ok(c),
                    (None, Some(id)) => Communicator::init_rank(&id, rank, n, rank, &config)
                        .map_err(|e| format!("init_rank: {e}").into()),
                    (None, None) => Err("no communicator and no id".into()),
                };
                match comm {
                    Ok(comm) => {
                        shared.lock_comms().push(comm.clone());
                        let r = rank_body(&plan, &comm);
                        let _ = tx.send((rank, r));
                        // Keep the communicator until every rank is done (so that the ranks
                        // finalize together), then drop it here.
                        shared.wait_release(deadline);
                        drop(comm);
                    }
                    Err(e) => {
                        let _ = tx.send((rank, Err(e)));
                    }
                }
            })?;
        handles.push(h);
    }
    drop(tx);
    let mut rows = Vec::new();
    let mut host = Vec::new();
    let mut failure: Option<String> = None;
    for _ in 0..n {
        let left = deadline.saturating_sub(start.elapsed());
        match rx.recv_timeout(left) {
            Ok((rank, Ok((r, h)))) => {
                if rank == 0 {
                    rows = r;
                }
                host.extend(h);
            }
            Ok((rank, Err(e))) => {
                failure = Some(format!("threads layout: rank {rank} failed: {e}"));
                break;
            }
            Err(_) => {
                failure = Some(format!(
                    "threads layout: not every rank finished within {:.0} s (all aborted)",
                    deadline.as_secs_f64()
                ));
                break;
            }
        }
    }
    if let Some(f) = failure {
        shared.abort_all();
        shared.release();
        return Err(f.into());
    }
    shared.release();
    // The ranks finalize their communicators together; wait for that (bounded: a rank still
    // busy after it ends with the process).
    let until = Instant::now() + Duration::from_secs(15);
    while handles.iter().any(|h| !h.is_finished()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(ctxs);
    host.sort_by_key(|h| (h.bytes, h.rank));
    Ok((rows, host))
}
