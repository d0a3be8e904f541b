//! `tests/soundness_guards`: every guard type under `mem::forget` and out-of-order drops — the
//! thread's current stream (`use_stream`), its context stack (`push_current`), NCCL groups and
//! graph captures. Each must leave a consistent state: typed errors, never a hang (on any
//! thread, drops included), never a stale current stream or context. (Copy guards, the
//! `PendingCopy`s, are covered in `soundness.rs` and `driver_memory.rs`.)

use cuda_stack_driver::cuda_stack_sys::CUcontext;
use cuda_stack_driver::{Context, Error, Kernel, LaunchConfig};
use cuda_stack_nccl::{CommConfig, Communicator, Group, ReduceOp, UniqueId};
use cuda_stack_runtime::{current_stream, reset_current_streams, use_stream};
use cuda_tests::{
    axpy_kernel, child_scenarios, context, ensure, gpu, gpu2, gpu_nccl, load_cuda, run_in_child,
    TestResult, TEST_KERNELS,
};
use std::sync::mpsc;
use std::time::Duration;

fn main() {
    child_scenarios(&[("leaked_capture", leaked_capture_child)]);
    // SAFETY: the first statement of main after the child dispatch: no other thread exists yet.
    unsafe { cuda_stack_nccl::disable_nvls_in_environment() };
    cuda_tests::run(vec![
        gpu(
            "stream_guards_dropped_out_of_order",
            stream_guards_out_of_order,
        ),
        gpu("stream_guard_leaked_then_reset", stream_guard_leaked),
        gpu2(
            "context_guards_dropped_out_of_order_or_leaked",
            context_guards_out_of_order,
        ),
        gpu_nccl(
            "nccl_group_leaked_never_blocks_other_threads",
            nccl_group_leaked,
        ),
        gpu_nccl(
            "nccl_comm_in_an_open_group_is_refused_elsewhere",
            nccl_comm_in_open_group,
        ),
        gpu(
            "leaked_capture_gives_typed_errors_never_hangs",
            leaked_capture,
        ),
    ]);
}

/// Runs `f` on a thread of its own (a fresh thread-local state) and fails if it takes longer
/// than `limit`: a hang is a failure, not a stuck test binary.
fn on_thread_within(
    limit: Duration,
    f: impl FnOnce() -> TestResult + Send + 'static,
) -> TestResult {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f().map_err(|e| e.to_string()));
    });
    match rx.recv_timeout(limit) {
        Ok(r) => Ok(r?),
        Err(_) => Err(format!("no progress within {} s (a hang)", limit.as_secs()).into()),
    }
}

fn stream_guards_out_of_order() -> TestResult {
    on_thread_within(Duration::from_secs(60), || {
        let ctx = context()?;
        let (s1, s2) = (ctx.new_stream()?, ctx.new_stream()?);
        let default = current_stream()?;
        // Dropped in the order they were made (the outer guard first).
        let g1 = use_stream(&s1);
        let g2 = use_stream(&s2);
        drop(g1);
        ensure!(
            current_stream()?.same_as(&s2),
            "the inner guard's stream is not current after the outer guard dropped"
        );
        drop(g2);
        ensure!(
            current_stream()?.same_as(&default),
            "a stream stayed current after every guard was dropped (out of order)"
        );
        // Three deep, the middle one first.
        let s3 = ctx.new_stream()?;
        let (a, b, c) = (use_stream(&s1), use_stream(&s2), use_stream(&s3));
        drop(b);
        ensure!(
            current_stream()?.same_as(&s3),
            "middle drop changed the current stream"
        );
        drop(c);
        ensure!(
            current_stream()?.same_as(&s1),
            "after the inner two, the outer's stream"
        );
        drop(a);
        ensure!(
            current_stream()?.same_as(&default),
            "after all three, the default stream"
        );
        Ok(())
    })
}

fn stream_guard_leaked() -> TestResult {
    on_thread_within(Duration::from_secs(60), || {
        let ctx = context()?;
        let s1 = ctx.new_stream()?;
        let default = current_stream()?;
        std::mem::forget(use_stream(&s1));
        ensure!(
            current_stream()?.same_as(&s1),
            "a leaked guard's stream stays current (its scope never ends)"
        );
        {
            let s2 = ctx.new_stream()?;
            let _g = use_stream(&s2);
            ensure!(current_stream()?.same_as(&s2), "a later guard nests");
        }
        ensure!(
            current_stream()?.same_as(&s1),
            "after the later guard, back to the leaked one"
        );
        let late = use_stream(&s1);
        reset_current_streams();
        ensure!(
            current_stream()?.same_as(&default),
            "reset_current_streams left a stream current"
        );
        drop(late); // its entry is gone: nothing to do, and no other entry is touched
        ensure!(
            current_stream()?.same_as(&default),
            "a guard dropped after a reset"
        );
        Ok(())
    })
}

