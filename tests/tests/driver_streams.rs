//! cuda-stack-driver streams, events, host callbacks, cross-stream safety, threads and graphs.

use cuda_stack_driver::{DeviceSlice, Event, Kernel, LaunchConfig, Stream, StreamKind};
use cuda_tests::{context, ensure, gpu, load_cuda, TestResult, TEST_KERNELS};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    cuda_tests::run(vec![
        gpu("stream_kinds_priorities_query_and_sync", stream_kinds),
        gpu("events_time_and_order_streams", events),
        gpu(
            "host_callbacks_run_in_order_and_panics_are_caught",
            host_callbacks,
        ),
        gpu(
            "written_on_stream_a_read_on_stream_b_without_user_sync",
            cross_stream,
        ),
        gpu("ping_pong_between_three_streams", ping_pong),
        gpu("sixteen_threads_share_a_context", sixteen_threads),
        gpu("graph_replay_matches_eager_execution", graph_replay),
        gpu("graph_scalar_parameter_update", graph_update),
        gpu("graph_keeps_its_buffers_alive", graph_keeps_buffers),
        gpu(
            "capture_refuses_host_callbacks_host_copies_and_foreign_streams",
            capture_refusals,
        ),
        gpu(
            "capture_allocates_temporaries_the_graph_keeps",
            capture_allocates_temporaries,
        ),
        gpu(
            "module_dropped_during_a_capture_is_unloaded_after_it",
            module_drop_during_capture,
        ),
    ]);
}

type SlowFill = Kernel<(&'static mut DeviceSlice<f32>, f32, u32, i64)>;
type CopyScaled = Kernel<(
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    f32,
    u32,
)>;
type Axpy = Kernel<(
    f32,
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    u32,
)>;

struct K {
    slow: SlowFill,
    copy: CopyScaled,
    axpy: Axpy,
}

fn kernels(ctx: &cuda_stack_driver::Context) -> Result<K, Box<dyn std::error::Error>> {
    let m = load_cuda(ctx, TEST_KERNELS)?;
    // SAFETY: each signature matches its CUDA declaration in TEST_KERNELS.
    unsafe {
        Ok(K {
            slow: m.kernel("slow_fill")?,
            copy: m.kernel("copy_scaled")?,
            axpy: m.kernel("axpy")?,
        })
    }
}

fn stream_kinds() -> TestResult {
    let ctx = context()?;
    let (least, greatest) = Stream::priority_range(&ctx)?;
    ensure!(greatest <= least, "priority range {least} {greatest}");
    let hi = Stream::new(&ctx, StreamKind::NonBlocking, greatest)?;
    let blocking = Stream::new(&ctx, StreamKind::Blocking, least)?;
    let k = kernels(&ctx)?;
    let mut x = hi.alloc_zeros::<f32>(1 << 16)?;
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    unsafe {
        k.slow.launch(
            &hi,
            &LaunchConfig::new(4, 256),
            &mut x,
            3.0,
            1 << 16,
            50_000_000,
        )
    }?;
    let busy = !hi.query()?;
    hi.synchronize()?;
    ensure!(hi.query()?, "query after sync");
    eprintln!("stream busy right after a long launch: {busy}");
    let d = ctx.default_stream();
    let y = d.clone_htod(&[1.0f32])?;
    blocking.synchronize()?;
    ensure!(
        blocking.clone_dtoh(&y)? == [1.0],
        "default-stream buffer read on a blocking stream"
    );
    Ok(())
}

fn events() -> TestResult {
    let ctx = context()?;
    let a = ctx.new_stream()?;
    let b = ctx.new_stream()?;
    let k = kernels(&ctx)?;
    let mut x = a.alloc_zeros::<f32>(1 << 16)?;
    let start = Event::new(&ctx, true)?;
    let end = Event::new(&ctx, true)?;
    start.record(&a)?;
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    unsafe {
        k.slow.launch(
            &a,
            &LaunchConfig::new(4, 256),
            &mut x,
            1.0,
            1 << 16,
            20_000_000,
        )
    }?;
    end.record(&a)?;
    b.wait_event(&end)?; // b now waits for the slow kernel
    let marker = b.record_event()?;
    marker.synchronize()?;
    ensure!(end.query()?, "b's marker completed before a's end event");
    let t = start.elapsed(&end)?;
    ensure!(t > Duration::from_micros(100), "elapsed {t:?}");
    let ((), t2) = a.time(|s| {
        // SAFETY: the test kernel guards its index with the length it is passed, which does not
        // exceed any buffer argument's length here.
        unsafe {
            k.slow.launch(
                s,
                &LaunchConfig::new(4, 256),
                &mut x,
                2.0,
                1 << 16,
                20_000_000,
            )
        }
    })?;
    ensure!(t2 > Duration::from_micros(100), "stream.time {t2:?}");
    eprintln!("slow kernel: {t:?} / {t2:?}");
    let plain = Event::new(&ctx, false)?;
    plain.record(&a)?;
    ensure!(
        start.elapsed(&plain).is_err(),
        "elapsed with a non-timing event must fail"
    );
    plain.close()?;
    Ok(())
}

fn host_callbacks() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let k = kernels(&ctx)?;
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut x = s.alloc_zeros::<f32>(1024)?;
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    unsafe {
        k.slow.launch(
            &s,
            &LaunchConfig::new(1, 256),
            &mut x,
            1.0,
            1024,
            10_000_000,
        )
    }?;
    for i in 0..5 {
        let order = order.clone();
        s.launch_host_func(move || order.lock().unwrap().push(i))?;
    }
    s.launch_host_func(|| panic!("a panicking callback must not unwind into the driver"))?;
    let ran = Arc::new(AtomicUsize::new(0));
    let r2 = ran.clone();
    s.launch_host_func(move || {
        r2.fetch_add(1, Ordering::SeqCst);
    })?;
    s.synchronize()?;
    ensure!(*order.lock().unwrap() == [0, 1, 2, 3, 4], "order");
    ensure!(
        ran.load(Ordering::SeqCst) == 1,
        "callback after the panicking one did not run"
    );
    Ok(())
}

