//! Peer access between devices and copies across them (`cuda-stack-driver`'s `peer` and
//! `Stream::memcpy_peer`): on one GPU, the self case and copies within the device; on two or
//! more, every ordered pair, idempotent concurrent enabling, and peer copies ordered on both
//! devices (a slow kernel before, a free right after).

use cuda_stack_driver::{Context, Device, Error};
use cuda_tests::{
    ensure, fill_slowly, gpu, gpu2, gpu_count, load_cuda, slow_fill_kernel, TestResult,
    TEST_KERNELS,
};
use std::sync::{Arc, Barrier};

fn main() {
    cuda_tests::run(vec![
        gpu("a_device_can_access_itself", itself),
        gpu(
            "can_access_peer_matches_the_driver_for_every_pair",
            every_pair,
        ),
        gpu("memcpy_peer_within_one_device_is_ordered", within_device),
        gpu("memcpy_peer_checks_its_arguments", argument_checks),
        gpu2(
            "enable_peer_access_is_idempotent_and_thread_safe",
            enable_concurrently,
        ),
        gpu2(
            "memcpy_peer_both_ways_is_ordered_on_both_devices",
            across_devices,
        ),
    ]);
}

fn itself() -> TestResult {
    for d in Device::all()? {
        ensure!(
            d.can_access_peer(&d)?,
            "device {} cannot access itself",
            d.ordinal()
        );
        let ctx = Context::new(d.ordinal())?;
        ctx.enable_peer_access(&ctx)?;
        ctx.enable_peer_access(&ctx)?;
        ensure!(ctx.peer_access_enabled(&ctx), "self access not reported");
    }
    Ok(())
}

fn every_pair() -> TestResult {
    let drv = cuda_stack_driver::cuda_stack_sys::Driver::get()?;
    let devs = Device::all()?;
    let mut pairs = 0;
    for a in &devs {
        for b in &devs {
            if a == b {
                continue;
            }
            let mut raw = 0;
            // SAFETY: out-pointer to a local; both devices come from the driver.
            unsafe { drv.cuDeviceCanAccessPeer(&mut raw, a.as_raw(), b.as_raw())? };
            ensure!(
                a.can_access_peer(b)? == (raw != 0),
                "devices {} -> {}: can_access_peer disagrees with the driver ({raw})",
                a.ordinal(),
                b.ordinal()
            );
            pairs += 1;
        }
    }
    eprintln!("checked {pairs} ordered pairs of {} devices", devs.len());
    Ok(())
}

/// A copy on one device through `memcpy_peer`, on a stream other than the source's, queued
/// while a slow kernel still writes the source: the copy must see the kernel's values; the
/// source is dropped right after, and the copy must still be intact.
fn within_device() -> TestResult {
    let ctx = Context::new(0)?;
    let m = load_cuda(&ctx, TEST_KERNELS)?;
    let k = slow_fill_kernel(&m)?;
    let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
    let n = 1 << 20;
    let mut src = a.alloc_zeros::<f32>(n)?;
    let mut dst = b.alloc_zeros::<f32>(n)?;
    fill_slowly(&k, &a, &mut src, 7.0)?;
    b.memcpy_peer(&src, &mut dst)?;
    drop(src);
    let reuse = a.clone_htod(&vec![-1.0f32; n])?; // likely the freed block
    let got = b.clone_dtoh(&dst)?;
    ensure!(got.iter().all(|&v| v == 7.0), "copy saw {:?}…", &got[..4]);
    drop(reuse);
    Ok(())
}

fn argument_checks() -> TestResult {
    let ctx = Context::new(0)?;
    let s = ctx.new_stream()?;
    let src = s.alloc_zeros::<f32>(8)?;
    let mut dst = s.alloc_zeros::<f32>(9)?;
    ensure!(
        matches!(
            s.memcpy_peer(&src, &mut dst),
            Err(Error::LengthMismatch { .. })
        ),
        "length mismatch not refused"
    );
    if gpu_count() >= 2 {
        let other = Context::new(1)?.new_stream()?;
        let mut same = s.alloc_zeros::<f32>(8)?;
        ensure!(
            matches!(
                other.memcpy_peer(&src, &mut same),
                Err(Error::DeviceMismatch { .. })
            ),
            "a stream of a third device was accepted"
        );
    }
    // Empty copies are fine.
    let e = s.alloc_zeros::<f32>(0)?;
    let mut e2 = s.alloc_zeros::<f32>(0)?;
    s.memcpy_peer(&e, &mut e2)?;
    Ok(())
}

