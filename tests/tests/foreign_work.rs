//! `Stream::enqueue_foreign`: work another library queues on a raw stream (here: raw driver
//! calls standing in for cuBLAS or NCCL) is ordered and tracked like a kernel launch.

use cuda_stack_driver::{DeviceSlice, ForeignUse, Kernel, LaunchConfig};
use cuda_tests::{context, ensure, gpu, load_cuda, TestResult, TEST_KERNELS};
use std::any::Any;
use std::ffi::c_void;
use std::sync::Arc;

type SlowFill = Kernel<(&'static mut DeviceSlice<f32>, f32, u32, i64)>;

fn slow_fill(ctx: &cuda_stack_driver::Context) -> Result<SlowFill, Box<dyn std::error::Error>> {
    let m = load_cuda(ctx, TEST_KERNELS)?;
    // SAFETY: the signature matches `slow_fill` in TEST_KERNELS.
    Ok(unsafe { m.kernel("slow_fill")? })
}

/// Queues `slow_fill(x, value, n, cycles)` with raw driver calls on `raw` (a "library").
///
/// # Safety
/// `x` points to at least `n` f32s; `f` is `slow_fill`.
unsafe fn raw_slow_fill(
    f: &SlowFill,
    raw: cuda_stack_driver::cuda_stack_sys::CUstream,
    x: u64,
    value: f32,
    n: u32,
    cycles: i64,
) -> Result<(), cuda_stack_driver::cuda_stack_sys::DriverError> {
    let drv = cuda_stack_driver::cuda_stack_sys::Driver::get().expect("loaded");
    let (mut x, mut value, mut n, mut cycles) = (x, value, n, cycles);
    let mut params: [*mut c_void; 4] = [
        (&mut x as *mut u64).cast(),
        (&mut value as *mut f32).cast(),
        (&mut n as *mut u32).cast(),
        (&mut cycles as *mut i64).cast(),
    ];
    // SAFETY: forwarded to the caller; the parameters match the kernel's.
    unsafe {
        drv.cuLaunchKernel(
            f.function().as_raw(),
            4,
            1,
            1,
            256,
            1,
            1,
            0,
            raw,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
}

/// A buffer written slowly on its home stream, then written by foreign work on another
/// stream: the foreign write must come after (no user synchronization).
fn foreign_work_waits_for_other_streams() -> TestResult {
    let ctx = context()?;
    let (s1, s2) = (ctx.new_stream()?, ctx.new_stream()?);
    let k = slow_fill(&ctx)?;
    let n = 1 << 16;
    let mut x = s1.alloc_zeros::<f32>(n)?;
    // SAFETY: the kernel guards its index with n = x.len().
    unsafe {
        k.launch(
            &s1,
            &LaunchConfig::new(4, 256),
            &mut x,
            1.0,
            n as u32,
            50_000_000,
        )?
    };
    let ptr = x.as_raw_ptr();
    // SAFETY: the memset writes exactly x's n elements, on the stream given.
    let r = unsafe {
        s2.enqueue_foreign(&[ForeignUse::write(&mut x)], None, |raw| {
            cuda_stack_driver::cuda_stack_sys::Driver::get()
                .expect("loaded")
                .cuMemsetD32Async(ptr, 2.0f32.to_bits(), n, raw)
        })
    };
    r??;
    let v = s2.clone_dtoh(&x)?;
    ensure!(
        v.iter().all(|&e| e == 2.0),
        "foreign write overtaken: {}",
        v[0]
    );
    Ok(())
}

/// Foreign work writes slowly on another stream; the buffer's home stream reads right after:
/// the read must wait for the foreign work.
fn later_uses_wait_for_foreign_work() -> TestResult {
    let ctx = context()?;
    let (s1, s2) = (ctx.new_stream()?, ctx.new_stream()?);
    let k = slow_fill(&ctx)?;
    let n = 1 << 16;
    let mut x = s1.alloc_zeros::<f32>(n)?;
    s1.synchronize()?;
    let ptr = x.as_raw_ptr();
    // SAFETY: slow_fill writes x[i] for i < n = x.len(), on the stream given.
    let r = unsafe {
        s2.enqueue_foreign(&[ForeignUse::write(&mut x)], None, |raw| {
            raw_slow_fill(&k, raw, ptr, 5.0, n as u32, 50_000_000)
        })
    };
    r??;
    let v = s1.clone_dtoh(&x)?;
    ensure!(
        v.iter().all(|&e| e == 5.0),
        "home stream read before the foreign write: {}",
        v[0]
    );
    Ok(())
}

struct Marker;

/// During a capture, the graph keeps the caller's object (a library handle) and the buffers.
fn a_capture_keeps_the_library_object_alive() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let n = 1024;
    let keep: Arc<dyn Any + Send + Sync> = Arc::new(Marker);
    let weak = Arc::downgrade(&keep);
    let exec = {
        let mut y = s.alloc_zeros::<f32>(n)?;
        let ptr = y.as_raw_ptr();
        let g = ctx.capture(|cs| {
            // SAFETY: the memset writes y's n elements on the capture stream.
            let r = unsafe {
                cs.enqueue_foreign(&[ForeignUse::write(&mut y)], Some(&keep), |raw| {
                    cuda_stack_driver::cuda_stack_sys::Driver::get()
                        .expect("loaded")
                        .cuMemsetD32Async(ptr, 7.0f32.to_bits(), n, raw)
                })
            };
            r?.map_err(Into::into)
        })?;
        g.instantiate()?
        // y is dropped here; the graph keeps its memory.
    };
    drop(keep);
    ensure!(
        weak.upgrade().is_some(),
        "the graph did not keep the object"
    );
    exec.launch(&s)?;
    s.synchronize()?;
    drop(exec);
    ensure!(weak.upgrade().is_none(), "the object outlived the graph");
    Ok(())
}

/// Inside a host callback, foreign work is refused like every CUDA call.
fn refused_inside_host_callbacks() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let (tx, rx) = std::sync::mpsc::channel();
    let s2 = s.clone();
    s.launch_host_func(move || {
        // SAFETY: the closure is never called (refused first).
        let r = unsafe { s2.enqueue_foreign(&[], None, |_| ()) };
        let _ = tx.send(matches!(r, Err(cuda_stack_driver::Error::InHostCallback)));
    })?;
    s.synchronize()?;
    ensure!(
        rx.recv()?,
        "enqueue_foreign was not refused in a host callback"
    );
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        gpu(
            "foreign_work_waits_for_other_streams",
            foreign_work_waits_for_other_streams,
        ),
        gpu(
            "later_uses_wait_for_foreign_work",
            later_uses_wait_for_foreign_work,
        ),
        gpu(
            "a_capture_keeps_the_library_object_alive",
            a_capture_keeps_the_library_object_alive,
        ),
        gpu(
            "refused_inside_host_callbacks",
            refused_inside_host_callbacks,
        ),
    ]);
}