/// A buffer written on stream A by a slow kernel and read on stream B right away, with no
/// synchronization by the user: B must see the written data.
fn cross_stream() -> TestResult {
    let ctx = context()?;
    let a = ctx.new_stream()?;
    let b = ctx.new_stream()?;
    let k = kernels(&ctx)?;
    let n = 1 << 20;
    for round in 0..3 {
        let mut x = a.alloc_zeros::<f32>(n)?;
        // SAFETY: the test kernel guards its index with the length it is passed, which does not
        // exceed any buffer argument's length here.
        unsafe {
            k.slow.launch(
                &a,
                &LaunchConfig::new(132, 256),
                &mut x,
                7.0 + round as f32,
                n as u32,
                20_000_000,
            )
        }?;
        let mut y = b.alloc_zeros::<f32>(n)?;
        // SAFETY: the test kernel guards its index with the length it is passed, which does not
        // exceed any buffer argument's length here.
        unsafe {
            k.copy
                .launch(&b, &LaunchConfig::new(132, 256), &x, &mut y, 2.0, n as u32)
        }?;
        let got = b.clone_dtoh(&y)?;
        let want = 2.0 * (7.0 + round as f32);
        ensure!(
            got.iter().all(|&v| v == want),
            "round {round}: B read stale data ({} != {want})",
            got[0]
        );
        // And back: written on B (foreign), then read on A (home) with no user sync.
        // SAFETY: the test kernel guards its index with the length it is passed, which does not
        // exceed any buffer argument's length here.
        unsafe {
            k.slow.launch(
                &b,
                &LaunchConfig::new(132, 256),
                &mut x,
                -1.0,
                n as u32,
                20_000_000,
            )
        }?;
        ensure!(
            a.clone_dtoh(&x)?.iter().all(|&v| v == -1.0),
            "round {round}: A read stale data"
        );
    }
    Ok(())
}

