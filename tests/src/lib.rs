//! The GPU-aware test harness shared by the workspace's integration tests.
//!
//! Test binaries in this crate use `harness = false` and [`libtest_mimic`]: each GPU test is a
//! [`gpu`] trial, which is reported as **ignored** when no usable GPU is found (no driver, `cuInit`
//! fails, or no device), and runs otherwise. `cargo test --workspace` therefore passes on a machine
//! without a GPU and runs everything on one. [`cpu`] trials always run; [`needs_nvrtc`] trials run
//! wherever NVRTC can be loaded (it needs no GPU). [`needs_cublas`] and [`needs_nccl`] trials run
//! where cuBLAS (and cuBLASLt) or NCCL load, GPU or not; [`gpu_cublas`] trials need both a GPU and
//! cuBLAS, [`gpu_nccl`] a GPU and NCCL; [`gpu2`] and [`gpu2_nccl`] trials need two GPUs and are
//! reported as ignored (with a note saying so) on a machine with one.

use libtest_mimic::{Arguments, Failed, Trial};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// What a test body returns: any error fails the test with its message.
pub type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Why there is no usable GPU here, or `None` when there is one.
pub fn no_gpu_reason() -> Option<&'static str> {
    static REASON: OnceLock<Option<String>> = OnceLock::new();
    REASON
        .get_or_init(|| {
            let drv = match cuda_stack_sys::Driver::get() {
                Ok(d) => d,
                Err(e) => {
                    return Some(format!(
                        "no CUDA driver: {}",
                        e.to_string().lines().next().unwrap_or("")
                    ))
                }
            };
            let mut count = 0;
            // SAFETY: plain init and an int out-pointer.
            let r = unsafe { drv.cuInit(0).and_then(|_| drv.cuDeviceGetCount(&mut count)) };
            match r {
                Err(e) => Some(format!("CUDA driver present but unusable: {e}")),
                Ok(()) if count == 0 => Some("CUDA driver present but no device".into()),
                Ok(()) => None,
            }
        })
        .as_deref()
}

/// Why NVRTC cannot be used here, or `None` when it can.
pub fn no_nvrtc_reason() -> Option<String> {
    cuda_stack_sys::Nvrtc::get().err().map(|e| e.to_string())
}

/// Why cuBLAS or cuBLASLt cannot be used here, or `None` when both load.
pub fn no_cublas_reason() -> Option<String> {
    let first_line =
        |e: cuda_stack_sys::LoadError| e.to_string().lines().next().unwrap_or("").to_string();
    match (
        cuda_stack_sys::Cublas::get(),
        cuda_stack_sys::CublasLt::get(),
    ) {
        (Err(e), _) | (_, Err(e)) => Some(first_line(e)),
        (Ok(_), Ok(_)) => None,
    }
}

/// Why NCCL cannot be used here, or `None` when it loads.
pub fn no_nccl_reason() -> Option<String> {
    cuda_stack_sys::Nccl::get()
        .err()
        .map(|e| e.to_string().lines().next().unwrap_or("").to_string())
}

// Which optional libraries this binary's trials need: only those are loaded (to decide) and noted.
static USES_CUBLAS: AtomicBool = AtomicBool::new(false);
static USES_NCCL: AtomicBool = AtomicBool::new(false);
static USES_TWO_GPUS: AtomicBool = AtomicBool::new(false);

fn trial(name: &str, f: fn() -> TestResult) -> Trial {
    Trial::test(name, move || f().map_err(|e| Failed::from(e.to_string())))
}

/// A test that needs no GPU.
pub fn cpu(name: &str, f: fn() -> TestResult) -> Trial {
    trial(name, f)
}

/// A test that needs a GPU: ignored when [`no_gpu_reason`] has one.
pub fn gpu(name: &str, f: fn() -> TestResult) -> Trial {
    trial(name, f).with_ignored_flag(no_gpu_reason().is_some())
}

/// A test that needs NVRTC (but no GPU): ignored when NVRTC cannot be loaded.
pub fn needs_nvrtc(name: &str, f: fn() -> TestResult) -> Trial {
    trial(name, f).with_ignored_flag(no_nvrtc_reason().is_some())
}

/// A test that needs cuBLAS and cuBLASLt (but no GPU): ignored when either cannot be loaded.
pub fn needs_cublas(name: &str, f: fn() -> TestResult) -> Trial {
    USES_CUBLAS.store(true, Ordering::Relaxed);
    trial(name, f).with_ignored_flag(no_cublas_reason().is_some())
}

