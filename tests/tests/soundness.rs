//! `tests/soundness`: each hole a safe program could once open, as a run-and-observe GPU test.
//! Each test must end in a typed error or a correct result, and run clean under
//! `compute-sanitizer --tool memcheck`. (What a type can forbid is in `compile_fail/`.)
//!
//! The rules these guard are written down in `cuda-stack-driver`'s crate docs ("Soundness model").

use cuda_stack_driver::cuda_stack_sys::{fault, CUresult};
use cuda_stack_driver::{Context, DeviceSlice, Error, Kernel, LaunchConfig, PinnedBuffer, Stream};
use cuda_tests::{context, ensure, gpu, load_cuda, TestResult, TEST_KERNELS};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

fn main() {
    cuda_tests::run(vec![
        // 2. A graph owns its kernels' modules.
        gpu("graph_outlives_module_and_kernel", graph_outlives_module),
        gpu("graph_outlives_its_buffers", graph_outlives_buffers),
        // 3. Capture state and enqueue are one step.
        gpu("capture_is_on_its_own_stream", capture_own_stream),
        gpu("capture_vs_enqueue_stress_threads", capture_stress),
        gpu("capture_refuses_what_a_graph_cannot_own", capture_refusals),
        gpu(
            "capture_private_pool_closes_with_the_capture_threads",
            capture_pool_stress,
        ),
        // 4. Errors after work was queued leave it tracked or finished.
        gpu("error_after_launch_settles_the_stream", error_after_launch),
        gpu("error_after_dtod_settles_the_stream", error_after_dtod),
        gpu(
            "error_after_async_htod_settles_the_stream",
            error_after_async_htod,
        ),
        gpu("failed_wait_still_waits_for_the_dma", failed_pending_wait),
        gpu(
            "error_after_graph_launch_settles_the_stream",
            error_after_graph_launch,
        ),
        // 5. Smaller holes.
        gpu("host_callback_cuda_call_is_refused", callback_cuda_refused),
        gpu("host_callback_drops_are_deferred", callback_drops_deferred),
        gpu(
            "host_callback_panic_payload_drop_panics",
            callback_payload_panics,
        ),
        gpu(
            "device_global_write_waits_for_kernels",
            global_write_ordered,
        ),
        gpu(
            "device_global_read_is_ordered_with_graph_replays",
            global_read_vs_replay,
        ),
        gpu("foreign_stream_is_checked", foreign_stream_checked),
        gpu(
            "binary_images_are_checked_before_the_driver_reads_them",
            binary_images_checked,
        ),
        gpu(
            "per_thread_stream_handles_and_overaligned_pinned_types_refused",
            special_handles_and_alignment,
        ),
        gpu2("push_current_keeps_bind_cache_honest", push_current_cache),
        gpu2(
            "cross_device_graph_and_global_refused",
            cross_device_refusals,
        ),
    ]);
}

use cuda_tests::{axpy_kernel as axpy, gpu2, slow_fill_kernel as slow_fill, Axpy, SlowFill};

/// About 50 ms of spinning on an H100/H200 clock.
const SLOW: i64 = 80_000_000;

/// `y += a * x` for all of `y` (checked: `x` and `y` have `n` elements).
fn launch_axpy(
    k: &Axpy,
    s: &Stream,
    a: f32,
    x: &DeviceSlice<f32>,
    y: &mut DeviceSlice<f32>,
) -> cuda_stack_driver::Result<()> {
    let n = y.len();
    assert_eq!(x.len(), n);
    // SAFETY: the kernel touches x[i], y[i] for i < n only, and both have n elements.
    unsafe { k.launch(s, &LaunchConfig::for_num_elems(n), a, x, y, n as u32) }
}

fn launch_slow_fill(
    k: &SlowFill,
    s: &Stream,
    y: &mut DeviceSlice<f32>,
    v: f32,
) -> cuda_stack_driver::Result<()> {
    let n = y.len();
    // SAFETY: grid-stride loop over i < n = y.len().
    unsafe { k.launch(s, &LaunchConfig::new(4, 128), y, v, n as u32, SLOW) }
}