fn ping_pong() -> TestResult {
    let ctx = context()?;
    let streams = [ctx.new_stream()?, ctx.new_stream()?, ctx.new_stream()?];
    let k = kernels(&ctx)?;
    let n = 1 << 18;
    let x0 = streams[0].clone_htod(&vec![1.0f32; n])?;
    let mut x = streams[1].clone_dtod(&x0)?;
    // y = 2*x + y on rotating streams; each step reads the previous step's output.
    let mut y = streams[2].alloc_zeros::<f32>(n)?;
    for i in 0..30 {
        let s = &streams[i % 3];
        // SAFETY: the test kernel guards its index with the length it is passed, which does not
        // exceed any buffer argument's length here.
        unsafe {
            k.axpy.launch(
                s,
                &LaunchConfig::for_num_elems(n),
                2.0,
                &x,
                &mut y,
                n as u32,
            )
        }?;
        std::mem::swap(&mut x, &mut y);
    }
    // Each step: y_new = 2x + y_old; track on the CPU.
    let (mut hx, mut hy) = (1.0f32, 0.0f32);
    for _ in 0..30 {
        hy += 2.0 * hx;
        std::mem::swap(&mut hx, &mut hy);
    }
    let got = streams[0].clone_dtoh(&x)?;
    ensure!(got.iter().all(|&v| v == hx), "ping-pong {} != {hx}", got[0]);
    Ok(())
}

