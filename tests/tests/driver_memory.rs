//! cuda-stack-driver memory: buffers, views, copies, pinned and registered host memory, OOM.

use cuda_stack_driver::{
    DeviceSlice, Error, HostAllocFlags, HostRegistration, LaunchConfig, PinnedBuffer,
};
use cuda_tests::{context, ensure, gpu, load_cuda, TestResult, TEST_KERNELS};

fn main() {
    cuda_tests::run(vec![
        gpu("alloc_zeros_is_zero_and_roundtrips", alloc_zeros_roundtrip),
        gpu("views_slices_and_split_at_mut", views),
        gpu("memset_and_dtod_copies", memset_dtod),
        gpu(
            "length_mismatch_is_an_error_and_copies_nothing",
            length_mismatch,
        ),
        gpu("out_of_bounds_views_are_errors", out_of_bounds),
        gpu("pinned_buffer_async_copies_roundtrip", pinned_async),
        gpu("pinned_flags_portable_mapped_writecombined", pinned_flags),
        gpu("host_registration_async_copies", registered_async),
        gpu(
            "leaked_pending_copy_still_waits_before_host_access",
            leaked_pending,
        ),
        gpu(
            "over_large_allocation_is_out_of_memory_and_alloc_still_works",
            oom,
        ),
        gpu(
            "dropping_buffers_and_modules_while_work_is_queued",
            drop_while_queued,
        ),
        gpu("empty_buffers", empty_buffers),
        gpu("pool_release_threshold", pool_threshold),
        gpu("pool_usage_counts_this_process", pool_usage),
    ]);
}

fn data(n: usize, seed: f32) -> Vec<f32> {
    (0..n).map(|i| ((i as f32) * 0.37 + seed).sin()).collect()
}

fn alloc_zeros_roundtrip() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let z = s.alloc_zeros::<f32>(100_003)?;
    ensure!(s.clone_dtoh(&z)?.iter().all(|&v| v == 0.0), "not zeroed");
    let h = data(100_003, 1.0);
    let d = s.clone_htod(&h)?;
    ensure!(s.clone_dtoh(&d)? == h, "roundtrip differs");
    let mut back = vec![0f32; h.len()];
    s.memcpy_dtoh(&d, &mut back)?;
    ensure!(back == h, "memcpy_dtoh differs");
    let mut d2 = s.alloc_zeros::<f32>(h.len())?;
    s.memcpy_htod(&h, &mut d2)?;
    ensure!(s.clone_dtoh(&d2)? == h, "memcpy_htod differs");
    Ok(())
}

fn views() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let h = data(1000, 2.0);
    let mut d = s.clone_htod(&h)?;
    let v = d.slice(100..300)?;
    ensure!(v.len() == 200, "len");
    ensure!(s.clone_dtoh(&v)? == h[100..300], "view contents");
    {
        let (mut lo, mut hi) = d.split_at_mut(400)?;
        s.memset_zeros(&mut lo)?;
        let ones = vec![1.0f32; hi.len()];
        s.memcpy_htod(&ones, &mut hi)?;
    }
    let got = s.clone_dtoh(&d)?;
    ensure!(got[..400].iter().all(|&x| x == 0.0), "low half not zero");
    ensure!(got[400..].iter().all(|&x| x == 1.0), "high half not one");
    // A view of a view.
    let mut inner = d.slice_mut(10..20)?;
    let mut inner2 = inner.slice_mut(2..5)?;
    s.memcpy_htod(&[7.0, 8.0, 9.0], &mut inner2)?;
    let got = s.clone_dtoh(&d)?;
    ensure!(
        got[12..15] == [7.0, 8.0, 9.0],
        "nested view write: {:?}",
        &got[10..20]
    );
    Ok(())
}

fn memset_dtod() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let mut d = s.alloc_zeros::<u32>(4097)?;
    s.memset_bytes(&mut d, 0xAB)?;
    ensure!(
        s.clone_dtoh(&d)?.iter().all(|&x| x == 0xABAB_ABAB),
        "memset"
    );
    let h: Vec<u32> = (0..4097).collect();
    let a = s.clone_htod(&h)?;
    let b = s.clone_dtod(&a)?;
    let mut c = s.alloc_zeros::<u32>(4097)?;
    s.memcpy_dtod(&b, &mut c)?;
    ensure!(s.clone_dtoh(&c)? == h, "dtod");
    Ok(())
}

