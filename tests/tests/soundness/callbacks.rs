//! Host callbacks: CUDA calls refused inside them, drops deferred out of them, a payload that
//! panics.

use super::*;

pub(crate) fn callback_cuda_refused() -> TestResult {
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

pub(crate) fn callback_drops_deferred() -> TestResult {
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
pub(crate) fn cap_stream_sync(ctx: &Context) -> TestResult {
    match ctx.synchronize() {
        Ok(()) => Ok(()),
        Err(Error::Unsupported { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

pub(crate) struct PanicsOnDrop;
impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("payload drop panics");
    }
}

pub(crate) fn callback_payload_panics() -> TestResult {
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