/// The calling thread's current context, straight from the driver.
fn current_context() -> Result<CUcontext, Box<dyn std::error::Error>> {
    let drv = cuda_stack_driver::cuda_stack_sys::Driver::get()?;
    let mut cur = std::ptr::null_mut();
    // SAFETY: out-pointer to a local.
    unsafe { drv.cuCtxGetCurrent(&mut cur)? };
    Ok(cur)
}

fn context_guards_out_of_order() -> TestResult {
    on_thread_within(Duration::from_secs(60), || {
        let (c0, c1) = (Context::new(0)?, Context::new(1)?);
        let before = current_context()?;
        let g0 = c0.push_current()?;
        let g1 = c1.push_current()?;
        drop(g0); // out of order: c1's guard is still alive, so c1 stays current
        ensure!(
            current_context()? == c1.as_raw(),
            "dropping the outer guard first changed the current context under the inner one"
        );
        drop(g1);
        ensure!(
            current_context()? == before,
            "after both guards the thread's context is not what it was before them"
        );
        // A leaked guard keeps its context pushed; later guards still pop only their own.
        std::mem::forget(c1.push_current()?);
        {
            let _g = c0.push_current()?;
            ensure!(
                current_context()? == c0.as_raw(),
                "a guard after a leaked one"
            );
        }
        ensure!(
            current_context()? == c1.as_raw(),
            "the leaked guard's context is no longer current"
        );
        // The crate's own calls bind what they need, whatever was pushed.
        let s0 = c0.new_stream()?;
        let m = load_cuda(&c0, TEST_KERNELS)?;
        let k = axpy_kernel(&m)?;
        let x = s0.clone_htod(&[1.0f32; 4])?;
        let mut y = s0.alloc_zeros::<f32>(4)?;
        // SAFETY: the kernel touches x[i], y[i] for i < 4 only; both have 4 elements.
        unsafe { k.launch(&s0, &LaunchConfig::for_num_elems(4), 2.0, &x, &mut y, 4)? };
        ensure!(
            s0.clone_dtoh(&y)? == [2.0; 4],
            "a launch after a leaked guard"
        );
        Ok(())
    })
}

fn one_rank_comm() -> Result<Communicator, Box<dyn std::error::Error>> {
    let id = UniqueId::new()?;
    let cfg = CommConfig::with_timeout(Some(Duration::from_secs(60)));
    Ok(Communicator::init_rank(&id, 0, 1, 0, &cfg)?)
}

fn nccl_group_leaked() -> TestResult {
    let comm = one_rank_comm()?;
    let stream = comm.context().new_stream()?;
    let mut buf = stream.clone_htod(&[1.0f32; 64])?;
    // Another thread opens a group with an operation on `comm` and leaks it.
    let leaker = {
        let comm = comm.clone();
        let stream = stream.clone();
        let mut own = stream.clone_htod(&[2.0f32; 64])?;
        std::thread::spawn(move || -> Result<(), String> {
            let mut g = Group::new().map_err(|e| e.to_string())?;
            g.all_reduce_in_place(&comm, &mut own, ReduceOp::Sum, &stream)
                .map_err(|e| e.to_string())?;
            std::mem::forget(g);
            // On this thread NCCL's group stays open: every later call here is refused.
            match comm.check() {
                Err(cuda_stack_nccl::Error::GroupOpen { .. }) => Ok(()),
                other => Err(format!(
                    "after a leaked group, check() on its thread: {other:?}"
                )),
            }
        })
    };
    leaker.join().map_err(|_| "the leaking thread panicked")??;
    // Elsewhere every use of the communicator is refused at once, never blocked.
    let comm2 = comm.clone();
    on_thread_within(Duration::from_secs(20), move || {
        ensure!(
            matches!(
                comm2.check(),
                Err(cuda_stack_nccl::Error::CommInGroup { rank: 0, .. })
            ),
            "check() on a communicator held by a leaked group"
        );
        ensure!(
            matches!(
                comm2.abort(),
                Err(cuda_stack_nccl::Error::CommInGroup { .. })
            ),
            "abort() of a communicator held by a leaked group"
        );
        Ok(())
    })?;
    let r = comm.all_reduce_in_place(&mut buf, ReduceOp::Sum, &stream);
    ensure!(
        matches!(r, Err(cuda_stack_nccl::Error::CommInGroup { .. })),
        "all_reduce on a communicator held by a leaked group: {r:?}"
    );
    // The last handle's drop, on another thread, leaks the NCCL handle instead of waiting.
    on_thread_within(Duration::from_secs(20), move || {
        drop(comm);
        Ok(())
    })?;
    ensure!(
        stream.clone_dtoh(&buf)? == [1.0f32; 64],
        "the buffer of a refused operation changed"
    );
    Ok(())
}