fn graph_outlives_module() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let n = 4096;
    let x = s.clone_htod(&vec![1.0f32; n])?;
    let mut y = s.alloc_zeros::<f32>(n)?;
    let exec = {
        let m = load_cuda(&ctx, TEST_KERNELS)?;
        let k = axpy(&m)?;
        let g = s.capture(|cs| launch_axpy(&k, cs, 2.0, &x, &mut y))?;
        g.instantiate()?
        // `k` and `m` drop here: the graph must keep the module loaded.
    };
    for _ in 0..3 {
        exec.launch(&s)?;
    }
    ensure!(
        s.clone_dtoh(&y)?.iter().all(|&v| v == 6.0),
        "graph result after module drop"
    );
    drop(exec);
    Ok(())
}

fn graph_outlives_buffers() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let m = load_cuda(&ctx, TEST_KERNELS)?;
    let k = axpy(&m)?;
    let n = 1 << 16;
    let exec = {
        let x = s.clone_htod(&vec![1.0f32; n])?;
        let mut y = s.alloc_zeros::<f32>(n)?;
        s.capture(|cs| launch_axpy(&k, cs, 1.0, &x, &mut y))?
            .instantiate()?
    };
    for _ in 0..5 {
        exec.launch(&s)?;
    }
    s.synchronize()?;
    Ok(())
}

fn capture_own_stream() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let cap = ctx.begin_capture()?;
    ensure!(cap.stream().is_capture_stream(), "not a capture stream");
    ensure!(!cap.stream().same_as(&s), "capture on a user stream");
    ensure!(cap.is_capturing()?, "driver says not capturing");
    ensure!(!s.is_capturing()?, "user stream capturing");
    // A user stream is free to run work while a capture is in progress.
    let mut b = s.alloc_zeros::<f32>(16)?;
    s.memset_bytes(&mut b, 0)?;
    let g = cap.end()?;
    ensure!(g.node_count()? == 0, "empty capture has nodes");
    Ok(())
}

