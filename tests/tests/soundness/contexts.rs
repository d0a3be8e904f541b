//! Streams and contexts from elsewhere: a foreign stream, the push-current cache, another
//! device's objects.

use super::*;

pub(crate) fn foreign_stream_checked() -> TestResult {
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

pub(crate) fn push_current_cache() -> TestResult {
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

pub(crate) fn cross_device_refusals() -> TestResult {
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
