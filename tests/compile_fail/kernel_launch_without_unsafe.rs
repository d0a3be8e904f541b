// Proves impossible: launching a typed kernel without `unsafe`. Only the caller knows whether
// this grid and these scalars keep the kernel inside its buffers (here `n = 1 << 20` with
// 1-element buffers would write far past them), so the launch is an `unsafe` promise; safe code
// goes through checked wrappers (the ops of `cuda-stack-kernels`).
use cuda_stack_driver::{DeviceSlice, Kernel, LaunchConfig, Result, Stream};

/// `add(const float* a, const float* b, float* out, unsigned long long n)`.
type Add = Kernel<(
    &'static DeviceSlice<f32>,
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    u64,
)>;

fn launch(k: &Add, stream: &Stream) -> Result<()> {
    let a = stream.alloc_zeros::<f32>(1)?;
    let b = stream.alloc_zeros::<f32>(1)?;
    let mut out = stream.alloc_zeros::<f32>(1)?;
    let n = 1u64 << 20;
    k.launch(stream, &LaunchConfig::for_num_elems(n as usize), &a, &b, &mut out, n)
}

fn main() {
    let _ = launch;
}
