//! A fault at every driver call site, like SQLite's out-of-memory and I/O-error loops.
//!
//! For each realistic scenario, the driver (and NVRTC) calls it makes are recorded through the
//! trace hook; then the scenario is run once for **every** (entry point, n-th call) in that trace
//! with exactly that call failing (`cuda_stack_sys::fault`, feature `fault-injection`). Every run must:
//! - not panic (a panic is caught and fails the campaign) and not abort;
//! - end in a typed error whose message names the failed call, or, where the failure happened
//!   in a `Drop`, report it through the context's drop errors; a failure the layer absorbs on
//!   purpose (a fallback took over) is counted and listed;
//! - leave nothing behind once everything is dropped: every create/alloc/retain in the run's
//!   trace is balanced by its destroy/free/release and device memory is back at its baseline,
//!   unless the injected call was that release: a failed release is never repeated (the driver
//!   may have done it and returned an earlier asynchronous error), so the resource is leaked on
//!   purpose rather than risk a double free; and the context still runs work.
//!
//! The campaign runs its scenarios one after another in one test (the memory baseline is
//! device-wide) and prints its totals.

use cuda_stack_driver::cuda_stack_sys::{fault, trace, CUresult};
use cuda_stack_driver::{Context, DeviceBuffer, LaunchConfig, PinnedBuffer};
use cuda_stack_runtime::Tensor;
use cuda_tests::{context, gpu, TestResult};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

fn main() {
    cuda_tests::run(vec![gpu("fault_at_every_call_site", campaign)]);
}

type Scenario = fn(&Context) -> Result<(), String>;

const SCENARIOS: &[(&str, Scenario)] = &[
    ("alloc_copy_launch_free", alloc_copy_launch_free),
    ("module_load_typed_kernel", module_load_typed_kernel),
    ("pinned_async_copies", pinned_async_copies),
    ("cross_stream_use", cross_stream_use),
    ("graph_capture_replay", graph_capture_replay),
    ("tensor_ops_caching_allocator", tensor_ops),
    ("staged_pageable_copies", staged_pageable_copies),
    ("nvrtc_compile_and_load", nvrtc_compile_and_load),
];

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn kernels(ctx: &Context) -> Result<Arc<cuda_stack_kernels::Kernels>, String> {
    cuda_stack_kernels::Kernels::get(ctx).map_err(err)
}

fn alloc_copy_launch_free(ctx: &Context) -> Result<(), String> {
    let s = ctx.new_stream().map_err(err)?;
    let k = kernels(ctx)?;
    let a = s.clone_htod(&[1.0f32; 1000]).map_err(err)?;
    let b = s.clone_htod(&[2.0f32; 1000]).map_err(err)?;
    let mut c = s.alloc_zeros::<f32>(1000).map_err(err)?;
    cuda_stack_kernels::ops::binary(
        &k,
        &s,
        cuda_stack_kernels::ops::BinaryOp::Add,
        &a,
        &b,
        &mut c,
    )
    .map_err(err)?;
    let mut d: DeviceBuffer<f32> = s.clone_dtod(&c).map_err(err)?;
    s.memset_zeros(&mut d).map_err(err)?;
    let v = s.clone_dtoh(&c).map_err(err)?;
    if v.iter().any(|&x| x != 3.0) {
        return Err("wrong result".into());
    }
    c.free().map_err(err)?;
    Ok(())
}

type Add = cuda_stack_driver::Kernel<(
    &'static cuda_stack_driver::DeviceSlice<f32>,
    &'static cuda_stack_driver::DeviceSlice<f32>,
    &'static mut cuda_stack_driver::DeviceSlice<f32>,
    u64,
)>;

fn module_load_typed_kernel(ctx: &Context) -> Result<(), String> {
    let ptx = cuda_stack_kernels::PTX_FILES
        .iter()
        .find(|f| f.name == "elementwise")
        .ok_or("no elementwise PTX")?
        .targets[0]
        .ptx;
    let m = ctx.load_ptx(ptx).map_err(err)?;
    let s = ctx.new_stream().map_err(err)?;
    // SAFETY: matches `add_f32(const float*, const float*, float*, unsigned long long)`.
    let add: Add = unsafe { m.kernel("add_f32").map_err(err)? };
    let x = s.clone_htod(&[1.0f32; 64]).map_err(err)?;
    let mut y = s.alloc_zeros::<f32>(64).map_err(err)?;
    // SAFETY: add_f32 touches elements i < n = 64 of each buffer, all of which have 64.
    unsafe { add.launch(&s, &LaunchConfig::for_num_elems(64), &x, &x, &mut y, 64) }.map_err(err)?;
    let attrs = add.function().attributes().map_err(err)?;
    if attrs.max_threads_per_block == 0 {
        return Err("attributes".into());
    }
    if s.clone_dtoh(&y).map_err(err)?.iter().any(|&v| v != 2.0) {
        return Err("wrong result".into());
    }
    Ok(())
}