fn length_mismatch() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let mut d = s.alloc_zeros::<f32>(10)?;
    match s.memcpy_htod(&[1.0; 11], &mut d) {
        Err(Error::LengthMismatch {
            src: 11, dst: 10, ..
        }) => {}
        other => return Err(format!("expected LengthMismatch, got {other:?}").into()),
    }
    ensure!(
        s.clone_dtoh(&d)?.iter().all(|&x| x == 0.0),
        "a partial copy happened"
    );
    let mut small = vec![0f32; 9];
    ensure!(
        matches!(
            s.memcpy_dtoh(&d, &mut small),
            Err(Error::LengthMismatch { .. })
        ),
        "dtoh"
    );
    let e = s.alloc_zeros::<f32>(3)?;
    ensure!(
        matches!(s.memcpy_dtod(&e, &mut d), Err(Error::LengthMismatch { .. })),
        "dtod"
    );
    let msg = s.memcpy_htod(&[1.0; 11], &mut d).unwrap_err().to_string();
    ensure!(
        msg.contains("source has 11 elements but destination has 10"),
        "{msg}"
    );
    Ok(())
}

fn out_of_bounds() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let mut d = s.alloc_zeros::<f32>(10)?;
    ensure!(
        matches!(
            d.slice(5..11),
            Err(Error::OutOfBounds {
                end: 11,
                len: 10,
                ..
            })
        ),
        "slice past end"
    );
    #[allow(clippy::reversed_empty_ranges)]
    let rev = d.slice(6..5);
    ensure!(rev.is_err(), "reversed range");
    ensure!(d.split_at_mut(11).is_err(), "split past end");
    ensure!(d.slice(10..10)?.is_empty(), "empty view at end is fine");
    Ok(())
}

fn pinned_async() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let n = 1 << 20;
    let src = PinnedBuffer::from_slice(&ctx, &data(n, 3.0))?;
    let mut d = s.alloc_zeros::<f32>(n)?;
    let pending = s.copy_htod_async(&src, &mut d)?;
    pending.wait()?;
    let mut dst = PinnedBuffer::<f32>::zeroed(&ctx, n)?;
    let p = s.copy_dtoh_async(&d, &mut dst)?;
    ensure!(p.is_complete().is_ok(), "query");
    drop(p); // waits
    ensure!(dst[..] == src[..], "pinned roundtrip differs");
    Ok(())
}

fn pinned_flags() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    for flags in [
        HostAllocFlags::empty(),
        HostAllocFlags::PORTABLE,
        HostAllocFlags::DEVICE_MAP,
        HostAllocFlags::WRITE_COMBINED,
        HostAllocFlags::PORTABLE | HostAllocFlags::DEVICE_MAP,
    ] {
        let mut p = PinnedBuffer::<u32>::with_flags(&ctx, 4096, flags)?;
        ensure!(p.flags() == flags, "flags");
        for (i, x) in p.iter_mut().enumerate() {
            *x = i as u32 * 3;
        }
        let mut d = s.alloc_zeros::<u32>(4096)?;
        s.copy_htod_async(&p, &mut d)?.wait()?;
        ensure!(s.clone_dtoh(&d)? == p[..], "flags {flags:?}");
        p.free()?;
    }
    Ok(())
}

fn registered_async() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let expect = data(300_001, 4.0);
    let mut d = s.alloc_zeros::<f32>(expect.len())?;
    let mut reg = HostRegistration::new(&ctx, expect.clone())?;
    s.copy_htod_async(&reg, &mut d)?.wait()?;
    reg.as_mut_slice()?.fill(0.0);
    s.copy_dtoh_async(&d, &mut reg)?.wait()?;
    ensure!(reg.as_slice()? == &expect[..], "registered roundtrip");
    ensure!(reg.into_inner()? == expect, "host data after unregister");
    Ok(())
}

fn leaked_pending() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let m = load_cuda(&ctx, TEST_KERNELS)?;
    // SAFETY: matches slow_fill(float*, float, unsigned, long long).
    let slow = unsafe { m.kernel::<(&mut DeviceSlice<f32>, f32, u32, i64)>("slow_fill")? };
    let n = 1 << 16;
    let mut d = s.alloc_zeros::<f32>(n)?;
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    unsafe {
        slow.launch(
            &s,
            &LaunchConfig::new(64, 256),
            &mut d,
            5.0,
            n as u32,
            20_000_000,
        )
    }?;
    let mut dst = PinnedBuffer::<f32>::zeroed(&ctx, n)?;
    let p = s.copy_dtoh_async(&d, &mut dst)?;
    std::mem::forget(p); // the borrow ends, but the buffer still knows a copy is pending
    ensure!(
        dst.iter().all(|&x| x == 5.0),
        "host saw the buffer before the copy finished"
    );
    Ok(())
}

