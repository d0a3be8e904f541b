// Proves impossible: passing a `DeviceBuffer` by value where the kernel takes a slice reference
// (the buffer would be dropped, and freed, by the call while the kernel still runs on it).
use cuda_stack_driver::{DeviceSlice, Kernel, LaunchConfig, Result, Stream};

/// `saxpy(const float* x, float* y, float a, unsigned n)`.
type Saxpy = Kernel<(
    &'static DeviceSlice<f32>,
    &'static mut DeviceSlice<f32>,
    f32,
    u32,
)>;

fn launch(k: &Saxpy, stream: &Stream) -> Result<()> {
    let x = stream.alloc_zeros::<f32>(256)?;
    let mut y = stream.alloc_zeros::<f32>(256)?;
    let cfg = LaunchConfig::for_num_elems(256);
    // SAFETY: (beside the point here: the call must not compile at all)
    unsafe { k.launch(stream, &cfg, x, &mut y, 2.0, 256) }
}

fn main() {
    let _ = launch;
}
