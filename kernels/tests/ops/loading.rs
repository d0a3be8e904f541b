//! The kernel catalogue: the manifest and the PTX table (CPU), one `Kernels` per context, a
//! signature mismatch caught at load, the launch benchmark's kernels.

use super::*;

pub(crate) fn manifest_and_ptx_table() -> TestResult {
    // Every entry of the manifest has a handle, and nothing else does: kernels.json lists each
    // file once under "files" and each kernel once under "kernels", both with a "source".
    let manifest = include_str!("../../kernels.json");
    let entries =
        manifest.matches("\"source\": \"cuda/").count() - cuda_stack_kernels::PTX_FILES.len();
    ensure!(
        cuda_stack_kernels::KERNEL_NAMES.len() == entries,
        "{} handles for {entries} manifest entries",
        cuda_stack_kernels::KERNEL_NAMES.len()
    );
    for name in cuda_stack_kernels::KERNEL_NAMES {
        ensure!(
            manifest.contains(&format!("\"name\": \"{name}\"")),
            "{name} is not in kernels.json"
        );
    }
    ensure!(
        std::mem::size_of::<StridedLayout>() == 144,
        "StridedLayout must be 144 bytes"
    );
    let cc = |major, minor| cuda_stack_driver::ComputeCapability { major, minor };
    // Files with the portable compute_75 target; the optional ones (tensor cores) are checked
    // in tests/gemm_tc.rs.
    for f in cuda_stack_kernels::PTX_FILES
        .iter()
        .filter(|f| f.targets.iter().any(|t| t.arch == "compute_75"))
    {
        ensure!(
            f.pick(cc(9, 0))?.arch == "compute_75",
            "{}: sm_90 should use compute_75",
            f.name
        );
        ensure!(
            f.pick(cc(7, 5)).is_ok(),
            "{}: sm_75 must be supported",
            f.name
        );
        ensure!(
            matches!(f.pick(cc(7, 0)), Err(Error::NoPtxForDevice { .. })),
            "{}: sm_70 must be refused",
            f.name
        );
    }
    ensure!(
        cuda_stack_kernels::ptx::ptx_for("vector_add", cc(8, 0))?.contains(".entry vector_add"),
        "vector_add PTX"
    );
    Ok(())
}

pub(crate) fn kernels_cached_per_context() -> TestResult {
    let (ctx, _s, k) = setup()?;
    let again = Kernels::get(&ctx)?;
    ensure!(
        Arc::ptr_eq(&k, &again),
        "Kernels::get must return the cached handles"
    );
    Ok(())
}

pub(crate) fn wrong_signature_fails_at_load() -> TestResult {
    let (ctx, _s, _k) = setup()?;
    let ptx = cuda_stack_kernels::ptx::ptx_for("vector_add", ctx.limits().compute_capability)?;
    let module = ctx.load_ptx(ptx)?;
    // SAFETY: deliberately wrong; the load-time check must refuse it before any launch.
    let r = unsafe { module.kernel::<(&DeviceSlice<f32>,)>("vector_add") };
    ensure!(
        matches!(r, Err(cuda_stack_driver::Error::SignatureMismatch { .. })),
        "expected SignatureMismatch, got {r:?}"
    );
    Ok(())
}

pub(crate) fn launch_bench_kernels() -> TestResult {
    let (_ctx, s, k) = setup()?;
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    unsafe { k.empty_kernel()?.launch(&s, &LaunchConfig::new(1, 1)) }?;
    let mut a = s.clone_htod(&[7.0f32])?;
    let b = s.clone_htod(&[3.0f32])?;
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    unsafe {
        k.four_args()?
            .launch(&s, &LaunchConfig::new(4, 64), &mut a, &b, 2.0, 1)
    }?;
    ensure!(
        s.clone_dtoh(&a)? == [7.0],
        "four_args must not write for n != 0xffffffff"
    );
    Ok(())
}
