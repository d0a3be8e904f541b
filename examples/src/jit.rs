//! CUDA C compiled at run time: NVRTC to PTX for this context's GPU, loaded into the context
//! (where the driver JIT-compiles the PTX), and the kernel handle taken, timed as one step.

use cuda_stack_driver::nvrtc::{self, CompileOptions};
use cuda_stack_driver::{Context, Module};
use std::time::{Duration, Instant};

/// Compiles `source` (named `file_name` in NVRTC's messages) with
/// [`CompileOptions::for_context`] through the process's PTX cache
/// ([`nvrtc::compile_ptx_cached`]), loads it into `ctx`, and returns what `get` takes from the
/// module (typically a typed kernel: `|m| unsafe { m.kernel("name") }`, with the `SAFETY`
/// argument at the call site) and the host time of all three steps.
pub fn compile_and_load<K>(
    ctx: &Context,
    file_name: &str,
    source: &str,
    get: impl FnOnce(&Module) -> cuda_stack_driver::Result<K>,
) -> cuda_stack_driver::Result<(K, Duration)> {
    let t = Instant::now();
    let ptx = nvrtc::compile_ptx_cached(file_name, source, &CompileOptions::for_context(ctx))?;
    let module = ctx.load_ptx(&ptx)?;
    let got = get(&module)?;
    Ok((got, t.elapsed()))
}
