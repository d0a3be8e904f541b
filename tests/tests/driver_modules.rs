//! cuda-stack-driver modules, NVRTC, functions, globals and launches.

use cuda_stack_driver::nvrtc::{self, CompileOptions};
use cuda_stack_driver::{DeviceSlice, Error, JitOptions, LaunchConfig, ModuleImage};
use cuda_tests::{context, ensure, gpu, load_cuda, needs_nvrtc, TestResult, TEST_KERNELS};
use std::ffi::c_void;

fn main() {
    cuda_tests::run(vec![
        needs_nvrtc("nvrtc_options_reach_the_compiler", nvrtc_options),
        needs_nvrtc("nvrtc_compile_error_returns_the_log", nvrtc_error_log),
        gpu("devices_and_attributes", devices),
        gpu("context_binds_only_when_needed_and_limits", context_basics),
        gpu("typed_launch_vector_add_matches_cpu", typed_vector_add),
        gpu("untyped_launch_is_unsafe_but_works", untyped_launch),
        gpu("signature_mismatch_is_caught_at_load", signature_mismatch),
        gpu("launch_over_the_limits_names_the_limit", launch_limits),
        gpu("ptx_version_9_9_is_ptx_too_new", ptx_too_new),
        gpu("malformed_ptx_returns_the_jit_log", malformed_ptx),
        gpu("missing_kernel_lists_the_entries", missing_kernel),
        gpu("function_attributes_and_occupancy", function_attributes),
        gpu("dynamic_shared_memory_and_opt_in", dynamic_shared),
        gpu("module_globals_read_and_write", globals),
        gpu("cubin_from_nvrtc_loads", cubin),
        gpu("cluster_launch_on_sm90", cluster_launch),
        gpu("cooperative_launch", cooperative_launch),
        gpu(
            "programmatic_dependent_launch",
            programmatic_dependent_launch,
        ),
    ]);
}

fn nvrtc_options() -> TestResult {
    let src = r#"
#ifndef FACTOR
#error FACTOR must be defined
#endif
extern "C" __global__ void k(float* x) { x[threadIdx.x] *= FACTOR; }
"#;
    let opts = CompileOptions {
        arch: Some("compute_80".into()),
        defines: vec![("FACTOR".into(), Some("3.0f".into()))],
        line_info: true,
        fast_math: true,
        std: Some("c++17".into()),
        ..Default::default()
    };
    let ptx = nvrtc::compile_ptx("k.cu", src, &opts)?;
    ensure!(ptx.contains(".target sm_80"), "arch not applied");
    ensure!(
        ptx.contains(".loc") || ptx.contains(".file"),
        "-lineinfo not applied"
    );
    ensure!(ptx.contains("0f40400000"), "FACTOR=3.0f not applied");
    let again = nvrtc::compile_ptx_cached("k.cu", src, &opts)?;
    ensure!(
        again == ptx && nvrtc::compile_ptx_cached("k.cu", src, &opts)? == ptx,
        "cache"
    );
    Ok(())
}

fn nvrtc_error_log() -> TestResult {
    let err = nvrtc::compile_ptx(
        "bad.cu",
        "extern \"C\" __global__ void k() { nope(); }",
        &CompileOptions::default(),
    )
    .expect_err("must fail");
    match &err {
        Error::Compile { log, name, .. } => {
            ensure!(name == "bad.cu" && log.contains("nope"), "{log}");
        }
        other => return Err(format!("expected Compile, got {other:?}").into()),
    }
    Ok(())
}

