//! `--host-overhead`: where one operation's host time goes, per rank, at sizes up to 64 KiB.
//!
//! Three ways of queuing the same in-place f32 all-reduce, each call timed on the host and
//! followed by one stream synchronize (so every call starts with nothing in flight), medians of
//! a few hundred calls after a warm-up:
//! - **safe**: `Communicator::all_reduce_in_place`, everything this crate does per call;
//! - **bare**: `ncclAllReduce` on the same non-blocking communicator through its raw escape
//!   hatch (`Communicator::with_raw`), plus the polling of `ncclCommGetAsyncError` that NCCL
//!   requires before the next call on a non-blocking communicator (a tight spin, no back-off);
//! - **blocking** (processes layout): `ncclAllReduce`, through the same escape hatch, on a
//!   *blocking* communicator made for this measurement only (`CommConfig::blocking`; its id
//!   travels through the measured communicator), as PyTorch's communicators are by default.
//!
//! safe − bare is what this crate's layer adds per call; bare − blocking is what NCCL's
//! non-blocking mode itself costs.

use super::{HostRow, Res};
use cuda_examples::bench::median;
use cuda_stack_driver::cuda_stack_sys::nccl_types::{
    ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t,
};
use cuda_stack_driver::cuda_stack_sys::{CUstream, Nccl};
use cuda_stack_driver::{DeviceBuffer, ForeignUse, Stream};
use cuda_stack_nccl::{CommConfig, Communicator, ReduceOp, UniqueId, UNIQUE_ID_BYTES};
use std::ffi::c_void;
use std::time::{Duration, Instant};

/// The sizes measured (those up to the run's largest).
const SIZES: [usize; 5] = [8, 512, 4 << 10, 32 << 10, 64 << 10];

/// One call's host time and the time until the synchronize after it returned.
type Sample = (Duration, Duration);

/// Every rank's host-time rows for `comm` (each rank calls this at the same point: the
/// variants are collectives). `buf` must hold at least `max_bytes / 4` elements; `blocking_too`
/// adds the blocking communicator (only where a hang is bounded by someone else: the processes
/// layout's parent kills its children at its deadline).
pub fn measure(
    comm: &Communicator,
    stream: &Stream,
    buf: &mut DeviceBuffer<f32>,
    max_bytes: usize,
    quick: bool,
    blocking_too: bool,
) -> Res<Vec<HostRow>> {
    let (calls, warm) = if quick { (50, 10) } else { (300, 30) };
    let limit = comm.timeout().unwrap_or(Duration::from_secs(60));
    let blocking = if blocking_too {
        Some(blocking_twin(comm, stream)?)
    } else {
        None
    };
    let mut rows = Vec::new();
    for bytes in SIZES.into_iter().filter(|&b| b == 8 || b <= max_bytes) {
        let elems = (bytes / 4).min(buf.len()).max(1);
        let mut v = buf.slice_mut(0..elems)?;
        let mut safe = Vec::with_capacity(calls);
        for i in 0..calls + warm {
            let t0 = Instant::now();
            comm.all_reduce_in_place(&mut v, ReduceOp::Sum, stream)?;
            let t1 = Instant::now();
            stream.synchronize()?;
            if i >= warm {
                safe.push((t1 - t0, t0.elapsed()));
            }
        }
        comm.check()?;
        let ptr = v.as_raw_ptr();
        let mut bare = Vec::with_capacity(calls);
        for i in 0..calls + warm {
            let uses = [ForeignUse::write(&mut v)];
            // SAFETY: `with_raw`: the closure neither keeps, destroys, finalizes nor aborts the
            // handle, and queues its work through `enqueue_foreign`. `enqueue_foreign`: the one
            // `ncclAllReduce` is queued on the stream it is given, reads and writes only the
            // `elems` f32s of `v` (borrowed mutably in `uses`), keeps no address, touches no
            // host memory asynchronously; the polling only reads the communicator's state.
            let r = unsafe {
                comm.with_raw(|raw| {
                    stream.enqueue_foreign(&uses, None, |s| {
                        bare_call(raw, s, ptr, elems, true, limit)
                    })
                })
            };
            let (t0, t1) = r???;
            stream.synchronize()?;
            if i >= warm {
                bare.push((t1 - t0, t0.elapsed()));
            }
        }
        comm.check()?;
        let mut blocked = Vec::with_capacity(calls);
        if let Some(b) = &blocking {
            for i in 0..calls + warm {
                let uses = [ForeignUse::write(&mut v)];
                // SAFETY: as above, on the blocking communicator (its own stream's device is
                // the same GPU; `stream` is of its context).
                let r = unsafe {
                    b.with_raw(|raw| {
                        stream.enqueue_foreign(&uses, None, |s| {
                            bare_call(raw, s, ptr, elems, false, limit)
                        })
                    })
                };
                let (t0, t1) = r???;
                stream.synchronize()?;
                if i >= warm {
                    blocked.push((t1 - t0, t0.elapsed()));
                }
            }
        }
        let med = |s: &[Sample], sync: bool| -> f64 {
            let v: Vec<f64> = s
                .iter()
                .map(|(c, t)| if sync { *t } else { *c }.as_secs_f64() * 1e6)
                .collect();
            median(&v)
        };
        let has_blocking = blocking.is_some();
        rows.push(HostRow {
            rank: comm.rank(),
            bytes: elems * 4,
            calls,
            safe_us: med(&safe, false),
            bare_us: med(&bare, false),
            blocking_us: has_blocking.then(|| med(&blocked, false)),
            safe_sync_us: med(&safe, true),
            bare_sync_us: med(&bare, true),
            blocking_sync_us: has_blocking.then(|| med(&blocked, true)),
        });
    }
    drop(blocking);
    Ok(rows)
}