fn oom() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let (_, total) = ctx.mem_get_info()?;
    match s.alloc_zeros::<u8>(total * 4) {
        Err(Error::OutOfMemory {
            requested,
            total: t,
            ..
        }) => {
            ensure!(requested == total * 4 && t == total, "fields");
        }
        other => return Err(format!("expected OutOfMemory, got {other:?}").into()),
    }
    let msg = s.alloc_zeros::<u8>(total * 4).unwrap_err().to_string();
    ensure!(
        msg.contains("out of device memory") && msg.contains("free"),
        "{msg}"
    );
    let ok = s.clone_htod(&[1u8, 2, 3])?;
    ensure!(s.clone_dtoh(&ok)? == [1, 2, 3], "allocation after OOM");
    Ok(())
}

fn drop_while_queued() -> TestResult {
    let ctx = context()?;
    let a = ctx.new_stream()?;
    let b = ctx.new_stream()?;
    for _ in 0..5 {
        let m = load_cuda(&ctx, TEST_KERNELS)?;
        // SAFETY: matches slow_fill.
        let slow = unsafe { m.kernel::<(&mut DeviceSlice<f32>, f32, u32, i64)>("slow_fill")? };
        let n = 1 << 20;
        let mut x = a.alloc_zeros::<f32>(n)?;
        // Queue long work on the home stream and on another stream, then drop everything.
        // SAFETY: the test kernel guards its index with the length it is passed, which does not
        // exceed any buffer argument's length here.
        unsafe {
            slow.launch(
                &a,
                &LaunchConfig::new(132, 256),
                &mut x,
                1.0,
                n as u32,
                5_000_000,
            )
        }?;
        // SAFETY: the test kernel guards its index with the length it is passed, which does not
        // exceed any buffer argument's length here.
        unsafe {
            slow.launch(
                &b,
                &LaunchConfig::new(132, 256),
                &mut x,
                2.0,
                n as u32,
                5_000_000,
            )
        }?;
        drop(x);
        drop(slow);
        drop(m);
    }
    a.synchronize()?;
    b.synchronize()?;
    let errs = ctx.take_drop_errors();
    ensure!(errs.is_empty(), "drop errors: {errs:?}");
    Ok(())
}

fn empty_buffers() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let mut e = s.alloc_zeros::<f32>(0)?;
    ensure!(e.is_empty() && s.clone_dtoh(&e)?.is_empty(), "empty");
    s.memcpy_htod(&[], &mut e)?;
    let f = s.clone_htod::<f64>(&[])?;
    ensure!(f.is_empty(), "empty clone");
    Ok(())
}

fn pool_threshold() -> TestResult {
    let ctx = context()?;
    if ctx.limits().memory_pools {
        ctx.set_pool_release_threshold(u64::MAX)?;
        ctx.set_pool_release_threshold(0)?;
    } else {
        ensure!(
            ctx.set_pool_release_threshold(0).is_err(),
            "no pools but threshold accepted"
        );
    }
    Ok(())
}

/// `pool_usage().used` grows by a live allocation's size and shrinks back once it is freed.
/// The pool is the whole process's, and this binary's other tests run at the same time on
/// their own buffers (at most a few MiB each), so both comparisons allow them `SLACK`.
fn pool_usage() -> TestResult {
    const SLACK: u64 = 32 << 20;
    let ctx = context()?;
    if !ctx.limits().memory_pools {
        ensure!(ctx.pool_usage().is_err(), "no pools but a pool usage");
        return Ok(());
    }
    let s = ctx.new_stream()?;
    s.synchronize()?;
    let before = ctx.pool_usage()?;
    let n = 64 << 20; // 256 MiB of f32
    let bytes = (n * 4) as u64;
    let d = s.alloc_zeros::<f32>(n)?;
    s.synchronize()?;
    let during = ctx.pool_usage()?;
    ensure!(
        during.used + SLACK >= before.used + bytes,
        "used {} -> {} with {bytes} bytes live",
        before.used,
        during.used
    );
    ensure!(during.reserved >= during.used, "reserved {during:?}");
    drop(d);
    s.synchronize()?;
    let after = ctx.pool_usage()?;
    ensure!(
        after.used + bytes <= during.used + SLACK,
        "used {} after the free, {} before it",
        after.used,
        during.used
    );
    Ok(())
}
