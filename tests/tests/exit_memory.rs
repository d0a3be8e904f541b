//! `tests/exit_memory`: a process that drops everything and calls `empty_cache()` holds no device
//! memory of its own, although the runtime, the kernel cache and the cuBLAS handles live on in
//! process-wide statics: so `compute-sanitizer --leak-check full` finds nothing at exit. One test
//! in a binary of its own, since it measures the whole process's memory pool.

use cuda_stack_blas::{Blas, Epilogue, Gemm};
use cuda_stack_driver::Context;
use cuda_stack_runtime::{empty_cache, set_device, use_stream, Tensor};
use cuda_tests::{ensure, gpu, no_cublas_reason, TestResult};

fn main() {
    cuda_tests::run(vec![gpu(
        "empty_cache_leaves_no_device_memory_held",
        empty_cache_frees_everything,
    )]);
}

fn empty_cache_frees_everything() -> TestResult {
    set_device(0)?;
    let ctx = Context::new(0)?;
    let before = ctx.pool_usage()?;
    {
        // Work on the default stream and on four more, through the kernels and (where it is
        // installed) cuBLAS, whose handle keeps a 32 MiB workspace per stream it has seen.
        let streams: Vec<_> = (0..4).map(|_| ctx.new_stream()).collect::<Result<_, _>>()?;
        let a = Tensor::<f32>::randn(&[256, 256], 1)?;
        let mut keep = vec![a.matmul(&a)?];
        for s in &streams {
            let _g = use_stream(s);
            let b = (&a + &a)?;
            keep.push(b.matmul(&a)?.sum_all()?);
        }
        for t in &keep {
            t.to_vec()?;
        }
        let during = ctx.pool_usage()?;
        ensure!(
            during.used > before.used,
            "no device memory was in use during the work ({during:?})"
        );
    }
    // cuBLASLt through the process-wide handle: its algorithm cache fills.
    let blas = no_cublas_reason()
        .is_none()
        .then(|| -> Result<Blas, Box<dyn std::error::Error>> {
            let blas = Blas::get(&ctx)?;
            let s = ctx.new_stream()?;
            let a = s.clone_htod(&[1.0f32; 64])?;
            let mut c = s.alloc_zeros::<f32>(64)?;
            blas.matmul(
                &s,
                &Gemm::new(8, 8, 8),
                Epilogue::None,
                &a,
                &a,
                None,
                &mut c,
            )?;
            s.synchronize()?;
            Ok(blas)
        })
        .transpose()?;
    ensure!(
        blas.as_ref().is_none_or(|b| b.cached_algorithms() > 0),
        "cuBLASLt cached no algorithm"
    );
    drop(blas);
    empty_cache()?;
    ctx.synchronize()?;
    // The process-wide cuBLAS handle is gone too (cublasDestroy freed the memory cuBLAS took
    // for itself, which the pool does not see): the next one starts with an empty cache.
    if no_cublas_reason().is_none() {
        let fresh = Blas::get(&ctx)?;
        ensure!(
            fresh.cached_algorithms() == 0,
            "the process-wide cuBLAS handle outlived empty_cache() (nothing else held it)"
        );
        drop(fresh);
        empty_cache()?;
        ctx.synchronize()?;
    }
    let after = ctx.pool_usage()?;
    ensure!(
        after.used == before.used,
        "after dropping every tensor and empty_cache(), {} bytes are still allocated (before the \
         work: {}; cuBLAS {})",
        after.used,
        before.used,
        no_cublas_reason().map_or("loaded".into(), |why| format!("absent: {why}"))
    );
    Ok(())
}