fn sixteen_threads() -> TestResult {
    let ctx = context()?;
    let k = Arc::new(kernels(&ctx)?);
    let deadline = Instant::now() + Duration::from_secs(3);
    let iterations = AtomicUsize::new(0);
    std::thread::scope(|scope| -> TestResult {
        let handles: Vec<_> = (0..16)
            .map(|t| {
                let (ctx, k, iterations) = (ctx.clone(), k.clone(), &iterations);
                scope.spawn(move || -> Result<(), String> {
                    let s = ctx.new_stream().map_err(|e| e.to_string())?;
                    let mut i = 0u32;
                    while Instant::now() < deadline {
                        let n = 1000 + (t * 37 + i as usize * 11) % 5000;
                        let h: Vec<f32> = (0..n).map(|j| (j + t) as f32).collect();
                        let x = s.clone_htod(&h).map_err(|e| e.to_string())?;
                        let mut y = s.alloc_zeros::<f32>(n).map_err(|e| e.to_string())?;
                        let f = (t + 1) as f32;
                        // SAFETY: the test kernel guards its index with the length it is passed, which does not
                        // exceed any buffer argument's length here.
                        unsafe {
                            k.copy.launch(
                                &s,
                                &LaunchConfig::for_num_elems(n),
                                &x,
                                &mut y,
                                f,
                                n as u32,
                            )
                        }
                        .map_err(|e| e.to_string())?;
                        let got = s.clone_dtoh(&y).map_err(|e| e.to_string())?;
                        if got.iter().zip(&h).any(|(g, h)| *g != h * f) {
                            return Err(format!("thread {t} iteration {i}: wrong result"));
                        }
                        i += 1;
                        iterations.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| "a thread panicked")??;
        }
        Ok(())
    })?;
    eprintln!(
        "16 threads: {} iterations",
        iterations.load(Ordering::Relaxed)
    );
    ensure!(ctx.take_drop_errors().is_empty(), "drop errors");
    Ok(())
}

fn graph_replay() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let k = kernels(&ctx)?;
    let n = 10_000;
    let x = s.clone_htod(&(0..n).map(|i| i as f32 * 0.001).collect::<Vec<_>>())?;
    let mut eager = s.alloc_zeros::<f32>(n)?;
    let mut graphed = s.alloc_zeros::<f32>(n)?;
    let cfg = LaunchConfig::for_num_elems(n);
    let steps = |s: &Stream, y: &mut DeviceSlice<f32>| -> cuda_stack_driver::Result<()> {
        for i in 0..20 {
            // SAFETY: the test kernel guards its index with the length it is passed, which does not
            // exceed any buffer argument's length here.
            unsafe {
                k.axpy
                    .launch(s, &cfg, 0.5 + i as f32 * 0.01, &x, y, n as u32)
            }?;
        }
        Ok(())
    };
    for _ in 0..3 {
        steps(&s, &mut eager)?;
    }
    let graph = s.capture(|s| steps(s, &mut graphed))?;
    ensure!(graph.node_count()? == 20, "nodes {}", graph.node_count()?);
    let exec = graph.instantiate()?;
    ensure!(exec.kernel_node_count()? == 20, "kernel nodes");
    for _ in 0..3 {
        exec.launch(&s)?;
    }
    ensure!(
        s.clone_dtoh(&graphed)? == s.clone_dtoh(&eager)?,
        "graph replay differs from eager"
    );
    Ok(())
}

fn graph_update() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let k = kernels(&ctx)?;
    let n = 256;
    let x = s.clone_htod(&vec![1.0f32; n])?;
    let mut y = s.alloc_zeros::<f32>(n)?;
    let graph = s.capture(|s| {
        // SAFETY: the test kernel guards its index with the length it is passed, which does not
        // exceed any buffer argument's length here.
        unsafe {
            k.axpy.launch(
                s,
                &LaunchConfig::for_num_elems(n),
                1.0,
                &x,
                &mut y,
                n as u32,
            )
        }
    })?;
    let mut exec = graph.instantiate()?;
    exec.launch(&s)?; // y = 1
                      // SAFETY: parameter 0 is the scalar `a`; the buffers are unchanged.
    unsafe { exec.set_kernel_param(0, 0, 10.0f32)? };
    exec.launch(&s)?; // y = 11
    ensure!(
        s.clone_dtoh(&y)?.iter().all(|&v| v == 11.0),
        "updated scalar not used"
    );
    // SAFETY: deliberately wrong size: must be refused.
    let bad = unsafe { exec.set_kernel_param(0, 0, 1.0f64) };
    ensure!(bad.is_err(), "wrong-size parameter update accepted");
    Ok(())
}

fn graph_keeps_buffers() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let k = kernels(&ctx)?;
    let n = 1 << 16;
    let exec = {
        let x = s.clone_htod(&vec![3.0f32; n])?;
        let mut y = s.alloc_zeros::<f32>(n)?;
        let g = s.capture(|s| {
            // SAFETY: the test kernel guards its index with the length it is passed, which does not
            // exceed any buffer argument's length here.
            unsafe {
                k.copy.launch(
                    s,
                    &LaunchConfig::for_num_elems(n),
                    &x,
                    &mut y,
                    2.0,
                    n as u32,
                )
            }
        })?;
        g.instantiate()?
        // x and y are dropped here; the graph keeps their memory.
    };
    for _ in 0..5 {
        exec.launch(&s)?;
    }
    s.synchronize()?;
    drop(exec);
    s.synchronize()?;
    ensure!(ctx.take_drop_errors().is_empty(), "drop errors");
    Ok(())
}

/// What a graph could not keep alive is refused during capture: host callbacks (an `FnOnce` run at
/// every replay), copies to or from host memory, event records and allocations.
fn scratch(s: &Stream) -> cuda_stack_driver::Result<cuda_stack_driver::DeviceBuffer<f32>> {
    s.alloc_zeros::<f32>(16)
}

