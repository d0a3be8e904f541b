//! The runtime conveniences on the GPU: per-thread current device, malloc/memcpy/memset/free on
//! the default stream, and the torch.cuda-style statistics of the global allocator.

use cuda_stack_runtime::{self as rt, Error, Runtime};
use cuda_tests::{cpu, ensure, gpu, TestResult};
use std::sync::Mutex;

/// The tests share each device's process-wide runtime (and its allocator's counters), so they
/// run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn main() {
    cuda_tests::run(vec![
        cpu(
            "invalid_device_error_names_the_count",
            invalid_device_message,
        ),
        gpu(
            "device_count_and_default_current_device",
            device_count_default,
        ),
        gpu("set_device_is_per_thread", set_device_per_thread),
        gpu(
            "invalid_ordinal_is_an_error_and_keeps_the_current_device",
            invalid_ordinal,
        ),
        gpu("malloc_memcpy_memset_roundtrip", malloc_roundtrip),
        gpu("large_memcpy_goes_through_staging", large_memcpy),
        gpu("length_mismatch_is_an_error", length_mismatch),
        gpu("global_allocator_statistics", global_stats),
        gpu(
            "runtime_is_one_per_device_with_a_non_null_default_stream",
            runtime_identity,
        ),
    ]);
}

fn data_f32(n: usize, seed: f32) -> Vec<f32> {
    (0..n).map(|i| ((i as f32) * 0.37 + seed).sin()).collect()
}

fn invalid_device_message() -> TestResult {
    let msg = Error::InvalidDevice {
        ordinal: 5,
        count: 1,
    }
    .to_string();
    ensure!(
        msg.contains("ordinal 5") && msg.contains("1 CUDA device"),
        "message: {msg}"
    );
    Ok(())
}

fn device_count_default() -> TestResult {
    let _g = serial();
    let n = rt::device_count()?;
    ensure!(n >= 1, "device_count {n}");
    ensure!(
        n == cuda_driver_count()?,
        "device_count disagrees with the driver"
    );
    // A fresh thread starts on device 0.
    let cur = std::thread::spawn(rt::current_device)
        .join()
        .map_err(|_| "thread panicked")??;
    ensure!(cur == 0, "fresh thread's current device is {cur}");
    Ok(())
}

fn cuda_driver_count() -> Result<usize, Box<dyn std::error::Error>> {
    Ok(rt::cuda_stack_driver::Device::count()?)
}

fn set_device_per_thread() -> TestResult {
    let _g = serial();
    let n = rt::device_count()?;
    rt::set_device(0)?;
    let results: Vec<Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|i| {
                s.spawn(move || -> Result<(), String> {
                    let before = rt::current_device().map_err(|e| e.to_string())?;
                    if before != 0 {
                        return Err(format!("thread {i} started on device {before}"));
                    }
                    let want = (i + 1) % n;
                    rt::set_device(want).map_err(|e| e.to_string())?;
                    let now = rt::current_device().map_err(|e| e.to_string())?;
                    let rt_now = Runtime::current().map_err(|e| e.to_string())?;
                    if now != want || rt_now.ordinal() != want {
                        return Err(format!(
                            "thread {i}: set {want}, current {now}, runtime {}",
                            rt_now.ordinal()
                        ));
                    }
                    // The runtime works from this thread: allocate, copy, read back.
                    let host = data_f32(1000 + i, i as f32);
                    let d = rt::clone_htod(&host).map_err(|e| e.to_string())?;
                    let back = rt::clone_dtoh(&d).map_err(|e| e.to_string())?;
                    if back != host {
                        return Err(format!("thread {i}: roundtrip differs"));
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err("thread panicked".into())))
            .collect()
    });
    for r in results {
        r?;
    }
    // Other threads' choices do not leak into this one.
    ensure!(rt::current_device()? == 0, "main thread's device changed");
    Ok(())
}

fn invalid_ordinal() -> TestResult {
    let _g = serial();
    let n = rt::device_count()?;
    rt::set_device(n - 1)?;
    match rt::set_device(n) {
        Err(Error::InvalidDevice { ordinal, count }) => {
            ensure!(ordinal == n && count == n, "error fields {ordinal} {count}")
        }
        other => return Err(format!("set_device({n}) gave {other:?}").into()),
    }
    ensure!(rt::current_device()? == n - 1, "current device changed");
    ensure!(
        matches!(Runtime::get(n + 7), Err(Error::InvalidDevice { .. })),
        "Runtime::get out of range"
    );
    rt::set_device(0)?;
    Ok(())
}