fn pinned_async_copies(ctx: &Context) -> Result<(), String> {
    let s = ctx.new_stream().map_err(err)?;
    let src = PinnedBuffer::from_slice(ctx, &[5.0f32; 4096]).map_err(err)?;
    let mut dst = PinnedBuffer::<f32>::zeroed(ctx, 4096).map_err(err)?;
    let mut dev = s.alloc_zeros::<f32>(4096).map_err(err)?;
    s.copy_htod_async(&src, &mut dev)
        .map_err(err)?
        .wait()
        .map_err(err)?;
    s.copy_dtoh_async(&dev, &mut dst)
        .map_err(err)?
        .wait()
        .map_err(err)?;
    let reg = cuda_stack_driver::HostRegistration::new(ctx, vec![0f32; 4096]).map_err(err)?;
    s.copy_htod_async(&reg, &mut dev)
        .map_err(err)?
        .wait()
        .map_err(err)?;
    let back = reg.into_inner().map_err(err)?;
    if dst.iter().any(|&v| v != 5.0) || back.len() != 4096 {
        return Err("wrong result".into());
    }
    Ok(())
}

fn cross_stream_use(ctx: &Context) -> Result<(), String> {
    let a = ctx.new_stream().map_err(err)?;
    let b = ctx.new_stream().map_err(err)?;
    let x = a.clone_htod(&[1.0f32; 256]).map_err(err)?;
    let mut y = a.alloc_zeros::<f32>(256).map_err(err)?;
    b.memcpy_dtod(&x, &mut y).map_err(err)?; // foreign use: events both ways
    let e = b.record_event().map_err(err)?;
    a.wait_event(&e).map_err(err)?;
    let v = a.clone_dtoh(&y).map_err(err)?;
    drop(y); // freed on `a` after `b`'s use
    if v.iter().any(|&v| v != 1.0) {
        return Err("wrong result".into());
    }
    Ok(())
}

fn graph_capture_replay(ctx: &Context) -> Result<(), String> {
    let s = ctx.new_stream().map_err(err)?;
    let k = kernels(ctx)?;
    let x = s.clone_htod(&[1.0f32; 512]).map_err(err)?;
    let mut y = s.alloc_zeros::<f32>(512).map_err(err)?;
    let g = ctx
        .capture(|cs| {
            cuda_stack_kernels::ops::axpy(&k, cs, 2.0, &x, &mut y).map_err(|e| {
                cuda_stack_driver::Error::Unsupported {
                    what: "axpy in capture",
                    why: e.to_string(),
                }
            })
        })
        .map_err(err)?;
    let exec = g.instantiate().map_err(err)?;
    exec.launch(&s).map_err(err)?;
    exec.launch(&s).map_err(err)?;
    let v = s.clone_dtoh(&y).map_err(err)?;
    if v.iter().any(|&v| v != 4.0) {
        return Err(format!("wrong result {}", v[0]));
    }
    Ok(())
}

fn tensor_ops(_ctx: &Context) -> Result<(), String> {
    let a = Tensor::<f32>::from_slice(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).map_err(err)?;
    let b = Tensor::<f32>::ones(&[3, 2]).map_err(err)?;
    let c = a.matmul(&b).map_err(err)?;
    let d = c.add(&c).map_err(err)?.relu().map_err(err)?;
    let s = d.sum_all().map_err(err)?.item().map_err(err)?;
    let t = a.transpose(0, 1).map_err(err)?.contiguous().map_err(err)?;
    if s != 84.0 || t.to_vec().map_err(err)? != [1.0, 4.0, 2.0, 5.0, 3.0, 6.0] {
        return Err(format!("wrong result {s}"));
    }
    Ok(())
}

fn staged_pageable_copies(_ctx: &Context) -> Result<(), String> {
    let n = 3 << 20; // 12 MiB of f32: several staging chunks
    let host: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let stream = cuda_stack_runtime::current_stream().map_err(err)?;
    let mut dev = cuda_stack_runtime::malloc_zeros::<f32>(n).map_err(err)?;
    cuda_stack_runtime::copy_htod_pageable(&stream, &host, &mut dev).map_err(err)?;
    let mut back = vec![0f32; n];
    cuda_stack_runtime::copy_dtoh_pageable(&stream, &dev, &mut back).map_err(err)?;
    if back != host {
        return Err("wrong result".into());
    }
    Ok(())
}

const SRC: &str = r#"extern "C" __global__ void twice(float* x, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }"#;