fn devices() -> TestResult {
    let n = cuda_stack_driver::Device::count()?;
    ensure!(n >= 1, "count {n}");
    for d in cuda_stack_driver::Device::all()? {
        let name = d.name()?;
        ensure!(!name.is_empty(), "name");
        ensure!(d.uuid()? != [0; 16], "uuid");
        ensure!(d.compute_capability()?.major >= 5, "cc");
        ensure!(d.sm_count()? >= 1 && d.warp_size()? == 32, "sm/warp");
        ensure!(d.total_memory()? > 1 << 30, "memory");
        ensure!(d.max_threads_per_block()? >= 512, "threads");
        ensure!(
            d.max_shared_memory_per_block_optin()? >= d.max_shared_memory_per_block()?,
            "smem"
        );
        ensure!(
            d.l2_cache_bytes()? > 0 && d.clock_rate_khz()? > 0,
            "l2/clock"
        );
        let _ = (
            d.async_engine_count()?,
            d.memory_pools_supported()?,
            d.peak_memory_bandwidth()?,
        );
        eprintln!("{name}: {:.0} GB/s peak", d.peak_memory_bandwidth()? / 1e9);
    }
    let ctx = context()?;
    let (free, total) = ctx.mem_get_info()?;
    ensure!(free <= total && total > 0, "mem_get_info {free} {total}");
    Ok(())
}

fn context_basics() -> TestResult {
    let ctx = context()?;
    let other = std::thread::spawn({
        let ctx = ctx.clone();
        move || -> Result<(), String> {
            ctx.bind().map_err(|e| e.to_string())?;
            ctx.bind().map_err(|e| e.to_string())?; // already current: no-op
            let mut cur = std::ptr::null_mut();
            let drv = cuda_stack_sys::Driver::get().map_err(|e| e.to_string())?;
            // SAFETY: out-pointer to a local.
            unsafe { drv.cuCtxGetCurrent(&mut cur) }.map_err(|e| e.to_string())?;
            if cur != ctx.as_raw() {
                return Err("context not current after bind".into());
            }
            Ok(())
        }
    })
    .join()
    .map_err(|_| "thread panicked")?;
    other?;
    let old = ctx.limit(cuda_stack_driver::Limit::StackSize)?;
    ctx.set_limit(cuda_stack_driver::Limit::StackSize, 4096)?;
    ensure!(
        ctx.limit(cuda_stack_driver::Limit::StackSize)? >= 4096,
        "stack limit"
    );
    ctx.set_limit(cuda_stack_driver::Limit::StackSize, old)?;
    let _ = ctx.limit(cuda_stack_driver::Limit::PrintfFifoSize)?;
    let _ = ctx.limit(cuda_stack_driver::Limit::MallocHeapSize)?;
    ctx.synchronize()?;
    {
        let _g = ctx.push_current()?;
    }
    Ok(())
}

type VecAdd = cuda_stack_driver::Kernel<(
    &'static DeviceSlice<f32>,
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    u32,
)>;

fn vector_add(ctx: &cuda_stack_driver::Context) -> Result<VecAdd, Box<dyn std::error::Error>> {
    let m = load_cuda(ctx, TEST_KERNELS)?;
    // SAFETY: matches vector_add(const float*, const float*, float*, unsigned).
    Ok(unsafe { m.kernel("vector_add")? })
}

fn typed_vector_add() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let k = vector_add(&ctx)?;
    for n in [1usize, 31, 32, 33, 1023, 1025, 4099, 1_000_003] {
        let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..n).map(|i| 1.0 - i as f32).collect();
        let (da, db) = (s.clone_htod(&a)?, s.clone_htod(&b)?);
        let mut dc = s.alloc_zeros::<f32>(n)?;
        // SAFETY: the test kernel guards its index with the length it is passed, which does not
        // exceed any buffer argument's length here.
        unsafe {
            k.launch(
                &s,
                &LaunchConfig::for_num_elems(n),
                &da,
                &db,
                &mut dc,
                n as u32,
            )
        }?;
        let c = s.clone_dtoh(&dc)?;
        for i in 0..n {
            ensure!(
                c[i] == a[i] + b[i],
                "n={n} c[{i}]={} want {}",
                c[i],
                a[i] + b[i]
            );
        }
    }
    Ok(())
}

