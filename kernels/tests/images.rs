//! Which image each kernel file loads (SASS or PTX), and that the handles made without the
//! driver's parameter probe agree with the driver, on both paths.

use cuda_stack_kernels::image::{driver_version, ImageKind, ImagePreference};
use cuda_stack_kernels::{ops, Kernels, KERNEL_NAMES, PTX_FILES};
use cuda_tests::{cpu, ensure, gpu, TestResult};

/// Files that can run on `cc` (a target runs there).
fn runnable(cc: cuda_stack_driver::ComputeCapability) -> usize {
    PTX_FILES.iter().filter(|f| f.pick(cc).is_ok()).count()
}

fn every_file_ships_sass_for_turing_ampere_and_hopper() -> TestResult {
    for f in PTX_FILES {
        // (architecture, oldest driver): NVRTC 12.4's cubins load on every CUDA 12 driver.
        let archs: Vec<(&str, u32)> = f.sass.iter().map(|s| (s.arch, s.min_driver)).collect();
        let want: &[(&str, u32)] = match f.name {
            "gemm_mma" | "attention_mma" | "attention_mma_bwd" => {
                &[("sm_80", 12000), ("sm_90", 12000)]
            }
            "gemm_wgmma"
            | "gemm_wgmma_fp8"
            | "gemm_wgmma_tiles"
            | "attention_wgmma_bwd"
            | "attention_wgmma_bwd_fused" => &[("sm_90a", 12000)],
            // The forward also ships its PTX assembled by CUDA 13.0's ptxas (gen-kernels'
            // CUDA13_SASS), for drivers from 13.0.
            "attention_wgmma" => &[("sm_90a", 12000), ("sm_90a", 13000)],
            // FP8 conversions exist from sm_89 on: Hopper's SASS; Ada JIT-compiles the PTX.
            "fp8" => &[("sm_90", 12000)],
            _ => &[("sm_75", 12000), ("sm_80", 12000), ("sm_90", 12000)],
        };
        ensure!(
            archs == want,
            "{}: SASS for {archs:?}, expected {want:?}",
            f.name
        );
        for s in f.sass {
            // An ELF image: what the driver's cuModuleLoadData takes for a cubin.
            ensure!(
                s.cubin.starts_with(b"\x7fELF"),
                "{} {} is not an ELF cubin",
                f.name,
                s.arch
            );
        }
    }
    Ok(())
}

/// Loads everything with `pref`, checks each file's image kind, re-checks every handle with
/// the driver (`cuFuncGetParamInfo`), and runs one op through the handles.
fn load_and_verify(pref: ImagePreference) -> TestResult {
    let ctx = cuda_tests::context()?;
    let cc = ctx.limits().compute_capability;
    let k = Kernels::load_with(&ctx, pref);
    ensure!(
        k.loaded_images().is_empty(),
        "nothing loads before first use"
    );
    k.load_all()?;
    let loaded = k.loaded_images();
    ensure!(
        loaded.len() == runnable(cc),
        "{} files loaded, {} can run on {cc}",
        loaded.len(),
        runnable(cc)
    );
    for l in &loaded {
        let file = PTX_FILES
            .iter()
            .find(|f| f.name == l.file)
            .ok_or("unknown file")?;
        // The driver the SASS is chosen for: this one, or (baseline) the oldest supported.
        let driver = match pref {
            ImagePreference::BaselineMachineCode => None,
            _ => driver_version(),
        };
        let want = match pref {
            ImagePreference::Ptx => ImageKind::Ptx,
            _ if file.pick_sass(cc, driver).is_some() => ImageKind::Sass,
            _ => ImageKind::Ptx,
        };
        ensure!(l.kind == want, "{l}: expected {want:?}");
        ensure!(l.fallback.is_none(), "{l}: the SASS failed to load");
        // Of two cubins for the device's architecture, the one for this driver ran.
        if let (ImageKind::Sass, Some(best)) = (l.kind, file.pick_sass(cc, driver)) {
            ensure!(
                l.min_driver == best.min_driver && l.bytes == best.cubin.len(),
                "{l}: expected the cubin for drivers from {}",
                best.min_driver
            );
        }
    }
    let checked = k.verify_with_driver()?;
    let expected: usize = KERNEL_NAMES
        .iter()
        .filter(|n| k.function(n).is_some())
        .count();
    ensure!(
        checked == expected && checked > 0,
        "{checked} handles checked, {expected} loaded"
    );
    let s = ctx.new_stream()?;
    let a = s.clone_htod(&[1.0f32, 2.0, 3.0])?;
    let b = s.clone_htod(&[10.0f32, 20.0, 30.0])?;
    let mut c = s.alloc_zeros::<f32>(3)?;
    ops::binary(&k, &s, ops::BinaryOp::Add, &a, &b, &mut c)?;
    ensure!(
        s.clone_dtoh(&c)? == [11.0, 22.0, 33.0],
        "add through {pref:?}"
    );
    Ok(())
}

fn sass_loads_and_agrees_with_the_driver() -> TestResult {
    load_and_verify(ImagePreference::MachineCode)
}

fn ptx_loads_and_agrees_with_the_driver() -> TestResult {
    load_and_verify(ImagePreference::Ptx)
}

/// The cubins an older driver gets (NVRTC 12.4's, where a CUDA 13 driver loads CUDA 13.0
/// ptxas's), loaded on this one.
fn baseline_sass_loads_and_agrees_with_the_driver() -> TestResult {
    load_and_verify(ImagePreference::BaselineMachineCode)
}

/// Only the file of the kernel asked for loads.
fn files_load_on_first_use_only() -> TestResult {
    let ctx = cuda_tests::context()?;
    let k = Kernels::load_with(&ctx, ImagePreference::MachineCode);
    k.add_f32()?;
    k.mul_f64()?;
    let files: Vec<&str> = k.loaded_images().iter().map(|l| l.file).collect();
    ensure!(files == ["elementwise"], "loaded {files:?}");
    k.reduce_sum_fast_f32()?;
    let files: Vec<&str> = k.loaded_images().iter().map(|l| l.file).collect();
    ensure!(files == ["elementwise", "reduce"], "loaded {files:?}");
    Ok(())
}

fn main() {
    cuda_tests::run(vec![
        cpu(
            "every_file_ships_sass_for_turing_ampere_and_hopper",
            every_file_ships_sass_for_turing_ampere_and_hopper,
        ),
        gpu(
            "sass_loads_and_agrees_with_the_driver",
            sass_loads_and_agrees_with_the_driver,
        ),
        gpu(
            "ptx_loads_and_agrees_with_the_driver",
            ptx_loads_and_agrees_with_the_driver,
        ),
        gpu(
            "baseline_sass_loads_and_agrees_with_the_driver",
            baseline_sass_loads_and_agrees_with_the_driver,
        ),
        gpu("files_load_on_first_use_only", files_load_on_first_use_only),
    ]);
}