fn enable_concurrently() -> TestResult {
    let c0 = Context::new(0)?;
    let c1 = Context::new(1)?;
    let d0 = c0.device();
    let d1 = c1.device();
    if !d0.can_access_peer(&d1)? || !d1.can_access_peer(&d0)? {
        ensure!(
            matches!(c0.enable_peer_access(&c1), Err(Error::Unsupported { .. }))
                || !d0.can_access_peer(&d1)?,
            "unsupported pair"
        );
        eprintln!("devices 0 and 1 have no peer path: checked the refusal only");
        return Ok(());
    }
    let barrier = Arc::new(Barrier::new(16));
    let handles: Vec<_> = (0..16)
        .map(|i| {
            let (c0, c1, barrier) = (c0.clone(), c1.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                if i % 2 == 0 {
                    c0.enable_peer_access(&c1)
                } else {
                    c1.enable_peer_access(&c0)
                }
            })
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| "a thread panicked")??;
    }
    ensure!(
        c0.peer_access_enabled(&c1) && c1.peer_access_enabled(&c0),
        "not recorded"
    );
    // Enabled exactly once: the driver now says so for a raw second call.
    let drv = cuda_stack_driver::cuda_stack_sys::Driver::get()?;
    let _g = c0.push_current()?;
    // SAFETY: both contexts are live; c0 is current.
    let again = unsafe { drv.cuCtxEnablePeerAccess(c1.as_raw(), 0) };
    ensure!(
        again.as_ref().err().and_then(|e| e.code())
            == Some(
                cuda_stack_driver::cuda_stack_sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
            ),
        "a raw second enable returned {again:?}"
    );
    Ok(())
}

/// Device 0's buffer, written by a slow kernel on device 0, copied into device 1's buffer on a
/// stream of device 1, then freed at once; and back, on a stream of the source's device.
fn across_devices() -> TestResult {
    let c0 = Context::new(0)?;
    let c1 = Context::new(1)?;
    if c0.device().can_access_peer(&c1.device())? {
        c0.enable_peer_access(&c1)?;
        c1.enable_peer_access(&c0)?;
    }
    let k0 = slow_fill_kernel(&load_cuda(&c0, TEST_KERNELS)?)?;
    let k1 = slow_fill_kernel(&load_cuda(&c1, TEST_KERNELS)?)?;
    let (s0, s1) = (c0.new_stream()?, c1.new_stream()?);
    let n = 1 << 22;
    // 0 -> 1, the copy on device 1's stream.
    let mut src = s0.alloc_zeros::<f32>(n)?;
    let mut dst = s1.alloc_zeros::<f32>(n)?;
    fill_slowly(&k0, &s0, &mut src, 3.0)?;
    s1.memcpy_peer(&src, &mut dst)?;
    drop(src);
    let reuse = s0.clone_htod(&vec![-1.0f32; n])?;
    ensure!(
        s1.clone_dtoh(&dst)?.iter().all(|&v| v == 3.0),
        "0 -> 1: the copy did not wait for the kernel, or the source was freed under it"
    );
    drop(reuse);
    // 1 -> 0, the copy on the source's (device 1's) stream; then device 0 reads it at once.
    let mut src = s1.alloc_zeros::<f32>(n)?;
    let mut dst = s0.alloc_zeros::<f32>(n)?;
    fill_slowly(&k1, &s1, &mut src, 5.0)?;
    s1.memcpy_peer(&src, &mut dst)?;
    // The destination's home is device 0's stream: reading there must wait for the copy.
    ensure!(
        s0.clone_dtoh(&dst)?.iter().all(|&v| v == 5.0),
        "1 -> 0: device 0 read the destination before the copy finished"
    );
    // A kernel on device 0 overwriting the destination after the copy must win.
    fill_slowly(&k0, &s0, &mut dst, 9.0)?;
    ensure!(
        s1.clone_dtoh(&src)?.iter().all(|&v| v == 5.0),
        "source changed"
    );
    let mut back = s1.alloc_zeros::<f32>(n)?;
    s1.memcpy_peer(&dst, &mut back)?;
    ensure!(
        s1.clone_dtoh(&back)?.iter().all(|&v| v == 9.0),
        "a copy back did not wait for device 0's kernel"
    );
    Ok(())
}