fn untyped_launch() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let m = load_cuda(&ctx, TEST_KERNELS)?;
    let f = m.function("axpy")?;
    let x = s.clone_htod(&[1.0f32, 2.0, 3.0])?;
    let y = s.clone_htod(&[10.0f32, 20.0, 30.0])?;
    let (mut a, mut px, mut py, mut n) = (2.0f32, x.as_raw_ptr(), y.as_raw_ptr(), 3u32);
    let mut params: [*mut c_void; 4] = [
        (&mut a as *mut f32).cast(),
        (&mut px as *mut u64).cast(),
        (&mut py as *mut u64).cast(),
        (&mut n as *mut u32).cast(),
    ];
    // SAFETY: the parameters match axpy(float, const float*, float*, unsigned) and the buffers
    // hold 3 floats, used only on `s`.
    unsafe { f.launch(&s, &LaunchConfig::new(1, 32), &mut params)? };
    ensure!(s.clone_dtoh(&y)? == [12.0, 24.0, 36.0], "axpy");
    Ok(())
}

fn signature_mismatch() -> TestResult {
    let ctx = context()?;
    let m = load_cuda(&ctx, TEST_KERNELS)?;
    // SAFETY: deliberately wrong; the check must refuse it before any launch.
    let r = unsafe { m.kernel::<(&DeviceSlice<f32>, u32)>("vector_add") };
    match r {
        Err(Error::SignatureMismatch {
            expected, found, ..
        }) => {
            ensure!(
                expected == [8, 4] && found == [8, 8, 8, 4],
                "{expected:?} {found:?}"
            );
        }
        other => return Err(format!("expected SignatureMismatch, got {other:?}").into()),
    }
    // SAFETY: deliberately wrong scalar size (f64 where the kernel has float).
    let r = unsafe { m.kernel::<(f64, &DeviceSlice<f32>, &mut DeviceSlice<f32>, u32)>("axpy") };
    ensure!(
        matches!(r, Err(Error::SignatureMismatch { .. })),
        "f64 for float accepted"
    );
    // Same sizes, other kinds: the PTX says `.f32 a` and `.u32 n`.
    // SAFETY: deliberately wrong; refused before any launch.
    let r = unsafe { m.kernel::<(u32, &DeviceSlice<f32>, &mut DeviceSlice<f32>, u32)>("axpy") };
    ensure!(
        matches!(&r, Err(Error::SignatureKindMismatch { index: 0, ptx, .. }) if ptx == ".f32"),
        "u32 for float accepted: {:?}",
        r.err()
    );
    // SAFETY: deliberately wrong; refused before any launch.
    let r = unsafe { m.kernel::<(f32, &DeviceSlice<f32>, &mut DeviceSlice<f32>, f32)>("axpy") };
    ensure!(
        matches!(&r, Err(Error::SignatureKindMismatch { index: 3, ptx, .. }) if ptx == ".u32"),
        "f32 for unsigned accepted: {:?}",
        r.err()
    );
    // SAFETY: the right signature (axpy(float, const float*, float*, unsigned)).
    unsafe { m.kernel::<(f32, &DeviceSlice<f32>, &mut DeviceSlice<f32>, u32)>("axpy")? };
    // A function asks the driver for its parameter sizes once and keeps them (handles made per
    // call from one Function, as the kernels crate's dispatch does): the answer stays the same,
    // a wrong signature is still refused and the right one accepted.
    let f = m.function("vector_add")?;
    let first = f.param_sizes()?;
    ensure!(first == [8, 8, 8, 4], "{first:?}");
    ensure!(f.param_sizes()? == first, "sizes changed");
    // SAFETY: deliberately wrong; refused before any launch.
    let r =
        unsafe { cuda_stack_driver::Kernel::<(&DeviceSlice<f32>, u32)>::from_function(f.clone()) };
    ensure!(
        matches!(r, Err(Error::SignatureMismatch { .. })),
        "the kept sizes accepted a wrong signature"
    );
    // SAFETY: vector_add(const float*, const float*, float*, unsigned); never launched here.
    unsafe { VecAdd::from_function(f)? };
    Ok(())
}

