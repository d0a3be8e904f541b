//! The raw layer (`cuda-stack-sys`) end to end: NVRTC on the CPU, then on a GPU the device queries and
//! seed 000's vector add done with nothing but raw driver calls.

use cuda_stack_sys::{CUdevice_attribute as Attr, CUresult, Driver};
use cuda_tests::{cpu, ensure, gpu, needs_nvrtc, nvrtc_compile_raw, TestResult, VECTOR_ADD_SRC};
use std::ffi::c_void;

fn main() {
    cuda_tests::run(vec![
        needs_nvrtc(
            "nvrtc_compiles_seed000_vector_add_to_ptx",
            nvrtc_vector_add_ptx,
        ),
        needs_nvrtc(
            "nvrtc_compile_error_returns_the_log",
            nvrtc_compile_error_log,
        ),
        cpu(
            "error_names_come_from_the_header_without_a_driver",
            header_error_names,
        ),
        gpu("device_queries", device_queries),
        gpu(
            "driver_error_names_match_the_header",
            driver_error_names_match_header,
        ),
        gpu("vector_add_entirely_at_the_raw_layer", vector_add_raw),
        gpu(
            "failed_call_names_the_call_and_the_error",
            failed_call_error,
        ),
    ]);
}

fn nvrtc_vector_add_ptx() -> TestResult {
    let ptx = nvrtc_compile_raw(VECTOR_ADD_SRC, &["--gpu-architecture=compute_75"])?;
    ensure!(
        ptx.contains(".visible .entry vector_add("),
        "no vector_add entry in:\n{ptx}"
    );
    let entry = &ptx[ptx.find(".entry vector_add(").unwrap()..];
    let params = &entry[..entry.find(')').unwrap()];
    let u64s = params.matches(".param .u64").count();
    let u32s = params.matches(".param .u32").count();
    ensure!(
        u64s == 3 && u32s == 1,
        "expected 3 pointer params and 1 int param, got:\n{params}"
    );
    ensure!(ptx.contains(".version "), "no .version line");
    Ok(())
}

fn nvrtc_compile_error_log() -> TestResult {
    let err = nvrtc_compile_raw(
        "extern \"C\" __global__ void k() { undefined_thing(); }",
        &[],
    )
    .expect_err("compiling broken source must fail");
    let text = err.to_string();
    ensure!(text.contains("NVRTC_ERROR_COMPILATION"), "{text}");
    ensure!(
        text.contains("undefined_thing"),
        "the log should name the bad identifier: {text}"
    );
    Ok(())
}

fn header_error_names() -> TestResult {
    ensure!(
        CUresult::CUDA_ERROR_OUT_OF_MEMORY.name() == Some("CUDA_ERROR_OUT_OF_MEMORY"),
        "OOM name"
    );
    ensure!(
        CUresult::CUDA_SUCCESS.name() == Some("CUDA_SUCCESS"),
        "success name"
    );
    ensure!(
        CUresult(123_456).name().is_none(),
        "unknown code has no name"
    );
    ensure!(
        cuda_stack_sys::nvrtcResult::NVRTC_ERROR_COMPILATION.name()
            == Some("NVRTC_ERROR_COMPILATION"),
        "nvrtc name"
    );
    Ok(())
}

fn init() -> Result<&'static Driver, Box<dyn std::error::Error>> {
    let drv = Driver::get()?;
    // SAFETY: cuInit has no pointer arguments.
    unsafe { drv.cuInit(0)? };
    Ok(drv)
}

fn device_queries() -> TestResult {
    let drv = init()?;
    let mut version = 0;
    let mut count = 0;
    // SAFETY: out-pointers to locals.
    unsafe {
        drv.cuDriverGetVersion(&mut version)?;
        drv.cuDeviceGetCount(&mut count)?;
    }
    ensure!(version >= 11000, "driver version {version}");
    ensure!(
        Some(version) == drv.version(),
        "version read at load time differs"
    );
    ensure!(count >= 1, "device count {count}");
    for ordinal in 0..count {
        let mut dev = 0;
        let mut name = [0 as std::ffi::c_char; 256];
        let (mut major, mut minor, mut sms) = (0, 0, 0);
        let mut mem = 0usize;
        // SAFETY: out-pointers to locals; the name buffer's length is passed.
        unsafe {
            drv.cuDeviceGet(&mut dev, ordinal)?;
            drv.cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, dev)?;
            drv.cuDeviceGetAttribute(
                &mut major,
                Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                dev,
            )?;
            drv.cuDeviceGetAttribute(
                &mut minor,
                Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                dev,
            )?;
            drv.cuDeviceGetAttribute(
                &mut sms,
                Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                dev,
            )?;
            drv.cuDeviceTotalMem_v2(&mut mem, dev)?;
        }
        // SAFETY: the driver NUL-terminates the name within the buffer.
        let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        eprintln!(
            "device {ordinal}: {name}, sm_{major}{minor}, {sms} SMs, {} MiB",
            mem >> 20
        );
        ensure!(!name.is_empty(), "empty name");
        ensure!(major >= 3, "compute capability {major}.{minor}");
        ensure!(sms >= 1, "SM count {sms}");
        ensure!(mem >= 1 << 30, "total memory {mem}");
    }
    Ok(())
}

