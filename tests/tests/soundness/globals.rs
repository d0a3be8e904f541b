//! A module's `__device__` globals against running work and graph replays.

use super::*;

pub(crate) const GLOBAL_KERNELS: &str = r#"
__device__ float g_value;
extern "C" __global__ void slow_read_global(float* out, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    out[0] = g_value;
}
// Writes the pair in two halves with a spin between them: a read that overlaps a run sees
// x != y (a torn value).
__device__ int2 g_pair;
extern "C" __global__ void torn_write_global(long long cycles) {
    int v = g_pair.x + 1;
    g_pair.x = v;
    long long start = clock64();
    while (clock64() - start < cycles) { }
    g_pair.y = v;
}
"#;

/// Retries `f` while it is refused because another test of this binary is capturing (global
/// access waits for the whole context, which a capture in progress forbids).
pub(crate) fn retry_while_capturing<R>(
    f: impl Fn() -> cuda_stack_driver::Result<R>,
) -> Result<R, Box<dyn std::error::Error>> {
    for _ in 0..500 {
        match f() {
            Err(Error::Unsupported { .. }) => std::thread::sleep(Duration::from_millis(10)),
            r => return Ok(r?),
        }
    }
    Err("a capture never ended".into())
}

pub(crate) fn global_write_ordered() -> TestResult {
    let ctx = context()?;
    let a = ctx.new_stream()?;
    let b = ctx.new_stream()?;
    let m = load_cuda(&ctx, GLOBAL_KERNELS)?;
    let g = m.global::<f32>("g_value")?;
    // SAFETY: matches slow_read_global(float*, long long).
    let k: Kernel<(&mut DeviceSlice<f32>, i64)> = unsafe { m.kernel("slow_read_global")? };
    // Global access waits for the whole context, which is refused while another test of this
    // binary is capturing: retry until no capture is in progress.
    let retry =
        |f: &dyn Fn() -> cuda_stack_driver::Result<()>| -> TestResult { retry_while_capturing(f) };
    retry(&|| g.write(&a, &1.0))?;
    let mut out = b.alloc_zeros::<f32>(1)?;
    // SAFETY: one thread writes out[0]; `out` has one element.
    unsafe { k.launch(&b, &LaunchConfig::new(1, 1), &mut out, SLOW)? };
    retry(&|| g.write(&a, &2.0))?; // must wait for the kernel on `b`, which reads 1.0
    ensure!(
        b.clone_dtoh(&out)? == [1.0],
        "the write overtook a kernel reading the global"
    );
    let read = std::cell::Cell::new(0.0f32);
    retry(&|| g.read(&a).map(|v| read.set(v)))?;
    ensure!(read.get() == 2.0, "global value");
    Ok(())
}

/// Rule 3 for graphs: a replay of a captured kernel that writes a `__device__` global is queued
/// under the module's globals lock like a direct launch, so `DeviceGlobal::read` on another
/// thread never sees half of a replay's write. (Before the fix: most reads came back torn.)
pub(crate) fn global_read_vs_replay() -> TestResult {
    let ctx = context()?;
    let m = load_cuda(&ctx, GLOBAL_KERNELS)?;
    let g = m.global::<[i32; 2]>("g_pair")?;
    // SAFETY: matches torn_write_global(long long); it touches only the module's global.
    let k: Kernel<(i64,)> = unsafe { m.kernel("torn_write_global")? };
    let a = ctx.new_stream()?;
    retry_while_capturing(|| g.write(&a, &[0, 0]))?;
    let graph = ctx.capture(|s| {
        // SAFETY: one thread; the kernel touches only the global (no buffers, no bounds).
        unsafe { k.launch(s, &LaunchConfig::new(1, 1), SLOW / 10) }
    })?;
    let exec = graph.instantiate()?;
    drop(m); // the graph keeps the module (rule 2); `g` does too
    let replays = 40;
    let replayer = {
        let ctx = ctx.clone();
        std::thread::spawn(move || -> cuda_stack_driver::Result<()> {
            let s = ctx.new_stream()?;
            for _ in 0..replays {
                exec.launch(&s)?;
                std::thread::sleep(Duration::from_millis(1));
            }
            s.synchronize()
        })
    };
    let mut torn = Vec::new();
    let mut reads = 0;
    while !replayer.is_finished() {
        let v = retry_while_capturing(|| g.read(&a))?;
        reads += 1;
        if v[0] != v[1] {
            torn.push(v);
        }
    }
    replayer.join().map_err(|_| "replay thread panicked")??;
    let last = retry_while_capturing(|| g.read(&a))?;
    ensure!(
        torn.is_empty(),
        "{} of {reads} reads saw a replay's write half done: {torn:?}",
        torn.len()
    );
    ensure!(
        last == [replays, replays],
        "after {replays} replays the global is {last:?}"
    );
    Ok(())
}