fn launch_limits() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let k = vector_add(&ctx)?;
    let a = s.alloc_zeros::<f32>(4)?;
    let b = s.alloc_zeros::<f32>(4)?;
    let mut c = s.alloc_zeros::<f32>(4)?;
    let max = ctx.limits().max_threads_per_block;
    let cfg = LaunchConfig::new(1, (max, 2));
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    let msg = unsafe { k.launch(&s, &cfg, &a, &b, &mut c, 4) }
        .unwrap_err()
        .to_string();
    ensure!(
        msg.contains(&format!(
            "block has {} threads; this device allows {max}",
            2 * max
        )),
        "{msg}"
    );
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    let msg = unsafe { k.launch(&s, &LaunchConfig::new((1, 1 << 20), 32), &a, &b, &mut c, 4) }
        .unwrap_err()
        .to_string();
    ensure!(msg.contains("grid.y is 1048576"), "{msg}");
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    let msg = unsafe {
        k.launch(
            &s,
            &LaunchConfig::new(1, 32).with_shared_mem(1 << 30),
            &a,
            &b,
            &mut c,
            4,
        )
    }
    .unwrap_err()
    .to_string();
    ensure!(msg.contains("dynamic shared memory"), "{msg}");
    // The stream is still fine afterwards.
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    unsafe { k.launch(&s, &LaunchConfig::new(1, 32), &a, &b, &mut c, 4) }?;
    s.synchronize()?;
    Ok(())
}

fn ptx_too_new() -> TestResult {
    let ctx = context()?;
    let ptx = ".version 9.9\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n ret;\n}\n";
    match ctx.load_ptx(ptx) {
        Err(Error::PtxTooNew { ptx_isa, driver }) => {
            ensure!(
                ptx_isa == "9.9" && driver.starts_with("CUDA "),
                "{ptx_isa} {driver}"
            );
        }
        other => return Err(format!("expected PtxTooNew, got {other:?}").into()),
    }
    let msg = ctx.load_ptx(ptx).unwrap_err().to_string();
    ensure!(
        msg.contains("ISA version 9.9") && msg.contains("update the NVIDIA driver"),
        "{msg}"
    );
    Ok(())
}

fn malformed_ptx() -> TestResult {
    let ctx = context()?;
    let ptx = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n this_is_not_ptx %r1;\n ret;\n}\n";
    match ctx.load_module(ModuleImage::Ptx(ptx), &JitOptions::default()) {
        Err(Error::ModuleLoad { log, source }) => {
            ensure!(!log.is_empty(), "empty JIT log ({source})");
            eprintln!("JIT log: {log}");
        }
        other => return Err(format!("expected ModuleLoad, got {other:?}").into()),
    }
    Ok(())
}

fn missing_kernel() -> TestResult {
    let ctx = context()?;
    let m = load_cuda(&ctx, TEST_KERNELS)?;
    match m.function("vector_sub") {
        Err(Error::KernelNotFound { name, available }) => {
            ensure!(name == "vector_sub", "{name}");
            ensure!(available.iter().any(|a| a == "vector_add"), "{available:?}");
        }
        other => return Err(format!("expected KernelNotFound, got {other:?}").into()),
    }
    let msg = m.function("vector_sub").unwrap_err().to_string();
    ensure!(
        msg.contains("it has: ") && msg.contains("vector_add"),
        "{msg}"
    );
    Ok(())
}