fn driver_error_names_match_header() -> TestResult {
    let drv = init()?;
    for code in [
        CUresult::CUDA_ERROR_INVALID_VALUE,
        CUresult::CUDA_ERROR_OUT_OF_MEMORY,
        CUresult::CUDA_ERROR_NOT_FOUND,
        CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
        CUresult::CUDA_ERROR_LAUNCH_FAILED,
    ] {
        match drv.error_for("test", code) {
            cuda_stack_sys::DriverError::Call {
                name, description, ..
            } => {
                ensure!(
                    Some(name.as_str()) == code.name(),
                    "{name} vs {:?}",
                    code.name()
                );
                ensure!(
                    !description.is_empty() && !description.starts_with("no description"),
                    "{description}"
                );
            }
            other => return Err(format!("unexpected {other}").into()),
        }
    }
    Ok(())
}

fn failed_call_error() -> TestResult {
    let drv = init()?;
    let mut dev = 0;
    // SAFETY: out-pointer to a local; the ordinal is out of range on purpose.
    let err = unsafe { drv.cuDeviceGet(&mut dev, 9999) }.expect_err("ordinal 9999 must fail");
    ensure!(err.call() == "cuDeviceGet", "{err}");
    ensure!(
        err.code() == Some(CUresult::CUDA_ERROR_INVALID_DEVICE),
        "{err}"
    );
    let text = err.to_string();
    ensure!(
        text.contains("cuDeviceGet failed with CUDA_ERROR_INVALID_DEVICE (101)"),
        "{text}"
    );
    Ok(())
}

/// Seed 000's pipeline with raw calls only: NVRTC → PTX → cuModuleLoadData → cuMemAlloc →
/// cuMemcpyHtoD → cuLaunchKernel → cuMemcpyDtoH, checked against the CPU, everything freed.
fn vector_add_raw() -> TestResult {
    let drv = init()?;
    let (mut dev, mut ctx) = (0, std::ptr::null_mut());
    let (mut major, mut minor) = (0, 0);
    // SAFETY: out-pointers to locals.
    unsafe {
        drv.cuDeviceGet(&mut dev, 0)?;
        drv.cuDeviceGetAttribute(
            &mut major,
            Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            dev,
        )?;
        drv.cuDeviceGetAttribute(
            &mut minor,
            Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            dev,
        )?;
        drv.cuDevicePrimaryCtxRetain(&mut ctx, dev)?;
        drv.cuCtxPushCurrent_v2(ctx)?;
    }
    let result = (|| -> TestResult {
        let arch = format!("--gpu-architecture=compute_{major}{minor}");
        let mut ptx = nvrtc_compile_raw(VECTOR_ADD_SRC, &[&arch])?.into_bytes();
        ptx.push(0);
        let n: i32 = 1_000_003; // not a multiple of the block size
        let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.5).sin()).collect();
        let b: Vec<f32> = (0..n).map(|i| (i as f32 * 0.25).cos()).collect();
        let mut c = vec![f32::NAN; n as usize];
        let bytes = n as usize * 4;
        let (mut module, mut func) = (std::ptr::null_mut(), std::ptr::null_mut());
        let (mut da, mut db, mut dc) = (0, 0, 0);
        // SAFETY: every pointer is valid for the sizes passed; the kernel's parameters match
        // `vector_add(float*, float*, float*, int)`; all device memory is `bytes` long and the
        // kernel guards `idx < N`; everything is freed before returning.
        unsafe {
            drv.cuModuleLoadData(&mut module, ptx.as_ptr().cast())?;
            drv.cuModuleGetFunction(&mut func, module, c"vector_add".as_ptr())?;
            drv.cuMemAlloc_v2(&mut da, bytes)?;
            drv.cuMemAlloc_v2(&mut db, bytes)?;
            drv.cuMemAlloc_v2(&mut dc, bytes)?;
            drv.cuMemcpyHtoD_v2(da, a.as_ptr().cast(), bytes)?;
            drv.cuMemcpyHtoD_v2(db, b.as_ptr().cast(), bytes)?;
            let block = 256u32;
            let grid = (n as u32).div_ceil(block);
            let mut nn = n;
            let mut params: [*mut c_void; 4] = [
                (&mut da as *mut u64).cast(),
                (&mut db as *mut u64).cast(),
                (&mut dc as *mut u64).cast(),
                (&mut nn as *mut i32).cast(),
            ];
            drv.cuLaunchKernel(
                func,
                grid,
                1,
                1,
                block,
                1,
                1,
                0,
                std::ptr::null_mut(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )?;
            drv.cuCtxSynchronize()?;
            drv.cuMemcpyDtoH_v2(c.as_mut_ptr().cast(), dc, bytes)?;
            drv.cuMemFree_v2(da)?;
            drv.cuMemFree_v2(db)?;
            drv.cuMemFree_v2(dc)?;
            drv.cuModuleUnload(module)?;
        }
        for i in 0..n as usize {
            ensure!(
                c[i] == a[i] + b[i],
                "c[{i}] = {} but a+b = {}",
                c[i],
                a[i] + b[i]
            );
        }
        Ok(())
    })();
    let mut popped = std::ptr::null_mut();
    // SAFETY: pops the context pushed above and releases the retain.
    unsafe {
        drv.cuCtxPopCurrent_v2(&mut popped)?;
        drv.cuDevicePrimaryCtxRelease_v2(dev)?;
    }
    result
}
