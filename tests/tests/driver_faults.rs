//! Driver failures injected through the checked-call stratum (feature `fault-injection`):
//! every failure becomes the right typed error, and the layer keeps working afterwards.

use cuda_stack_driver::{
    cuda_stack_sys::fault, cuda_stack_sys::CUresult, DeviceSlice, Error, LaunchConfig,
};
use cuda_tests::{context, ensure, gpu, load_cuda, TestResult, TEST_KERNELS};

fn main() {
    cuda_tests::run(vec![
        gpu("injected_out_of_memory", injected_oom),
        gpu("injected_launch_failure", injected_launch_failure),
        gpu("injected_event_failure", injected_event_failure),
        gpu(
            "injected_free_failure_is_reported_not_panicked",
            injected_free_failure,
        ),
    ]);
}

fn alloc_call(ctx: &cuda_stack_driver::Context) -> &'static str {
    if ctx.limits().memory_pools {
        "cuMemAllocAsync"
    } else {
        "cuMemAlloc_v2"
    }
}

fn injected_oom() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    fault::inject(alloc_call(&ctx), 2, CUresult::CUDA_ERROR_OUT_OF_MEMORY.0);
    let first = s.alloc_zeros::<f32>(16)?;
    let second = s.alloc_zeros::<f32>(16);
    ensure!(
        matches!(second, Err(Error::OutOfMemory { requested: 64, .. })),
        "{second:?}"
    );
    let third = s.alloc_zeros::<f32>(16)?;
    ensure!(
        s.clone_dtoh(&third)? == [0.0; 16] && first.len() == 16,
        "allocation after injected OOM"
    );
    Ok(())
}

fn injected_launch_failure() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let m = load_cuda(&ctx, TEST_KERNELS)?;
    // SAFETY: matches axpy(float, const float*, float*, unsigned).
    let k = unsafe { m.kernel::<(f32, &DeviceSlice<f32>, &mut DeviceSlice<f32>, u32)>("axpy")? };
    let x = s.clone_htod(&[1.0f32; 4])?;
    let mut y = s.alloc_zeros::<f32>(4)?;
    fault::inject("cuLaunchKernel", 1, CUresult::CUDA_ERROR_LAUNCH_FAILED.0);
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    let e = unsafe { k.launch(&s, &LaunchConfig::new(1, 32), 1.0, &x, &mut y, 4) }.unwrap_err();
    ensure!(
        e.driver_code() == Some(CUresult::CUDA_ERROR_LAUNCH_FAILED),
        "{e}"
    );
    let msg = e.to_string();
    ensure!(
        msg.contains("cuLaunchKernel failed with CUDA_ERROR_LAUNCH_FAILED"),
        "{msg}"
    );
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    unsafe { k.launch(&s, &LaunchConfig::new(1, 32), 1.0, &x, &mut y, 4) }?;
    ensure!(
        s.clone_dtoh(&y)? == [1.0; 4],
        "launch after injected failure"
    );
    Ok(())
}

fn injected_event_failure() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    fault::inject("cuEventRecord", 1, CUresult::CUDA_ERROR_INVALID_HANDLE.0);
    let e = s.record_event().unwrap_err();
    ensure!(
        e.driver_code() == Some(CUresult::CUDA_ERROR_INVALID_HANDLE),
        "{e}"
    );
    let ev = s.record_event()?;
    ev.synchronize()?;
    Ok(())
}

fn injected_free_failure() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let b = s.alloc_zeros::<u8>(1024)?;
    let free = if ctx.limits().memory_pools {
        "cuMemFreeAsync"
    } else {
        "cuMemFree_v2"
    };
    ctx.take_drop_errors();
    fault::inject(free, 1, CUresult::CUDA_ERROR_ILLEGAL_ADDRESS.0);
    drop(b); // must not panic; the error is kept by the context (the memory leaks)
    let errs = ctx.take_drop_errors();
    ensure!(errs.len() == 1, "{errs:?}");
    ensure!(
        errs[0].driver_code() == Some(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
        "{:?}",
        errs[0]
    );
    let c = s.alloc_zeros::<u8>(16)?;
    fault::inject(free, 1, CUresult::CUDA_ERROR_ILLEGAL_ADDRESS.0);
    ensure!(c.free().is_err(), "explicit free() returns the error");
    fault::clear();
    Ok(())
}