fn function_attributes() -> TestResult {
    let ctx = context()?;
    let m = load_cuda(&ctx, TEST_KERNELS)?;
    let f = m.function("vector_add")?;
    let a = f.attributes()?;
    ensure!(a.registers > 0 && a.max_threads_per_block >= 256, "{a:?}");
    ensure!(a.local_bytes == 0, "spills in vector_add: {a:?}");
    let blocks = f.max_active_blocks_per_sm(256, 0)?;
    ensure!(blocks >= 1, "occupancy {blocks}");
    let (grid, block) = f.max_potential_block_size(0)?;
    ensure!(block >= 32 && grid >= 1, "{grid} {block}");
    let cfg = f.occupancy_config(1 << 20, 0)?;
    ensure!(cfg.block().x == block, "occupancy config");
    let g = m.function("dyn_shared_reverse")?.attributes()?;
    ensure!(g.static_shared_bytes == 0, "{g:?}");
    eprintln!("vector_add: {a:?}; {blocks} blocks/SM of 256; best block {block}");
    Ok(())
}

fn dynamic_shared() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let m = load_cuda(&ctx, TEST_KERNELS)?;
    // SAFETY: matches dyn_shared_reverse(const float*, float*, unsigned).
    let k = unsafe {
        m.kernel::<(&DeviceSlice<f32>, &mut DeviceSlice<f32>, u32)>("dyn_shared_reverse")?
    };
    let n = 1024u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let dx = s.clone_htod(&x)?;
    let mut dy = s.alloc_zeros::<f32>(n as usize)?;
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    unsafe {
        k.launch(
            &s,
            &LaunchConfig::new(1, n).with_shared_mem(n * 4),
            &dx,
            &mut dy,
            n,
        )
    }?;
    let y = s.clone_dtoh(&dy)?;
    ensure!(y.iter().rev().copied().eq(x.iter().copied()), "reverse");
    // Above 48 KiB needs the opt-in.
    let big = 64 << 10;
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    let e = unsafe {
        k.launch(
            &s,
            &LaunchConfig::new(1, n).with_shared_mem(big),
            &dx,
            &mut dy,
            n,
        )
    };
    ensure!(
        matches!(e, Err(Error::LaunchConfig { .. })),
        "64 KiB accepted without opt-in"
    );
    if ctx.limits().max_shared_per_block_optin >= big {
        k.function().set_max_dynamic_shared_mem(big)?;
        // SAFETY: the test kernel guards its index with the length it is passed, which does not
        // exceed any buffer argument's length here.
        unsafe {
            k.launch(
                &s,
                &LaunchConfig::new(1, n).with_shared_mem(big),
                &dx,
                &mut dy,
                n,
            )
        }?;
        s.synchronize()?;
    }
    ensure!(
        k.function().set_max_dynamic_shared_mem(u32::MAX).is_err(),
        "huge opt-in accepted"
    );
    Ok(())
}

fn globals() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let m = load_cuda(&ctx, TEST_KERNELS)?;
    let factor = m.global::<f32>("scale_factor")?;
    let counters = m.global::<[i32; 4]>("counters")?;
    factor.write(&s, &2.5)?;
    counters.write(&s, &[0; 4])?;
    ensure!(factor.read(&s)? == 2.5, "read back");
    // SAFETY: matches scale_by_global(float*, unsigned).
    let k = unsafe { m.kernel::<(&mut DeviceSlice<f32>, u32)>("scale_by_global")? };
    let mut x = s.clone_htod(&[1.0f32, 2.0, 4.0])?;
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    unsafe { k.launch(&s, &LaunchConfig::new(1, 32), &mut x, 3) }?;
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    unsafe { k.launch(&s, &LaunchConfig::new(1, 32), &mut x, 3) }?;
    ensure!(s.clone_dtoh(&x)? == [6.25, 12.5, 25.0], "scaled by global");
    ensure!(counters.read(&s)?[0] == 2, "counter written by kernel");
    ensure!(
        matches!(m.global::<f64>("scale_factor"), Err(Error::Global { .. })),
        "size check"
    );
    ensure!(
        matches!(m.global::<f32>("nope"), Err(Error::Global { .. })),
        "missing global"
    );
    Ok(())
}