/// A test that needs a GPU and cuBLAS (with cuBLASLt): ignored when either is missing.
pub fn gpu_cublas(name: &str, f: fn() -> TestResult) -> Trial {
    USES_CUBLAS.store(true, Ordering::Relaxed);
    trial(name, f).with_ignored_flag(no_gpu_reason().is_some() || no_cublas_reason().is_some())
}

/// A test that needs NCCL (but no GPU): ignored when NCCL cannot be loaded.
pub fn needs_nccl(name: &str, f: fn() -> TestResult) -> Trial {
    USES_NCCL.store(true, Ordering::Relaxed);
    trial(name, f).with_ignored_flag(no_nccl_reason().is_some())
}

/// Runs the trials with the standard test-binary command line, printing first why GPU (or NVRTC,
/// cuBLAS, NCCL) tests are ignored, if they are. Exits the process with libtest's exit code.
pub fn run(trials: Vec<Trial>) -> ! {
    let args = Arguments::from_args();
    if let Some(why) = no_gpu_reason() {
        eprintln!("note: GPU tests are ignored: {why}");
    }
    if let Some(why) = no_nvrtc_reason() {
        eprintln!(
            "note: NVRTC tests are ignored: {}",
            why.lines().next().unwrap_or("")
        );
    }
    if USES_CUBLAS.load(Ordering::Relaxed) {
        if let Some(why) = no_cublas_reason() {
            eprintln!("note: cuBLAS tests are ignored: {why}");
        }
    }
    if USES_NCCL.load(Ordering::Relaxed) {
        if let Some(why) = no_nccl_reason() {
            eprintln!("note: NCCL tests are ignored: {why}");
        }
    }
    if USES_TWO_GPUS.load(Ordering::Relaxed) && no_gpu_reason().is_none() && gpu_count() < 2 {
        eprintln!(
            "note: two-GPU tests are ignored: this machine has {} GPU (they need at least 2)",
            gpu_count()
        );
    }
    libtest_mimic::run(&args, trials).exit()
}

/// Fails the test with `msg` unless `cond` holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+).into());
        }
    };
}

/// Seed 000's vector-add kernel, as CUDA C (with `extern "C"` so its PTX name is unmangled).
pub const VECTOR_ADD_SRC: &str = r#"
extern "C" __global__ void vector_add(float *A, float *B, float *C, int N) {
    // Calculate thread index
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    // Bounds checking
    if (idx < N) {
        C[idx] = A[idx] + B[idx];
    }
}
"#;

/// Compiles CUDA C to PTX with the raw NVRTC calls, returning the compile log on failure.
/// (The safe NVRTC wrapper lives in `cuda-stack-driver`; this is the raw layer on purpose.)
pub fn nvrtc_compile_raw(
    src: &str,
    options: &[&str],
) -> Result<String, Box<dyn std::error::Error>> {
    use std::ffi::{c_char, CString};
    let nvrtc = cuda_stack_sys::Nvrtc::get()?;
    let src = CString::new(src)?;
    let opts: Vec<CString> = options
        .iter()
        .map(|o| CString::new(*o))
        .collect::<Result<_, _>>()?;
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    let mut prog: cuda_stack_sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: all strings are NUL-terminated and outlive the calls; `prog` is destroyed below on
    // every path after it is created.
    unsafe {
        nvrtc.nvrtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            c"test.cu".as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )?;
        let compiled = nvrtc.nvrtcCompileProgram(prog, opt_ptrs.len() as i32, opt_ptrs.as_ptr());
        let result = match compiled {
            Err(e) => {
                let mut n = 0usize;
                let mut log = Vec::new();
                if nvrtc.nvrtcGetProgramLogSize(prog, &mut n).is_ok() {
                    log = vec![0u8; n];
                    let _ = nvrtc.nvrtcGetProgramLog(prog, log.as_mut_ptr().cast());
                }
                Err(format!(
                    "{e}\n{}",
                    String::from_utf8_lossy(&log).trim_end_matches('\0')
                )
                .into())
            }
            Ok(()) => {
                let mut n = 0usize;
                nvrtc.nvrtcGetPTXSize(prog, &mut n)?;
                let mut ptx = vec![0u8; n];
                nvrtc.nvrtcGetPTX(prog, ptx.as_mut_ptr().cast())?;
                ptx.pop(); // the NUL terminator
                Ok(String::from_utf8(ptx)?)
            }
        };
        nvrtc.nvrtcDestroyProgram(&mut prog)?;
        result
    }
}

