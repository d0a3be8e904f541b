//! `cuda-stack-nccl`'s failure paths on the GPU: the group guard's rules, argument errors (typed,
//! nothing queued), an invalid raw call (a typed NCCL error), abort then use, a peer that never
//! joins (initialisation times out and aborts), a bounded drop that keeps its buffers ordered,
//! and — with two GPUs (ignored on one) — the watchdog aborting a collective whose peer stopped
//! participating.
//!
//! One test at a time (a lock), as in `nccl.rs`.

use cuda_stack_driver::{Context, Stream};
use cuda_stack_nccl::{
    AbortReason, CommConfig, CommGroup, Communicator, Error, Group, ReduceOp, UniqueId,
};
use cuda_tests::{ensure, gpu2_nccl, gpu_count, gpu_nccl, TestResult};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

fn main() {
    // SAFETY: the first statement of main: no other thread exists yet.
    unsafe { cuda_stack_nccl::disable_nvls_in_environment() };
    // A blocking initialisation whose peer never joins leaves a thread inside NCCL for the
    // rest of its process: that process is a child of its own.
    cuda_tests::child_scenarios(&[("blocking_peer_never_joins", || peer_never_joins_with(true))]);
    cuda_tests::run(vec![
        gpu_nccl("group_guard_rules", group_rules),
        gpu_nccl(
            "argument_errors_are_typed_and_queue_nothing",
            argument_errors,
        ),
        gpu_nccl("invalid_raw_call_is_a_typed_nccl_error", raw_invalid_call),
        gpu_nccl("abort_then_use_is_a_typed_error", abort_then_use),
        gpu_nccl("a_peer_that_never_joins_times_out", peer_never_joins),
        gpu_nccl(
            "a_blocking_communicators_peer_that_never_joins_times_out",
            blocking_peer_never_joins,
        ),
        gpu_nccl("drop_is_bounded_and_keeps_buffers_ordered", drop_fast),
        gpu2_nccl(
            "watchdog_aborts_a_collective_whose_peer_stopped",
            watchdog_abort,
        ),
        gpu2_nccl(
            "watchdog_aborts_a_blocking_communicators_collective_whose_peer_stopped",
            watchdog_abort_blocking,
        ),
    ]);
}

/// One NCCL test at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn config() -> CommConfig {
    CommConfig::with_timeout(Some(Duration::from_secs(60)))
}

/// A fresh one-rank communicator on device 0, and a stream.
fn single() -> Result<(Communicator, Stream), Box<dyn std::error::Error>> {
    let id = UniqueId::new()?;
    let c = Communicator::init_rank(&id, 0, 1, 0, &config())?;
    let s = c.context().new_stream()?;
    Ok((c, s))
}

fn group_rules() -> TestResult {
    let _l = serial();
    let (c, s) = single()?;
    let mut a = s.clone_htod(&[2.0f32; 64])?;
    let mut b = s.clone_htod(&[3.0f32; 64])?;
    {
        let mut g = Group::new()?;
        g.all_reduce_in_place(&c, &mut a, ReduceOp::Sum, &s)?;
        ensure!(
            matches!(
                c.all_reduce_in_place(&mut b, ReduceOp::Sum, &s),
                Err(Error::GroupOpen { .. })
            ),
            "a plain op inside a group was accepted"
        );
        ensure!(
            matches!(Group::new(), Err(Error::GroupOpen { .. })),
            "a nested group was accepted"
        );
        ensure!(
            matches!(UniqueId::new(), Err(Error::GroupOpen { .. })),
            "a unique id inside a group was accepted"
        );
        ensure!(
            matches!(c.abort(), Err(Error::GroupOpen { .. })),
            "abort inside a group was accepted"
        );
        // Dropped without end(): ends the group.
    }
    ensure!(
        s.clone_dtoh(&a)? == [2.0f32; 64],
        "the group's op did not run"
    );
    c.all_reduce_in_place(&mut b, ReduceOp::Max, &s)?;
    ensure!(
        s.clone_dtoh(&b)? == [3.0f32; 64],
        "a plain op after the group failed"
    );
    // An empty group is fine, and so is ending one explicitly.
    Group::new()?.end()?;
    // A group over a communicator aborted meanwhile refuses the op.
    let (d, s2) = single()?;
    d.abort()?;
    let mut g = Group::new()?;
    ensure!(
        matches!(
            g.all_reduce_in_place(&d, &mut b, ReduceOp::Sum, &s2),
            Err(Error::Aborted { .. })
        ),
        "a group accepted an aborted communicator"
    );
    g.end()?;
    Ok(())
}