/// Eight threads queue work (kernels, memsets, host callbacks, event records) on clones of a
/// capture stream while the main thread ends the capture at an arbitrary moment; many rounds.
/// Every accepted host callback runs exactly once (a callback captured into a graph would run at
/// each replay, or be freed twice), and the graphs replay correctly.
fn capture_stress() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let m = load_cuda(&ctx, TEST_KERNELS)?;
    let k = Arc::new(axpy(&m)?);
    let n = 1024;
    let rounds = 40;
    let threads = 8;
    for round in 0..rounds {
        let cap = ctx.begin_capture()?;
        let cs_main = cap.stream().clone();
        let accepted = Arc::new(AtomicUsize::new(0));
        let ran = Arc::new(AtomicUsize::new(0));
        let start = Arc::new(Barrier::new(threads + 1));
        let mut handles = Vec::new();
        for t in 0..threads {
            let cs = cap.stream().clone();
            let (k, accepted, ran, start) =
                (k.clone(), accepted.clone(), ran.clone(), start.clone());
            let x = s.clone_htod(&vec![1.0f32; n])?;
            let mut y = s.alloc_zeros::<f32>(n)?;
            handles.push(std::thread::spawn(move || -> Result<(), String> {
                start.wait();
                for i in 0..30 {
                    match (t + i) % 4 {
                        0 => {
                            let ran = ran.clone();
                            if cs
                                .launch_host_func(move || {
                                    ran.fetch_add(1, Ordering::SeqCst);
                                })
                                .is_ok()
                            {
                                accepted.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        1 => launch_axpy(&k, &cs, 1.0, &x, &mut y).map_err(|e| e.to_string())?,
                        2 => cs.memset_bytes(&mut y, 0).map_err(|e| e.to_string())?,
                        _ => {
                            let _ = cs.record_event();
                        }
                    }
                }
                // Drop the buffers while the graph may still own them.
                drop((x, y));
                Ok(())
            }));
        }
        start.wait();
        std::thread::sleep(Duration::from_micros(50 * (round % 7) as u64));
        let graph = cap.end();
        for h in handles {
            h.join().map_err(|_| "worker panicked")??;
        }
        let exec = graph?.instantiate()?;
        for _ in 0..3 {
            exec.launch(&s)?;
        }
        s.synchronize()?;
        cs_main.synchronize()?; // the callbacks queued after the capture ended have run
        cap_stream_sync(&ctx)?;
        ensure!(
            ran.load(Ordering::SeqCst) == accepted.load(Ordering::SeqCst),
            "round {round}: {} callbacks accepted, {} ran",
            accepted.load(Ordering::SeqCst),
            ran.load(Ordering::SeqCst)
        );
    }
    Ok(())
}

/// The caching allocator's graph-private pool under threads: workers queue work on temporaries
/// of a capture stream, free them and allocate again (so the pool is in use), while the main
/// thread ends the capture at an arbitrary moment; many rounds. A block the capture freed while
/// holding it must never go to an allocation that started after the capture had ended (the graph
/// still holds it, so the driver cannot hand its address out: only the pool could), and the
/// graphs replay.
fn capture_pool_stress() -> TestResult {
    use cuda_stack_runtime::CachingAllocator;
    use std::collections::HashSet;
    use std::sync::Mutex;
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let alloc = CachingAllocator::new(&ctx);
    let n = 4096;
    let threads = 4;
    for round in 0..30 {
        let cap = ctx.begin_capture()?;
        let start = Arc::new(Barrier::new(threads + 1));
        // Addresses of blocks freed while the capture held them (and only the capture did).
        let freed = Arc::new(Mutex::new(HashSet::<u64>::new()));
        // Addresses handed out by allocations that began after the capture had ended.
        let after_end = Arc::new(Mutex::new(Vec::<u64>::new()));
        let mut handles = Vec::new();
        for _ in 0..threads {
            let cs = cap.stream().clone();
            let (alloc, start, freed, after_end) = (
                alloc.clone(),
                start.clone(),
                freed.clone(),
                after_end.clone(),
            );
            let x = s.clone_htod(&vec![7u8; n])?;
            let mut y = s.alloc_zeros::<u8>(n)?;
            s.synchronize()?;
            handles.push(std::thread::spawn(move || -> Result<(), String> {
                start.wait();
                let mut kept = Vec::new();
                for i in 0..40 {
                    let ended = cs.capture_ticket().is_none();
                    // SAFETY: written by the copy below before anything reads it.
                    let mut t = unsafe { alloc.alloc::<u8>(&cs, n) }.map_err(|e| e.to_string())?;
                    let p = t.as_raw_ptr();
                    if ended {
                        after_end.lock().unwrap_or_else(|e| e.into_inner()).push(p);
                    }
                    cs.memcpy_dtod(&x, &mut t).map_err(|e| e.to_string())?;
                    cs.memcpy_dtod(&t, &mut y).map_err(|e| e.to_string())?;
                    let still = cs.capture_ticket().is_some();
                    if i % 5 == 0 {
                        kept.push(t); // some stay live past the end
                    } else {
                        drop(t);
                        if still {
                            // Freed while the capture was (at least just before) in progress.
                            freed.lock().unwrap_or_else(|e| e.into_inner()).insert(p);
                        }
                    }
                }
                drop(kept);
                drop((x, y));
                Ok(())
            }));
        }
        start.wait();
        std::thread::sleep(Duration::from_micros(40 * (round % 9) as u64));
        let graph = cap.end();
        for h in handles {
            h.join().map_err(|_| "worker panicked")??;
        }
        let graph = graph?;
        // Blocks freed during the capture and held by it are alive (held by `graph`): an
        // allocation that began after the end can only have one of their addresses if the pool
        // handed it out.
        let freed = freed.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for p in after_end.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            ensure!(
                !freed.contains(p),
                "round {round}: a block the capture freed ({p:#x}) went to an allocation made \
                 after the capture ended"
            );
        }
        let exec = graph.instantiate()?;
        for _ in 0..2 {
            exec.launch(&s)?;
        }
        s.synchronize()?;
    }
    Ok(())
}