/// The process's context on device 0 (created once).
pub fn context() -> Result<cuda_stack_driver::Context, Box<dyn std::error::Error>> {
    static CTX: OnceLock<Result<cuda_stack_driver::Context, String>> = OnceLock::new();
    CTX.get_or_init(|| cuda_stack_driver::Context::new(0).map_err(|e| e.to_string()))
        .clone()
        .map_err(Into::into)
}

/// Compiles CUDA C for the context's device with NVRTC and loads it.
pub fn load_cuda(
    ctx: &cuda_stack_driver::Context,
    src: &str,
) -> Result<cuda_stack_driver::Module, Box<dyn std::error::Error>> {
    let opts = cuda_stack_driver::nvrtc::CompileOptions::for_context(ctx);
    let ptx = cuda_stack_driver::nvrtc::compile_ptx_cached("test.cu", src, &opts)?;
    Ok(ctx.load_ptx(&ptx)?)
}

/// Test kernels used across the driver tests.
pub const TEST_KERNELS: &str = r#"
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void axpy(float a, const float* x, float* y, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
// Spins for `cycles` clock cycles in thread 0 of each block, then writes `value` everywhere:
// queued work that takes a while, to test ordering and frees under load.
extern "C" __global__ void slow_fill(float* out, float value, unsigned n, long long cycles) {
    if (threadIdx.x == 0) {
        long long start = clock64();
        while (clock64() - start < cycles) { }
    }
    __syncthreads();
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = value;
}
extern "C" __global__ void copy_scaled(const float* in, float* out, float s, unsigned n) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = in[i] * s;
}
__device__ float scale_factor;
__device__ int counters[4];
extern "C" __global__ void scale_by_global(float* x, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= scale_factor;
    if (i == 0) counters[0] += 1;
}
extern "C" __global__ void dyn_shared_reverse(const float* in, float* out, unsigned n) {
    extern __shared__ float tile[];
    unsigned t = threadIdx.x;
    if (t < n) tile[t] = in[t];
    __syncthreads();
    if (t < n) out[t] = tile[n - 1 - t];
}
extern "C" __global__ void block_ids(unsigned* out) {
    if (threadIdx.x == 0) out[blockIdx.x] = blockIdx.x + 1;
}
extern "C" __global__ void empty_kernel() {}
"#;

/// How many GPUs the driver sees (0 without a usable driver).
pub fn gpu_count() -> usize {
    if no_gpu_reason().is_some() {
        return 0;
    }
    cuda_stack_driver::Device::count().unwrap_or(0)
}

/// A test that needs two GPUs: ignored where there are fewer.
pub fn gpu2(name: &str, f: fn() -> TestResult) -> Trial {
    USES_TWO_GPUS.store(true, Ordering::Relaxed);
    trial(name, f).with_ignored_flag(gpu_count() < 2)
}

/// A test that needs a GPU and NCCL: ignored when either is missing.
pub fn gpu_nccl(name: &str, f: fn() -> TestResult) -> Trial {
    USES_NCCL.store(true, Ordering::Relaxed);
    trial(name, f).with_ignored_flag(no_gpu_reason().is_some() || no_nccl_reason().is_some())
}

/// A test that needs two GPUs and NCCL: ignored where there are fewer GPUs or no NCCL.
pub fn gpu2_nccl(name: &str, f: fn() -> TestResult) -> Trial {
    USES_NCCL.store(true, Ordering::Relaxed);
    USES_TWO_GPUS.store(true, Ordering::Relaxed);
    trial(name, f).with_ignored_flag(gpu_count() < 2 || no_nccl_reason().is_some())
}

/// `axpy(float a, const float* x, float* y, unsigned n)` of [`TEST_KERNELS`].
pub type Axpy = cuda_stack_driver::Kernel<(
    f32,
    &'static cuda_stack_driver::DeviceSlice<f32>,
    &'static mut cuda_stack_driver::DeviceSlice<f32>,
    u32,
)>;

/// `slow_fill(float* out, float value, unsigned n, long long cycles)` of [`TEST_KERNELS`].
pub type SlowFill = cuda_stack_driver::Kernel<(
    &'static mut cuda_stack_driver::DeviceSlice<f32>,
    f32,
    u32,
    i64,
)>;