fn argument_errors() -> TestResult {
    let _l = serial();
    let (c, s) = single()?;
    let a = s.clone_htod(&[1.0f32; 8])?;
    let mut b9 = s.alloc_zeros::<f32>(9)?;
    let mut b8 = s.alloc_zeros::<f32>(8)?;
    ensure!(
        matches!(
            c.all_reduce(&a, &mut b9, ReduceOp::Sum, &s),
            Err(Error::Length { .. })
        ),
        "all_reduce 8 -> 9 accepted"
    );
    ensure!(
        matches!(
            c.broadcast(&a, &mut b8, 1, &s),
            Err(Error::InvalidRank { rank: 1, .. })
        ),
        "root 1 of 1 accepted"
    );
    ensure!(
        matches!(c.send(&a, 3, &s), Err(Error::InvalidRank { .. })),
        "peer 3 of 1 accepted"
    );
    ensure!(
        matches!(c.all_gather(&a, &mut b9, &s), Err(Error::Length { .. })),
        "all_gather 8 -> 9 accepted"
    );
    ensure!(
        matches!(
            c.reduce_scatter(&a, &mut b9, ReduceOp::Sum, &s),
            Err(Error::Length { .. })
        ),
        "reduce_scatter 8 -> 9 accepted"
    );
    if gpu_count() >= 2 {
        let other = Context::new(1)?.new_stream()?;
        ensure!(
            matches!(
                c.all_reduce(&a, &mut b8, ReduceOp::Sum, &other),
                Err(Error::DeviceMismatch { .. })
            ),
            "a stream of another device was accepted"
        );
    }
    // Nothing was queued, and the communicator works.
    ensure!(s.clone_dtoh(&b8)? == [0.0f32; 8], "a refused op wrote");
    c.all_reduce(&a, &mut b8, ReduceOp::Sum, &s)?;
    ensure!(s.clone_dtoh(&b8)? == [1.0f32; 8], "valid op after errors");
    Ok(())
}

fn raw_invalid_call() -> TestResult {
    use cuda_stack_driver::cuda_stack_sys::nccl_types::{
        ncclDataType_t, ncclRedOp_t, ncclResult_t,
    };
    let _l = serial();
    let (c, s) = single()?;
    let nccl = cuda_stack_driver::cuda_stack_sys::Nccl::get()?;
    // SAFETY: no buffer is touched (count 0); NCCL rejects the datatype before anything else.
    let r = unsafe {
        c.with_raw(|raw| {
            nccl.ncclAllReduce(
                std::ptr::null(),
                std::ptr::null_mut(),
                0,
                ncclDataType_t(99),
                ncclRedOp_t::ncclSum,
                raw,
                s.as_raw(),
            )
        })?
    };
    let code = r.as_ref().err().and_then(|e| e.code());
    ensure!(
        code == Some(ncclResult_t::ncclInvalidArgument),
        "an invalid datatype gave {r:?}"
    );
    let e = r.unwrap_err();
    ensure!(e.call() == "ncclAllReduce", "{e}");
    // NCCL may or may not consider the communicator broken afterwards; either way it says so
    // with a typed error, and a healthy one still works.
    match c.check() {
        Ok(()) => {
            let mut b = s.clone_htod(&[4.0f32; 4])?;
            c.all_reduce_in_place(&mut b, ReduceOp::Sum, &s)?;
            ensure!(
                s.clone_dtoh(&b)? == [4.0f32; 4],
                "op after an invalid raw call"
            );
            eprintln!("the communicator stayed usable after the invalid call");
        }
        Err(Error::Aborted {
            reason: AbortReason::AsyncError { .. },
            ..
        }) => eprintln!("NCCL reported the communicator broken after the invalid call"),
        Err(e) => return Err(format!("unexpected error after the invalid call: {e}").into()),
    }
    Ok(())
}

fn abort_then_use() -> TestResult {
    let _l = serial();
    let (c, s) = single()?;
    let mut b = s.clone_htod(&[1.0f32; 16])?;
    c.all_reduce_in_place(&mut b, ReduceOp::Sum, &s)?;
    c.abort()?;
    ensure!(
        c.abort_reason() == Some(AbortReason::Requested),
        "{:?}",
        c.abort_reason()
    );
    let e = c
        .all_reduce_in_place(&mut b, ReduceOp::Sum, &s)
        .unwrap_err();
    ensure!(
        matches!(
            &e,
            Error::Aborted {
                reason: AbortReason::Requested,
                rank: 0,
                nranks: 1
            }
        ),
        "{e}"
    );
    ensure!(e.to_string().contains("abort"), "{e}");
    ensure!(
        matches!(c.check(), Err(Error::Aborted { .. })),
        "check after abort"
    );
    ensure!(
        matches!(c.synchronize(&s), Err(Error::Aborted { .. })),
        "synchronize after abort"
    );
    // SAFETY: the closure does nothing.
    let raw = unsafe { c.with_raw(|_| ()) };
    ensure!(
        matches!(raw, Err(Error::Aborted { .. })),
        "with_raw after abort"
    );
    c.abort()?; // twice is harmless
                // The buffer is still ours, intact from the first op.
    ensure!(s.clone_dtoh(&b)? == [1.0f32; 16], "buffer after abort");
    Ok(())
}