fn capture_refusals() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let pinned = PinnedBuffer::<f32>::zeroed(&ctx, 16)?;
    let mut y = s.alloc_zeros::<f32>(16)?;
    let mut host = vec![0f32; 16];
    let exec_other = s.capture(|_| Ok(()))?.instantiate()?;
    let mut refused = Vec::new();
    let g = ctx.capture(|cs| {
        refused.push(("host func", cs.launch_host_func(|| ()).is_err()));
        refused.push(("htod async", cs.copy_htod_async(&pinned, &mut y).is_err()));
        refused.push(("dtoh", cs.memcpy_dtoh(&y, &mut host).is_err()));
        refused.push(("htod", cs.memcpy_htod(&host, &mut y).is_err()));
        refused.push(("event record", cs.record_event().is_err()));
        refused.push(("graph launch", exec_other.launch(cs).is_err()));
        // An allocation is not refused: it is made now (not a graph node) and the graph keeps
        // it, so a temporary dropped inside the capture stays valid for every replay.
        let mut t = cs.alloc_zeros::<f32>(4)?;
        cs.memset_bytes(&mut t, 1)?;
        drop(t);
        cs.memset_bytes(&mut y, 0)
    })?;
    let bad: Vec<_> = refused
        .iter()
        .filter(|(_, r)| !r)
        .map(|(w, _)| *w)
        .collect();
    ensure!(bad.is_empty(), "accepted during capture: {bad:?}");
    let exec = g.instantiate()?;
    exec.launch(&s)?;
    exec.launch(&s)?;
    s.synchronize()?;
    Ok(())
}

/// The buffer lives on `home`; a slow kernel on `other` uses it, and recording the after-use
/// event fails: the call returns the error with `other` already idle, so dropping the buffer
/// right away cannot free it under the kernel.
/// Two streams, the slow kernel, and a buffer living on `home`, idle.
struct TwoStreams {
    ctx: Context,
    home: Stream,
    other: Stream,
    k: SlowFill,
    y: cuda_stack_driver::DeviceBuffer<f32>,
}

fn two_streams() -> Result<TwoStreams, Box<dyn std::error::Error>> {
    let ctx = context()?;
    let home = ctx.new_stream()?;
    let other = ctx.new_stream()?;
    let k = slow_fill(&load_cuda(&ctx, TEST_KERNELS)?)?;
    let y = home.alloc_zeros::<f32>(1 << 20)?;
    home.synchronize()?;
    Ok(TwoStreams {
        ctx,
        home,
        other,
        k,
        y,
    })
}

fn error_after_launch() -> TestResult {
    let TwoStreams {
        home,
        other,
        k,
        mut y,
        ..
    } = two_streams()?;
    // before_use records one event on `home`; the second record is after_use's.
    fault::inject("cuEventRecord", 2, CUresult::CUDA_ERROR_INVALID_HANDLE.0);
    let r = launch_slow_fill(&k, &other, &mut y, 5.0);
    fault::clear();
    ensure!(r.is_err(), "injected failure not reported");
    ensure!(
        other.query()?,
        "the kernel is still running after the error: it is untracked"
    );
    drop(y);
    home.synchronize()?;
    Ok(())
}

fn error_after_dtod() -> TestResult {
    let ctx = context()?;
    let home = ctx.new_stream()?;
    let other = ctx.new_stream()?;
    let m = load_cuda(&ctx, TEST_KERNELS)?;
    let k = slow_fill(&m)?;
    let n = 1 << 20;
    let src = other.alloc_zeros::<f32>(n)?;
    let mut dst = home.alloc_zeros::<f32>(n)?;
    home.synchronize()?;
    let mut busy = other.alloc_zeros::<f32>(n)?;
    launch_slow_fill(&k, &other, &mut busy, 1.0)?; // keeps `other` busy
    fault::inject("cuEventRecord", 2, CUresult::CUDA_ERROR_INVALID_HANDLE.0);
    let r = other.memcpy_dtod(&src, &mut dst);
    fault::clear();
    ensure!(r.is_err(), "injected failure not reported");
    ensure!(
        other.query()?,
        "the copy is still queued after the error: it is untracked"
    );
    drop(dst);
    Ok(())
}

