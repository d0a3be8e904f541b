//! `custom_kernel`: seed 000, "Custom CUDA Kernel Integration" — the `load_inline` example, made
//! runnable.
//!
//! PyTorch's `load_inline` compiles CUDA C++ from a string with nvcc and a host compiler, builds a
//! Python extension and imports it. The equivalent here needs no compiler on the machine: the
//! seed's `vector_add_kernel` source (a Rust string) is compiled at run time by NVRTC to PTX, the
//! driver JIT-compiles the PTX for this GPU (`cuModuleLoadData`), and a typed handle launches it
//! on 1000 elements, as in the seed. Each layer's step is timed (host clock for host work, CUDA
//! events for the kernel) and the driver/NVRTC calls it made are listed. The result is checked
//! element by element against the CPU (f32 addition is exact, so bit for bit).
//!
//! Run: `cargo run --release -p cuda-examples --bin custom_kernel [-- --quick] [--device N] [--json]`

use clap::Parser;
use cuda_examples::bench::median;
use cuda_examples::cli::Common;
use cuda_examples::exit::{self, ProgramResult};
use cuda_examples::say;
use cuda_examples::timing::GpuTimer;
use cuda_examples::trace_log::{print_calls, CallRecorder};
use cuda_examples::verify::same_bits;
use cuda_stack_driver::nvrtc::{self, CompileOptions};
use cuda_stack_driver::{Context, DeviceBuffer, DeviceSlice, Kernel, LaunchConfig, Stream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The seed's kernel, unchanged except for `extern "C"` (so the symbol is not C++-mangled and
/// can be looked up by name; `load_inline` gets the same effect from the pybind wrapper).
const CUDA_SOURCE: &str = r#"
extern "C" __global__ void vector_add_kernel(float* a, float* b, float* c, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        c[idx] = a[idx] + b[idx];
    }
}
"#;

/// The kernel's Rust signature: `a` and `b` are read, `c` is written, `n` is an `int`.
type VectorAdd = Kernel<(
    &'static DeviceSlice<f32>,
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    i32,
)>;

#[derive(Parser)]
#[command(about = "Seed 000's load_inline example: NVRTC-compile, load and launch a CUDA C kernel")]
struct Args {
    #[command(flatten)]
    common: Common,
    /// Elements (the seed uses 1000).
    #[arg(long, default_value_t = 1000)]
    n: usize,
}