fn cubin() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let cc = ctx.limits().compute_capability;
    let opts = CompileOptions {
        arch: Some(format!("sm_{}{}", cc.major, cc.minor)),
        ..Default::default()
    };
    let bin = nvrtc::compile_cubin("t.cu", TEST_KERNELS, &opts)?;
    let m = ctx.load_module(ModuleImage::Cubin(&bin), &JitOptions::default())?;
    ensure!(
        m.entries().iter().any(|e| e == "vector_add"),
        "entries from driver: {:?}",
        m.entries()
    );
    // SAFETY: matches vector_add.
    let k: VecAdd = unsafe { m.kernel("vector_add")? };
    let a = s.clone_htod(&[1.0f32; 5])?;
    let mut c = s.alloc_zeros::<f32>(5)?;
    // SAFETY: the test kernel guards its index with the length it is passed, which does not
    // exceed any buffer argument's length here.
    unsafe { k.launch(&s, &LaunchConfig::new(1, 32), &a, &a, &mut c, 5) }?;
    ensure!(s.clone_dtoh(&c)? == [2.0; 5], "cubin kernel");
    Ok(())
}

fn block_ids_kernel(
    ctx: &cuda_stack_driver::Context,
) -> Result<cuda_stack_driver::Kernel<(&'static mut DeviceSlice<u32>,)>, Box<dyn std::error::Error>>
{
    let m = load_cuda(ctx, TEST_KERNELS)?;
    // SAFETY: matches block_ids(unsigned*), which writes out[blockIdx.x].
    Ok(unsafe { m.kernel("block_ids")? })
}

fn cluster_launch() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let k = block_ids_kernel(&ctx)?;
    let mut out = s.alloc_zeros::<u32>(16)?;
    let cfg = LaunchConfig::new(16, 64).with_cluster(2);
    // SAFETY: block_ids writes out[blockIdx.x] only: 16 blocks, 16 elements.
    let r = unsafe { k.launch(&s, &cfg, &mut out) };
    if ctx.limits().compute_capability.major < 9 {
        ensure!(
            matches!(r, Err(Error::LaunchConfig { .. })),
            "cluster on pre-Hopper accepted"
        );
        return Ok(());
    }
    r?;
    ensure!(
        s.clone_dtoh(&out)? == (1..=16).collect::<Vec<u32>>(),
        "cluster launch output"
    );
    // Occupancy of clusters: a configuration without one is refused; larger clusters of the same
    // blocks fit no more often than smaller ones, and at least once.
    let f = k.function();
    ensure!(
        matches!(
            f.max_active_clusters(&LaunchConfig::new(16, 64)),
            Err(Error::LaunchConfig { .. })
        ),
        "max_active_clusters without a cluster"
    );
    let n2 = f.max_active_clusters(&LaunchConfig::new(16, 64).with_cluster(2))?;
    let n8 = f.max_active_clusters(&LaunchConfig::new(16, 64).with_cluster(8))?;
    ensure!(n8 >= 1 && n8 <= n2, "clusters of 2: {n2}, of 8: {n8}");
    ensure!(
        matches!(
            f.max_active_clusters(&LaunchConfig::new(16, 64).with_cluster(16)),
            Err(Error::LaunchConfig { .. })
        ),
        "a cluster over the portable 8"
    );
    println!("resident clusters of 64-thread blocks: {n2} of 2, {n8} of 8");
    Ok(())
}