/// One bare in-place f32 sum `ncclAllReduce` of `n` elements at `ptr` on `comm` and `stream`;
/// on a non-blocking communicator (`poll`), then spins on `ncclCommGetAsyncError` until NCCL
/// has queued it (NCCL refuses the next call before that), for at most `limit`. Returns when
/// the call began and when it was queued.
fn bare_call(
    comm: ncclComm_t,
    stream: CUstream,
    ptr: u64,
    n: usize,
    poll: bool,
    limit: Duration,
) -> Result<(Instant, Instant), String> {
    let nccl = Nccl::get().map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    // SAFETY: the caller's: a live communicator used by this thread only for the call, a
    // stream of its device, and `n` f32s at `ptr` borrowed for the work.
    let called = unsafe {
        nccl.ncclAllReduce(
            ptr as *const c_void,
            ptr as *mut c_void,
            n,
            ncclDataType_t::ncclFloat32,
            ncclRedOp_t::ncclSum,
            comm,
            stream,
        )
    };
    match called {
        Ok(()) => {}
        Err(e) if poll && e.code() == Some(ncclResult_t::ncclInProgress) => {}
        Err(e) => return Err(format!("bare ncclAllReduce: {e}")),
    }
    if poll {
        loop {
            let mut st = ncclResult_t::ncclSuccess;
            // SAFETY: a live communicator; out-pointer to a local.
            unsafe { nccl.ncclCommGetAsyncError(comm, &mut st) }.map_err(|e| e.to_string())?;
            if st == ncclResult_t::ncclSuccess {
                break;
            }
            if st != ncclResult_t::ncclInProgress {
                return Err(format!(
                    "bare ncclAllReduce: ncclCommGetAsyncError says {}",
                    st.0
                ));
            }
            if t0.elapsed() > limit {
                return Err(format!(
                    "bare ncclAllReduce still in progress after {:.0} s",
                    limit.as_secs_f64()
                ));
            }
            std::hint::spin_loop();
        }
    }
    Ok((t0, Instant::now()))
}

/// A blocking communicator ([`CommConfig::blocking`], NCCL's default mode and PyTorch's) of the
/// same ranks and devices as `comm`: rank 0 makes a new id, which reaches every rank through
/// `comm` (a broadcast), then every rank joins. Every rank of `comm` must call this at the same
/// point.
fn blocking_twin(comm: &Communicator, stream: &Stream) -> Res<Communicator> {
    let mine = if comm.rank() == 0 {
        UniqueId::new()?.as_bytes()
    } else {
        [0u8; UNIQUE_ID_BYTES]
    };
    let mut dev = stream.clone_htod(&mine)?;
    comm.broadcast_in_place(&mut dev, 0, stream)?;
    comm.synchronize(stream)?;
    let id = UniqueId::from_slice(&stream.clone_dtoh(&dev)?)?;
    let config = CommConfig {
        blocking: true,
        ..CommConfig::with_timeout(comm.timeout())
    };
    Ok(Communicator::init_rank(
        &id,
        comm.rank(),
        comm.size(),
        comm.device(),
        &config,
    )?)
}