fn main() -> ExitCode {
    exit::run("custom_kernel", || body(Args::parse()))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The seed's C++ wrapper `vector_add_cuda(a, b)`: `c = zeros_like(a)`, block 256,
/// `grid = ceil(n / 256)`, launch, return `c`.
fn vector_add_cuda(
    k: &VectorAdd,
    s: &Stream,
    a: &DeviceSlice<f32>,
    b: &DeviceSlice<f32>,
) -> Result<DeviceBuffer<f32>, Box<dyn std::error::Error>> {
    if a.len() != b.len() {
        return Err(format!("a has {} elements but b has {}", a.len(), b.len()).into());
    }
    let n = i32::try_from(a.len()).map_err(|_| "the seed's kernel takes an int n (< 2^31)")?;
    let mut c = s.alloc_zeros::<f32>(a.len())?;
    if n > 0 {
        let cfg = LaunchConfig::new(a.len().div_ceil(256) as u32, 256);
        // SAFETY: the seed's kernel guards idx < N, and N is the length of a, b and c (they
        // all have a.len() elements).
        unsafe { k.launch(s, &cfg, a, b, &mut c, n) }?;
    }
    Ok(c)
}

fn body(args: Args) -> ProgramResult {
    let q = args.common.json;
    let n = args.n;
    let rec = CallRecorder::start();
    // The driver/NVRTC calls made since the last step (printed unless --json).
    let show = |rec: &CallRecorder| {
        let calls = rec.take();
        if !q {
            print_calls("     ", &calls);
        }
    };

    // Layer 4/5: the driver and the device's primary context.
    let t = Instant::now();
    let ctx = Context::new(args.common.device)?;
    let t_ctx = t.elapsed();
    let dev = ctx.device();
    say!(
        q,
        "custom_kernel: seed 000's load_inline example on {} (device {})",
        dev.name()?,
        args.common.device
    );
    say!(
        q,
        "\n1. driver + primary context (Context::new): {:.2} ms",
        ms(t_ctx)
    );
    show(&rec);

    // NVRTC: CUDA C source -> PTX (what nvcc does for load_inline, in-process).
    let t = Instant::now();
    let nv = cuda_stack_driver::cuda_stack_sys::Nvrtc::get()?;
    let t_nvrtc_load = t.elapsed();
    let opts = CompileOptions::for_context(&ctx);
    let t = Instant::now();
    let ptx = nvrtc::compile_ptx("vector_add.cu", CUDA_SOURCE, &opts)?;
    let t_compile = t.elapsed();
    say!(
        q,
        "\n2. NVRTC {} (library load {:.2} ms): {} lines of CUDA C, options {:?}\n   \
         compiled in {:.2} ms -> {} bytes of PTX",
        nv.version_string(),
        ms(t_nvrtc_load),
        CUDA_SOURCE.trim().lines().count(),
        opts.to_args(),
        ms(t_compile),
        ptx.len()
    );
    if let Some(entry) = ptx.lines().find(|l| l.contains(".entry")) {
        say!(q, "     PTX entry: {}", entry.trim());
    }
    show(&rec);

    // The driver JIT-compiles the PTX to this GPU's machine code (SASS) and loads it.
    let t = Instant::now();
    let module = ctx.load_ptx(&ptx)?;
    let t_load = t.elapsed();
    let t = Instant::now();
    // SAFETY: the signature matches the CUDA declaration above: `a` and `b` are only read (the
    // seed declares them non-const, but the body never writes them), `c` is written, `n` is an
    // `int`; the kernel touches only indices `< n`, and the wrapper passes `n = a.len() = c.len()`
    // (checked equal to `b.len()`).
    let kernel: VectorAdd = unsafe { module.kernel("vector_add_kernel")? };
    let t_handle = t.elapsed();
    let attrs = kernel.function().attributes()?;
    say!(
        q,
        "\n3. load the PTX (cuModuleLoadData: the driver JIT-compiles it to SASS): {:.2} ms\n   \
         typed handle (cuModuleGetFunction + parameter check): {:.1} µs",
        ms(t_load),
        us(t_handle)
    );
    say!(
        q,
        "     kernel: {} registers/thread, {} B local memory, PTX ISA {}.{}, SASS sm_{}",
        attrs.registers,
        attrs.local_bytes,
        attrs.ptx_version / 10,
        attrs.ptx_version % 10,
        attrs.binary_version
    );
    show(&rec);

    // Tensors: a = randn(n), b = randn(n), moved to the GPU.
    let s = ctx.new_stream()?;
    let a_host = cuda_stack_kernels::reference::fill_normal(n, 1, 0);
    let b_host = cuda_stack_kernels::reference::fill_normal(n, 2, 0);
    let t = Instant::now();
    let a = s.clone_htod(&a_host)?;
    let b = s.clone_htod(&b_host)?;
    let t_h2d = t.elapsed();
    say!(
        q,
        "\n4. a, b = randn({n}) copied to the GPU (2 × alloc + H2D): {:.1} µs",
        us(t_h2d)
    );
    show(&rec);

    // The first call: allocation of c + launch, host-timed (submission only) and event-timed.
    s.synchronize()?;
    let timer = GpuTimer::new(&ctx)?;
    let mut first = None;
    let t_first_gpu = timer.time(&s, |s| -> Result<(), Box<dyn std::error::Error>> {
        let t = Instant::now();
        let c = vector_add_cuda(&kernel, s, &a, &b)?;
        first = Some((c, t.elapsed()));
        Ok(())
    })?;
    let (c, t_submit) = first.ok_or("the first call returned no result")?;
    say!(
        q,
        "\n5. c = vector_add_cuda(a, b), first call: host {:.1} µs to allocate c and queue the \
         launch;\n   GPU {:.1} µs (events around the memset of c and the kernel)",
        us(t_submit),
        us(t_first_gpu)
    );
    say!(
        q,
        "     grid {} × block 256 = {} threads for {n} elements",
        n.div_ceil(256),
        n.div_ceil(256) * 256
    );
    show(&rec);

    // Steady state: the kernel alone, repeated.
    let reps = args.common.pick(20, 200);
    let mut c2 = s.alloc_zeros::<f32>(n)?;
    let cfg = LaunchConfig::new(n.div_ceil(256) as u32, 256);
    let ni = n as i32;
    let mut gpu = Vec::with_capacity(reps);
    let mut host = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t_gpu = timer.time(&s, |s| -> cuda_stack_driver::Result<()> {
            let t = Instant::now();
            // SAFETY: the seed's kernel guards idx < N, and N is the length of a, b and c (they
            // all have a.len() elements).
            unsafe { kernel.launch(s, &cfg, &a, &b, &mut c2, ni) }?;
            host.push(us(t.elapsed()));
            Ok(())
        })?;
        gpu.push(us(t_gpu));
    }
    let (host_us, gpu_us) = (median(&host), median(&gpu));
    say!(
        q,
        "\n6. steady state, median of {reps} launches: host {host_us:.2} µs per launch call \
         (cuLaunchKernel),\n   GPU {gpu_us:.2} µs per kernel"
    );

    // Back to the host and check.
    let t = Instant::now();
    let got = s.clone_dtoh(&c)?;
    let got2 = s.clone_dtoh(&c2)?;
    let t_d2h = t.elapsed();
    drop(rec);
    let want = cuda_stack_kernels::reference::vector_add(&a_host, &b_host);
    same_bits("first call's c vs the CPU's a + b", &got, &want)?;
    same_bits("steady-state c vs the CPU's a + b", &got2, &want)?;
    say!(
        q,
        "\n7. c.cpu(): D2H of 2 × {n} floats {:.1} µs; all {n} elements equal the CPU's a + b \
         bit for bit",
        us(t_d2h)
    );
    say!(q, "   c[..3] = {:?}", &got[..got.len().min(3)]);
    if !q {
        println!(
            "\nPyTorch's load_inline runs nvcc and a C++ compiler and links a Python module \
             (tens of seconds,\ncached afterwards); NVRTC compiles in-process in the time shown \
             in step 2."
        );
    } else {
        let j = serde_json::json!({
            "program": "custom_kernel",
            "n": n,
            "context_ms": ms(t_ctx),
            "nvrtc_load_ms": ms(t_nvrtc_load),
            "nvrtc_compile_ms": ms(t_compile),
            "ptx_bytes": ptx.len(),
            "module_load_ms": ms(t_load),
            "first_call_submit_us": us(t_submit),
            "first_call_gpu_us": us(t_first_gpu),
            "launch_host_us": host_us,
            "kernel_gpu_us": gpu_us,
            "verified": true,
        });
        println!("{j}");
    }
    Ok(())
}