fn nvrtc_compile_and_load(ctx: &Context) -> Result<(), String> {
    if cuda_stack_driver::cuda_stack_sys::Nvrtc::get().is_err() {
        return Ok(()); // no NVRTC here: nothing to inject
    }
    let opts = cuda_stack_driver::nvrtc::CompileOptions::for_context(ctx);
    let ptx = cuda_stack_driver::nvrtc::compile_ptx("twice.cu", SRC, &opts).map_err(err)?;
    let m = ctx.load_ptx(&ptx).map_err(err)?;
    // SAFETY: matches twice(float*, unsigned).
    let k: cuda_stack_driver::Kernel<(&mut cuda_stack_driver::DeviceSlice<f32>, u32)> =
        unsafe { m.kernel("twice").map_err(err)? };
    let s = ctx.new_stream().map_err(err)?;
    let mut x = s.clone_htod(&[1.0f32; 100]).map_err(err)?;
    // SAFETY: the kernel touches x[i] for i < n = x.len() only.
    unsafe { k.launch(&s, &LaunchConfig::for_num_elems(100), &mut x, 100) }.map_err(err)?;
    if s.clone_dtoh(&x).map_err(err)?.iter().any(|&v| v != 2.0) {
        return Err("wrong result".into());
    }
    Ok(())
}