/// A writer and a checker chained with programmatic dependencies (each waits for the kernel
/// before it with `griddepcontrol.wait` before touching the buffer; the writer lets its dependent
/// launch at once and then stalls): every round sees the value the round's writer stored. The
/// checkers' first instructions are timed against the writers' last to show the overlap the
/// attribute gives (printed, not asserted: the scheduler owes none). Refused before sm_90.
fn programmatic_dependent_launch() -> TestResult {
    const SRC: &str = r#"
extern "C" __global__ void pdl_write(unsigned* buf, unsigned n, unsigned value,
                                     long long cycles, unsigned long long* times) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (threadIdx.x == 0) { long long t0 = clock64(); while (clock64() - t0 < cycles) { } }
    __syncthreads();
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        buf[i] = value;
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (threadIdx.x == 0) atomicMax(times, t);
}
extern "C" __global__ void pdl_check(const unsigned* buf, unsigned n, unsigned value,
                                     unsigned* wrong, unsigned long long* times) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (threadIdx.x == 0) atomicMin(times + 1, t);
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (buf[i] != value) atomicAdd(wrong, 1u);
}
"#;
    type Write = cuda_stack_driver::Kernel<(
        &'static mut DeviceSlice<u32>,
        u32,
        u32,
        i64,
        &'static mut DeviceSlice<u64>,
    )>;
    type Check = cuda_stack_driver::Kernel<(
        &'static DeviceSlice<u32>,
        u32,
        u32,
        &'static mut DeviceSlice<u32>,
        &'static mut DeviceSlice<u64>,
    )>;
    let ctx = context()?;
    let s = ctx.new_stream()?;
    if ctx.limits().compute_capability.major < 9 {
        let k = block_ids_kernel(&ctx)?;
        let mut out = s.alloc_zeros::<u32>(4)?;
        let cfg = LaunchConfig::new(4, 32).with_programmatic_dependency();
        // SAFETY: refused before launch (block_ids writes out[blockIdx.x]: 4 blocks, 4 elements).
        let r = unsafe { k.launch(&s, &cfg, &mut out) };
        ensure!(
            matches!(r, Err(Error::LaunchConfig { .. })),
            "programmatic dependency before sm_90 accepted"
        );
        return Ok(());
    }
    let m = load_cuda(&ctx, SRC)?;
    // SAFETY: the signatures match the declarations above.
    let (write, check): (Write, Check) =
        unsafe { (m.kernel("pdl_write")?, m.kernel("pdl_check")?) };
    let n = 1 << 20;
    let mut buf = s.alloc_zeros::<u32>(n)?;
    let mut wrong = s.alloc_zeros::<u32>(1)?;
    let cfg = LaunchConfig::new(264, 256).with_programmatic_dependency();
    let mut overlapped = 0;
    let rounds = 20;
    for r in 0..rounds {
        let mut times = s.clone_htod(&[0u64, u64::MAX])?;
        let v = 1000 + r as u32;
        // SAFETY: both kernels stay below n in grid-stride loops over buffers of n elements,
        // touch one `wrong` counter and two `times` words, and run griddepcontrol.wait before
        // any access to `buf` (the writer also before its own timing words).
        unsafe {
            write.launch(&s, &cfg, &mut buf, n as u32, v, 200_000, &mut times)?;
            check.launch(&s, &cfg, &buf, n as u32, v, &mut wrong, &mut times)?;
        }
        let t = s.clone_dtoh(&times)?;
        if t[1] < t[0] {
            overlapped += 1;
        }
    }
    let bad = s.clone_dtoh(&wrong)?[0];
    ensure!(bad == 0, "{bad} elements read before their writer finished");
    println!(
        "programmatic dependent launch: {overlapped} of {rounds} checkers started before their writer finished"
    );
    Ok(())
}

fn cooperative_launch() -> TestResult {
    let ctx = context()?;
    let s = ctx.new_stream()?;
    let k = block_ids_kernel(&ctx)?;
    let mut out = s.alloc_zeros::<u32>(8)?;
    // SAFETY: block_ids writes out[blockIdx.x] only: 8 blocks, 8 elements.
    unsafe { k.launch(&s, &LaunchConfig::new(8, 64).cooperative(), &mut out) }?;
    ensure!(
        s.clone_dtoh(&out)? == (1..=8).collect::<Vec<u32>>(),
        "cooperative launch output"
    );
    Ok(())
}