fn error_after_async_htod() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let m = load_cuda(&ctx, TEST_KERNELS)?;
    let k = slow_fill(&m)?;
    let n = 1 << 20;
    let mut busy = s.alloc_zeros::<f32>(n)?;
    let mut dst = s.alloc_zeros::<f32>(n)?;
    let mut pinned = PinnedBuffer::<f32>::zeroed(&ctx, n)?;
    launch_slow_fill(&k, &s, &mut busy, 1.0)?;
    fault::inject("cuEventRecord", 1, CUresult::CUDA_ERROR_INVALID_HANDLE.0);
    let r = s.copy_htod_async(&pinned, &mut dst).map(|p| p.wait());
    fault::clear();
    ensure!(r.is_err(), "injected failure not reported");
    ensure!(
        s.query()?,
        "the DMA may still read the pinned buffer after the error"
    );
    pinned[0] = 1.0; // the host may touch it now
    Ok(())
}

/// Waiting for a pending async copy fails (injected): host access still waits for the DMA (the
/// context-wide fallback) before handing out the memory.
fn failed_pending_wait() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let m = load_cuda(&ctx, TEST_KERNELS)?;
    let k = slow_fill(&m)?;
    let n = 1 << 16;
    let mut src = s.alloc_zeros::<f32>(n)?;
    let mut pinned = PinnedBuffer::<f32>::zeroed(&ctx, n)?;
    launch_slow_fill(&k, &s, &mut src, 7.0)?;
    let pending = s.copy_dtoh_async(&src, &mut pinned)?;
    std::mem::forget(pending); // leak the guard: the buffer itself must wait
    fault::inject(
        "cuEventSynchronize",
        1,
        CUresult::CUDA_ERROR_INVALID_HANDLE.0,
    );
    let all_seven = pinned.iter().all(|&v| v == 7.0);
    fault::clear();
    ensure!(
        all_seven,
        "host read the pinned buffer before the DMA finished"
    );
    Ok(())
}

fn error_after_graph_launch() -> TestResult {
    let TwoStreams {
        ctx,
        home,
        other,
        k,
        mut y,
    } = two_streams()?;
    let exec = ctx
        .capture(|cs| launch_slow_fill(&k, cs, &mut y, 3.0))?
        .instantiate()?;
    fault::inject("cuEventRecord", 2, CUresult::CUDA_ERROR_INVALID_HANDLE.0);
    let r = exec.launch(&other);
    fault::clear();
    ensure!(r.is_err(), "injected failure not reported");
    ensure!(
        other.query()?,
        "the replay is still running after the error: it is untracked"
    );
    drop(exec);
    drop(y);
    home.synchronize()?;
    Ok(())
}

fn callback_cuda_refused() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let (tx, rx) = mpsc::channel();
    let inner = s.clone();
    s.launch_host_func(move || {
        let r1 = inner.synchronize().err();
        let r2 = Context::new(0).err();
        let r3 = inner.alloc_zeros::<f32>(4).err();
        let _ = tx.send([r1, r2, r3]);
    })?;
    s.synchronize()?;
    let errs = rx.recv_timeout(Duration::from_secs(10))?;
    for (i, e) in errs.iter().enumerate() {
        ensure!(
            matches!(e, Some(Error::InHostCallback)),
            "call {i} in a host callback gave {e:?}"
        );
    }
    Ok(())
}

fn callback_drops_deferred() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let (free_before, _) = ctx.mem_get_info()?;
    // 20 x 64 MiB, far more than other tests running beside this one allocate.
    for _ in 0..20 {
        let own = ctx.new_stream()?;
        let buf = own.alloc_zeros::<f32>(1 << 24)?;
        let pinned = PinnedBuffer::<f32>::zeroed(&ctx, 1024)?;
        let ev = s.record_event()?;
        // Everything is moved into the callback and dropped there.
        s.launch_host_func(move || drop((buf, own, pinned, ev)))?;
    }
    s.synchronize()?;
    // The reaper frees what the callbacks dropped; give it a moment.
    let mut ok = false;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(20));
        s.synchronize()?;
        let (free_now, _) = ctx.mem_get_info()?;
        if free_now + (256 << 20) >= free_before {
            ok = true;
            break;
        }
    }
    ensure!(ok, "memory dropped in callbacks was not released");
    // (Drop errors are per context and other tests run beside this one: the fault campaign, a
    // test binary of its own, checks them.)
    Ok(())
}