/// The typed `axpy` of a module loaded from [`TEST_KERNELS`].
pub fn axpy_kernel(m: &cuda_stack_driver::Module) -> cuda_stack_driver::Result<Axpy> {
    // SAFETY: matches axpy(float, const float*, float*, unsigned) in TEST_KERNELS.
    unsafe { m.kernel("axpy") }
}

/// The typed `slow_fill` of a module loaded from [`TEST_KERNELS`].
pub fn slow_fill_kernel(m: &cuda_stack_driver::Module) -> cuda_stack_driver::Result<SlowFill> {
    // SAFETY: matches slow_fill(float*, float, unsigned, long long) in TEST_KERNELS.
    unsafe { m.kernel("slow_fill") }
}

/// About 50 ms of spinning on an H100/H200 clock (for [`fill_slowly`]).
pub const SLOW_CYCLES: i64 = 80_000_000;

/// Queues `slow_fill` over all of `y` (it spins about 50 ms, then writes `v` everywhere): work
/// that is still running when the host queues the next thing, to test ordering.
pub fn fill_slowly(
    k: &SlowFill,
    s: &cuda_stack_driver::Stream,
    y: &mut cuda_stack_driver::DeviceSlice<f32>,
    v: f32,
) -> cuda_stack_driver::Result<()> {
    let n = y.len();
    // SAFETY: grid-stride loop over i < n = y.len().
    unsafe {
        k.launch(
            s,
            &cuda_stack_driver::LaunchConfig::new(4, 128),
            y,
            v,
            n as u32,
            SLOW_CYCLES,
        )
    }
}

/// The environment variable that makes a test binary run one child scenario instead of its
/// trials (see [`run_in_child`]).
const CHILD_VAR: &str = "CUDA_TESTS_CHILD_SCENARIO";

/// A scenario that must run in a process of its own (it leaves process-wide state behind on
/// purpose, e.g. a leaked graph capture, or measures the whole process's memory).
pub type ChildScenario = (&'static str, fn() -> TestResult);

/// Call first in `main`: when this process was started by [`run_in_child`], runs the named
/// scenario and exits (status 0 when it returned `Ok`, 1 with the error on stderr otherwise).
pub fn child_scenarios(scenarios: &[ChildScenario]) {
    let Ok(name) = std::env::var(CHILD_VAR) else {
        return;
    };
    let code = match scenarios.iter().find(|(n, _)| *n == name) {
        None => {
            eprintln!("child scenario {name:?} is not defined in this binary");
            2
        }
        Some((_, f)) => match f() {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("child scenario {name} failed: {e}");
                1
            }
        },
    };
    std::process::exit(code);
}

/// Runs `scenario` (listed in this binary's [`child_scenarios`]) in a new process of this test
/// binary and waits at most `limit`: fails if it fails, and if it has not exited by then (a
/// hang), after killing it.
pub fn run_in_child(scenario: &str, limit: std::time::Duration) -> TestResult {
    run_in_child_with_env(scenario, limit, &[])
}

/// [`run_in_child`] with extra environment variables set in the child (e.g.
/// `CUDA_CACHE_DISABLE=1` for a cold start).
pub fn run_in_child_with_env(
    scenario: &str,
    limit: std::time::Duration,
    env: &[(&str, &str)],
) -> TestResult {
    let exe = std::env::current_exe()?;
    let mut child = std::process::Command::new(exe)
        .env(CHILD_VAR, scenario)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    // Read stderr on a thread of its own, so a chatty child never blocks on a full pipe.
    let stderr = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
            s
        })
    });
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            let err = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
            return if status.success() {
                Ok(())
            } else {
                Err(format!("child scenario {scenario} exited with {status}: {err}").into())
            };
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "child scenario {scenario} did not exit within {} s (a hang)",
                limit.as_secs()
            )
            .into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A test that needs two GPUs and cuBLAS: ignored where either is missing.
pub fn gpu2_cublas(name: &str, f: fn() -> TestResult) -> Trial {
    USES_CUBLAS.store(true, Ordering::Relaxed);
    USES_TWO_GPUS.store(true, Ordering::Relaxed);
    trial(name, f).with_ignored_flag(gpu_count() < 2 || no_cublas_reason().is_some())
}
