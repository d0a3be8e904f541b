//! `vector_add_layers`: seed 000's vector add at all four layers of this crate family — raw
//! `cuda-stack-sys` (the driver API as C sees it), safe `cuda-stack-driver`, `cuda-stack-runtime` (the CUDA
//! Runtime's conveniences), and `Tensor` (PyTorch's level) — printing each layer's source-level
//! steps with the time each took, and checking every result against the CPU.
//!
//! Run: `cargo run --release -p cuda-examples --bin vector_add_layers [-- --quick]`

use clap::Parser;
use cuda_examples::cli::Common;
use cuda_examples::exit::{run, ProgramResult};
use cuda_stack_driver::{Context, DeviceSlice, Kernel, LaunchConfig};
use cuda_stack_kernels::{ops, reference, Kernels};
use cuda_stack_runtime::{self as rt, tensor::Tensor};
use cuda_stack_sys::{CUdevice_attribute as Attr, Driver};
use std::ffi::c_void;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Seed 000's kernel, as committed PTX (`kernels/cuda/vector_add.cu`, entry `vector_add`).
const PTX: &str = include_str!("../../../kernels/ptx/vector_add.ptx");

#[derive(Parser)]
#[command(
    about = "Seed 000's vector add at every layer: cuda-stack-sys, cuda-stack-driver, runtime-lite, Tensor"
)]
struct Args {
    #[command(flatten)]
    common: Common,
}

fn main() -> ExitCode {
    run("vector_add_layers", body)
}

/// Timed steps of one layer.
struct Steps {
    rows: Vec<(&'static str, Duration)>,
}

impl Steps {
    fn new() -> Steps {
        Steps { rows: Vec::new() }
    }

    fn run<R, E: Into<Box<dyn std::error::Error>>>(
        &mut self,
        code: &'static str,
        f: impl FnOnce() -> Result<R, E>,
    ) -> Result<R, Box<dyn std::error::Error>> {
        let t = Instant::now();
        let r = f().map_err(Into::into)?;
        self.rows.push((code, t.elapsed()));
        Ok(r)
    }

    fn print(&self, title: &str, ok: bool) {
        let total: Duration = self.rows.iter().map(|r| r.1).sum();
        println!(
            "{title}: {} steps, {:.3} ms, result {}",
            self.rows.len(),
            total.as_secs_f64() * 1e3,
            if ok { "matches the CPU" } else { "WRONG" }
        );
        for (code, t) in &self.rows {
            println!("   {:>9.1} µs  {code}", t.as_secs_f64() * 1e6);
        }
        println!();
    }
}

fn body() -> ProgramResult {
    let args = Args::parse();
    let n = args.common.pick(1 << 16, 1 << 24);
    let a: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.25).collect();
    let b: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 6.0).collect();
    let want = reference::vector_add(&a, &b);
    let ordinal = args.common.device;
    println!(
        "C = A + B on {n} floats, written four times, one layer each (times are this run's).\n"
    );

    let raw = raw_layer(ordinal, &a, &b)?;
    raw.0.print(
        "1. cuda-stack-sys: the raw driver API (what a C program calls)",
        raw.1 == want,
    );
    let drv = driver_layer(ordinal, &a, &b)?;
    drv.0
        .print("2. cuda-stack-driver: the safe RAII layer", drv.1 == want);
    let rtl = runtime_layer(ordinal, &a, &b)?;
    rtl.0.print(
        "3. cuda-stack-runtime: cudaMalloc/cudaMemcpy/<<<>>> conveniences",
        rtl.1 == want,
    );
    let ten = tensor_layer(ordinal, &a, &b)?;
    ten.0
        .print("4. Tensor: PyTorch's level (C = A + B)", ten.1 == want);
    println!("Each layer down does more by hand: the Tensor line `&a + &b` is steps 3's malloc + launch,");
    println!(
        "which are step 2's allocation on a stream + typed launch, which are step 1's raw calls."
    );
    if [&raw.1, &drv.1, &rtl.1, &ten.1].iter().any(|c| **c != want) {
        return Err("a layer's result differs from the CPU".into());
    }
    Ok(())
}

type Out = Result<(Steps, Vec<f32>), Box<dyn std::error::Error>>;