thread_local! {
    /// The calls this thread made while recording (the hook runs on the calling thread).
    static RECORD: RefCell<Option<Vec<(&'static str, u32)>>> = const { RefCell::new(None) };
}

fn install_hook() {
    trace::set_hook(Some(Arc::new(|ev: &trace::CallEvent| {
        RECORD.with(|r| {
            if let Some(v) = r.borrow_mut().as_mut() {
                v.push((ev.call, ev.status));
            }
        })
    })));
}

/// Runs `f` and returns the calls this thread made, with their statuses.
fn recorded<R>(f: impl FnOnce() -> R) -> (R, Vec<(&'static str, u32)>) {
    RECORD.with(|r| *r.borrow_mut() = Some(Vec::new()));
    let out = f();
    let calls = RECORD.with(|r| r.borrow_mut().take()).unwrap_or_default();
    (out, calls)
}

/// Resource pairs whose counts (successful calls) must balance in every run.
const PAIRS: &[(&[&str], &[&str])] = &[
    (
        &["cuMemAllocAsync", "cuMemAlloc_v2"],
        &["cuMemFreeAsync", "cuMemFree_v2"],
    ),
    (&["cuMemHostAlloc"], &["cuMemFreeHost"]),
    (&["cuMemHostRegister_v2"], &["cuMemHostUnregister"]),
    (
        &["cuStreamCreateWithPriority", "cuStreamCreate"],
        &["cuStreamDestroy_v2"],
    ),
    (&["cuEventCreate"], &["cuEventDestroy_v2"]),
    (&["cuGraphInstantiateWithFlags"], &["cuGraphExecDestroy"]),
    (&["cuStreamEndCapture"], &["cuGraphDestroy"]),
    (&["nvrtcCreateProgram"], &["nvrtcDestroyProgram"]),
];

/// Whether `call` releases a resource (its failure leaks the resource on purpose).
fn is_release(call: &str) -> bool {
    call == "cuModuleUnload" || PAIRS.iter().any(|(_, rel)| rel.contains(&call))
}

fn balance(calls: &[(&'static str, u32)], injected: &str) -> Vec<String> {
    let ok = |names: &[&str]| {
        calls
            .iter()
            .filter(|(c, st)| *st == 0 && names.contains(c))
            .count()
    };
    PAIRS
        .iter()
        .filter(|(_, rel)| !rel.contains(&injected))
        .filter(|(acq, rel)| ok(acq) != ok(rel))
        .map(|(acq, rel)| format!("{}: {} vs {}: {}", acq[0], ok(acq), rel[0], ok(rel)))
        .collect()
}

#[derive(Default)]
struct Totals {
    runs: usize,
    errors_naming_the_call: usize,
    reported_in_drop: usize,
    absorbed: BTreeMap<&'static str, usize>,
    absorbed_sites: Vec<String>,
    not_reached: usize,
}

fn campaign() -> TestResult {
    let ctx = context()?;
    install_hook();
    let mut totals = Totals::default();
    let mut problems = Vec::new();
    // Each call site fails once with each of these.
    let statuses = [
        CUresult::CUDA_ERROR_UNKNOWN.0,
        CUresult::CUDA_ERROR_OUT_OF_MEMORY.0,
        CUresult::CUDA_ERROR_INVALID_VALUE.0,
        CUresult::CUDA_ERROR_LAUNCH_FAILED.0,
    ];
    for (name, scenario) in SCENARIOS {
        // Warm up (loads kernels, fills caches, compiles), then record a clean run.
        scenario(&ctx).map_err(|e| format!("{name}: clean run failed: {e}"))?;
        settle(&ctx)?;
        let (clean, calls) = recorded(|| scenario(&ctx));
        recorded(empty_cache);
        clean.map_err(|e| format!("{name}: recorded run failed: {e}"))?;
        settle(&ctx)?;
        let mut baseline = device_used(&ctx)?;
        let mut nth: BTreeMap<&'static str, u32> = BTreeMap::new();
        let sites: Vec<(&'static str, u32)> = calls
            .iter()
            .map(|(c, _)| {
                let n = nth.entry(c).or_insert(0);
                *n += 1;
                (*c, *n)
            })
            .collect();
        let mut scenario_runs = 0;
        let runs: Vec<(&'static str, u32, u32)> = sites
            .iter()
            .flat_map(|&(c, n)| statuses.iter().map(move |&st| (c, n, st)))
            .collect();
        for (call, n, status) in runs {
            fault::clear();
            fault::inject(call, n, status);
            let (outcome, mut run_calls) = recorded(|| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| scenario(&ctx)))
            });
            fault::clear();
            // The runtime's cache keeps freed blocks: hand them back (recorded too), so
            // allocations and frees can be compared.
            run_calls.extend(recorded(empty_cache).1);
            let fired = run_calls.iter().any(|&(c, st)| c == call && st == status);
            totals.runs += 1;
            scenario_runs += 1;
            let site = format!("{name}: {call} #{n} (status {status})");
            let drop_errors: Vec<String> = ctx
                .take_drop_errors()
                .iter()
                .map(|e| e.to_string())
                .collect();
            match outcome {
                Err(_) => problems.push(format!("{site}: PANICKED")),
                // The run took another path before reaching that call (e.g. a warm cache):
                // nothing was injected.
                Ok(_) if !fired => totals.not_reached += 1,
                Ok(Err(e)) if e.contains(call) => totals.errors_naming_the_call += 1,
                Ok(Err(e)) => problems.push(format!("{site}: error does not name the call: {e}")),
                Ok(Ok(())) if drop_errors.iter().any(|d| d.contains(call)) => {
                    totals.reported_in_drop += 1
                }
                Ok(Ok(())) => {
                    *totals.absorbed.entry(call).or_insert(0) += 1;
                    totals.absorbed_sites.push(site.clone());
                }
            }
            for b in balance(&run_calls, call) {
                problems.push(format!("{site}: unbalanced {b}"));
            }
            if let Err(e) = settle(&ctx) {
                problems.push(format!("{site}: context unusable afterwards: {e}"));
                break;
            }
            let used = device_used(&ctx)?;
            if is_release(call) {
                // A failed release is never repeated (it may have taken effect): what it held is
                // leaked by design, so later runs are measured from here.
                baseline = baseline.max(used);
            } else if used > baseline + (2 << 20) {
                problems.push(format!(
                    "{site}: device memory {} MiB above baseline",
                    (used - baseline) >> 20
                ));
            }
        }
        println!(
            "fault campaign: {name}: {} calls recorded, {scenario_runs} runs",
            calls.len()
        );
        // The next scenario must run normally.
        scenario(&ctx).map_err(|e| format!("{name}: run after the campaign failed: {e}"))?;
    }
    trace::set_hook(None);
    println!(
        "fault campaign: {} scenarios, {} runs, {} injected faults: {} typed errors naming the call, {} reported from Drop, {} absorbed by a fallback {:?}, {} problems",
        SCENARIOS.len(),
        totals.runs,
        totals.runs - totals.not_reached,
        totals.errors_naming_the_call,
        totals.reported_in_drop,
        totals.absorbed.values().sum::<usize>(),
        totals.absorbed,
        problems.len()
    );
    for a in &totals.absorbed_sites {
        println!("fault campaign: absorbed: {a}");
    }
    if !problems.is_empty() {
        return Err(format!("{} problems:\n{}", problems.len(), problems.join("\n")).into());
    }
    Ok(())
}

fn empty_cache() {
    if let Err(e) = cuda_stack_runtime::empty_cache() {
        eprintln!("empty_cache failed: {e}");
    }
}

/// Waits for everything, lets the reaper and caches settle, and checks the context still runs.
fn settle(ctx: &Context) -> Result<(), String> {
    ctx.synchronize().map_err(err)?;
    cuda_stack_runtime::empty_cache().map_err(err)?;
    let s = ctx.new_stream().map_err(err)?;
    let b = s.clone_htod(&[7u32; 4]).map_err(err)?;
    if s.clone_dtoh(&b).map_err(err)? != [7; 4] {
        return Err("context no longer computes".into());
    }
    drop(b);
    ctx.synchronize().map_err(err)
}

fn device_used(ctx: &Context) -> Result<usize, String> {
    let (free, total) = ctx.mem_get_info().map_err(err)?;
    Ok(total - free)
}
