//! A driver error after work was queued (a launch, a copy, a wait, a graph launch): the work's
//! buffers stay alive until it is known to be over.

use super::*;

/// The buffer lives on `home`; a slow kernel on `other` uses it, and recording the after-use
/// event fails: the call returns the error with `other` already idle, so dropping the buffer
/// right away cannot free it under the kernel.
/// Two streams, the slow kernel, and a buffer living on `home`, idle.
pub(crate) struct TwoStreams {
    ctx: Context,
    home: Stream,
    other: Stream,
    k: SlowFill,
    y: cuda_stack_driver::DeviceBuffer<f32>,
}

pub(crate) fn two_streams() -> Result<TwoStreams, Box<dyn std::error::Error>> {
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

pub(crate) fn error_after_launch() -> TestResult {
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

pub(crate) fn error_after_dtod() -> TestResult {
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

pub(crate) fn error_after_async_htod() -> TestResult {
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
pub(crate) fn failed_pending_wait() -> TestResult {
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

pub(crate) fn error_after_graph_launch() -> TestResult {
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