fn nccl_comm_in_open_group() -> TestResult {
    let comm = one_rank_comm()?;
    let stream = comm.context().new_stream()?;
    let mut a = stream.clone_htod(&[1.0f32; 16])?;
    let (opened_tx, opened_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let holder = {
        let comm = comm.clone();
        let stream = stream.clone();
        let mut own = stream.clone_htod(&[3.0f32; 16])?;
        std::thread::spawn(move || -> Result<Vec<f32>, String> {
            let mut g = Group::new().map_err(|e| e.to_string())?;
            g.all_reduce_in_place(&comm, &mut own, ReduceOp::Sum, &stream)
                .map_err(|e| e.to_string())?;
            let _ = opened_tx.send(());
            let _ = done_rx.recv_timeout(Duration::from_secs(30));
            g.end().map_err(|e| e.to_string())?;
            stream.clone_dtoh(&own).map_err(|e| e.to_string())
        })
    };
    opened_rx.recv_timeout(Duration::from_secs(30))?;
    let r = comm.all_reduce_in_place(&mut a, ReduceOp::Sum, &stream);
    let _ = done_tx.send(());
    ensure!(
        matches!(r, Err(cuda_stack_nccl::Error::CommInGroup { .. })),
        "a call while another thread's group holds the communicator: {r:?}"
    );
    let own = holder.join().map_err(|_| "the group's thread panicked")??;
    ensure!(own == [3.0f32; 16], "the group's one-rank sum");
    // Once the group has ended, the communicator is usable again everywhere.
    comm.all_reduce_in_place(&mut a, ReduceOp::Sum, &stream)?;
    comm.synchronize(&stream)?;
    ensure!(
        stream.clone_dtoh(&a)? == [1.0f32; 16],
        "a call after the group ended"
    );
    Ok(())
}

fn leaked_capture() -> TestResult {
    run_in_child("leaked_capture", Duration::from_secs(120))
}

const GLOBAL_SRC: &str = r#"
__device__ float g_leak;
extern "C" __global__ void set_leak(float v) { g_leak = v; }
"#;

/// In a process of its own (the capture stays open until it exits): a capture leaked with
/// `mem::forget` keeps capturing for good, so whatever must synchronize the whole context is
/// refused with a typed error, at once; everything else keeps working, and the process exits.
fn leaked_capture_child() -> TestResult {
    let ctx = context()?;
    let m = load_cuda(&ctx, GLOBAL_SRC)?;
    let g = m.global::<f32>("g_leak")?;
    let s = ctx.new_stream()?;
    g.write(&s, &1.0)?;
    std::mem::forget(ctx.begin_capture()?);
    let t = std::time::Instant::now();
    ensure!(
        matches!(g.read(&s), Err(Error::Unsupported { .. })),
        "a global read while a leaked capture is open"
    );
    ensure!(
        matches!(ctx.synchronize(), Err(Error::Unsupported { .. })),
        "context synchronize while a leaked capture is open"
    );
    ensure!(
        t.elapsed() < Duration::from_secs(5),
        "refusals took {:?}",
        t.elapsed()
    );
    // Ordinary streams, launches and copies still work.
    // SAFETY: matches set_leak(float); it writes only the module's global.
    let k: Kernel<(f32,)> = unsafe { m.kernel("set_leak")? };
    // SAFETY: one thread, writes only the global.
    unsafe { k.launch(&s, &LaunchConfig::new(1, 1), 2.0)? };
    let tk = axpy_kernel(&load_cuda(&ctx, TEST_KERNELS)?)?;
    let x = s.clone_htod(&[1.0f32; 8])?;
    let mut y = s.clone_htod(&[1.0f32; 8])?;
    // SAFETY: the kernel touches x[i], y[i] for i < 8 only; both have 8 elements.
    unsafe { tk.launch(&s, &LaunchConfig::for_num_elems(8), 1.0, &x, &mut y, 8)? };
    ensure!(
        s.clone_dtoh(&y)? == [2.0; 8],
        "a launch after a leaked capture"
    );
    drop(m); // its unload is deferred (a context synchronize is not allowed): no hang
    Ok(())
}
