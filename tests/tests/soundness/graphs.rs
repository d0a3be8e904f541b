//! CUDA graphs and stream capture: graphs that outlive their modules and buffers, captures of
//! a stream of one's own, under stress, with the memory pool, and the calls refused meanwhile.

use super::*;

pub(crate) fn graph_outlives_module() -> TestResult {
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

pub(crate) fn graph_outlives_buffers() -> TestResult {
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

pub(crate) fn capture_own_stream() -> TestResult {
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
pub(crate) fn capture_stress() -> TestResult {
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
pub(crate) fn capture_pool_stress() -> TestResult {
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

pub(crate) fn capture_refusals() -> TestResult {
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