fn raw_layer(ordinal: usize, a: &[f32], b: &[f32]) -> Out {
    let mut s = Steps::new();
    let n = a.len();
    let bytes = n * 4;
    let drv = s.run(
        "Driver::get()  (dlopen libcuda, resolve every entry point)",
        Driver::get,
    )?;
    let mut c = vec![0f32; n];
    let ptx = std::ffi::CString::new(PTX)?;
    let (mut dev, mut ctx, mut module, mut func) = (
        0,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    let (mut da, mut db, mut dc) = (0u64, 0u64, 0u64);
    let mut major = 0;
    // SAFETY: each call gets valid out-pointers and sizes; the kernel's parameters match
    // `vector_add(float*, float*, float*, int)`; every buffer holds `n` floats and the kernel
    // guards `i < N`; everything is freed and the context popped and released at the end.
    unsafe {
        s.run("cuInit(0)", || drv.cuInit(0))?;
        s.run("cuDeviceGet(&dev, ordinal)", || {
            drv.cuDeviceGet(&mut dev, ordinal as i32)
        })?;
        s.run(
            "cuDeviceGetAttribute(&major, COMPUTE_CAPABILITY_MAJOR, dev)",
            || {
                drv.cuDeviceGetAttribute(
                    &mut major,
                    Attr::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                    dev,
                )
            },
        )?;
        s.run("cuDevicePrimaryCtxRetain(&ctx, dev)", || {
            drv.cuDevicePrimaryCtxRetain(&mut ctx, dev)
        })?;
        s.run("cuCtxPushCurrent(ctx)", || drv.cuCtxPushCurrent_v2(ctx))?;
        s.run(
            "cuModuleLoadData(&module, ptx)  (JIT: PTX → SASS)",
            || drv.cuModuleLoadData(&mut module, ptx.as_ptr().cast()),
        )?;
        s.run("cuModuleGetFunction(&func, module, \"vector_add\")", || {
            drv.cuModuleGetFunction(&mut func, module, c"vector_add".as_ptr())
        })?;
        s.run("cuMemAlloc(&dA, bytes)", || {
            drv.cuMemAlloc_v2(&mut da, bytes)
        })?;
        s.run("cuMemAlloc(&dB, bytes)", || {
            drv.cuMemAlloc_v2(&mut db, bytes)
        })?;
        s.run("cuMemAlloc(&dC, bytes)", || {
            drv.cuMemAlloc_v2(&mut dc, bytes)
        })?;
        s.run("cuMemcpyHtoD(dA, A, bytes)", || {
            drv.cuMemcpyHtoD_v2(da, a.as_ptr().cast(), bytes)
        })?;
        s.run("cuMemcpyHtoD(dB, B, bytes)", || {
            drv.cuMemcpyHtoD_v2(db, b.as_ptr().cast(), bytes)
        })?;
        let mut nn = n as i32;
        let mut params: [*mut c_void; 4] = [
            (&mut da as *mut u64).cast(),
            (&mut db as *mut u64).cast(),
            (&mut dc as *mut u64).cast(),
            (&mut nn as *mut i32).cast(),
        ];
        let grid = (n as u32).div_ceil(256);
        s.run(
            "cuLaunchKernel(func, grid, 1, 1, 256, 1, 1, 0, NULL, params, NULL)",
            || {
                drv.cuLaunchKernel(
                    func,
                    grid,
                    1,
                    1,
                    256,
                    1,
                    1,
                    0,
                    std::ptr::null_mut(),
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            },
        )?;
        s.run("cuCtxSynchronize()", || drv.cuCtxSynchronize())?;
        s.run("cuMemcpyDtoH(C, dC, bytes)", || {
            drv.cuMemcpyDtoH_v2(c.as_mut_ptr().cast(), dc, bytes)
        })?;
        s.run("cuMemFree(dA); cuMemFree(dB); cuMemFree(dC)", || {
            drv.cuMemFree_v2(da)?;
            drv.cuMemFree_v2(db)?;
            drv.cuMemFree_v2(dc)
        })?;
        s.run("cuModuleUnload(module)", || drv.cuModuleUnload(module))?;
        let mut popped = std::ptr::null_mut();
        s.run("cuCtxPopCurrent(); cuDevicePrimaryCtxRelease(dev)", || {
            drv.cuCtxPopCurrent_v2(&mut popped)?;
            drv.cuDevicePrimaryCtxRelease_v2(dev)
        })?;
    }
    Ok((s, c))
}

type VecAdd = Kernel<(
    &'static DeviceSlice<f32>,
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    i32,
)>;

fn driver_layer(ordinal: usize, a: &[f32], b: &[f32]) -> Out {
    let mut s = Steps::new();
    let n = a.len();
    let ctx = s.run("let ctx = Context::new(ordinal)?;", || {
        Context::new(ordinal)
    })?;
    let stream = s.run("let stream = ctx.new_stream()?;", || ctx.new_stream())?;
    let module = s.run("let module = ctx.load_ptx(PTX)?;", || ctx.load_ptx(PTX))?;
    // SAFETY: the signature matches `vector_add(float*, float*, float*, int)`, which reads A and
    // B and writes C for i < N.
    let k: VecAdd = s.run(
        "let k = unsafe { module.kernel::<(&DeviceSlice<f32>, …, i32)>(\"vector_add\")? };",
        || unsafe { module.kernel("vector_add") },
    )?;
    let da = s.run("let da = stream.clone_htod(&a)?;", || stream.clone_htod(a))?;
    let db = s.run("let db = stream.clone_htod(&b)?;", || stream.clone_htod(b))?;
    let mut dc = s.run("let mut dc = stream.alloc_zeros::<f32>(n)?;", || {
        stream.alloc_zeros::<f32>(n)
    })?;
    // SAFETY: the kernel touches index i < N only, and da, db, dc all have N = n elements.
    s.run(
        "unsafe { k.launch(&stream, &LaunchConfig::for_num_elems(n), &da, &db, &mut dc, n as i32)? };",
        || unsafe {
            k.launch(
                &stream,
                &LaunchConfig::for_num_elems(n),
                &da,
                &db,
                &mut dc,
                n as i32,
            )
        },
    )?;
    let c = s.run(
        "let c = stream.clone_dtoh(&dc)?;   (waits for the stream)",
        || stream.clone_dtoh(&dc),
    )?;
    s.run(
        "drop(buffers, module, stream, ctx)   (frees in stream order)",
        || -> cuda_stack_driver::Result<()> {
            drop((da, db, dc, k, module));
            stream.synchronize()
        },
    )?;
    Ok((s, c))
}

fn runtime_layer(ordinal: usize, a: &[f32], b: &[f32]) -> Out {
    let mut s = Steps::new();
    let n = a.len();
    s.run(
        "rt::set_device(ordinal)?;                  // cudaSetDevice",
        || rt::set_device(ordinal),
    )?;
    let runtime = rt::Runtime::current()?;
    let da = s.run(
        "let da = rt::clone_htod(&a)?;              // cudaMalloc + cudaMemcpy",
        || rt::clone_htod(a),
    )?;
    let db = s.run("let db = rt::clone_htod(&b)?;", || rt::clone_htod(b))?;
    let mut dc = s.run(
        "let mut dc = rt::malloc_zeros::<f32>(n)?;  // cudaMalloc + cudaMemset",
        || rt::malloc_zeros::<f32>(n),
    )?;
    let k = s.run(
        "let k = Kernels::get(ctx)?;                // the module, loaded once",
        || Kernels::get(runtime.context()),
    )?;
    s.run(
        "ops::vector_add_seed(&k, stream, &da, &db, &mut dc)?;  // vector_add<<<grid, 256>>>",
        || ops::vector_add_seed(&k, runtime.default_stream(), &da, &db, &mut dc),
    )?;
    s.run(
        "rt::synchronize()?;                        // cudaDeviceSynchronize",
        rt::synchronize,
    )?;
    let c = s.run(
        "let c = rt::clone_dtoh(&dc)?;              // cudaMemcpy(DeviceToHost)",
        || rt::clone_dtoh(&dc),
    )?;
    s.run(
        "drop(da, db, dc)                           // back to the caching allocator",
        || -> rt::Result<()> {
            drop((da, db, dc));
            Ok(())
        },
    )?;
    Ok((s, c))
}

fn tensor_layer(ordinal: usize, a: &[f32], b: &[f32]) -> Out {
    let mut s = Steps::new();
    let n = a.len();
    let ta = s.run(
        "let a = Tensor::from_slice_on(0, &a, &[n])?;  // torch.tensor(A, device='cuda')",
        || Tensor::from_slice_on(ordinal, a, &[n]),
    )?;
    let tb = s.run("let b = Tensor::from_slice_on(0, &b, &[n])?;", || {
        Tensor::from_slice_on(ordinal, b, &[n])
    })?;
    let tc = s.run(
        "let c = (&a + &b)?;                             // C = A + B",
        || &ta + &tb,
    )?;
    let c = s.run(
        "let c = c.to_vec()?;                            // C.cpu()",
        || tc.to_vec(),
    )?;
    Ok((s, c))
}