/// Waits for the context's work where that does not disturb other tests' captures (a
/// context-wide synchronize is refused while any capture is in progress).
fn cap_stream_sync(ctx: &Context) -> TestResult {
    match ctx.synchronize() {
        Ok(()) => Ok(()),
        Err(Error::Unsupported { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

struct PanicsOnDrop;
impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("payload drop panics");
    }
}

fn callback_payload_panics() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    s.launch_host_func(|| std::panic::panic_any(PanicsOnDrop))?;
    s.launch_host_func(|| panic!("plain panic"))?;
    s.synchronize()?;
    // Reaching here means nothing unwound into the driver (that would abort the process).
    let y = s.alloc_zeros::<f32>(4)?;
    ensure!(
        s.clone_dtoh(&y)? == [0.0; 4],
        "stream unusable after callback panics"
    );
    Ok(())
}

const GLOBAL_KERNELS: &str = r#"
__device__ float g_value;
extern "C" __global__ void slow_read_global(float* out, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    out[0] = g_value;
}
// Writes the pair in two halves with a spin between them: a read that overlaps a run sees
// x != y (a torn value).
__device__ int2 g_pair;
extern "C" __global__ void torn_write_global(long long cycles) {
    int v = g_pair.x + 1;
    g_pair.x = v;
    long long start = clock64();
    while (clock64() - start < cycles) { }
    g_pair.y = v;
}
"#;

/// Retries `f` while it is refused because another test of this binary is capturing (global
/// access waits for the whole context, which a capture in progress forbids).
fn retry_while_capturing<R>(
    f: impl Fn() -> cuda_stack_driver::Result<R>,
) -> Result<R, Box<dyn std::error::Error>> {
    for _ in 0..500 {
        match f() {
            Err(Error::Unsupported { .. }) => std::thread::sleep(Duration::from_millis(10)),
            r => return Ok(r?),
        }
    }
    Err("a capture never ended".into())
}

fn global_write_ordered() -> TestResult {
    let ctx = context()?;
    let a = ctx.new_stream()?;
    let b = ctx.new_stream()?;
    let m = load_cuda(&ctx, GLOBAL_KERNELS)?;
    let g = m.global::<f32>("g_value")?;
    // SAFETY: matches slow_read_global(float*, long long).
    let k: Kernel<(&mut DeviceSlice<f32>, i64)> = unsafe { m.kernel("slow_read_global")? };
    // Global access waits for the whole context, which is refused while another test of this
    // binary is capturing: retry until no capture is in progress.
    let retry =
        |f: &dyn Fn() -> cuda_stack_driver::Result<()>| -> TestResult { retry_while_capturing(f) };
    retry(&|| g.write(&a, &1.0))?;
    let mut out = b.alloc_zeros::<f32>(1)?;
    // SAFETY: one thread writes out[0]; `out` has one element.
    unsafe { k.launch(&b, &LaunchConfig::new(1, 1), &mut out, SLOW)? };
    retry(&|| g.write(&a, &2.0))?; // must wait for the kernel on `b`, which reads 1.0
    ensure!(
        b.clone_dtoh(&out)? == [1.0],
        "the write overtook a kernel reading the global"
    );
    let read = std::cell::Cell::new(0.0f32);
    retry(&|| g.read(&a).map(|v| read.set(v)))?;
    ensure!(read.get() == 2.0, "global value");
    Ok(())
}

/// Rule 3 for graphs: a replay of a captured kernel that writes a `__device__` global is queued
/// under the module's globals lock like a direct launch, so `DeviceGlobal::read` on another
/// thread never sees half of a replay's write. (Before the fix: most reads came back torn.)
fn global_read_vs_replay() -> TestResult {
    let ctx = context()?;
    let m = load_cuda(&ctx, GLOBAL_KERNELS)?;
    let g = m.global::<[i32; 2]>("g_pair")?;
    // SAFETY: matches torn_write_global(long long); it touches only the module's global.
    let k: Kernel<(i64,)> = unsafe { m.kernel("torn_write_global")? };
    let a = ctx.new_stream()?;
    retry_while_capturing(|| g.write(&a, &[0, 0]))?;
    let graph = ctx.capture(|s| {
        // SAFETY: one thread; the kernel touches only the global (no buffers, no bounds).
        unsafe { k.launch(s, &LaunchConfig::new(1, 1), SLOW / 10) }
    })?;
    let exec = graph.instantiate()?;
    drop(m); // the graph keeps the module (rule 2); `g` does too
    let replays = 40;
    let replayer = {
        let ctx = ctx.clone();
        std::thread::spawn(move || -> cuda_stack_driver::Result<()> {
            let s = ctx.new_stream()?;
            for _ in 0..replays {
                exec.launch(&s)?;
                std::thread::sleep(Duration::from_millis(1));
            }
            s.synchronize()
        })
    };
    let mut torn = Vec::new();
    let mut reads = 0;
    while !replayer.is_finished() {
        let v = retry_while_capturing(|| g.read(&a))?;
        reads += 1;
        if v[0] != v[1] {
            torn.push(v);
        }
    }
    replayer.join().map_err(|_| "replay thread panicked")??;
    let last = retry_while_capturing(|| g.read(&a))?;
    ensure!(
        torn.is_empty(),
        "{} of {reads} reads saw a replay's write half done: {torn:?}",
        torn.len()
    );
    ensure!(
        last == [replays, replays],
        "after {replays} replays the global is {last:?}"
    );
    Ok(())
}

/// The driver reads a cubin or fatbin as far as the image's own headers say (and unknown bytes
/// as NUL-terminated PTX): `load_module` checks the image against its slice first. The fixtures
/// are `cuda-stack-driver/testdata/add1.cu` built by nvcc 13.0.
fn binary_images_checked() -> TestResult {
    const CUBIN: &[u8] = include_bytes!("../../cuda-stack-driver/testdata/add1_sm90.cubin");
    const FATBIN: &[u8] = include_bytes!("../../cuda-stack-driver/testdata/add1_sm80_sm90.fatbin");
    use cuda_stack_driver::{JitOptions, ModuleImage};
    let ctx = context()?;
    let opts = JitOptions::default();
    for (image, what) in [
        (ModuleImage::Cubin(&[]), "an empty cubin"),
        (ModuleImage::Cubin(b"abc"), "three bytes as a cubin"),
        (
            ModuleImage::Cubin(&CUBIN[..CUBIN.len() / 2]),
            "half a cubin",
        ),
        (
            ModuleImage::Fatbin(&FATBIN[..FATBIN.len() - 8]),
            "a truncated fatbin",
        ),
        (ModuleImage::Fatbin(CUBIN), "a cubin passed as a fatbin"),
    ] {
        ensure!(
            matches!(
                ctx.load_module(image, &opts),
                Err(Error::InvalidImage { .. })
            ),
            "{what} was handed to the driver"
        );
    }
    // The whole images load and run (the fatbin on any sm_80+ GPU through its SASS or PTX,
    // the sm_90 cubin only on compute capability 9.0).
    let cc = ctx.limits().compute_capability;
    let mut images = vec![ModuleImage::Fatbin(FATBIN)];
    if (cc.major, cc.minor) == (9, 0) {
        images.push(ModuleImage::Cubin(CUBIN));
    }
    let s = ctx.new_stream()?;
    for image in images {
        let m = ctx.load_module(image, &opts)?;
        // SAFETY: matches add1(float*, unsigned) in testdata/add1.cu.
        let k: Kernel<(&mut DeviceSlice<f32>, u32)> = unsafe { m.kernel("add1")? };
        let mut x = s.clone_htod(&[1.0f32; 100])?;
        // SAFETY: the kernel touches x[i] for i < 100 only; x has 100 elements.
        unsafe { k.launch(&s, &LaunchConfig::for_num_elems(100), &mut x, 100)? };
        ensure!(s.clone_dtoh(&x)? == [2.0f32; 100], "add1 from {image:?}");
    }
    Ok(())
}

/// A `Stream` stands for one queue: the per-thread and legacy special handles are refused. A
/// `PinnedBuffer` of a type aligned beyond what the driver guarantees is refused.
fn special_handles_and_alignment() -> TestResult {
    let ctx = context()?;
    for raw in [1usize, 2] {
        // SAFETY: the handles are the driver's documented special streams (always "live"); the
        // call must refuse them before using them.
        let r =
            unsafe { Stream::from_raw(&ctx, raw as cuda_stack_driver::cuda_stack_sys::CUstream) };
        ensure!(
            matches!(r, Err(Error::Unsupported { .. })),
            "special stream handle {raw:#x} accepted"
        );
    }
    #[repr(C, align(8192))]
    #[derive(Clone, Copy)]
    struct Big([u8; 8192]);
    // SAFETY: one byte array filling the whole (8192-byte) size: no padding, any bits valid.
    unsafe impl cuda_stack_driver::bytemuck::Zeroable for Big {}
    // SAFETY: as above; Copy and 'static.
    unsafe impl cuda_stack_driver::bytemuck::Pod for Big {}
    ensure!(
        matches!(
            PinnedBuffer::<Big>::zeroed(&ctx, 2),
            Err(Error::Unsupported { .. })
        ),
        "a pinned buffer of an 8192-aligned type"
    );
    Ok(())
}

fn foreign_stream_checked() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    // SAFETY: `s` outlives `borrowed` and everything made through it; nobody captures it.
    let borrowed = unsafe { Stream::from_raw(&ctx, s.as_raw())? };
    let b = borrowed.clone_htod(&[1.0f32, 2.0])?;
    ensure!(
        borrowed.clone_dtoh(&b)? == [1.0, 2.0],
        "borrowed stream copy"
    );
    drop(b);
    drop(borrowed); // must not destroy `s`
    s.synchronize()?;
    // SAFETY: the context handle is live.
    let again = unsafe { Context::from_raw(ctx.as_raw())? };
    ensure!(again.same_as(&ctx), "from_raw gave another handle");
    Ok(())
}