fn malloc_roundtrip() -> TestResult {
    let _g = serial();
    rt::set_device(0)?;
    let host = data_f32(10_007, 1.0);
    // SAFETY: fully written by memcpy_htod before it is read.
    let mut a = unsafe { rt::malloc::<f32>(host.len())? };
    ensure!(a.len() == host.len(), "len {}", a.len());
    rt::memcpy_htod(&host, &mut a)?;
    let mut back = vec![0f32; host.len()];
    rt::memcpy_dtoh(&a, &mut back)?;
    ensure!(back == host, "htod/dtoh roundtrip differs");

    let mut b = rt::malloc_zeros::<f32>(host.len())?;
    ensure!(
        rt::clone_dtoh(&b)?.iter().all(|&x| x == 0.0),
        "malloc_zeros not zero"
    );
    rt::memcpy_dtod(&a, &mut b)?;
    ensure!(rt::clone_dtoh(&b)? == host, "dtod copy differs");

    // memset on a sub-range leaves the rest alone.
    {
        let mut mid = b.slice_mut(100..200)?;
        rt::memset(&mut mid, 0)?;
    }
    let got = rt::clone_dtoh(&b)?;
    for (i, (&g, &h)) in got.iter().zip(&host).enumerate() {
        let want = if (100..200).contains(&i) { 0.0 } else { h };
        ensure!(g == want, "after memset: [{i}] = {g}, want {want}");
    }
    let mut bytes = rt::malloc_zeros::<u8>(777)?;
    rt::memset(&mut bytes, 0xA5)?;
    ensure!(
        rt::clone_dtoh(&bytes)?.iter().all(|&x| x == 0xA5),
        "memset 0xA5"
    );
    rt::free(bytes);

    // Other element types.
    let ints: Vec<i32> = (0..4099).map(|i| i * 7 - 3000).collect();
    ensure!(rt::clone_dtoh(&rt::clone_htod(&ints)?)? == ints, "i32");
    let doubles: Vec<f64> = (0..513).map(|i| i as f64 / 3.0).collect();
    ensure!(
        rt::clone_dtoh(&rt::clone_htod(&doubles)?)? == doubles,
        "f64"
    );
    let empty: Vec<f32> = Vec::new();
    let e = rt::clone_htod(&empty)?;
    ensure!(e.is_empty() && rt::clone_dtoh(&e)?.is_empty(), "empty");
    rt::free(a);
    rt::free(b);
    rt::synchronize()?;
    Ok(())
}

fn large_memcpy() -> TestResult {
    let _g = serial();
    rt::set_device(0)?;
    let rt0 = Runtime::current()?;
    let chunk = rt0.staging_config().chunk_bytes;
    // 3.5 chunks of f32, plus one element: staged, with an overlapping last window.
    let n = (chunk * 7 / 2) / 4 + 1;
    let host = data_f32(n, 3.0);
    let d = rt::clone_htod(&host)?;
    ensure!(rt::clone_dtoh(&d)? == host, "staged roundtrip differs");
    Ok(())
}

fn length_mismatch() -> TestResult {
    let _g = serial();
    rt::set_device(0)?;
    let mut d = rt::malloc_zeros::<f32>(10)?;
    let r = rt::memcpy_htod(&[1.0f32; 11], &mut d);
    ensure!(
        matches!(
            r,
            Err(Error::Driver(
                rt::cuda_stack_driver::Error::LengthMismatch { .. }
            ))
        ),
        "{r:?}"
    );
    // Large mismatches are caught before staging too.
    let big = vec![1u8; 9 << 20];
    let mut d2 = rt::malloc_zeros::<u8>((9 << 20) - 1)?;
    ensure!(rt::memcpy_htod(&big, &mut d2).is_err(), "big mismatch");
    ensure!(
        rt::clone_dtoh(&d)?.iter().all(|&x| x == 0.0),
        "a failed copy wrote"
    );
    ensure!(
        rt::clone_dtoh(&d2)?.iter().all(|&x| x == 0),
        "a failed big copy wrote"
    );
    Ok(())
}

fn global_stats() -> TestResult {
    let _g = serial();
    rt::set_device(0)?;
    rt::empty_cache()?;
    // Other tests dropped everything they allocated.
    let base_alloc = rt::memory_allocated()?;
    ensure!(
        rt::memory_reserved()? == base_alloc,
        "reserved {} != allocated {base_alloc} after empty_cache",
        rt::memory_reserved()?
    );
    rt::reset_peak_stats()?;
    let a = rt::malloc_zeros::<f32>(100)?; // 400 B -> 512 B
    let b = rt::malloc_zeros::<u8>(5 << 20)?; // 5 MiB -> 6 MiB
    ensure!(
        rt::memory_allocated()? == base_alloc + 512 + (6 << 20),
        "allocated {}",
        rt::memory_allocated()?
    );
    ensure!(
        rt::memory_reserved()? == base_alloc + 512 + (6 << 20),
        "reserved"
    );
    drop(b);
    ensure!(rt::memory_allocated()? == base_alloc + 512, "after drop");
    ensure!(
        rt::memory_reserved()? == base_alloc + 512 + (6 << 20),
        "reserved after drop"
    );
    ensure!(
        rt::max_memory_allocated()? == base_alloc + 512 + (6 << 20),
        "peak"
    );
    let summary = rt::memory_summary()?;
    ensure!(
        summary.contains("device 0") && summary.contains("Reserved memory"),
        "{summary}"
    );
    rt::empty_cache()?;
    ensure!(
        rt::memory_reserved()? == base_alloc + 512,
        "after empty_cache"
    );
    rt::reset_peak_stats()?;
    ensure!(
        rt::max_memory_allocated()? == base_alloc + 512,
        "peak reset"
    );
    drop(a);
    let s = rt::memory_stats()?;
    ensure!(s.allocated_bytes() == base_alloc, "stats snapshot");
    Ok(())
}

fn runtime_identity() -> TestResult {
    let _g = serial();
    let a = Runtime::get(0)?;
    let b = Runtime::get(0)?;
    ensure!(std::ptr::eq(a, b), "two runtimes for device 0");
    ensure!(
        !a.default_stream().as_raw().is_null(),
        "default stream is the NULL stream"
    );
    ensure!(a.context().device().ordinal() == 0, "context device");
    // From another thread: the same runtime.
    let addr = a as *const Runtime as usize;
    let other = std::thread::spawn(move || Runtime::get(0).map(|r| r as *const Runtime as usize))
        .join()
        .map_err(|_| "thread panicked")??;
    ensure!(other == addr, "another thread got another runtime");
    Ok(())
}