fn capture_refusals() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let other = ctx.new_stream()?;
    let k = kernels(&ctx)?;
    let n = 1024;
    let x = s.clone_htod(&vec![1.0f32; n])?;
    let mut y = s.alloc_zeros::<f32>(n)?;
    let pinned = cuda_stack_driver::PinnedBuffer::<f32>::zeroed(&ctx, n)?;
    let mut host = vec![0f32; n];
    let mut refusals = Vec::new();
    let g = s.capture(|s| {
        refusals.push(s.launch_host_func(|| ()).is_err());
        refusals.push(s.copy_htod_async(&pinned, &mut y).is_err());
        refusals.push(s.memcpy_dtoh(&x, &mut host).is_err());
        // Events (a graph cannot own them) are refused on a capturing stream.
        refusals.push(s.record_event().is_err());
        // The capture has a stream of its own: `other` is not capturing and keeps running work.
        refusals.push(other.memset_bytes(&mut scratch(&other)?, 0).is_ok());
        // SAFETY: the test kernel guards its index with the length it is passed, which does not
        // exceed any buffer argument's length here.
        unsafe {
            k.copy.launch(
                s,
                &LaunchConfig::for_num_elems(n),
                &x,
                &mut y,
                3.0,
                n as u32,
            )
        }
    })?;
    ensure!(refusals.iter().all(|&r| r), "refusals {refusals:?}");
    g.instantiate()?.launch(&s)?;
    ensure!(s.clone_dtoh(&y)?.iter().all(|&v| v == 3.0), "graph result");
    Ok(())
}

/// A buffer allocated on a capturing stream is made at capture time (not a graph node) and the
/// graph keeps it: a temporary dropped inside the capture stays valid for every replay.
fn capture_allocates_temporaries() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let k = kernels(&ctx)?;
    let n = 4096;
    let x = s.clone_htod(&vec![1.0f32; n])?;
    let mut y = s.alloc_zeros::<f32>(n)?;
    let cfg = LaunchConfig::for_num_elems(n);
    let g = s.capture(|s| {
        let mut t = s.alloc_zeros::<f32>(n)?;
        // SAFETY: the test kernel guards its index with `n`, the length of every buffer here.
        unsafe {
            k.copy.launch(s, &cfg, &x, &mut t, 3.0, n as u32)?;
            k.copy.launch(s, &cfg, &t, &mut y, 2.0, n as u32)?;
        }
        drop(t); // the graph keeps the memory
        Ok(())
    })?;
    let exec = g.instantiate()?;
    for _ in 0..3 {
        exec.launch(&s)?;
    }
    ensure!(
        s.clone_dtoh(&y)?.iter().all(|&v| v == 6.0),
        "graph result through a temporary"
    );
    drop(exec);
    // After the graph is gone the memory is freed; the device keeps working.
    ensure!(s.clone_dtoh(&x)?.iter().all(|&v| v == 1.0), "x intact");
    Ok(())
}

/// Dropping a module synchronizes its context first, which would invalidate a graph capture in
/// progress on any stream of it; so during a capture the unload is deferred, and the capture
/// survives.
fn module_drop_during_capture() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let k = kernels(&ctx)?;
    let n = 1024;
    let x = s.clone_htod(&vec![2.0f32; n])?;
    let mut y = s.alloc_zeros::<f32>(n)?;
    let g = s.capture(|s| {
        // SAFETY: the test kernel guards its index with the length it is passed, which does not
        // exceed any buffer argument's length here.
        unsafe {
            k.copy.launch(
                s,
                &LaunchConfig::for_num_elems(n),
                &x,
                &mut y,
                3.0,
                n as u32,
            )
        }?;
        let other =
            load_cuda(&ctx, TEST_KERNELS).map_err(|e| cuda_stack_driver::Error::Unsupported {
                what: "loading a module",
                why: e.to_string(),
            })?;
        drop(other); // deferred: a context synchronize here would invalidate this capture
                     // SAFETY: the test kernel guards its index with the length it is passed, which does not
                     // exceed any buffer argument's length here.
        unsafe {
            k.copy.launch(
                s,
                &LaunchConfig::for_num_elems(n),
                &x,
                &mut y,
                4.0,
                n as u32,
            )
        }
    })?;
    g.instantiate()?.launch(&s)?;
    ensure!(s.clone_dtoh(&y)?.iter().all(|&v| v == 8.0), "graph result");
    drop(kernels(&ctx)?); // a later drop unloads the deferred module too
    ensure!(ctx.take_drop_errors().is_empty(), "drop errors");
    Ok(())
}