fn push_current_cache() -> TestResult {
    let c0 = Context::new(0)?;
    let c1 = Context::new(1)?;
    let s0 = c0.new_stream()?;
    let m = load_cuda(&c0, TEST_KERNELS)?;
    let k = axpy(&m)?;
    let x = s0.clone_htod(&[1.0f32; 8])?;
    let mut y = s0.alloc_zeros::<f32>(8)?;
    launch_axpy(&k, &s0, 1.0, &x, &mut y)?; // binds c0 (and caches it)
    {
        let _g = c1.push_current()?; // c1 current now
        launch_axpy(&k, &s0, 1.0, &x, &mut y)?; // must bind c0 again
    }
    launch_axpy(&k, &s0, 1.0, &x, &mut y)?;
    ensure!(
        s0.clone_dtoh(&y)? == [3.0; 8],
        "launches while another context was pushed"
    );
    Ok(())
}

fn cross_device_refusals() -> TestResult {
    let c0 = Context::new(0)?;
    let c1 = Context::new(1)?;
    ensure!(!c0.same_as(&c1), "two devices, one handle");
    let s0 = c0.new_stream()?;
    let s1 = c1.new_stream()?;
    let exec = s0.capture(|_| Ok(()))?.instantiate()?;
    ensure!(
        matches!(
            exec.launch(&s1),
            Err(Error::DeviceMismatch {
                expected: 0,
                found: 1,
                ..
            })
        ),
        "graph launched on another device's stream"
    );
    let m = load_cuda(&c0, GLOBAL_KERNELS)?;
    let g = m.global::<f32>("g_value")?;
    ensure!(
        matches!(g.write(&s1, &1.0), Err(Error::DeviceMismatch { .. })),
        "global written through another device's stream"
    );
    let b1 = s1.alloc_zeros::<f32>(4)?;
    let mut b0 = s0.alloc_zeros::<f32>(4)?;
    ensure!(
        matches!(
            s0.memcpy_dtod(&b1, &mut b0),
            Err(Error::DeviceMismatch {
                expected: 0,
                found: 1,
                ..
            })
        ),
        "cross-device copy"
    );
    Ok(())
}