fn peer_never_joins() -> TestResult {
    let _l = serial();
    peer_never_joins_with(false)
}

fn blocking_peer_never_joins() -> TestResult {
    let _l = serial();
    cuda_tests::run_in_child("blocking_peer_never_joins", Duration::from_secs(60))
}

/// Rank 0 of 2 alone: its initialisation must give up after the timeout, blocking or not.
fn peer_never_joins_with(blocking: bool) -> TestResult {
    let id = UniqueId::new()?;
    let timeout = Duration::from_secs(3);
    let start = Instant::now();
    let config = CommConfig {
        blocking,
        ..CommConfig::with_timeout(Some(timeout))
    };
    let r = Communicator::init_rank(&id, 0, 2, 0, &config);
    let took = start.elapsed();
    match r {
        Err(Error::Aborted {
            reason: AbortReason::Timeout { what, waited },
            ..
        }) => {
            ensure!(what == "communicator initialisation", "{what}");
            ensure!(waited >= timeout, "gave up after {waited:?}");
        }
        other => return Err(format!("expected a timeout, got {other:?}").into()),
    }
    // The abort's grace is 10 s; the call must not wait much beyond timeout + grace.
    ensure!(took < timeout + Duration::from_secs(15), "took {took:?}");
    Ok(())
}

fn drop_fast() -> TestResult {
    let _l = serial();
    let (c, s) = single()?;
    let mut b = s.clone_htod(&vec![1.0f32; 1 << 20])?;
    c.all_reduce_in_place(&mut b, ReduceOp::Sum, &s)?;
    let start = Instant::now();
    drop(c);
    // A one-rank finalize takes milliseconds; the drop waits for it at most 5 s in any case.
    let took = start.elapsed();
    eprintln!("drop took {took:?}");
    ensure!(took < Duration::from_secs(6), "drop took {took:?}");
    // The buffer's use is tracked: reading it waits for the op, whatever the teardown does.
    ensure!(
        s.clone_dtoh(&b)?.iter().all(|&v| v == 1.0),
        "buffer after drop"
    );
    Ok(())
}

/// Two ranks in two threads: one all-reduce together (connections made), then rank 0 starts a
/// second one that rank 1 never joins. The kernel waits on the GPU; the watchdog must abort
/// rank 0's communicator after the timeout, so its stream finishes and `synchronize` reports
/// the timeout instead of hanging.
fn watchdog_abort() -> TestResult {
    watchdog_abort_with(false)
}

fn watchdog_abort_blocking() -> TestResult {
    watchdog_abort_with(true)
}

fn watchdog_abort_with(blocking: bool) -> TestResult {
    let _l = serial();
    let timeout = Duration::from_secs(3);
    let cfg = CommConfig {
        blocking,
        ..CommConfig::with_timeout(Some(timeout))
    };
    let comms = CommGroup::new(&[0, 1], &cfg)?.into_comms();
    if comms.iter().any(|c| c.is_blocking() != blocking) {
        return Err(format!("the communicators' blocking mode is not {blocking}").into());
    }
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
    let handles: Vec<_> = comms
        .into_iter()
        .map(|c| {
            let barrier = barrier.clone();
            std::thread::spawn(move || -> Result<Option<Error>, String> {
                let go = || -> Result<Option<Error>, Box<dyn std::error::Error>> {
                    let s = c.context().new_stream()?;
                    let mut b = s.clone_htod(&[1.0f32; 1024])?;
                    c.all_reduce_in_place(&mut b, ReduceOp::Sum, &s)?;
                    c.synchronize(&s)?;
                    barrier.wait();
                    if c.rank() == 1 {
                        // Stops participating; waits until rank 0 has given up, then aborts too.
                        barrier.wait();
                        c.abort()?;
                        return Ok(None);
                    }
                    let start = Instant::now();
                    let queued = c.all_reduce_in_place(&mut b, ReduceOp::Sum, &s);
                    let e = match queued {
                        Err(e) => e, // timed out on the host (still connecting)
                        Ok(()) => match c.synchronize(&s) {
                            Err(e) => e,
                            Ok(()) => return Err("the unmatched all-reduce completed".into()),
                        },
                    };
                    let took = start.elapsed();
                    barrier.wait();
                    if took > timeout + Duration::from_secs(20) {
                        return Err(format!("the abort came after {took:?}").into());
                    }
                    Ok(Some(e))
                };
                go().map_err(|e| e.to_string())
            })
        })
        .collect();
    let mut got = Vec::new();
    for h in handles {
        got.push(h.join().map_err(|_| "a rank's thread panicked")??);
    }
    match got.into_iter().flatten().next() {
        Some(e) if e.is_timeout() => Ok(()),
        other => Err(format!("rank 0 should see a timeout, got {other:?}").into()),
    }
}
